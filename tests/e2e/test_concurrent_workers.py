"""Fault: two workers did the same work twice.

Two, then four ``Ultron().run_maintenance()`` processes run at once over one store and
one pending set of sessions, with the LLM a counting fake OpenAI-compatible server. The
workers must share the work: together they make exactly as many LLM calls as a single
worker does over the same data, and no session, segment or memory is worked on twice.
Before claims, every worker segmented every session and labelled every segment.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from ultron.testing.cooperative_llm import answer, task_of
from ultron.testing.fake_openai import FakeOpenAI, Reply

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
#: Each reply waits this long, like a (very fast) real model: the workers' runs overlap.
DELAY = 0.05

#: One worker: wait for the start signal (so N workers really start together), run the
#: whole maintenance, print its summary.
WORKER = """
import json, os, sys, time
from pathlib import Path
from ultron.sdk import Ultron
client = Ultron()
go = Path(sys.argv[1])
while not go.exists():
    time.sleep(0.01)
report = client.run_maintenance()
print(json.dumps({k: report[k] for k in ("segmented", "labeled", "extracted")} | {
    "clusters": report["clusters"].get("skipped_run"), "skills": report["skills"].get("skipped_run")}))
"""


def _respond(body: dict[str, Any]) -> Reply:
    return Reply(content=json.dumps(answer(body)), delay=DELAY)


def _reset(db, home: Path, env: dict[str, str]) -> None:
    """The example sessions pending again and nothing derived from them: ingested once per
    module (ingesting is the slow part), every derived row and file dropped before each run."""
    from ultron.sdk import Ultron
    from ultron.settings import Settings

    examples = len(list(EXAMPLES.glob("*.jsonl")))
    if not _INGESTED or _scalar(db, "SELECT count(*) FROM trajectory_records WHERE agent_id = 'fleet'") != examples:
        with db.engine.begin() as conn:
            conn.execute(sa.text("TRUNCATE trajectory_records, raw_user_uploads CASCADE"))
        assert Ultron(Settings.from_env(env), db=db).ingest([EXAMPLES], "fleet").totals["failed"] == 0
        _INGESTED[:] = [home]
    with db.engine.begin() as conn:
        conn.execute(sa.text("TRUNCATE task_segments, memory_records, memory_contributions, knowledge_clusters, "
                             "skills, feedback_events, memory_lexemes, memory_corpus, work_leases CASCADE"))
        conn.execute(sa.text("UPDATE trajectory_records SET segmented = 0, claimed_by = NULL, "
                             "claim_expires_at = NULL"))
    shutil.rmtree(home / "skills", ignore_errors=True)


_INGESTED: list[Path] = []


def _scalar(db, sql: str) -> int:
    with db.engine.connect() as conn:
        return int(conn.execute(sa.text(sql)).scalar_one())


def _run_workers(db, home: Path, n: int) -> dict[str, Any]:
    """The example sessions pending in a store with nothing else, then ``n`` maintenance processes at once."""
    with FakeOpenAI(_respond) as server:
        env = {**os.environ, "ULTRON_HOME": str(home), "ULTRON_DATABASE_URL": db.urls.ultron,
               "ULTRON_LLM_PROVIDER": "openai", "ULTRON_LLM_BASE_URL": server.url, "ULTRON_LLM_API_KEY": "k",
               "ULTRON_LLM_MAX_RETRIES": "0", "ULTRON_CRYSTALLIZATION_THRESHOLD": "3",
               # Near-duplicate checks compare each memory with those already stored, so how many
               # the LLM is asked about depends on arrival order by design; this test is about claims.
               "ULTRON_DEDUP_SIMILARITY_THRESHOLD": "1", "ULTRON_DEDUP_SOFT_THRESHOLD": "1"}
        _reset(db, home, env)
        go = home / f"go-{n}"
        procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(go)], env=env, cwd=ROOT,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(n)]
        time.sleep(0.5)
        go.touch()
        outputs = []
        for p in procs:
            out, err = p.communicate(timeout=300)
            assert p.returncode == 0, err[-3000:]
            outputs.append(json.loads(out.strip().splitlines()[-1]))
        kinds: dict[str, int] = {}
        for body in list(server.requests):
            kinds[task_of(body)] = kinds.get(task_of(body), 0) + 1
        calls = server.calls
    return {
        "calls": calls, "kinds": kinds, "workers": outputs,
        "segmented": sum(o["segmented"] for o in outputs), "labeled": sum(o["labeled"] for o in outputs),
        "extracted": sum(o["extracted"] for o in outputs),
        "segments": _scalar(db, "SELECT count(*) FROM task_segments"),
        "memories": _scalar(db, "SELECT count(*) FROM memory_records"),
        "contributions": _scalar(db, "SELECT count(*) FROM memory_contributions"),
        "same_content_twice": _scalar(db, "SELECT count(*) - count(DISTINCT content) FROM memory_records"),
        "unlabeled": _scalar(db, "SELECT count(*) FROM task_segments WHERE labeled = 0"),
        "claims_left": _scalar(db, "SELECT count(*) FROM task_segments WHERE claimed_by IS NOT NULL")
                       + _scalar(db, "SELECT count(*) FROM trajectory_records WHERE claimed_by IS NOT NULL"),
        "clusters": _scalar(db, "SELECT count(*) FROM knowledge_clusters WHERE status = 'active'"),
    }


_BASELINE: dict[str, Any] = {}


def _home(tmp_path_factory) -> Path:
    """One ULTRON_HOME for the module's runs (the sessions are ingested into it once)."""
    return _INGESTED[0] if _INGESTED else tmp_path_factory.mktemp("fleet_home")


def _baseline(db, tmp_path_factory) -> dict[str, Any]:
    if not _BASELINE:
        _BASELINE.update(_run_workers(db, _home(tmp_path_factory), 1))
    return _BASELINE


@pytest.mark.parametrize("workers", [2, 4])
def test_concurrent_workers_never_do_the_same_llm_work_twice(db, tmp_path_factory, workers):
    one = _baseline(db, tmp_path_factory)
    print(f"1 worker: { {k: v for k, v in one.items() if k != 'workers'} }")
    assert one["segmented"] == len(list(EXAMPLES.glob("*.jsonl"))) and one["labeled"] == one["segments"] >= 10 and one["memories"] > 0
    assert one["calls"] > one["segments"]
    many = _run_workers(db, _home(tmp_path_factory), workers)
    print(f"LLM calls: 1 worker {one['calls']} {one['kinds']}; {workers} workers {many['calls']} {many['kinds']}")
    # each session segmented once, each segment labelled once and extracted once, across all workers
    assert (many["segmented"], many["labeled"], many["extracted"]) == (one["segmented"], one["labeled"],
                                                                     one["extracted"]), many["workers"]
    assert many["kinds"] == one["kinds"]
    assert many["calls"] == one["calls"]
    for key in ("segments", "memories", "contributions", "clusters"):
        assert many[key] == one[key], key
    assert many["same_content_twice"] == 0 and many["unlabeled"] == 0 and many["claims_left"] == 0
    # the work was shared, not done by whichever worker started first
    assert sum(1 for o in many["workers"] if o["segmented"] or o["labeled"]) >= 2, many["workers"]
