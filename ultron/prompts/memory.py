"""The Memory Hub's tasks: extract, classify, summarise, same-memory check, merge."""

from __future__ import annotations

from typing import Any

from ultron.vocabulary import LESSON_SHAPES, MEMORY_KINDS, MEMORY_TYPE_MEANINGS, MEMORY_TYPES

EXTRACT_SYSTEM = """You read one task of an AI agent's work and write down the lessons an experienced engineer
would keep for other agents, and nothing else. A lesson has one of these shapes (shape -> type):
- error_fix -> error: a tool call fails and later calls fix it (the error and the change that fixed it);
- prose_fix -> error: an error is met or reported and the fix is explained in words, usually confirmed;
- correction -> correction: the principal sets the agent right ("no, we use pnpm here, not npm");
- preference -> preference: the principal's standing wish about how work is done for them from now on;
- general_lesson -> pattern: a rule stated for next time ("wait for the DB health check before migrating"), or a
  business rule the agent is seen applying (its policy, or a tool that refuses an action);
- procedure -> pattern: a recurring task completed through several steps that worked, as a how-to;
- security -> security: a secret exposed or about to be (rotate it, keep it out of git), a dangerous action avoided.
In a personal conversation with no task, a shareable fact of the principal's own life is type life (no shape).
Whose knowledge it is: the principal is the person the agent works for and the instructions it runs under.
A third party (a customer in a support session, someone mentioned in passing) is not the principal: their
personal details, wishes ("always book me an aisle seat") and one-off requests are never lessons.
Standing instructions that arrive unchanged at the start of every run (a harness template, a system prompt)
are context, not something learned: never return them as lessons. A business rule the agent applies is a
pattern; the principal's standing wish is a preference.
A rule stated in words outranks the workaround it replaces (a stated health-check rule beats a `sleep 5`).
A lesson is worth keeping whether or not the task succeeded. Skip chit-chat, one-off requests, trivial successes,
failed attempts that taught nothing, and anything private.
State every lesson generally: no customer or user ids, reservation / order numbers, names of the person served,
one-off paths or numbers (write <user_id>, <reservation_id>, <name>, <path> if you must).
Answer with JSON only:
{"memories": [{"shape": "error_fix|prose_fix|correction|preference|general_lesson|procedure|security",
  "type": "error|correction|preference|security|pattern|life",
  "content": "the lesson in one sentence, stated generally",
  "context": "when it applies", "resolution": "what to do (the fix, the rule, the steps)",
  "tags": ["python", "docker"], "kind": "procedural|episodic", "tools_used": ["tool names"],
  "confirmed": true, "confidence": 0.0}]}
kind: procedural = a reusable how-to; episodic = a one-off event. confirmed: the principal stated the lesson or
confirmed that the fix worked. confidence: 0..1, how sure and reusable (a confirmation raises it).
Return {"memories": []} when the task teaches nothing worth keeping."""

TEXT_EXTRACT_SYSTEM = EXTRACT_SYSTEM.replace("one task of an AI agent's work", "a text someone shared")

# Built from the vocabulary, so a new memory type is offered to the model as soon as it exists.
CLASSIFY_SYSTEM = (
    "Classify one memory of an AI agent memory system. Types:\n"
    + ", ".join(f"{name} ({meaning})" for name, meaning in MEMORY_TYPE_MEANINGS.items()) + ".\n"
    + 'Answer with JSON only: {"memory_type": "' + MEMORY_TYPES[0] + '"}'
)

SUMMARY_SYSTEM = """Summarise one memory at two levels. l0: one line, at most 40 words, the gist someone scans.
l1: an overview of at most 150 words with the problem, context and resolution.
Answer with JSON only: {"l0": "...", "l1": "..."}"""

SAME_SYSTEM = """Two memories are near-duplicates by embedding similarity. Decide whether they describe the same
knowledge (the same problem and fix, the same preference, the same procedure), so they should be merged.
Answer with JSON only: {"same": true} or {"same": false}"""

MERGE_SYSTEM = """Merge two versions of the same memory into one, keeping every distinct fact of both, without
repetition. Answer with JSON only: {"content": "...", "context": "...", "resolution": "..."}"""


def validate_memories(value: Any) -> list[dict[str, Any]]:
    """Memory candidates {content, context, resolution, tags, kind, tools_used, confidence, type_hint}."""
    items = value.get("memories") if isinstance(value, dict) else value
    if not isinstance(items, list):
        raise ValueError("expected {\"memories\": [...]}")
    out = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("content"), str) or not item["content"].strip():
            raise ValueError(f"memory without content: {item!r}")
        conf = item.get("confidence", 0.5)
        if isinstance(conf, bool) or not isinstance(conf, (int, float)):
            raise ValueError(f"confidence must be a number: {conf!r}")
        kind = item.get("kind") if item.get("kind") in MEMORY_KINDS else "episodic"
        tags = item.get("tags") if isinstance(item.get("tags"), list) else []
        tools = item.get("tools_used") if isinstance(item.get("tools_used"), list) else []
        out.append({
            "content": item["content"].strip(), "context": str(item.get("context") or "").strip(),
            "resolution": str(item.get("resolution") or "").strip(),
            "tags": [str(t).strip().lower() for t in tags if str(t).strip()][:12],
            "kind": kind, "tools_used": [str(t) for t in tools][:20],
            "confidence": min(1.0, max(0.0, float(conf))),
            # the extractor's own reading of the type, when it gives a valid one
            "type_hint": next((t for t in (item.get("type"), item.get("type_hint")) if t in MEMORY_TYPES), None),
            "confirmed": item.get("confirmed") is True,
            # the lesson's shape (error_fix, procedure ...) when the extractor names a valid one
            "shape": item.get("shape") if item.get("shape") in LESSON_SHAPES else None,
        })
    return out


def validate_type(value: Any) -> str:
    kind = value.get("memory_type") if isinstance(value, dict) else value
    if kind not in MEMORY_TYPES:
        raise ValueError(f"memory_type must be one of {MEMORY_TYPES}, got {kind!r}")
    return kind


def validate_summaries(value: Any) -> tuple[str, str]:
    if not isinstance(value, dict) or not isinstance(value.get("l0"), str) or not isinstance(value.get("l1"), str):
        raise ValueError("expected {\"l0\": str, \"l1\": str}")
    if not value["l0"].strip():
        raise ValueError("empty l0")
    return value["l0"].strip(), value["l1"].strip()


def validate_same(value: Any) -> bool:
    same = value.get("same") if isinstance(value, dict) else value
    if not isinstance(same, bool):
        raise ValueError("expected {\"same\": true|false}")
    return same


def validate_merged(value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or not isinstance(value.get("content"), str) or not value["content"].strip():
        raise ValueError("expected {content, context, resolution}")
    return {k: str(value.get(k) or "").strip() for k in ("content", "context", "resolution")}
