"""Pipeline throughput with the in-process executor, 1 Celery worker and 2 Celery workers.

N sessions (the claude-code sessions of ../shared/data copied under agent-0, agent-1, ...
of a private inbox) go through the whole asset graph the way a backfill runs them: one run
per 100 partitions (BACKFILL_PARTITIONS_PER_RUN), two runs at a time (the project's
max_concurrent_runs), then one run of the store-wide assets (tiers, clusters, skills,
sft_dataset). Every arm has its own empty Ultron and Dagster databases on the same embedded
server; the Celery arms use deploy/celery (its dagster.yaml, `celery -A dagster_celery.app
worker` with its dagster_celery_config) and a throw-away redis-server. Offline: the rules
provider; embeddings as configured (--embedding, default the real local model).

Where the time goes: CPU seconds of the embedded Postgres (postmaster and its backends), of
the run processes (orchestrators; in-process they also run the steps) and of the Celery
workers, each as a share of the arm's total.

    python benchmarks/throughput.py [--sessions 1000] [--arms in_process,celery1,celery2] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psutil
import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _support import machine_line, private_home

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data" / "claude-code"
DEPLOY = ROOT / "deploy" / "celery"
PER_SESSION = ["raw_sessions", "task_segments", "quality_metrics", "memories"]
STORE_WIDE = ["tiers", "clusters", "skills", "sft_dataset"]


def build_inbox(inbox: Path, sessions: int) -> None:
    files = sorted(SHARED.glob("*.jsonl"))
    if not files:
        sys.exit(f"no claude-code sessions in {SHARED}")
    for i in range(sessions):
        agent, source = f"agent-{i // len(files)}", files[i % len(files)]
        (inbox / agent).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, inbox / agent / source.name)


def create_database(admin: str) -> str:
    name = f"bench_{uuid.uuid4().hex[:8]}"
    engine = sa.create_engine(admin, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return sa.make_url(admin).set(database=name).render_as_string(hide_password=False)


def postgres_cpu(pgdata: Path) -> float:
    """CPU seconds of the server so far: the postmaster, its reaped backends and the live ones."""
    from ultron.db.embedded import read_postmaster

    info = read_postmaster(pgdata)
    if info is None:
        return 0.0
    master = psutil.Process(info.pid)
    t = master.cpu_times()
    total = t.user + t.system + t.children_user + t.children_system
    for child in master.children(recursive=True):
        try:
            c = child.cpu_times()
            total += c.user + c.system
        except psutil.NoSuchProcess:
            pass
    return total


def tree_cpu(proc: psutil.Process) -> float:
    try:
        procs = [proc, *proc.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except psutil.NoSuchProcess:
            pass
    return total


def run_driver(env: dict[str, str], spec: dict[str, Any]) -> dict[str, Any]:
    """One run in its own process (its CPU is counted through RUSAGE_CHILDREN once reaped)."""
    proc = subprocess.Popen([sys.executable, "-m", "jobs.run_range", json.dumps({"root": str(ROOT), **spec})], env=env,
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"run {spec.get('range') or spec.get('assets')} failed:\n{err[-3000:]}")
    result = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
    if result.get("success") is False:  # an add_partitions call prints no outcome
        raise RuntimeError(f"run {spec.get('range') or spec.get('assets')} did not succeed:\n{err[-3000:]}")
    return result


def wait_for_workers(broker: str, names: list[str], timeout: float = 180) -> None:
    from celery import Celery

    app = Celery(broker=broker, backend=broker)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if set(names) <= {n for reply in (app.control.ping(timeout=1.0) or []) for n in reply}:
                return
            time.sleep(0.5)
        raise RuntimeError(f"celery workers did not answer: {names}")
    finally:
        app.close()


def run_arm(name: str, workers: int, admin: str, base_env: dict[str, str], keys: list[str], per_run: int,
            concurrent_runs: int, broker: str | None, pgdata: Path, scratch: Path) -> dict[str, Any]:
    ultron_url, dagster_url = create_database(admin), create_database(admin)
    dagster_home = scratch / name / "dagster_home"
    dagster_home.mkdir(parents=True)
    shutil.copyfile(DEPLOY / "dagster.yaml", dagster_home / "dagster.yaml")
    env = {**base_env, "ULTRON_DATABASE_URL": ultron_url, "ULTRON_DAGSTER_DATABASE_URL": dagster_url,
           "DAGSTER_HOME": str(dagster_home), "ULTRON_EXECUTOR": "celery" if workers else "in_process",
           "PYTHONPATH": os.pathsep.join([str(DEPLOY), str(ROOT)])}
    if broker:
        env["ULTRON_CELERY_BROKER_URL"] = env["ULTRON_CELERY_BACKEND_URL"] = broker
    run_driver(env, {"add_partitions": keys})
    procs: list[subprocess.Popen[bytes]] = []
    try:
        names = [f"{name}-w{i}@bench" for i in range(workers)]
        for worker in names:
            with open(scratch / f"{worker}.log", "wb") as log:
                procs.append(subprocess.Popen(
                    [sys.executable, "-m", "celery", "-A", "dagster_celery.app", "worker", "-Q", "dagster",
                     "--concurrency", "1", "-n", worker, "--loglevel", "WARNING", "--without-mingle",
                     "--without-gossip"], env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT))
        if names:
            wait_for_workers(broker or "", names)
        ranges = [(keys[i], keys[min(i + per_run, len(keys)) - 1]) for i in range(0, len(keys), per_run)]
        pg0, children0 = postgres_cpu(pgdata), _children_cpu()
        worker0 = sum(tree_cpu(psutil.Process(p.pid)) for p in procs)
        started = time.monotonic()
        with ThreadPoolExecutor(concurrent_runs) as pool:
            list(pool.map(lambda r: run_driver(env, {"assets": PER_SESSION, "range": list(r)}), ranges))
        per_session_wall = time.monotonic() - started
        run_driver(env, {"assets": STORE_WIDE})
        wall = time.monotonic() - started
        pg = postgres_cpu(pgdata) - pg0
        worker_cpu = sum(tree_cpu(psutil.Process(p.pid)) for p in procs) - worker0
        runs_cpu = _children_cpu() - children0  # the run processes, reaped by now
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    engine = sa.create_engine(ultron_url)
    with engine.connect() as conn:
        counts = {t: conn.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar_one()
                  for t in ("trajectory_records", "task_segments", "memory_records")}
    engine.dispose()
    return {"arm": name, "workers": workers, "wall": wall, "per_session_wall": per_session_wall,
            "postgres_cpu": pg, "worker_cpu": worker_cpu, "runs_cpu": runs_cpu, "counts": counts}


def _children_cpu() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--per-run", type=int, default=100, help="partitions per run (a backfill's run size)")
    parser.add_argument("--concurrent-runs", type=int, default=2, help="runs at a time (max_concurrent_runs)")
    parser.add_argument("--arms", default="in_process,celery1,celery2")
    parser.add_argument("--embedding", default="local", choices=["local", "hash"])
    parser.add_argument("--threads", type=int, default=1,
                        help="OMP_NUM_THREADS / MKL_NUM_THREADS of every run and worker process (0: leave unset). "
                             "Two processes each spinning two torch threads on two cores tripled the CPU time")
    args = parser.parse_args()
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(args.threads)
    from ultron.testing.redis_server import RedisServer, available

    arms = args.arms.split(",")
    if any(a.startswith("celery") for a in arms) and not available():
        sys.exit("redis-server is not installed (apt-get install redis-server)")
    print(machine_line())
    with private_home("ultron-throughput-") as home:
        inbox = home / "inbox"
        build_inbox(inbox, args.sessions)
        os.environ.update({"ULTRON_LLM_PROVIDER": "rules", "ULTRON_EMBEDDING_PROVIDER": args.embedding})
        from ultron.db.database import Database
        from ultron.inbox import diff_inbox
        from ultron.settings import Settings

        settings = Settings.from_env()
        db = Database.open(settings)
        admin = db.urls.dagster
        keys = [f.partition_key for f in diff_inbox([inbox], "default", None).new]
        print(f"{len(keys)} sessions ({sum(p.stat().st_size for p in inbox.rglob('*.jsonl')) / 1e6:.0f} MB), "
              f"{args.per_run} per run, {args.concurrent_runs} runs at a time, embeddings: {args.embedding}, "
              f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")
        results = []
        with RedisServer() as redis:
            for arm in arms:
                workers = int(arm.removeprefix("celery")) if arm.startswith("celery") else 0
                scratch = home / "scratch" / arm
                scratch.mkdir(parents=True)
                r = run_arm(arm, workers, admin, dict(os.environ), keys, args.per_run, args.concurrent_runs,
                            redis.url() if workers else None, settings.pgdata, scratch)
                results.append(r)
                print(f"  {arm}: {r['wall']:.1f}s {r['counts']}", flush=True)
        db.dispose()
    one = next((r for r in results if r["workers"] == 1), None)
    base = next((r for r in results if r["workers"] == 0), None)
    print()
    print("| executor | wall s | sessions/s | vs 1 worker | vs in-process | Postgres CPU s (share) "
          "| run processes CPU s | workers CPU s | CPU s per session |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        total = r["postgres_cpu"] + r["runs_cpu"] + r["worker_cpu"]
        label = "in_process" if not r["workers"] else f"celery, {r['workers']} worker{'s' * (r['workers'] > 1)}"
        vs_one = f"{one['wall'] / r['wall']:.2f}x" if one else "-"
        vs_base = f"{base['wall'] / r['wall']:.2f}x" if base else "-"
        print(f"| {label} | {r['wall']:.1f} | {len(keys) / r['wall']:.2f} | {vs_one} | {vs_base} "
              f"| {r['postgres_cpu']:.0f} ({r['postgres_cpu'] / total:.0%}) | {r['runs_cpu']:.0f} "
              f"| {r['worker_cpu']:.0f} | {total / len(keys):.2f} |")
    counts = {json.dumps(r["counts"], sort_keys=True) for r in results}
    print("\nwall time is shared with whatever else runs on the machine; CPU seconds are this benchmark's own")
    print(f"same rows in every arm: {len(counts) == 1} ({results[0]['counts'] if results else {}})")


if __name__ == "__main__":
    main()
