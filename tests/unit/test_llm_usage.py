"""LLM usage counted per model and task, and handed out exactly once for the store
(``LLMUsage.take_unrecorded``), against the real client and the fake OpenAI server."""

import threading

import pytest

from ultron.llm.usage import LLMUsage, TaskUsage
from ultron.providers import FallbackProvider, OpenAIProvider, RulesProvider
from ultron.settings import Settings
from ultron.testing.fake_openai import FakeOpenAI, Reply

BODY = ("ModuleNotFoundError: No module named 'pandas'", "python script in a Docker image",
        "add pandas to requirements.txt and rebuild the image")
GRADE = {"goal_achieved": 1, "correctness": 1, "efficiency": 1, "safety": 1}


@pytest.fixture
def server():
    with FakeOpenAI() as fake:
        yield fake


def llm(server, **overrides) -> OpenAIProvider:
    return OpenAIProvider(Settings.from_env({}, llm_provider="openai", llm_base_url=server.url, llm_api_key="k",
                                            llm_model="main-model", llm_max_retries=1, llm_retry_base_seconds=0.01,
                                            **overrides))


def test_calls_and_tokens_are_counted_per_model_and_task(server):
    provider = llm(server, quality_llm_model="judge-model")
    server.script(Reply.json({"memory_type": "error"}), Reply.json(GRADE), Reply.json({"memory_type": "error"}))
    provider.classify_memory(*BODY, ["python"])
    provider.judge([])
    provider.classify_memory(*BODY, [])
    usage = provider.usage
    assert set(usage.by_task) == {("main-model", "classify_memory"), ("judge-model", "judge")}
    classify, judge = usage.by_task[("main-model", "classify_memory")], usage.by_task[("judge-model", "judge")]
    assert (classify.calls, judge.calls) == (2, 1) == (2, usage.calls - 2)
    assert classify.prompt_tokens > 0 and classify.completion_tokens > 0
    assert classify.prompt_tokens + judge.prompt_tokens == usage.prompt_tokens
    assert classify.completion_tokens + judge.completion_tokens == usage.completion_tokens


def test_retries_failures_and_fallbacks_land_on_the_task_that_had_them(server):
    fb = FallbackProvider(llm(server))
    server.script(Reply.http(503), Reply.http(503))            # an outage: one retry, then the rules
    fb.summarize(*BODY)
    server.script(*[Reply.text("no JSON here")] * 2)           # garbage twice: invalid, then the rules
    fb.run("classify_memory", *BODY, [])
    usage = fb.usage
    summarize, classify = usage.by_task[("main-model", "summarize")], usage.by_task[("main-model", "classify_memory")]
    assert (summarize.calls, summarize.retries, summarize.failures, summarize.fallbacks) == (0, 1, 1, 1)
    assert (classify.calls, classify.failures, classify.fallbacks) == (2, 2, 1)
    assert usage.fallbacks == 2 == sum(fb.fallbacks.values()) and usage.failures == 3 and usage.retries == 1


def test_the_rules_count_nothing():
    fb = FallbackProvider(RulesProvider())
    fb.summarize(*BODY)
    fb.classify_memory(*BODY, [])
    assert fb.usage.by_task == {} and fb.usage.take_unrecorded() == {}


def test_take_unrecorded_hands_each_count_out_once():
    usage = LLMUsage()
    usage.record_call(10, 2, model="m", task="summarize")
    usage.record_fallback(model="m", task="classify_memory")
    first = usage.take_unrecorded()
    assert first == {("m", "summarize"): TaskUsage(calls=1, prompt_tokens=10, completion_tokens=2),
                     ("m", "classify_memory"): TaskUsage(fallbacks=1)}
    assert usage.take_unrecorded() == {}
    usage.record_call(5, 1, model="m", task="summarize")
    second = usage.take_unrecorded()
    assert second == {("m", "summarize"): TaskUsage(calls=1, prompt_tokens=5, completion_tokens=1)}
    usage.give_back(second)                                    # the store did not take it
    usage.record_retry(model="m", task="summarize")
    assert usage.take_unrecorded() == {("m", "summarize"): TaskUsage(calls=1, prompt_tokens=5, completion_tokens=1,
                                                                     retries=1)}
    assert usage.calls == 2 and usage.fallbacks == 1           # the run's own totals never reset


def test_takes_from_many_threads_add_up_to_what_was_counted():
    usage = LLMUsage()
    taken: list[TaskUsage] = []
    lock = threading.Lock()

    def work(n: int) -> None:
        for i in range(500):
            usage.record_call(3, 1, model="m", task=f"t{i % 3}")
            if i % 50 == n:
                got = usage.take_unrecorded()
                with lock:
                    taken.extend(got.values())

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    taken.extend(usage.take_unrecorded().values())
    assert sum(t.calls for t in taken) == 8 * 500 == usage.calls
    assert sum(t.prompt_tokens for t in taken) == 3 * 8 * 500


def test_since_and_snapshot_carry_the_breakdown():
    usage = LLMUsage()
    usage.record_call(1, 1, model="m", task="a")
    before = usage.snapshot()
    usage.record_call(2, 2, model="m", task="b")
    usage.record_fallback(model="m", task="a")
    delta = usage.since(before)
    assert delta.calls == 1 and delta.fallbacks == 1
    assert delta.by_task == {("m", "b"): TaskUsage(calls=1, prompt_tokens=2, completion_tokens=2),
                             ("m", "a"): TaskUsage(fallbacks=1)}
    assert before.by_task == {("m", "a"): TaskUsage(calls=1, prompt_tokens=1, completion_tokens=1)}
    assert usage.to_dict()["fallbacks"] == 1
