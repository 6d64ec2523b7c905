"""What the memory table's ``fillfactor`` costs the search-hit writes, and what it saves the
reads: the hit counts (``ultron.db.hits.add_hit_counts``, the UPDATE the hit writer runs)
written to one store at each fillfactor in turn.

A hit count's UPDATE is cheap when PostgreSQL can write the new row version on the same page
(a HOT update: no index touched); when the page is full it is not, and every index gets an
entry for the new version, the HNSW graphs too. The fillfactor keeps room on each page for
that, but a memory's row is about 2.5 kB (its vector and words, revisions 0018-0019), so at
50 (revision 0008) each page held one row and the table was twice its rows' size: an
exact scan of a filter's memories reads a page a memory, and at 1M memories the heap
(7.8 GB) no longer fitted in the shared buffers.

The store is built here (a throw-away embedded server): ``--size`` memories shaped like
``benchmarks/search.py``'s (50 agents, two tags each, LoCoMo texts when ../shared is there),
with the schema's indexes. For each fillfactor the table is rewritten (``VACUUM FULL``),
then ``--batches`` hit batches are written, committed one by one as the writer thread
does: each batch the hits of ``--searches`` searches of 10 results, drawn from a Zipf law
(a few memories are hit often, as in use). The fillfactors take turns for ``--rounds``
rounds. Printed: heap pages and rows a page, the share of HOT updates, and the time per
batch (p50, p90).

    python benchmarks/hit_writes.py [--size 20000] [--batches 1500] [--fillfactors 50 60 75]
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _support import machine_line, private_home  # noqa: E402
from search import centres, fill, load_texts, make_vectors, percentile  # noqa: E402


def rewrite(engine, fillfactor: int) -> dict[str, float]:
    """The table at ``fillfactor``, packed anew, its statistics reset; its pages and rows."""
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql(f"ALTER TABLE memory_records SET (fillfactor = {int(fillfactor)})")
        conn.exec_driver_sql("SET maintenance_work_mem = '1GB'")
        conn.exec_driver_sql("VACUUM FULL memory_records")
        conn.exec_driver_sql("VACUUM ANALYZE memory_records")
        conn.exec_driver_sql("SELECT pg_stat_reset_single_table_counters('memory_records'::regclass)")
        pages, rows = conn.exec_driver_sql(
            "SELECT pg_relation_size('memory_records') / current_setting('block_size')::int, "
            "(SELECT count(*) FROM memory_records)").one()
    return {"pages": pages, "rows": rows}


def workload(engine, ids: list[str], args: argparse.Namespace, seed: int) -> list[float]:
    """The hit batches, each in its own transaction; the seconds of each."""
    from ultron.db.hits import add_hit_counts

    rng = np.random.default_rng(seed)
    ranks = rng.permutation(len(ids))  # which memory is the most popular: a fixed shuffle per round
    times = []
    with engine.connect() as conn:
        for _ in range(args.batches):
            drawn = np.minimum(rng.zipf(args.zipf, args.searches * 10), len(ids)) - 1
            counts = collections.Counter(ids[ranks[d]] for d in drawn)
            t0 = time.perf_counter()
            add_hit_counts(conn, counts)
            conn.commit()
            times.append(time.perf_counter() - t0)
        conn.exec_driver_sql("SELECT pg_stat_force_next_flush()")
        conn.commit()
    return times


def updates(engine) -> tuple[int, int]:
    with engine.connect() as conn:
        time.sleep(0.2)
        return tuple(conn.exec_driver_sql(
            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'memory_records'").one())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=20_000)
    ap.add_argument("--batches", type=int, default=1500, help="hit batches per fillfactor and round")
    ap.add_argument("--searches", type=int, default=5, help="searches (10 hits each) a batch gathers")
    ap.add_argument("--zipf", type=float, default=1.2, help="the popularity law's exponent")
    ap.add_argument("--fillfactors", type=int, nargs="+", default=[50, 60, 75])
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    print(machine_line())
    with private_home("ultron-hit-writes-"):
        import sqlalchemy as sa

        from ultron.sdk import Ultron
        from ultron.settings import Settings

        client = Ultron(Settings.from_env(embedding_provider="hash"))
        engine = client.db.engine
        texts, _ = load_texts("locomo")
        with engine.begin() as conn:
            fill(conn, make_vectors(args.size, np.random.default_rng(3), centres()), texts)
        with engine.connect() as conn:
            ids = list(conn.execute(sa.text("SELECT id FROM memory_records ORDER BY id")).scalars())
        results: dict[int, dict[str, list]] = {ff: collections.defaultdict(list) for ff in args.fillfactors}
        for r in range(args.rounds):
            for ff in args.fillfactors:
                shape = rewrite(engine, ff)
                times = workload(engine, ids, args, seed=r)
                upd, hot = updates(engine)
                res = results[ff]
                res["pages"].append(shape["pages"])
                res["rows"].append(shape["rows"])
                res["times"] += times
                res["hot"].append(hot / max(upd, 1))
        print(f"== {args.size:,} memories, {args.batches} batches of {args.searches} searches' hits x {args.rounds} "
              f"rounds per fillfactor (Zipf {args.zipf}), load average {os.getloadavg()[0]:.2f} at the end ==")
        print(f"{'fillfactor':>10} {'heap pages':>10} {'rows/page':>9} {'HOT':>6} {'p50 ms':>7} {'p90 ms':>7} "
              f"{'p50 ratio':>9}")
        base = statistics.median(results[args.fillfactors[0]]["times"])
        for ff in args.fillfactors:
            res = results[ff]
            pages, rows = res["pages"][-1], res["rows"][-1]
            p50 = statistics.median(res["times"])
            print(f"{ff:>10} {pages:>10,} {rows / pages:>9.2f} {statistics.mean(res['hot']):>6.1%} {p50 * 1e3:>7.2f} "
                  f"{percentile(res['times'], 90) * 1e3:>7.2f} {p50 / base:>8.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
