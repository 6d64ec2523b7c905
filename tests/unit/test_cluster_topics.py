"""Cluster topics without an LLM (distinctive terms) and the LLM answer's validation."""

import pytest

from ultron.heuristics import topics
from ultron.prompts.clusters import validate_label
from ultron.providers import RulesProvider

DOCKER = ["ModuleNotFoundError: no module named pandas in the docker container; add pandas and rebuild the image",
          "docker build fails: ModuleNotFoundError no module named numpy, rebuild the docker image",
          "the docker image lacks scipy (ModuleNotFoundError); pip install it in the Dockerfile"]
PYTHON_ELSEWHERE = ["pandas read_csv is slow on a large csv file", "numpy array broadcasting error in the model",
                    "a python script reads the csv with pandas"]


def docs(texts):
    return {f"m{i}": topics.terms(t) for i, t in enumerate(texts)}


def test_terms_keep_identifiers_and_drop_stop_words():
    t = topics.terms("The error: ModuleNotFoundError in pg_hba.conf, and the docker docker docker docker image")
    assert {"modulenotfounderror", "pg_hba.conf", "docker", "image", "error"} <= set(t)
    assert "the" not in t and "and" not in t and "in" not in t
    assert t["docker"] == topics.MAX_USES_PER_MEMORY


def test_labels_name_what_is_distinctive_against_the_store():
    store = docs(DOCKER + PYTHON_ELSEWHERE)
    label = topics.rules_labels({"c": ["m0", "m1", "m2"]}, store)["c"]
    terms = label.split(topics.SEPARATOR)
    assert terms[0] == "docker" and "modulenotfounderror" in terms and len(terms) == 3
    # pandas is used by only one member and elsewhere in the store: not this cluster's topic
    assert "pandas" not in terms


def test_labels_are_deterministic_and_ignore_member_order():
    store = docs(DOCKER + PYTHON_ELSEWHERE)
    a = topics.rules_labels({"c": ["m0", "m1", "m2"]}, store)
    b = topics.rules_labels({"c": ["m2", "m0", "m1"]}, dict(reversed(list(store.items()))))
    assert a == b


def test_one_word_is_not_listed_twice_in_another_form():
    assert not topics._same_word("docker", "pandas")
    assert topics._same_word("rebase", "rebasing") and topics._same_word("module", "modulenotfounderror")


def test_a_cluster_without_usable_words_gets_its_fallback():
    store = docs(["the and of", "to the a"])
    assert topics.rules_labels({"c": ["m0", "m1"]}, store, {"c": "first member"})["c"] == "first member"
    assert topics.rules_labels({"c": ["m0", "m1"]}, store)["c"] == "untitled"


def test_the_rules_provider_labels_from_the_texts_alone():
    label = RulesProvider().label_cluster(DOCKER)
    assert label.startswith("docker") and topics.SEPARATOR in label
    assert RulesProvider().label_cluster([]) == "untitled"


@pytest.mark.parametrize("answer,expected", [
    ({"topic": "Docker image dependencies"}, "Docker image dependencies"),
    ({"topic": '  "Pandas import errors."\n'}, "Pandas import errors"),
    ("postgres connection issues", "postgres connection issues"),
    ({"topic": "x" * 200}, "x" * 79 + "…"),
])
def test_llm_labels_are_cleaned(answer, expected):
    assert validate_label(answer) == expected


@pytest.mark.parametrize("answer", [{"topic": ""}, {"topic": "  ..  "}, {"label": "x"}, {"topic": 3}, None, []])
def test_unusable_llm_labels_are_rejected(answer):
    with pytest.raises(ValueError, match="topic"):
        validate_label(answer)
