"""``ultron connect`` / ``ultron disconnect``: install Ultron into an agent, or take it out;
the work is in ``ultron.integrations``. (``ultron hook`` bypasses the command table: see
``ultron.cli.main``.)"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Callable

from ultron.cli.console import CLIError
from ultron.settings import Settings


def _places(args: argparse.Namespace) -> tuple[Path, Path]:
    home = Path(args.home).expanduser().resolve() if args.home else Path.home()
    project = Path(args.project).expanduser().resolve() if args.project else Path.cwd()
    return home, project


def _apply(action: str, settings: Settings, args: argparse.Namespace) -> list:
    from ultron.integrations import connect as integration
    from ultron.integrations.config_files import ConfigError

    home, project = _places(args)
    try:
        changes = getattr(integration, action)(args.agent, args.scope, home=home, project=project,
                                               ultron_home=settings.home)
    except ConfigError as exc:
        raise CLIError(str(exc)) from None
    for change in changes:
        print(change.line())
    return changes


def _connect(settings: Settings, args: argparse.Namespace) -> int:
    written = [c for c in _apply("connect", settings, args) if c.action in ("created", "updated")]
    print(f"{args.agent} connected ({args.scope} scope): "
          + (f"{len(written)} file(s) changed." if written else "already connected, nothing changed."))
    print(f"Sessions go to {settings.home}; keep `ultron dev` (or `ultron serve`) running so each new "
          "session starts with what Ultron knows.")
    if args.agent == "codex":
        print("Codex asks you to trust new hooks once: run /hooks in Codex.")
    return 0


def _disconnect(settings: Settings, args: argparse.Namespace) -> int:
    _apply("disconnect", settings, args)
    print(f"{args.agent} disconnected ({args.scope} scope); skills already exported there stay until you "
          "delete them.")
    return 0


COMMANDS: dict[str, Callable[[Settings, argparse.Namespace], int]] = {
    "connect": _connect, "disconnect": _disconnect,
}
