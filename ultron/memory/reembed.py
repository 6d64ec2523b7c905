"""Switching embedders: re-embed every stored vector with the configured embedder.

The store refuses an embedder other than the one recorded in ``embedding_profile``
(vectors of two spaces must never be compared). :func:`reembed` is the one way past
that refusal: it rewrites every vector - memories, active cluster centroids, current
skills - then records the new embedder as the profile.

While it runs, the profile names the new embedder with an "unfinished" marker, so
every other process (old embedder or new) refuses to read or write vectors until the
re-embed is complete; a run that stops half-way leaves that marker, and running
``ultron reembed`` again redoes the work from the start (each batch is idempotent).
Batches commit one by one, so an interruption loses at most one batch of work and
never holds the whole table locked.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Sequence

import numpy as np
import sqlalchemy as sa

from ultron.db import memories as store
from ultron.memory.service import embedding_text

log = logging.getLogger("ultron.reembed")

Progress = Callable[[int, int, str], None]

#: Two re-embeds at once would both own the profile; the second one waits for nothing and stops.
_LOCK_KEY = "ultron-reembed"
UNFINISHED = " [re-embed unfinished: run `ultron reembed` to finish]"
#: Tables holding vectors of the memory space: (table, column).
VECTOR_COLUMNS = (("memory_records", "embedding"), ("knowledge_clusters", "centroid"), ("skills", "embedding"))


class ReembedError(RuntimeError):
    """The re-embed cannot start (wrong dimension, another run in progress); nothing was changed."""


def reembed(memory_service, progress: Progress | None = None, *, batch_size: int = 256) -> dict[str, Any]:
    """Re-embed memories, active cluster centroids and current skills with
    ``memory_service.embedder``, then make it the store's embedding profile.

    ``progress(done, total, what)`` is called after each batch (``what`` is
    ``memories``, ``clusters`` or ``skills``). Returns the counts and the profiles
    before and after.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be positive")
    embedder = memory_service.embedder
    name, dim = str(embedder.name), int(embedder.dim)
    engine = memory_service.db.engine
    started = time.monotonic()
    with engine.connect() as lock_conn:
        got = lock_conn.execute(sa.text("SELECT pg_try_advisory_lock(hashtextextended(:k, 0))"),
                                {"k": _LOCK_KEY}).scalar_one()
        lock_conn.commit()
        if not got:
            raise ReembedError("another re-embed is running on this database; wait for it to finish")
        try:
            with engine.connect() as conn:
                _check_dimensions(conn, name, dim)
                previous = store.get_profile(conn)
                totals = _totals(conn)
            # A broken endpoint or model fails here, before the store is marked.
            _embed(embedder, ["ultron re-embed probe"], dim)
            with engine.begin() as conn:
                store.lock_profile(conn)
                store.set_profile(conn, name + UNFINISHED, dim)
            total = sum(totals.values())
            counter = _Counter(progress, total)
            # Every memory, archived ones included: the column holds one vector space, whatever the status.
            memories = _reembed_rows(engine, embedder, dim, batch_size, counter, _MEMORY_ROWS, _memory_text,
                                     "memory_records", "embedding", "memories")
            clusters, emptied = _recompute_centroids(engine, batch_size, counter)
            # Current skill versions only: superseded ones carry no vector, so search never returns them.
            skills = _reembed_rows(engine, embedder, dim, batch_size, counter, _SKILL_ROWS, _skill_text,
                                   "skills", "embedding", "skills")
            with engine.begin() as conn:
                store.lock_profile(conn)
                store.set_profile(conn, name, dim)
        finally:
            lock_conn.execute(sa.text("SELECT pg_advisory_unlock(hashtextextended(:k, 0))"), {"k": _LOCK_KEY})
            lock_conn.commit()
    # This service may have checked (and cached) the old profile; the new one is its own.
    memory_service._profile_checked = False
    prev = previous[0].removesuffix(UNFINISHED) if previous else None
    log.info("re-embedded %d memories, %d clusters, %d skills with %s", memories, clusters, skills, name)
    return {
        "embedder": name, "dim": dim,
        "previous_embedder": prev,
        "previous_unfinished": bool(previous and previous[0].endswith(UNFINISHED)),
        "memories": memories, "clusters": clusters, "clusters_emptied": emptied, "skills": skills,
        "seconds": round(time.monotonic() - started, 3),
    }


def _check_dimensions(conn: sa.Connection, name: str, dim: int) -> None:
    for table, column in VECTOR_COLUMNS:
        width = store.column_dim(conn, table, column)
        if width != dim:
            raise ReembedError(
                f"embedder {name} gives {dim}-d vectors but {table}.{column} holds {width}-d vectors; "
                f"re-embedding cannot change the column's size. Configure a {width}-d embedder instead: "
                f"ULTRON_EMBEDDING_PROVIDER=local (all-MiniLM-L6-v2, 384-d), or an OpenAI-compatible model "
                f"that accepts dimensions={width} with ULTRON_EMBEDDING_DIM={width} "
                f"(e.g. text-embedding-3-small). Nothing was changed.")


def _totals(conn: sa.Connection) -> dict[str, int]:
    row = conn.execute(sa.text(
        "SELECT (SELECT count(*) FROM memory_records) AS memories, "
        "(SELECT count(*) FROM knowledge_clusters WHERE status = 'active') AS clusters, "
        "(SELECT count(*) FROM skills WHERE status = 'current') AS skills")).one()
    return dict(row._mapping)


class _Counter:
    def __init__(self, progress: Progress | None, total: int) -> None:
        self.progress, self.total, self.done = progress, total, 0

    def add(self, n: int, what: str) -> None:
        self.done += n
        # Rows added while the run goes on can push the count past the first estimate.
        self.total = max(self.total, self.done)
        if self.progress is not None:
            self.progress(self.done, self.total, what)


def _embed(embedder, texts: list[str], dim: int) -> np.ndarray:
    vectors = np.asarray(embedder.embed(texts), dtype=np.float32)
    if vectors.shape != (len(texts), dim):
        raise ReembedError(f"embedder {embedder.name} returned shape {vectors.shape}, "
                           f"expected ({len(texts)}, {dim})")
    return vectors


def _update_vectors(conn: sa.Connection, table: str, column: str, ids: Sequence[str], vectors) -> None:
    conn.execute(sa.text(
        f"UPDATE {table} t SET {column} = CAST(v.e AS vector) "
        "FROM unnest(CAST(:ids AS text[]), CAST(:es AS text[])) AS v(id, e) WHERE t.id = v.id"),
        {"ids": list(ids), "es": [store.vec(e) if e is not None else None for e in vectors]})


#: The rows to re-embed, one batch after ``:a`` at a time (ids in order).
_MEMORY_ROWS = ("SELECT id, content, context, resolution FROM memory_records WHERE id > :a "
                "ORDER BY id LIMIT :n FOR UPDATE")
_SKILL_ROWS = ("SELECT id, name, description, skill_md FROM skills WHERE status = 'current' AND id > :a "
               "ORDER BY id LIMIT :n FOR UPDATE")


def _memory_text(row) -> str:
    return embedding_text(dict(row._mapping))


def _skill_text(row) -> str:
    """The text the Skill Hub embedded when it published (``SkillDraft.embedding_text``),
    rebuilt from the stored row: the situations are read back from SKILL.md."""
    from ultron.skills.draft import skill_embedding_text
    from ultron.skills.render import when_to_use

    return skill_embedding_text(row.name or "", row.description or "",
                                when_to_use(row.skill_md) if row.skill_md else [])


def _reembed_rows(engine, embedder, dim: int, batch_size: int, counter: _Counter, select: str,
                  text_of: Callable[[Any], str], table: str, column: str, what: str) -> int:
    """Re-embed the rows ``select`` returns, batch by batch, into ``table.column``."""
    after, count = "", 0
    while True:
        with engine.begin() as conn:
            # Locked for the batch, so a concurrent merge cannot slip an old vector in between.
            rows = conn.execute(sa.text(select), {"a": after, "n": batch_size}).all()
            if not rows:
                return count
            vectors = _embed(embedder, [text_of(r) for r in rows], dim)
            _update_vectors(conn, table, column, [r.id for r in rows], vectors)
        after = rows[-1].id
        count += len(rows)
        counter.add(len(rows), what)


def _recompute_centroids(engine, batch_size: int, counter: _Counter) -> tuple[int, int]:
    """Each active cluster's centroid becomes the normalised mean of its active members'
    new vectors; one without active members gets none (the index then never offers it)."""
    after, count, emptied = "", 0, 0
    while True:
        with engine.begin() as conn:
            ids = list(conn.execute(sa.text(
                "SELECT id FROM knowledge_clusters WHERE status = 'active' AND id > :a ORDER BY id LIMIT :n "
                "FOR UPDATE"), {"a": after, "n": batch_size}).scalars())
            if not ids:
                return count, emptied
            means = dict(conn.execute(sa.text(
                "SELECT cluster_id, CAST(avg(embedding) AS text) FROM memory_records "
                "WHERE status = 'active' AND cluster_id = ANY(:ids) AND embedding IS NOT NULL GROUP BY cluster_id"),
                {"ids": ids}).all())
            vectors = []
            for cid in ids:
                # float64: the mean is normalised before vec() writes it as float32 digits
                mean = store.parse_vectors([means[cid]], dtype=np.float64)[0] if cid in means else None
                norm = float(np.linalg.norm(mean)) if mean is not None else 0.0
                vectors.append(mean / norm if norm > 0 else None)
            emptied += sum(v is None for v in vectors)
            _update_vectors(conn, "knowledge_clusters", "centroid", ids, vectors)
        after = ids[-1]
        count += len(ids)
        counter.add(len(ids), "clusters")

