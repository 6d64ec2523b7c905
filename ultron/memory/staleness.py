"""Is a memory still about the code as it is? Recorded file hashes against a working tree.

A memory learned from a repository's files (``memory_files``, written at extraction) is
*possibly stale* in a checkout when one of those files has vanished, or its content hash
differs from the one recorded. "Possibly": a change elsewhere in the file may leave the
lesson intact, so a stale memory is ranked lower and labelled with the reason, never
hidden. Files recorded without a hash (the content was not known at ingest) can only be
found vanished; files too large to hash now are not judged.

Only the files of the memories being returned are read, each capped at
:data:`ultron.memory.repos.MAX_HASH_BYTES`, so checking a search costs a few file reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Sequence

from ultron.memory.repos import Repo, disk_hash


@dataclass(frozen=True)
class StaleFile:
    path: str
    status: str  # changed | vanished
    seen_at: datetime | None = None

    def describe(self) -> str:
        if self.status == "vanished":
            return f"{self.path} vanished"
        when = f" since {self.seen_at.date().isoformat()}" if self.seen_at else ""
        return f"{self.path} changed{when}"

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "status": self.status,
                "seen_at": self.seen_at.isoformat() if self.seen_at else None}


def stale_files(repo: Repo, rows: Sequence[dict[str, Any]]) -> list[StaleFile]:
    """The recorded files (``memory_files`` rows of this repository) that changed or vanished."""
    out: list[StaleFile] = []
    for row in rows:
        exists, now = disk_hash(repo.root / row["path"])
        if not exists:
            out.append(StaleFile(row["path"], "vanished", row.get("seen_at")))
        elif row.get("sha256") and now is not None and now != row["sha256"]:
            out.append(StaleFile(row["path"], "changed", row.get("seen_at")))
    return out


def reason(files: Sequence[StaleFile], shown: int = 3) -> str:
    """One line for a person or an agent: ``src/a.py changed since 2026-11-28; b.py vanished``."""
    parts = [f.describe() for f in files[:shown]]
    if len(files) > shown:
        parts.append(f"{len(files) - shown} more")
    return "; ".join(parts)
