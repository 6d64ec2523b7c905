"""``ultron mcp``: the MCP server on stdin/stdout, started by an agent as a subprocess.

stdout carries the protocol and nothing else: the SDK's stdio transport points fd 1 at
stderr while it serves, and our logs are configured onto stderr before anything runs.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Callable

from ultron.settings import Settings


def _mcp(settings: Settings, args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("ultron").setLevel(logging.INFO)

    from ultron.mcp import run_stdio

    run_stdio(settings)
    return 0


COMMANDS: dict[str, Callable[[Settings, argparse.Namespace], int]] = {"mcp": _mcp}
