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

And a candidate that says what the session's system prompt already says (a support agent
reciting its policy to a customer: "basic economy flights cannot be modified") is the
agent's context, not something it learned: every later session gets that prompt anyway.
It is dropped when at least ``STANDING_SHARE`` of its content words are the prompt's.
Measured on ../shared/data: agents' policy recitals share 0.57-0.85 of their words with
the prompt, lessons learned in a session at most 0.11.
"""

from __future__ import annotations

from typing import Any

from ultron.heuristics.text import words
from ultron.learned import worth
from ultron.settings import Settings

STANDING_SHARE = 0.5
#: a system prompt this short (a role line) states no rules a memory could recite
STANDING_MIN_WORDS = 40


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


def recites_prompt(content: str, system: str) -> bool:
    """Does the content say what the system prompt says (see the module docstring)?"""
    prompt = words(system or "")
    mine = words(content or "")
    return len(prompt) >= STANDING_MIN_WORDS and bool(mine) and len(mine & prompt) / len(mine) >= STANDING_SHARE


def select(candidates: list[dict[str, Any]], summary: dict[str, Any] | None, settings: Settings,
           messages: list[Any] | None = None, system: str | None = None) -> list[dict[str, Any]]:
    """The candidates to keep from one segment (``messages``: the segment, for the worth check;
    ``system``: the session's system prompt, else the segment's own)."""
    passed = overall_score(summary) >= settings.trajectory_memory_score_threshold
    out = [c for c in candidates if c["confidence"] >= settings.memory_min_confidence
           and (passed or not needs_good_trajectory(c))]
    if system is None:
        system = next((m.content for m in messages or () if getattr(m, "role", "") == "system"
                       and isinstance(m.content, str)), "")
    out = [c for c in out if not recites_prompt(c.get("content") or "", system)]
    return worth.keep(out, messages) if messages is not None and out else out
