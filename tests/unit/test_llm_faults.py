"""Replies that are not what the API promises: each ends as LLMUnavailable or LLMInvalidAnswer.

Before issue 14 a 200 with a truncated JSON body escaped as ``json.JSONDecodeError`` and a
200 with a proxy's HTML page as ``AttributeError`` ('str' object has no attribute 'choices'),
either of which aborted a whole maintenance run."""

import random

import numpy as np
import pytest

from ultron.embeddings.remote import OpenAIEmbedder
from ultron.llm.client import ChatJSONClient
from ultron.llm.errors import LLMInvalidAnswer, LLMUnavailable
from ultron.llm.jsonparse import NoJSON, parse_lenient
from ultron.prompts.segmentation import validate_cover
from ultron.testing.fake_openai import FakeOpenAI, Reply

TASKS = {"tasks": [{"start": 1, "end": 2, "topic": "csv"}, {"start": 3, "end": 4, "topic": "docker"}]}


@pytest.fixture
def server():
    with FakeOpenAI() as fake:
        yield fake


def client(server, **kw):
    return ChatJSONClient(base_url=server.url, api_key="k", model="fake-model", timeout_seconds=2.0,
                          max_retries=kw.pop("max_retries", 3), retry_base_seconds=0.01,
                          sleep=kw.pop("sleep", lambda s: None), **kw)


def ask(c):
    return c.complete_json("Answer JSON", "split this", lambda v: validate_cover(v, 4), purpose="test")


def test_html_200_from_a_proxy_is_retried_instead_of_raising_attributeerror(server):
    server.script(Reply.html(), Reply.json(TASKS))
    c = client(server)
    assert len(ask(c)) == 2
    assert server.calls == 2 and c.usage.retries == 1 and c.usage.calls == 1


def test_truncated_json_body_is_retried_instead_of_raising_jsondecodeerror(server):
    server.script(Reply.cut(TASKS, 0.6), Reply.json(TASKS))
    c = client(server)
    assert len(ask(c)) == 2
    assert server.calls == 2 and c.usage.retries == 1


def test_garbled_bodies_that_persist_raise_unavailable_and_count_one_failure(server):
    server.script(Reply.html(), Reply.cut(TASKS), Reply.body(b"\xff\xfe\x00garbage"), Reply.body("[1, 2]"))
    c = client(server)
    with pytest.raises(LLMUnavailable, match="garbled response"):
        ask(c)
    assert server.calls == 4 and c.usage.failures == 1 and c.usage.retries == 3


def test_answer_cut_off_at_the_token_limit_is_invalid_and_not_repaired(server):
    cut = '{"tasks": [{"start": 1, "end": 2, "topic": "csv"}, {"start": 3, "end": 4'
    server.script(Reply(content=cut, finish_reason="length"), Reply(content=cut, finish_reason="length"))
    c = client(server)
    with pytest.raises(LLMInvalidAnswer, match="finish_reason=length"):
        ask(c)
    assert server.calls == 2 and c.usage.failures == 2 and c.usage.calls == 2


@pytest.mark.parametrize("payload", [
    {"id": "x", "object": "chat.completion", "choices": []},
    {"id": "x", "object": "chat.completion"},
    {"id": "x", "object": "chat.completion", "choices": [{"index": 0, "finish_reason": "stop"}]},
    {"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant"}}]},
    {"id": "x", "object": "chat.completion", "choices": "nope", "usage": {"prompt_tokens": "many"}},
])
def test_completion_missing_choices_message_or_content_is_reasked_then_invalid(server, payload):
    server.script(Reply.raw(payload), Reply.json(TASKS))
    c = client(server)
    assert len(ask(c)) == 2 and c.usage.failures == 1
    server.script(Reply.raw(payload), Reply.raw(payload))
    with pytest.raises(LLMInvalidAnswer):
        ask(c)


@pytest.mark.parametrize("almost", [
    '{"tasks": [{"start": 1, "end": 2, "topic": "csv"}, {"start": 3, "end": 4, "topic": "docker"},],}',
    "{'tasks': [{'start': 1, 'end': 2, 'topic': 'csv'}, {'start': 3, 'end': 4, 'topic': 'docker'}]}",
    '```json\n{\n  // two tasks\n  "tasks": [{"start": 1, "end": 2, "topic": "csv"},  // the first\n'
    '            {"start": 3, "end": 4, "topic": "docker"}]\n}\n```',
])
def test_almost_json_answers_are_repaired(server, almost):
    server.script(Reply.text(almost))
    c = client(server)
    assert [(t.start, t.end) for t in ask(c)] == [(1, 2), (3, 4)]
    assert c.usage.failures == 0 and server.calls == 1


def test_repair_never_turns_prose_into_an_answer():
    for prose in ("I cannot help with that.", "nope", "<html><body>502</body></html>"):
        with pytest.raises(NoJSON):
            parse_lenient(prose)
    with pytest.raises(NoJSON):
        parse_lenient('{"a": [1, 2', repair=False)


def test_backoff_has_full_jitter_and_still_honours_retry_after(server):
    from ultron.llm.retry import full_jitter

    random.seed(7)
    waits = [full_jitter(1.0) for _ in range(200)]
    assert all(0 <= w <= 1.0 for w in waits) and len(set(waits)) > 150
    slept = []
    server.script(*[Reply.http(500)] * 6, Reply.http(429, **{"retry-after": "0.3"}), Reply.json(TASKS))
    c = client(server, max_retries=7, sleep=slept.append)
    assert len(ask(c)) == 2
    assert slept[-1] == 0.3
    assert all(0 <= s <= 0.01 * 2 ** i for i, s in enumerate(slept[:-1]))


def test_embeddings_html_200_truncated_body_and_wrong_shape_are_retried_then_unavailable(server):
    e = OpenAIEmbedder(base_url=server.url, api_key="k", model="emb", dim=384, max_retries=3,
                       retry_base_seconds=0.01, sleep=lambda s: None)
    server.script(Reply.html(), Reply.body('{"object": "list", "data": [{"embedding": [0.1,'), Reply.body("[]"))
    assert e.embed(["hello"]).shape == (1, 384) and e.usage.retries == 3
    server.script(*[Reply.html()] * 4)
    with pytest.raises(LLMUnavailable, match="garbled response"):
        e.embed(["hello"])
    server.script(Reply.raw({"object": "list", "data": 5}))
    with pytest.raises(LLMInvalidAnswer):
        e.embed(["hello"])
    server.script(Reply.raw({"object": "list", "data": [{"index": 0, "embedding": "!!not base64"}]}))
    with pytest.raises(LLMInvalidAnswer):
        e.embed(["hello"])
    assert np.isfinite(e.embed(["hello"])).all()
