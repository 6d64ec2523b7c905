"""Replacing a file so that a reader never sees half of it: an agent starting while its
settings are rewritten, or the inbox sensor while a transcript is copied in."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable


def replace_file(path: Path, fill: Callable[[BinaryIO], None], *, mode: int | None = None,
                 times_ns: tuple[int, int] | None = None) -> None:
    """Write through a hidden temporary file beside ``path`` (the sensor skips hidden names),
    then rename it over ``path``. ``mode``: the permissions (default: the old file's);
    ``times_ns``: (atime, mtime) to give it before the rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if mode is None:
        try:
            mode = path.stat().st_mode & 0o777
        except FileNotFoundError:
            mode = 0o600 if path.name.startswith(".") else 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            fill(out)
        os.chmod(tmp, mode)
        if times_ns is not None:
            os.utime(tmp, ns=times_ns)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
