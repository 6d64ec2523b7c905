"""The one LLM → rules fallback: an outage or a garbage answer still gets the task done
offline, the caller can tell who answered, and every fallback is counted."""

import logging

import pytest

from ultron.llm.errors import LLMUnavailable
from ultron.providers import FallbackProvider, OpenAIProvider, RulesProvider
from ultron.settings import Settings
from ultron.testing.fake_openai import FakeOpenAI, Reply
from ultron.vocabulary import MEMORY_TYPES

BODY = ("ModuleNotFoundError: No module named 'pandas'", "python script in a Docker image",
        "add pandas to requirements.txt and rebuild the image")


@pytest.fixture
def server():
    with FakeOpenAI() as fake:
        yield fake


def llm(server) -> OpenAIProvider:
    return OpenAIProvider(Settings.from_env({}, llm_provider="openai", llm_base_url=server.url, llm_api_key="k",
                                            llm_max_retries=1, llm_retry_base_seconds=0.01))


def test_the_llm_answers_when_it_can(server):
    server.script(Reply.json({"memory_type": "error"}))
    fb = FallbackProvider(llm(server))
    answer = fb.run("classify_memory", *BODY, ["python"])
    assert (answer.value, answer.by, answer.fell_back) == ("error", "openai", False)
    assert fb.fallbacks == {} and server.calls == 1


def test_an_outage_falls_back_to_the_rules_and_is_counted(server, caplog):
    server.script(*[Reply.http(503)] * 4)
    fb = FallbackProvider(llm(server))
    with caplog.at_level(logging.WARNING, logger="ultron.providers"):
        l0, l1 = fb.summarize(*BODY)
    assert l0 == RulesProvider().summarize(*BODY)[0] and l1
    assert fb.fallbacks["summarize"] == 1
    assert any("summaries by rules" in r.getMessage() for r in caplog.records)


def test_a_garbage_answer_falls_back_like_an_outage(server):
    server.script(*[Reply.text("I'd rather not say.")] * 4)
    fb = FallbackProvider(llm(server))
    answer = fb.run("classify_memory", *BODY, [])
    assert answer.by == "rules" and answer.fell_back and answer.value in MEMORY_TYPES
    assert fb.usage.failures >= 1          # the provider's own usage still shows the failed call


def test_every_task_of_the_interface_goes_through_the_fallback(server):
    server.script(*[Reply.http(503)] * 40)
    fb = FallbackProvider(llm(server))
    a = dict(zip(("content", "context", "resolution"), BODY))
    assert fb.same_memory(a, a) is True
    assert fb.merge_memories(a, a)["content"]
    assert fb.label_cluster(["pandas missing in docker", "pandas import fails in the image"])
    assert fb.synthesize_skill("docker imports", [{"id": "m1", "memory_type": "error", **a}])["name"]
    assert fb.extract_from_text("Error: pandas missing. Fix: pip install pandas.") is not None
    assert set(fb.fallbacks) == {"same_memory", "merge_memories", "label_cluster", "synthesize_skill",
                                 "extract_from_text"}


def test_with_the_rules_configured_there_is_nothing_to_fall_back_from():
    fb = FallbackProvider(RulesProvider())
    assert fb.rules is fb.primary and fb.name == "rules"
    assert fb.run("classify_memory", *BODY, []).fell_back is False


def test_the_rules_own_failure_is_not_hidden():
    class Broken(RulesProvider):
        def summarize(self, content, context, resolution):
            raise LLMUnavailable("offline provider broke")

    with pytest.raises(LLMUnavailable):
        FallbackProvider(Broken()).summarize(*BODY)
