"""Session partitions at scale: ULTRON_PARTITIONING=session against daily, in the same run.

For each size, a temporary inbox of small synthetic .jsonl files over a few agents and
days (mtimes set with os.utime) is watched by the real `session_file_sensor`, evaluated
with dg.build_sensor_context on a real Dagster instance (dagster-postgres on a private
embedded server, a fresh database per mode and size, and a fresh migrated Ultron database
per mode and size for the arrivals, opened before the clock starts). Measured per mode:

- the first tick over the full inbox (every file new; under daily this also records the
  arrival days in Ultron's ``session_arrivals`` table, one insert and one select), once,
  and adding the partitions that tick asked for to the instance;
- a tick with no cursor again (every file new, the arrivals already recorded), a no-change
  tick, and listing the partitions (instance.get_dynamic_partitions, and the asset's
  partition keys from partitions_def.get_partition_keys): medians of REPEATS, the two
  modes interleaved so that load from other processes falls on both alike.

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


class Mode:
    """One mode's sensor, asset and Dagster instance (a fresh database) over one inbox."""

    def __init__(self, mode: str, n: int, inbox: Path, home: Path, dagster_url: str, ultron_url: str) -> None:
        import dagster as dg
        import sqlalchemy as sa

        from sensors.session_files import build_session_file_sensor
        from ultron.db.database import Database
        from ultron.settings import Settings
        from ultron_assets.memory import build_per_session_assets
        from ultron_assets.partitions import partitions_for

        self.dg = dg
        self.name = f"dagster_bench_{mode}_{uuid.uuid4().hex[:8]}"
        self.engine = sa.create_engine(sa.make_url(dagster_url), isolation_level="AUTOCOMMIT")
        self.store_name = self.name.replace("dagster_bench", "ultron_bench")
        with self.engine.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{self.name}"'))
            conn.execute(sa.text(f'CREATE DATABASE "{self.store_name}"'))
        dagster_home = home / f"dagster-{self.name}"
        dagster_home.mkdir(parents=True)
        url = sa.make_url(dagster_url).set(database=self.name).render_as_string(hide_password=False)
        (dagster_home / "dagster.yaml").write_text(
            f'storage:\n  postgres:\n    postgres_url: "{url}"\ntelemetry:\n  enabled: false\n')
        store_url = sa.make_url(ultron_url).set(database=self.store_name).render_as_string(hide_password=False)
        settings = Settings.from_env(home=home / f"state-{mode}-{n}", inbox=(inbox,), partitioning=mode,
                                     database_url=store_url)  # own arrivals table
        self.store = Database.open(settings)  # migrated now, not in the first tick
        self.sensor = build_session_file_sensor(settings)
        self.partitions_def = partitions_for(mode)
        self.raw_sessions = build_per_session_assets(self.partitions_def)[0]
        self.instance = dg.DagsterInstance.from_config(str(dagster_home))
        self.cursor: str | None = None
        self.result: dict[str, float | int] = {}

    def first_tick(self) -> object:
        result = self.sensor(self.dg.build_sensor_context(instance=self.instance))
        self.cursor = result.cursor
        return result

    def quiet_tick(self) -> None:
        result = self.sensor(self.dg.build_sensor_context(instance=self.instance, cursor=self.cursor))
        assert not result.run_requests, len(result.run_requests)

    def list_partitions(self) -> None:
        self.instance.get_dynamic_partitions(self.partitions_def.name)

    def asset_keys(self) -> None:
        self.raw_sessions.partitions_def.get_partition_keys(dynamic_partitions_store=self.instance)

    def close(self) -> None:
        import sqlalchemy as sa

        self.instance.dispose()
        self.store.dispose()
        with self.engine.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE "{self.name}" WITH (FORCE)'))
            conn.execute(sa.text(f'DROP DATABASE "{self.store_name}" WITH (FORCE)'))
        self.engine.dispose()


def measure(n: int, inbox: Path, home: Path, dagster_url: str, ultron_url: str
            ) -> dict[str, dict[str, float | int]]:
    """Both modes on the same inbox, the repeated measures interleaved (session, daily,
    session, ...) so that load from other processes falls on both alike."""
    modes = {m: Mode(m, n, inbox, home, dagster_url, ultron_url) for m in ("session", "daily")}
    try:
        for m in modes.values():  # the very first tick: under daily it also records the arrivals
            m.result["first_tick"], first = timed(m.first_tick)
            [add] = first.dynamic_partitions_requests
            m.result["runs"] = len(first.run_requests)
            m.result["add"], _ = timed(lambda: m.instance.add_dynamic_partitions(
                add.partitions_def_name, list(add.partition_keys)))
            m.result["partitions"] = len(m.instance.get_dynamic_partitions(m.partitions_def.name))
        samples: dict[tuple[str, str], list[float]] = {}
        for _ in range(REPEATS):
            for what in ("first_again", "quiet_tick", "list", "asset_keys"):
                for name, m in modes.items():
                    fn = {"first_again": m.first_tick, "quiet_tick": m.quiet_tick, "list": m.list_partitions,
                          "asset_keys": m.asset_keys}[what]
                    samples.setdefault((name, what), []).append(timed(fn)[0])
        for (name, what), values in samples.items():
            modes[name].result[what] = statistics.median(values)
        return {name: m.result for name, m in modes.items()}
    finally:
        for m in modes.values():
            m.close()


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
            results = measure(n, inbox, home, db.urls.dagster, db.urls.ultron)
            rows.append((n, results))
            shutil.rmtree(inbox, ignore_errors=True)
        db.dispose()

    labels = [("partitions", "partitions", None), ("runs", "runs asked by the first tick", None),
              ("first_tick", "first tick, full inbox (once)", "s"), ("add", "add its partitions to the instance", "s"),
              ("first_again", "tick with no cursor (median)", "s"),
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
