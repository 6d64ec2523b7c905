"""Fault: a ``run_maintenance`` killed with SIGKILL left its claims for the lease to expire
(ULTRON_CLAIM_LEASE_SECONDS, 900 s). Measured before the fix over 10 kills and one clean run:
7 segments and 3 memories missing, 5 items stuck pending, because a retry started at once
found the dead worker's items claimed, skipped them and succeeded.

Here a maintenance process runs over the example sessions with a fake OpenAI-compatible LLM
that hangs on one request (of segmentation, labelling, extraction or cluster naming), so the
worker is stopped mid-step holding claims (or the clustering lease). The test checks the rows
name that process as their holder, kills it with SIGKILL, and runs maintenance once in the
test process at once, the lease left at its 900 s default: the run must end with exactly the
rows of an uninterrupted run on the same input, nothing pending and nothing claimed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXTERNAL
import sqlalchemy as sa

from ultron.db import claims as claim_store
from ultron.testing.cooperative_llm import answer, task_of
from ultron.testing.fake_openai import FakeOpenAI, Reply

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
WORKER = "from ultron.sdk import Ultron\nUltron().run_maintenance()\n"


class StallingLLM:
    """A cooperative model that hangs on the ``nth`` request of ``task`` once, until released."""

    def __init__(self, task: str | None = None, nth: int = 1) -> None:
        self.task, self.nth, self.seen = task, nth, 0
        self.reached, self.release = threading.Event(), threading.Event()
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Reply:
        if task_of(body) == self.task:
            with self._lock:
                self.seen += 1
                stall = self.seen == self.nth
            if stall:
                self.reached.set()
                self.release.wait(300)
                return Reply.http(503, "the worker that asked is gone")
        return Reply(content=json.dumps(answer(body)), delay=0.02)


def _scalar(db, sql: str, **params) -> Any:
    with db.engine.connect() as conn:
        return conn.execute(sa.text(sql), params).scalar_one()


def _state(db) -> dict[str, int]:
    return {
        "segments": _scalar(db, "SELECT count(*) FROM task_segments"),
        "memories": _scalar(db, "SELECT count(*) FROM memory_records"),
        "contributions": _scalar(db, "SELECT count(*) FROM memory_contributions"),
        "clusters": _scalar(db, "SELECT count(*) FROM knowledge_clusters WHERE status = 'active'"),
        "skills": _scalar(db, "SELECT count(*) FROM skills"),
        "same_content_twice": _scalar(db, "SELECT count(*) - count(DISTINCT content) FROM memory_records"),
        "sessions_pending": _scalar(db, "SELECT count(*) FROM trajectory_records WHERE segmented = 0"),
        "unlabeled": _scalar(db, "SELECT count(*) FROM task_segments WHERE labeled = 0"),
        "unextracted": _scalar(db, "SELECT count(*) FROM task_segments WHERE labeled = 1 AND memory_extracted = 0"),
        "claims_left": _scalar(db, "SELECT (SELECT count(*) FROM task_segments WHERE claimed_by IS NOT NULL) + "
                                   "(SELECT count(*) FROM trajectory_records WHERE claimed_by IS NOT NULL)"),
        "leases_left": _scalar(db, "SELECT count(*) FROM work_leases"),
    }


@pytest.fixture(scope="module")
def fleet(db, tmp_path_factory):
    """The example sessions ingested once; ``reset()`` makes them pending again with nothing derived."""
    from ultron.sdk import Ultron
    from ultron.settings import Settings

    home = tmp_path_factory.mktemp("killed_worker_home")
    base = {**os.environ, "ULTRON_HOME": str(home), "ULTRON_DATABASE_URL": db.urls.ultron,
            "ULTRON_LLM_PROVIDER": "openai", "ULTRON_LLM_API_KEY": "k", "ULTRON_LLM_MAX_RETRIES": "0",
            "ULTRON_CRYSTALLIZATION_THRESHOLD": "3",
            # as in test_concurrent_workers: which near-duplicates are asked about depends on order
            "ULTRON_DEDUP_SIMILARITY_THRESHOLD": "1", "ULTRON_DEDUP_SOFT_THRESHOLD": "1"}
    base.pop("ULTRON_CLAIM_LEASE_SECONDS", None)   # the 900 s default: not what frees the claims
    with db.engine.begin() as conn:
        conn.execute(sa.text("TRUNCATE trajectory_records, raw_user_uploads CASCADE"))
    assert Ultron(Settings.from_env(base), db=db).ingest([EXAMPLES], "fleet").totals["failed"] == 0

    def reset() -> None:
        with db.engine.begin() as conn:
            conn.execute(sa.text("TRUNCATE task_segments, memory_records, memory_contributions, knowledge_clusters, "
                                 "skills, feedback_events, memory_lexemes, memory_corpus, work_leases CASCADE"))
            conn.execute(sa.text("UPDATE trajectory_records SET segmented = 0, claimed_by = NULL, "
                                 "claim_expires_at = NULL"))
        shutil.rmtree(home / "skills", ignore_errors=True)

    def maintain(url: str) -> None:
        settings = Settings.from_env({**base, "ULTRON_LLM_BASE_URL": url})
        assert settings.claim_lease_seconds == 900
        Ultron(settings, db=db).run_maintenance()

    return base, reset, maintain


@pytest.fixture(scope="module")
def uninterrupted(db, fleet) -> dict[str, int]:
    _, reset, maintain = fleet
    reset()
    with FakeOpenAI(StallingLLM()) as server:
        maintain(server.url)
    state = _state(db)
    assert state["segments"] >= 10 and state["memories"] > 0 and state["clusters"] > 0, state
    return state


def _held(db) -> list[str]:
    """Who holds claims or leases now (worker ids)."""
    with db.engine.connect() as conn:
        return list(conn.execute(sa.text(
            "SELECT claimed_by FROM trajectory_records WHERE claimed_by IS NOT NULL UNION ALL "
            "SELECT claimed_by FROM task_segments WHERE claimed_by IS NOT NULL UNION ALL "
            "SELECT split_part(holder, '/', 1) FROM work_leases")).scalars())


@pytest.mark.parametrize("task,nth", [("segment", 2), ("judge", 2), ("extract", 2), ("topic", 1)])
def test_the_run_after_a_killed_worker_does_its_work_at_once(db, fleet, uninterrupted, task, nth):
    if EXTERNAL and task in ("segment", "extract"):
        pytest.skip("the embedded pass kills at every step; on an external server one claim step and the lease do")
    base, reset, maintain = fleet
    reset()
    llm = StallingLLM(task, nth)
    with FakeOpenAI(llm) as server:
        proc = subprocess.Popen([sys.executable, "-c", WORKER], env={**base, "ULTRON_LLM_BASE_URL": server.url},
                                cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            assert llm.reached.wait(300), proc.stderr.read()[-3000:] if proc.poll() is not None else "no stall"
            held = _held(db)
            assert held, f"the worker stalled in {task} holding nothing"
            worker = held[0]
            assert worker.startswith(f"{socket.gethostname()}:{proc.pid}:") and set(held) == {worker}
            with db.engine.connect() as conn:
                assert claim_store.live_workers(conn, [worker]) == {worker}
            items = len(held)
            killed = time.monotonic()
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            maintain(server.url)
            took = time.monotonic() - killed
        finally:
            llm.release.set()
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            proc.stderr.close()
    after = _state(db)
    print(f"killed in {task} holding {items}: the next run ended {took:.2f} s after the kill; {after}")
    assert after == uninterrupted
    assert after["sessions_pending"] == after["unlabeled"] == after["claims_left"] == after["leases_left"] == 0
    assert after["same_content_twice"] == 0
    assert took < 120   # the whole remaining run, not the 900 s lease
