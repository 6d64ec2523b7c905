"""``ultron tokens`` (named API tokens with a scope) and ``ultron audit`` (who did what).

A token is printed once, when it is created or rotated; the store keeps only its HMAC.
Both commands act as the local user (``ultron.access.actor``), who holds the store."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable

from ultron.cli import format as fmt
from ultron.cli.console import CLIError, print_json
from ultron.settings import Settings


def _when(value: Any) -> str:
    return value.strftime("%Y-%m-%d %H:%M") if value else "-"


def _print_new(token: str, row: dict[str, Any], args: argparse.Namespace) -> None:
    if args.json:
        print_json({**row, "token": token})
        return
    print(token)
    expires = f", expires {_when(row['expires_at'])} UTC" if row.get("expires_at") else ""
    agents = f", agents {', '.join(row['agents'])}" if row.get("agents") else ""
    print(f"token {row['name']!r} ({row['scope']}{agents}{expires}): shown once, store it now; send it as "
          "'Authorization: Bearer <token>'", file=sys.stderr)


def _client(settings: Settings):
    from ultron.sdk import Ultron

    return Ultron(settings)


def _tokens(settings: Settings, args: argparse.Namespace) -> int:
    from ultron.tokens import TokenError

    if args.action != "list" and not args.name:
        raise CLIError(f"ultron tokens {args.action} needs --name", 2)
    tokens = _client(settings).tokens
    try:
        if args.action == "create":
            token, row = tokens.create(args.name, args.scope, args.expires, agents=args.agent)
            _print_new(token, row, args)
        elif args.action == "rotate":
            token, row = tokens.rotate(args.name, args.expires)
            _print_new(token, row, args)
        elif args.action == "revoke":
            row = tokens.revoke(args.name)
            print_json(row) if args.json else print(f"revoked token {row['name']!r} ({row['id']})")
        else:
            rows = tokens.listing(include_revoked=args.all)
            if args.json:
                print_json(rows)
            elif not rows:
                print("no named tokens (the server's own token, ULTRON_API_TOKEN or $ULTRON_HOME/api_token, "
                      "is the local admin)")
            else:
                print(fmt.table(["name", "id", "scope", "agents", "state", "created", "expires", "last used"],
                                [(r["name"], r["id"], r["scope"], ",".join(r["agents"] or []) or "all", r["state"],
                                  _when(r["created_at"]), _when(r["expires_at"]), _when(r["last_used_at"]))
                                 for r in rows],
                                max_width=fmt.summary_width(), flex=0))
    except TokenError as exc:
        raise CLIError(str(exc)) from None
    return 0


def _audit(settings: Settings, args: argparse.Namespace) -> int:
    from ultron.access import digest

    entries = _client(settings).audit_log(args.limit, args.action, args.actor)
    if args.target:
        wanted = {args.target, digest(args.target)}
        entries = [e for e in entries if e["target"].split(":", 1)[-1] in wanted or e["target"] in wanted]
    if args.json:
        print_json(entries)
        return 0
    if not entries:
        print("the audit log has no matching entry")
        return 0
    rows = [(_when(e["at"]), e["actor"], e["action"], e["target"],
             ", ".join(f"{k}={v}" for k, v in e["detail"].items() if not isinstance(v, list)))
            for e in entries]
    print(fmt.table(["at (UTC)", "actor", "action", "target", "detail"], rows, max_width=fmt.summary_width()))
    return 0


def _share(settings: Settings, args: argparse.Namespace) -> int:
    if not args.ids and not args.agent:
        raise CLIError("ultron share needs memory ids or --agent", 2)
    try:
        changed = _client(settings).share_memories(args.ids or None, agent_id=args.agent, shared=not args.private)
    except ValueError as exc:
        raise CLIError(str(exc), 2) from None
    if args.json:
        print_json({"changed": changed, "shared": not args.private})
    else:
        print(f"{changed} memor{'y' if changed == 1 else 'ies'} now {'private to their agent' if args.private else 'shared with every agent'}")
    return 0


def add_parsers(sub: argparse._SubParsersAction, json_flag: Callable[..., None]) -> None:
    tk = sub.add_parser("tokens", help="create, list, revoke or rotate named API tokens",
                        description="Named bearer tokens for a team server, each with a scope: read (search, "
                                    "details, bundles, skills), write (also uploads, ingest, feedback) or admin "
                                    "(also forget, edits, tokens, exports). A token is printed once; the store "
                                    "keeps only its HMAC. The server's own token stays the local admin.")
    tk.add_argument("action", choices=["create", "list", "revoke", "rotate"])
    tk.add_argument("--name", help="the token's name (create, revoke, rotate): who or what holds it")
    tk.add_argument("--scope", choices=["read", "write", "admin"], default="read", help="create: what it may do "
                                                                                       "(default read)")
    tk.add_argument("--agent", action="append", metavar="ID",
                    help="create: bind the token to this agent (repeatable): it sees that agent's memories and "
                         "the shared ones, and uploads, ingests and forgets only as it (default: every agent)")
    tk.add_argument("--expires", type=float, metavar="DAYS", help="create, rotate: expire after this many days")
    tk.add_argument("--all", action="store_true", help="list: revoked tokens too")
    json_flag(tk, "the token(s)")

    au = sub.add_parser("audit", help="who forgot, edited, exported, ingested by path or changed tokens, and when",
                        description="The audit log, newest first. It names the token (or local user) and the "
                                    "target, never memory text or secrets; agents and session files are named by "
                                    "a digest, so `--target NAME` finds them without the log keeping the name.")
    au.add_argument("--limit", type=int, default=50, help="at most this many entries (default 50)")
    au.add_argument("--action", help="only this action (forget, edit, ingest, export.skills, export.sft, "
                                     "token.create, token.revoke, token.rotate)")
    au.add_argument("--actor", help="only what this token name (or local:USER) did")
    au.add_argument("--target", help="only entries about this memory id, agent or session file")
    json_flag(au, "the entries")

    sh = sub.add_parser("share", help="share memories with every agent's token, or make them private again",
                        description="A token bound to agents (`ultron tokens create --agent ID`) sees its agents' "
                                    "memories plus the shared ones. Share memories by id, or all of one agent's; "
                                    "--private takes them back. Skills built from them follow: a skill is visible "
                                    "to a token that can see every memory it was built from.")
    sh.add_argument("ids", nargs="*", help="memory ids")
    sh.add_argument("--agent", help="every memory of this agent")
    sh.add_argument("--private", action="store_true", help="make them private to their agent again")
    json_flag(sh, "the count")


COMMANDS: dict[str, Callable[[Settings, argparse.Namespace], int]] = {"tokens": _tokens, "audit": _audit,
                                                                      "share": _share}
