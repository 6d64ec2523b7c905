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

``--against REV`` also runs the rows with ``ultron/db/search_arms.py`` as of git revision
REV (today's main), on the layout main had: the owner graphs hidden from the planner
(``graphs_hidden``) for a REV from before them; with ``--against-home DIR`` on the store in
DIR (one built and migrated by REV, which this build would migrate on), its server running
beside this store's. The two builds take turns, a block of queries each, so the machine's
drift hits both alike; so do the cases, which run query by query.

    python benchmarks/filtered_search.py --keep-home /work/bench29 [--sizes 100000 1000000]
           [--against main] [--queries 200] [--no-minilm] [--cases unfiltered] [--crossover]
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import os
import signal
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _support import machine_line, module_at  # noqa: E402
from search import (  # noqa: E402
    AGENTS, FixedEmbedder, agent_of, build, centres, load_texts, make_vectors, percentile, shared_of,
    store_vectors,
)

REPO = Path(__file__).resolve().parents[1]


def load_arms(rev: str) -> Any:
    """``ultron.db.search_arms`` as of ``rev``, imported under its own name beside today's."""
    return module_at(rev, "ultron/db/search_arms.py", "baseline_search_arms")


class WithoutLarge:
    """A ``search_arms`` from issue 28 on, before ``large`` (the filters known to keep many
    memories): the service's ``large`` dropped."""

    def __init__(self, module: Any) -> None:
        self.module = module

    def __getattr__(self, name: str) -> Any:
        return getattr(self.module, name)

    def candidates(self, conn: Any, *args: Any, large: Any = None, **kwargs: Any) -> Any:
        return self.module.candidates(conn, *args, **kwargs)


class WithoutVisibility:
    """An older ``search_arms`` (no ``visible`` argument), as ``MemoryService._search`` calls it."""

    def __init__(self, module: Any) -> None:
        self.module = module

    def __getattr__(self, name: str) -> Any:
        return getattr(self.module, name)

    def candidates(self, conn: Any, *args: Any, visible: Any = None, graphs: Any = None, large: Any = None,
                   **kwargs: Any) -> Any:
        if visible is not None:
            raise NotImplementedError("no visibility filter before issue 28")
        # before issue 29 the service set ef_search (the arms do now), and every statement on
        # the search connections was planned with its values (only the candidates are now)
        if conn.info.get("bench.plan_cache_mode") != "force_custom_plan":
            conn.exec_driver_sql("SET plan_cache_mode = force_custom_plan")
            conn.info["bench.plan_cache_mode"] = "force_custom_plan"
        plan = kwargs.pop("plan")
        self.module.use_ef_search(conn, max(plan["ef_search"], kwargs["k"]))
        return self.module.candidates(conn, *args, plan={n: v for n, v in plan.items() if n != "ef_search"}, **kwargs)


@contextlib.contextmanager
def graphs_hidden(db) -> Iterator[None]:
    """The layout main had, without dropping and rebuilding the owner graphs (an hour at 1M):
    each marked invalid in ``pg_index`` for the baseline's rows, as a half-built index is,
    which the planner passes over; marked valid again after, even on an error. Nothing is
    written meanwhile, so they stay up to date. Needs the superuser (the embedded server's)."""
    import sqlalchemy as sa

    def mark(valid: bool) -> None:
        # (each backend's cache of those indexes is invalidated by the update: no reconnect)
        with db.engine.begin() as conn:
            conn.execute(sa.text("UPDATE pg_index SET indisvalid = :valid WHERE indexrelid IN "
                                 "(SELECT to_regclass(index_name) FROM memory_vector_indexes)"), {"valid": valid})

    mark(False)
    try:
        yield
    finally:
        mark(True)


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


#: queries a build runs (every case on each) before the other build's turn: the machine's
#: drift over a run then hits both builds and every case alike
BLOCK = 25


@contextlib.contextmanager
def without_owner_graphs(memory) -> Iterator[None]:
    """The service searches as if no owner graph existed: none named to the arms, and each
    hidden from the planner (``graphs_hidden``)."""
    memory._graphs = memory._large = lambda conn: frozenset()
    try:
        with graphs_hidden(memory.db):
            yield
    finally:
        memory.__dict__.pop("_graphs", None)
        memory.__dict__.pop("_large", None)
        memory._scope_cache.clear()


@contextlib.contextmanager
def searching_with(memory, arms_module) -> Iterator[None]:
    """The service searches with ``arms_module``; a baseline from before issue 29 also on the
    layout it had (``graphs_hidden``)."""
    from ultron.memory import service as service_module

    saved = service_module.arms
    baseline = isinstance(arms_module, WithoutVisibility)
    service_module.arms = arms_module
    try:
        # that revision's layout has no vector index table to read
        with without_owner_graphs(memory) if baseline else contextlib.nullcontext():
            yield
    finally:
        service_module.arms = saved
        if baseline:  # the next build's connections without the baseline's plan_cache_mode
            memory.db.search_engine.dispose()


def search(memory, text: str, q: np.ndarray | None, f: dict[str, Any]) -> float:
    """One production search (``MemoryService._search``) under the case's filter, its seconds."""
    from ultron import access

    f = dict(f)
    visible = f.pop("visible", None)
    if visible:
        access.acting(access.Principal("bench", "read", agents=visible))
    try:
        t0 = time.perf_counter()
        memory._search(text, q, 10, {"tier": None, "tags": f.get("tags"), "agent_id": f.get("agent_id")},
                       count_hits=False)
        return time.perf_counter() - t0
    finally:
        access._principal.set(None)


def recall(memory, arms_module, vectors, ids, queries, qtexts, filters_of, rows_of) -> float:
    """The dense arm's recall@10 (its candidates with ``ann_rank`` <= 10) against numpy's exact
    top 10 of the same filtered set, with the ef_search the search ran with."""
    from ultron.memory.ranking import arm_settings

    found = []
    for i, (q, text) in enumerate(zip(queries, qtexts)):
        f = dict(filters_of(i))
        visible = f.pop("visible", None)
        with memory.db.search_engine.connect() as conn:
            got = arms_module.candidates(conn, text, q, k=40, plan=arm_settings(memory.settings), visible=visible,
                                         graphs=memory._graphs(conn), large=memory._large(conn), tier=None,
                                         tags=f.get("tags"),
                                         agent_id=f.get("agent_id"))
        ann = [c["id"] for c in sorted(got, key=lambda c: c["ann_rank"] or 10**9) if c["ann_rank"]][:10]
        keep = rows_of(i)
        truth = set(ids[keep[np.argsort(-(vectors[keep] @ q))[:10]]])
        found.append(len(set(ann) & truth) / max(1, min(10, len(truth))))
    return statistics.mean(found)


def run_builds(builds, minilm, vectors, ids, queries, qtexts, size, warm_passes: int = 0,
               query_embedders: dict[str, Any] | None = None,
               only: list[str] | None = None) -> list[tuple[str, list[float], float]]:
    """Every build, case and query, timed in blocks of ``BLOCK`` queries, the builds taking
    turns (and turns about who goes first), each block warmed by one search per case; then
    each case's recall. ``builds``: (label, arms module, the service searching its store).
    ``warm_passes``: untimed passes over every build, case and query first (the steady state of a server that has answered such queries before).
    ``minilm``: a service embedding queries with MiniLM, for the unfiltered search with
    the query embedded (each text new to the query cache); ``query_embedders``: the
    embedder it uses in a build's turn, by label (a baseline's own), when not this build's.
    ``only``: the cases whose names start so (the unfiltered one always runs)."""
    from ultron.embeddings.query_cache import QUERIES

    case_list = [c for c in cases(size, len(queries))
                 if not only or c[0] == "unfiltered" or any(c[0].startswith(o) for o in only)]
    times: dict[tuple[str, str], list[float]] = {(b[0], c[0]): [] for b in builds for c in case_list}
    unsupported: set[tuple[str, str]] = set()
    minilm_times: dict[str, list[float]] = {b[0]: [] for b in builds}
    this_embedder = minilm.embedder if minilm is not None else None

    def untimed(memory, label: str, name: str, filters_of, i: int) -> None:
        """Query i of a case, not timed; a case the build cannot run is marked, not raised."""
        if (label, name) not in unsupported:
            try:
                search(memory, qtexts[i], queries[i], filters_of(i))
            except NotImplementedError:
                unsupported.add((label, name))

    for _ in range(warm_passes):  # every page a query will touch, once, before anything is timed
        for label, arms_module, memory in builds:
            with searching_with(memory, arms_module):
                for name, filters_of, _ in case_list:
                    for i in range(len(queries)):
                        untimed(memory, label, name, filters_of, i)
    for n, first in enumerate(range(0, len(queries), BLOCK)):
        block = range(first, min(len(queries), first + BLOCK))
        for label, arms_module, memory in (builds if n % 2 == 0 else builds[::-1]):
            with searching_with(memory, arms_module):
                for name, filters_of, _ in case_list:
                    untimed(memory, label, name, filters_of, len(queries) - 1 - first)  # a query outside the block
                for i in block:
                    for name, filters_of, _ in case_list:
                        if (label, name) not in unsupported:
                            times[(label, name)].append(search(memory, qtexts[i], queries[i], filters_of(i)))
                if minilm is not None:
                    minilm.ctx._embedder = (query_embedders or {}).get(label, this_embedder)
                    QUERIES.clear()
                    search(minilm, qtexts[block[-1]] + " warm", None, {})
                    minilm_times[label] += [search(minilm, qtexts[i], None, {}) for i in block]
    out = []
    for label, arms_module, memory in builds:
        with searching_with(memory, arms_module):
            for name, filters_of, rows_of in case_list:
                if (label, name) in unsupported:
                    out.append((f"{label}: {name}", [], float("nan")))
                else:
                    out.append((f"{label}: {name}", times[(label, name)],
                                recall(memory, arms_module, vectors, ids, queries, qtexts, filters_of, rows_of)))
        if minilm is not None:
            out.append((f"{label}: unfiltered, MiniLM query", minilm_times[label], float("nan")))
    return out


def crossover(memory, size: int, queries, qtexts) -> None:
    """Where an exact scan of the memories a filter keeps beats walking the store's graph
    (``ULTRON_SEARCH_EXACT_MAX``): the production search for filters with no graph of their
    own (the owner graphs hidden), walking (exact_max 0), exact (exact_max above any filter)
    and with this build's ``ULTRON_SEARCH_EXACT_MAX`` (what a search does), query by query,
    with how many memories each filter keeps."""
    import dataclasses

    base = memory.settings
    ways = {"walk": dataclasses.replace(base, search_exact_max=0),
            "exact": dataclasses.replace(base, search_exact_max=10 ** 9),
            "default": base}
    picked = [c for c in cases(size, len(queries)) if c[0] in ("rare tag (0.5%)", "one agent (2%)", "common tag (5%)")]
    times: dict[tuple[str, str], list[float]] = {(c[0], w): [] for c in picked for w in ways}
    try:
        with without_owner_graphs(memory):
            for rnd in range(2):  # the first round warms every page the searches touch, untimed
                for i in range(len(queries)):
                    for name, filters_of, _ in picked:
                        for way, settings in (ways.items() if i % 2 else list(ways.items())[::-1]):
                            memory.settings = settings
                            took = search(memory, qtexts[i], queries[i], filters_of(i))
                            if rnd:
                                times[(name, way)].append(took)
    finally:
        memory.settings = base
    print(f"-- exact scan or the store's graph, filters without a graph of their own ({len(queries)} queries) --")
    cap = f"exact_max {base.search_exact_max:,}"
    print(f"{'filter':20} {'kept':>7} {'walk p50 ms':>11} {'exact p50 ms':>12} {'exact / walk':>12} "
          f"{cap + ' ms':>17} {'/ walk':>7}")
    for name, _, rows_of in picked:
        walk, exact, default = (statistics.median(times[(name, w)]) for w in ("walk", "exact", "default"))
        print(f"{name:20} {len(rows_of(0)):7,} {walk * 1e3:11.2f} {exact * 1e3:12.2f} {exact / walk:11.2f}x "
              f"{default * 1e3:17.2f} {default / walk:6.2f}x")
    print()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--keep-home", type=Path, required=True, help="the stores of benchmarks/search.py (DIR/n<size>)")
    ap.add_argument("--against", metavar="REV", help="also run ultron/db/search_arms.py as of REV (today's main)")
    ap.add_argument("--against-home", type=Path, metavar="DIR",
                    help="run --against's rows on the store in DIR/n<size> (REV's layout: built and migrated by REV, "
                         "opened here without migrating) rather than on this store with the owner graphs hidden")
    ap.add_argument("--maintenance-mem", default="5GB")
    ap.add_argument("--parallel-workers", type=int, default=1)
    ap.add_argument("--text", default="locomo")
    ap.add_argument("--warm", type=int, default=0, metavar="PASSES",
                    help="untimed passes over every build, case and query first (a server's steady state)")
    ap.add_argument("--no-minilm", action="store_true", help="skip the row with a MiniLM query embedding")
    ap.add_argument("--cases", nargs="+", metavar="NAME",
                    help="only the cases whose names start so, beside the unfiltered one ('unfiltered' alone: "
                         "no filtered case's indexes competing with it for the cache)")
    ap.add_argument("--crossover", action="store_true",
                    help="also time exact scans against the store's graph for filters without a graph of their own")
    args = ap.parse_args()
    # a SIGTERM (kill, a CI timeout) unwinds like Ctrl-C: without_owner_graphs restores the
    # graphs it hid in a finally, and a kill that skipped it left all of them for the
    # maintenance step to rebuild (628 s at 1M)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    print(machine_line())
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    texts, questions = load_texts(args.text)
    topics = centres()
    for size in args.sizes:
        home = args.keep_home.resolve() / f"n{size}"
        home.mkdir(parents=True, exist_ok=True)
        os.environ["ULTRON_HOME"] = str(home)
        run_size(args, size, home, topics, texts, questions)
    print("targets: filtered p50 <= 1.2x unfiltered; filtered recall@10 >= 0.95; unfiltered p50 <= 10 ms at 100k "
          "(<= 15 ms with the MiniLM query; <= 20 ms at 1M)")
    return 0


def unmigrated_service(home: Path, settings) -> Any:
    """A search service on the store in ``home`` as it is: its embedded server started, and no
    migration run (this build's would move it to this build's layout)."""
    import dataclasses

    import sqlalchemy as sa

    from ultron.context import ServiceContext
    from ultron.db.database import VERSION_TABLE, Database, resolve_urls
    from ultron.memory.service import MemoryService

    if not (home / "pgdata").is_dir():
        raise SystemExit(f"--against-home: no store in {home}")
    settings = dataclasses.replace(settings, home=home)
    urls = resolve_urls(settings, keep_running=True)
    engine = sa.create_engine(urls.ultron)
    with engine.connect() as conn:
        revision = conn.execute(sa.text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar_one()
    print(f"baseline store: {home} at revision {revision}")
    memory = MemoryService(ServiceContext(Database(engine, urls, revision), settings, embedder=FixedEmbedder(),
                                          redactor=None))
    memory._profile_checked = True
    return memory


def graphs_as_of(memory, rev: str) -> None:
    """The service on a store of ``rev``'s reads its owner graphs as ``rev`` did: before
    revision 0022 they were partial indexes (today's ``valid_scopes`` reads partitions)."""
    import subprocess

    path = "ultron/db/vector_indexes.py"
    repo = Path(__file__).resolve().parent.parent
    if subprocess.run(["git", "-C", str(repo), "cat-file", "-e", f"{rev}:{path}"], capture_output=True).returncode:
        return
    old = module_at(rev, path, "baseline_vector_indexes")
    if not hasattr(old, "partition_name"):
        memory._graphs = lambda conn: memory._scopes("graphs", lambda: old.valid_scopes(conn))


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
    # a store built by search.py has no owner graphs yet: the maintenance step builds them
    # (a no-op once they are there)
    from ultron.memory.owner_indexes import refresh_owner_indexes

    t0 = time.perf_counter()
    made = refresh_owner_indexes(client.db, settings)
    if made.get("created"):
        print(f"built {len(made['created'])} owner graphs in {time.perf_counter() - t0:.0f} s")
    memory = MemoryService(ServiceContext(client.db, settings, embedder=FixedEmbedder(), redactor=None))
    memory._profile_checked = True
    minilm = None
    if not args.no_minilm:
        minilm = MemoryService(ServiceContext(client.db, Settings.from_env(search_min_score=0.0), redactor=None))
        minilm._profile_checked = True  # synthetic store vectors, real query embeddings: timing only
        minilm.embedder.embed_one("warm up")
    ids = np.array([str(uuid.UUID(int=i + 1)) for i in range(size)])
    queries = make_vectors(args.queries, np.random.default_rng([8, size]), topics)
    qtexts = [questions[i % len(questions)] if questions else "deploy error timeout" for i in range(args.queries)]
    builds = []
    query_embedders: dict[str, Any] = {}
    if args.against:
        base_memory = memory
        if args.against_home:
            base_memory = unmigrated_service(args.against_home.resolve() / f"n{size}", settings)
            graphs_as_of(base_memory, args.against)
        module = load_arms(args.against)
        takes = inspect.signature(module.candidates).parameters
        builds.append((args.against, module if "large" in takes else WithoutLarge(module) if "visible" in takes
                       else WithoutVisibility(module), base_memory))
        if minilm is not None:  # the baseline's query embedder too (torch before issue 29)
            baseline_embedder = module_at(args.against, "ultron/embeddings/local.py", "baseline_local")
            query_embedders[args.against] = baseline_embedder.LocalMiniLMEmbedder()
            query_embedders[args.against].embed_one("warm up")
    results = run_builds(builds + [("this build", search_arms, memory)], minilm, vectors, ids, queries, qtexts,
                         size, args.warm, query_embedders, args.cases)
    print(f"== {size:,} memories, {args.queries} queries, load average {os.getloadavg()[0]:.2f} at the end ==")
    print(f"{'search (vector given unless said)':44} {'p50 ms':>8} {'p99 ms':>8} {'recall@10':>9} {'/ unfiltered':>12} "
          f"{'/ baseline':>10}")
    unfiltered: dict[str, float] = {}
    baseline: dict[str, float] = {}
    for name, times, rec in results:
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
        print(f"{name:44} {p50 * 1e3:8.2f} {percentile(times, 99) * 1e3:8.2f} {rec:9.3f} {ratio:11.2f}x {vs:>10}")
    print()
    if args.crossover:
        crossover(memory, size, queries, qtexts)


if __name__ == "__main__":
    sys.exit(main())
