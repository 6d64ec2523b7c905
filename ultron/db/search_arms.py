"""The dense arm of a search as two statements: the HNSW top ``k`` on its own, then one
read by id of every candidate of both arms.

One statement that joined the HNSW top ``k`` with the lexical hits needed those hits before
it could start, so a search paid lexical + dense one after the other. Split, the HNSW walk
runs while the lexical arm runs on the other connection, and only the cheap join (at most
2k rows by primary key) waits for both: at 1M memories p50 0.72x of the single statement
with default shared_buffers (benchmarks/search.py, same run), identical candidates.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import sqlalchemy as sa

from ultron.db.feedback import FEEDBACK_FACTOR_SQL
from ultron.db.memories import _CANDIDATE_COLS, _filters, vec


def ann_ranks(conn: sa.Connection, embedding: np.ndarray, *, k: int, tier: str | None,
              tags: Sequence[str] | None, agent_id: str | None) -> dict[str, int]:
    """id -> rank (1 = nearest) of the HNSW top ``k``, under the ``ef_search`` and iterative
    scan of ``memories.prepare_search``. Re-sorted by distance here: a relaxed-order scan may
    return its rows slightly out of order."""
    cond, params = _filters(tier, tags, agent_id)
    params.update(q=vec(embedding), k=k)
    rows = conn.execute(sa.text(
        f"SELECT id, embedding <=> CAST(:q AS vector) AS dist FROM memory_records WHERE {cond} "
        "ORDER BY dist LIMIT :k"), params).all()
    return {r.id: rank for rank, r in enumerate(sorted(rows, key=lambda r: r.dist), 1)}


def join_candidates(conn: sa.Connection, embedding: np.ndarray, ann: dict[str, int],
                    lexical: dict[str, tuple[float, int]]) -> list[dict[str, Any]]:
    """One row per candidate of either arm, with ``similarity`` (cosine), ``bm25``, ``ann_rank``, ``lex_rank`` and ``feedback_factor``."""
    ids = list(dict.fromkeys([*ann, *lexical]))
    if not ids:
        return []
    rows = conn.execute(sa.text(
        f"SELECT {_CANDIDATE_COLS}, 1 - (m.embedding <=> CAST(:q AS vector)) AS similarity, "
        f"{FEEDBACK_FACTOR_SQL}::float8 AS feedback_factor FROM memory_records m WHERE m.id = ANY(:ids)"),
        {"q": vec(embedding), "ids": ids})
    out = []
    for r in rows:
        row = dict(r._mapping)
        bm25, lex_rank = lexical.get(row["id"], (0.0, None))
        row.update(ann_rank=ann.get(row["id"]), bm25=bm25, lex_rank=lex_rank)
        out.append(row)
    return out
