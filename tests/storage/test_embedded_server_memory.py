"""The embedded server's memory settings (issue 15): ULTRON_PG_SHARED_BUFFERS reaches the
server from its very first start, and a changed value applies at the next start of the same
data directory; the lock slots the owner graphs need are there from the first start too."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import embedded_only
from ultron.db import embedded

pytestmark = embedded_only
ROOT = Path(__file__).resolve().parents[2]

# A whole client process: starts (or joins) the server, says what it runs with, exits; as
# the last client its exit stops the server.
SHOW = """
import sys
from pathlib import Path
import psycopg
from ultron.db import embedded
with psycopg.connect(embedded.ensure_server(Path(sys.argv[1]))) as conn:
    print(*(conn.execute(f"SHOW {name}").fetchone()[0]
            for name in ("shared_buffers", "effective_cache_size", "max_locks_per_transaction")))
"""


@pytest.fixture
def pgdata():
    """Outside pytest's tmp_path, which a root run locks away from the server's user."""
    home = Path(tempfile.mkdtemp(prefix="ultron-memory-"))
    yield home / "pgdata"
    embedded.stop_server(home / "pgdata")
    shutil.rmtree(home, ignore_errors=True)


def show(pgdata: Path, shared_buffers: str | None) -> list[str]:
    env = dict(os.environ, ULTRON_HOME=str(pgdata.parent), PYTHONPATH=str(ROOT))
    env.pop("ULTRON_PG_SHARED_BUFFERS", None)
    if shared_buffers is not None:
        env["ULTRON_PG_SHARED_BUFFERS"] = shared_buffers
    out = subprocess.run([sys.executable, "-c", SHOW, str(pgdata)], cwd=ROOT, env=env, text=True,
                         capture_output=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_shared_buffers_applies_from_the_first_start_and_follows_a_changed_value(pgdata):
    first = show(pgdata, "160MB")
    assert first[0] == "160MB"  # a new data directory: initdb, then start
    assert first[2] == embedded.LOCK_CONFIG["max_locks_per_transaction"]  # a fast-path lock for every graph
    assert embedded.read_postmaster(pgdata) is None  # the client's exit stopped it
    assert show(pgdata, "192MB")[0] == "192MB"  # the same directory, restarted
    default = show(pgdata, None)[0]  # unset: derived from the machine's RAM
    assert megabytes(default) == megabytes(embedded.default_shared_buffers())


def megabytes(size: str) -> int:
    """PostgreSQL prints 4096MB as 4GB."""
    return int(size[:-2]) * (1024 if size.endswith("GB") else 1)
