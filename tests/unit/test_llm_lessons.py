"""The same lesson shapes through an OpenAI-compatible model: the extraction prompt asks
for every shape with its type and fields, and each shape's answer goes through
validation into the candidate the memory gate reads (type, confirmed, confidence).
Run against the local fake HTTP server, with the real ``openai`` client."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from ultron.llm.errors import LLMInvalidAnswer
from ultron.memory import selection
from ultron.prompts.memory import EXTRACT_SYSTEM
from ultron.providers import OpenAIProvider
from ultron.sessions.parsing import SessionParser
from ultron.settings import Settings
from ultron.testing.fake_openai import FakeOpenAI, Reply
from ultron.testing.transcripts import FORMATS, load_specs, render_jsonl

DEV = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "lessons" / "dev"
SPECS = load_specs(DEV.glob("*.json"))
SHAPES = ("error_fix", "prose_fix", "correction", "preference", "general_lesson", "procedure", "security")


@pytest.fixture(scope="module")
def server():
    with FakeOpenAI() as fake:
        yield fake


def provider(server) -> OpenAIProvider:
    return OpenAIProvider(Settings.from_env({}, llm_provider="openai", llm_base_url=server.url, llm_api_key="k",
                                            llm_max_retries=0, llm_retry_base_seconds=0.01))


def test_prompt_names_every_shape_type_and_field():
    for word in ("error", "correction", "preference", "security", "pattern", "life", "confirmed", "context",
                 "resolution", "when it applies", "stated generally", "<user_id>", "sleep 5"):
        assert word in EXTRACT_SYSTEM


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("shape", SHAPES)
def test_each_shape_goes_through_validation(server, shape, fmt):
    spec = next(s for s in SPECS if s["shape"] == shape and s["format"] == fmt)
    messages = list(SessionParser().messages(io.BytesIO(render_jsonl(spec, fmt).encode("utf-8"))))
    answer = {"memories": [{
        "type": spec["type"], "content": spec["lesson"], "context": "when it applies",
        "resolution": "what to do", "tags": ["Lesson"], "kind": "procedural", "tools_used": [],
        "confirmed": True, "confidence": 0.9}]}
    server.script(Reply.text("Here are the lessons:\n```json\n" + json.dumps(answer) + "\n```"))
    [mem] = provider(server).extract_memories(messages, "code")
    assert mem["type_hint"] == spec["type"] and mem["confirmed"] is True and mem["tags"] == ["lesson"]
    # the transcript the model saw holds the session's words
    sent = server.requests[-1]["messages"][1]["content"]
    assert spec["key_terms"][0].lower() in sent.lower() or spec["turns"][0]["text"][:20] in sent
    # a confirmed lesson from a low-scoring segment passes the gate; an unconfirmed one does not
    settings = Settings.from_env({})
    low = {"overall_score": 0.2, "teaches_lesson": True}
    assert selection.select([mem], low, settings) == [mem]
    assert selection.select([{**mem, "confirmed": False}], low, settings) == []


def test_bad_answers_are_rejected_or_normalised(server):
    p = provider(server)
    msgs = list(SessionParser().messages(io.BytesIO(render_jsonl(SPECS[0], "openai").encode())))
    server.script(Reply.json({"memories": [{"type": "made-up", "content": "x", "confirmed": "yes"}]}))
    [mem] = p.extract_memories(msgs, None)
    assert mem["type_hint"] is None and mem["confirmed"] is False     # classified later; not confirmed
    server.script(*[Reply.json({"memories": [{"type": "error", "content": ""}]})] * 3)
    with pytest.raises(LLMInvalidAnswer, match="memory extraction"):
        p.extract_memories(msgs, None)
