"""What the owner graphs (``ultron.db.vector_indexes``) cost a write: the same memories
INSERTed one statement each, as an upload stores one, into the store
``benchmarks/search.py`` built, with its owner graphs and the word indexes by owner
(revision 0020), with the graphs alone (word indexes dropped), and with neither. Since
revision 0022 a graph is a partition of its own, which the trigger
``memory_owner_vectors_sync`` writes to: "no graph" drops the trigger.

Each pass runs in a transaction that is rolled back, the drops included (DDL is
transactional in PostgreSQL), so the store is left exactly as it was and the layouts are
timed on the same data minutes apart: the passes take turns, three of each. A new
memory here is like the stored ones: one of 50 agents, a ``kind-NN`` and a ``topic-NNN``
tag, 1% shared; so it lands in the store's graph, its agent's graph and, for the indexed
tags (``ULTRON_TAG_INDEXES``), in a tag graph or two too. The rows printed are the time per INSERT (p50 and
mean over all passes) and its ratio to the store's indexes alone.

    python benchmarks/owner_graph_writes.py --keep-home /work/bench29 [--sizes 100000] [--rows 300]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _support import machine_line  # noqa: E402
from search import agent_of, centres, make_vectors, shared_of, tags_of  # noqa: E402

INSERT = ("INSERT INTO memory_records (id, memory_type, content, context, resolution, summary_l0, overview_l1, "
          "tier, hit_count, agent_id, embedding, tags, shared) VALUES (%s, 'error', %s, '', '', %s, %s, 'WARM', 0, "
          "%s, %s, %s, %s)")


def one_pass(engine, rows: list[tuple], dropped: list[str]) -> list[float]:
    """The rows INSERTed one by one in a transaction (after running ``dropped``, the DROP
    statements of a layout), then rolled back; the seconds of each INSERT."""
    from pgvector.psycopg import register_vector

    times = []
    with engine.connect() as conn:
        raw = conn.connection.driver_connection
        register_vector(raw)
        with raw.transaction(force_rollback=True), raw.cursor() as cur:
            for sql in dropped:
                cur.execute(sql)
            for row in rows:
                t0 = time.perf_counter()
                cur.execute(INSERT, row)
                times.append(time.perf_counter() - t0)
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    ap.add_argument("--rows", type=int, default=300, help="INSERTs per pass")
    ap.add_argument("--passes", type=int, default=3, help="passes per layout (they alternate)")
    ap.add_argument("--keep-home", type=Path, required=True, help="the stores of benchmarks/search.py (DIR/n<size>)")
    args = ap.parse_args()
    print(machine_line())
    for size in args.sizes:
        home = args.keep_home.resolve() / f"n{size}"
        if not (home / "build.json").is_file():
            print(f"{size:,}: no store in {home} (build it with benchmarks/search.py --keep-home)")
            continue
        os.environ["ULTRON_HOME"] = str(home)
        run_size(args, size)
    return 0


def run_size(args, size: int) -> None:
    import sqlalchemy as sa

    from ultron.sdk import Ultron
    from ultron.settings import Settings

    client = Ultron(Settings.from_env(embedding_provider="hash"))
    engine = client.db.engine
    with engine.connect() as conn:
        graphs = list(conn.execute(sa.text("SELECT index_name FROM memory_vector_indexes")).scalars())
        trigger = ["DROP TRIGGER memory_owner_vectors_sync ON memory_records"]
        words = [f'DROP INDEX "{name}"' for name in conn.execute(sa.text(
            "SELECT c.relname FROM pg_class c JOIN pg_index x ON x.indexrelid = c.oid "
            "WHERE x.indrelid = 'memory_records'::regclass AND c.relname LIKE 'ix_memory_records_%_words'")).scalars()]
    vectors = make_vectors(args.rows, np.random.default_rng([5, size]), centres())
    rows = []
    for n in range(args.rows):
        i = size + n  # the stored rows' pattern of agents, tags and sharing, continued
        text = f"new memory {n}: the deploy step timed out after the cache was cleared"
        rows.append((str(uuid.uuid4()), text, text[:60], text, agent_of(i), vectors[n], tags_of(i), shared_of(i)))
    layouts = {"store's indexes only": trigger + words, "owner graphs, no word index": words,
               "owner graphs + word indexes": []}
    one_pass(engine, rows[:20], [])  # warm: the graphs' upper layers into the cache
    times: dict[str, list[float]] = {label: [] for label in layouts}
    order = list(layouts)
    for p in range(args.passes):
        for label in order[p % len(order):] + order[:p % len(order)]:
            times[label] += one_pass(engine, rows, layouts[label])
    print(f"== {size:,} memories, {len(graphs)} owner graphs and {len(words)} word indexes by owner, {args.rows} INSERTs x "
          f"{args.passes} passes, load average {os.getloadavg()[0]:.2f} at the end ==")
    print(f"{'layout':30} {'p50 ms':>8} {'mean ms':>8} {'p50 ratio':>9}")
    base = statistics.median(times[order[0]])
    for label in order:
        print(f"{label:30} {statistics.median(times[label]) * 1e3:8.2f} {statistics.mean(times[label]) * 1e3:8.2f} "
              f"{statistics.median(times[label]) / base:8.2f}x")
    print()


if __name__ == "__main__":
    sys.exit(main())
