"""SQL for outcomes that teach the store: the bundles served to agent sessions, the
outcomes attributed to what they held, and the utility estimate built from both.

Why a log of serves: a bundle is given before the work starts and its outcome is known only
once the session is ingested and scored, minutes or days later, possibly on another
machine. ``bundle_serves`` keeps one row per served item with the agent's session id;
attribution claims the rows still unattributed (``attributed_at IS NULL``) in the same
statement that counts them, so re-running, or two workers labelling the same session,
never counts a serve twice.

The **utility** of a memory or skill is the mean of a Beta posterior over "helped" and
"did not help", prior Beta(1, 1):

    alpha = 1 + FEEDBACK_WEIGHT * helpful_count + outcome_helped
    beta  = 1 + FEEDBACK_WEIGHT * unhelpful_count + outcome_unhelped
    utility = alpha / (alpha + beta)

An explicit verdict (``feedback``) is someone saying that this item helped; an attributed
outcome only says the session it was served in went well or badly, whichever items caused
it, so it counts for less (``ULTRON_UTILITY_OUTCOME_WEIGHT``, 0.5, against 2.0 here). The
outcome sums are kept on the rows (``outcome_helped``/``outcome_unhelped``); the feedback
counters are the ones ``ultron.db.feedback`` already keeps, so forgetting a verdict moves the
utility with no second bookkeeping.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import sqlalchemy as sa

#: One explicit verdict weighs this much in the utility posterior (an outcome weighs
#: ``ULTRON_UTILITY_OUTCOME_WEIGHT``).
FEEDBACK_WEIGHT = 2.0
KINDS = ("memory", "skill")
OUTCOMES = ("helped", "not_helped", "neutral")


def utility(helpful: float, unhelpful: float, outcome_helped: float, outcome_unhelped: float) -> float:
    """The posterior mean (module docstring), for values already read."""
    alpha = 1.0 + FEEDBACK_WEIGHT * helpful + outcome_helped
    beta = 1.0 + FEEDBACK_WEIGHT * unhelpful + outcome_unhelped
    return alpha / (alpha + beta)


def outcome_utility(outcome_helped: float, outcome_unhelped: float) -> float:
    """The posterior mean from attributed outcomes alone: what search ranking reads, since
    explicit feedback already has its own factor there (``FEEDBACK_FACTOR_SQL``)."""
    return (1.0 + outcome_helped) / (2.0 + outcome_helped + outcome_unhelped)


def utility_sql(alias: str = "") -> str:
    """``utility`` on a memory_records or skills row (``alias`` with its dot, or unaliased)."""
    a = alias
    return (f"((1 + {FEEDBACK_WEIGHT} * {a}helpful_count + {a}outcome_helped)::float8 / "
            f"(2 + {FEEDBACK_WEIGHT} * ({a}helpful_count + {a}unhelpful_count) + {a}outcome_helped "
            f"+ {a}outcome_unhelped))")


# -- serves -----------------------------------------------------------------------------


def record_serves(conn: sa.Connection, session_id: str, agent_id: str | None,
                  items: Iterable[tuple[str, str]]) -> int:
    """One row per (kind, id) served in this bundle; returns how many were written."""
    rows = [{"s": session_id, "a": agent_id, "k": kind, "i": item_id} for kind, item_id in items]
    if not rows:
        return 0
    for row in rows:
        if row["k"] not in KINDS:
            raise ValueError(f"item kind must be one of {KINDS}, not {row['k']!r}")
    conn.execute(sa.text("INSERT INTO bundle_serves (session_id, agent_id, item_kind, item_id) "
                         "VALUES (:s, :a, :k, :i)"), rows)
    return len(rows)


def serves_of(conn: sa.Connection, session_id: str) -> list[dict[str, Any]]:
    """Every serve of one session, oldest first (for tests and for explaining a utility)."""
    return [dict(r._mapping) for r in conn.execute(sa.text(
        "SELECT id, session_id, agent_id, served_at, item_kind, item_id, attributed_at, outcome, weight "
        "FROM bundle_serves WHERE session_id = :s ORDER BY id"), {"s": session_id})]


def has_pending(conn: sa.Connection, session_id: str) -> bool:
    """Whether any serve of this session waits for its outcome (one index lookup)."""
    return conn.execute(sa.text(
        "SELECT EXISTS (SELECT 1 FROM bundle_serves WHERE session_id = :s AND attributed_at IS NULL)"),
        {"s": session_id}).scalar_one()


def attribute(conn: sa.Connection, session_id: str, outcome: str, weight: float,
              served_before: Any | None = None) -> dict[str, int]:
    """Count one session's outcome for every item served to it and not yet counted: claim
    the rows (``attributed_at``), then add ``weight`` to each item's helped or unhelped sum
    (a memory by id, a skill on every version of its slug). ``served_before``: only serves
    up to this time (what the ingested transcript can have seen). Neutral outcomes mark the
    serves and add nothing. Returns ``{"serves", "memories", "skills"}`` counted."""
    if outcome not in OUTCOMES:
        raise ValueError(f"outcome must be one of {OUTCOMES}")
    counted = 0.0 if outcome == "neutral" else float(weight)
    row = conn.execute(sa.text(
        """WITH claimed AS (
               UPDATE bundle_serves SET attributed_at = now(), outcome = :o, weight = :w
               WHERE session_id = :s AND attributed_at IS NULL
                 AND (CAST(:before AS timestamptz) IS NULL OR served_at <= CAST(:before AS timestamptz))
               RETURNING item_kind, item_id
           ), per_item AS (
               SELECT item_kind, item_id, count(*) AS n FROM claimed GROUP BY 1, 2
           ), mem AS (
               UPDATE memory_records m SET
                   outcome_helped = m.outcome_helped + CASE WHEN :o = 'helped' THEN :w * p.n ELSE 0 END,
                   outcome_unhelped = m.outcome_unhelped + CASE WHEN :o = 'not_helped' THEN :w * p.n ELSE 0 END
               FROM per_item p WHERE p.item_kind = 'memory' AND m.id = p.item_id AND :w > 0
               RETURNING m.id
           ), sk AS (
               UPDATE skills k SET
                   outcome_helped = k.outcome_helped + CASE WHEN :o = 'helped' THEN :w * p.n ELSE 0 END,
                   outcome_unhelped = k.outcome_unhelped + CASE WHEN :o = 'not_helped' THEN :w * p.n ELSE 0 END
               FROM per_item p WHERE p.item_kind = 'skill' AND k.slug = p.item_id AND :w > 0
               RETURNING k.slug
           )
           SELECT (SELECT count(*) FROM claimed) AS serves, (SELECT count(*) FROM mem) AS memories,
                  (SELECT count(DISTINCT slug) FROM sk) AS skills"""),
        {"s": session_id, "o": outcome, "w": counted, "before": served_before}).one()
    return {k: int(v) for k, v in row._mapping.items()}


def utilities(conn: sa.Connection, kind: str, ids: Sequence[str]) -> dict[str, dict[str, float]]:
    """``{id: {"utility", "outcome_helped", "outcome_unhelped", "helpful_count",
    "unhelpful_count"}}`` of these memories (by id) or skills (by slug, current version)."""
    if not ids:
        return {}
    if kind == "memory":
        sql = (f"SELECT id AS key, {utility_sql()} AS utility, outcome_helped, outcome_unhelped, helpful_count, "
               "unhelpful_count FROM memory_records WHERE id = ANY(:ids)")
    elif kind == "skill":
        sql = (f"SELECT slug AS key, {utility_sql()} AS utility, outcome_helped, outcome_unhelped, helpful_count, "
               "unhelpful_count FROM skills WHERE slug = ANY(:ids) AND status = 'current'")
    else:
        raise ValueError(f"kind must be one of {KINDS}")
    out = {}
    for r in conn.execute(sa.text(sql), {"ids": list(ids)}):
        d = dict(r._mapping)
        out[d.pop("key")] = d
    return out


# -- consolidation and forget -----------------------------------------------------------------


def move_memory_outcomes(conn: sa.Connection, from_id: str, to_id: str) -> None:
    """A memory absorbed by another (consolidation) hands over its serves and outcome sums."""
    conn.execute(sa.text("UPDATE bundle_serves SET item_id = :t WHERE item_kind = 'memory' AND item_id = :f"),
                 {"t": to_id, "f": from_id})
    conn.execute(sa.text(
        """UPDATE memory_records k SET outcome_helped = k.outcome_helped + d.outcome_helped,
                                       outcome_unhelped = k.outcome_unhelped + d.outcome_unhelped
           FROM memory_records d WHERE k.id = :t AND d.id = :f"""), {"t": to_id, "f": from_id})


def forget_serves(conn: sa.Connection, *, memory_ids: Sequence[str], agent_id: str | None,
                  session_ids: Sequence[str]) -> int:
    """Delete the serves of forgotten memories, every serve to a forgotten agent, every serve
    of a forgotten session (its outcome leaves the sums of what it was counted for), and the
    serves of skills left without any version. Returns the rows deleted."""
    gone = conn.execute(sa.text(
        """WITH gone AS (
               DELETE FROM bundle_serves
               WHERE (item_kind = 'memory' AND item_id = ANY(CAST(:ids AS text[])))
                  OR (CAST(:a AS text) IS NOT NULL AND agent_id = CAST(:a AS text))
                  OR session_id = ANY(CAST(:sessions AS text[]))
               RETURNING item_kind, item_id, outcome, weight
           ), sums AS (
               SELECT item_kind, item_id,
                      coalesce(sum(weight) FILTER (WHERE outcome = 'helped'), 0) AS h,
                      coalesce(sum(weight) FILTER (WHERE outcome = 'not_helped'), 0) AS u
               FROM gone GROUP BY 1, 2
           ), mem AS (
               UPDATE memory_records r SET outcome_helped = greatest(0, r.outcome_helped - s.h),
                                           outcome_unhelped = greatest(0, r.outcome_unhelped - s.u)
               FROM sums s WHERE s.item_kind = 'memory' AND r.id = s.item_id AND (s.h > 0 OR s.u > 0)
               RETURNING r.id
           ), sk AS (
               UPDATE skills k SET outcome_helped = greatest(0, k.outcome_helped - s.h),
                                   outcome_unhelped = greatest(0, k.outcome_unhelped - s.u)
               FROM sums s WHERE s.item_kind = 'skill' AND k.slug = s.item_id AND (s.h > 0 OR s.u > 0)
               RETURNING k.id
           )
           SELECT count(*) FROM gone  -- the sum updates above run whether read or not"""),
        {"ids": list(memory_ids), "a": agent_id, "sessions": list(session_ids)}).scalar_one()
    orphans = conn.execute(sa.text(
        "DELETE FROM bundle_serves b WHERE b.item_kind = 'skill' "
        "AND NOT EXISTS (SELECT 1 FROM skills s WHERE s.slug = b.item_id)")).rowcount
    return int(gone) + int(orphans)
