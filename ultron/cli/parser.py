"""The ``ultron`` argument parser: every subcommand, its options, help texts and choices.

Building it imports nothing beyond the standard library and ``ultron.vocabulary``, so
``ultron --help`` stays fast; the commands themselves live in ``ultron.cli.commands``
and ``ultron.cli.commands_server``.
"""

from __future__ import annotations

import argparse

from ultron.vocabulary import TASK_TYPES


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is too small (at least 1)")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a TCP port (0-65535)")
    return value


def _score(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{value} is outside 0..1")
    return value


def _budget(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of tokens") from None
    if not 50 <= value <= 100_000:
        raise argparse.ArgumentTypeError(f"{value} is outside 50..100000 tokens")
    return value


def _json_flag(p: argparse.ArgumentParser, what: str = "the result") -> None:
    p.add_argument("--json", action="store_true", help=f"print {what} as JSON on stdout (for scripts)")


def _progress_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="show a progress bar on stderr (default: only when stderr is a terminal)")


def _yes_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("-y", "--yes", action="store_true",
                   help="do not ask for confirmation (required when stdin is not a terminal)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ultron", description="Ultron: memory for LLM agents, on Dagster.",
        epilog="Settings come from ULTRON_* environment variables (see docs/configuration.md). Exit codes: 0 ok, "
               "1 the request failed (unknown id, failed files, nothing matched), 2 bad arguments, "
               "settings or database.")
    parser.add_argument("--init", action="store_true",
                        help="create a new store at ULTRON_HOME when there is none (otherwise a command run "
                             "outside a store refuses, saying where it looked; `ultron dev` creates one itself)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    dev = sub.add_parser("dev", help="start the database if needed, then the Dagster UI and daemon",
                         description="Start the embedded database if needed, then `dagster dev` (UI and daemon) and the "
                                     "HTTP API (`ultron serve`) beside it.")
    dev.add_argument("--host", default=None, help="UI host (default ULTRON_DAGSTER_HOST or 127.0.0.1)")
    dev.add_argument("--port", type=_port, default=None, help="UI port (default ULTRON_DAGSTER_PORT or 3000)")
    dev.add_argument("--no-examples", action="store_true", help="do not copy examples/ into the inbox on first start")
    dev.add_argument("--no-api", action="store_true",
                     help="do not start the HTTP API (ULTRON_API_HOST:ULTRON_API_PORT) beside the UI")

    ing = sub.add_parser("ingest", help="ingest session .jsonl files or directories",
                         description="Parse session .jsonl files (directories are searched recursively) into the "
                                     "database; unchanged files are skipped by their hash.")
    ing.add_argument("paths", nargs="+", help="session .jsonl files or directories holding them")
    ing.add_argument("--agent-id", required=True, help="the agent these sessions belong to")
    ing.add_argument("--json", action="store_true", help="print the full report as JSON")
    _progress_flag(ing)

    st = sub.add_parser("status", help="row counts per table and pending work",
                        description="Where the state lives, the schema revision, row counts and pending work.")
    _json_flag(st, "the status")

    db = sub.add_parser("db", help="control the embedded PostgreSQL server",
                        description="Start, stop or inspect the embedded PostgreSQL server, or print its URL.")
    db.add_argument("action", choices=["start", "stop", "status", "url"],
                    help="start: start and leave running; stop; status: JSON state; url: the SQLAlchemy URL")

    se = sub.add_parser("search", help="search memories (vector + full text)",
                        description="Hybrid search over active memories: HNSW vector search and full text, fused "
                                    "by rank, boosted by tier and recency. Rows are in ranked order; `sim` is the "
                                    "cosine similarity, `score` the fused rank score.")
    se.add_argument("query", help="what to look for, in plain words")
    se.add_argument("--limit", type=_positive_int, default=10, metavar="N",
                    help="at most this many results (default 10)")
    se.add_argument("--detail", choices=["l0", "l1"], default="l1",
                    help="summary level shown: l0 one-line summary, l1 overview (default l1); "
                         "`ultron details ID` prints everything")
    se.add_argument("--tier", type=str.upper, choices=["HOT", "WARM", "COLD"], help="only memories of this tier")
    se.add_argument("--tag", action="append", default=[], metavar="TAG",
                    help="only memories carrying this tag (repeat for several; all must match)")
    se.add_argument("--agent-id", metavar="A", help="only memories from this agent")
    se.add_argument("--repo", metavar="DIR",
                    help="the checkout you work in: memories whose files changed or vanished there are marked "
                         "possibly stale and ranked lower")
    _json_flag(se, "the results")

    de = sub.add_parser("details", help="print memories in full",
                        description="Full records: content, context, resolution, tags, provenance, hits. "
                                    "An id may be shortened to its first 8 characters, as `ultron search` shows it. "
                                    "Fetching counts as use (+2 hits).")
    de.add_argument("ids", nargs="+", metavar="ID", help="memory id (or a unique prefix of at least 4 characters)")
    _json_flag(de, "the records")

    sk = sub.add_parser("skills", help="list, search, show or export skills",
                        description="Without a query: the current skills. With a query: the closest current "
                                    "skills (vector search). With --show: that skill's SKILL.md. "
                                    "`ultron skills export --to DIR`: write the current, non-retired skills as "
                                    "DIR/<name>/SKILL.md (Agent Skills layout; e.g. ~/.claude/skills for Claude "
                                    "Code), removing the ones it exported before that are gone; other directories "
                                    "in DIR are left alone.")
    sk.add_argument("query", nargs="*", metavar="WORDS",
                    help="search the current skills for these words; `search WORDS` searches for any words, "
                         "even `export`; `export` alone exports them")
    sk.add_argument("--limit", type=_positive_int, default=None, metavar="N",
                    help="at most this many (default: 5 when searching, all when listing)")
    sk.add_argument("--show", metavar="SLUG", help="print the current SKILL.md of this skill")
    sk.add_argument("--to", metavar="DIR",
                    help="with `export`: the skills directory to write (default ULTRON_SKILLS_EXPORT_DIR)")
    _json_flag(sk, "the skills")

    up = sub.add_parser("upload", help="store one memory",
                        description="Store one memory as an agent would (SDK upload_memory): redacted, typed by the "
                                    "server, merged into a near duplicate of the same type when there is one.")
    up.add_argument("content", help="the lesson, in a sentence")
    up.add_argument("--context", default="", help="when it applies")
    up.add_argument("--resolution", default="", help="what to do")
    up.add_argument("--tag", action="append", default=[], metavar="TAG", help="a tag (repeat for several)")
    up.add_argument("--agent-id", metavar="A", help="the agent it comes from (search --agent-id scopes by it)")
    up.add_argument("--shared", action="store_true",
                    help="tokens bound to other agents see it too (default: its agent's tokens and unbound ones)")
    _json_flag(up, "the stored record")

    cx = sub.add_parser("context", help="a prompt-ready block of skills and memories for a task",
                        description="The context bundle for a task: the most relevant skills (when to use, steps), "
                                    "then memories (L1, or L0 when space is short), each labelled with its id for "
                                    "`ultron feedback`, within the token budget (cl100k tokens, never exceeded). "
                                    "The block goes to stdout, its size to stderr.")
    cx.add_argument("task", help="what the agent is about to do, in plain words")
    cx.add_argument("--budget", type=_budget, default=1500, metavar="N",
                    help="at most this many tokens (50-100000, default 1500)")
    cx.add_argument("--agent-id", metavar="A", help="only this agent's memories")
    cx.add_argument("--repo", metavar="DIR",
                    help="the checkout you work in: memories whose files changed or vanished there rank lower "
                         "and say so")
    cx.add_argument("--session-id", metavar="ID",
                    help="the agent's own session id: what is served is recorded, and the session's outcome, "
                         "once ingested and scored, moves each item's utility")
    _json_flag(cx, "the bundle (text, items, tokens)")

    sl = sub.add_parser("stale", help="memories whose files changed or vanished in a repository",
                        description="Memories learned from files of this repository (matched by its origin remote) "
                                    "whose files have since changed or been deleted in the working tree, with why.")
    sl.add_argument("--repo", metavar="DIR", help="a directory inside the repository (default: the current one)")
    _json_flag(sl, "the report")

    from ultron.cli.commands_tokens import add_parsers as token_parsers

    token_parsers(sub, _json_flag)

    fb = sub.add_parser("feedback", help="say whether a memory or a skill helped",
                        description="Record an agent's verdict. A memory: helpful adds hits and recency; not "
                                    "helpful lowers its rank and, after ULTRON_FEEDBACK_DEMOTE_AFTER net negatives, "
                                    "demotes it to COLD. A skill: its reliability moves it from probationary to "
                                    "active, or retires it (no longer searched, served or exported).")
    target = fb.add_mutually_exclusive_group(required=True)
    target.add_argument("--memory", metavar="ID", help="memory id (or a unique prefix, as `ultron search` shows)")
    target.add_argument("--skill", metavar="NAME", help="skill name (as `ultron skills` lists it)")
    verdict = fb.add_mutually_exclusive_group(required=True)
    verdict.add_argument("--helpful", dest="helpful", action="store_true", default=None, help="it helped")
    verdict.add_argument("--not-helpful", dest="helpful", action="store_false", help="it did not help")
    fb.add_argument("--note", default="", help="why, in a sentence (redacted before it is stored)")
    fb.add_argument("--agent-id", metavar="A", help="the agent giving the verdict")
    _json_flag(fb, "the new counts")

    ex = sub.add_parser("export-sft", help="write the SFT dataset (OpenAI JSONL and ShareGPT)",
                        description="Export good segments (score >= the threshold, SFT-eligible) as a fine-tuning "
                                    "dataset under ULTRON_HOME/sft/: OpenAI chat JSONL and ShareGPT, a "
                                    "train/validation split and a manifest.")
    ex.add_argument("--task-type", choices=TASK_TYPES, metavar="T",
                    help=f"only segments of this task type: {', '.join(TASK_TYPES)}")
    ex.add_argument("--min-score", type=_score, default=None, metavar="X",
                    help="lowest overall_score exported (default ULTRON_TRAJECTORY_SFT_SCORE_THRESHOLD, 0.8)")
    ex.add_argument("--limit", type=_positive_int, default=5000, metavar="N",
                    help="at most this many segments (default 5000)")
    _json_flag(ex, "the manifest and file paths")
    _progress_flag(ex)

    sa_ = sub.add_parser("stats", help="sessions, segments, memories, clusters and skills at a glance",
                         description="Counts of sessions, segments (with memory/SFT-eligible), memories by tier and "
                                     "type, clusters and skills.")
    _json_flag(sa_, "the statistics")

    fo = sub.add_parser("forget", help="delete memories and what they came from",
                        description="Delete memories, or everything derived from a segment, a session file or an "
                                    "agent, everywhere: a merged memory that also holds other sources is rebuilt "
                                    "from those; clusters are recomputed and relabelled; skills built from the "
                                    "forgotten memories are re-synthesised from what remains or retired (their old "
                                    "versions and SKILL.md directories deleted); SFT exports are rewritten without "
                                    "the forgotten examples; session files under ULTRON_HOME are deleted. "
                                    "Then the database is purged: the changed tables, their indexes and planner "
                                    "statistics are rewritten (VACUUM FULL), and WAL is switched and checkpointed "
                                    "until no file of the server holds the deleted rows. The report lists what "
                                    "forget cannot reach (backups, WAL archives, replicas, Dagster's run history).")
    what = fo.add_mutually_exclusive_group(required=True)
    what.add_argument("--memory", nargs="+", metavar="ID", help="these memories (ids or unique prefixes)")
    what.add_argument("--segment", metavar="ID", help="the memories of this task segment, and the segment")
    what.add_argument("--session-file", metavar="PATH",
                      help="everything ingested from this session file (its rows, segments and memories)")
    what.add_argument("--agent-id", metavar="A", help="everything of this agent")
    fo.add_argument("--purge", action=argparse.BooleanOptionalAction, default=True,
                    help="purge the deleted rows from the database server's files: VACUUM FULL and ANALYZE of the "
                         "changed tables, VACUUM FULL of the statistics catalog, checkpoints and WAL switches "
                         "(default; each table is locked while it is rewritten). --no-purge leaves them on disk "
                         "until PostgreSQL's own vacuum and checkpoints")
    fo.add_argument("--vacuum", action="store_true",
                    help="with --no-purge: still VACUUM FULL the changed tables (WAL and the planner statistics "
                         "keep the rows until checkpoints recycle them)")
    _yes_flag(fo)
    _json_flag(fo, "the report")

    sv = sub.add_parser("serve", help="run the HTTP API",
                        description="Run the HTTP API (FastAPI; OpenAPI docs at /docs). Every route but /health "
                                    "needs the bearer token ULTRON_API_TOKEN; on a non-loopback address the server "
                                    "refuses to start without one.")
    sv.add_argument("--host", default=None, help="address to listen on (default ULTRON_API_HOST or 127.0.0.1)")
    sv.add_argument("--port", type=_port, default=None,
                    help="port (default ULTRON_API_PORT or 8765; 0 picks a free one)")

    sub.add_parser("mcp", help="run the MCP server on stdin/stdout (for agents)",
                   description="Serve Ultron to an agent over the Model Context Protocol on stdin/stdout: tools "
                               "search_memories, get_memory_details, upload_memory, search_skills, get_skill, "
                               "context_bundle and feedback; resources skill://<name> and ultron://stats. The agent "
                               "starts it as a subprocess (e.g. `claude mcp add ultron -e ULTRON_HOME=/abs/.ultron -- "
                               "ultron mcp`: the default ULTRON_HOME, .ultron, is relative to the agent's working "
                               "directory); logs go to stderr. `ultron serve` offers the same server over HTTP at /mcp.")

    re_ = sub.add_parser("reembed", help="re-embed everything with the configured embedder",
                         description="Switch embedders: re-embed every memory, cluster centroid and current skill "
                                     "with the embedder the settings name (ULTRON_EMBEDDING_*), then record it as "
                                     "the store's embedder. Safe to re-run after an interruption. Restart running "
                                     "`ultron dev` / `ultron serve` processes afterwards.")
    _yes_flag(re_)
    _json_flag(re_, "the counts")
    _progress_flag(re_)

    ma = sub.add_parser("maintenance", help="run the maintenance steps once (no Dagster needed)",
                        description="What the Dagster maintenance job does, once: re-ingest changed inbox files, "
                                    "segment, label and extract pending work, tier rebalance, clustering, skill "
                                    "evolution, consolidation (if ULTRON_CONSOLIDATE_ENABLED) and the raw archive "
                                    "purge.")
    _json_flag(ma, "the summary")

    for name, verb in (("connect", "install Ultron into"), ("disconnect", "remove Ultron from")):
        co = sub.add_parser(name, help=f"{verb} an agent (claude-code, codex): hooks, MCP server, skills",
                            description=(
                                "Write the agent's hooks (session start gets the project's context bundle; stop, "
                                "pre-compact and session end hand the transcript to Ultron), register the MCP "
                                "server and export skills into the agent's skills directory. Idempotent; keeps "
                                "every hook and setting Ultron did not write; prints what changed."
                                if name == "connect" else
                                "Undo `ultron connect`: a file still exactly as Ultron wrote it gets its "
                                "original bytes back; otherwise only Ultron's entries are removed."))
        co.add_argument("agent", choices=["claude-code", "codex"])
        co.add_argument("--scope", choices=["user", "project"], default="user",
                        help="user: the agent's files in your home (default); project: in --project")
        co.add_argument("--home", metavar="DIR", help="the home directory holding the agent's files (default ~)")
        co.add_argument("--project", metavar="DIR", help="the project for --scope project (default: here)")

    hk = sub.add_parser("hook", help="run by the agent at a lifecycle event (reads its JSON on stdin)",
                        description="The entry point `ultron connect` installs. Always exits 0 within "
                                    "ULTRON_HOOK_TIMEOUT_SECONDS (2 s), printing nothing on failure; see "
                                    "$ULTRON_HOME/logs/hooks.log.")
    # free text, checked inside: a hook must exit 0 even when called with an unknown name
    hk.add_argument("agent", help="claude-code or codex")
    hk.add_argument("event", help="session-start, stop, pre-compact or session-end")
    return parser
