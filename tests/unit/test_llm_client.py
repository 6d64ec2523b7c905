"""The real openai client against a local fake OpenAI-compatible server."""

import pytest

from ultron.llm.client import ChatJSONClient
from ultron.llm.errors import LLMInvalidAnswer, LLMUnavailable
from ultron.llm.jsonparse import NoJSON, parse_lenient
from ultron.prompts.judge import validate_rubric
from ultron.prompts.segmentation import validate_cover
from ultron.providers import OpenAIProvider
from ultron.sessions.messages import Message
from ultron.settings import Settings
from ultron.testing.fake_openai import FakeOpenAI, Reply

TASKS = {"tasks": [{"start": 1, "end": 2, "topic": "csv"}, {"start": 3, "end": 4, "topic": "docker"}]}
WINDOW = [Message("user", "How do I read a CSV in Python?", line=1), Message("assistant", "pandas.read_csv()", line=2),
          Message("user", "Write me a Docker compose file", line=3), Message("assistant", "services: {}", line=4)]


@pytest.fixture
def server():
    with FakeOpenAI() as fake:
        yield fake


def client(server, **kw):
    return ChatJSONClient(base_url=server.url, api_key="test-key", model="fake-model",
                          timeout_seconds=kw.pop("timeout", 2.0), max_retries=kw.pop("max_retries", 3),
                          retry_base_seconds=0.01, **kw)


def ask(c):
    return c.complete_json("Answer JSON", "split this", lambda v: validate_cover(v, 4), purpose="test")


def test_good_json(server):
    server.script(Reply.json(TASKS))
    c = client(server)
    assert [(t.start, t.end, t.topic) for t in ask(c)] == [(1, 2, "csv"), (3, 4, "docker")]
    body = server.requests[0]
    assert body["model"] == "fake-model" and body["response_format"] == {"type": "json_object"}
    assert c.usage.calls == 1 and c.usage.prompt_tokens > 0 and c.usage.failures == 0


@pytest.mark.parametrize("wrapped", [
    "Sure! Here is the split:\n```json\n" + '{"tasks": [{"start": 1, "end": 4, "topic": "all"}]}' + "\n```\nHope it helps.",
    'The answer is {"tasks": [{"start": 1, "end": 4, "topic": "all"}]} as requested.',
    '<think>hmm</think>[{"start": 1, "end": 4, "topic": "all"}]',
])
def test_prose_wrapped_json_is_extracted(server, wrapped):
    server.script(Reply.text(wrapped))
    assert [(t.start, t.end) for t in ask(client(server))] == [(1, 4)]


def test_garbage_is_retried_once_then_reported(server):
    server.script(Reply.text("I cannot help with that."), Reply.json(TASKS))
    c = client(server)
    assert len(ask(c)) == 2
    assert c.usage.calls == 2 and c.usage.failures == 1
    server.script(Reply.text("nope"), Reply.text(""))
    with pytest.raises(LLMInvalidAnswer, match="2 attempts"):
        ask(c)


def test_an_answer_that_is_not_a_cover_counts_as_invalid(server):
    server.script(Reply.json({"tasks": [{"start": 1, "end": 2}, {"start": 4, "end": 4}]}),
                  Reply.json({"tasks": [{"start": 1, "end": 3}]}))
    c = client(server)
    with pytest.raises(LLMInvalidAnswer, match="cover|end at"):
        ask(c)
    assert server.calls == 2 and c.usage.failures == 2


def test_empty_answer(server):
    server.script(Reply.text(""), Reply(content=None))
    with pytest.raises(LLMInvalidAnswer, match="empty answer"):
        ask(client(server))


def test_429_and_500_are_retried_with_backoff(server):
    slept = []
    server.script(Reply.http(429, "slow down", **{"retry-after": "0.05"}), Reply.http(500), Reply.http(503),
                  Reply.json(TASKS))
    c = client(server, sleep=slept.append)
    assert len(ask(c)) == 2
    assert c.usage.retries == 3 and c.usage.calls == 1
    # Retry-After honoured, then exponential backoff with full jitter (at most 0.01 * 2**n)
    assert slept[0] == 0.05 and len(slept) == 3 and 0 <= slept[1] <= 0.02 and 0 <= slept[2] <= 0.04


def test_persistent_outage_raises_unavailable(server):
    server.script(*[Reply.http(500)] * 4)
    c = client(server, max_retries=3, sleep=lambda s: None)
    with pytest.raises(LLMUnavailable, match="InternalServerError"):
        ask(c)
    assert server.calls == 4 and c.usage.failures == 1


def test_timeouts_are_retried_then_reported(server):
    server.script(Reply.stall(1.0), Reply.json(TASKS))
    c = client(server, timeout=0.3, sleep=lambda s: None)
    assert len(ask(c)) == 2 and c.usage.retries == 1
    server.script(Reply.stall(1.0), Reply.stall(1.0))
    c = client(server, timeout=0.3, max_retries=1, sleep=lambda s: None)
    with pytest.raises(LLMUnavailable, match="Timeout"):
        ask(c)


def test_unreachable_endpoint_is_unavailable():
    c = ChatJSONClient(base_url="http://127.0.0.1:9/v1", api_key="k", model="m", timeout_seconds=0.5,
                       max_retries=1, retry_base_seconds=0.01)
    with pytest.raises(LLMUnavailable, match="APIConnectionError"):
        ask(c)


def test_servers_without_json_mode_are_asked_again_without_it():
    with FakeOpenAI(reject_json_mode=True) as server:
        server.script(Reply.json(TASKS), Reply.json(TASKS))
        c = client(server)
        assert len(ask(c)) == 2 and not c.json_mode
        assert len(ask(c)) == 2
        assert [("response_format" in r) for r in server.requests] == [True, False, False]


def test_client_errors_are_not_retried(server):
    server.script(Reply.http(401, "bad key"))
    with pytest.raises(LLMUnavailable, match="HTTP 401"):
        ask(client(server))
    assert server.calls == 1


def test_provider_uses_the_quality_model_for_the_judge(server):
    settings = Settings.from_env({}, llm_provider="openai", llm_base_url=server.url, llm_api_key="k",
                                 llm_model="main-model", quality_llm_model="judge-model", llm_retry_base_seconds=0.01)
    provider = OpenAIProvider(settings)
    server.script(Reply.json(TASKS), Reply.json({"goal_achieved": 1, "correctness": 0.9, "efficiency": 0.8,
                                                 "safety": 1, "rationale": "done"}))
    assert len(provider.segment(WINDOW)) == 2
    rubric = provider.judge(WINDOW)
    assert rubric["correctness"] == 0.9 and rubric["rationale"] == "done"
    assert [r["model"] for r in server.requests] == ["main-model", "judge-model"]
    assert "[1] user: How do I read a CSV" in server.requests[0]["messages"][1]["content"]
    assert provider.usage.calls == 2


def test_lenient_parser_and_validators():
    assert parse_lenient('```\n{"a": 1}\n```') == {"a": 1}
    with pytest.raises(NoJSON):
        parse_lenient("no json here")
    with pytest.raises(ValueError):
        validate_rubric({"goal_achieved": 2, "correctness": 1, "efficiency": 1, "safety": 1})
    with pytest.raises(ValueError):
        validate_cover({"tasks": [{"start": "1", "end": 4}]}, 4)
    assert len(validate_cover([{"start": 1, "end": 4}], 4)) == 1
