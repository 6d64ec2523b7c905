"""The generated secret corpus (ultron.testing.secret_corpus): its size, breadth, determinism
and internal consistency. How well a redactor does on it is benchmarks/redaction.py's job."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from ultron.testing.secret_corpus import CONTEXTS, FAMILIES, FORMATS, generate


@pytest.fixture(scope="module")
def corpus():
    return generate(seed=0, samples_per_format=3)


def test_at_least_200_formats_with_unique_names_in_known_families():
    assert len(FORMATS) >= 200
    names = [f.name for f in FORMATS]
    assert len(names) == len(set(names))
    assert {f.family for f in FORMATS} == set(FAMILIES)


def test_every_family_has_cases(corpus):
    assert {c.family for c in corpus.secrets} == set(FAMILIES)


def test_at_least_three_samples_of_every_format(corpus):
    per_format = Counter(c.format for c in corpus.secrets)
    assert set(per_format) == {f.name for f in FORMATS}
    assert min(per_format.values()) >= 3


def test_samples_per_format_is_honoured():
    small = generate(seed=0, samples_per_format=1)
    assert Counter(c.format for c in small.secrets) == Counter({f.name: 1 for f in FORMATS})


def test_at_least_six_contexts(corpus):
    used = {c.context for c in corpus.secrets}
    assert used <= set(CONTEXTS)
    assert len(used) >= 6
    assert len({c.context for c in corpus.secrets if "\n" not in c.text}) >= 6  # single-line contexts alone


def test_every_secret_substring_occurs_in_its_text(corpus):
    for case in corpus.secrets:
        assert case.secrets, case
        for secret in case.secrets:
            assert secret and secret in case.text, (case.format, case.context)


def test_at_least_300_non_secrets_and_uuids_apart(corpus):
    assert len(corpus.non_secrets) >= 300
    assert len({c.text for c in corpus.non_secrets}) == len(corpus.non_secrets)
    assert all(c.expected == c.text for c in corpus.non_secrets)
    uuid_re = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)
    assert not any(uuid_re.search(c.text) for c in corpus.non_secrets)
    assert corpus.uuids
    for case in corpus.uuids:
        assert all(u in case.text for u in case.uuids)
        assert case.expected.count("<UUID>") == len(case.uuids)


def test_deterministic_per_seed(corpus):
    again = generate(seed=0, samples_per_format=3)
    assert again.secrets == corpus.secrets
    assert again.non_secrets == corpus.non_secrets
    assert again.uuids == corpus.uuids
    other = generate(seed=1, samples_per_format=3)
    assert [c.text for c in other.secrets] != [c.text for c in corpus.secrets]


def _luhn_ok(number: str) -> bool:
    digits = [int(d) for d in re.sub(r"\D", "", number)]
    total = sum(d if i % 2 == 0 else (d * 2 - 9 if d * 2 > 9 else d * 2) for i, d in enumerate(reversed(digits)))
    return total % 10 == 0


def test_checksummed_formats_are_valid(corpus):
    cards = [c for c in corpus.secrets if c.format.startswith("credit_card_")]
    ibans = [c for c in corpus.secrets if c.format.startswith("iban_")]
    assert cards and ibans
    assert all(_luhn_ok(c.secrets[0]) for c in cards)
    for case in ibans:
        iban = case.secrets[0].replace(" ", "")
        rearranged = iban[4:] + iban[:4]
        assert int("".join(str(int(ch, 36)) for ch in rearranged)) % 97 == 1, iban


def test_public_parts_belong_to_the_secret(corpus):
    """``public`` names the fixed parts of a format (a prefix, a DER header spanning PEM lines)."""
    for case in corpus.secrets:
        for public in case.public:
            assert public in "".join(case.secrets), (case.format, public)
