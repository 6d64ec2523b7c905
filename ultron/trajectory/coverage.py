"""Checks on stored segments: they tile the session's lines and their scores are sane."""

from __future__ import annotations

from typing import Iterable, Protocol


class _Seg(Protocol):
    segment_index: int
    start_line: int
    end_line: int


def coverage_problems(message_lines: Iterable[int], segments: list[_Seg]) -> list[str]:
    """Empty when the segments, in index order, cover every message line once."""
    lines = sorted(set(message_lines))
    if not lines:
        return [] if not segments else ["segments exist for a session with no messages"]
    if not segments:
        return ["the session has messages but no segments"]
    problems = []
    ordered = sorted(segments, key=lambda s: s.segment_index)
    for a, b in zip(ordered, ordered[1:]):
        if b.start_line <= a.end_line:
            problems.append(f"segments {a.segment_index} and {b.segment_index} overlap (lines {a.start_line}-{a.end_line} "
                            f"and {b.start_line}-{b.end_line})")
    covered = [(s.start_line, s.end_line) for s in ordered]
    uncovered = [ln for ln in lines if not any(lo <= ln <= hi for lo, hi in covered)]
    if uncovered:
        problems.append(f"{len(uncovered)} message line(s) in no segment, first: {uncovered[0]}")
    return problems


def score_problems(scores: Iterable[tuple[str, float | None]]) -> list[str]:
    bad = [f"{sid[:8]}: {score!r}" for sid, score in scores
           if not isinstance(score, (int, float)) or isinstance(score, bool) or not 0 <= score <= 1]
    return [f"scores outside [0, 1]: {', '.join(bad[:10])}"] if bad else []
