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

from ultron.cli import commands, commands_agent, commands_mcp, commands_server
from ultron.cli.console import CLIError, user_error
from ultron.cli.parser import build_parser
from ultron.settings import Settings

__all__ = ["COMMANDS", "CLIError", "build_parser", "main"]

#: command name -> handler(settings, args) returning the exit code.
COMMANDS: dict[str, Callable[[Settings, argparse.Namespace], int]] = {**commands.COMMANDS,
                                                                       **commands_server.COMMANDS,
                                                                       **commands_mcp.COMMANDS,
                                                                       **commands_agent.COMMANDS}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = Settings.from_env()
        return COMMANDS[args.command](settings, args)
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
