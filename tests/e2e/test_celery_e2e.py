"""The whole asset graph with its steps on Celery workers gives the same store as one process.

A real redis-server is the broker and result backend; two real Celery worker processes
(``celery -A dagster_celery.app worker`` with deploy/celery/ on PYTHONPATH, the documented
setup) execute the steps; the runs use deploy/celery/dagster.yaml with its storage on a
fresh database of the test server. Two runs over halves of the claude-code sessions go at
once (so both workers take steps and their claims meet), then the store-wide assets. The
same graph over the same sessions with the in-process executor, in an empty database of its
own, is the reference: the same rows per table, the same memories, and across both runs each
segment labelled once and extracted once.

Only the five claude-code sessions of ../shared/data are used: they exercise every stage and
keep the test near a minute; the 100 airline sessions would only repeat the same steps.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from tests.conftest import SHARED_DATA
from ultron.testing import redis_server

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "celery"
AGENT = "claude-code"
PER_SESSION = ["raw_sessions", "task_segments", "quality_metrics", "memories"]
STORE_WIDE = ["tiers", "clusters", "skills", "sft_dataset"]
WORKERS = 2

pytestmark = [
    pytest.mark.skipif(not redis_server.available(),
                       reason="redis-server is not installed (apt-get install redis-server)"),
    pytest.mark.skipif(not (SHARED_DATA / AGENT).is_dir(), reason="../shared/data/claude-code is absent"),
]


def session_keys() -> list[str]:
    """The claude-code sessions' partition keys, as the sensor names them with the shared data as inbox."""
    from ultron.inbox import diff_inbox

    diff = diff_inbox([SHARED_DATA], "default", None)
    return [f.partition_key for f in diff.new if f.partition_key.split(":", 1)[0] == AGENT]


def _create_database(admin_url: str) -> str:
    name = f"ultron_celery_{uuid.uuid4().hex[:8]}"
    engine = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return sa.make_url(admin_url).set(database=name).render_as_string(hide_password=False)


def _drop_database(admin_url: str, url: str) -> None:
    engine = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{sa.make_url(url).database}" WITH (FORCE)'))
    engine.dispose()


class Arm:
    """One store (Ultron database, Dagster database, DAGSTER_HOME) and the environment its processes share."""

    def __init__(self, db, root: Path, executor: str, broker: str | None) -> None:
        self.admin = db.urls.dagster
        self.ultron_url = _create_database(self.admin)
        self.dagster_url = _create_database(self.admin)
        self.home = root / "ultron_home"
        self.dagster_home = root / "dagster_home"
        self.dagster_home.mkdir(parents=True)
        shutil.copyfile(DEPLOY / "dagster.yaml", self.dagster_home / "dagster.yaml")
        self.env = {
            **os.environ, "ULTRON_HOME": str(self.home), "ULTRON_DATABASE_URL": self.ultron_url,
            "ULTRON_DAGSTER_DATABASE_URL": self.dagster_url, "DAGSTER_HOME": str(self.dagster_home),
            "ULTRON_INBOX": str(SHARED_DATA), "ULTRON_LLM_PROVIDER": "rules", "ULTRON_EXECUTOR": executor,
            "PYTHONPATH": os.pathsep.join([str(DEPLOY), str(ROOT)]),
            # one torch thread per process, as deploy/celery/README.md says for workers sharing cores
            "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
        }
        if broker:
            self.env["ULTRON_CELERY_BROKER_URL"] = self.env["ULTRON_CELERY_BACKEND_URL"] = broker
        self.drivers: list[subprocess.Popen[str]] = []
        self.engine = sa.create_engine(self.ultron_url.replace("postgresql+psycopg2", "postgresql+psycopg"))

    def start(self, spec: dict[str, Any]) -> subprocess.Popen[str]:
        proc = subprocess.Popen([sys.executable, "-m", "jobs.run_range", json.dumps({"root": str(ROOT), **spec})],
                                env=self.env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.drivers.append(proc)
        return proc

    def finish(self, proc: subprocess.Popen[str], logs: list[Path] = ()) -> dict[str, Any]:
        out, err = proc.communicate(timeout=600)
        self.last_err = err[-6000:]
        worker_logs = "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in logs if p.exists())
        assert proc.returncode == 0, err[-4000:] + worker_logs
        result = json.loads(out.strip().splitlines()[-1])
        assert result.get("success", True), err[-4000:] + worker_logs
        return result

    def run(self, spec: dict[str, Any]) -> dict[str, Any]:
        return self.finish(self.start(spec))

    def close(self) -> None:
        _stop(self.drivers)
        self.engine.dispose()
        for url in (self.ultron_url, self.dagster_url):
            _drop_database(self.admin, url)


#: tables whose row count depends on how many writers ran at once (ultron/db/migrations 0006)
SHARDED = {"memory_corpus", "memory_lexemes"}


def _store(engine) -> dict[str, Any]:
    """What a user sees in the store: rows per table, the active memories, segments and their labels."""
    with engine.connect() as conn:
        tables = conn.execute(sa.text(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'alembic_version'"
        )).scalars().all()
        counts = {t: conn.execute(sa.text(f'SELECT count(*) FROM "{t}"')).scalar_one()
                  for t in sorted(set(tables) - SHARDED)}
        # The BM25 statistics are sharded counters (a writer adds to the first free shard), so
        # concurrent writers spread the same totals over more rows: compare the totals.
        counts["memory_corpus"] = tuple(conn.execute(sa.text(
            "SELECT sum(docs), round(sum(len_a)::numeric, 3), round(sum(len_b)::numeric, 3), "
            "round(sum(len_c)::numeric, 3) FROM memory_corpus")).one())
        counts["memory_lexemes"] = sorted(tuple(r) for r in conn.execute(sa.text(
            "SELECT lexeme, sum(df) FROM memory_lexemes GROUP BY lexeme HAVING sum(df) <> 0")))
        memories = [tuple(r) for r in conn.execute(sa.text(
            "SELECT memory_type, content, kind FROM memory_records WHERE status = 'active' ORDER BY 1, 2, 3"))]
        # Arrival order, which concurrent runs change, decides the order in which a merged memory's
        # resolution lists its sources and which of equals (no hits yet) is HOT or COLD; not the
        # memories themselves nor how many are in each tier.
        tiers = dict(conn.execute(sa.text(
            "SELECT tier, count(*) FROM memory_records WHERE status = 'active' GROUP BY tier")).all())
        segments = [tuple(r) for r in conn.execute(sa.text(
            "SELECT session_file, start_line, end_line, fingerprint, labeled, memory_extracted, "
            "round((quality_metrics::jsonb->'summary'->>'overall_score')::numeric, 6) "
            "FROM task_segments ORDER BY 1, 2"))]
        claims_left = conn.execute(sa.text(
            "SELECT (SELECT count(*) FROM task_segments WHERE claimed_by IS NOT NULL) + "
            "(SELECT count(*) FROM trajectory_records WHERE claimed_by IS NOT NULL)")).scalar_one()
        skills = conn.execute(sa.text("SELECT count(*) FROM skills")).scalar_one()
    return {"counts": counts, "memories": memories, "tiers": tiers, "segments": segments, "claims_left": claims_left,
            "skills": skills}


def _summed(results: list[dict[str, Any]], asset: str, key: str) -> int:
    return sum(int(m["metadata"].get(key, 0)) for r in results for m in r["materialized"] if m["asset"] == asset)


@pytest.fixture
def redis() -> Iterator[redis_server.RedisServer]:
    with redis_server.RedisServer() as server:
        yield server


def _wait_for_workers(broker: str, names: list[str], procs: list[subprocess.Popen[str]], logs: list[Path]) -> None:
    from celery import Celery

    app = Celery(broker=broker, backend=broker)
    deadline = time.monotonic() + 180
    try:
        while time.monotonic() < deadline:
            for p, log in zip(procs, logs):
                assert p.poll() is None, f"celery worker exited: {log.read_text(errors='replace')[-3000:]}"
            answered = {name for reply in (app.control.ping(timeout=1.0) or []) for name in reply}
            if set(names) <= answered:
                return
            time.sleep(0.5)
        raise AssertionError(f"celery workers did not answer: {names}")
    finally:
        app.close()


def _stop(procs: list[subprocess.Popen[str]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()  # SIGTERM: celery's warm shutdown
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def test_the_graph_on_two_celery_workers_matches_the_in_process_run(db, redis, tmp_path):
    keys = session_keys()
    assert len(keys) >= 4, keys
    half = len(keys) // 2
    broker = redis.url()
    reference = Arm(db, tmp_path / "in_process", "in_process", None)
    celery = Arm(db, tmp_path / "celery", "celery", broker)
    workers: list[subprocess.Popen[str]] = []
    logs = [tmp_path / f"worker{i}.log" for i in range(WORKERS)]
    try:
        # The reference: one process, every session in one run, then the store-wide assets.
        started = time.monotonic()
        reference.run({"add_partitions": keys})
        ref_runs = [reference.run({"assets": PER_SESSION, "range": [keys[0], keys[-1]]}),
                    reference.run({"assets": STORE_WIDE})]
        ref_seconds = time.monotonic() - started
        assert {r["executor"] for r in ref_runs} == {"in_process"}

        names = [f"w{i}@ultron-test" for i in range(WORKERS)]
        for name, log in zip(names, logs):
            with open(log, "w") as fh:
                workers.append(subprocess.Popen(
                    [sys.executable, "-m", "celery", "-A", "dagster_celery.app", "worker", "-Q", "dagster",
                     "--concurrency", "1", "-n", name, "--loglevel", "INFO", "--without-mingle", "--without-gossip"],
                    env=celery.env, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT, text=True))
        _wait_for_workers(broker, names, workers, logs)

        started = time.monotonic()
        celery.run({"add_partitions": keys})
        # Two runs at once, as two backfill runs would: both workers get steps, their claims meet.
        both = [celery.start({"assets": PER_SESSION, "range": [keys[0], keys[half - 1]]}),
                celery.start({"assets": PER_SESSION, "range": [keys[half], keys[-1]]})]
        runs = [celery.finish(p, logs) for p in both]
        runs.append(celery.finish(celery.start({"assets": STORE_WIDE}), logs))
        celery_seconds = time.monotonic() - started
        print(f"{len(keys)} sessions: in-process {ref_seconds:.1f}s, 2 celery workers {celery_seconds:.1f}s")

        assert {r["executor"] for r in runs} == {"celery"}
        # every step ran on a Celery worker, and both workers took some
        assert set().union(*(r["workers"] for r in runs)) == set(names), celery.last_err
        assert [r["steps_on_workers"] for r in runs] == [len(PER_SESSION), len(PER_SESSION), len(STORE_WIDE)]

        ref, got = _store(reference.engine), _store(celery.engine)
        assert ref["counts"]["trajectory_records"] == len(keys)
        assert ref["memories"] and ref["segments"] and ref["skills"] >= 0
        assert got["counts"] == ref["counts"]
        assert got["segments"] == ref["segments"]
        assert got["memories"] == ref["memories"]
        assert got["tiers"] == ref["tiers"]
        assert got["claims_left"] == ref["claims_left"] == 0
        # no duplicated work: across the concurrent runs each segment was labelled once and
        # extracted once, exactly as in the single process
        work = {key: (_summed(runs, asset, key), _summed(ref_runs, asset, key))
                for asset, key in (("quality_metrics", "labeled_now"), ("memories", "segments_extracted"),
                                   ("task_segments", "segments"))}
        print(f"work (celery, in-process): {work}; segments {len(ref['segments'])}, "
              f"labeled {sum(1 for s in ref['segments'] if s[4])}, extracted {sum(1 for s in ref['segments'] if s[5])}")
        assert work["labeled_now"][0] == work["labeled_now"][1] == sum(1 for s in ref["segments"] if s[4])
        assert work["segments_extracted"][0] == work["segments_extracted"][1] == sum(1 for s in ref["segments"] if s[5])
    finally:
        _stop(workers)
        reference.close()
        celery.close()
