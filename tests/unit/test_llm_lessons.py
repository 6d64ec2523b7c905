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
from ultron.vocabulary import LESSON_SHAPE_TYPES

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
                 "resolution", "when it applies", "stated generally", "<user_id>", "sleep 5", *SHAPES):
        assert word in EXTRACT_SYSTEM
    for shape, typ in LESSON_SHAPE_TYPES.items():
        assert f"{shape} -> {typ}" in EXTRACT_SYSTEM


def test_prompt_carries_the_scoping_rules():
    """Whose knowledge: the principal's wishes are preferences, a third party's never are; a
    business rule the agent applies is a pattern; a harness's standing text is no lesson."""
    text = " ".join(EXTRACT_SYSTEM.split())
    for phrase in ("principal is the person the agent works for", "third party", "customer in a support session",
                   "never lessons", "arrive unchanged at the start of every run", "business rule the agent applies is a",
                   "standing wish is a preference", "whether or not the task succeeded"):
        assert phrase in text, phrase


def _support_session() -> list:
    from tests.messages import call, result, say, user

    return [user("Hi, I need to change my flight. I prefer aisle seats, always book aisle for me."),
            call("update_reservation_flights", {"reservation_id": "ABC123", "cabin": "basic_economy"}, "c1"),
            result("c1", "Error: basic economy reservations cannot be modified"),
            say("I'm sorry: basic economy bookings cannot be changed under our policy; I can cancel it within 24 "
                "hours of booking instead."),
            user("ok, cancel it then")]


@pytest.mark.parametrize("case,answer,expect", [
    # a compliant model leaves the customer's wish out and keeps the policy as a pattern
    ("third party", {"memories": [{"shape": "general_lesson", "type": "pattern",
                                   "content": "Basic economy reservations cannot have their flights modified.",
                                   "context": "airline support", "resolution": "offer cancellation instead",
                                   "confirmed": True, "confidence": 0.8}]},
     [("pattern", "general_lesson")]),
    ("principal's wish", {"memories": [{"shape": "preference", "type": "preference",
                                        "content": "Answer in British English.", "confirmed": True,
                                        "confidence": 0.9}]},
     [("preference", "preference")]),
    ("harness only", {"memories": []}, []),
    ("unknown shape", {"memories": [{"shape": "anecdote", "type": "pattern", "content": "x y z",
                                     "confidence": 0.9}]}, [("pattern", None)]),
])
def test_each_scoping_case_goes_through_validation(server, case, answer, expect):
    server.script(Reply.json(answer))
    mems = provider(server).extract_memories(_support_session(), "customer_service")
    assert [(m["type_hint"], m["shape"]) for m in mems] == expect, case


def test_the_gate_keeps_a_lesson_from_a_failed_session_but_not_a_procedure(server):
    settings = Settings.from_env({})
    low = {"overall_score": 0.2, "teaches_lesson": True}
    high = {"overall_score": 0.9, "teaches_lesson": True}
    lesson = {"content": "x", "confidence": 0.8, "shape": "correction", "confirmed": True}
    procedure = {"content": "y", "confidence": 0.8, "shape": "procedure", "confirmed": True}
    assert selection.select([lesson, procedure], low, settings) == [lesson]
    assert selection.select([lesson, procedure], high, settings) == [lesson, procedure]


def test_the_model_never_sees_the_harness_text_repeated_in_every_session(server):
    from ultron.learned.units import RepeatIndex, opening_keys, strip_repeated
    from tests.messages import say, user

    harness = ("You are an autonomous engineer in a sandbox. Always reproduce the bug before fixing it. "
               "Wait for feedback after every command you run.")
    msgs = [user(harness + "\nThe CSV export drops the header row, please fix it."), say("Looking at it now.")]
    counts = {k: 5 for k in opening_keys([user(harness)])}          # seen opening five sessions
    server.script(Reply.json({"memories": []}))
    provider(server).extract_memories(strip_repeated(msgs, RepeatIndex(counts)), "code")
    sent = server.requests[-1]["messages"][1]["content"]
    assert "reproduce the bug" not in sent and "drops the header row" in sent


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("shape", SHAPES)
def test_each_shape_goes_through_validation(server, shape, fmt):
    spec = next(s for s in SPECS if s["shape"] == shape and s["format"] == fmt)
    messages = list(SessionParser().messages(io.BytesIO(render_jsonl(spec, fmt).encode("utf-8"))))
    answer = {"memories": [{
        "shape": shape, "type": spec["type"], "content": spec["lesson"], "context": "when it applies",
        "resolution": "what to do", "tags": ["Lesson"], "kind": "procedural", "tools_used": [],
        "confirmed": True, "confidence": 0.9}]}
    server.script(Reply.text("Here are the lessons:\n```json\n" + json.dumps(answer) + "\n```"))
    [mem] = provider(server).extract_memories(messages, "code")
    assert mem["type_hint"] == spec["type"] and mem["confirmed"] is True and mem["tags"] == ["lesson"]
    assert mem["shape"] == shape
    # the transcript the model saw holds the session's words
    sent = server.requests[-1]["messages"][1]["content"]
    assert spec["key_terms"][0].lower() in sent.lower() or spec["turns"][0]["text"][:20] in sent
    # a confirmed lesson from a low-scoring segment passes the gate; an unconfirmed one does not
    settings = Settings.from_env({})
    low = {"overall_score": 0.2, "teaches_lesson": True}
    # every lesson shape passes the gate from a low-scoring segment, but a success procedure,
    # which only the trajectory vouches for; an unshaped, unconfirmed candidate does not either
    assert selection.select([mem], low, settings) == ([] if shape == "procedure" else [mem])
    assert selection.select([{**mem, "confirmed": False, "shape": None}], low, settings) == []


def test_bad_answers_are_rejected_or_normalised(server):
    p = provider(server)
    msgs = list(SessionParser().messages(io.BytesIO(render_jsonl(SPECS[0], "openai").encode())))
    server.script(Reply.json({"memories": [{"type": "made-up", "content": "x", "confirmed": "yes"}]}))
    [mem] = p.extract_memories(msgs, None)
    assert mem["type_hint"] is None and mem["confirmed"] is False     # classified later; not confirmed
    server.script(*[Reply.json({"memories": [{"type": "error", "content": ""}]})] * 3)
    with pytest.raises(LLMInvalidAnswer, match="memory extraction"):
        p.extract_memories(msgs, None)
