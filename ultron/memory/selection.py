"""The memory gate: which segments are read for memories, and which candidates are kept.

A segment whose trajectory scores at least ULTRON_TRAJECTORY_MEMORY_SCORE_THRESHOLD
is read, and its candidates at or above ULTRON_MEMORY_MIN_CONFIDENCE are kept. A
segment below the threshold is read too when it *teaches a lesson in the user's
words* (``summary.teaches_lesson``, from :func:`ultron.heuristics.lessons.lesson_signals`
at labelling time): a failed call the user then helps fix is the very reason for the
lesson, and scoring the trajectory low is right for SFT but must not hide the lesson.
From such a segment only candidates the user stated or confirmed (``confirmed``) are
kept: an unconfirmed error or procedure of a weak trajectory stays out.
"""

from __future__ import annotations

from typing import Any

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


def select(candidates: list[dict[str, Any]], summary: dict[str, Any] | None, settings: Settings
           ) -> list[dict[str, Any]]:
    """The candidates to keep from one segment."""
    passed = overall_score(summary) >= settings.trajectory_memory_score_threshold
    return [c for c in candidates if c["confidence"] >= settings.memory_min_confidence
            and (passed or c.get("confirmed") is True)]
