"""What every command shares for talking to the user: the one-line error (``CLIError``,
and ``user_error`` for the failures a user can fix), the progress bar on stderr, the
confirmation prompt of destructive commands and ``--json`` output."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any


class CLIError(Exception):
    """A user-facing failure: printed as one line, no traceback, with its exit code."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


class ProgressBar:
    """A ``progress(done, total, label)`` callback drawing a tqdm bar on stderr.

    Created on the first call, and only when there is more than ``min_total`` to do, so
    a single file shows no bar. ``enabled=None`` leaves the choice to tqdm: on when
    stderr is a terminal, off otherwise (logs and pipes stay clean).
    """

    def __init__(self, desc: str, unit: str, enabled: bool | None, min_total: int = 0) -> None:
        self.desc, self.unit, self.enabled, self.min_total = desc, unit, enabled, min_total
        self.bar = None

    def __call__(self, done: int, total: int, label: str = "") -> None:
        if self.enabled is False:
            return
        if self.bar is None:
            if total <= self.min_total:
                return
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=self.desc, unit=self.unit, file=sys.stderr, dynamic_ncols=True,
                            disable=None if self.enabled is None else False, leave=True)
        if total != self.bar.total:
            self.bar.total = total
        self.bar.update(max(0, done - self.bar.n))
        if label:
            self.bar.set_postfix_str(os.path.basename(label) if os.sep in label else label, refresh=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def __enter__(self) -> "ProgressBar":
        return self

    def __exit__(self, *_exc) -> None:
        self.close()


def confirm(question: str, args: argparse.Namespace) -> None:
    """Destructive commands ask first; without a terminal, --yes is the answer."""
    if args.yes:
        return
    if not sys.stdin or not sys.stdin.isatty():
        raise CLIError(f"{question} - refusing without confirmation; pass --yes", 2)
    sys.stderr.write(f"{question} [y/N] ")
    sys.stderr.flush()
    if sys.stdin.readline().strip().lower() not in ("y", "yes"):
        raise CLIError("cancelled; nothing was changed", 1)


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, default=str))


def user_error(exc: Exception) -> str | None:
    """The one-line message for a failure the user can fix; None for a bug (traceback)."""
    import sqlalchemy as sa

    from ultron.context import EmbeddingProfileMismatch
    from ultron.db.database import DatabaseError
    from ultron.reembed import ReembedError

    # Another embedder of the same size: re-embedding is the way over (a size change is not).
    if isinstance(exc, EmbeddingProfileMismatch) and "never mixed" in str(exc) and "ultron reembed" not in str(exc):
        return f"{exc} To move the store to the configured embedder instead, run `ultron reembed`."
    if isinstance(exc, (DatabaseError, ValueError, EmbeddingProfileMismatch, ReembedError)):  # SettingsError too
        return str(exc)
    if isinstance(exc, (sa.exc.OperationalError, sa.exc.InterfaceError)):
        return f"database unavailable: {getattr(exc, 'orig', None) or exc}"
    if isinstance(exc, ModuleNotFoundError) and (exc.name or "").startswith("ultron."):
        return f"this command needs {exc.name}, which this installation does not have"
    if isinstance(exc, OSError):
        return f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else "")
    return None
