"""The ``ultron`` command line: dev server, ingestion, search, skills, SFT export, stats,
forget, the HTTP API, re-embedding and maintenance - each a thin layer over the SDK."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from ultron import cli_format as fmt
from ultron.settings import Settings

PROJECT_ROOT = Path(__file__).resolve().parent.parent
EXAMPLES_AGENT = "examples"
SEEDED_MARKER = ".examples-seeded"


class CLIError(Exception):
    """A user-facing failure: printed as one line, no traceback, with its exit code."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


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
        epilog="Settings come from ULTRON_* environment variables (see README). Exit codes: 0 ok, "
               "1 the request failed (unknown id, failed files, nothing matched), 2 bad arguments, "
               "settings or database.")
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
    _json_flag(se, "the results")

    de = sub.add_parser("details", help="print memories in full",
                        description="Full records: content, context, resolution, tags, provenance, hits. "
                                    "An id may be shortened to its first 8 characters, as `ultron search` shows it. "
                                    "Fetching counts as use (+2 hits).")
    de.add_argument("ids", nargs="+", metavar="ID", help="memory id (or a unique prefix of at least 4 characters)")
    _json_flag(de, "the records")

    sk = sub.add_parser("skills", help="list, search or show skills",
                        description="Without a query: the current skills. With a query: the closest current "
                                    "skills (vector search). With --show: that skill's SKILL.md.")
    sk.add_argument("query", nargs="?", help="search the current skills for this")
    sk.add_argument("--limit", type=_positive_int, default=None, metavar="N",
                    help="at most this many (default: 5 when searching, all when listing)")
    sk.add_argument("--show", metavar="SLUG", help="print the current SKILL.md of this skill")
    _json_flag(sk, "the skills")

    ex = sub.add_parser("export-sft", help="write the SFT dataset (OpenAI JSONL and ShareGPT)",
                        description="Export good segments (score >= the threshold, SFT-eligible) as a fine-tuning "
                                    "dataset under ULTRON_HOME/sft/: OpenAI chat JSONL and ShareGPT, a "
                                    "train/validation split and a manifest.")
    from ultron.trajectory.quality import TASK_TYPES

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
                                    "agent. A merged memory that also holds other sources is rebuilt from those.")
    what = fo.add_mutually_exclusive_group(required=True)
    what.add_argument("--memory", nargs="+", metavar="ID", help="these memories (ids or unique prefixes)")
    what.add_argument("--segment", metavar="ID", help="the memories of this task segment, and the segment")
    what.add_argument("--session-file", metavar="PATH",
                      help="everything ingested from this session file (its rows, segments and memories)")
    what.add_argument("--agent-id", metavar="A", help="everything of this agent")
    _yes_flag(fo)
    _json_flag(fo, "the deleted counts")

    sv = sub.add_parser("serve", help="run the HTTP API",
                        description="Run the HTTP API (FastAPI; OpenAPI docs at /docs). Every route but /health "
                                    "needs the bearer token ULTRON_API_TOKEN; on a non-loopback address the server "
                                    "refuses to start without one.")
    sv.add_argument("--host", default=None, help="address to listen on (default ULTRON_API_HOST or 127.0.0.1)")
    sv.add_argument("--port", type=_port, default=None,
                    help="port (default ULTRON_API_PORT or 8765; 0 picks a free one)")

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
    return parser


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
        message = _user_error(exc)
        if message is None:
            raise
        print(f"ultron: error: {message}", file=sys.stderr)
        return 2


def _user_error(exc: Exception) -> str | None:
    """The one-line message for a failure the user can fix; None for a bug (traceback)."""
    import sqlalchemy as sa

    from ultron.db.database import DatabaseError
    from ultron.memory.reembed import ReembedError
    from ultron.memory.service import EmbeddingProfileMismatch

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


def _client(settings: Settings):
    from ultron.sdk import Ultron

    return Ultron(settings)


class _ProgressBar:
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

    def __enter__(self) -> "_ProgressBar":
        return self

    def __exit__(self, *_exc) -> None:
        self.close()


def _confirm(question: str, args: argparse.Namespace) -> None:
    """Destructive commands ask first; without a terminal, --yes is the answer."""
    if args.yes:
        return
    if not sys.stdin or not sys.stdin.isatty():
        raise CLIError(f"{question} - refusing without confirmation; pass --yes", 2)
    sys.stderr.write(f"{question} [y/N] ")
    sys.stderr.flush()
    if sys.stdin.readline().strip().lower() not in ("y", "yes"):
        raise CLIError("cancelled; nothing was changed", 1)


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, default=str))


def _ingest(settings: Settings, args: argparse.Namespace) -> int:
    u = _client(settings)
    with _ProgressBar("ingest", "file", args.progress, min_total=1) as bar:
        report = u.ingest(args.paths, args.agent_id, progress=bar)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        for f in report.files:
            print(f"{f.status:9} {f.messages:6} msgs  {f.path}")
            for p in f.problems[:10]:
                print(f"          line {p.line}: {p.error}" if p.line is not None else f"          {p.error}")
            if len(f.problems) > 10:
                print(f"          ... {len(f.problems) - 10} more problems (use --json)")
        totals = report.totals
        print("totals: " + ", ".join(f"{k}={v}" for k, v in totals.items()))
    return 1 if report.totals["failed"] else 0


# -- memories ------------------------------------------------------------------------------

_ID_PREFIX = re.compile(r"^[0-9a-fA-F-]{4,36}$")
UUID_LENGTH = 36


def _resolve_memory_ids(u, ids: Sequence[str]) -> tuple[list[str], list[str]]:
    """Full ids for what the user typed (full ids or unique prefixes, as search shows
    them); returns (resolved, unknown). An ambiguous prefix is an error naming the candidates."""
    import sqlalchemy as sa

    resolved, unknown = [], []
    with u.db.engine.connect() as conn:
        for raw in ids:
            typed = raw.strip().lower()
            if not _ID_PREFIX.match(typed):
                unknown.append(raw)
                continue
            exact = len(typed) == UUID_LENGTH
            found = list(conn.execute(sa.text(
                "SELECT id FROM memory_records WHERE " + ("id = :p" if exact else "id LIKE :p ORDER BY id LIMIT 6")),
                {"p": typed if exact else typed + "%"}).scalars())
            if not found:
                unknown.append(raw)
            elif len(found) > 1:
                raise CLIError(f"id prefix {raw!r} is ambiguous: {', '.join(found[:5])}"
                               f"{', ...' if len(found) > 5 else ''}; type more of it", 1)
            elif found[0] not in resolved:
                resolved.append(found[0])
    return resolved, unknown


def _search(settings: Settings, args: argparse.Namespace) -> int:
    if not args.query.strip():
        raise CLIError("the query is empty", 2)
    u = _client(settings)
    tags = [t.strip().lower() for t in args.tag if t.strip()] or None
    results = u.search_memories(args.query, detail_level=args.detail, limit=args.limit, tier=args.tier,
                                tags=tags, agent_id=args.agent_id)
    if args.json:
        _print_json([r.to_dict(args.detail) for r in results])
        return 0
    if not results:
        print("no memory matches")
        return 0
    summary = "summary_l0" if args.detail == "l0" else "overview_l1"
    rows = [(fmt.short_id(r.record.id), r.record.memory_type, r.record.tier, f"{r.similarity_score:.2f}",
             f"{r.score:.4f}", getattr(r.record, summary) or r.record.summary_l0) for r in results]
    print(fmt.table(["id", "type", "tier", "sim", "score", "summary"], rows, align="lllrrl",
                    max_width=fmt.terminal_width()))
    return 0


def _details(settings: Settings, args: argparse.Namespace) -> int:
    u = _client(settings)
    ids, unknown = _resolve_memory_ids(u, args.ids)
    records = u.get_memory_details(ids) if ids else []
    if args.json:
        _print_json([r.to_dict("full") for r in records])
    else:
        width = fmt.terminal_width()
        for i, rec in enumerate(records):
            if i:
                print()
            print(f"memory {rec.id}  ({rec.memory_type}, {rec.tier}, {rec.status})")
            lines = None
            if rec.start_line is not None:
                lines = f"{rec.start_line}-{rec.end_line}" if rec.end_line is not None else str(rec.start_line)
            always = [("summary", rec.summary_l0), ("overview", rec.overview_l1), ("content", rec.content),
                      ("context", rec.context or "-"), ("resolution", rec.resolution or "-"),
                      ("tags", rec.tags), ("hits", rec.hit_count)]
            optional = [("kind", rec.kind), ("tools used", rec.tools_used), ("confidence", rec.confidence),
                        ("last hit", rec.last_hit_at.isoformat() if rec.last_hit_at else None),
                        ("agent", rec.agent_id), ("segment", rec.segment_id), ("session file", rec.session_file),
                        ("lines", lines), ("created", rec.created_at.isoformat() if rec.created_at else None)]
            print(fmt.key_values(always + [(k, v) for k, v in optional if v not in (None, "", [])], width=width))
    for raw in unknown:
        print(f"ultron: error: no memory with id {raw!r}", file=sys.stderr)
    return 1 if unknown else 0


# -- skills ---------------------------------------------------------------------------------


def _skills(settings: Settings, args: argparse.Namespace) -> int:
    u = _client(settings)
    if args.show:
        if args.query:
            raise CLIError("give either a query or --show SLUG, not both", 2)
        skill = u.get_skill(args.show)
        if skill is None:
            raise CLIError(f"no skill {args.show!r}; `ultron skills` lists the current ones", 1)
        if args.json:
            _print_json(skill)
        else:
            print(skill.get("skill_md", "").rstrip("\n"))
        return 0
    if args.query is not None:
        if not args.query.strip():
            raise CLIError("the query is empty", 2)
        found = list(u.search_skills(args.query, args.limit or 5))
    else:
        found = list(u.skills.list_skills())
        if args.limit:
            found = found[: args.limit]
    if args.json:
        _print_json(found)
        return 0
    if not found:
        print("no skill matches" if args.query else "no skills yet (they crystallise from clusters of memories; "
                                                   "run `ultron maintenance`)")
        return 0
    headers = ["slug", "version", "memories", "name"]
    rows = [[s.get("slug"), s.get("version"), s["memory_count"], s.get("name")] for s in found]
    align = "llrl"
    if args.query is not None:
        headers.insert(2, "sim")
        align = "llrrl"
        for row, s in zip(rows, found):
            sim = s["similarity"]
            row.insert(2, f"{sim:.2f}" if isinstance(sim, (int, float)) else sim)
    print(fmt.table(headers, rows, align=align, max_width=fmt.terminal_width()))
    return 0


# -- SFT export ----------------------------------------------------------------------------


def _export_sft(settings: Settings, args: argparse.Namespace) -> int:
    u = _client(settings)
    with _ProgressBar("export", "segment", args.progress) as bar:
        export = u.trajectory_service.export_sft_dataset(task_type=args.task_type, min_quality_score=args.min_score,
                                                         limit=args.limit, progress=bar)
    files = {"manifest": export.manifest_path, **export.files}
    if args.json:
        _print_json({"export_id": export.export_id, "directory": str(export.directory),
                     "files": {k: str(v) for k, v in files.items()}, "manifest": export.manifest})
        return 0
    manifest = export.manifest
    counts = manifest.get("counts") or {}
    print(f"SFT dataset {export.export_id} written to {export.directory}")
    print(fmt.counts_table({fmt.label(k): v for k, v in counts.items()}, key_header="segments"))
    dist = manifest.get("score_distribution") or {}
    if dist.get("mean") is not None:
        print(f"scores: min {dist['min']:.2f}, mean {dist['mean']:.2f}, max {dist['max']:.2f}")
    print("files:")
    print(fmt.key_values((k, str(v)) for k, v in files.items()))
    if not counts.get("exported"):
        filters = manifest.get("filters") or {}
        print(f"no segment qualified (score >= {filters.get('min_quality_score')}"
              + (f", task type {args.task_type}" if args.task_type else "") + "); the files are empty",
              file=sys.stderr)
    return 0


# -- stats, maintenance --------------------------------------------------------------------


def _stats(settings: Settings, args: argparse.Namespace) -> int:
    stats = _client(settings).stats()
    if args.json:
        _print_json(stats)
        return 0
    sections = []
    sessions = stats.get("sessions") or {}
    sections.append("sessions\n" + fmt.table(list(sessions), [list(sessions.values())],
                                             align="r" * len(sessions), indent="  "))
    segments = stats.get("segments") or {}
    sections.append("segments\n" + fmt.table([fmt.label(k) for k in segments], [list(segments.values())],
                                             align="r" * len(segments), indent="  "))
    buckets = stats.get("score_buckets") or {}
    if buckets:
        sections.append("segment scores\n" + fmt.table(list(buckets), [list(buckets.values())],
                                                       align="r" * len(buckets), indent="  "))
    mem = stats.get("memories") or {}
    by_tier = {t: (mem.get("by_tier") or {}).get(t, 0) for t in ("HOT", "WARM", "COLD")}
    by_tier["archived"] = mem.get("total", 0) - mem.get("active", 0)
    by_tier["total"] = mem.get("total", 0)
    sections.append("memories by tier\n" + fmt.table(list(by_tier), [list(by_tier.values())],
                                                     align="r" * len(by_tier), indent="  "))
    by_type = dict(sorted((mem.get("by_type") or {}).items(), key=lambda kv: (-kv[1], kv[0])))
    sections.append("memories by type (active)\n" + (fmt.counts_table(by_type, key_header="type") if by_type
                                                     else "  (none)"))
    for name in ("clusters", "skills"):
        if name in stats:
            sections.append(fmt.mapping(name, stats[name]))
    if stats.get("llm_provider"):
        sections.append(f"llm provider: {stats['llm_provider']}")
    print("\n\n".join(sections))
    return 0


def _maintenance(settings: Settings, args: argparse.Namespace) -> int:
    summary = _client(settings).run_maintenance()
    if args.json:
        _print_json(summary)
        return 0
    if "refreshed" in summary:
        print(fmt.mapping("inbox refresh", summary["refreshed"]))
        print()
    steps = {k: summary[k] for k in ("segmented", "labeled", "extracted") if k in summary}
    print("pending work\n" + fmt.counts_table({f"{k} (sessions)" if k == "segmented" else f"{k} (segments)": v
                                               for k, v in steps.items()}, key_header="step"))
    for key in ("tiers", "clusters", "skills"):
        if key in summary:
            print()
            print(fmt.mapping(key, summary[key]))
    print()
    consolidation = summary.get("consolidation")
    if consolidation is None:
        print("consolidation: off (ULTRON_CONSOLIDATE_ENABLED)")
    else:
        print(fmt.mapping("consolidation", consolidation))
    if "raw_archive_purged" in summary:
        print(f"raw archive: {summary['raw_archive_purged']} uploads past retention purged")
    return 0


# -- forget, reembed, serve ----------------------------------------------------------------


def _forget(settings: Settings, args: argparse.Namespace) -> int:
    u = _client(settings)
    kwargs: dict[str, Any] = {}
    if args.memory:
        ids, unknown = _resolve_memory_ids(u, args.memory)
        if unknown:
            raise CLIError(f"no memory with id {', '.join(repr(x) for x in unknown)}; nothing was deleted", 1)
        kwargs["memory_ids"] = ids
        target = f"{fmt.plural(len(ids), 'memory', 'memories')} ({', '.join(fmt.short_id(i) for i in ids)})"
    elif args.segment:
        kwargs["segment_id"] = args.segment
        target = f"the memories of segment {args.segment}, and the segment"
    elif args.session_file:
        path = os.path.abspath(os.path.expanduser(args.session_file))
        kwargs["session_file"] = path
        target = f"everything ingested from {path}"
    else:
        kwargs["agent_id"] = args.agent_id
        target = f"everything of agent {args.agent_id!r}"
    _confirm(f"Forget {target}?", args)
    counts = u.forget(**kwargs)
    if args.json:
        _print_json(counts)
    elif any(counts.values()):
        print(f"forgot {target}")
        print(fmt.counts_table({fmt.label(k): v for k, v in counts.items()}, key_header="deleted"))
    if not any(counts.values()):
        if not args.json:
            print("nothing matched; nothing was deleted", file=sys.stderr)
        return 1
    return 0


def _reembed(settings: Settings, args: argparse.Namespace) -> int:
    from ultron.db import memories as store
    from ultron.memory.reembed import UNFINISHED, reembed

    u = _client(settings)
    memory = u.memory
    with u.db.engine.connect() as conn:
        profile = store.get_profile(conn)
    name = memory.embedder.name
    was = "an empty store" if profile is None else (
        f"an unfinished re-embed to {profile[0].removesuffix(UNFINISHED)}" if profile[0].endswith(UNFINISHED)
        else f"vectors from {profile[0]}")
    _confirm(f"Re-embed every memory, cluster centroid and skill with {name} (now {was})?", args)
    with _ProgressBar("re-embed", "row", args.progress) as bar:
        out = reembed(memory, progress=bar)
    if args.json:
        _print_json(out)
        return 0
    print(f"re-embedded {fmt.plural(out['memories'], 'memory', 'memories')}, "
          f"{fmt.plural(out['clusters'], 'cluster centroid')} and {fmt.plural(out['skills'], 'skill')} "
          f"with {out['embedder']} ({out['dim']}-d) in {out['seconds']:.1f}s")
    if out["clusters_emptied"]:
        print(f"{fmt.plural(out['clusters_emptied'], 'cluster')} without active members lost "
              f"{'its' if out['clusters_emptied'] == 1 else 'their'} centroid until the next clustering run")
    if out["previous_embedder"] and out["previous_embedder"] != out["embedder"]:
        print(f"the store now uses {out['embedder']} instead of {out['previous_embedder']}; "
              "restart running `ultron dev` / `ultron serve` processes")
    return 0


def _serve(settings: Settings, args: argparse.Namespace) -> int:
    from ultron.api.server import serve

    code = serve(settings, host=args.host, port=args.port)
    return code if isinstance(code, int) else 0


def _status(settings: Settings, args: argparse.Namespace) -> int:
    from ultron.db import embedded

    status = _client(settings).status()
    status["home"] = str(settings.home)
    status["inbox"] = [str(p) for p in settings.inbox]
    if settings.uses_embedded_database:
        status["embedded_server"] = embedded.server_status(settings.pgdata)
    if args.json:
        _print_json(status)
        return 0
    print(f"home:      {status['home']}")
    print(f"inbox:     {', '.join(status['inbox'])}")
    print(f"database:  {status['database']} (schema {status['schema_revision']})")
    print("tables:")
    for name, count in status["tables"].items():
        print(f"  {name:22} {count:>10}")
    print("pending:")
    for name, count in status["pending"].items():
        print(f"  {name:32} {count:>10}")
    return 0


def _db(settings: Settings, args: argparse.Namespace) -> int:
    from ultron.db import embedded
    from ultron.db.database import Database, resolve_urls

    if args.action in ("start", "url"):
        if settings.uses_embedded_database and args.action == "start":
            resolve_urls(settings, keep_running=True)
        db = Database.open(settings)
        print(db.urls.ultron if args.action == "url" else f"database ready: {db.urls.ultron}")
        return 0
    if not settings.uses_embedded_database:
        print("ULTRON_DATABASE_URL is set: the external server is not managed by ultron", file=sys.stderr)
        return 2
    if args.action == "stop":
        print("stopped" if embedded.stop_server(settings.pgdata) else "not running")
        return 0
    print(json.dumps(embedded.server_status(settings.pgdata), indent=2))
    return 0


def seed_examples(settings: Settings, examples_dir: Path = PROJECT_ROOT / "examples") -> list[Path]:
    """Copy the bundled example sessions into the first inbox, once per state directory."""
    inbox = settings.inbox[0]
    marker = inbox / SEEDED_MARKER
    if marker.exists() or not examples_dir.is_dir():
        return []
    target = inbox / EXAMPLES_AGENT
    target.mkdir(parents=True, exist_ok=True)
    copied = []
    for src in sorted(examples_dir.glob("*.jsonl")):
        dst = target / src.name
        if not dst.exists():
            shutil.copy2(src, dst)
            copied.append(dst)
    marker.write_text("examples copied on first start; delete this file to copy them again\n")
    return copied


def _dev(settings: Settings, args: argparse.Namespace) -> int:
    from ultron.db.database import Database

    host = args.host or settings.dagster_host
    port = args.port or settings.dagster_port
    db = Database.open(settings)  # starts the embedded server; this process keeps it up
    for inbox in settings.inbox:
        inbox.mkdir(parents=True, exist_ok=True)
    if not args.no_examples:
        copied = seed_examples(settings)
        if copied:
            print(f"ultron: copied {len(copied)} example sessions into {copied[0].parent}")

    dagster_home = settings.dagster_home
    dagster_home.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(PROJECT_ROOT / "dagster.yaml", dagster_home / "dagster.yaml")
    env = dict(os.environ)
    env.update(
        DAGSTER_HOME=str(dagster_home),
        ULTRON_HOME=str(settings.home),
        ULTRON_INBOX=os.pathsep.join(str(p) for p in settings.inbox),
        ULTRON_DAGSTER_PG_URL=db.urls.dagster,
    )
    if not settings.uses_embedded_database:
        env["ULTRON_DATABASE_URL"] = settings.database_url or ""
    workspace = PROJECT_ROOT / "workspace.yaml"
    target = ["-w", str(workspace)] if workspace.exists() else ["-m", "ultron_assets.definitions"]
    cmd = [sys.executable, "-m", "dagster", "dev", *target, "-h", host, "-p", str(port)]
    print(f"ultron: Dagster UI at http://{host}:{port}  (DAGSTER_HOME={dagster_home})", flush=True)
    children: list[subprocess.Popen] = []
    api_cmd = None if args.no_api else _api_command(settings)

    def forward(signum, _frame):  # let dagster dev shut its webserver and daemon down cleanly
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGINT)  # dagster dev shuts down cleanly on SIGINT only

    # Installed before the child starts: a shell's background job has SIGINT ignored,
    # and an ignored signal would be inherited by dagster dev, which then never stops.
    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)
    # Its own process group, so whatever it leaves behind (code servers) can be cleaned up.
    proc = subprocess.Popen(cmd, env=env, cwd=str(PROJECT_ROOT), start_new_session=True)
    children.append(proc)
    api = subprocess.Popen(api_cmd, env=env, cwd=str(PROJECT_ROOT), start_new_session=True) if api_cmd else None
    if api is not None:
        children.append(api)
    code = proc.wait()
    if api is not None:
        if api.poll() is None:
            api.send_signal(signal.SIGINT)
        try:
            api.wait(timeout=15)
        except subprocess.TimeoutExpired:
            pass
        _stop_group(api.pid)
    _stop_group(proc.pid)
    return code


def _api_command(settings: Settings) -> list[str] | None:
    """The HTTP API beside the UI, so agents can reach the same store; None (with the reason
    printed) when it cannot start, e.g. a non-loopback ULTRON_API_HOST without a token."""
    from ultron.api.auth import api_token

    try:
        api_token(settings, settings.api_host)  # creates $ULTRON_HOME/api_token on loopback
    except Exception as exc:  # noqa: BLE001 - the UI still starts; say why the API does not
        print(f"ultron: HTTP API not started: {exc}", file=sys.stderr)
        return None
    where = "ULTRON_API_TOKEN" if settings.api_token else str(settings.home / "api_token")
    print(f"ultron: HTTP API at http://{settings.api_host}:{settings.api_port}  (bearer token: {where})",
          flush=True)
    return [sys.executable, "-m", "ultron.api", "--host", settings.api_host, "--port", str(settings.api_port)]


def _stop_group(pgid: int, grace_seconds: float = 10.0) -> None:
    """Terminate what is left of a process group: SIGTERM, then SIGKILL after a grace period."""
    import time

    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace_seconds
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.2)


#: Looked up when main() runs, so it can sit after the handlers.
COMMANDS: dict[str, Callable[[Settings, argparse.Namespace], int]] = {
    "dev": _dev, "ingest": _ingest, "status": _status, "db": _db, "search": _search, "details": _details,
    "skills": _skills, "export-sft": _export_sft, "stats": _stats, "forget": _forget, "serve": _serve,
    "reembed": _reembed, "maintenance": _maintenance,
}


if __name__ == "__main__":
    sys.exit(main())
