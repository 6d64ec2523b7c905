"""Segmentation: split a window of messages into tasks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SEGMENT_SYSTEM = """You split an AI agent's conversation into independent tasks.
A task is one user goal with everything done for it: the request, clarifications, tool calls, results and the answer.
A new task starts when the user turns to a different goal; follow-ups, corrections and answers to the agent's questions belong to the current task.
The messages are numbered 1..{n}. Answer with JSON only, in this shape:
{{"tasks": [{{"start": 1, "end": 3, "topic": "short topic of the task"}}, ...]}}
The tasks must be in order, contiguous and non-overlapping, and cover 1..{n} exactly: the first starts at 1, each next starts right after the previous ends, the last ends at {n}."""


@dataclass(frozen=True)
class WindowTask:
    """One task of a segmentation answer: 1-based inclusive in-window indices."""

    start: int
    end: int
    topic: str


def validate_cover(value: Any, length: int) -> list[WindowTask]:
    """The answer must be tasks forming a contiguous, non-overlapping cover of 1..length."""
    items = value.get("tasks") if isinstance(value, dict) else value
    if not isinstance(items, list) or not items:
        raise ValueError("expected a non-empty list of tasks")
    tasks = []
    for item in items:
        if not isinstance(item, dict):
            raise ValueError(f"task is not an object: {item!r}")
        start, end = item.get("start"), item.get("end")
        if isinstance(start, bool) or isinstance(end, bool) or not isinstance(start, int) or not isinstance(end, int):
            raise ValueError(f"task bounds must be integers: {item!r}")
        topic = item.get("topic") or ""
        tasks.append(WindowTask(start, end, str(topic).strip()[:200]))
    expected = 1
    for t in tasks:
        if t.start != expected or t.end < t.start:
            raise ValueError(f"tasks do not cover 1..{length} contiguously at {t.start}-{t.end}")
        expected = t.end + 1
    if expected != length + 1:
        raise ValueError(f"tasks end at {expected - 1}, the window has {length} messages")
    return tasks
