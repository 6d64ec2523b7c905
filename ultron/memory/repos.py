"""Where a session's files live: git repositories, their remotes, files on disk.

The I/O half of file references (:mod:`ultron.memory.files` is the pure half). Every
git call is a short subprocess with a timeout, and every failure (no git, not a
repository, a path from another machine, a permission error) means "nothing known",
never an exception: ingestion often runs on another machine than the session did, and a
memory without file references is still a memory.

A repository is identified by its ``origin`` remote, normalised so that the SSH and
HTTPS spellings of one repository agree (``git@github.com:o/r.git`` and
``https://github.com/o/r`` are both ``github.com/o/r``), so a memory learned in one
clone is checked against another. A repository without a remote is identified by its
absolute root (``local:/path``), which only matches on the same machine.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from ultron.memory.files import FileRef, bytes_hash, text_hash

#: git calls give up after this long (a hung NFS mount must not stall a run)
GIT_TIMEOUT = 3.0
#: larger files are not hashed (recorded with a null hash; never judged changed)
MAX_HASH_BYTES = 2 * 1024 * 1024
#: session lines longer than this are not searched for a working directory
_MAX_CWD_LINE = 1024 * 1024


@dataclass(frozen=True)
class Repo:
    root: Path
    remote: str


@dataclass(frozen=True)
class LocatedFile:
    """A file reference placed in its repository, as stored in ``memory_files``."""

    remote: str
    path: str  # relative to the repository root, '/'-separated
    sha256: str | None
    edited: bool


def _git(directory: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(directory), *args], capture_output=True, text=True,
                             timeout=GIT_TIMEOUT, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else None


def normalise_remote(url: str) -> str:
    """``host/owner/name`` for the usual URL spellings (lower-case host, no ``.git``, no
    user, no port); anything else (a local path) stripped of a trailing slash and ``.git``."""
    url = url.strip()
    m = re.match(r"^[a-z][a-z0-9+.-]*://(?:[^@/]+@)?([^/:]+)(?::\d+)?/(.+)$", url, re.IGNORECASE)
    if m is None:
        m = re.match(r"^(?:[^@/]+@)?([^/:]+):(?!/)(.+)$", url)  # scp-like git@host:owner/name
    if m is not None:
        host, rest = m.group(1).lower(), m.group(2)
    else:
        host, rest = "", url
    rest = rest.rstrip("/")
    rest = rest[:-4] if rest.endswith(".git") else rest
    return f"{host}/{rest.strip('/')}" if host else rest


def repo_at(directory: str | os.PathLike[str]) -> Repo | None:
    """The repository containing ``directory`` (its root and remote key), or None."""
    d = Path(directory)
    if not d.is_dir():
        return None
    top = _git(d, "rev-parse", "--show-toplevel")
    if top is None:
        return None
    root = Path(top)
    remote = _git(root, "config", "--get", "remote.origin.url")
    return Repo(root, normalise_remote(remote) if remote else f"local:{root}")


def _existing_dir(path: Path) -> Path | None:
    """The nearest existing directory at or above ``path`` (a deleted file's folder may be gone)."""
    for p in (path, *path.parents):
        if p.is_dir():
            return p
    return None


def disk_hash(path: Path, max_bytes: int = MAX_HASH_BYTES) -> tuple[bool, str | None]:
    """(exists, hash): the file's :func:`~ultron.memory.files.bytes_hash`, None when it is
    too large or unreadable."""
    try:
        if not path.is_file():
            return False, None
        if path.stat().st_size > max_bytes:
            return True, None
        return True, bytes_hash(path.read_bytes())
    except OSError:
        return path.exists(), None


def locate(refs: Iterable[FileRef], cwd: str | None) -> list[LocatedFile]:
    """The references that lie in a git repository on this machine, with their hash.

    A relative path needs the session's working directory; an absolute one is placed by
    its own directory. The hash is that of the text the session saw when it is known
    (``FileRef.text``), else that of the file in the working tree now (ingest time), else
    None (the file is too large or unreadable: only its vanishing can be noticed). A file
    neither seen whole nor present now is left out: a read of a missing file, or one the
    session deleted, would otherwise count as vanished from the start."""
    repos: dict[Path, Repo | None] = {}
    out: list[LocatedFile] = []
    seen: set[tuple[str, str]] = set()
    for ref in refs:
        try:
            path = Path(os.path.expanduser(ref.path))
            if not path.is_absolute():
                if not cwd:
                    continue
                path = Path(cwd) / path
            path = Path(os.path.normpath(path))
            folder = _existing_dir(path.parent)
            if folder is None:
                continue
            if folder not in repos:
                repos[folder] = repo_at(folder)
            repo = repos[folder]
            if repo is None:
                continue
            real = Path(os.path.realpath(folder)) / path.relative_to(folder)
            rel = real.relative_to(Path(os.path.realpath(repo.root))).as_posix()
        except (ValueError, OSError):
            continue  # outside the repository, or not a usable path
        if rel in (".", "") or rel.startswith(".git/") or (repo.remote, rel) in seen:
            continue
        if ref.text is not None:
            digest = text_hash(ref.text)
        else:
            exists, digest = disk_hash(real)
            if not exists:
                continue  # never seen whole and not here now: nothing to compare with, ever
        seen.add((repo.remote, rel))
        out.append(LocatedFile(repo.remote, rel, digest, ref.edited))
    return out


def session_cwd(lines: Iterable[bytes], end_line: int) -> str | None:
    """The working directory a session last reported at or before ``end_line``: Claude
    Code's per-line ``cwd``, or Codex's ``payload.cwd`` (session_meta / turn_context)."""
    found: str | None = None
    for number, raw in enumerate(lines, 1):
        if number > end_line:
            break
        if b'"cwd"' not in raw or len(raw) > _MAX_CWD_LINE:
            continue
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        for holder in (obj, obj.get("payload")):
            if isinstance(holder, dict) and isinstance(holder.get("cwd"), str) and holder["cwd"].strip():
                found = holder["cwd"].strip()
    return found


def file_lines(path: str, archived: bytes | None) -> Iterable[bytes]:
    """The session's lines: from the archived copy (exactly what was parsed) when there is
    one, else from the file on disk, else none."""
    if archived is not None:
        yield from archived.split(b"\n")
        return
    try:
        with open(path, "rb") as f:
            yield from f
    except OSError:
        return
