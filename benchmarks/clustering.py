"""Knowledge clusters: batch clustering time and between-runs assignment latency.

Batch clustering, on synthetic 384-d memories shaped like sentence embeddings
(unit vectors around topic centres that share a common direction; topic sizes follow
a Zipf law; 10% background memories belong to no topic):

* ``ultron``: ``ultron.clusters.density.cluster_labels``, the production pipeline:
  exact HDBSCAN (``generic``, dense BLAS distances) on raw vectors up to
  ``EXACT_MAX`` memories, PCA to ``PCA_DIMS`` + Prim KD-tree above;
* ``plain hdbscan``: ``hdbscan.HDBSCAN(min_cluster_size=3)`` on the raw 384-d vectors,
  default algorithm (the baseline);
* for reference (``--variants``), other reductions: PCA to 64 and 96 dimensions.

Quality columns: clusters found, noise, and *topics recovered*: the share of true
topics with at least 5 members whose majority lands in one cluster that is >= 80% theirs.

``run_clustering`` end to end (``--e2e-sizes``): a store filled through COPY, then
the whole service run (load, cluster, match, rules topics, bulk writes), first run and
an unchanged re-run.

Assignment between runs: ``ClusterService.assign_memory_to_cluster`` (HNSW index on the
centroids, row lock, incremental centroid, membership) with 10, 1,000 and 10,000
active clusters, against the reference implementation's approach: every centroid
loaded into Python and compared in a loop.

    python benchmarks/clustering.py [--sizes 1000 5000 20000] [--clusters 10 1000 10000]
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

DIM = 384
WORDS = ("error timeout docker pandas csv import module permission deploy flight booking refund cache memory "
         "index query token network proxy build test commit branch merge schema kafka redis nginx celery oauth "
         "webhook cron lambda terraform helm ingress pod replica shard vacuum").split()


def make_store(n: int, rng: np.random.Generator, noise: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    """(unit vectors, true topic per row or -1); about one topic per 20 memories."""
    k = max(1, n // 20)
    common = rng.normal(0, 1, DIM)
    common /= np.linalg.norm(common)
    centres = rng.normal(0, 1, (k, DIM))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    centres = 0.5 * common + centres
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    weights = 1 / np.arange(1, k + 1) ** 0.8
    truth = rng.choice(k, n, p=weights / weights.sum())
    x = centres[truth] + rng.normal(0, 1 / math.sqrt(DIM), (n, DIM))
    background = int(n * noise)
    x[:background] = 0.5 * common + rng.normal(0, 1 / math.sqrt(DIM), (background, DIM))
    truth[:background] = -1
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32), truth


def recovered(truth: np.ndarray, labels: np.ndarray, min_size: int = 5) -> float:
    ok = total = 0
    for t in np.unique(truth[truth >= 0]):
        mine = truth == t
        if mine.sum() < min_size:
            continue
        total += 1
        got = labels[mine]
        got = got[got >= 0]
        if not len(got):
            continue
        best = np.bincount(got).argmax()
        ok += (got == best).sum() >= 0.5 * mine.sum() and (truth[labels == best] == t).mean() >= 0.8
    return ok / total if total else 1.0


def time_labels(fn) -> tuple[float, np.ndarray]:
    t = time.perf_counter()
    labels = fn()
    return time.perf_counter() - t, labels


def batch_table(args: argparse.Namespace, rng: np.random.Generator) -> None:
    import hdbscan

    from ultron.clusters import density

    print("## Batch clustering (HDBSCAN, min_cluster_size=3)\n")
    print("| memories | method | seconds | plain / this | clusters | noise | topics recovered |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for n in args.sizes:
        x, truth = make_store(n, rng)
        rows = []
        ours_s, ours = time_labels(lambda: density.cluster_labels(x, 3))
        rows.append((f"ultron: {density.pipeline_for(n)}", ours_s, ours))
        base_s = None
        if n <= args.baseline_max:
            base_s, base = time_labels(lambda: hdbscan.HDBSCAN(min_cluster_size=3).fit_predict(x.astype(np.float64)))
            rows.append(("plain hdbscan, raw 384-d", base_s, base))
        for dims in args.variants:
            s, lab = time_labels(lambda: density.cluster_labels(x, 3, exact_max=0, pca_dims=dims))
            rows.append((f"pca{dims} + prims_kdtree", s, lab))
        for name, s, lab in rows:
            ratio = f"{base_s / s:.1f}x" if base_s and s else "-"
            print(f"| {n:,} | {name} | {s:.2f} | {ratio} | {int(lab.max()) + 1} | {int((lab < 0).sum()):,} "
                  f"| {recovered(truth, lab):.3f} |", flush=True)


def fill_memories(conn, x: np.ndarray, truth: np.ndarray, rng: np.random.Generator) -> None:
    raw = conn.connection.driver_connection
    with raw.cursor() as cur:
        with cur.copy("COPY memory_records (id, memory_type, content, context, resolution, summary_l0, tier, "
                      "embedding) FROM STDIN") as copy:
            for i, (v, t) in enumerate(zip(x, truth)):
                topic = " ".join(WORDS[(int(t) * 7 + j) % len(WORDS)] for j in range(3)) if t >= 0 else ""
                words = " ".join(rng.choice(WORDS, 5))
                copy.write_row((str(uuid.UUID(int=i + 1)), "error", f"{topic} problem {words}", "bench",
                                f"fix {topic}", f"{topic} {words}"[:60], "WARM",
                                "[" + ",".join(f"{f:.6f}" for f in v) + "]"))


def e2e_table(args: argparse.Namespace, rng: np.random.Generator, client, service) -> None:
    import sqlalchemy as sa

    if not args.e2e_sizes:
        return
    print("\n## run_clustering end to end (load, cluster, match, rules topics, bulk write)\n")
    print("| memories | run | seconds | clusters | new | kept | noise |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for n in args.e2e_sizes:
        with client.db.engine.begin() as conn:
            conn.execute(sa.text("TRUNCATE memory_records, knowledge_clusters CASCADE"))
            x, truth = make_store(n, rng)
            fill_memories(conn, x, truth, rng)
        for run in ("first", "unchanged re-run"):
            r = service.run_clustering()
            print(f"| {n:,} | {run} | {r.seconds:.2f} | {r.clusters:,} | {r.new:,} | {r.kept:,} | {r.noise:,} |",
                  flush=True)


def fill_clusters(conn, centroids: np.ndarray) -> list[str]:
    ids = [str(uuid.UUID(int=(1 << 100) + i)) for i in range(len(centroids))]
    raw = conn.connection.driver_connection
    with raw.cursor() as cur:
        with cur.copy("COPY knowledge_clusters (id, topic, size, centroid) FROM STDIN") as copy:
            for cid, c in zip(ids, centroids):
                copy.write_row((cid, "bench", 10, "[" + ",".join(f"{f:.6f}" for f in c) + "]"))
    return ids


def percentile(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def assign_table(args: argparse.Namespace, rng: np.random.Generator, client, service) -> None:
    import sqlalchemy as sa

    from ultron.db import memories as mstore

    print("\n## Assignment between runs (one upload joins the nearest centroid)\n")
    print("| clusters | method | p50 ms | p99 ms | same cluster as exact | plan |")
    print("|---:|---|---:|---:|---:|---|")
    memory_id = str(uuid.uuid4())
    for k in args.clusters:
        with client.db.engine.begin() as conn:
            conn.execute(sa.text("TRUNCATE memory_records, knowledge_clusters CASCADE"))
            conn.execute(sa.text(
                "INSERT INTO memory_records (id, memory_type, content, embedding) "
                "VALUES (:id, 'error', 'bench', CAST(:e AS vector))"),
                {"id": memory_id, "e": mstore.vec(np.ones(DIM) / math.sqrt(DIM))})
            centroids, _ = make_store(k, rng, noise=0.0)
            ids = fill_clusters(conn, centroids)
        with client.db.engine.begin() as conn:
            conn.execute(sa.text("ANALYZE knowledge_clusters"))
        # uploads close to an existing cluster (the join path: index, row lock, centroid update)
        pick = rng.integers(0, k, args.queries)
        queries = centroids[pick] + rng.normal(0, 0.5 / math.sqrt(DIM), (args.queries, DIM)).astype(np.float32)
        queries /= np.linalg.norm(queries, axis=1, keepdims=True)
        exact = [ids[int(np.argmax(centroids @ q))] for q in queries]
        times, agree = [], 0
        for q, want in zip(queries, exact):
            with client.db.engine.connect() as conn:
                with conn.begin() as tx:
                    mstore.set_ef_search(conn, client.settings.hnsw_ef_search)
                    t = time.perf_counter()
                    got = service.assign_memory_to_cluster(conn, memory_id, q)
                    times.append(time.perf_counter() - t)
                    tx.rollback()  # keep the centroids as generated, so every query sees the same store
            agree += got == want
        with client.db.engine.begin() as conn:
            mstore.set_ef_search(conn, client.settings.hnsw_ef_search)
            plan = " ".join(conn.execute(sa.text(
                "EXPLAIN SELECT id FROM knowledge_clusters WHERE status = 'active' "
                "ORDER BY centroid <=> CAST(:q AS vector) LIMIT 1"), {"q": mstore.vec(queries[0])}).scalars())
        plan_name = "HNSW index scan" if "ix_knowledge_clusters_centroid" in plan else "seq scan + sort"

        loop_times, loop_agree = [], 0
        with client.db.engine.connect() as conn:
            for q, want in zip(queries[: args.loop_queries], exact):
                ql = [float(f) for f in q]
                t = time.perf_counter()
                best, best_id = -2.0, None
                for cid, text in conn.execute(sa.text(
                        "SELECT id, centroid::text FROM knowledge_clusters WHERE status = 'active'")):
                    c = [float(f) for f in text[1:-1].split(",")]
                    dot = sum(a * b for a, b in zip(ql, c))
                    norm = math.sqrt(sum(b * b for b in c)) or 1.0
                    if dot / norm > best:
                        best, best_id = dot / norm, cid
                loop_times.append(time.perf_counter() - t)
                loop_agree += best_id == want
        p50, loop_p50 = statistics.median(times), statistics.median(loop_times)
        print(f"| {k:,} | assign_memory_to_cluster (HNSW) | {p50 * 1e3:.2f} | {percentile(times, 99) * 1e3:.2f} "
              f"| {agree / len(exact):.3f} | {plan_name} |")
        print(f"| {k:,} | python loop over centroids | {loop_p50 * 1e3:.2f} | {percentile(loop_times, 99) * 1e3:.2f} "
              f"| {loop_agree / len(loop_times):.3f} | full fetch |")
        print(f"| {k:,} | loop p50 / index p50 | {loop_p50 / p50:.1f}x | | | |", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000, 20000])
    ap.add_argument("--baseline-max", type=int, default=20000, help="largest size also run with plain HDBSCAN")
    ap.add_argument("--variants", type=int, nargs="*", default=[], help="extra PCA dims to compare, e.g. 64 96")
    ap.add_argument("--e2e-sizes", type=int, nargs="*", default=[5000])
    ap.add_argument("--clusters", type=int, nargs="+", default=[10, 1000, 10000])
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--loop-queries", type=int, default=5)
    args = ap.parse_args()
    print(machine_line())
    from ultron.clusters import density

    print(f"pipeline: exact HDBSCAN up to {density.EXACT_MAX:,} memories, PCA to {density.PCA_DIMS} dims above; "
          "synthetic 384-d memories, ~1 topic per 20, Zipf sizes, 10% background\n")
    rng = np.random.default_rng(11)
    start = time.perf_counter()
    batch_table(args, rng)
    with private_home("ultron-bench-clusters-"):
        from ultron.clusters import ClusterService
        from ultron.sdk import Ultron
        from ultron.settings import Settings

        settings = Settings.from_env(embedding_provider="hash", llm_provider="rules")
        client = Ultron(settings)
        service = ClusterService(client.context)
        e2e_table(args, rng, client, service)
        assign_table(args, rng, client, service)
    print(f"\n(total {time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
