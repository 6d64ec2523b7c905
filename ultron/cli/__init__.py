"""The ``ultron`` command line: dev server, ingestion, search, skills, SFT export, stats,
forget, the HTTP API, re-embedding and maintenance - each a thin layer over the SDK.

``main`` is the console script (``ultron = "ultron.cli:main"``); ``python -m ultron.cli``
runs it too. The parser is in ``parser``, the commands in ``commands`` (the store) and
``commands_server`` (dev, serve, db), the shared prompt/progress/error helpers in
``console`` and the plain-text tables in ``format``.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, Sequence

from ultron.cli.console import CLIError, user_error
from ultron.settings import Settings

__all__ = ["COMMANDS", "CLIError", "build_parser", "main"]


def _commands() -> dict[str, Callable[[Settings, argparse.Namespace], int]]:
    """command name -> handler(settings, args) returning the exit code."""
    from ultron.cli import (
        commands, commands_agent, commands_connect, commands_mcp, commands_server, commands_stale, commands_tokens,
    )

    return {**commands.COMMANDS, **commands_server.COMMANDS, **commands_mcp.COMMANDS, **commands_agent.COMMANDS,
            **commands_stale.COMMANDS, **commands_connect.COMMANDS, **commands_tokens.COMMANDS}


def __getattr__(name: str) -> object:
    # The command table and the parser load on first use: `ultron hook` runs inside the
    # agent's start-up and needs neither.
    if name == "COMMANDS":
        return _commands()
    if name == "build_parser":
        from ultron.cli.parser import build_parser

        return build_parser
    raise AttributeError(name)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["hook"]:
        return _hook(argv[1:])
    from ultron.cli.parser import build_parser

    args = build_parser().parse_args(argv)
    try:
        settings = Settings.from_env()
        _check_store(settings, args)
        return _commands()[args.command](settings, args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `ultron search ... | head`: the reader left, nothing to report
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
    except CLIError as exc:
        print(f"ultron: error: {exc}", file=sys.stderr)
        return exc.code
    except Exception as exc:  # noqa: BLE001 - a CLI shows the message, not a traceback
        message = user_error(exc)
        if message is None:
            raise
        print(f"ultron: error: {message}", file=sys.stderr)
        return 2


#: Commands that may start an embedded store where there is none: `dev` (the first run
#: creates it), `db` (controls the server itself), and the ones that never open the store.
_MAY_CREATE = {"dev", "db", "mcp", "connect", "disconnect", "hook"}


def _check_store(settings: Settings, args: argparse.Namespace) -> None:
    """Run from the wrong directory, the default ``./.ultron`` is a new, empty store: say
    where we looked instead of creating 50 MB of database and reporting zeros."""
    if args.command in _MAY_CREATE or getattr(args, "init", False) or not settings.uses_embedded_database:
        return
    if (settings.pgdata / "PG_VERSION").is_file():
        return
    where = "ULTRON_HOME" if os.environ.get("ULTRON_HOME") else "ULTRON_HOME is unset: ./.ultron"
    raise CLIError(f"no Ultron store at {settings.home} ({where}). Run this from the directory that holds "
                   "your store, set ULTRON_HOME to it (or ULTRON_DATABASE_URL), or pass --init to create a new "
                   "one here", 2)


def _hook(args: list[str]) -> int:
    """``ultron hook <agent> <event>``: read without argparse (it would exit 2 on a bad
    argument) and without the command table; whatever goes wrong, the agent gets exit 0."""
    try:
        from ultron.integrations.hooks import main as hook_main

        agent, event = (args + ["", ""])[:2]
        return hook_main(agent, event, sys.stdin, sys.stdout, Settings.from_env())
    except BaseException:  # noqa: BLE001 - a hook never fails the agent
        return 0
