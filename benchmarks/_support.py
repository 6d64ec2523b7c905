"""What every benchmark needs: a private ULTRON_HOME and a line saying which machine ran it."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator


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
        from ultron.db.hits import flush_all

        flush_all()  # the searches' queued hit counts, while their server is still up
        embedded.stop_server(home / "pgdata")
        shutil.rmtree(home, ignore_errors=True)


def machine_line() -> str:
    return f"machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"


def module_at(rev: str, path: str, name: str) -> Any:
    """The module at ``path`` in the repository as of ``rev``, imported as ``name`` beside
    today's (its own imports resolve to today's package)."""
    repo = Path(__file__).resolve().parent.parent
    src = subprocess.run(["git", "-C", str(repo), "show", f"{rev}:{path}"], check=True,
                         capture_output=True, text=True).stdout
    file = Path(tempfile.mkdtemp(prefix="ultron-rev-")) / f"{name}.py"
    file.write_text(src)
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module
