"""The commands that work on the store through the SDK: ingest, search, details, skills,
export-sft, stats, maintenance, forget, reembed and status.

Each is a thin layer over ``ultron.sdk.Ultron``: it calls the SDK, then prints a table
(``ultron.cli.format``) or, with ``--json``, the data. Services are imported inside the
functions, so ``ultron --help`` never loads them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import textwrap
from typing import Any, Callable, Sequence

from ultron.cli import format as fmt
from ultron.cli.served import ask_server
from ultron.cli.console import CLIError, ProgressBar, confirm, print_json
from ultron.settings import Settings


def _client(settings: Settings):
    from ultron.sdk import Ultron

    return Ultron(settings)


def _ingest(settings: Settings, args: argparse.Namespace) -> int:
    u = _client(settings)
    with ProgressBar("ingest", "file", args.progress, min_total=1) as bar:
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
    from ultron.db import memories as store

    resolved, unknown = [], []
    with u.db.engine.connect() as conn:
        for raw in ids:
            typed = raw.strip().lower()
            if not _ID_PREFIX.match(typed):
                unknown.append(raw)
                continue
            found = store.ids_matching(conn, typed, full_length=UUID_LENGTH)
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
    tags = [t.strip().lower() for t in args.tag if t.strip()] or None
    repo = getattr(args, "repo", None)
    repo = os.path.abspath(repo) if repo else None
    params = dict(detail_level=args.detail, limit=args.limit, tier=args.tier, tags=tags, agent_id=args.agent_id,
                  repo_root=repo)
    results = ask_server(settings, lambda server: server.search_memories(args.query, **params))
    if results is None:
        results = [r.to_dict(args.detail) for r in _client(settings).search_memories(args.query, **params)]
    if args.json:
        print_json(results)
        return 0
    if not results:
        print("no memory matches")
        return 0
    summary = "summary_l0" if args.detail == "l0" else "overview_l1"
    # the stale note leads, so cutting a long summary to the width never cuts the warning
    rows = [(fmt.short_id(r["id"]), r["memory_type"], r["tier"], f"{r['similarity_score']:.2f}",
             f"{r['score']:.4f}", (f"(possibly stale: {r['stale_reason']}) " if r.get("possibly_stale") else "")
             + (r.get(summary) or r.get("summary_l0") or "")) for r in results]
    print(fmt.table(["id", "type", "tier", "sim", "score", "summary"], rows, align="lllrrl",
                    max_width=fmt.summary_width()))
    return 0


def _details(settings: Settings, args: argparse.Namespace) -> int:
    u = _client(settings)
    ids, unknown = _resolve_memory_ids(u, args.ids)
    records = u.get_memory_details(ids) if ids else []
    if args.json:
        print_json([r.to_dict("full") for r in records])
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


def _export_skills(settings: Settings, args: argparse.Namespace) -> int:
    """``ultron skills export --to DIR``: the Agent Skills tree, then its spec check."""
    from ultron.skills.export import validate_tree

    to = args.to or settings.skills_export_dir
    if not to:
        raise CLIError("say where: `ultron skills export --to DIR` (or set ULTRON_SKILLS_EXPORT_DIR)", 2)
    report = _client(settings).export_skills(to)
    problems = validate_tree(report["dir"], report["written"] + report["unchanged"])
    if args.json:
        print_json({**report, "problems": problems})
    else:
        print(f"exported to {report['dir']}: {fmt.plural(len(report['written']), 'skill')} written, "
              f"{len(report['unchanged'])} unchanged, {len(report['removed'])} removed")
        for name in report["removed"]:
            print(f"  removed  {name}")
        for item in report["skipped"]:
            print(f"  skipped  {item['name']}: {item['reason']}")
        for name, found in problems.items():
            print(f"  invalid  {name}: {'; '.join(found)}")
    return 1 if problems else 0



def _skills_query(words: list[str]) -> tuple[str | None, bool]:
    """(search text or None, export?) from the words after `ultron skills`: `export` alone
    exports, `search …` searches for whatever follows (so "export" can be searched for too),
    anything else is the search text."""
    if words == ["export"]:
        return None, True
    if words[:1] == ["search"]:
        return (" ".join(words[1:]) if len(words) > 1 else ""), False
    return (" ".join(words) if words else None), False


def _skills(settings: Settings, args: argparse.Namespace) -> int:
    args.query, export = _skills_query(list(args.query or []))
    if export or args.to:
        if not export or args.show or args.limit:
            raise CLIError("--to goes with `ultron skills export --to DIR` only", 2)
        return _export_skills(settings, args)
    u = _client(settings)
    if args.show:
        if args.query:
            raise CLIError("give either a query or --show SLUG, not both", 2)
        skill = u.get_skill(args.show)
        if skill is None:
            raise CLIError(f"no skill {args.show!r}; `ultron skills` lists the current ones", 1)
        if args.json:
            print_json(skill)
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
        print_json(found)
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
    print(fmt.table(headers, rows, align=align, max_width=fmt.summary_width()))
    return 0


# -- SFT export ----------------------------------------------------------------------------


def _export_sft(settings: Settings, args: argparse.Namespace) -> int:
    u = _client(settings)
    with ProgressBar("export", "segment", args.progress) as bar:
        export = u.export_sft_dataset(task_type=args.task_type, min_quality_score=args.min_score,
                                      limit=args.limit, progress=bar)
    files = {"manifest": export.manifest_path, **export.files}
    if args.json:
        print_json({"export_id": export.export_id, "directory": str(export.directory),
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
        print_json(stats)
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
        print_json(summary)
        return 0
    if "refreshed" in summary:
        print(fmt.mapping("inbox refresh", summary["refreshed"]))
        print()
    steps = {k: summary[k] for k in ("segmented", "labeled", "extracted") if k in summary}
    print("pending work\n" + fmt.counts_table({f"{k} (sessions)" if k == "segmented" else f"{k} (segments)": v
                                               for k, v in steps.items()}, key_header="step"))
    for key in ("fallbacks_redone", "tiers", "clusters", "skills"):
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


# -- forget, reembed, status ---------------------------------------------------------------


def _forget(settings: Settings, args: argparse.Namespace) -> int:
    from ultron.forget import LEGACY_KEYS, VACUUM_NOTE, anything_forgotten

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
    confirm(f"Forget {target}?", args)
    report = u.forget(**kwargs, vacuum=args.vacuum, purge=args.purge)
    found = anything_forgotten(report)
    if args.json:
        print_json(report)
    elif found:
        _print_forget_report(target, report, {k: report[k] for k in LEGACY_KEYS}, VACUUM_NOTE)
    if not found:
        if not args.json:
            print("nothing matched; nothing was deleted", file=sys.stderr)
        return 1
    return 0


def _print_forget_report(target: str, report: dict[str, Any], counts: dict[str, int], note: str) -> None:
    print(f"forgot {target}")
    print(fmt.counts_table({fmt.label(k): v for k, v in counts.items()}, key_header="deleted"))
    changed = {t: n for t, n in report["tables"].items() if n["deleted"] or n["updated"]}
    if changed:
        print("tables:")
        print(fmt.table(["table", "deleted", "updated"], [(t, n["deleted"], n["updated"]) for t, n in changed.items()],
                        align="lrr", indent="  "))
    for section in ("clusters", "skills", "files", "sft"):
        if any(report[section].values()):
            print(f"{section}: " + ", ".join(f"{fmt.label(k)} {v}" for k, v in report[section].items() if v))
    if report["partitions"]:
        print(f"dagster partitions to remove: {', '.join(report['partitions'])}")
    for path in report["kept_on_disk"]:
        print(f"still on disk, outside ULTRON_HOME (not deleted; in an inbox, the next refresh ingests it again: "
              f"move or delete it): {path}", file=sys.stderr)
    purged = report.get("purge")
    if purged:
        wal = purged["wal_segments"]
        print(textwrap.fill(
            f"purged: VACUUM FULL of {', '.join(purged['tables'])}"
            + ("; the planner statistics" if purged["statistics"] else "")
            + f"; {fmt.plural(purged['checkpoints'], 'checkpoint')}, "
            + fmt.plural(purged['wal_switches'], 'WAL switch', 'WAL switches')
            + (f"; pg_wal holds {fmt.plural(len(wal), 'segment')}" if wal is not None else "")
            + f" ({purged['seconds']:.1f} s)", width=100, subsequent_indent="  ", break_on_hyphens=False))
    elif report["vacuumed"]:
        print(f"vacuumed (FULL): {', '.join(report['vacuumed'])}")
    if not purged:
        print(f"note: {note}")
    if report.get("not_reached"):
        print("not reached by forget (delete or expire these yourself):")
        for item in report["not_reached"]:
            print(textwrap.fill(item, width=100, initial_indent="  - ", subsequent_indent="    ",
                                break_on_hyphens=False))


def _reembed(settings: Settings, args: argparse.Namespace) -> int:
    from ultron.db import memories as store
    from ultron.reembed import UNFINISHED, reembed

    u = _client(settings)
    with u.db.engine.connect() as conn:
        profile = store.get_profile(conn)
    name = u.context.embedder.name
    was = "an empty store" if profile is None else (
        f"an unfinished re-embed to {profile[0].removesuffix(UNFINISHED)}" if profile[0].endswith(UNFINISHED)
        else f"vectors from {profile[0]}")
    confirm(f"Re-embed every memory, cluster centroid and skill with {name} (now {was})?", args)
    with ProgressBar("re-embed", "row", args.progress) as bar:
        out = reembed(u.context, progress=bar)
    if args.json:
        print_json(out)
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


def _status(settings: Settings, args: argparse.Namespace) -> int:
    from ultron.db import embedded

    status = _client(settings).status()
    status["home"] = str(settings.home)
    status["inbox"] = [str(p) for p in settings.inbox]
    if settings.uses_embedded_database:
        status["embedded_server"] = embedded.server_status(settings.pgdata)
    if args.json:
        print_json(status)
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


COMMANDS: dict[str, Callable[[Settings, argparse.Namespace], int]] = {
    "ingest": _ingest, "status": _status, "search": _search, "details": _details, "skills": _skills,
    "export-sft": _export_sft, "stats": _stats, "forget": _forget, "reembed": _reembed, "maintenance": _maintenance,
}
