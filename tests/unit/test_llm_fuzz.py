"""Fuzz: the LLM transport against a server answering random garbage.

Whatever comes back (any status, random bytes, HTML, truncated JSON, JSON of the wrong
shape, the wrong content type, ``finish_reason=length``, an empty body, a slow reply
within the timeout), the client returns a validated value or raises LLMUnavailable /
LLMInvalidAnswer, never anything else: before issue 14, JSONDecodeError and
AttributeError escaped and aborted maintenance runs."""

import json
import random

import numpy as np
import pytest

from ultron.embeddings.remote import OpenAIEmbedder
from ultron.llm.client import ChatJSONClient
from ultron.llm.errors import LLMInvalidAnswer, LLMUnavailable
from ultron.prompts.segmentation import validate_cover
from ultron.testing.fake_openai import FakeOpenAI, Reply

SEED = 20261127
GOOD = {"tasks": [{"start": 1, "end": 4, "topic": "all"}]}
CONTENT_TYPES = ["application/json", "text/html", "text/plain", "application/octet-stream", "",
                 "application/json; charset=utf-8", "application/problem+json"]
STATUSES = [200, 200, 200, 201, 204, 301, 400, 401, 403, 404, 408, 409, 413, 422, 429, 500, 502, 503, 504, 529]


def completion(content, finish="stop", **extra):
    return {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": finish, "message": {"role": "assistant", "content": content}}],
            **extra}


def garbage(rng: random.Random) -> Reply:
    """One random reply; some are good, so the fuzz also sees successes."""
    kind = rng.randrange(14)
    if kind == 0:
        return Reply.json(GOOD)
    if kind == 1:
        return Reply.http(rng.choice(STATUSES[6:]), "fuzz", **({"retry-after": rng.choice(["0", "x", "-1", "1e9"])}
                                                             if rng.random() < 0.3 else {}))
    if kind == 2:
        return Reply.body(rng.randbytes(rng.randrange(0, 200)), rng.choice(CONTENT_TYPES), rng.choice(STATUSES))
    if kind == 3:
        return Reply.html()
    if kind == 4:
        return Reply.cut(GOOD, rng.random())
    if kind == 5:
        shape = rng.choice([[], [1, 2], "str", 42, None, {"choices": None}, {"choices": [None]},
                            {"choices": [{"message": "hi"}]}, {"choices": [{"message": {"content": 7}}]},
                            {"data": []}, completion(json.dumps(GOOD), usage={"prompt_tokens": "lots"})])
        return Reply.raw(shape if shape is not None else "null")
    if kind == 6:
        return Reply.body(json.dumps(completion(json.dumps(GOOD))), rng.choice(CONTENT_TYPES))
    if kind == 7:
        text = json.dumps(GOOD)
        return Reply(content=text[: rng.randrange(len(text))], finish_reason="length")
    if kind == 8:
        return Reply.body(b"", rng.choice(CONTENT_TYPES), rng.choice([200, 500]))
    if kind == 9:
        return Reply.stall(rng.uniform(0.01, 0.1), Reply.json(GOOD))
    if kind == 10:
        return Reply.text(rng.choice(["", "I cannot help", "{'tasks': [{'start': 1, 'end': 4,}]}", "[",
                                      "{" * 5000, "```json\n{\"tasks\": 5}\n```", "null", "[[[]]]"]))
    if kind == 11:
        return Reply.json(rng.choice([{"tasks": []}, {"tasks": [{"start": "1", "end": 4}]}, [1], {"x": {}},
                                      [{"start": 1, "end": 4, "topic": None}]]))
    if kind == 12:
        return Reply.raw(completion(None, rng.choice(["stop", "length", None, 3])))
    return Reply.raw(completion(json.dumps(GOOD), finish=rng.choice(["stop", "length", "content_filter"])))


def test_chat_client_under_random_garbage_only_returns_valid_answers_or_llm_errors():
    rng = random.Random(SEED)
    outcomes = {"ok": 0, "unavailable": 0, "invalid": 0}
    with FakeOpenAI(responder=lambda body: garbage(rng)) as server:
        c = ChatJSONClient(base_url=server.url, api_key="k", model="m", timeout_seconds=1.0, max_retries=2,
                           retry_base_seconds=0.0, sleep=lambda s: None)
        while server.calls < 400:
            try:
                tasks = c.complete_json("Answer JSON", "split", lambda v: validate_cover(v, 4), purpose="fuzz")
            except LLMUnavailable:
                outcomes["unavailable"] += 1
            except LLMInvalidAnswer:
                outcomes["invalid"] += 1
            else:
                assert [(t.start, t.end) for t in tasks] == [(1, 4)]
                outcomes["ok"] += 1
    assert all(outcomes.values()), outcomes  # every outcome was reached
    assert c.usage.failures >= outcomes["unavailable"] + outcomes["invalid"]
    assert c.usage.calls >= outcomes["ok"]


def embedding_garbage(rng: random.Random) -> Reply:
    kind = rng.randrange(8)
    if kind == 0:
        return Reply.json({})  # content replies mean "the default vectors"
    if kind == 1:
        return Reply.http(rng.choice(STATUSES[6:]))
    if kind == 2:
        return Reply.body(rng.randbytes(rng.randrange(0, 120)), rng.choice(CONTENT_TYPES), rng.choice(STATUSES))
    if kind == 3:
        return Reply.html()
    if kind == 4:
        whole = json.dumps({"object": "list", "data": [{"index": 0, "embedding": [0.5] * 8}]})
        return Reply.body(whole[: rng.randrange(len(whole))])
    if kind == 5:
        return Reply.raw(rng.choice([[], "x", 3, {"data": "abc"}, {"data": [None]}, {"data": [{"embedding": "%%"}]},
                                     {"data": [{"index": 0, "embedding": [1.0] * 7}]},
                                     {"data": [{"index": 0, "embedding": [float("nan")] * 8}]},
                                     {"data": [{"index": 9, "embedding": [1.0] * 8}]},
                                     {"data": [{"index": 0, "embedding": [0.0] * 8}], "usage": {"prompt_tokens": []}}]))
    if kind == 6:
        return Reply.stall(rng.uniform(0.01, 0.1))
    return Reply.body(b"", rng.choice(CONTENT_TYPES))


def test_embedder_under_random_garbage_only_returns_unit_vectors_or_llm_errors():
    rng = random.Random(SEED + 1)
    outcomes = {"ok": 0, "unavailable": 0, "invalid": 0}
    with FakeOpenAI(embedding_dim=8) as server:
        e = OpenAIEmbedder(base_url=server.url, api_key="k", model="emb", dim=8, timeout_seconds=1.0,
                           max_retries=2, retry_base_seconds=0.0, sleep=lambda s: None)
        while server.calls < 300:
            server.script(*[embedding_garbage(rng) for _ in range(3)])
            try:
                m = e.embed(["some text"])
            except LLMUnavailable:
                outcomes["unavailable"] += 1
            except LLMInvalidAnswer:
                outcomes["invalid"] += 1
            else:
                assert m.shape == (1, 8) and np.allclose(np.linalg.norm(m, axis=1), 1, atol=1e-5)
                outcomes["ok"] += 1
            with server._lock:
                server._script.clear()  # replies this embed did not use
    assert all(outcomes.values()), outcomes


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_chat_client_garbage_with_other_seeds(seed):
    rng = random.Random(seed)
    with FakeOpenAI(responder=lambda body: garbage(rng)) as server:
        c = ChatJSONClient(base_url=server.url, api_key="k", model="m", timeout_seconds=1.0, max_retries=1,
                           retry_base_seconds=0.0, sleep=lambda s: None)
        while server.calls < 100:
            try:
                c.complete_json("Answer JSON", "split", lambda v: validate_cover(v, 4), purpose="fuzz")
            except (LLMUnavailable, LLMInvalidAnswer):
                pass
