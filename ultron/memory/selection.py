"""The memory gate: which segments are read for memories, and which candidates are kept.

A lesson is worth keeping whatever the trajectory scored: a failed call is often the
very reason for it, and the best agent memories learn from failures as well as
successes. So a segment is read when the lesson model says it teaches something
(``summary.teaches_lesson``, from :func:`ultron.learned.lessons.teaches` at labelling
time) or when its trajectory scores at least ULTRON_TRAJECTORY_MEMORY_SCORE_THRESHOLD.

The trajectory score gates only what it can vouch for: a plain success procedure
(shape ``procedure``) is kept only from a segment at or above the threshold, and so is
a candidate an LLM returned with no shape that neither the user stated nor confirmed.
Every kept candidate has at least ULTRON_MEMORY_MIN_CONFIDENCE. A failed session with
no lesson is never read, so it yields nothing.

Given the segment's messages (as stored: the system prompt unstripped), a candidate must
also read as worth serving (:mod:`ultron.learned.worth`): not a retelling of one session,
the request, a standing instruction, or a fix without its substance.
"""

from __future__ import annotations

from typing import Any

from ultron.learned import worth
from ultron.settings import Settings


def overall_score(summary: dict[str, Any] | None) -> float:
    try:
        return float((summary or {}).get("overall_score"))
    except (TypeError, ValueError):
        return 0.0


def is_extractable(summary: dict[str, Any] | None, settings: Settings) -> bool:
    """Read this segment for memories (the SQL of ``db.segments.extractable_segments`` says the same)."""
    return (overall_score(summary) >= settings.trajectory_memory_score_threshold
            or (summary or {}).get("teaches_lesson") is True)


def needs_good_trajectory(c: dict[str, Any]) -> bool:
    """Kept only from a segment whose trajectory passed: a success procedure, or an unshaped,
    unconfirmed candidate."""
    shape = c.get("shape")
    return shape == "procedure" or (shape is None and c.get("confirmed") is not True)


def select(candidates: list[dict[str, Any]], summary: dict[str, Any] | None, settings: Settings,
           messages: list[Any] | None = None) -> list[dict[str, Any]]:
    """The candidates to keep from one segment (``messages``: the segment, for the worth check)."""
    passed = overall_score(summary) >= settings.trajectory_memory_score_threshold
    out = [c for c in candidates if c["confidence"] >= settings.memory_min_confidence
           and (passed or not needs_good_trajectory(c))]
    return worth.keep(out, messages) if messages is not None and out else out
