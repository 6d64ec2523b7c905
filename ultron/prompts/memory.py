"""The Memory Hub's tasks: extract, classify, summarise, same-memory check, merge."""

from __future__ import annotations

from typing import Any

from ultron.vocabulary import MEMORY_KINDS, MEMORY_TYPE_MEANINGS, MEMORY_TYPES

EXTRACT_SYSTEM = """You read one task of an AI agent's work and write down the lessons an experienced engineer
would keep for other agents, and nothing else. A lesson is one of these shapes (its type in brackets):
- a tool error and the change that fixed it, by a later call or explained in prose and confirmed by the user [error];
- the user correcting the agent, or stating a team / project convention ("we use pnpm here, not npm") [correction];
- a lasting preference of the user ("always answer in British English") [preference];
- a credential or exposure lesson (rotate a leaked key, never commit .env) [security];
- a reusable multi-step procedure that succeeded, or a general rule stated in words ("in general, wait for the DB
  health check before running migrations"), including business policies learned in a service session [pattern];
- a fact about a person's life, only in personal conversations [life].
A rule stated in words outranks the workaround it replaces (a stated health-check rule beats a `sleep 5`).
Skip chit-chat, one-off facts, failed attempts that taught nothing, and anything private.
State every lesson generally: no customer or user ids, reservation / order numbers, names of the person served,
one-off paths or numbers (write <user_id>, <reservation_id>, <name>, <path> if you must).
Answer with JSON only:
{"memories": [{"type": "error|correction|preference|security|pattern|life",
  "content": "the lesson in one sentence, stated generally",
  "context": "when it applies", "resolution": "what to do (the fix, the rule, the steps)",
  "tags": ["python", "docker"], "kind": "procedural|episodic", "tools_used": ["tool names"],
  "confirmed": true, "confidence": 0.0}]}
kind: procedural = a reusable how-to; episodic = a one-off event. confirmed: the user stated the lesson or
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
