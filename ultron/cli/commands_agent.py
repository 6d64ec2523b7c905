"""The commands an agent (or a person acting for one) uses around a task: upload a memory,
get the context bundle for a task, and say whether a memory or a skill helped.

Each is a thin layer over ``ultron.sdk.Ultron``, as in ``ultron.cli.commands``.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable

from ultron.cli import format as fmt
from ultron.cli.served import ask_server
from ultron.cli.commands import _client, _resolve_memory_ids
from ultron.cli.console import CLIError, print_json
from ultron.settings import Settings


def _upload(settings: Settings, args: argparse.Namespace) -> int:
    if not args.content.strip():
        raise CLIError("the content is empty", 2)
    tags = [t.strip().lower() for t in args.tag if t.strip()]
    record = _client(settings).upload_memory(args.content, args.context, args.resolution, tags,
                                             agent_id=args.agent_id, shared=args.shared)
    if args.json:
        print_json(record.to_dict("full"))
    else:
        print(f"memory {record.id}  ({record.memory_type}, {record.tier})" +
              (f"  agent {record.agent_id}" if record.agent_id else "") + ("  shared" if record.shared else ""))
        print(record.summary_l0)
    return 0


def _context(settings: Settings, args: argparse.Namespace) -> int:
    if not args.task.strip():
        raise CLIError("the task is empty", 2)
    repo = getattr(args, "repo", None)
    params = dict(token_budget=args.budget, agent_id=args.agent_id, repo_root=os.path.abspath(repo) if repo else None,
                  session_id=getattr(args, "session_id", None))
    out = ask_server(settings, lambda server: server.context_bundle(args.task, **params))
    if out is None:
        out = _client(settings).context_bundle(args.task, **params)
    if args.json:
        print_json(out)
        return 0
    print(out["text"])
    print(f"({out['tokens']} of {out['token_budget']} tokens, {fmt.plural(len(out['items']), 'item')})",
          file=sys.stderr)
    return 0


def _feedback(settings: Settings, args: argparse.Namespace) -> int:
    u = _client(settings)
    if args.memory:
        ids, unknown = _resolve_memory_ids(u, [args.memory])
        if unknown:
            raise CLIError(f"no memory with id {args.memory!r}", 1)
        target = {"memory_id": ids[0]}
    else:
        target = {"skill": args.skill.strip()}
    try:
        out = u.feedback(**target, helpful=args.helpful, note=args.note, agent_id=args.agent_id)
    except KeyError as exc:
        raise CLIError(str(exc.args[0]) if exc.args else "unknown target", 1) from None
    if args.json:
        print_json(out)
        return 0
    verdict = "helpful" if out["helpful"] else "not helpful"
    if out["target_kind"] == "memory":
        print(f"memory {out['target_id']}: {verdict} recorded ({out['helpful_count']} helpful, "
              f"{out['unhelpful_count']} not); tier {out['tier']}, {out['status']}")
    else:
        print(f"skill {out['target_id']}: {verdict} recorded ({out['helpful_count']} helpful, "
              f"{out['unhelpful_count']} not); reliability {out['reliability']:.2f}, {out['lifecycle']}")
    return 0


COMMANDS: dict[str, Callable[[Settings, argparse.Namespace], int]] = {
    "upload": _upload, "context": _context, "feedback": _feedback,
}
