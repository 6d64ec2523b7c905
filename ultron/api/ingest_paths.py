"""What POST /ingest may read: server paths confined to ULTRON_INGEST_ROOTS, and uploads.

A path is checked after resolving it completely (``..`` and every symlink on the
way), so neither a ``../`` trick nor a symlink inside a root can reach a file
outside it. Inside the roots, directory walks never follow symlinks (see
``ultron.sessions.discovery``), so a directory cannot smuggle one in either.
Paths outside the roots get the same answer whether or not they exist: the API is
not an oracle for the server's file system.

Uploads are written by the server under ``$ULTRON_HOME/uploads/{agent_id}/`` with a
sanitised name, through a temporary file and an atomic rename, so a reader never
sees half a file and an upload never writes anywhere a client chose.
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path
from typing import BinaryIO, Iterable

from ultron.sessions.discovery import SESSION_SUFFIX, validate_agent_id

MAX_UPLOAD_BYTES = 100 * 1024 * 1024
_CHUNK = 1 << 20
_MAX_NAME_CHARS = 200


class PathNotAllowed(PermissionError):
    """The path resolves outside every ingest root."""


class PathNotFound(FileNotFoundError):
    """The path lies inside a root but does not exist."""


class PathNotAbsolute(ValueError):
    """The server cannot know the client's working directory."""


class UploadRejected(ValueError):
    """An uploaded file cannot be stored (name, type)."""


class UploadTooLarge(ValueError):
    """An upload went over MAX_UPLOAD_BYTES."""


def describe_roots(roots: Iterable[Path]) -> str:
    shown = [str(r) for r in roots]
    return ", ".join(shown) if shown else "(none configured)"


def confine(raw: str, roots: Iterable[Path]) -> Path:
    """The fully resolved path if it lies inside one of ``roots``."""
    roots = list(roots)
    if not os.path.isabs(raw):
        raise PathNotAbsolute(f"{raw!r}: give an absolute path (inside {describe_roots(roots)})")
    real = Path(os.path.realpath(raw))
    for root in roots:
        real_root = Path(os.path.realpath(root))
        if real == real_root or real_root in real.parents:
            if not os.path.exists(real):
                raise PathNotFound(f"{raw!r}: path does not exist")
            return real
    raise PathNotAllowed(
        f"{raw!r} is outside the directories this server may read: {describe_roots(roots)} "
        "(ULTRON_INGEST_ROOTS); upload the file as multipart instead")


def upload_name(filename: str | None) -> str:
    """A safe file name that keeps the client's name readable: no directories, no
    hidden or odd characters, a ``.jsonl`` suffix required."""
    base = (filename or "").replace("\\", "/").rsplit("/", 1)[-1]
    if not base.lower().endswith(SESSION_SUFFIX):
        raise UploadRejected(f"{filename!r}: only {SESSION_SUFFIX} session files can be uploaded "
                             "(the file name must end in .jsonl)")
    stem = base[: -len(SESSION_SUFFIX)]
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", stem)
    stem = re.sub(r"\.{2,}", ".", stem).strip(".-_")[: _MAX_NAME_CHARS]
    return (stem or "upload") + SESSION_SUFFIX


def upload_dir(home: Path, agent_id: str) -> Path:
    return home / "uploads" / validate_agent_id(agent_id)


def save_upload(home: Path, agent_id: str, filename: str | None, source: BinaryIO,
                budget: int = MAX_UPLOAD_BYTES) -> tuple[Path, int]:
    """Copy ``source`` to the agent's upload directory; returns (path, bytes written).

    ``budget`` is what this request may still write: several files share one cap.
    Re-uploading a name replaces that session, like a session file that grew."""
    target = upload_dir(home, agent_id) / upload_name(filename)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.part")
    written = 0
    try:
        with open(tmp, "wb") as out:
            while chunk := source.read(_CHUNK):
                written += len(chunk)
                if written > budget:
                    raise UploadTooLarge(f"uploads are limited to {MAX_UPLOAD_BYTES // (1024 * 1024)} MB "
                                         "per request")
                out.write(chunk)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target, written
