"""Session partitions at scale: ULTRON_PARTITIONING=session against daily, in the same run.

For each size, a temporary inbox of small synthetic .jsonl files over a few agents and
days (mtimes set with os.utime) is watched by the real `session_file_sensor`, evaluated
with dg.build_sensor_context on a real Dagster instance (dagster-postgres on a private
embedded server, a fresh database per mode and size). Measured per mode:

- first tick over the full inbox (every file new; under daily this also records the
  arrival ledger), and adding the partitions that tick asked for to the instance;
- a no-change tick (median of several);
- listing the partitions: instance.get_dynamic_partitions, and the asset's partition keys
  (partitions_def.get_partition_keys against the instance), median of several.

Session mode is the baseline; the last column is daily / session.

    .venv/bin/python benchmarks/partitions.py                 # 10k and 100k files
    .venv/bin/python benchmarks/partitions.py --sizes 2000    # a quick run
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._support import machine_line, private_home  # noqa: E402

AGENTS = 4
DAYS = 5
REPEATS = 5


def make_inbox(root: Path, n: int) -> None:
    """n one-line sessions spread over AGENTS agents and DAYS days (mtime at noon UTC)."""
    base = 1_767_268_800  # 2026-01-01T12:00:00Z
    line = json.dumps({"role": "user", "content": "hello"}) + "\n"
    for i in range(n):
        agent, day = i % AGENTS, (i // AGENTS) % DAYS
        folder = root / f"agent{agent}" / f"proj{(i // 1000) % 10}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"s{i:06d}.jsonl"
        path.write_text(line)
        stamp = base + day * 86_400
        os.utime(path, (stamp, stamp))


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    t0 = time.perf_counter()
    value = fn()
    return time.perf_counter() - t0, value


def median_of(fn: Callable[[], object], repeats: int = REPEATS) -> float:
    return statistics.median(timed(fn)[0] for _ in range(repeats))


def measure(mode: str, n: int, inbox: Path, home: Path, dagster_url: str) -> dict[str, float | int]:
    import dagster as dg
    import sqlalchemy as sa

    from sensors.session_files import build_session_file_sensor
    from ultron.settings import Settings
    from ultron_assets.memory import build_per_session_assets
    from ultron_assets.partitions import partitions_for

    name = f"dagster_bench_{mode}_{uuid.uuid4().hex[:8]}"
    admin = sa.make_url(dagster_url)
    engine = sa.create_engine(admin, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    dagster_home = home / f"dagster-{name}"
    dagster_home.mkdir(parents=True)
    url = admin.set(database=name).render_as_string(hide_password=False)
    (dagster_home / "dagster.yaml").write_text(
        f'storage:\n  postgres:\n    postgres_url: "{url}"\ntelemetry:\n  enabled: false\n')
    state = home / f"state-{mode}-{n}"  # a fresh arrival ledger
    settings = Settings.from_env(home=state, inbox=(inbox,), partitioning=mode)
    sensor = build_session_file_sensor(settings)
    partitions_def = partitions_for(mode)
    raw_sessions = build_per_session_assets(partitions_def)[0]
    try:
        with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
            first_s, first = timed(lambda: sensor(dg.build_sensor_context(instance=instance)))
            [add] = first.dynamic_partitions_requests
            add_s, _ = timed(lambda: instance.add_dynamic_partitions(add.partitions_def_name, list(add.partition_keys)))
            cursor = first.cursor

            def quiet_tick() -> None:
                result = sensor(dg.build_sensor_context(instance=instance, cursor=cursor))
                assert not result.run_requests, len(result.run_requests)

            quiet_s = median_of(quiet_tick)
            list_s = median_of(lambda: instance.get_dynamic_partitions(partitions_def.name))
            keys_s = median_of(lambda: raw_sessions.partitions_def.get_partition_keys(dynamic_partitions_store=instance))
            partitions = len(instance.get_dynamic_partitions(partitions_def.name))
    finally:
        with engine.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE "{name}" WITH (FORCE)'))
        engine.dispose()
    return {"partitions": partitions, "runs": len(first.run_requests), "first_tick": first_s, "add": add_s,
            "quiet_tick": quiet_s, "list": list_s, "asset_keys": keys_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=[10_000, 100_000],
                        help="session file counts, comma separated (default 10000,100000)")
    args = parser.parse_args()
    print(machine_line())
    print(f"{AGENTS} agents x {DAYS} days of one-line sessions; medians of {REPEATS} for the repeated measures; "
          "CPU shared with other work, so read the ratio (same run) rather than the absolute times.\n")
    with private_home("ultron-bench-partitions-") as home:
        from ultron.sdk import Ultron

        db = Ultron().db
        rows = []
        for n in args.sizes:
            inbox = home / f"inbox-{n}"
            t0 = time.perf_counter()
            make_inbox(inbox, n)
            print(f"{n:,} files created in {time.perf_counter() - t0:.1f} s", flush=True)
            results = {mode: measure(mode, n, inbox, home, db.urls.dagster) for mode in ("session", "daily")}
            rows.append((n, results))
            shutil.rmtree(inbox, ignore_errors=True)
        db.dispose()

    labels = [("partitions", "partitions", None), ("runs", "runs asked by the first tick", None),
              ("first_tick", "first tick, full inbox", "s"), ("add", "add its partitions to the instance", "s"),
              ("quiet_tick", "no-change tick (median)", "s"), ("list", "instance.get_dynamic_partitions", "s"),
              ("asset_keys", "raw_sessions partition keys", "s")]
    print(f"\n{'files':>8}  {'measure':<36}{'session':>12}{'daily':>12}{'daily/session':>15}")
    for n, results in rows:
        for key, label, unit in labels:
            s, d = results["session"][key], results["daily"][key]
            show = (lambda v: f"{v * 1000:,.1f} ms") if unit else (lambda v: f"{v:,}")
            ratio = f"{d / s:.3f}x" if s else "-"
            print(f"{n:>8,}  {label:<36}{show(s):>12}{show(d):>12}{ratio:>15}")
        print()
    print("runs: above ULTRON_SENSOR_MAX_RUNS_PER_TICK (25) the tick asks for one ingest_inbox batch run instead.")


if __name__ == "__main__":
    main()
