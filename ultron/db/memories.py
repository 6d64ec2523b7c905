"""SQL for memory_records, memory_contributions and the embedding profile.

Every vector lookup goes through the HNSW index (``ORDER BY embedding <=> q LIMIT k``)
and every text lookup through the GIN full-text index; nothing scans rows in Python.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import sqlalchemy as sa

from ultron.db.feedback import demoted_sql
from ultron.db.outcomes import utility

RECORD_COLS = (
    "id, memory_type, content, context, resolution, tags, summary_l0, overview_l1, kind, tools_used, confidence, "
    "tier, status, hit_count, last_hit_at, merge_pending, agent_id, segment_id, session_file, start_line, end_line, "
    "created_at, updated_at, helpful_count, unhelpful_count, outcome_helped, outcome_unhelped, shared"
)

RECORD_FIELDS = tuple(c.strip() for c in RECORD_COLS.split(","))
#: RECORD_COLS of a memory_records table aliased ``m``.
_M_RECORD_COLS = ", ".join("m." + c for c in RECORD_FIELDS)


@dataclass
class MemoryRecord:
    id: str
    memory_type: str
    content: str
    context: str = ""
    resolution: str = ""
    tags: list[str] = field(default_factory=list)
    summary_l0: str = ""
    overview_l1: str = ""
    kind: str | None = None
    tools_used: list[str] = field(default_factory=list)
    confidence: float | None = None
    tier: str = "WARM"
    status: str = "active"
    hit_count: int = 0
    last_hit_at: datetime | None = None
    merge_pending: bool = False
    agent_id: str | None = None
    segment_id: str | None = None
    session_file: str | None = None
    start_line: int | None = None
    end_line: int | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    #: agents' verdicts (``ultron.db.feedback``)
    helpful_count: int = 0
    unhelpful_count: int = 0
    #: weights of the session outcomes attributed to it (``ultron.db.outcomes``)
    outcome_helped: float = 0.0
    outcome_unhelped: float = 0.0
    #: seen by every agent's token, not only its own agent's (``ultron.access``)
    shared: bool = False

    @property
    def utility(self) -> float:
        """The utility posterior mean: feedback and attributed outcomes (``ultron.db.outcomes``)."""
        return utility(self.helpful_count, self.unhelpful_count, self.outcome_helped, self.outcome_unhelped)

    def to_dict(self, detail_level: str = "full") -> dict[str, Any]:
        base = {"id": self.id, "memory_type": self.memory_type, "tier": self.tier, "status": self.status,
                "tags": list(self.tags), "hit_count": self.hit_count, "summary_l0": self.summary_l0}
        if detail_level == "l0":
            return base
        base["overview_l1"] = self.overview_l1
        if detail_level == "l1":
            return base
        base.update(content=self.content, context=self.context, resolution=self.resolution, kind=self.kind,
                    tools_used=list(self.tools_used), confidence=self.confidence, agent_id=self.agent_id,
                    shared=self.shared,
                    segment_id=self.segment_id, session_file=self.session_file, start_line=self.start_line,
                    end_line=self.end_line,
                    last_hit_at=self.last_hit_at.isoformat() if self.last_hit_at else None,
                    created_at=self.created_at.isoformat() if self.created_at else None,
                    helpful_count=self.helpful_count, unhelpful_count=self.unhelpful_count,
                    outcome_helped=round(self.outcome_helped, 4), outcome_unhelped=round(self.outcome_unhelped, 4),
                    utility=round(self.utility, 4))
        return base

    def body(self) -> dict[str, str]:
        """{content, context, resolution}: the text providers compare, merge and summarise."""
        return {"content": self.content, "context": self.context, "resolution": self.resolution}


def _record(row: Any) -> MemoryRecord:
    return MemoryRecord(**row._mapping)


def vec(v: np.ndarray) -> str:
    """pgvector text form; passed as a parameter and cast in SQL."""
    return "[" + ",".join(f"{x:.7g}" for x in np.asarray(v, dtype=np.float32)) + "]"


def parse_vectors(texts: Sequence[str], dim: int = 0, *, dtype: Any = np.float32) -> np.ndarray:
    """pgvector text forms to one matrix (float32 unless told), parsed in C (one call, not one
    float at a time); ``dim`` only shapes the empty result."""
    if not texts:
        return np.zeros((0, dim), dtype=dtype)
    flat = np.fromstring(",".join(t[1:-1] for t in texts), dtype=dtype, sep=",")
    return flat.reshape(len(texts), -1)


# -- embedding profile -------------------------------------------------------------------


def get_profile(conn: sa.Connection) -> tuple[str, int] | None:
    row = conn.execute(sa.text("SELECT name, dim FROM embedding_profile WHERE id = 1")).first()
    return (row.name, row.dim) if row else None


def set_profile(conn: sa.Connection, name: str, dim: int) -> None:
    conn.execute(sa.text(
        "INSERT INTO embedding_profile (id, name, dim) VALUES (1, :n, :d) "
        "ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, dim = EXCLUDED.dim, created_at = now()"),
        {"n": name, "d": dim})


def column_dim(conn: sa.Connection, table: str = "memory_records", column: str = "embedding") -> int:
    """The declared size of a vector column (``vector(384)`` -> 384)."""
    return conn.execute(sa.text(
        "SELECT atttypmod FROM pg_attribute WHERE attrelid = CAST(:t AS regclass) AND attname = :c"),
        {"t": table, "c": column}).scalar_one()


def lock_profile(conn: sa.Connection) -> None:
    """Writers of the profile take turns until the transaction ends."""
    conn.execute(sa.text("LOCK TABLE embedding_profile IN EXCLUSIVE MODE"))


# -- writes --------------------------------------------------------------------------------


def lock_type(conn: sa.Connection, memory_type: str) -> None:
    """Uploads of one type take turns: two concurrent uploads of the same memory see each other."""
    conn.execute(sa.text("SELECT pg_advisory_xact_lock(hashtextextended(:k, 0))"), {"k": f"memory-type:{memory_type}"})


def set_ef_search(conn: sa.Connection, ef: int) -> None:
    # Filters (type, status, tier, tags) are applied while walking the graph, not after it.
    conn.exec_driver_sql(f"SET LOCAL hnsw.ef_search = {int(ef)}; SET LOCAL hnsw.iterative_scan = relaxed_order")


#: the memories an upload may merge into: the same owner and the same ``shared`` flag, so a
#: merge never shows one agent's text to another (``ultron.access``)
_SAME_OWNER = "agent_id IS NOT DISTINCT FROM :owner AND shared = :shared"


def nearest_of_type(conn: sa.Connection, memory_type: str, embedding: np.ndarray, k: int = 3, *,
                    owner: str | None = None, shared: bool = False) -> list[tuple[MemoryRecord, float]]:
    rows = conn.execute(sa.text(
        f"SELECT {RECORD_COLS}, 1 - (embedding <=> CAST(:q AS vector)) AS similarity FROM memory_records "
        f"WHERE memory_type = :t AND status = 'active' AND {_SAME_OWNER} "
        "ORDER BY embedding <=> CAST(:q AS vector) LIMIT :k"),
        {"q": vec(embedding), "t": memory_type, "k": k, "owner": owner, "shared": bool(shared)}).all()
    out = []
    for r in rows:
        data = dict(r._mapping)
        sim = data.pop("similarity")
        out.append((MemoryRecord(**data), float(sim)))
    return out


#: a memory's content as the exact-repeat test compares it (the expression index of migration 0010)
CONTENT_KEY_SQL = "md5(lower(regexp_replace(content, '\\s+', ' ', 'g')))"


def same_content_of_type(conn: sa.Connection, memory_type: str, content: str, *, owner: str | None = None,
                         shared: bool = False) -> tuple[MemoryRecord, float] | None:
    """An active memory of this type whose content is ``content`` up to case and spacing:
    the same sentence met again (a harness's instruction, a rule restated) merges whatever
    its context says, which can keep the whole-memory vectors apart."""
    row = conn.execute(sa.text(
        f"SELECT {RECORD_COLS} FROM memory_records WHERE memory_type = :t AND status = 'active' AND {_SAME_OWNER} "
        f"AND {CONTENT_KEY_SQL} = md5(lower(regexp_replace(CAST(:c AS text), '\\s+', ' ', 'g'))) LIMIT 1"),
        {"t": memory_type, "c": content.strip(), "owner": owner, "shared": bool(shared)}).first()
    return (MemoryRecord(**dict(row._mapping)), 1.0) if row is not None else None


def insert_record(conn: sa.Connection, rec: MemoryRecord, embedding: np.ndarray) -> str:
    rec.id = rec.id or str(uuid.uuid4())
    conn.execute(sa.text(
        """
        INSERT INTO memory_records (id, memory_type, content, context, resolution, tags, summary_l0, overview_l1,
            kind, tools_used, confidence, tier, status, agent_id, segment_id, session_file, start_line, end_line,
            embedding, shared)
        VALUES (:id, :memory_type, :content, :context, :resolution, :tags, :summary_l0, :overview_l1, :kind,
            :tools_used, :confidence, 'WARM', 'active', :agent_id, :segment_id, :session_file, :start_line,
            :end_line, CAST(:embedding AS vector), :shared)
        """), {**{k: getattr(rec, k) for k in (
            "id", "memory_type", "content", "context", "resolution", "tags", "summary_l0", "overview_l1", "kind",
            "tools_used", "confidence", "agent_id", "segment_id", "session_file", "start_line", "end_line",
            "shared")},
            "embedding": vec(embedding)})
    return rec.id


def add_contribution(conn: sa.Connection, memory_id: str, content: str, context: str, resolution: str,
                     similarity: float | None, agent_id: str | None, segment_id: str | None,
                     session_file: str | None, *, tags: Sequence[str] | None = None,
                     tools_used: Sequence[str] | None = None, start_line: int | None = None,
                     end_line: int | None = None) -> None:
    """One source's part of a memory, with its own provenance, tags and tools (so forget can
    rebuild the memory from the parts that remain)."""
    conn.execute(sa.text(
        "INSERT INTO memory_contributions (memory_id, content, context, resolution, similarity, agent_id, "
        "segment_id, session_file, tags, tools_used, start_line, end_line) "
        "VALUES (:m, :c, :x, :r, :s, :a, :seg, :f, :tags, :tools, :sl, :el)"),
        {"m": memory_id, "c": content, "x": context, "r": resolution, "s": similarity, "a": agent_id,
         "seg": segment_id, "f": session_file, "tags": None if tags is None else list(tags),
         "tools": None if tools_used is None else list(tools_used), "sl": start_line, "el": end_line})


def update_after_merge(conn: sa.Connection, memory_id: str, *, tags: list[str], body: dict[str, str] | None,
                       summaries: tuple[str, str] | None, embedding: np.ndarray | None, merge_pending: bool) -> None:
    sets = ["tags = :tags", "hit_count = hit_count + 1", "last_hit_at = now()", "updated_at = now()",
            "merge_pending = :pending"]
    params: dict[str, Any] = {"id": memory_id, "tags": tags, "pending": merge_pending}
    rewrite_sets(sets, params, body=body, summaries=summaries, embedding=embedding)
    conn.execute(sa.text(f"UPDATE memory_records SET {', '.join(sets)} WHERE id = :id"), params)


def rewrite_sets(sets: list[str], params: dict[str, Any], *, body: dict[str, str] | None,
                 summaries: tuple[str, str] | None, embedding: np.ndarray | None) -> None:
    """Append the SET clauses (and their parameters) of a rewritten body, summaries and
    vector, each only when given: a merge and a fallback redo rewrite the same columns."""
    if body is not None:
        sets += ["content = :content", "context = :context", "resolution = :resolution"]
        params.update(body)
    if summaries is not None:
        sets += ["summary_l0 = :l0", "overview_l1 = :l1"]
        params.update(l0=summaries[0], l1=summaries[1])
    if embedding is not None:
        sets.append("embedding = CAST(:embedding AS vector)")
        params["embedding"] = vec(embedding)


def add_hits(conn: sa.Connection, ids: Sequence[str], amount: int) -> None:
    if ids:
        conn.execute(sa.text(
            "UPDATE memory_records SET hit_count = hit_count + :n, last_hit_at = now() WHERE id = ANY(:ids)"),
            {"n": amount, "ids": list(ids)})


# -- reads ---------------------------------------------------------------------------------


def get_records(conn: sa.Connection, ids: Sequence[str], *, include_archived: bool = True) -> list[MemoryRecord]:
    if not ids:
        return []
    sql = f"SELECT {RECORD_COLS} FROM memory_records WHERE id = ANY(:ids)"
    if not include_archived:
        sql += " AND status = 'active'"
    rows = {r.id: _record(r) for r in conn.execute(sa.text(sql), {"ids": list(ids)})}
    return [rows[i] for i in ids if i in rows]


def visible_sql(visible: Sequence[str] | None, params: dict[str, Any], alias: str = "") -> str:
    """The condition a memory row meets when a principal bound to the agents ``visible`` may
    see it (``ultron.access.visible_agents``): shared, or one of theirs. "TRUE" when unbound.

    NULL-safe (a memory of no agent is false here, never NULL, so NOT (...) keeps it out).
    One equality per agent rather than ``= ANY(array)``, which GIN cannot search: each arm of
    the OR then reads that agent's words through the words indexed by owner (revision 0020:
    GIN on agent and words, and the shared memories' words; a BitmapOr), or else through the
    agent and shared indexes."""
    if visible is None:
        return "TRUE"
    arms = [f"{alias}shared"]
    for i, agent in enumerate(dict.fromkeys(visible)):
        params[f"visible_{i}"] = agent
        arms.append(f"({alias}agent_id IS NOT NULL AND {alias}agent_id = :visible_{i})")
    return "(" + " OR ".join(arms) + ")"


def _filters(tier: str | None, tags: Sequence[str] | None, agent_id: str | None,
             visible: Sequence[str] | None = None) -> tuple[str, dict[str, Any]]:
    where = ["status = 'active'"]
    params: dict[str, Any] = {}
    if visible is not None:
        where.append(visible_sql(visible, params))
    if tier:
        where.append("tier = :tier")
        params["tier"] = tier.upper()
    if tags:
        where.append("tags @> CAST(:tags AS text[])")
        params["tags"] = list(tags)
    if agent_id:
        where.append("agent_id = :agent")
        params["agent"] = agent_id
    return " AND ".join(where), params


def rebalance_tiers(conn: sa.Connection, hot_pct: float, warm_pct: float, cold_ttl_days: float,
                    demote_after: int | None = None) -> dict[str, int]:
    """Rank active memories by use into HOT / WARM / COLD and archive COLD ones past the TTL.

    With ``demote_after``, a memory whose net "not helpful" feedback reached it stays COLD
    whatever its hits (agents said it does not help), is left out of the percentiles, and its
    TTL counts from its last feedback, so searches that still touch it cannot keep it alive."""
    demote = demote_after if demote_after is not None else 2 ** 31 - 1
    conn.execute(sa.text(
        f"""
        WITH ranked AS (
            SELECT id, row_number() OVER (ORDER BY hit_count DESC, last_hit_at DESC NULLS LAST, created_at DESC, id)
                       AS rn,
                   count(*) OVER () AS n
            FROM memory_records WHERE status = 'active' AND NOT {demoted_sql()}
        ), target AS (
            SELECT id, CASE WHEN rn <= ceil(n * :hot / 100.0) THEN 'HOT'
                            WHEN rn <= ceil(n * (:hot + :warm) / 100.0) THEN 'WARM'
                            ELSE 'COLD' END AS tier
            FROM ranked
            UNION ALL
            SELECT id, 'COLD' FROM memory_records WHERE status = 'active' AND {demoted_sql()}
        )
        UPDATE memory_records m SET tier = target.tier, updated_at = now()
        FROM target WHERE m.id = target.id AND m.tier <> target.tier
        """), {"hot": hot_pct, "warm": warm_pct, "demote": demote})
    archived = conn.execute(sa.text(
        f"""UPDATE memory_records m SET status = 'archived', updated_at = now()
            WHERE status = 'active' AND tier = 'COLD'
            AND CASE WHEN {demoted_sql('m.')}
                     THEN coalesce((SELECT max(f.created_at) FROM feedback_events f
                                    WHERE f.target_kind = 'memory' AND f.target_id = m.id),
                                   m.last_hit_at, m.created_at)
                     ELSE coalesce(m.last_hit_at, m.created_at) END
                < now() - make_interval(secs => :ttl * 86400)"""),
        {"ttl": cold_ttl_days, "demote": demote}).rowcount
    counts = dict(conn.execute(sa.text(
        "SELECT CASE WHEN status = 'archived' THEN 'ARCHIVED' ELSE tier END AS t, count(*) FROM memory_records "
        "GROUP BY 1")).all())
    return {"HOT": counts.get("HOT", 0), "WARM": counts.get("WARM", 0), "COLD": counts.get("COLD", 0),
            "ARCHIVED": counts.get("ARCHIVED", 0), "archived_now": archived}


def memory_counts(conn: sa.Connection, *, visible: Sequence[str] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {}
    rows = conn.execute(sa.text(
        f"SELECT memory_type, tier, status, count(*) AS n FROM memory_records WHERE {visible_sql(visible, params)} "
        "GROUP BY 1, 2, 3"), params).all()
    out: dict[str, Any] = {"total": 0, "active": 0, "by_type": {}, "by_tier": {}}
    for r in rows:
        out["total"] += r.n
        if r.status == "active":
            out["active"] += r.n
            out["by_type"][r.memory_type] = out["by_type"].get(r.memory_type, 0) + r.n
            out["by_tier"][r.tier] = out["by_tier"].get(r.tier, 0) + r.n
    return out


def set_shared(conn: sa.Connection, *, ids: Sequence[str] | None, agent_id: str | None, shared: bool,
               owners: Sequence[str] | None = None) -> int:
    """Mark memories (by id, or all of an agent's) shared or private; ``owners``: only
    memories of these agents change (an agent-bound caller's). Returns how many changed."""
    params: dict[str, Any] = {"s": bool(shared), "ids": list(ids or []), "a": agent_id, "owners": list(owners or [])}
    where = ["shared <> :s"]
    if ids:
        where.append("id = ANY(:ids)")
    if agent_id is not None:
        where.append("agent_id = :a")
    if owners is not None:
        where.append("agent_id = ANY(CAST(:owners AS text[]))")
    return conn.execute(sa.text(f"UPDATE memory_records SET shared = :s, updated_at = now() WHERE {' AND '.join(where)}"),
                        params).rowcount


def list_records(conn: sa.Connection, *, limit: int, offset: int, tier: str | None = None,
                 agent_id: str | None = None, include_archived: bool = False,
                 visible: Sequence[str] | None = None) -> tuple[list[MemoryRecord], int]:
    """One page of memories, newest first, and how many match in all."""
    where, params = [], {"n": int(limit), "o": int(offset)}
    if visible is not None:
        where.append(visible_sql(visible, params))
    if not include_archived:
        where.append("status = 'active'")
    if tier:
        where.append("tier = :tier")
        params["tier"] = tier.upper()
    if agent_id:
        where.append("agent_id = :agent")
        params["agent"] = agent_id
    cond = ("WHERE " + " AND ".join(where)) if where else ""
    total = conn.execute(sa.text(f"SELECT count(*) FROM memory_records {cond}"), params).scalar_one()
    rows = conn.execute(sa.text(
        f"SELECT {RECORD_COLS} FROM memory_records {cond} ORDER BY created_at DESC, id LIMIT :n OFFSET :o"), params)
    return [_record(r) for r in rows], int(total)


def active_ids_after(conn: sa.Connection, after: str, limit: int) -> list[str]:
    return list(conn.execute(sa.text(
        "SELECT id FROM memory_records WHERE status = 'active' AND id > :a ORDER BY id LIMIT :n"),
        {"a": after, "n": limit}).scalars())


def embedding_of(conn: sa.Connection, memory_id: str) -> np.ndarray:
    raw = conn.execute(sa.text("SELECT embedding::text FROM memory_records WHERE id = :id"),
                       {"id": memory_id}).scalar_one()
    return parse_vectors([raw])[0]


def move_contributions(conn: sa.Connection, from_id: str, to_id: str) -> None:
    conn.execute(sa.text("UPDATE memory_contributions SET memory_id = :t WHERE memory_id = :f"),
                 {"t": to_id, "f": from_id})


def delete_records(conn: sa.Connection, ids: Sequence[str]) -> int:
    if not ids:
        return 0
    return conn.execute(sa.text("DELETE FROM memory_records WHERE id = ANY(:ids)"), {"ids": list(ids)}).rowcount


def session_condition(session_file: str | None, agent_id: str | None, alias: str = ""
                      ) -> tuple[str, dict[str, Any]]:
    """Rows of this session file and/or this agent (at least one must be given); ``alias``
    qualifies the columns (``"r."``) when the query joins tables."""
    where, params = [], {}
    if session_file:
        where.append(f"{alias}session_file = :f")
        params["f"] = session_file
    if agent_id:
        where.append(f"{alias}agent_id = :a")
        params["a"] = agent_id
    return " AND ".join(where), params


def segment_ids_for(conn: sa.Connection, *, segment_id: str | None, session_file: str | None,
                    agent_id: str | None) -> list[str]:
    ids = {segment_id} if segment_id else set()
    if session_file or agent_id:
        cond, params = session_condition(session_file, agent_id)
        ids |= set(conn.execute(sa.text(f"SELECT id FROM task_segments WHERE {cond}"), params).scalars())
        # memories keep provenance even after their segment row was replaced
        ids |= set(conn.execute(sa.text(
            f"SELECT DISTINCT segment_id FROM memory_contributions WHERE segment_id IS NOT NULL AND "
            f"{cond}"), params).scalars())
    return sorted(ids)


def _source_condition(segment_ids: Sequence[str], session_file: str | None, agent_id: str | None
                      ) -> tuple[str, dict[str, Any]]:
    """Rows (memories or contributions) that came from these segments / this file / this agent."""
    where, params = [], {"segs": list(segment_ids)}
    if segment_ids:
        where.append("segment_id = ANY(:segs)")
    if session_file:
        where.append("session_file = :f" + (" AND agent_id = :a" if agent_id else ""))
        params["f"] = session_file
    elif agent_id:
        where.append("agent_id = :a")
    if agent_id:
        params["a"] = agent_id
    return " OR ".join(f"({w})" for w in where), params


def memories_from(conn: sa.Connection, *, memory_ids: Sequence[str] | None, segment_ids: Sequence[str],
                  session_file: str | None, agent_id: str | None) -> tuple[set[str], set[str]]:
    """(memories to delete outright, memories that received a contribution from the source)."""
    doomed = set(memory_ids or [])
    cond, params = _source_condition(segment_ids, session_file, agent_id)
    touched: set[str] = set()
    if cond:
        touched = set(conn.execute(sa.text(f"SELECT DISTINCT memory_id FROM memory_contributions WHERE {cond}"),
                                   params).scalars())
        touched |= set(conn.execute(sa.text(f"SELECT id FROM memory_records WHERE {cond}"), params).scalars())
    return doomed, touched


def delete_contributions(conn: sa.Connection, *, segment_ids: Sequence[str], session_file: str | None,
                         agent_id: str | None) -> int:
    cond, params = _source_condition(segment_ids, session_file, agent_id)
    if not cond:
        return 0
    return conn.execute(sa.text(f"DELETE FROM memory_contributions WHERE {cond}"), params).rowcount


def contributions_of(conn: sa.Connection, memory_id: str) -> list[dict[str, str]]:
    rows = conn.execute(sa.text(
        "SELECT content, context, resolution FROM memory_contributions WHERE memory_id = :m ORDER BY id"),
        {"m": memory_id})
    return [dict(r._mapping) for r in rows]


#: What forget reads of a contribution: its body and its provenance.
CONTRIBUTION_COLS = ("memory_id, content, context, resolution, agent_id, segment_id, session_file, start_line, "
                     "end_line, tags, tools_used")


def take_contributions(conn: sa.Connection, *, segment_ids: Sequence[str], session_file: str | None,
                       agent_id: str | None) -> list[dict[str, Any]]:
    """Delete the contributions that came from these segments / this file / this agent and
    return them (body and provenance), so the caller knows what went from which memory."""
    cond, params = _source_condition(segment_ids, session_file, agent_id)
    if not cond:
        return []
    rows = conn.execute(sa.text(f"DELETE FROM memory_contributions WHERE {cond} RETURNING {CONTRIBUTION_COLS}"),
                        params)
    return [dict(r._mapping) for r in rows]


def contribution_rows(conn: sa.Connection, memory_id: str) -> list[dict[str, Any]]:
    """A memory's contributions, oldest first, with their provenance (tags/tools/lines are
    None for rows written before revision 0004)."""
    rows = conn.execute(sa.text(
        f"SELECT {CONTRIBUTION_COLS} FROM memory_contributions WHERE memory_id = :m ORDER BY id"), {"m": memory_id})
    return [dict(r._mapping) for r in rows]


def count_contributions(conn: sa.Connection, memory_ids: Sequence[str]) -> int:
    if not memory_ids:
        return 0
    return conn.execute(sa.text("SELECT count(*) FROM memory_contributions WHERE memory_id = ANY(:ids)"),
                        {"ids": list(memory_ids)}).scalar_one()


def set_provenance(conn: sa.Connection, memory_id: str, *, agent_id: str | None, segment_id: str | None,
                   session_file: str | None, start_line: int | None, end_line: int | None, tags: Sequence[str],
                   tools_used: Sequence[str]) -> None:
    """Where a rebuilt memory now comes from, and the tags and tools its sources brought."""
    conn.execute(sa.text(
        "UPDATE memory_records SET agent_id = :a, segment_id = :seg, session_file = :f, start_line = :sl, "
        "end_line = :el, tags = :tags, tools_used = :tools, updated_at = now() WHERE id = :id"),
        {"a": agent_id, "seg": segment_id, "f": session_file, "sl": start_line, "el": end_line,
         "tags": list(tags), "tools": list(tools_used), "id": memory_id})


def replace_body(conn: sa.Connection, memory_id: str, body: dict[str, str], summaries: tuple[str, str],
                 embedding: np.ndarray) -> None:
    conn.execute(sa.text(
        "UPDATE memory_records SET content = :content, context = :context, resolution = :resolution, "
        "summary_l0 = :l0, overview_l1 = :l1, embedding = CAST(:e AS vector), updated_at = now() WHERE id = :id"),
        {**body, "l0": summaries[0], "l1": summaries[1], "e": vec(embedding), "id": memory_id})


def delete_sessions(conn: sa.Connection, *, segment_ids: Sequence[str], segment_id: str | None,
                    session_file: str | None, agent_id: str | None) -> dict[str, int]:
    out = {"segments": 0, "sessions": 0, "raw_uploads": 0}
    if segment_id and not (session_file or agent_id):
        out["segments"] = conn.execute(sa.text("DELETE FROM task_segments WHERE id = :s"),
                                       {"s": segment_id}).rowcount
        return out
    if not (session_file or agent_id):
        return out
    cond, params = session_condition(session_file, agent_id)
    out["segments"] = conn.execute(sa.text(f"DELETE FROM task_segments WHERE {cond}"), params).rowcount
    # parsed messages and parse problems go with their session row (ON DELETE CASCADE)
    out["sessions"] = conn.execute(sa.text(f"DELETE FROM trajectory_records WHERE {cond}"), params).rowcount
    raw_cond = cond.replace("session_file", "source_path")
    out["raw_uploads"] = conn.execute(sa.text(f"DELETE FROM raw_user_uploads WHERE {raw_cond}"), params).rowcount
    return out


def records_for_partition(conn: sa.Connection, partition_key: str) -> list[MemoryRecord]:
    rows = conn.execute(sa.text(
        f"SELECT {_M_RECORD_COLS} FROM memory_records m "
        "JOIN trajectory_records r ON r.agent_id = m.agent_id AND r.session_file = m.session_file "
        "WHERE r.partition_key = :k ORDER BY m.created_at"), {"k": partition_key})
    return [_record(r) for r in rows]


# -- id lookup (command line) --------------------------------------------------------------


def ids_matching(conn: sa.Connection, typed: str, *, full_length: int = 36, limit: int = 6) -> list[str]:
    """Memory ids (any status) for an id the user typed, lower-cased: a full id
    (``full_length`` characters) finds itself only; anything shorter is a prefix and finds
    the ids starting with it, in id order, at most ``limit`` (enough to tell a unique prefix
    from an ambiguous one). An empty list: no such memory.

    ``typed`` is used in a LIKE pattern: the caller keeps ``%`` and ``_`` out of it
    (the CLI accepts hex digits and hyphens only)."""
    exact = len(typed) == full_length
    return list(conn.execute(sa.text(
        "SELECT id FROM memory_records WHERE " + ("id = :p" if exact else "id LIKE :p ORDER BY id LIMIT :n")),
        {"p": typed} if exact else {"p": typed + "%", "n": limit}).scalars())
