"""A whole session's outcome, from its scored segments: did the work the agent was given
context for go well?

Pure logic over the quality labels (``task_segments.quality_metrics``); the attribution
that counts it for the memories and skills served to the session is
``ultron.db.outcomes.attribute``, called by the trajectory service once every segment of
the session is labelled.

The rule, first match wins:

1. **explicit failure**: the session's last segment ends in failure cues (its net
   ``outcome_cues`` at or below -2: the user's last turn says it failed or they give up, or
   the agent admits failure twice with nothing confirming) → ``not_helped``;
2. **confirmed fix**: a segment whose user's last turn says it works (net cues of +1 or
   more, which only a confirmation gives) → ``helped``;
3. the mean ``overall_score`` of the segments at or above the memory threshold
   (``ULTRON_TRAJECTORY_MEMORY_SCORE_THRESHOLD``, 0.7) → ``helped``;
4. below ``low`` (0.4, the quality model's failure line) → ``not_helped``;
5. otherwise ``neutral``: the evidence is too weak to credit or blame anything.

The mean, not the best segment: a bundle is asked for one task, but which segment that
task became is not known, and one easy segment should not vouch for a session that
otherwise went badly.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Sequence

#: Net outcome cues at or below this in the last segment: the session ended in explicit failure.
FAILURE_CUES = -2.0
#: Net outcome cues at or above this: the user confirmed it works (only their +2 reaches it).
CONFIRMED_CUES = 1.0
#: Mean score below this is a failure (``ultron.heuristics.quality.FAILURE_THRESHOLD``).
LOW_SCORE = 0.4


@dataclass(frozen=True)
class SessionOutcome:
    outcome: str          # helped | not_helped | neutral
    reason: str           # explicit_failure | confirmed_fix | high_score | low_score | unclear | no_segments
    mean_score: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "reason": self.reason, "mean_score": self.mean_score}


def _metrics(raw: dict[str, Any] | str | None) -> dict[str, Any]:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return {}
    return raw if isinstance(raw, dict) else {}


def _score(m: dict[str, Any]) -> float | None:
    try:
        return float(m["summary"]["overall_score"])
    except (TypeError, KeyError, ValueError):
        return None


def _cues(m: dict[str, Any]) -> float:
    """Net explicit outcome cues (``outcome_cues.value``); 0 when the segment had none."""
    try:
        entry = m["metrics"]["outcome_cues"]
        return float(entry["value"]) if entry.get("score") is not None else 0.0
    except (TypeError, KeyError, ValueError, AttributeError):
        return 0.0


def session_outcome(segments: Sequence[dict[str, Any] | str | None], success_score: float,
                    low_score: float = LOW_SCORE) -> SessionOutcome:
    """The outcome of a session from its segments' quality metrics, in session order
    (module docstring has the rule)."""
    metrics = [_metrics(s) for s in segments]
    scores = [s for s in (_score(m) for m in metrics) if s is not None]
    if not scores:
        return SessionOutcome("neutral", "no_segments", None)
    mean = round(sum(scores) / len(scores), 4)
    if _cues(metrics[-1]) <= FAILURE_CUES:
        return SessionOutcome("not_helped", "explicit_failure", mean)
    if any(_cues(m) >= CONFIRMED_CUES for m in metrics):
        return SessionOutcome("helped", "confirmed_fix", mean)
    if mean >= success_score:
        return SessionOutcome("helped", "high_score", mean)
    if mean < low_score:
        return SessionOutcome("not_helped", "low_score", mean)
    return SessionOutcome("neutral", "unclear", mean)
