"""Repeated-query search latency with and without the query-embedding cache.

    python benchmarks/query_cache.py [--memories 300] [--queries 20] [--repeats 5]

One private store (real MiniLM unless ULTRON_EMBEDDER says otherwise), the same queries
searched ``--repeats`` times; "no cache" clears ``ultron.embeddings.query_cache.QUERIES``
before every search, "cache" does not. Both are measured in the same run, so the ratio
holds on a noisy machine; the absolute figures do not.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._support import machine_line, private_home  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memories", type=int, default=300)
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    with private_home("ultron-bench-qcache-"):
        from ultron import Ultron
        from ultron.embeddings.query_cache import QUERIES

        u = Ultron()
        for i in range(args.memories):
            u.upload_memory(f"service {i} fails with error code {i * 7} when the cache {i % 13} is cold",
                            f"context {i}", f"restart worker {i % 17}", ["bench"])
        queries = [f"worker {j} fails when the cache is cold" for j in range(args.queries)]
        for q in queries:
            u.search_memories(q, limit=10)          # model and plans warm

        def run(clear: bool) -> list[float]:
            times = []
            for _ in range(args.repeats):
                for q in queries:
                    if clear:
                        QUERIES.clear()
                    start = time.perf_counter()
                    u.search_memories(q, limit=10)
                    times.append((time.perf_counter() - start) * 1000)
            return sorted(times)

        cold, warm = run(True), run(False)
        print(machine_line())
        print(f"embedder {u.context.embedder.name}; {args.memories} memories; "
              f"{args.queries} queries x {args.repeats} repeats")
        print(f"{'path':<10} {'p50 ms':>8} {'p95 ms':>8}")
        for name, t in (("no cache", cold), ("cache", warm)):
            print(f"{name:<10} {statistics.median(t):8.2f} {t[int(len(t) * 0.95)]:8.2f}")
        print(f"p50 ratio cache / no cache: {statistics.median(warm) / statistics.median(cold):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
