"""Search at 100k and 1M memories (384-d): build cost, disk, latency, recall and memory.

Each size gets a store of its own, filled with N memories whose 384-d vectors are clustered
like real sentence embeddings (unit vectors around 300 topic centres; row i has the same
vector in every store) and whose texts are LoCoMo dev turns, spread over 50 agents. A
store is built the way a bulk load should be: secondary indexes dropped, rows COPYed, then
every index (the HNSW one with ``--maintenance-mem`` and ``--parallel-workers``) rebuilt.
With ``--keep-home DIR`` the stores live in ``DIR/n<size>`` and a later run reuses them
(the build figures printed then are the ones recorded when the store was built).

Per size it prints:

* build time (COPY + lexicon, then the indexes), heap, index and total sizes;
* the server's ``shared_buffers`` (``ULTRON_PG_SHARED_BUFFERS``; run with ``=128MB`` for
  PostgreSQL's default) and ``effective_cache_size``;
* ``search_memories``: the production hybrid search end to end (BM25 arm + HNSW arm,
  fused, boosted, hit counting), with a synthetic query vector (a first pass after the
  server's start, then the same queries again with their pages in ``shared_buffers``) and
  with a real MiniLM query embedding; ``today's``: the search of 86245b9 on the same
  store, the baseline;
* the dense arm as production runs it (ef_search, top 40, iterative scan) and its recall@10
  against ``numpy exact`` (an exact scan in memory); with ``--halfvec``, the same over a
  ``halfvec`` expression index, as is and with its 40 candidates re-scored by the full
  vector (what the fusion does anyway); ``--ef-sweep 200 400 800``: the same at other
  ef_search values;
* a search filtered to one agent among 50: production (one HNSW graph, filter applied
  during the walk) and, with ``--partitions``, a side table LIST-partitioned by agent with
  one HNSW index per partition (pgvector's per-tenant pattern);
* peak RSS of a fresh search process (imports, MiniLM, 50 searches: what ``ultron serve``
  holds after its first searches) and the private memory of its Postgres backend.

Recall@10 is the overlap of the top 10 with the exact top 10.

    python benchmarks/search.py [--sizes 100000 1000000] [--keep-home /work/bench-1m]
           [--halfvec] [--partitions] [--ef-sweep 200 400] [--build-only] [--queries 200]

Building the 1M store takes about 25 minutes on 2 busy cores (COPY 13 min, HNSW 12 min;
the halfvec index another 10, the partitions 4): build it once with ``--build-only`` in
the background, then measure as often as needed. The stores take about 8 GB (1M) and
0.8 GB (100k) of disk.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _support import machine_line, private_home  # noqa: E402
from retrieval import legacy_search  # noqa: E402

DIM = 384
CHUNK = 100_000
AGENTS = 50
WORDS = ("error timeout docker pandas csv import module permission deploy flight booking refund "
         "cache memory index query token network proxy build test commit branch merge schema").split()
HNSW_INDEX = "ix_memory_records_embedding"
HALF_INDEX = "bench_memory_records_embedding_half"
PARTED = "bench_memories_by_agent"


def centres() -> np.ndarray:
    c = np.random.default_rng(7).normal(0, 1, (300, DIM)).astype(np.float32)
    return c / np.linalg.norm(c, axis=1, keepdims=True)


def make_vectors(n: int, rng: np.random.Generator, topics: np.ndarray) -> np.ndarray:
    """Unit vectors around topic centres: same-topic cosine about 0.6, like related sentences."""
    idx = rng.integers(0, len(topics), n)
    v = topics[idx] + rng.normal(0, 0.8 / math.sqrt(DIM), (n, DIM)).astype(np.float32)
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def store_vectors(size: int, topics: np.ndarray) -> np.ndarray:
    """Row i's vector, whatever the store's size: generated in seeded chunks of 100k."""
    parts = [make_vectors(CHUNK, np.random.default_rng([7, c]), topics) for c in range(math.ceil(size / CHUNK))]
    return np.vstack(parts)[:size]


def minilm_vectors(size: int, texts: list[tuple[str, str]], questions: list[str], home: Path,
                   n_queries: int) -> tuple[np.ndarray, np.ndarray]:
    """``--vectors minilm``: row i's vector is MiniLM's embedding of its text (content and
    context, as uploads embed them) plus a little noise, so the texts cycled over the rows
    are near but not exact duplicates; the queries are MiniLM embeddings of the questions.
    Real queries then meet real neighbours, as in a real store: a MiniLM query against the
    synthetic clusters walks much more of the graph than either would in practice. The
    embeddings of the unique texts are cached in ``home``."""
    cache = home / "minilm-texts.npy"
    from ultron.embeddings.local import LocalMiniLMEmbedder

    embedder = LocalMiniLMEmbedder()
    if cache.is_file():
        unique = np.load(cache)
    else:
        unique = embedder.embed([f"{content}\n{context}" for content, context in texts])
        np.save(cache, unique)
    rng = np.random.default_rng(11)
    rows = unique[np.arange(size) % len(unique)] + rng.normal(0, 0.15 / math.sqrt(DIM), (size, DIM)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    queries = embedder.embed([questions[i % len(questions)] for i in range(n_queries)])
    return rows.astype(np.float32), queries.astype(np.float32)


def agent_of(i: int) -> str:
    return f"agent-{i % AGENTS:02d}"


def tags_of(i: int) -> list[str]:
    """Two tags a memory: ``kind-NN`` (20 of them, 5% of the memories each) and ``topic-NNN``
    (200, 0.5% each), spread independently of the agents (``(i // 7)``)."""
    return [f"kind-{(i // 7) % 20:02d}", f"topic-{(i // 3) % 200:03d}"]


def shared_of(i: int) -> bool:
    """About 1% of the memories are shared (what a team's token sees besides its agents')."""
    return i % 97 == 0


def fill(conn, vectors: np.ndarray, texts: list[tuple[str, str]] | None) -> None:
    """COPY the memories (binary vectors); ``texts`` (content, context) pairs are cycled when
    given (real language, so the lexical arm meets real word frequencies), else 8 words."""
    from pgvector.psycopg import register_vector

    raw = conn.connection.driver_connection
    register_vector(raw)
    rng = np.random.default_rng(9)
    with raw.cursor() as cur:
        with cur.copy("COPY memory_records (id, memory_type, content, context, resolution, summary_l0, "
                      "overview_l1, tier, hit_count, agent_id, embedding, tags, shared) FROM STDIN") as copy:
            for i in range(len(vectors)):
                if texts:
                    content, context = texts[i % len(texts)]
                    row = (content, context, "", content[:60], content)
                else:
                    words = " ".join(rng.choice(WORDS, 8))
                    row = (f"memory {i}: {words}", "bench", "resolution " + words, words[:60], words)
                copy.write_row((str(uuid.UUID(int=i + 1)), "error", *row, "WARM", int(rng.integers(0, 50)),
                                agent_of(i), vectors[i], tags_of(i), shared_of(i)))


def secondary_indexes(conn) -> list[tuple[str, str]]:
    import sqlalchemy as sa

    return [tuple(r) for r in conn.execute(sa.text(
        "SELECT i.relname, pg_get_indexdef(i.oid) FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
        "WHERE x.indrelid = 'memory_records'::regclass "
        "AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.oid)"))]


def maintenance(conn, args: argparse.Namespace) -> None:
    conn.exec_driver_sql(f"SET maintenance_work_mem = '{args.maintenance_mem}'; "
                         f"SET max_parallel_maintenance_workers = {int(args.parallel_workers)}")


def reused_build(db, home: Path, size: int, record: Path) -> dict[str, Any] | None:
    """The figures of a store of ``size`` memories already built in ``home`` (``--keep-home``),
    or None when it is empty; a store of another size stops the run."""
    import sqlalchemy as sa

    with db.engine.connect() as conn:
        have = conn.execute(sa.text("SELECT count(*) FROM memory_records")).scalar_one()
    if have == size and record.is_file():
        return json.loads(record.read_text()) | {"reused": True}
    if have:
        raise SystemExit(f"{home} holds {have:,} memories, not {size:,}: remove it or use another --keep-home")
    return None


def build(db, home: Path, size: int, vectors: np.ndarray, texts, args: argparse.Namespace) -> dict[str, Any]:
    """Bulk-load ``size`` memories (or reuse them): the figures go to ``home/build.json``."""
    import sqlalchemy as sa

    record = home / "build.json"
    reused = reused_build(db, home, size, record)
    if reused is not None:
        return reused
    log(f"building {size:,} memories in {home}")
    t0 = time.perf_counter()
    with db.engine.begin() as conn:
        indexes = secondary_indexes(conn)
        for name, _ in indexes:
            conn.execute(sa.text(f"DROP INDEX {name}"))
        # bulk load: the BM25 statistics are rebuilt once at the end, not row by row
        conn.execute(sa.text("ALTER TABLE memory_records DISABLE TRIGGER memory_records_lexicon"))
        fill(conn, vectors, texts)
        conn.execute(sa.text("ALTER TABLE memory_records ENABLE TRIGGER memory_records_lexicon"))
        conn.execute(sa.text("SELECT ultron_lexicon_rebuild()"))
    out: dict[str, Any] = {"size": size, "load_s": time.perf_counter() - t0, "index_s": {},
                           "maintenance_work_mem": args.maintenance_mem, "parallel_workers": args.parallel_workers,
                           "built_at": time.strftime("%Y-%m-%d %H:%M")}
    log(f"loaded in {out['load_s']:.0f} s; indexing")
    with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        maintenance(conn, args)
        for name, ddl in indexes:
            t = time.perf_counter()
            conn.exec_driver_sql(ddl)
            out["index_s"][name] = time.perf_counter() - t
            log(f"  {name}: {out['index_s'][name]:.0f} s")
        conn.exec_driver_sql("VACUUM (ANALYZE) memory_records")
    record.write_text(json.dumps(out, indent=1))
    return out


def build_halfvec(db, home: Path, args: argparse.Namespace) -> dict[str, Any]:
    """A second HNSW index over the same column cast to half precision (an expression index:
    no new column), built once per store."""
    record = home / "halfvec.json"
    if record.is_file():
        return json.loads(record.read_text())
    log("building the halfvec index")
    with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        maintenance(conn, args)
        t = time.perf_counter()
        conn.exec_driver_sql(f"CREATE INDEX IF NOT EXISTS {HALF_INDEX} ON memory_records USING hnsw "
                             f"((embedding::halfvec({DIM})) halfvec_cosine_ops) WITH (m = 16, ef_construction = 64)")
        out = {"index_s": time.perf_counter() - t}
    record.write_text(json.dumps(out))
    return out


def build_partitions(db, home: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The per-tenant side table: LIST partitions by agent, each with its own HNSW index."""
    record = home / "partitions.json"
    if record.is_file():
        return json.loads(record.read_text())
    log("building the partitioned side table")
    with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        maintenance(conn, args)
        conn.exec_driver_sql(f"DROP TABLE IF EXISTS {PARTED}")
        conn.exec_driver_sql(f"CREATE TABLE {PARTED} (id text, agent_id text NOT NULL, embedding vector({DIM})) "
                             "PARTITION BY LIST (agent_id)")
        for a in range(AGENTS):
            conn.exec_driver_sql(f"CREATE TABLE {PARTED}_{a:02d} PARTITION OF {PARTED} FOR VALUES IN "
                                 f"('{agent_of(a)}')")
        t = time.perf_counter()
        conn.exec_driver_sql(f"INSERT INTO {PARTED} SELECT id, agent_id, embedding FROM memory_records")
        load = time.perf_counter() - t
        t = time.perf_counter()
        conn.exec_driver_sql(f"CREATE INDEX ON {PARTED} USING hnsw (embedding vector_cosine_ops) "
                             "WITH (m = 16, ef_construction = 64)")
        out = {"load_s": load, "index_s": time.perf_counter() - t}
        conn.exec_driver_sql(f"ANALYZE {PARTED}")
    record.write_text(json.dumps(out))
    return out


def relation_sizes(conn) -> dict[str, int]:
    import sqlalchemy as sa

    return dict(conn.execute(sa.text(
        "SELECT pg_relation_size('memory_records') AS heap, pg_indexes_size('memory_records') AS indexes, "
        "pg_total_relation_size('memory_records') AS total, "
        f"pg_relation_size('{HNSW_INDEX}') AS hnsw, "
        f"coalesce(pg_relation_size(to_regclass('{HALF_INDEX}')), 0) AS half, "
        f"coalesce((SELECT sum(pg_relation_size(c.oid)) FROM pg_class c WHERE c.relname LIKE '{PARTED}%' "
        "AND c.relkind = 'i'), 0) AS parted")).one()._mapping)


def load_texts(kind: str) -> tuple[list[tuple[str, str]] | None, list[str]]:
    """LoCoMo dev turns as (content, context) with the retrieval benchmark's protocol, and its
    questions (queries for the end-to-end rows); (None, []) when ../shared is absent."""
    from retrieval import LOCOMO, turns_of  # benchmarks/retrieval.py

    if kind != "locomo" or not LOCOMO.is_file():
        return None, []
    data = json.loads(LOCOMO.read_text(encoding="utf-8"))
    texts = [(t["content"], t["context"]) for s in data for t in turns_of(s["conversation"])]
    questions = [str(q["question"]) for s in data for q in s["qa"]]
    return texts, questions


def percentile(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def proc_status(pid: int | str = "self") -> dict[str, int]:
    """VmRSS / RssAnon / RssShmem / VmHWM of a process, in kB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM", "RssAnon", "RssShmem"):
            out[key] = int(rest.split()[0])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--keep-home", type=Path, help="keep (and reuse) the stores in DIR/n<size>, outside the repo")
    ap.add_argument("--build-only", action="store_true", help="build (or check) the stores, measure nothing")
    ap.add_argument("--halfvec", action="store_true", help="also build and time a halfvec HNSW index")
    ap.add_argument("--ef-sweep", type=int, nargs="*", default=[], metavar="EF",
                    help="also time the dense arm at these hnsw.ef_search values")
    ap.add_argument("--partitions", action="store_true", help="also build and time a per-agent partitioned copy")
    ap.add_argument("--maintenance-mem", default="5GB", help="maintenance_work_mem of the index builds")
    ap.add_argument("--parallel-workers", type=int, default=1, help="max_parallel_maintenance_workers")
    ap.add_argument("--loop-max", type=int, default=100_000, help="largest size timed with the pure-Python loop")
    ap.add_argument("--text", choices=("words", "locomo"), default="locomo",
                    help="memory texts: LoCoMo dev turns cycled (default, when ../shared is there) or 8 random words")
    ap.add_argument("--vectors", choices=("synthetic", "minilm"), default="synthetic",
                    help="store vectors: clustered random unit vectors (default; what the 1M figures use) or "
                         "MiniLM embeddings of the LoCoMo texts with a little noise (needs ../shared)")
    ap.add_argument("--no-minilm", action="store_true", help="skip the rows with a MiniLM query")
    ap.add_argument("--rss-child", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rss_child:
        return rss_child(args.rss_child)
    print(machine_line())
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    texts, questions = load_texts(args.text)
    if args.vectors == "minilm":
        if not texts:
            ap.error("--vectors minilm needs the LoCoMo texts of ../shared/data")
        print(f"vectors: {DIM}-d MiniLM embeddings of the LoCoMo dev texts (cycled, plus noise), {AGENTS} agents; "
              f"{args.queries} LoCoMo questions as queries; HNSW m=16, ef_construction=64\n")
    else:
        print(f"vectors: {DIM}-d, clustered around 300 topic centres, {AGENTS} agents; {args.queries} queries near "
              f"random centres; HNSW m=16, ef_construction=64\n")
    topics = centres()
    for size in sorted(args.sizes):
        if args.keep_home:
            home = args.keep_home.resolve() / (f"n{size}" + ("-minilm" if args.vectors == "minilm" else ""))
            home.mkdir(parents=True, exist_ok=True)
            os.environ["ULTRON_HOME"] = str(home)
            run_size(args, home, size, topics, texts, questions)
        else:
            with private_home("ultron-bench-search-") as home:
                run_size(args, home, size, topics, texts, questions)
    print("goals: p50 <= 20 ms at 1M, recall@10 >= 0.95, search process < 600 MB RSS")
    return 0


class FixedEmbedder:
    """Never called: the synthetic rows pass their query vector to the search themselves."""

    name, dim = "bench:synthetic", DIM

    def embed_one(self, text: str) -> np.ndarray:
        raise AssertionError("the synthetic rows pass their vector")

    def embed(self, texts):
        raise AssertionError("the synthetic rows pass their vector")


def run_size(args, home: Path, size: int, topics, texts, questions) -> None:
    import sqlalchemy as sa

    from ultron.context import ServiceContext
    from ultron.memory.service import MemoryService
    from ultron.sdk import Ultron
    from ultron.settings import Settings

    settings = Settings.from_env(embedding_provider="hash", search_min_score=0.0)
    client = Ultron(settings)
    if args.vectors == "minilm":
        vectors, minilm_queries = minilm_vectors(size, texts, questions, home, args.queries)
    else:
        vectors = store_vectors(size, topics)
    info = build(client.db, home, size, vectors, texts, args)
    half = build_halfvec(client.db, home, args) if args.halfvec else None
    parted = build_partitions(client.db, home, args) if args.partitions else None
    if args.build_only:
        print(f"{size:,}: {json.dumps(info)} halfvec={half} partitions={parted}")
        return
    no_redaction = type("NoRedaction", (), {"redact": staticmethod(lambda s: s)})()
    memory = MemoryService(ServiceContext(client.db, settings, embedder=FixedEmbedder(), redactor=None))
    memory._redactor, memory._profile_checked = no_redaction, True
    rng = np.random.default_rng([8, size])
    queries = minilm_queries if args.vectors == "minilm" else make_vectors(args.queries, rng, topics)
    qtexts = [questions[i % len(questions)] if questions else "deploy error timeout" for i in range(args.queries)]
    ids = np.array([str(uuid.UUID(int=i + 1)) for i in range(size)])
    ef = max(settings.hnsw_ef_search, 40)

    def exact(q: np.ndarray, rows: np.ndarray | None = None) -> set[str]:
        sims = vectors @ q if rows is None else vectors[rows] @ q
        top = np.argpartition(-sims, 10)[:10]
        return set(ids[top if rows is None else rows[top]])

    t0 = time.perf_counter()
    truth = [exact(q) for q in queries]
    numpy_p50 = (time.perf_counter() - t0) / len(queries)  # the mean, as p50

    results: list[tuple[str, list[float], float | None]] = []

    def timed_ann(name: str, sql: str, cast: str, truths: list[set[str]], ef_search: int = ef) -> None:
        times, recalls = [], []
        with client.db.engine.connect() as conn:
            conn.exec_driver_sql(f"SET hnsw.ef_search = {ef_search}; SET hnsw.iterative_scan = relaxed_order")
            for q, tr in zip(queries, truths):
                vec = "[" + ",".join(f"{x:.7g}" for x in q) + "]"
                t0 = time.perf_counter()
                got = conn.execute(sa.text(sql.format(cast=cast)), {"q": vec}).scalars().all()
                times.append(time.perf_counter() - t0)
                recalls.append(len(set(got[:10]) & tr) / 10)
        results.append((name, times, statistics.mean(recalls)))

    # production end to end, synthetic vector (the real question text feeds the BM25 arm):
    # the first pass meets whatever the server's cache holds (cold after a start), the
    # second the same queries again, with the pages they need in shared_buffers if they fit
    for label in ("search_memories", "search_memories (2nd pass)"):
        times = []
        for q, text in zip(queries, qtexts):
            t0 = time.perf_counter()
            memory._search(text, q, 10, {"tier": None, "tags": None, "agent_id": None})
            times.append(time.perf_counter() - t0)
        results.append((label, times, None))
    real_times, legacy_times = minilm_rows(args, client, settings, questions, size, no_redaction)
    if real_times:
        results.append(("search + MiniLM query", real_times, None))
        results.append(("today's + MiniLM query", legacy_times, None))
    dense = ("SELECT id FROM memory_records WHERE status = 'active' ORDER BY embedding{cast} <=> "
             "CAST(:q AS vector){cast} LIMIT 40")
    timed_ann("dense arm (vector)", dense, "", truth)
    rerank = ("SELECT id FROM (" + dense + ") c ORDER BY (SELECT embedding FROM memory_records m WHERE m.id = c.id) "
              "<=> CAST(:q AS vector)")
    if half is not None:
        timed_ann("dense arm (halfvec)", dense, f"::halfvec({DIM})", truth)
        # what production would do with it: the 40 candidates scored by the full vector
        # (the fusion reads 1 - (embedding <=> q) of each candidate anyway)
        timed_ann("dense arm (halfvec, rerank)", rerank, f"::halfvec({DIM})", truth)
    for ef_search in args.ef_sweep:  # what a larger ULTRON_HNSW_EF_SEARCH buys
        timed_ann(f"dense arm (vector) ef {ef_search}", dense, "", truth, ef_search)
        if half is not None:
            timed_ann(f"  halfvec, rerank, ef {ef_search}", rerank, f"::halfvec({DIM})", truth, ef_search)
    # filtered to one agent among 50
    agents = [agent_of(i) for i in range(args.queries)]
    rows_of = {a: np.arange(int(a[-2:]), size, AGENTS) for a in set(agents)}
    agent_truth = [exact(q, rows_of[a]) for q, a in zip(queries, agents)]
    times = []
    for q, text, a in zip(queries, qtexts, agents):
        t0 = time.perf_counter()
        memory._search(text, q, 10, {"tier": None, "tags": None, "agent_id": a})
        times.append(time.perf_counter() - t0)
    results.append(("search, one agent", times, None))
    agent_sql = ("SELECT id FROM {table} WHERE agent_id = :a AND {cond} ORDER BY embedding <=> CAST(:q AS vector) "
                 "LIMIT 40")
    filtered_ann(results, client, queries, agents, agent_truth, ef,
                 agent_sql.format(table="memory_records", cond="status = 'active'"), "agent arm (one graph)")
    if parted is not None:
        filtered_ann(results, client, queries, agents, agent_truth, ef,
                     agent_sql.format(table=PARTED, cond="true"), "agent arm (partitioned)")
    if size <= args.loop_max:
        results.append(("python loop (DB rows)", python_loop(client, queries[:3]), None))

    with client.db.engine.connect() as conn:
        sz = relation_sizes(conn)
        sz["server"] = {k: conn.exec_driver_sql(f"SHOW {k}").scalar_one() for k in ("shared_buffers",
                                                                                     "effective_cache_size")}
    rss = measure_rss(home, questions) if not args.no_minilm else {}
    report(size, info, half, parted, sz, results, numpy_p50, rss)
    if args.vectors == "minilm":
        print(f"(recall@10 with --vectors minilm compares rows that repeat each of {len(texts):,} texts with "
              "noise: near-ties, not HNSW's recall; that is the synthetic run's column)\n")


def filtered_ann(results, client, queries, agents, truths, ef, sql, name) -> None:
    import sqlalchemy as sa

    times, recalls = [], []
    with client.db.engine.connect() as conn:
        conn.exec_driver_sql(f"SET hnsw.ef_search = {ef}; SET hnsw.iterative_scan = relaxed_order")
        for q, a, tr in zip(queries, agents, truths):
            vec = "[" + ",".join(f"{x:.7g}" for x in q) + "]"
            t0 = time.perf_counter()
            got = conn.execute(sa.text(sql), {"q": vec, "a": a}).scalars().all()
            times.append(time.perf_counter() - t0)
            recalls.append(len(set(got[:10]) & tr) / 10)
    results.append((name, times, statistics.mean(recalls)))


def minilm_rows(args, client, settings, questions, size, no_redaction) -> tuple[list[float], list[float]]:
    """This build's search and today's, each with a real MiniLM query embedding (fresh text)."""
    if args.no_minilm or not questions:
        return [], []
    from ultron.context import ServiceContext
    from ultron.embeddings.query_cache import QUERIES
    from ultron.memory.service import MemoryService
    from ultron.settings import Settings

    QUERIES.clear()
    real = MemoryService(ServiceContext(client.db, Settings.from_env(), redactor=None))
    real._redactor = no_redaction
    real.check_embedding_profile = lambda: None  # synthetic store vectors, real query embeddings: timing only
    real.embedder.embed_one("warm up")
    n = min(args.queries, len(questions))
    real_times, legacy_times = [], []
    # Alternating blocks of 50 queries: drift in the machine's load hits both alike, and
    # neither pays for the other's cache misses on every query (one by one, both were slower).
    for start in range(0, n, 50):
        for i in range(start, min(n, start + 50)):
            t0 = time.perf_counter()
            real.search_memories(questions[(i + size) % len(questions)], detail_level="l1", limit=10)
            real_times.append(time.perf_counter() - t0)
        for i in range(start, min(n, start + 50)):
            qtext = questions[(i + size + 1) % len(questions)] + " ?"  # not in the query cache
            t0 = time.perf_counter()
            with client.db.engine.begin() as conn:
                legacy_search(conn, real.embedder.embed_one(qtext), qtext, None, 10, settings.search_min_score)
            legacy_times.append(time.perf_counter() - t0)
    return real_times, legacy_times


def python_loop(client, queries) -> list[float]:
    """The reference's approach: every row into Python, cosine one by one."""
    import sqlalchemy as sa

    times = []
    with client.db.engine.connect() as conn:
        for q in queries:
            ql = [float(x) for x in q]
            t0 = time.perf_counter()
            best = []
            for rid, emb in conn.execute(sa.text("SELECT id, embedding::text FROM memory_records")):
                v = [float(x) for x in emb[1:-1].split(",")]
                best.append((sum(a * b for a, b in zip(ql, v)), rid))
            best.sort(reverse=True)
            times.append(time.perf_counter() - t0)
    return times


def measure_rss(home: Path, questions: list[str]) -> dict[str, Any]:
    """A fresh process that does what ``ultron serve`` does for a search (imports, MiniLM,
    50 searches through ``Ultron``), so the figure is not this process's vectors."""
    env = {**os.environ, "ULTRON_HOME": str(home)}
    qs = questions[:50] or [f"deploy error timeout {i}" for i in range(50)]
    out = subprocess.run([sys.executable, __file__, "--rss-child", str(home)], env=env, input=json.dumps(qs),
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def rss_child(home: Path) -> int:
    import sqlalchemy as sa

    from ultron.sdk import Ultron
    from ultron.settings import Settings

    queries = json.loads(sys.stdin.read())
    client = Ultron(Settings.from_env())
    client.memory.check_embedding_profile = lambda: None  # synthetic store vectors
    for q in queries:
        client.memory.search_memories(q, limit=10)
    with client.db.engine.connect() as a, client.db.engine.connect() as b:  # the pool's two search backends
        pids = [c.execute(sa.text("SELECT pg_backend_pid()")).scalar_one() for c in (a, b)]
    backends = [proc_status(p) for p in pids if Path(f"/proc/{p}/status").exists()]
    # VmHWM, not getrusage's ru_maxrss: that one keeps the peak of the forked parent
    # from before the exec (this benchmark's 1.5 GB of vectors), VmHWM starts again at exec.
    me = proc_status()
    print(json.dumps({"peak_mb": me["VmHWM"] / 1024, "rss_mb": me["VmRSS"] / 1024,
                      "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "backend_anon_mb": max((b["RssAnon"] for b in backends), default=0) / 1024,
                      "backend_shmem_mb": max((b["RssShmem"] for b in backends), default=0) / 1024}))
    return 0


def report(size, info, half, parted, sz, results, numpy_p50, rss) -> None:
    mb = 1024 * 1024
    reused = f" (recorded {info['built_at']}, reused)" if info.get("reused") else ""
    hnsw_s = info["index_s"].get(HNSW_INDEX, 0.0)
    print(f"== {size:,} memories ==")
    print(f"build: load {info['load_s']:.0f} s + indexes {sum(info['index_s'].values()):.0f} s "
          f"(HNSW {hnsw_s:.0f} s, maintenance_work_mem {info['maintenance_work_mem']}, "
          f"{info['parallel_workers']} parallel worker(s)){reused}")
    print(f"size: heap {sz['heap'] / mb:,.0f} MB, indexes {sz['indexes'] / mb:,.0f} MB "
          f"(HNSW vector {sz['hnsw'] / mb:,.0f} MB), total {sz['total'] / mb:,.0f} MB")
    print(f"server: shared_buffers {sz['server']['shared_buffers']}, effective_cache_size "
          f"{sz['server']['effective_cache_size']} (ULTRON_PG_SHARED_BUFFERS, default a quarter of RAM up to 4 GB)")
    if half is not None:
        print(f"halfvec HNSW: {sz['half'] / mb:,.0f} MB ({sz['half'] / max(sz['hnsw'], 1):.2f} of vector), "
              f"built in {half['index_s']:.0f} s ({half['index_s'] / max(hnsw_s, 1e-9):.2f} of vector)")
    if parted is not None:
        print(f"per-agent partitions: {AGENTS} HNSW indexes, {sz['parted'] / mb:,.0f} MB, "
              f"built in {parted['index_s']:.0f} s ({parted['index_s'] / max(hnsw_s, 1e-9):.2f} of one graph)")
    loads = f", load average {os.getloadavg()[0]:.2f} at the end"
    print(f"{'method':30} {'p50 ms':>8} {'p99 ms':>8} {'recall@10':>9} {'p50 / today':>12}{loads}")
    base = next((statistics.median(t) for n, t, _ in results if n.startswith("today")), None)
    for name, times, recall in results:
        p50 = statistics.median(times)
        ratio = f"{p50 / base:11.2f}x" if base else ""
        print(f"{name:30} {p50 * 1e3:8.2f} {percentile(times, 99) * 1e3:8.2f} "
              f"{'' if recall is None else f'{recall:.3f}':>9} {ratio:>12}")
    print(f"{'numpy exact (in memory)':30} {numpy_p50 * 1e3:8.2f} {'':>8} {1.0:9.3f}")
    if rss:
        print(f"search process (fresh, MiniLM, 50 searches): peak RSS {rss['peak_mb']:.0f} MB (VmHWM); "
              f"its Postgres backend: {rss['backend_anon_mb']:.0f} MB private + "
              f"{rss['backend_shmem_mb']:.0f} MB of shared buffers touched")
    print()


if __name__ == "__main__":
    sys.exit(main())
