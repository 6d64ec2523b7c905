"""Faults: an LLM that fails 30% of the time, several workers at once, and a full backfill.

Run from the repository root (needs ../shared/data; each part in its own throw-away store):

    python benchmarks/faults.py                         # all three parts
    python benchmarks/faults.py --parts faults --fault-rate 0.5
    python benchmarks/faults.py --parts workers --workers 1 2 4

1. **Faults.** The shared sessions are ingested and maintained with the LLM a local fake
   OpenAI-compatible server (``ultron.testing.cooperative_llm``: a cooperative model) that
   answers ``--fault-rate`` of its requests with a fault drawn evenly from every kind below
   (seeded). The run must complete and leave the failed items pending; a second, clean run
   must finish them. The result is compared with a reference store maintained with no
   fault: segments (agent, file, index, fingerprint), labels and extracted contributions
   (agent, file, lines, content) must be equal, none missing (lost) and none twice
   (duplicated), and nothing may stay pending or marked as done by the rules.
2. **Workers.** The same data, pending again, maintained by 1, 2 and 4 processes started
   together (``Ultron().run_maintenance()`` each, one store): LLM calls counted on the fake
   server by task, beside what each worker did. Claims make N workers cost one worker's
   calls. Near-duplicate merging is off here (its LLM checks depend on arrival order by
   design); this part measures claimed work.
3. **Backfill.** The project's definitions loaded in a code server (``workspace.yaml``), the
   session files of ../shared/data registered as partitions, and a backfill of the four
   per-session assets over all of them launched through the GraphQL API the UI uses; then
   the same with 10,000 partitions. Prints the runs each backfill creates (queued, not run).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import random
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _support import machine_line, private_home  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
AGENTS = ("claude-code", "tau-airline-dev")

#: every kind of fault a real endpoint or the proxy in front of it produces
FAULTS = ("http 429", "http 500", "http 503", "stall past the timeout", "html 200", "truncated json",
          "random bytes", "no choices", "content null", "finish_reason length", "wrong-shaped json", "not json")


def fault_reply(kind: str, value: Any, rng: random.Random):
    from ultron.testing.fake_openai import Reply

    if kind.startswith("http "):
        return Reply.http(int(kind.split()[1]), "injected", **({"retry-after": "0"} if kind == "http 429" else {}))
    if kind == "stall past the timeout":
        return Reply.stall(2.5, Reply.json(value))
    if kind == "html 200":
        return Reply.html()
    if kind == "truncated json":
        return Reply.cut(value, keep=rng.uniform(0.1, 0.9))
    if kind == "random bytes":
        return Reply.body(bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 300))), "application/octet-stream")
    if kind == "no choices":
        return Reply.raw({"id": "x", "object": "chat.completion", "created": 0, "model": "fake", "choices": []})
    if kind == "content null":
        return Reply.raw({"id": "x", "object": "chat.completion", "created": 0, "model": "fake",
                          "choices": [{"index": 0, "finish_reason": "stop",
                                       "message": {"role": "assistant", "content": None}}]})
    if kind == "finish_reason length":
        r = Reply.json(value)
        r.finish_reason = "length"
        r.content = (r.content or "")[: max(1, len(r.content or "") // 2)]
        return r
    if kind == "wrong-shaped json":
        return Reply.json({"unexpected": [1, 2, 3]})
    return Reply.text("Sure! Here is what I found: the session looks fine.")


class FaultyModel:
    """The cooperative model behind a fault injector: each request fails with ``rate``."""

    def __init__(self, rate: float, seed: int = 7) -> None:
        self.rate = rate
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.injected: Counter[str] = Counter()
        self.answered = 0

    def __call__(self, body: dict[str, Any]):
        from ultron.testing.cooperative_llm import answer
        from ultron.testing.fake_openai import Reply

        value = answer(body)
        with self.lock:
            if self.rng.random() < self.rate:
                kind = self.rng.choice(FAULTS)
                self.injected[kind] += 1
                return fault_reply(kind, value, self.rng)
            self.answered += 1
        return Reply.json(value)


def llm_env(url: str, **extra: str) -> dict[str, str]:
    return {"ULTRON_LLM_PROVIDER": "openai", "ULTRON_LLM_BASE_URL": url, "ULTRON_LLM_API_KEY": "k",
            "ULTRON_LLM_MAX_RETRIES": "1", "ULTRON_LLM_RETRY_BASE_SECONDS": "0.01",
            "ULTRON_LLM_TIMEOUT_SECONDS": "1.5", "ULTRON_CRYSTALLIZATION_THRESHOLD": "3", **extra}


def scalar(db, sql: str) -> int:
    import sqlalchemy as sa

    with db.engine.connect() as conn:
        return int(conn.execute(sa.text(sql)).scalar_one())


def state(db) -> dict[str, Any]:
    """What a maintained store holds, in keys that do not depend on random ids."""
    import sqlalchemy as sa

    with db.engine.connect() as conn:
        segments = Counter(tuple(r) for r in conn.execute(sa.text(
            "SELECT agent_id, session_file, segment_index, fingerprint, labeled, memory_extracted FROM task_segments")))
        contributions = Counter(tuple(r) for r in conn.execute(sa.text(
            "SELECT c.agent_id, c.session_file, s.start_line, s.end_line, c.content FROM memory_contributions c "
            "LEFT JOIN task_segments s ON s.id = c.segment_id")))
        memories = Counter(r[0] for r in conn.execute(sa.text(
            "SELECT content FROM memory_records WHERE status = 'active'")))
    return {"segments": segments, "contributions": contributions, "memories": memories,
            "pending_sessions": scalar(db, "SELECT count(*) FROM trajectory_records WHERE segmented = 0"),
            "unlabeled": scalar(db, "SELECT count(*) FROM task_segments WHERE labeled = 0"),
            "marked": scalar(db, "SELECT count(*) FROM memory_records WHERE cardinality(fallback_tasks) > 0"),
            "claims_left": scalar(db, "SELECT count(*) FROM task_segments WHERE claimed_by IS NOT NULL")
                           + scalar(db, "SELECT count(*) FROM trajectory_records WHERE claimed_by IS NOT NULL")}


def pending_extraction(db) -> int:
    from ultron.settings import Settings

    floor = Settings.from_env().trajectory_memory_score_threshold
    return scalar(db, "SELECT count(*) FROM task_segments WHERE labeled = 1 AND memory_extracted = 0 AND "
                      f"((CAST(quality_metrics AS jsonb) -> 'summary' ->> 'overall_score')::float >= {floor} OR "
                      "(CAST(quality_metrics AS jsonb) -> 'summary' ->> 'teaches_lesson') = 'true')")


def maintain(env: dict[str, str]) -> tuple[dict[str, Any], float]:
    """One ``run_maintenance`` in this process with ``env`` applied (a fresh client, as a new run)."""
    from ultron.sdk import Ultron
    from ultron.settings import Settings

    t0 = time.perf_counter()
    report = Ultron(Settings.from_env({**os.environ, **env})).run_maintenance()
    return report, time.perf_counter() - t0


def missing_and_twice(reference: Counter, got: Counter) -> tuple[int, int]:
    lost = sum((reference - got).values())
    twice = sum(n - 1 for n in got.values() if n > 1) - sum(n - 1 for n in reference.values() if n > 1)
    return lost, max(0, twice)


def part_faults(rate: float) -> bool:
    from ultron.sdk import Ultron
    from ultron.testing.fake_openai import FakeOpenAI

    print(f"\n1. Faults: {rate:.0%} of LLM requests fail, kinds drawn evenly from: {', '.join(FAULTS)}")
    with private_home("ultron-bench-faults-ref-"):
        client = Ultron()
        client.ingest([SHARED], "shared")
        sessions = scalar(client.db, "SELECT count(*) FROM trajectory_records")
        with FakeOpenAI(FaultyModel(0.0)) as server:
            _, ref_s = maintain(llm_env(server.url))
            ref_calls = server.calls
        reference = state(client.db)
    with private_home("ultron-bench-faults-"):
        client = Ultron()
        client.ingest([SHARED], "shared")
        model = FaultyModel(rate)
        with FakeOpenAI(model) as server:
            first, first_s = maintain(llm_env(server.url))
            first_calls = server.calls
        after_first = state(client.db)
        left = {"sessions": after_first["pending_sessions"], "segments to label": after_first["unlabeled"],
                "segments to extract": pending_extraction(client.db), "rules-marked memories": after_first["marked"]}
        with FakeOpenAI(FaultyModel(0.0)) as server:
            second, second_s = maintain(llm_env(server.url))
            second_calls = server.calls
        final = state(client.db)
        final_extract = pending_extraction(client.db)
    print(f"   {sessions} sessions of ../shared/data; reference (no faults): {ref_calls} LLM calls, {ref_s:.0f} s, "
          f"{sum(reference['segments'].values())} segments, {sum(reference['contributions'].values())} "
          f"contributions, {sum(reference['memories'].values())} memories")
    print(f"   run 1 with faults: completed in {first_s:.0f} s, {first_calls} requests, injected "
          f"{sum(model.injected.values())} ({', '.join(f'{k} {v}' for k, v in sorted(model.injected.items()))})")
    print(f"     left pending: {', '.join(f'{k} {v}' for k, v in left.items())}")
    print(f"     did: segmented {first['segmented']}, labeled {first['labeled']}, extracted {first['extracted']}, "
          f"fallbacks redone {first['fallbacks_redone']}")
    print(f"   run 2, clean: completed in {second_s:.0f} s, {second_calls} LLM calls; segmented {second['segmented']}, "
          f"labeled {second['labeled']}, extracted {second['extracted']}, fallbacks redone "
          f"{second['fallbacks_redone']}")
    ok = True
    rows = []
    for key in ("segments", "contributions", "memories"):
        lost, twice = missing_and_twice(reference[key], final[key])
        rows.append((key, sum(reference[key].values()), sum(final[key].values()), lost, twice))
        ok &= key == "memories" or (lost == 0 and twice == 0)
    print(f"   {'after both runs':<18}{'reference':>10}{'recovered':>10}{'lost':>6}{'twice':>7}")
    for key, ref_n, got_n, lost, twice in rows:
        if key == "memories":
            print(f"   {key:<18}{ref_n:>10}{got_n:>10}   {lost} texts differ")
        else:
            print(f"   {key:<18}{ref_n:>10}{got_n:>10}{lost:>6}{twice:>7}")
    print("   (segments keyed by agent, file, index, fingerprint and the labelled and extracted flags; "
          "contributions by agent, file, lines and text. Memories are compared by text only for information: "
          "near duplicates merge in arrival order, and the faulted run extracted some segments later, so a merged "
          "body can read differently while every contribution is there)")
    still = {k: final[k] for k in ("pending_sessions", "unlabeled", "marked", "claims_left")}
    still["segments to extract"] = final_extract
    print(f"   left after run 2: {still}")
    ok &= all(v == 0 for k, v in still.items())
    print(f"   => {'PASS' if ok else 'FAIL'}: run 1 completed with work pending; run 2 finished it; "
          f"0 lost and 0 duplicated segments and contributions")
    return ok


WORKER = """
import json, sys, time
from pathlib import Path
from ultron.sdk import Ultron
client = Ultron()
go = Path(sys.argv[1])
while not go.exists():
    time.sleep(0.01)
t0 = time.perf_counter()
report = client.run_maintenance()
print(json.dumps({k: report[k] for k in ("segmented", "labeled", "extracted")} | {"seconds": time.perf_counter() - t0}))
"""


def part_workers(counts: list[int]) -> None:
    import sqlalchemy as sa

    from ultron.sdk import Ultron
    from ultron.testing.cooperative_llm import answer, task_of
    from ultron.testing.fake_openai import FakeOpenAI, Reply

    print(f"\n2. Workers: the same pending sessions maintained by {', '.join(map(str, counts))} processes at once")
    with private_home("ultron-bench-workers-") as home:
        client = Ultron()
        client.ingest([SHARED], "shared")
        sessions = scalar(client.db, "SELECT count(*) FROM trajectory_records")
        print(f"   {sessions} sessions; each reply of the fake model takes 20 ms; dedup merging off")
        print(f"   {'workers':>8}{'LLM calls':>11}{'segment':>9}{'judge':>7}{'extract':>9}{'other':>7}"
              f"{'wall s':>8}   work per worker (segmented/labeled/extracted)")
        for n in counts:
            with client.db.engine.begin() as conn:
                # (written to run on a store without claims too, to measure the code before them)
                tables = set(conn.execute(sa.text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'"))
                             .scalars())
                wipe = [t for t in ("task_segments", "memory_records", "memory_contributions", "knowledge_clusters",
                                    "skills", "feedback_events", "memory_lexemes", "memory_corpus", "work_leases")
                        if t in tables]
                conn.execute(sa.text(f"TRUNCATE {', '.join(wipe)} CASCADE"))
                conn.execute(sa.text("UPDATE trajectory_records SET segmented = 0"))
                if "work_leases" in tables:
                    conn.execute(sa.text("UPDATE trajectory_records SET claimed_by = NULL, claim_expires_at = NULL"))
            shutil.rmtree(home / "skills", ignore_errors=True)
            with FakeOpenAI(lambda body: Reply(content=json.dumps(answer(body)), delay=0.02)) as server:
                env = {**os.environ, **llm_env(server.url, ULTRON_LLM_MAX_RETRIES="0",
                                                ULTRON_LLM_TIMEOUT_SECONDS="60",
                                                ULTRON_DEDUP_SIMILARITY_THRESHOLD="1",
                                                ULTRON_DEDUP_SOFT_THRESHOLD="1"),
                       "ULTRON_DATABASE_URL": client.db.urls.ultron}
                go = home / f"go-{n}-{uuid.uuid4().hex[:6]}"
                procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(go)], env=env, cwd=home,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                         for _ in range(n)]
                time.sleep(3.0)  # every worker imported and waiting
                t0 = time.perf_counter()
                go.touch()
                outs = []
                for p in procs:
                    out, err = p.communicate(timeout=3600)
                    if p.returncode != 0:
                        raise SystemExit(f"a worker failed:\n{err[-3000:]}")
                    outs.append(json.loads(out.strip().splitlines()[-1]))
                wall = time.perf_counter() - t0
                kinds = Counter(task_of(b) for b in list(server.requests))
            dupes = scalar(client.db, "SELECT count(*) - count(DISTINCT (segment_id, content)) FROM memory_contributions")
            work = ", ".join(f"{o['segmented']}/{o['labeled']}/{o['extracted']}" for o in outs)
            other = sum(v for k, v in kinds.items() if k not in ("segment", "judge", "extract"))
            print(f"   {n:>8}{sum(kinds.values()):>11}{kinds['segment']:>9}{kinds['judge']:>7}{kinds['extract']:>9}"
                  f"{other:>7}{wall:>8.1f}   {work}; duplicate contributions {dupes}")


def part_backfill() -> None:
    import dagster as dg
    import sqlalchemy as sa
    from dagster._core.storage.dagster_run import RunsFilter
    from dagster._core.storage.tags import BACKFILL_ID_TAG
    from dagster._daemon.backfill import execute_backfill_iteration
    from dagster_graphql.test.utils import define_out_of_process_context, execute_dagster_graphql

    from ultron.inbox import diff_inbox
    from ultron.sdk import Ultron
    from ultron_assets.partitions import session_partitions
    from ultron_assets.ranges import BACKFILL_PARTITIONS_PER_RUN

    launch = """mutation($params: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $params) {
      __typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message } } }"""
    assets = ["raw_sessions", "task_segments", "quality_metrics", "memories"]
    print(f"\n3. Backfill of the per-session assets ({', '.join(assets)}) over all partitions, through GraphQL "
          f"(BackfillPolicy.multi_run, {BACKFILL_PARTITIONS_PER_RUN} partitions per run)")
    with private_home("ultron-bench-backfill-") as home:
        db = Ultron().db
        shared = [f.partition_key for f in diff_inbox([SHARED], "default", None).new]
        synthetic = [f"bench:synthetic/{i:05d}.jsonl" for i in range(10_000)]
        for label, keys in (("../shared/data session files", shared), ("synthetic session files", synthetic)):
            name = f"dagster_bench_{uuid.uuid4().hex[:8]}"
            admin = sa.make_url(db.urls.dagster)
            engine = sa.create_engine(admin, isolation_level="AUTOCOMMIT")
            with engine.connect() as conn:
                conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
            os.environ["ULTRON_DAGSTER_PG_URL"] = admin.set(database=name).render_as_string(hide_password=False)
            dagster_home = home / f"dagster-{name}"
            dagster_home.mkdir()
            shutil.copyfile(ROOT / "dagster.yaml", dagster_home / "dagster.yaml")
            os.environ["DAGSTER_HOME"] = str(dagster_home)
            t0 = time.perf_counter()
            with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
                instance.add_dynamic_partitions(session_partitions.name, keys)
                with define_out_of_process_context(str(ROOT / "workspace.yaml"), None, instance) as context:
                    result = execute_dagster_graphql(context, launch, variables={"params": {
                        "assetSelection": [{"path": [a]} for a in assets], "allPartitions": True}})
                    launched = result.data["launchPartitionBackfill"]
                    if launched["__typename"] != "LaunchBackfillSuccess":
                        raise SystemExit(f"backfill not launched: {launched}")
                    runs: list[Any] = []
                    for _ in range(10):
                        list(execute_backfill_iteration(context.process_context, logging.getLogger("backfill")))
                        runs = list(instance.get_runs(RunsFilter(tags={BACKFILL_ID_TAG: launched["backfillId"]})))
                        if runs:
                            break
            print(f"   {label:<30}{len(keys):>7} partitions -> {len(runs):>4} runs "
                  f"(expected {math.ceil(len(keys) / BACKFILL_PARTITIONS_PER_RUN)}; before: {len(keys)}) "
                  f"in {time.perf_counter() - t0:.0f} s")
            os.environ.pop("ULTRON_DAGSTER_PG_URL", None)
            os.environ.pop("DAGSTER_HOME", None)
            engine.dispose()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", nargs="+", choices=("faults", "workers", "backfill"),
                    default=["faults", "workers", "backfill"])
    ap.add_argument("--fault-rate", type=float, default=0.3)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    args = ap.parse_args()
    if not SHARED.is_dir():
        print(f"{SHARED} is absent: nothing to measure")
        return 0
    logging.getLogger("ultron").setLevel(logging.ERROR)
    print(machine_line())
    ok = True
    if "faults" in args.parts:
        ok = part_faults(args.fault_rate)
    if "workers" in args.parts:
        part_workers(args.workers)
    if "backfill" in args.parts:
        part_backfill()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
