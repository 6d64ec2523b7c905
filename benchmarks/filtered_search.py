"""Filtered search against unfiltered, on the store ``benchmarks/search.py`` builds: one
agent's memories, a team's (two agents plus the shared ones, what an agent-bound token
sees), a common tag's and a rare tag's, each beside the unfiltered search and beside
today's main in the same run.

The store: 50 agents (2% of the memories each), two tags a memory (``kind-NN``: 5% each;
``topic-NNN``: 0.5% each), 1% shared; synthetic 384-d vectors around 300 topic centres,
LoCoMo texts (see ``benchmarks/search.py``). Each row is the production hybrid search
(``MemoryService._search``: both arms in one statement, fusion, boosts, records read) with
the query vector given, 10 results, and the recall@10 of its dense arm (the candidates
with ``ann_rank`` <= 10) against an exact scan of the same filtered set in numpy.

``--against REV`` runs the same rows with ``ultron/db/search_arms.py`` as of git revision
REV (today's main) first; ``--baseline-revision R`` moves the store to migration R for
those rows (the layout main had), then back to head for this build's rows.

    python benchmarks/filtered_search.py --keep-home /work/bench29 [--sizes 100000 1000000]
           [--against main --baseline-revision 0016] [--queries 200]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _support import machine_line  # noqa: E402
from search import (  # noqa: E402
    AGENTS, FixedEmbedder, agent_of, build, centres, load_texts, make_vectors, percentile, shared_of,
    store_vectors,
)

REPO = Path(__file__).resolve().parents[1]


def load_arms(rev: str) -> Any:
    """``ultron.db.search_arms`` as of ``rev``, imported under its own name beside today's."""
    src = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:ultron/db/search_arms.py"], check=True,
                         capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp(prefix="ultron-arms-")) / "baseline_search_arms.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("baseline_search_arms", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class WithoutVisibility:
    """An older ``search_arms`` (no ``visible`` argument), as ``MemoryService._search`` calls it."""

    def __init__(self, module: Any) -> None:
        self.module = module

    def __getattr__(self, name: str) -> Any:
        return getattr(self.module, name)

    def candidates(self, *args: Any, visible: Any = None, graphs: Any = None, **kwargs: Any) -> Any:
        if visible is not None:
            raise NotImplementedError("no visibility filter before issue 28")
        return self.module.candidates(*args, **kwargs)


def alembic(engine, revision: str) -> None:
    import sqlalchemy as sa
    from alembic import command
    from alembic.config import Config

    from ultron.db.database import MIGRATIONS_DIR, VERSION_TABLE

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        current = conn.execute(sa.text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar_one()
        if current != revision:
            command.downgrade(cfg, revision) if revision < current else command.upgrade(cfg, revision)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("VACUUM (ANALYZE) memory_records")


def cases(size: int, queries: int) -> list[tuple[str, Callable[[int], dict[str, Any]], Callable[[int], np.ndarray]]]:
    """(name, filters of query i, the row numbers that filter keeps for query i)."""
    rows = np.arange(size)
    agent = np.array([int(agent_of(i)[-2:]) for i in range(min(size, AGENTS))])
    shared = rows[np.array([shared_of(int(i)) for i in rows])]
    kind = (rows // 7) % 20
    topic = (rows // 3) % 200

    def team(i: int) -> tuple[str, str]:
        return agent_of(i), agent_of(i + 17)

    return [
        ("unfiltered", lambda i: {}, lambda i: rows),
        ("one agent (2%)", lambda i: {"agent_id": agent_of(i)}, lambda i: rows[rows % AGENTS == agent[i % AGENTS]]),
        ("team: 2 agents + shared (5%)", lambda i: {"visible": team(i)},
         lambda i: np.union1d(rows[np.isin(rows % AGENTS, [int(a[-2:]) for a in team(i)])], shared)),
        ("common tag (5%)", lambda i: {"tags": [f"kind-{i % 20:02d}"]}, lambda i: rows[kind == i % 20]),
        ("rare tag (0.5%)", lambda i: {"tags": [f"topic-{(i * 7) % 200:03d}"]}, lambda i: rows[topic == (i * 7) % 200]),
    ]


def warm(memory, queries, qtexts, filters_of, n: int = 20) -> None:
    """The case's pages into shared buffers first (the same queries' later neighbours): the
    baseline runs right after a migration, and its first case would otherwise pay for it."""
    from ultron import access

    for i in range(min(n, len(queries))):
        f = filters_of(len(queries) - 1 - i)
        visible = f.pop("visible", None)
        if visible:
            access.acting(access.Principal("bench", "read", agents=visible))
        try:
            memory._search(qtexts[i], queries[-1 - i], 10, {"tier": None, "tags": f.get("tags"),
                                                             "agent_id": f.get("agent_id")}, count_hits=False)
        except NotImplementedError:
            return
        finally:
            access._principal.set(None)


def run_rows(memory, arms_module, vectors, ids, queries, qtexts, size, label: str) -> list[tuple[str, list[float], float]]:
    """Each case: time the production search, then the dense arm's recall against numpy."""
    from ultron import access
    from ultron.memory import service as service_module
    from ultron.memory.ranking import arm_settings

    saved = service_module.arms
    service_module.arms = arms_module
    baseline = isinstance(arms_module, WithoutVisibility)
    if baseline:  # that revision's layout has no vector index table to read
        memory._graphs = lambda conn: frozenset()
    out = []
    try:
        for name, filters_of, rows_of in cases(size, len(queries)):
            warm(memory, queries, qtexts, filters_of)
            times, recalls = [], []
            for i, (q, text) in enumerate(zip(queries, qtexts)):
                f = filters_of(i)
                visible = f.pop("visible", None)
                filters = {"tier": None, "tags": f.get("tags"), "agent_id": f.get("agent_id")}
                principal = access.Principal("bench", "read", agents=visible) if visible else None
                try:
                    if principal is not None:
                        access.acting(principal)
                    t0 = time.perf_counter()
                    memory._search(text, q, 10, filters, count_hits=False)
                    times.append(time.perf_counter() - t0)
                    with memory.db.search_engine.connect() as conn:
                        arms_module.use_ef_search(conn, max(memory.settings.hnsw_ef_search, 40))
                        got = arms_module.candidates(conn, text, q, k=40, plan=arm_settings(memory.settings),
                                                     visible=visible, graphs=memory._graphs(conn), **filters)
                except NotImplementedError:
                    times = []
                    break
                finally:
                    access._principal.set(None)
                ann = [c["id"] for c in sorted(got, key=lambda c: c["ann_rank"] or 10**9) if c["ann_rank"]][:10]
                keep = rows_of(i)
                sims = vectors[keep] @ q
                truth = set(ids[keep[np.argsort(-sims)[:10]]])
                recalls.append(len(set(ann) & truth) / max(1, min(10, len(truth))))
            if times:
                out.append((f"{label}: {name}", times, statistics.mean(recalls)))
            else:
                out.append((f"{label}: {name}", [], float("nan")))
    finally:
        service_module.arms = saved
        memory.__dict__.pop("_graphs", None)
        memory._graph_cache = None
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--keep-home", type=Path, required=True, help="the stores of benchmarks/search.py (DIR/n<size>)")
    ap.add_argument("--against", metavar="REV", help="also run ultron/db/search_arms.py as of REV (today's main)")
    ap.add_argument("--baseline-revision", metavar="R", help="the migration the baseline's layout is (e.g. 0016)")
    ap.add_argument("--maintenance-mem", default="5GB")
    ap.add_argument("--parallel-workers", type=int, default=1)
    ap.add_argument("--text", default="locomo")
    args = ap.parse_args()
    print(machine_line())
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    texts, questions = load_texts(args.text)
    topics = centres()
    for size in args.sizes:
        home = args.keep_home.resolve() / f"n{size}"
        home.mkdir(parents=True, exist_ok=True)
        os.environ["ULTRON_HOME"] = str(home)
        run_size(args, size, home, topics, texts, questions)
    print("targets: filtered p50 <= 1.2x unfiltered; filtered recall@10 >= 0.95; unfiltered p50 <= 10 ms at 100k")
    return 0


def run_size(args, size: int, home: Path, topics, texts, questions) -> None:
    from ultron.context import ServiceContext
    from ultron.db import search_arms
    from ultron.memory.service import MemoryService
    from ultron.sdk import Ultron
    from ultron.settings import Settings

    settings = Settings.from_env(embedding_provider="hash", search_min_score=0.0)
    client = Ultron(settings)
    vectors = store_vectors(size, topics)
    build(client.db, home, size, vectors, texts, args)
    memory = MemoryService(ServiceContext(client.db, settings, embedder=FixedEmbedder(), redactor=None))
    memory._profile_checked = True
    ids = np.array([str(uuid.UUID(int=i + 1)) for i in range(size)])
    queries = make_vectors(args.queries, np.random.default_rng([8, size]), topics)
    qtexts = [questions[i % len(questions)] if questions else "deploy error timeout" for i in range(args.queries)]
    results = []
    if args.against:
        if args.baseline_revision:
            alembic(client.db.engine, args.baseline_revision)
        results += run_rows(memory, WithoutVisibility(load_arms(args.against)), vectors, ids, queries, qtexts, size,
                            args.against)
        alembic(client.db.engine, "head")
    results += run_rows(memory, search_arms, vectors, ids, queries, qtexts, size, "this build")
    print(f"== {size:,} memories, {args.queries} queries, load average {os.getloadavg()[0]:.2f} at the end ==")
    print(f"{'search (vector given)':44} {'p50 ms':>8} {'p99 ms':>8} {'recall@10':>9} {'/ unfiltered':>12} "
          f"{'/ baseline':>10}")
    unfiltered: dict[str, float] = {}
    baseline: dict[str, float] = {}
    for name, times, recall in results:
        label, case = name.split(": ", 1)
        if not times:
            print(f"{name:44} {'-':>8}")
            continue
        p50 = statistics.median(times)
        if case == "unfiltered":
            unfiltered[label] = p50
        if label == args.against:
            baseline[case] = p50
        ratio = p50 / unfiltered[label] if label in unfiltered else float("nan")
        vs = f"{p50 / baseline[case]:9.2f}x" if label != args.against and case in baseline else ""
        print(f"{name:44} {p50 * 1e3:8.2f} {percentile(times, 99) * 1e3:8.2f} {recall:9.3f} {ratio:11.2f}x {vs:>10}")
    print()


if __name__ == "__main__":
    sys.exit(main())
