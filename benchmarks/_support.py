"""What every benchmark needs: a private ULTRON_HOME and a line saying which machine ran it."""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import tempfile
from pathlib import Path
from typing import Iterator


@contextlib.contextmanager
def private_home(prefix: str) -> Iterator[Path]:
    """A throw-away ULTRON_HOME (own embedded server) that never touches a user's state."""
    home = Path(tempfile.mkdtemp(prefix=prefix))
    for key in [k for k in os.environ if k.startswith("ULTRON_") or k == "DASHSCOPE_API_KEY"]:
        del os.environ[key]
    os.environ["ULTRON_HOME"] = str(home)
    try:
        yield home
    finally:
        from ultron.db import embedded

        embedded.stop_server(home / "pgdata")
        shutil.rmtree(home, ignore_errors=True)


def machine_line() -> str:
    return f"machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
