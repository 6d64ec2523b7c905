"""Switching embedders: re-embed every stored vector with the configured embedder.

The store refuses an embedder other than the one recorded in ``embedding_profile``
(vectors of two spaces must never be compared). :func:`reembed` is the one way past
that refusal: it rewrites every vector - memories, active cluster centroids, current
skills - then records the new embedder as the profile. It spans the memory, cluster
and skill stages, so it sits above them, beside the SDK.

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
from typing import Any, Callable

import numpy as np

from ultron.context import ServiceContext
from ultron.db import memories as memory_store
from ultron.db import vectors as store
from ultron.memory.service import embedding_text
from ultron.skills.draft import skill_embedding_text
from ultron.skills.render import when_to_use

log = logging.getLogger("ultron.reembed")

Progress = Callable[[int, int, str], None]
UNFINISHED = " [re-embed unfinished: run `ultron reembed` to finish]"


class ReembedError(RuntimeError):
    """The re-embed cannot start (wrong dimension, another run in progress); nothing was changed."""


def reembed(ctx: ServiceContext, progress: Progress | None = None, *, batch_size: int = 256) -> dict[str, Any]:
    """Re-embed memories, active cluster centroids and current skills with ``ctx.embedder``,
    then make it the store's embedding profile.

    ``progress(done, total, what)`` is called after each batch (``what`` is
    ``memories``, ``clusters`` or ``skills``). Returns the counts and the profiles
    before and after.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be positive")
    embedder = ctx.embedder
    name, dim = str(embedder.name), int(embedder.dim)
    engine = ctx.db.engine
    started = time.monotonic()
    with engine.connect() as lock_conn:
        got = store.try_lock_reembed(lock_conn)
        lock_conn.commit()
        if not got:
            raise ReembedError("another re-embed is running on this database; wait for it to finish")
        try:
            with engine.connect() as conn:
                _check_dimensions(conn, name, dim)
                previous = memory_store.get_profile(conn)
                totals = store.vector_totals(conn)
            # A broken endpoint or model fails here, before the store is marked.
            _embed(embedder, ["ultron re-embed probe"], dim)
            with engine.begin() as conn:
                memory_store.lock_profile(conn)
                memory_store.set_profile(conn, name + UNFINISHED, dim)
            counter = _Counter(progress, sum(totals.values()))
            memories = _reembed_rows(engine, embedder, dim, batch_size, counter, store.memory_rows_after,
                                     _memory_text, "memory_records", "embedding", "memories")
            clusters, emptied = _recompute_centroids(engine, batch_size, counter)
            skills = _reembed_rows(engine, embedder, dim, batch_size, counter, store.skill_rows_after,
                                   _skill_text, "skills", "embedding", "skills")
            with engine.begin() as conn:
                memory_store.lock_profile(conn)
                memory_store.set_profile(conn, name, dim)
        finally:
            store.unlock_reembed(lock_conn)
            lock_conn.commit()
    # This context may have checked (and cached) the old profile; the new one is its own.
    ctx._profile_checked = False
    prev = previous[0].removesuffix(UNFINISHED) if previous else None
    log.info("re-embedded %d memories, %d clusters, %d skills with %s", memories, clusters, skills, name)
    return {
        "embedder": name, "dim": dim,
        "previous_embedder": prev,
        "previous_unfinished": bool(previous and previous[0].endswith(UNFINISHED)),
        "memories": memories, "clusters": clusters, "clusters_emptied": emptied, "skills": skills,
        "seconds": round(time.monotonic() - started, 3),
    }


def _check_dimensions(conn, name: str, dim: int) -> None:
    for table, column in store.VECTOR_COLUMNS:
        width = memory_store.column_dim(conn, table, column)
        if width != dim:
            raise ReembedError(
                f"embedder {name} gives {dim}-d vectors but {table}.{column} holds {width}-d vectors; "
                f"re-embedding cannot change the column's size. Configure a {width}-d embedder instead: "
                f"ULTRON_EMBEDDING_PROVIDER=local (all-MiniLM-L6-v2, 384-d), or an OpenAI-compatible model "
                f"that accepts dimensions={width} with ULTRON_EMBEDDING_DIM={width} "
                f"(e.g. text-embedding-3-small). Nothing was changed.")


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


def _memory_text(row) -> str:
    return embedding_text(dict(row._mapping))


def _skill_text(row) -> str:
    """The text the Skill Hub embedded when it published (``SkillDraft.embedding_text``),
    rebuilt from the stored row: the situations are read back from SKILL.md."""
    return skill_embedding_text(row.name or "", row.description or "",
                                when_to_use(row.skill_md) if row.skill_md else [])


def _reembed_rows(engine, embedder, dim: int, batch_size: int, counter: _Counter,
                  rows_after: Callable[..., list[Any]], text_of: Callable[[Any], str], table: str, column: str,
                  what: str) -> int:
    """Re-embed the rows ``rows_after`` returns, batch by batch, into ``table.column``."""
    after, count = "", 0
    while True:
        with engine.begin() as conn:
            rows = rows_after(conn, after, batch_size)
            if not rows:
                return count
            vectors = _embed(embedder, [text_of(r) for r in rows], dim)
            store.update_vectors(conn, table, column, [r.id for r in rows], vectors)
        after = rows[-1].id
        count += len(rows)
        counter.add(len(rows), what)


def _recompute_centroids(engine, batch_size: int, counter: _Counter) -> tuple[int, int]:
    """Each active cluster's centroid becomes the normalised mean of its active members'
    new vectors; one without active members gets none (the index then never offers it)."""
    after, count, emptied = "", 0, 0
    while True:
        with engine.begin() as conn:
            ids = store.active_cluster_ids_after(conn, after, batch_size)
            if not ids:
                return count, emptied
            means = store.member_means(conn, ids)
            vectors = []
            for cid in ids:
                mean = means.get(cid)
                norm = float(np.linalg.norm(mean)) if mean is not None else 0.0
                vectors.append(mean / norm if norm > 0 else None)
            emptied += sum(v is None for v in vectors)
            store.update_vectors(conn, "knowledge_clusters", "centroid", ids, vectors)
        after = ids[-1]
        count += len(ids)
        counter.add(len(ids), "clusters")
