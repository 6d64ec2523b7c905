"""SQL for agents' feedback: the event log and the counters ranking, tiers and the skill
lifecycle read.

Every verdict is one ``feedback_events`` row (kept so a rank, a demotion or a retirement
can be explained); the counters on ``memory_records`` and ``skills`` are updated in the
same statement, so a search never aggregates events.

Formulas (docs/concepts.md, "Feedback and the context bundle"):

- a memory's **feedback factor** in search ranking is
  ``min(1, 2 * (helpful + 1) / (helpful + unhelpful + 2))``: 1 without feedback or while
  helpful votes keep up with unhelpful ones, 2/3 after one net "not helpful", 1/2 after
  two, ... (``FEEDBACK_FACTOR_SQL``, computed in the candidate query);
- a memory whose net "not helpful" (``unhelpful - helpful``) reaches
  ``ULTRON_FEEDBACK_DEMOTE_AFTER`` is **demoted** to COLD and stays there through tier
  rebalances; the cold TTL then counts from its last feedback;
- a skill's **reliability** is the Laplace-smoothed (Beta(1, 1) prior) helpful share
  ``(helpful + 1) / (helpful + unhelpful + 2)``;
- **lifecycle**: probationary → active at ``ULTRON_SKILL_ACTIVATE_AFTER`` helpful votes;
  any state → retired once it has ``ULTRON_SKILL_RETIRE_MIN_VOTES`` votes and a
  reliability below ``ULTRON_SKILL_RETIRE_BELOW``. Retired is final for the slug: it is
  carried to every later version (``ultron.db.skills.insert_skill``).
"""

from __future__ import annotations

from typing import Any, Sequence

import sqlalchemy as sa

#: A helpful verdict counts as this many hits (a search result is 1, a full fetch 2).
HELPFUL_HITS = 3

#: Multiplier of a memory's fused search score, on a memory_records row aliased ``m``.
FEEDBACK_FACTOR_SQL = "LEAST(1.0, 2.0 * (m.helpful_count + 1) / (m.helpful_count + m.unhelpful_count + 2))"

#: A skill's reliability, on a skills row (unaliased).
RELIABILITY_SQL = "((helpful_count + 1)::float8 / (helpful_count + unhelpful_count + 2))"


def reliability(helpful: int, unhelpful: int) -> float:
    """The same formula as ``RELIABILITY_SQL``, for values already read."""
    return (helpful + 1) / (helpful + unhelpful + 2)


def demoted_sql(alias: str = "") -> str:
    """Condition: the row's net "not helpful" reached the demotion threshold ``:demote``."""
    return f"({alias}unhelpful_count - {alias}helpful_count >= :demote)"


def record_event(conn: sa.Connection, target_kind: str, target_id: str, helpful: bool, note: str,
                 agent_id: str | None) -> int:
    return conn.execute(sa.text(
        "INSERT INTO feedback_events (target_kind, target_id, helpful, note, agent_id) "
        "VALUES (:k, :t, :h, :n, :a) RETURNING id"),
        {"k": target_kind, "t": target_id, "h": helpful, "n": note, "a": agent_id}).scalar_one()


def apply_memory_feedback(conn: sa.Connection, memory_id: str, helpful: bool, demote_after: int
                          ) -> dict[str, Any] | None:
    """Count the verdict on the memory; helpful adds hits and refreshes recency, a verdict that
    brings net "not helpful" to ``demote_after`` demotes it to COLD. None: no such memory."""
    row = conn.execute(sa.text(
        f"""UPDATE memory_records SET
                helpful_count = helpful_count + CASE WHEN :h THEN 1 ELSE 0 END,
                unhelpful_count = unhelpful_count + CASE WHEN :h THEN 0 ELSE 1 END,
                hit_count = hit_count + CASE WHEN :h THEN {HELPFUL_HITS} ELSE 0 END,
                last_hit_at = CASE WHEN :h THEN now() ELSE last_hit_at END,
                tier = CASE WHEN NOT :h AND unhelpful_count + 1 - helpful_count >= :demote THEN 'COLD'
                            ELSE tier END,
                updated_at = now()
            WHERE id = :id
            RETURNING id, tier, status, hit_count, helpful_count, unhelpful_count"""),
        {"h": helpful, "demote": demote_after, "id": memory_id}).first()
    return dict(row._mapping) if row else None


def apply_skill_feedback(conn: sa.Connection, slug: str, helpful: bool, *, activate_after: int,
                         retire_below: float, retire_min_votes: int) -> dict[str, Any] | None:
    """Count the verdict on every version of the skill (the counters and the lifecycle travel
    with the slug) and move its lifecycle. None: no current version of that slug."""
    row = conn.execute(sa.text(
        """WITH cur AS (
               SELECT helpful_count + CASE WHEN :h THEN 1 ELSE 0 END AS h,
                      unhelpful_count + CASE WHEN :h THEN 0 ELSE 1 END AS u, lifecycle
               FROM skills WHERE slug = :s AND status = 'current' FOR UPDATE
           ), next AS (
               SELECT h, u, CASE
                   WHEN lifecycle = 'retired' THEN 'retired'
                   WHEN h + u >= :min_votes AND (h + 1)::float8 / (h + u + 2) < :below THEN 'retired'
                   WHEN h >= :activate THEN 'active'
                   ELSE lifecycle END AS lifecycle
               FROM cur
           ), upd AS (
               UPDATE skills k SET helpful_count = next.h, unhelpful_count = next.u, lifecycle = next.lifecycle,
                                   updated_at = now()
               FROM next WHERE k.slug = :s RETURNING k.slug
           )
           SELECT :s AS slug, next.h AS helpful_count, next.u AS unhelpful_count, next.lifecycle,
                  (SELECT count(*) FROM upd) AS versions
           FROM next"""),
        {"h": helpful, "s": slug, "activate": activate_after, "below": retire_below,
         "min_votes": retire_min_votes}).first()
    return dict(row._mapping) if row else None


def skill_lifecycle(conn: sa.Connection, slug: str) -> str | None:
    """The lifecycle of the slug's current version; None when there is none."""
    return conn.execute(sa.text("SELECT lifecycle FROM skills WHERE slug = :s AND status = 'current'"),
                        {"s": slug}).scalar()


def events_for(conn: sa.Connection, target_kind: str, target_id: str, limit: int = 100) -> list[dict[str, Any]]:
    """The newest verdicts on one target (for explaining a rank or a retirement)."""
    rows = conn.execute(sa.text(
        "SELECT id, target_kind, target_id, helpful, note, agent_id, created_at FROM feedback_events "
        "WHERE target_kind = :k AND target_id = :t ORDER BY created_at DESC, id DESC LIMIT :n"),
        {"k": target_kind, "t": target_id, "n": limit})
    return [dict(r._mapping) for r in rows]


def move_memory_feedback(conn: sa.Connection, from_id: str, to_id: str) -> None:
    """A memory absorbed by another (consolidation) hands over its verdicts and counters."""
    conn.execute(sa.text(
        "UPDATE feedback_events SET target_id = :t WHERE target_kind = 'memory' AND target_id = :f"),
        {"t": to_id, "f": from_id})
    conn.execute(sa.text(
        """UPDATE memory_records k SET helpful_count = k.helpful_count + d.helpful_count,
                                       unhelpful_count = k.unhelpful_count + d.unhelpful_count
           FROM memory_records d WHERE k.id = :t AND d.id = :f"""), {"t": to_id, "f": from_id})


def forget_feedback(conn: sa.Connection, *, memory_ids: Sequence[str], agent_id: str | None) -> int:
    """Delete the verdicts on forgotten memories, every verdict a forgotten agent gave (its
    votes leave the counters of what it judged), and the verdicts on skills left without any
    version. Returns the events deleted."""
    params = {"ids": list(memory_ids), "a": agent_id}
    gone = conn.execute(sa.text(
        """WITH gone AS (
               DELETE FROM feedback_events
               WHERE (target_kind = 'memory' AND target_id = ANY(CAST(:ids AS text[])))
                  OR (CAST(:a AS text) IS NOT NULL AND agent_id = CAST(:a AS text))
               RETURNING target_kind, target_id, helpful
           ), votes AS (
               SELECT target_kind, target_id, count(*) FILTER (WHERE helpful) AS h,
                      count(*) FILTER (WHERE NOT helpful) AS u
               FROM gone GROUP BY 1, 2
           ), mem AS (
               UPDATE memory_records r SET helpful_count = greatest(0, r.helpful_count - v.h),
                                           unhelpful_count = greatest(0, r.unhelpful_count - v.u)
               FROM votes v WHERE v.target_kind = 'memory' AND r.id = v.target_id RETURNING r.id
           ), sk AS (
               UPDATE skills k SET helpful_count = greatest(0, k.helpful_count - v.h),
                                   unhelpful_count = greatest(0, k.unhelpful_count - v.u)
               FROM votes v WHERE v.target_kind = 'skill' AND k.slug = v.target_id RETURNING k.id
           )
           SELECT count(*) FROM gone  -- the counter updates above run whether read or not"""),
        params).scalar_one()
    orphans = conn.execute(sa.text(
        "DELETE FROM feedback_events f WHERE f.target_kind = 'skill' "
        "AND NOT EXISTS (SELECT 1 FROM skills s WHERE s.slug = f.target_id)")).rowcount
    return int(gone) + int(orphans)
