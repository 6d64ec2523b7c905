"""The arrival days of daily partitioning in Postgres (``session_arrivals``, revision 0009).

Defect covered: the arrivals were an flock'ed file under ULTRON_HOME, so the sensor and runs
on other machines had to share that filesystem, and a database backup lost which files
each day partition holds. Here every writer goes through the database."""

import os
import subprocess
import sys
import uuid
from datetime import datetime, timezone

from ultron.db.arrivals import ArrivalLedger, import_file_ledger
from ultron.sessions.partitioning import ledger_path

RACER = """
import sys
import sqlalchemy as sa
from ultron.db.arrivals import ArrivalLedger
engine = sa.create_engine(sys.argv[1])
sys.stdin.readline()  # both processes start writing at the same moment
days = ArrivalLedger(engine).assign((k, sys.argv[2], int(sys.argv[3])) for k in sys.argv[4:])
print(",".join(days[k] for k in sys.argv[4:]))
"""

IMPORTER = """
import sys
import sqlalchemy as sa
from ultron.db.arrivals import import_file_ledger
print(import_file_ledger(sa.create_engine(sys.argv[1]), sys.argv[2]))
"""


def ns(day: str, hour: int = 12) -> int:
    return int(datetime.fromisoformat(f"{day}T{hour:02d}:00:00").replace(tzinfo=timezone.utc).timestamp() * 1e9)


def agent() -> str:
    return f"agent-{uuid.uuid4().hex[:8]}"


def test_a_file_keeps_the_day_it_first_arrived_on(db):
    ledger, a = ArrivalLedger(db.engine), agent()
    first = ledger.assign([(f"{a}:{a}/x.jsonl", a, ns("2026-03-01", 23)), (f"{a}:{a}/y.jsonl", a, ns("2026-03-02"))])
    assert first == {f"{a}:{a}/x.jsonl": f"{a}:2026-03-01", f"{a}:{a}/y.jsonl": f"{a}:2026-03-02"}
    # appended to later: a new mtime, the same day
    assert ledger.assign([(f"{a}:{a}/x.jsonl", a, ns("2026-03-05"))]) == {f"{a}:{a}/x.jsonl": f"{a}:2026-03-01"}
    assert ledger.files_in(f"{a}:2026-03-01") == [f"{a}:{a}/x.jsonl"]
    assert {f"{a}:2026-03-01", f"{a}:2026-03-02"} <= set(ledger.days())
    assert ledger.day_of(f"{a}:{a}/never.jsonl") is None and ledger.files_in(f"{a}:2026-03-05") == []
    assert ledger.files_by_day([f"{a}:2026-03-02", f"{a}:2026-03-01", f"{a}:2026-03-05", "not-a-day"]) == {
        f"{a}:2026-03-02": [f"{a}:{a}/y.jsonl"], f"{a}:2026-03-01": [f"{a}:{a}/x.jsonl"],
        f"{a}:2026-03-05": [], "not-a-day": []}


def test_two_writers_racing_on_the_same_files_agree_on_one_day(db):
    """Two processes (a sensor and a batch run, say) record the same 2,000 new files with
    mtimes a day apart: each file ends up on one day, and both writers report that day."""
    a = agent()
    keys = [f"{a}:{a}/s{i:04d}.jsonl" for i in range(2000)]
    url = db.engine.url.render_as_string(hide_password=False)
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    racers = [subprocess.Popen([sys.executable, "-c", RACER, url, a, str(ns(day)), *keys], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True, env=env) for day in ("2026-04-01", "2026-04-02")]
    for p in racers:
        p.stdin.write("go\n")
        p.stdin.flush()
    answers = [p.communicate(timeout=120)[0].strip().split(",") for p in racers]
    assert all(p.returncode == 0 for p in racers)
    assert answers[0] == answers[1]
    ledger = ArrivalLedger(db.engine)
    stored = ledger.days_of(keys)
    assert [stored[k] for k in keys] == answers[0]
    on_day = ledger.files_in(f"{a}:2026-04-01") + ledger.files_in(f"{a}:2026-04-02")
    assert sorted(on_day) == keys  # every file on exactly one day


def test_a_forgotten_file_leaves_its_day(db):
    ledger, a = ArrivalLedger(db.engine), agent()
    ledger.assign([(f"{a}:{a}/keep.jsonl", a, ns("2026-05-01")), (f"{a}:{a}/gone.jsonl", a, ns("2026-05-01"))])
    assert ledger.forget([f"{a}:{a}/gone.jsonl"]) == 1
    assert ledger.files_in(f"{a}:2026-05-01") == [f"{a}:{a}/keep.jsonl"]
    assert ledger.day_of(f"{a}:{a}/gone.jsonl") is None
    # it comes back later: it arrives anew, on its new mtime's day
    assert ledger.assign([(f"{a}:{a}/gone.jsonl", a, ns("2026-06-01"))]) == {f"{a}:{a}/gone.jsonl": f"{a}:2026-06-01"}


def test_an_earlier_versions_ledger_file_is_imported_once(db, tmp_path):
    a = agent()
    path = ledger_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(f"{a}:{a}/old.jsonl\t{a}:2025-12-31\n{a}:{a}/old.jsonl\t{a}:2026-01-09\n"
                    f"not a line\n{a}:{a}/two.jsonl\t{a}:2026-01-01\n{a}:{a}/half.jsonl\t{a}:20")
    ArrivalLedger(db.engine, home=tmp_path)  # importing happens when the ledger is opened on that home
    ledger = ArrivalLedger(db.engine)
    assert ledger.day_of(f"{a}:{a}/old.jsonl") == f"{a}:2025-12-31"  # the first line won in the file too
    assert ledger.files_in(f"{a}:2026-01-01") == [f"{a}:{a}/two.jsonl"]
    assert ledger.day_of(f"{a}:{a}/half.jsonl") is None  # a line still being written is not an arrival
    assert not path.exists() and path.with_name("arrivals.tsv.imported").exists()
    # an old process writes the file again: importing again keeps the days already recorded
    path.write_text(f"{a}:{a}/old.jsonl\t{a}:2026-02-02\n{a}:{a}/three.jsonl\t{a}:2026-02-02\n")
    assert import_file_ledger(db.engine, path) == 0  # once per process and file: a new process imports it
    url = db.engine.url.render_as_string(hide_password=False)
    out = subprocess.run([sys.executable, "-c", IMPORTER, url, str(path)], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": os.getcwd()}, timeout=120, check=True)
    assert out.stdout.strip() == "1"
    assert ledger.day_of(f"{a}:{a}/old.jsonl") == f"{a}:2025-12-31"
    assert ledger.day_of(f"{a}:{a}/three.jsonl") == f"{a}:2026-02-02"
