"""``ultron stale``: the memories a repository's changes have made doubtful.

A memory records the repository files it was learned from (``ultron.memory.files``);
this lists, for one checkout, those whose files changed or vanished since, so a person
can review or forget them. A thin layer over ``Ultron.stale_memories``.
"""

from __future__ import annotations

import argparse
from typing import Callable

from ultron.cli import format as fmt
from ultron.cli.commands import _client
from ultron.cli.console import print_json
from ultron.settings import Settings


def _stale(settings: Settings, args: argparse.Namespace) -> int:
    report = _client(settings).stale_memories(args.repo)
    if args.json:
        print_json(report)
        return 0
    stale = report["stale"]
    found = fmt.plural(len(stale), "possibly stale memory", "possibly stale memories")
    print(f"{report['repo']} ({report['remote']}): {found} "
          f"of {fmt.plural(report['checked'], 'memory', 'memories')} with files here")
    if stale:
        rows = [(fmt.short_id(s["memory"]["id"]), s["memory"]["memory_type"], s["reason"],
                 s["memory"]["summary_l0"]) for s in stale]
        print(fmt.table(["id", "type", "why", "summary"], rows, max_width=fmt.summary_width()))
    return 0


COMMANDS: dict[str, Callable[[Settings, argparse.Namespace], int]] = {"stale": _stale}
