"""Outcome attribution: how many agent sessions it takes until memories that mislead rank
below the ones that help, and how often a bundle holds a misleading memory meanwhile.

A store holds, for each of several topics, memories that help (the real fix) and memories
that mislead (a plausible fix that does not work), worded alike so that search alone cannot
tell them apart. Simulated agents then work one session after another: each picks a topic,
asks for a context bundle with its session id (``context_bundle(..., session_id=...)``,
the real call, recording the serves), and succeeds with probability ``--p-clean`` when the
bundle holds no misleading memory, ``--p-misled`` when it holds one or more. The outcome is
then attributed through ``ultron.db.outcomes.attribute``, the function the labelling step
calls once a session is scored: this script passes the drawn outcome to it directly rather
than writing, ingesting, segmenting and scoring a transcript per session, which would time
the rules provider instead of measuring attribution (``tests/storage/test_bundle_outcomes.py``
covers that path end to end).

The same sessions (topics, task wordings, random draws) run twice on the same store: a
baseline whose outcomes are never attributed, then, after the store is reset (hits,
outcome sums, serves), the run with attribution. Printed: per topic, the session after
which every misleading memory stays ranked below every helpful one (searching the topic's
task; "never" when it does not happen in the run), their median, and per block of sessions
the share of bundles holding a misleading memory and the share of sessions that succeeded.

    python benchmarks/attribution.py [--sessions 600] [--block 100] [--budget 200] [--seed 7]
                                     [--embedder hash|local] [--rank-weight W] [--outcome-weight W]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _support import machine_line, private_home  # noqa: E402

#: topic -> (task wordings, helpful memories, misleading memories); each memory is
#: (content, context, resolution). The misleading ones share the topic's words on purpose.
TOPICS: dict[str, tuple[list[str], list[tuple[str, str, str]], list[tuple[str, str, str]]]] = {
    "pandas-docker": (
        ["the report container fails with ModuleNotFoundError: No module named pandas",
         "docker image for the nightly report cannot import pandas",
         "fix No module named pandas in the report docker container"],
        [("ModuleNotFoundError: No module named pandas in the report container",
          "the report image is built from requirements.txt",
          "Add pandas to requirements.txt and rebuild the docker image with docker build --no-cache"),
         ("The report docker image misses pandas because requirements.txt is not copied before pip install",
          "Dockerfile of the nightly report container",
          "COPY requirements.txt before RUN pip install -r requirements.txt, then rebuild the image")],
        [("No module named pandas in the report container: install it in the running container",
          "the report container is already running",
          "Run docker exec report pip install pandas; the import then works"),
         ("pandas import fails in docker because of the python path of the report container",
          "nightly report image",
          "Set PYTHONPATH=/usr/lib/python3/dist-packages in the container environment")]),
    "pg-ssl": (
        ["psql connection to the reports database fails with SSL error certificate verify failed",
         "postgres client cannot connect: SSL certificate verify failed",
         "fix certificate verify failed when connecting to the postgres reports database"],
        [("postgres connection fails with SSL certificate verify failed for the reports database",
          "the database uses the company CA",
          "Set sslrootcert to the company CA bundle and keep sslmode=verify-full"),
         ("certificate verify failed from psql: the client does not trust the database CA",
          "reports database behind the internal CA",
          "Install the internal CA into the system trust store and reconnect with sslmode=verify-full")],
        [("SSL certificate verify failed connecting to the postgres reports database",
          "psql client on the laptop",
          "Connect with sslmode=disable; the reports database accepts it"),
         ("postgres SSL error certificate verify failed is caused by an old psql client",
          "reports database connection",
          "Upgrade psql to the newest version and retry the connection")]),
    "node-oom": (
        ["webpack build runs out of memory: JavaScript heap out of memory",
         "the frontend build crashes with heap out of memory",
         "fix FATAL ERROR JavaScript heap out of memory in the webpack build"],
        [("webpack build fails with JavaScript heap out of memory",
          "frontend build on the CI runner",
          "Raise the heap with NODE_OPTIONS=--max-old-space-size=4096 for the build step"),
         ("heap out of memory in the frontend build comes from source maps of the whole bundle",
          "webpack production config",
          "Set devtool to false for production builds or use hidden-source-map")],
        [("JavaScript heap out of memory in webpack: the CI runner has too little swap",
          "frontend build on the CI runner",
          "Add 8 GB of swap to the runner; the build then passes"),
         ("webpack heap out of memory is a bug of the current webpack version",
          "frontend build",
          "Downgrade webpack to version 3")]),
    "git-push": (
        ["git push is rejected: updates were rejected because the tip of your current branch is behind",
         "cannot push to the remote branch, rejected non-fast-forward",
         "fix rejected git push non-fast-forward on the feature branch"],
        [("git push rejected because the tip of the current branch is behind its remote",
          "feature branch shared with a colleague",
          "Run git pull --rebase, resolve conflicts, then git push"),
         ("non-fast-forward rejection on push: the remote has commits you do not have",
          "shared feature branch",
          "git fetch, rebase the branch on origin, run the tests, then push")],
        [("git push rejected non-fast-forward on the feature branch",
          "feature branch shared with a colleague",
          "Run git push --force to overwrite the remote branch"),
         ("rejected git push because the tip of your branch is behind: the remote is misconfigured",
          "feature branch",
          "Delete the remote and add it again with git remote add origin")]),
    "redis-timeout": (
        ["the worker times out connecting to redis: Timeout connecting to server",
         "celery workers lose the redis connection with timeouts",
         "fix redis connection timeouts of the celery worker"],
        [("redis Timeout connecting to server from the celery worker",
          "workers in another availability zone",
          "Raise socket_connect_timeout and enable retry_on_timeout in the broker transport options"),
         ("celery worker redis timeouts come from the connection pool running out",
          "many concurrent tasks per worker",
          "Raise broker_pool_limit and the redis maxclients setting")],
        [("Timeout connecting to redis server from the celery worker",
          "celery worker deployment",
          "Restart the redis server every night to clear the timeouts"),
         ("celery redis connection timeouts are fixed by switching the broker",
          "worker queue",
          "Replace redis with the filesystem broker")]),
    "pytest-import": (
        ["pytest cannot import the package under test: ModuleNotFoundError for the project",
         "tests fail on import of the project module under pytest",
         "fix ModuleNotFoundError of the project package when running pytest"],
        [("pytest fails with ModuleNotFoundError for the project package",
          "src layout project",
          "Install the project in editable mode with pip install -e . before running pytest"),
         ("tests cannot import the project module because the src layout is not on the path",
          "pytest configuration",
          "Set pythonpath = src in the pytest section of pyproject.toml")],
        [("ModuleNotFoundError for the project package when running pytest",
          "src layout project",
          "Add sys.path.insert(0, '..') at the top of every test file"),
         ("pytest import errors of the project are caused by the pytest cache",
          "test run",
          "Delete .pytest_cache and run pytest again")]),
}


@dataclass
class Arm:
    name: str
    attribute: bool
    misled: list[bool] = field(default_factory=list)       # per session: the bundle held a misleading memory
    succeeded: list[bool] = field(default_factory=list)
    separated_since: dict[str, int | None] = field(default_factory=dict)   # topic -> session index
    items: list[int] = field(default_factory=list)
    seconds: float = 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sessions", type=int, default=600)
    ap.add_argument("--block", type=int, default=100, help="sessions per row of the share table")
    ap.add_argument("--budget", type=int, default=200, help="token budget of each bundle")
    ap.add_argument("--p-clean", type=float, default=0.8, help="success chance with no misleading memory")
    ap.add_argument("--p-misled", type=float, default=0.3, help="success chance with a misleading memory")
    ap.add_argument("--check-every", type=int, default=5, help="sessions between ranking checks")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--embedder", choices=("hash", "local"), default="hash")
    ap.add_argument("--rank-weight", type=float, default=None, help="ULTRON_UTILITY_RANK_WEIGHT for this run")
    ap.add_argument("--outcome-weight", type=float, default=None, help="ULTRON_UTILITY_OUTCOME_WEIGHT for this run")
    args = ap.parse_args()
    with private_home("ultron-bench-attribution-"):
        return run(args)


def run(args: argparse.Namespace) -> int:
    import sqlalchemy as sa

    from ultron.db import outcomes
    from ultron.sdk import Ultron
    from ultron.settings import Settings

    overrides = {k: v for k, v in (("utility_rank_weight", args.rank_weight),
                                   ("utility_outcome_weight", args.outcome_weight)) if v is not None}
    settings = Settings.from_env(embedding_provider=args.embedder, llm_provider="rules", **overrides)
    client = Ultron(settings)
    kind: dict[str, tuple[str, str]] = {}   # memory id -> (topic, "helpful" | "misleading")
    for topic, (_, helpful, misleading) in TOPICS.items():
        for label, memories in (("helpful", helpful), ("misleading", misleading)):
            for content, context, resolution in memories:
                record = client.upload_memory(content, context, resolution, [topic], agent_id="bench")
                kind[record.id] = (topic, label)
    expected = sum(len(h) + len(m) for _, h, m in TOPICS.values())
    if len(kind) != expected:
        print(f"warning: {expected - len(kind)} memories merged on upload; the topics are too alike", file=sys.stderr)

    rng = random.Random(args.seed)
    plan = [(rng.choice(list(TOPICS)), rng.random(), rng.random()) for _ in range(args.sessions)]

    def reset() -> None:
        with client.db.engine.begin() as conn:
            conn.execute(sa.text("TRUNCATE bundle_serves"))
            conn.execute(sa.text("UPDATE memory_records SET outcome_helped = 0, outcome_unhelped = 0, hit_count = 0, "
                                 "last_hit_at = NULL, tier = 'WARM'"))

    def gap(topic: str) -> float:
        """How far search alone puts a misleading memory above a helpful one: the largest
        ratio, over the topic's wordings, of the best misleading memory's score to the worst
        helpful one's (below 1: already separated). Attribution can close at most a gap of
        (1 + w) / (1 - w), w the rank weight."""
        worst = 0.0
        for task in TOPICS[topic][0]:
            scores = {r.record.id: r.score for r in client.search_memories(task, limit=20)}
            helpful = [scores.get(i, 0.0) for i, (t, label) in kind.items() if t == topic and label == "helpful"]
            misleading = [scores.get(i, 0.0) for i, (t, label) in kind.items() if t == topic and label == "misleading"]
            worst = max(worst, max(misleading) / max(min(helpful), 1e-9))
        return worst

    def separated(topic: str) -> bool:
        """Every misleading memory of the topic ranks below every helpful one, for each wording."""
        for task in TOPICS[topic][0]:
            order = [r.record.id for r in client.search_memories(task, limit=20) if kind.get(r.record.id, ("",))[0] == topic]
            helpful = [order.index(i) for i in order if kind[i][1] == "helpful"]
            misleading = [order.index(i) for i in order if kind[i][1] == "misleading"]
            if len(helpful) < len(TOPICS[topic][1]) or (misleading and min(misleading) < max(helpful)):
                return False
        return True

    reset()
    gaps = {t: gap(t) for t in TOPICS}
    arms = [Arm("baseline (no attribution)", False), Arm("attribution", True)]
    for arm in arms:
        reset()
        started = time.perf_counter()
        state = {t: separated(t) for t in TOPICS}
        arm.separated_since = {t: (0 if ok else None) for t, ok in state.items()}
        for n, (topic, wording, draw) in enumerate(plan, 1):
            tasks = TOPICS[topic][0]
            session = str(uuid.uuid4())
            bundle = client.context_bundle(tasks[int(wording * len(tasks))], token_budget=args.budget,
                                           session_id=session)
            served = [i["id"] for i in bundle["items"] if i["kind"] == "memory"]
            misled = any(kind.get(i, ("", ""))[1] == "misleading" for i in served)
            ok = draw < (args.p_misled if misled else args.p_clean)
            arm.misled.append(misled)
            arm.succeeded.append(ok)
            arm.items.append(len(served))
            if arm.attribute:
                with client.db.engine.begin() as conn:
                    outcomes.attribute(conn, session, "helped" if ok else "not_helped", settings.utility_outcome_weight)
            if n % args.check_every == 0 or n == len(plan):
                for t in TOPICS:
                    now = separated(t)
                    if now and arm.separated_since[t] is None:
                        arm.separated_since[t] = n
                    elif not now:
                        arm.separated_since[t] = None
        arm.seconds = time.perf_counter() - started
    client.memory.flush_hits()

    print(f"outcome attribution: {len(TOPICS)} topics x ({len(next(iter(TOPICS.values()))[1])} helpful + "
          f"{len(next(iter(TOPICS.values()))[2])} misleading memories), {args.sessions} sessions, "
          f"budget {args.budget} tokens, success {args.p_clean:.0%} clean / {args.p_misled:.0%} misled, "
          f"outcome weight {settings.utility_outcome_weight}, rank weight {settings.utility_rank_weight}, "
          f"embedder {args.embedder}, seed {args.seed}")
    print(machine_line())
    print()
    print("sessions until every misleading memory stays ranked below every helpful one (checked every "
          f"{args.check_every} sessions)")
    w = settings.utility_rank_weight
    reach = (1 + w) / (1 - w) if w < 1 else float("inf")
    print(f"(gap: the best misleading memory's score over the worst helpful one's before any outcome; "
          f"the rank weight can close gaps up to {reach:.2f})")
    print(f"{'topic':<16}{'gap':>6}" + "".join(f"{a.name:>28}" for a in arms))
    for t in TOPICS:
        print(f"{t:<16}{gaps[t]:>6.2f}" + "".join(f"{_fmt(a.separated_since[t]):>28}" for a in arms))
    print(f"{'median':<22}" + "".join(f"{_median(a.separated_since.values()):>28}" for a in arms))
    print(f"{'all topics':<22}" + "".join(f"{_all(a.separated_since.values()):>28}" for a in arms))
    print()
    print("share of bundles holding a misleading memory / share of sessions that succeeded, per block")
    print(f"{'sessions':<16}" + "".join(f"{a.name:>28}" for a in arms))
    for start in range(0, args.sessions, args.block):
        end = min(args.sessions, start + args.block)
        cells = []
        for a in arms:
            misled = sum(a.misled[start:end]) / (end - start)
            ok = sum(a.succeeded[start:end]) / (end - start)
            cells.append(f"{misled:6.0%} / {ok:4.0%}")
        print(f"{f'{start + 1}-{end}':<16}" + "".join(f"{c:>28}" for c in cells))
    print()
    print("memories per bundle (mean): " + ", ".join(f"{a.name} {statistics.mean(a.items):.2f}" for a in arms))
    print("seconds per session: " + ", ".join(f"{a.name} {a.seconds / args.sessions:.3f}" for a in arms))
    return 0


def _fmt(n: int | None) -> str:
    return "never" if n is None else str(n)


def _median(values) -> str:
    done = [v for v in values]
    if any(v is None for v in done):
        done = [float("inf") if v is None else v for v in done]
    m = statistics.median(done)
    return "never" if m == float("inf") else f"{m:g}"


def _all(values) -> str:
    values = list(values)
    return "never" if any(v is None for v in values) else str(max(values))


if __name__ == "__main__":
    sys.exit(main())
