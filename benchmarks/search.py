"""Search latency and recall at 10k and 100k memories (384-d), against two baselines.

Fills a private store with N memories whose 384-d vectors are clustered like real
sentence embeddings (unit vectors around a few hundred topic centres), then times:

* ``hnsw``: the production path, ``MemoryService.search_memories`` (HNSW ANN + full
  text, fused, boosted, with hit counting), end to end through Postgres;
* ``ann only``: the bare pgvector HNSW query (ORDER BY embedding <=> q LIMIT 10);
* ``numpy exact``: an exact scan of all vectors in memory (the recall reference);
* ``python loop``: a pure-Python loop over every row computing cosine one by one,
  the way the reference implementation searches (timed on a sample of queries).

Recall@10 is the overlap of the ANN top 10 with the exact top 10.

    python benchmarks/search.py [--sizes 10000 100000] [--queries 200]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
import uuid
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _support import machine_line, private_home  # noqa: E402
from retrieval import legacy_search  # noqa: E402

DIM = 384
WORDS = ("error timeout docker pandas csv import module permission deploy flight booking refund "
         "cache memory index query token network proxy build test commit branch merge schema").split()


def make_vectors(n: int, rng: np.random.Generator, centres: np.ndarray) -> np.ndarray:
    """Unit vectors around topic centres: same-topic cosine about 0.6, like related sentences."""
    idx = rng.integers(0, len(centres), n)
    v = centres[idx] + rng.normal(0, 0.8 / math.sqrt(DIM), (n, DIM)).astype(np.float32)
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def fill(conn, n: int, vectors: np.ndarray, rng: np.random.Generator, start: int = 0,
         texts: list[tuple[str, str]] | None = None) -> None:
    """COPY n memories; ``texts`` (content, context) pairs are cycled when given (real language,
    so the lexical arm meets real word frequencies), else 8 words of a small vocabulary."""
    raw = conn.connection.driver_connection
    with raw.cursor() as cur:
        with cur.copy("COPY memory_records (id, memory_type, content, context, resolution, summary_l0, "
                      "overview_l1, tier, hit_count, embedding) FROM STDIN") as copy:
            for i in range(n):
                words = " ".join(rng.choice(WORDS, 8))
                vec = "[" + ",".join(f"{x:.6f}" for x in vectors[i]) + "]"
                if texts:
                    content, context = texts[(start + i) % len(texts)]
                    row = (content, context, "", content[:60], content)
                else:
                    row = (f"memory {start + i}: {words}", "bench", "resolution " + words, words[:60], words)
                copy.write_row((str(uuid.UUID(int=start + i + 1)), "error", *row, "WARM",
                                int(rng.integers(0, 50)), vec))


def load_texts(kind: str) -> tuple[list[tuple[str, str]] | None, list[str]]:
    """LoCoMo dev turns as (content, context) with the retrieval benchmark's protocol, and its
    questions (queries for the end-to-end rows); (None, []) when ../shared is absent."""
    from retrieval import LOCOMO, turns_of  # benchmarks/retrieval.py

    if kind != "locomo" or not LOCOMO.is_file():
        return None, []
    import json

    data = json.loads(LOCOMO.read_text(encoding="utf-8"))
    texts = [(t["content"], t["context"]) for s in data for t in turns_of(s["conversation"])]
    questions = [str(q["question"]) for s in data for q in s["qa"]]
    return texts, questions


def percentile(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--loop-queries", type=int, default=5)
    ap.add_argument("--text", choices=("words", "locomo"), default="locomo",
                    help="memory texts: LoCoMo dev turns cycled (default, when ../shared is there) or 8 random words")
    ap.add_argument("--no-minilm", action="store_true", help="skip the end-to-end rows with a MiniLM query")
    args = ap.parse_args()
    with private_home("ultron-bench-search-"):
        return run(args)


class FixedEmbedder:
    """Returns the benchmark's query vectors in order (the store holds synthetic vectors)."""

    name, dim = "bench:synthetic", DIM

    def __init__(self) -> None:
        self.queue: list[np.ndarray] = []

    def embed_one(self, text: str) -> np.ndarray:
        return self.queue.pop(0)

    def embed(self, texts):
        return np.stack([self.embed_one(t) for t in texts])


def run(args: argparse.Namespace) -> int:
    import sqlalchemy as sa

    from ultron.context import ServiceContext
    from ultron.memory.service import MemoryService
    from ultron.sdk import Ultron
    from ultron.settings import Settings

    settings = Settings.from_env(embedding_provider="hash", search_min_score=0.0)
    client = Ultron(settings)
    rng = np.random.default_rng(7)
    centres = rng.normal(0, 1, (300, DIM)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    embedder = FixedEmbedder()
    memory = MemoryService(ServiceContext(client.db, settings, embedder=embedder, redactor=None))
    memory._redactor = type("NoRedaction", (), {"redact": staticmethod(lambda s: s)})()
    memory._profile_checked = True

    texts, questions = load_texts(args.text)
    real = None
    if not args.no_minilm and questions:
        from ultron.embeddings.query_cache import QUERIES

        QUERIES.clear()
        real = MemoryService(ServiceContext(client.db, Settings.from_env(), redactor=None))
        real._redactor = memory._redactor
        real.check_embedding_profile = lambda: None  # synthetic store vectors, real query embeddings: timing only
    print(machine_line())
    print(f"vectors: {DIM}-d, clustered around 300 topic centres; {args.queries} queries near random centres; "
          f"HNSW m=16, ef_construction=64, ef_search={settings.hnsw_ef_search}\n")
    header = (f"{'memories':>9} {'method':22} {'p50 ms':>8} {'p99 ms':>8} {'recall@10':>9} {'vs python loop':>15}")
    print(header)
    stored = 0
    all_vectors = np.zeros((0, DIM), dtype=np.float32)
    for size in sorted(args.sizes):
        add = size - stored
        vectors = make_vectors(add, rng, centres)
        t0 = time.perf_counter()
        with client.db.engine.begin() as conn:
            conn.execute(sa.text("SET LOCAL maintenance_work_mem = '512MB'"))
            # bulk load: the BM25 statistics are rebuilt once at the end, not row by row
            conn.execute(sa.text("ALTER TABLE memory_records DISABLE TRIGGER memory_records_lexicon"))
            fill(conn, add, vectors, rng, start=stored, texts=texts)
            conn.execute(sa.text("ALTER TABLE memory_records ENABLE TRIGGER memory_records_lexicon"))
            conn.execute(sa.text("SELECT ultron_lexicon_rebuild()"))
        load = time.perf_counter() - t0
        with client.db.engine.begin() as conn:
            conn.execute(sa.text("ANALYZE memory_records"))
        all_vectors = np.vstack([all_vectors, vectors])
        stored = size
        ids = [str(uuid.UUID(int=i + 1)) for i in range(stored)]
        queries = make_vectors(args.queries, rng, centres)

        # exact reference (numpy, in memory)
        exact_top, numpy_times = [], []
        for q in queries:
            t = time.perf_counter()
            sims = all_vectors @ q
            top = np.argpartition(-sims, 10)[:10]
            top = top[np.argsort(-sims[top])]
            numpy_times.append(time.perf_counter() - t)
            exact_top.append({ids[i] for i in top})

        # bare HNSW
        ann_times, recalls = [], []
        with client.db.engine.connect() as conn:
            conn.execute(sa.text(f"SET hnsw.ef_search = {settings.hnsw_ef_search}"))
            for q, truth in zip(queries, exact_top):
                vec = "[" + ",".join(f"{x:.6f}" for x in q) + "]"
                t = time.perf_counter()
                got = conn.execute(sa.text("SELECT id FROM memory_records WHERE status = 'active' "
                                           "ORDER BY embedding <=> CAST(:q AS vector) LIMIT 10"), {"q": vec}).scalars().all()
                ann_times.append(time.perf_counter() - t)
                recalls.append(len(set(got) & truth) / 10)

        # production search path
        search_times = []
        for q in queries:
            embedder.queue.append(q)
            t = time.perf_counter()
            memory.search_memories("deploy error timeout", detail_level="l1", limit=10)
            search_times.append(time.perf_counter() - t)

        # end to end with a real query embedding: this build's search and today's (86245b9)
        real_times, legacy_times = [], []
        if real is not None:
            for i in range(min(args.queries, len(questions))):
                qtext = questions[(i + size) % len(questions)]
                t = time.perf_counter()
                real.search_memories(qtext, detail_level="l1", limit=10)
                real_times.append(time.perf_counter() - t)
            for i in range(min(args.queries, len(questions))):
                qtext = questions[(i + size + 1) % len(questions)] + " ?"  # not in the query cache
                t = time.perf_counter()
                with client.db.engine.begin() as conn:
                    legacy_search(conn, real.embedder.embed_one(qtext), qtext, None, 10, settings.search_min_score)
                legacy_times.append(time.perf_counter() - t)

        # the reference's approach: every row into Python, cosine one by one
        loop_times = []
        with client.db.engine.connect() as conn:
            for q in queries[: args.loop_queries]:
                ql = [float(x) for x in q]
                t = time.perf_counter()
                best = []
                for rid, emb in conn.execute(sa.text("SELECT id, embedding::text FROM memory_records")):
                    v = [float(x) for x in emb[1:-1].split(",")]
                    dot = sum(a * b for a, b in zip(ql, v))
                    best.append((dot, rid))
                best.sort(reverse=True)
                loop_times.append(time.perf_counter() - t)
        loop_p50 = statistics.median(loop_times)

        def row(name, times, recall=None):
            p50 = statistics.median(times)
            print(f"{size:>9,} {name:22} {p50 * 1e3:8.2f} {percentile(times, 99) * 1e3:8.2f} "
                  f"{'' if recall is None else f'{recall:.3f}':>9} {loop_p50 / p50:14.0f}x")

        row("search_memories (HNSW)", search_times)
        if real_times:
            row("search + MiniLM query", real_times)
            row("today's + MiniLM query", legacy_times)
            print(f"{'':>9} this build / today's search, p50 end to end: "
                  f"{statistics.median(real_times) / statistics.median(legacy_times):.2f}")
        row("ann only (HNSW)", ann_times, statistics.mean(recalls))
        row("numpy exact (memory)", numpy_times, 1.0)
        row("python loop (DB rows)", loop_times)
        print(f"{'':>9} (load {add:,} rows + index in {load:.1f} s)\n")
    print("goals: p50 <= 10 ms at 100k, recall@10 >= 0.95, >= 100x faster than the Python loop")
    return 0


if __name__ == "__main__":
    sys.exit(main())
