"""The temporary directories exports are written in (``{sft_dir}/.tmp-<id>/``).

An export writes into ``.tmp-<id>`` and renames it when complete. A writer killed on
the way (SIGKILL, the OOM killer, a power cut) used to leave that directory behind for
good, each a full copy of the exported data. Now a writer holds an flock on its staging
directory for as long as it writes (the lock follows the directory through the rename),
and every export starts by removing the ``.tmp-*`` directories whose lock it can take:
their writer is gone. Creating a staging directory and cleaning up both hold an flock
on ``sft_dir`` itself, so a directory is never seen between its mkdir and its lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
from pathlib import Path
from typing import Iterator

PREFIX = ".tmp-"

log = logging.getLogger("ultron.sft")


@contextlib.contextmanager
def _dir_lock(path: Path, *, blocking: bool = True) -> Iterator[bool]:
    """An flock on a directory; yields whether it was taken (always, when blocking)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)  # closing the last descriptor releases the flock


@contextlib.contextmanager
def staging_dir(root: Path, export_id: str) -> Iterator[Path]:
    """Create ``root/.tmp-<export_id>`` and hold its writer's lock until the block ends.
    The directory is the caller's to rename (the lock goes with it) or to remove."""
    tmp = root / f"{PREFIX}{export_id}"
    with _dir_lock(root):
        tmp.mkdir()
        fd = os.open(tmp, os.O_RDONLY | os.O_DIRECTORY)
        fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield tmp
    finally:
        os.close(fd)


def remove_abandoned(root: Path) -> list[str]:
    """Remove the staging directories no live export is writing; returns their names."""
    removed: list[str] = []
    if not root.is_dir():
        return removed
    with _dir_lock(root):
        for path in sorted(root.iterdir()):
            if not path.name.startswith(PREFIX) or path.is_symlink() or not path.is_dir():
                continue
            try:
                with _dir_lock(path, blocking=False) as free:
                    if not free:
                        continue  # a live export is writing it
                    shutil.rmtree(path, ignore_errors=True)
            except FileNotFoundError:
                continue  # renamed or removed since the listing
            removed.append(path.name)
    if removed:
        log.warning("removed %d abandoned sft export staging dir(s): %s", len(removed), ", ".join(removed))
    return removed


def fsync_dir(path: Path) -> None:
    """Make a directory's entries (new files, a rename) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
