"""Forgetting, everywhere: a memory, a segment, a session file or an agent leaves every
table and every file under ULTRON_HOME that was built from it.

It spans the memory, cluster and skill stages and the SFT files, so it sits above them,
beside the SDK (``Ultron.forget`` calls :func:`forget`). The steps, in order:

1. **Memories, sessions** (``MemoryService.forget_in``): contributions of the source are
   deleted; a memory left without contributions is deleted, one with others is rebuilt
   from them (body, summaries, embedding, provenance, tags, tools); session rows, parsed
   messages, segments and raw uploads go.
2. **Clusters**: every cluster that held a deleted or rebuilt memory gets its members,
   size, centroid (mean of the remaining active members, normalised) and a new topic
   (the offline rules labeller, measured against the whole store); a cluster left empty is
   dissolved. A topic made of a term the store no longer holds anywhere (so it came from
   forgotten text) is relabelled, or cleared on a dissolved cluster (kept as history).
   Deleted memories leave every cluster's record of its last crystallisation attempt, and
   an attempt that saw a deleted or rebuilt memory loses its reason (gate reasons quote text).
3. **Skills**: every version (current or superseded) whose evidence includes a deleted
   or rebuilt memory is deleted, row and directory (SKILL.md, _meta.json); so is every
   version of a slug made of forgotten text, and the slug leaves the clusters and the
   other skills' superseded lists. A cluster whose current skill went gets a new one from
   its remaining members through the Skill Hub's normal path (synthesis, redaction, the
   quality gate, a version numbered after the withdrawn ones), or, below
   ``crystallization_threshold`` members (or refused by the gate), is left without one
   ("retired"): it crystallises again when it regains critical mass. The re-synthesis runs
   last, once everything forgotten is gone; if it fails, the cluster is left ready for the
   next skill evolution.
   Feedback events on deleted memories and on skills left without a version go too, and a
   forgotten agent's verdicts everywhere (its votes leave the counters they were added to).
4. **Files**: skill directories whose ``_meta.json`` cites a deleted or rebuilt memory;
   SFT exports holding forgotten segments are rewritten without them or deleted
   (``ultron.sft.export.remove_from_exports``); forgotten session files that lie under
   ULTRON_HOME (API uploads, an inbox inside it) are deleted, others are listed in the
   report (an inbox refresh would ingest them again).
5. Optionally **VACUUM** (FULL) the changed tables: until then PostgreSQL keeps the deleted
   rows' bytes in its data files (pgdata/), unreachable but on disk. Or **purge**
   (``ultron.db.forget.purge``), which the CLI and the memory browser do by default: VACUUM
   FULL and ANALYZE of the changed tables and the lexicon (heap, TOAST, indexes, planner
   statistics), VACUUM FULL of the statistics catalog, a checkpoint, then WAL switches and
   checkpoints until no WAL segment written before is left. On the embedded server no file
   of pgdata/ holds the forgotten text afterwards.

What forget cannot reach is listed in the report's ``not_reached``: backups, WAL archives,
replicas, an external server's disks, Dagster's run history, freed disk blocks, the server
log (:func:`not_reached`).

Clustering and skill evolution are held off for the duration (their locks), so neither
can write a label or a skill from a snapshot that still had the forgotten data. The
Dagster partitions of forgotten sessions are returned (``partitions``); the Dagster side
removes them (the domain library never imports Dagster).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ultron import access
from ultron.context import ServiceContext
from ultron.db import clusters as cluster_store
from ultron.db import feedback as feedback_store
from ultron.db import outcomes as outcome_store
from ultron.db import forget as store
from ultron.db import skills as skill_store
from ultron.db import vector_indexes as vector_index_store
from ultron.db import vectors as vector_store
from ultron.heuristics import topics
from ultron.memory.service import ForgetResult, MemoryService
from ultron.sft.export import remove_from_exports
from ultron.skills.export import sync_export
from ultron.skills.service import SkillService
from ultron.skills.versioning import slugify
from ultron.sessions.identity import agent_session_id

log = logging.getLogger("ultron.forget")

#: The counts forget always returned, first in the report.
LEGACY_KEYS = ("contributions", "memories_deleted", "memories_rebuilt", "segments", "sessions", "raw_uploads")
VACUUM_NOTE = ("PostgreSQL keeps deleted rows in its data files until VACUUM, and in WAL until checkpoints "
               "recycle it (`ultron forget` purges both unless --no-purge)")


@dataclass
class _Clusters:
    updated: set[str] = field(default_factory=set)
    dissolved: set[str] = field(default_factory=set)
    topics_cleared: int = 0
    changed: set[str] = field(default_factory=set)  # every cluster row written


@dataclass
class _Skills:
    versions_deleted: int = 0
    resynthesize: list[str] = field(default_factory=list)  # cluster ids
    burned: dict[str, list[str]] = field(default_factory=dict)  # slug -> deleted versions
    retired: int = 0
    dirs: list[Path] = field(default_factory=list)
    tainted_slugs: set[str] = field(default_factory=set)
    clusters_changed: set[str] = field(default_factory=set)


def _check_owner(memory: MemoryService, memory_ids: Sequence[str] | None, segment_id: str | None,
                 session_file: str | None, agent_id: str | None) -> None:
    """An agent-bound principal forgets only what its agents own: their memories (a memory
    it cannot see, or another agent's shared one, is refused as unknown: 404), their
    sessions and themselves (403 otherwise). Outside a door nothing is checked."""
    mine = access.visible_agents()
    if mine is None:
        return
    if agent_id is not None or session_file is not None or segment_id is not None:
        access.check_agent(agent_id)
    for memory_id in memory_ids or ():
        record = memory.get_memory(memory_id)
        if record is None or record.agent_id not in mine:
            raise access.Refused(404, f"no memory with id {memory_id!r}")


def forget(ctx: ServiceContext, memory_ids: Sequence[str] | None = None, segment_id: str | None = None,
           session_file: str | None = None, agent_id: str | None = None, *, vacuum: bool = False,
           purge: bool = False, memory: MemoryService | None = None, skills: SkillService | None = None
           ) -> dict[str, Any]:
    """Forget these memories / this segment / this session file / this agent everywhere
    (see the module docstring). Returns the report:

    ``contributions, memories_deleted, memories_rebuilt, segments, sessions, raw_uploads``
    (the counts forget always gave), ``tables`` ({table: {"deleted", "updated"}}),
    ``clusters`` ({"updated", "dissolved", "topics_cleared"}), ``skills``
    ({"resynthesized", "retired", "versions_deleted"}), ``files`` ({"skill_md",
    "meta_json", "sft_export", "session_file"}: files deleted or rewritten), ``sft``
    ({"exports_rewritten", "exports_deleted", "examples_removed"}), ``partitions`` (the
    Dagster partition keys of the forgotten sessions), ``kept_on_disk`` (forgotten
    session files outside ULTRON_HOME, left alone), ``vacuumed`` (tables VACUUMed),
    ``purge`` (what :func:`ultron.db.forget.purge` did, None without ``purge``) and
    ``not_reached`` (what still holds, or may hold, the forgotten data: see
    :func:`not_reached`); ``skills_export`` (the ULTRON_SKILLS_EXPORT_DIR sync) when that
    directory is set.

    ``vacuum``: VACUUM FULL the changed tables. ``purge``: leave the forgotten data in none
    of the database server's files (tables, indexes, TOAST, statistics, WAL); implies
    ``vacuum``. Both lock each table in turn while it is rewritten."""
    if not any((memory_ids, segment_id, session_file, agent_id)):
        raise ValueError("say what to forget: memory_ids, segment_id, session_file or agent_id")
    memory = memory or MemoryService(ctx)
    skills = skills or SkillService(ctx)
    _check_owner(memory, memory_ids, segment_id, session_file, agent_id)
    settings = ctx.settings
    engine = ctx.db.engine
    with engine.connect() as holder:
        # No clustering run or skill evolution in between: both work from snapshots.
        cluster_store.lock_run(holder)
        skill_store.lock_evolution(holder)
        holder.commit()
        try:
            with engine.begin() as conn:
                cluster_store.lock_for_batch_write(conn)
                mem = memory.forget_in(conn, memory_ids, segment_id, session_file, agent_id)
                gone_terms = _gone_terms(conn, mem)
                clusters = _forget_in_clusters(conn, mem, gone_terms)
                plan = _forget_in_skills(conn, mem, gone_terms, settings.crystallization_threshold,
                                         settings.skills_dir)
                # Agents' verdicts on forgotten memories (and skills left without a version), and
                # every verdict a forgotten agent gave, with its votes taken off the counters.
                feedback_deleted = feedback_store.forget_feedback(conn, memory_ids=mem.deleted_memories,
                                                                  agent_id=agent_id)
                # What was served to forgotten memories, agents and sessions, with the outcomes it
                # added taken back off the utility of what survives.
                serves_deleted = outcome_store.forget_serves(
                    conn, memory_ids=mem.deleted_memories, agent_id=agent_id,
                    session_ids=[agent_session_id(s.get("agent_session_id"), s["session_file"]) for s in mem.sessions])
                if agent_id and not (session_file or segment_id or memory_ids):
                    # its own vector graph names it (its partition bound): gone with it
                    vector_index_store.drop(conn, vector_index_store.agent_scope(agent_id))
                xid = store.transaction_id(conn) if purge else None
                # Files last, inside the transaction: if the commit fails, forget can simply run again.
                files = _remove_skill_dirs(settings.skills_dir, plan.dirs,
                                           set(mem.deleted_memories) | set(mem.rebuilt_memories), plan.tainted_slugs)
            sft = {"rewritten": 0, "deleted": 0, "examples": 0}
            if segment_id or session_file or agent_id:
                sft = remove_from_exports(settings.sft_dir, segment_ids=mem.segment_ids, session_file=session_file,
                                          agent_id=agent_id)
            session_files, kept = _remove_session_files(settings, mem)
            published = _resynthesize(skills, plan)
        finally:
            skill_store.unlock_evolution(holder)
            cluster_store.unlock_run(holder)
            holder.commit()
    retired = plan.retired + len(plan.resynthesize) - published

    tables = {t: dict(mem.tables.get(t, {"deleted": 0, "updated": 0})) for t in (*store.TABLES, *mem.tables)}
    tables["knowledge_clusters"]["updated"] = len(clusters.changed | plan.clusters_changed)
    tables["skills"] = {"deleted": plan.versions_deleted, "updated": published}
    tables["feedback_events"] = {"deleted": feedback_deleted, "updated": 0}
    tables["bundle_serves"] = {"deleted": serves_deleted, "updated": 0}
    report: dict[str, Any] = {k: mem.counts.get(k, 0) for k in LEGACY_KEYS}
    report.update({
        "tables": tables,
        "clusters": {"updated": len(clusters.updated), "dissolved": len(clusters.dissolved),
                     "topics_cleared": clusters.topics_cleared},
        "skills": {"resynthesized": published, "retired": retired, "versions_deleted": plan.versions_deleted},
        "files": {**files, "sft_export": sft["rewritten"] + sft["deleted"], "session_file": session_files},
        "sft": {"exports_rewritten": sft["rewritten"], "exports_deleted": sft["deleted"],
                "examples_removed": sft["examples"]},
        "partitions": sorted({s["partition_key"] for s in mem.sessions if s["partition_key"]}),
        "kept_on_disk": kept,
        "vacuumed": [],
        "purge": None,
    })
    exported = sync_export(ctx)  # withdrawn skills leave ULTRON_SKILLS_EXPORT_DIR too
    if exported is not None:
        report["skills_export"] = exported
    changed = [t for t, n in tables.items() if (n["deleted"] or n["updated"]) and t in store.TABLES]
    if purge and changed:
        if "memory_records" in changed:  # its triggers changed the lexicon
            changed += list(store.LEXICON_TABLES)
        report["purge"] = store.purge(engine, changed, after_xid=xid)
        report["vacuumed"] = report["purge"]["tables"]
        for problem in report["purge"]["problems"]:
            log.warning("forget --purge: %s", problem)
    elif vacuum and changed:
        report["vacuumed"] = store.vacuum(engine, changed)
    report["not_reached"] = not_reached(settings, report["purge"], bool(report["vacuumed"]), bool(changed))
    log.info("forgot: %s; clusters %s; skills %s; files %s",
             {t: n for t, n in tables.items() if n["deleted"] or n["updated"]}, report["clusters"],
             report["skills"], report["files"])
    return report


def not_reached(settings, purged: dict[str, Any] | None, vacuumed: bool, changed: bool = True) -> list[str]:
    """What forget leaves alone that may still hold the forgotten data, in words for people:
    copies it has no way to reach, and what a purge could not do (its ``problems``)."""
    out = []
    embedded = settings.uses_embedded_database
    server = "the embedded server's data directory (pgdata/)" if embedded else "the database server's files"
    if purged is None and vacuumed:
        out.append(f"{server}: WAL holds the deleted rows until checkpoints recycle it, and pg_statistic the old "
                   "planner statistics until it is vacuumed (forget with purge)")
    elif purged is None and changed:
        out.append(f"{server}: the deleted rows stay in table, index and TOAST files, in the planner statistics "
                   "and in WAL until VACUUM, a checkpoint and WAL recycling (forget with purge)")
    elif purged is not None:
        out += purged["problems"]
        facts = purged.get("server") or {}
        if facts.get("archive_mode") not in (None, "off"):
            out.append(f"WAL archives (archive_mode = {facts['archive_mode']}): segments archived before the purge "
                       "hold the deleted rows")
        if facts.get("replicas") or facts.get("replication_slots"):
            out.append(f"replicas ({facts.get('replicas', 0)} streaming, {facts.get('replication_slots', 0)} "
                       "replication slots): standbys replay the VACUUM but keep WAL and files of their own; a logical "
                       "subscriber keeps its copy of the rows")
    if not embedded:
        out.append(("the external server's disks: the purge ran its SQL there, but " if purged is not None else
                    "the external server's disks: ") + "its data directory, WAL archives and replicas (if any) are "
                   "not on this machine, and nothing here checked them")
    out += [
        "backups and copies made before the forget (pg_dump files, base backups, copies of ULTRON_HOME, filesystem "
        "or VM snapshots)",
        "Dagster's run history (run logs and asset metadata, such as session and SKILL.md previews, in Dagster's "
        "tables and under DAGSTER_HOME): forget removes only the forgotten sessions' partitions",
        "the database server's log (pgdata/log on the embedded server), where an error message may quote a value",
        "disk blocks of deleted and rewritten files: freed, not overwritten, until the filesystem reuses them "
        "(full-disk encryption covers them)",
    ]
    return out


def _resynthesize(skills: SkillService, plan: _Skills) -> int:
    """Rebuild the withdrawn skills from what their clusters keep; returns how many were
    published. Everything forgotten is gone by now: a failure here only means a skill is
    not rebuilt yet (its cluster is left ready, so the next skill evolution tries again)."""
    if not plan.resynthesize:
        return 0
    try:
        evolution = skills.evolve_clusters(plan.resynthesize, burned_versions=plan.burned)
    except Exception:  # noqa: BLE001 - the forgetting is done; the rebuild waits for the next evolution
        log.exception("forget: re-synthesising %d skill(s) failed; the next skill evolution retries",
                      len(plan.resynthesize))
        return 0
    for entry in evolution.failed + evolution.not_better + evolution.skipped:
        log.info("forget: cluster %s keeps no skill: %s", str(entry.get("cluster_id", ""))[:8],
                 entry.get("reason", ""))
    return len(evolution.published)


def anything_forgotten(report: dict[str, Any]) -> bool:
    """Whether a forget report says something was deleted or changed."""
    return bool(any(report.get(k) for k in LEGACY_KEYS)
                or any(n["deleted"] or n["updated"] for n in report.get("tables", {}).values())
                or any(report.get("files", {}).values()) or report.get("partitions"))


# -- labels built from forgotten text ------------------------------------------------------


def _gone_terms(conn, mem: ForgetResult) -> set[str]:
    """Terms of the forgotten text that labels or slugs use and that the store no longer
    holds anywhere: a topic or slug made of one was built from forgotten data."""
    forgotten: set[str] = set()
    for text in mem.forgotten_text:
        if text:
            forgotten.update(topics.terms(text))
    if not forgotten:
        return set()
    candidates = {t for row in store.cluster_topics(conn) for t in topics.terms(row["topic"]) if t in forgotten}
    forms = {t: slugify(t, fallback="") for t in forgotten}
    for slug in store.all_slugs(conn):
        padded = f"-{slug}-"
        candidates |= {t for t, form in forms.items() if form and f"-{form}-" in padded}
    return candidates - store.surviving_terms(conn, sorted(candidates))


def _tainted(text: str, gone_terms: set[str]) -> bool:
    return bool(gone_terms) and not gone_terms.isdisjoint(topics.terms(text or ""))


def _tainted_slug(slug: str, gone_terms: set[str]) -> bool:
    padded = f"-{slug}-"
    return any((form := slugify(t, fallback="")) and f"-{form}-" in padded for t in gone_terms)


# -- clusters ------------------------------------------------------------------------------


def _forget_in_clusters(conn, mem: ForgetResult, gone_terms: set[str]) -> _Clusters:
    out = _Clusters()
    tainted = {r["id"] for r in store.cluster_topics(conn) if _tainted(r["topic"], gone_terms)}
    rows = cluster_store.cluster_rows(conn, sorted(mem.clusters | tainted), lock=True)
    active = [cid for cid, r in rows.items() if r["status"] == "active"]
    history = [cid for cid, r in rows.items() if r["status"] != "active" and cid in tainted]
    members = store.active_members(conn, active)
    means = vector_store.member_means(conn, [cid for cid in active if cid in members])
    keep = [cid for cid in active if cid in members and float(np.linalg.norm(means.get(cid, 0.0))) > 0]
    empty = [cid for cid in active if cid not in keep]
    cluster_store.dissolve(conn, empty)
    out.dissolved.update(empty)
    out.topics_cleared = store.blank_topics(conn, empty + history)
    if keep:
        # The rules labeller, measured against the whole active store as a batch run does.
        texts = cluster_store.member_texts(conn)
        doc_terms = {mid: topics.terms(topics.member_text(t["content"], t["context"], t["resolution"],
                                                          t["tags"] or [])) for mid, t in texts.items()}
        fallback = {cid: topics.short_text(texts.get(members[cid][0], {}).get("summary_l0") or "", 60)
                    for cid in keep}
        labels = topics.rules_labels({cid: members[cid] for cid in keep}, doc_terms, fallback)
        cluster_store.update_clusters(conn, [
            {"id": cid, "topic": labels[cid], "centroid": means[cid] / np.linalg.norm(means[cid])} for cid in keep])
        out.updated.update(keep)
    cluster_store.refresh_sizes(conn)
    stripped = store.strip_attempt_members(conn, mem.deleted_memories,
                                           sorted(set(mem.deleted_memories) | set(mem.rebuilt_memories)))
    out.changed = set(empty) | set(keep) | set(history) | stripped
    return out


# -- skills --------------------------------------------------------------------------------


def _forget_in_skills(conn, mem: ForgetResult, gone_terms: set[str], threshold: int, root: Path) -> _Skills:
    out = _Skills()
    affected = sorted(set(mem.deleted_memories) | set(mem.rebuilt_memories))
    out.tainted_slugs = {s for s in store.all_slugs(conn) if _tainted_slug(s, gone_terms)}
    rows = store.skill_versions_reached(conn, affected, sorted(out.tainted_slugs))
    # the clusters whose current skill goes, found before any slug is dropped
    owners = []
    for r in rows:
        if r["status"] == "current":
            owners.append((r["slug"], store.cluster_of_slug(conn, r["slug"])))
    out.versions_deleted = store.delete_skill_rows(conn, [r["id"] for r in rows])
    out.clusters_changed |= store.drop_slugs(conn, sorted(out.tainted_slugs))
    for r in rows:
        out.dirs.append(_skill_dir(root, r))
        if r["slug"] not in out.tainted_slugs:
            out.burned.setdefault(r["slug"], []).append(r["version"])
    for slug, cluster in owners:
        if cluster is None:  # its cluster was dissolved or merged away: nothing to rebuild it from
            out.retired += 1
            continue
        members = store.active_members(conn, [cluster["id"]]).get(cluster["id"], [])
        if len(members) >= threshold:
            out.resynthesize.append(cluster["id"])
            out.clusters_changed.add(cluster["id"])
            continue
        keep_slug = slug if slug not in out.tainted_slugs and store.versions_left(conn, slug) else None
        store.retire_cluster_skill(conn, cluster["id"], members,
                                   f"forget: {len(members)} active members left, fewer than the {threshold} "
                                   "a skill needs", keep_slug)
        out.clusters_changed.add(cluster["id"])
        out.retired += 1
    store.clear_attempts(conn, out.resynthesize)
    return out


def _skill_dir(root: Path, row: dict[str, Any]) -> Path:
    """Where a version's files are: its recorded path when that lies in the skills
    directory, else ``{slug}-{version}`` there."""
    default = root / f"{row['slug']}-{row['version']}"
    if row.get("path") and _inside(Path(row["path"]), root):
        return Path(row["path"])
    return default


def _inside(path: Path, root: Path) -> bool:
    path, root = Path(os.path.abspath(path)), Path(os.path.abspath(root))
    return root in path.parents


def _remove_skill_dirs(root: Path, dirs: list[Path], affected: set[str], tainted_slugs: set[str]) -> dict[str, int]:
    """Remove the deleted versions' directories, and any other skill directory (a leftover
    without a row) whose _meta.json cites an affected memory or whose name is a forgotten
    slug. Runs before any skill is re-synthesised, whose new files cite rebuilt memories."""
    out = {"skill_md": 0, "meta_json": 0}
    doomed = {Path(os.path.abspath(d)) for d in dirs}
    if root.is_dir():
        for d in root.iterdir():
            if d.name.startswith(".") or d.is_symlink() or not d.is_dir():
                continue
            if any(d.name.startswith(f"{s}-") and d.name[len(s) + 1:][:1].isdigit() for s in tainted_slugs):
                doomed.add(Path(os.path.abspath(d)))
                continue
            try:
                cited = set(json.loads((d / "_meta.json").read_text(encoding="utf-8")).get("memory_ids") or [])
            except (OSError, ValueError, AttributeError, TypeError):
                continue
            if cited & affected:
                doomed.add(Path(os.path.abspath(d)))
    for d in sorted(doomed):
        if not d.is_dir() or not _inside(d, root):
            continue
        out["skill_md"] += (d / "SKILL.md").is_file()
        out["meta_json"] += (d / "_meta.json").is_file()
        shutil.rmtree(d)
    if doomed:
        log.info("forget: removed %d skill director%s", len(doomed), "y" if len(doomed) == 1 else "ies")
    return out


# -- session files -------------------------------------------------------------------------


def _remove_session_files(settings, mem: ForgetResult) -> tuple[int, list[str]]:
    """Forgotten session files under ULTRON_HOME (API uploads, an inbox inside it) are
    deleted; the others are the user's, left alone and listed."""
    removed, kept = 0, []
    home, pgdata = Path(os.path.abspath(settings.home)), Path(os.path.abspath(settings.pgdata))
    for raw in sorted({s["session_file"] for s in mem.sessions} | set(mem.archived_paths)):
        path = Path(os.path.abspath(raw))
        if home in path.parents and pgdata not in path.parents:
            if path.is_file() or path.is_symlink():
                path.unlink()
                removed += 1
                _prune_empty_parents(path.parent, home)
        elif path.exists():
            kept.append(raw)
    if removed:
        log.info("forget: deleted %d session file%s under ULTRON_HOME", removed, "" if removed == 1 else "s")
    return removed, kept


def _prune_empty_parents(directory: Path, home: Path) -> None:
    """Directories left empty by a deleted session file go too (``uploads/{agent_id}/`` is
    named after the agent), up to the top-level ones (``inbox/``, ``uploads/``)."""
    while directory.parent != home and home in directory.parents:
        try:
            directory.rmdir()  # only when empty
        except OSError:
            return
        directory = directory.parent
