"""Finding session files: the directory rules of ``ingest(paths)`` and the inbox layout.

Rules (the seed's): directories recurse and collect ``*.jsonl`` only; hidden path
segments and symlinks below a given directory are skipped. A path the caller
names explicitly is taken as given, so an explicit symlink to a file works.
"""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

SESSION_SUFFIX = ".jsonl"
_AGENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$")
_INVALID_KEY_PARTS = ("...", "\a", "\b", "\f", "\n", "\r", "\t", "\v", "\0")


@dataclass(frozen=True)
class Found:
    """A path met while expanding the caller's list.

    ``status`` is ``ok`` for a file to ingest; ``skipped`` or ``failed`` carry a reason.
    """

    path: Path
    status: str = "ok"
    reason: str | None = None


def validate_agent_id(agent_id: str) -> str:
    if not isinstance(agent_id, str) or not _AGENT_ID.match(agent_id):
        raise ValueError(
            f"invalid agent id {agent_id!r}: use 1-128 letters, digits, '.', '_', '-' or '@', starting with a letter or digit"
        )
    return agent_id


def agent_id_from_dirname(name: str, default: str) -> str:
    """The inbox's first directory level names the agent; odd characters become '_'."""
    cleaned = re.sub(r"[^A-Za-z0-9._@-]", "_", name).lstrip("._-@")[:128]
    return cleaned or default


def expand_paths(paths: Iterable[str | os.PathLike[str]]) -> Iterator[Found]:
    """Yield every session file under ``paths``, plus the paths that were passed over and why."""
    for raw in paths:
        path = Path(os.path.abspath(os.path.expanduser(os.fspath(raw))))
        try:
            st = path.stat()
        except OSError as exc:
            yield Found(path, "failed", _stat_error(path, exc))
            continue
        if path.is_dir():
            if path.name.endswith(SESSION_SUFFIX):
                yield Found(path, "skipped", "is a directory named like a session file; scanned its contents instead")
            yield from _walk(path)
        elif not _is_regular(st.st_mode):
            yield Found(path, "failed", "not a regular file (device, socket or pipe)")
        elif not path.name.endswith(SESSION_SUFFIX):
            yield Found(path, "skipped", "not a .jsonl file")
        else:
            yield Found(path)


def _walk(root: Path) -> Iterator[Found]:
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError as exc:
        yield Found(root, "failed", f"cannot list directory: {exc.strerror or exc}")
        return
    for entry in entries:
        if entry.name.startswith("."):
            continue  # hidden segment
        path = Path(entry.path)
        if entry.is_symlink():
            if entry.name.endswith(SESSION_SUFFIX) or _points_to_dir(entry):
                yield Found(path, "skipped", "symlink inside a directory; not followed")
            continue
        if entry.is_dir(follow_symlinks=False):
            if entry.name.endswith(SESSION_SUFFIX):
                yield Found(path, "skipped", "is a directory named like a session file; scanned its contents instead")
            yield from _walk(path)
        elif entry.name.endswith(SESSION_SUFFIX) and entry.is_file(follow_symlinks=False):
            yield Found(path)


def scan_inbox(inbox: Path) -> Iterator[tuple[Path, int, int]]:
    """Fast listing for the sensor: (path, mtime_ns, size) of every session file in ``inbox``."""
    if not inbox.is_dir():
        return
    stack = [inbox]
    while stack:
        current = stack.pop()
        try:
            it = os.scandir(current)
        except OSError:
            continue
        with it:
            for entry in it:
                if entry.name.startswith("."):
                    continue
                try:
                    if entry.is_symlink():
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(Path(entry.path))
                    elif entry.name.endswith(SESSION_SUFFIX) and entry.is_file(follow_symlinks=False):
                        st = entry.stat(follow_symlinks=False)
                        yield Path(entry.path), st.st_mtime_ns, st.st_size
                except OSError:
                    continue  # vanished while we looked; the next tick sees the truth


def inbox_agent_id(path: Path, inbox: Path, default: str) -> str:
    rel = path.relative_to(inbox)
    return agent_id_from_dirname(rel.parts[0], default) if len(rel.parts) > 1 else default


# -- partition keys ----------------------------------------------------------------------


def partition_key(agent_id: str, path: Path, inboxes: Iterable[Path] = ()) -> str:
    """A stable, readable key: ``agent:relative/path.jsonl`` inside an inbox, else ``agent:/abs/path``."""
    path = Path(os.path.abspath(path))
    shown = str(path)
    for inbox in inboxes:
        try:
            shown = path.relative_to(inbox).as_posix()
            break
        except ValueError:
            continue
    key = f"{agent_id}:{shown}"
    if any(bad in key for bad in _INVALID_KEY_PARTS):
        raise ValueError(f"cannot make a partition key for {str(path)!r}: the name contains '...' or control characters")
    return key


def parse_partition_key(key: str, inboxes: Iterable[Path] = ()) -> tuple[str, Path]:
    """Inverse of :func:`partition_key`: (agent_id, absolute path)."""
    agent_id, sep, shown = key.partition(":")
    if not sep or not agent_id or not shown:
        raise ValueError(f"not an Ultron session partition key: {key!r}")
    if os.path.isabs(shown):
        return agent_id, Path(shown)
    candidates = [Path(inbox) / shown for inbox in inboxes]
    for candidate in candidates:
        if candidate.exists():
            return agent_id, candidate
    if candidates:
        return agent_id, candidates[0]
    raise ValueError(f"partition key {key!r} is relative to an inbox, but no inbox is configured")


def _stat_error(path: Path, exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "symlink loop"
    if exc.errno == errno.ENOENT:
        return "broken symlink: its target does not exist" if path.is_symlink() else "path does not exist"
    if exc.errno == errno.EACCES:
        return "permission denied"
    return exc.strerror or str(exc)


def _is_regular(mode: int) -> bool:
    import stat

    return stat.S_ISREG(mode)


def _points_to_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir(follow_symlinks=True)
    except OSError:
        return False
