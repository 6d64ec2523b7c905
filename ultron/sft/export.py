"""SFT export: select, clean, redact, format, split, write, with a manifest of everything.

``build_examples`` is the in-memory path (the SDK's ``export_sft``); ``export_dataset``
streams the same examples into a new directory ``{sft_dir}/{export_id}/``:

    train.openai.jsonl  validation.openai.jsonl  train.sharegpt.jsonl  validation.sharegpt.jsonl
    manifest.json

The directory is written under a temporary name (fsynced, then renamed when complete),
so a reader never sees half an export; ``{sft_dir}/latest`` (a symlink) and
``{sft_dir}/latest.json`` then point at the newest one. The temporary directory of an
export killed mid-write is removed by the next export (:mod:`ultron.sft.staging`).
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from ultron.db import sft as store
from ultron.db.database import Database
from ultron.settings import Settings
from ultron.sft import staging
from ultron.sft.conversation import clean_conversation
from ultron.sft.formats import infer_tools, openai_record, redact_messages, sharegpt_record
from ultron.sft.split import SPLITS, split_of
from ultron.vocabulary import TASK_TYPES

log = logging.getLogger("ultron.sft")
Progress = Callable[[int, int], None]
FILE_KEYS = tuple(f"{split}.{fmt}" for split in SPLITS for fmt in ("openai", "sharegpt"))
BATCH = 200  # segments whose messages are read in one query


class SFTExportError(ValueError):
    """Bad export parameters (a message meant for the user)."""


@dataclass
class SFTExample:
    segment_id: str
    fingerprint: str
    agent_id: str
    session_file: str
    start_line: int
    end_line: int
    score: float
    task_type: str | None
    topic: str
    split: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]

    def sdk_dict(self) -> dict[str, Any]:
        """The seed's ``{"messages", "topic"}`` plus what a caller needs to trace it back."""
        return {"messages": openai_record(self.messages, [])["messages"], "topic": self.topic, "tools": self.tools,
                "segment_id": self.segment_id, "task_type": self.task_type, "quality_score": self.score,
                "split": self.split}


@dataclass
class SFTExport:
    export_id: str
    directory: Path
    files: dict[str, Path]
    manifest: dict[str, Any]

    @property
    def manifest_path(self) -> Path:
        return self.directory / "manifest.json"


@dataclass
class _Run:
    """What one pass over the candidates saw, for the manifest."""

    selected: int = 0
    deduplicated: int = 0
    dropped: Counter = field(default_factory=Counter)
    repairs: Counter = field(default_factory=Counter)


def check_filters(min_score: float, task_type: str | None, limit: int | None) -> None:
    if not isinstance(min_score, (int, float)) or not 0 <= min_score <= 1:
        raise SFTExportError(f"min_quality_score must be between 0 and 1, got {min_score!r}")
    if task_type is not None and task_type not in TASK_TYPES:
        raise SFTExportError(f"unknown task_type {task_type!r}: use one of {', '.join(TASK_TYPES)}")
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        raise SFTExportError(f"limit must be a positive integer, got {limit!r}")


def _select(db: Database, *, min_score: float, task_type: str | None,
            limit: int | None) -> list[store.SFTCandidate]:
    """The candidates an export would contain (one SQL query, no messages read). The score
    floor (the service's is_sft_eligible rule) is applied in SQL by select_candidates."""
    check_filters(min_score, task_type, limit)
    with db.engine.connect() as conn:
        return store.select_candidates(conn, min_score=min_score, task_type=task_type, limit=limit)


def iter_examples(db: Database, settings: Settings, *, min_score: float, task_type: str | None = None,
                  limit: int | None = None, progress: Progress | None = None, run: _Run | None = None,
                  redact: Callable[[str], str] | None = None,
                  candidates: list[store.SFTCandidate] | None = None) -> Iterator[SFTExample]:
    """Examples best score first. ``candidates``: an already made selection for these filters
    (export_dataset passes the one its digest hashed); selected here when None."""
    if candidates is None:
        candidates = _select(db, min_score=min_score, task_type=task_type, limit=limit)
    if redact is None:
        from ultron.redaction import get_redactor

        redact = _memo(get_redactor().redact)
    run = run if run is not None else _Run()
    run.selected = len(candidates)
    run.deduplicated = sum(c.copies - 1 for c in candidates)
    total, done = len(candidates), 0
    if progress:
        progress(0, total)
    for start in range(0, total, BATCH):
        batch = candidates[start:start + BATCH]
        with db.engine.connect() as conn:
            messages = store.messages_for(conn, batch)
        for cand in batch:
            cleaned = clean_conversation(messages.get(cand.id, []))
            run.repairs.update(cleaned.repairs)
            done += 1
            if cleaned.messages is None:
                run.dropped[cleaned.skipped or "unusable"] += 1
            else:
                redacted = redact_messages(cleaned.messages, redact)
                yield SFTExample(
                    segment_id=cand.id, fingerprint=cand.fingerprint, agent_id=cand.agent_id,
                    session_file=cand.session_file, start_line=cand.start_line, end_line=cand.end_line,
                    score=round(float(cand.score), 4), task_type=cand.task_type, topic=redact(cand.topic or ""),
                    split=split_of(cand.fingerprint, settings.sft_validation_fraction), messages=redacted,
                    tools=infer_tools(redacted))
            if progress:
                progress(done, total)


def _memo(fn: Callable[[str], str], max_chars: int = 8_000_000) -> Callable[[str], str]:
    """Redact each distinct text once per export. Real sessions repeat a lot: every session
    of an agent carries the same (long) system prompt, and tool names and short results
    recur; the cache is bounded by the characters it holds."""
    cache: dict[str, str] = {}
    held = 0

    def cached(text: str) -> str:
        nonlocal held
        hit = cache.get(text)
        if hit is None:
            hit = fn(text)
            if held + len(text) <= max_chars:
                cache[text] = hit
                held += len(text)
        return hit

    return cached


def build_examples(db: Database, settings: Settings, **kwargs: Any) -> list[SFTExample]:
    return list(iter_examples(db, settings, **kwargs))


def selection_digest(candidates: list[store.SFTCandidate], settings: Settings, *, min_score: float,
                     task_type: str | None, limit: int | None) -> str:
    """What an export contains, in one hash: the filters, the split fraction and each
    selected segment's (id, fingerprint, score)."""
    import hashlib

    h = hashlib.sha256(json.dumps([min_score, task_type, limit, settings.sft_validation_fraction]).encode())
    for c in candidates:
        h.update(f"\n{c.id}\x00{c.fingerprint}\x00{float(c.score):.6f}".encode())
    return h.hexdigest()[:32]


def export_dataset(db: Database, settings: Settings, *, min_score: float, task_type: str | None = None,
                   limit: int | None = None, progress: Progress | None = None, now: datetime | None = None,
                   reuse_unchanged: bool = False) -> SFTExport:
    """``reuse_unchanged``: when the latest export selected exactly what this one would
    (same filters, same segments and scores), return it instead of writing a copy; the
    asset re-runs whenever upstream scores change and should not pile up identical exports."""
    root = settings.sft_dir
    root.mkdir(parents=True, exist_ok=True)
    staging.remove_abandoned(root)  # left by exports killed mid-write
    candidates = _select(db, min_score=min_score, task_type=task_type, limit=limit)
    digest = selection_digest(candidates, settings, min_score=min_score, task_type=task_type, limit=limit)
    if reuse_unchanged:
        latest = latest_export(settings)
        if latest is not None and latest.manifest.get("selection_digest") == digest:
            return latest
    created = now or datetime.now(timezone.utc)
    export_id = f"{created.strftime('%Y%m%dT%H%M%S%fZ')}-{secrets.token_hex(3)}"
    with staging.staging_dir(root, export_id) as tmp:
        manifest = _write(db, settings, tmp, root / export_id, export_id=export_id, created=created,
                          digest=digest, candidates=candidates, min_score=min_score, task_type=task_type,
                          limit=limit, progress=progress)
    _point_latest(root, export_id)
    final = root / export_id
    return SFTExport(export_id, final, {key: final / f"{key}.jsonl" for key in FILE_KEYS}, manifest)


def _write(db: Database, settings: Settings, tmp: Path, final: Path, *, export_id: str, created: datetime,
           digest: str, candidates: list[store.SFTCandidate], min_score: float, task_type: str | None,
           limit: int | None, progress: Progress | None) -> dict[str, Any]:
    """Write the export into ``tmp`` and rename it to ``final``: every file and the directory
    are fsynced first, so after a crash the export is either whole or absent."""
    run = _Run()
    try:
        handles = {key: open(tmp / f"{key}.jsonl", "w", encoding="utf-8") for key in FILE_KEYS}
        lines = Counter()
        sources: list[dict[str, Any]] = []
        scores: list[float] = []
        task_types: Counter = Counter()
        with_tools = 0
        try:
            for ex in iter_examples(db, settings, min_score=min_score, task_type=task_type, limit=limit,
                                    progress=progress, run=run, candidates=candidates):
                share, dropped_texts = sharegpt_record(ex.messages, ex.tools)
                run.repairs["sharegpt_call_texts_dropped"] += dropped_texts
                handles[f"{ex.split}.openai"].write(_line(openai_record(ex.messages, ex.tools)))
                handles[f"{ex.split}.sharegpt"].write(_line(share))
                lines[ex.split] += 1
                scores.append(ex.score)
                task_types[ex.task_type or "unknown"] += 1
                with_tools += bool(ex.tools)
                sources.append({
                    "segment_id": ex.segment_id, "fingerprint": ex.fingerprint, "agent_id": ex.agent_id,
                    "session_file": ex.session_file, "start_line": ex.start_line, "end_line": ex.end_line,
                    "score": ex.score, "task_type": ex.task_type, "split": ex.split, "line": lines[ex.split],
                    "messages": len(ex.messages)})
        finally:
            for fh in handles.values():
                fh.close()
        run.repairs = Counter({k: v for k, v in run.repairs.items() if v})
        manifest = {
            "export_id": export_id,
            "created_at": created.isoformat(),
            "filters": {"task_type": task_type, "min_quality_score": min_score, "limit": limit},
            "validation_fraction": settings.sft_validation_fraction,
            "selection_digest": digest,
            "files": {key: f"{key}.jsonl" for key in FILE_KEYS},
            "counts": {
                "selected": run.selected,
                "exported": len(sources),
                "train": lines["train"],
                "validation": lines["validation"],
                "deduplicated": run.deduplicated,
                "dropped": sum(run.dropped.values()),
                "with_tool_calls": with_tools,
            },
            "dropped": dict(sorted(run.dropped.items())),
            "repairs": dict(sorted(run.repairs.items())),
            "score_distribution": score_distribution(scores, min_score),
            "task_types": dict(sorted(task_types.items())),
            "sources": sources,
        }
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n",
                                           encoding="utf-8")
        for path in tmp.iterdir():
            _fsync(path)
        staging.fsync_dir(tmp)
        os.rename(tmp, final)
        staging.fsync_dir(final.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False) + "\n"


def _fsync(path: Path) -> None:
    with open(path, "rb") as fh:
        os.fsync(fh.fileno())


def score_distribution(scores: list[float], floor: float, width: float = 0.05) -> dict[str, Any]:
    """Buckets of ``width`` from the floor's bucket up to 1.0 (the last one closed)."""
    if not scores:
        return {"min": None, "mean": None, "max": None, "histogram": {}}
    steps = round(1 / width)
    first = min(int(floor * steps + 1e-9), steps - 1)
    histogram = {f"{k / steps:.2f}-{(k + 1) / steps:.2f}": 0 for k in range(first, steps)}
    for s in scores:
        k = max(first, min(int(s * steps + 1e-9), steps - 1))
        histogram[f"{k / steps:.2f}-{(k + 1) / steps:.2f}"] += 1
    return {"min": min(scores), "mean": round(sum(scores) / len(scores), 4), "max": max(scores),
            "histogram": histogram}


# -- latest ------------------------------------------------------------------------------------------


def _point_latest(root: Path, export_id: str) -> None:
    """Only forward: an export finishing after a newer one does not take ``latest`` back."""
    current = latest_export_id(root)
    if current is not None and current > export_id:
        return
    tmp_json = root / f".latest-{export_id}.json"
    tmp_json.write_text(json.dumps({"export_id": export_id, "path": str(root / export_id)}) + "\n",
                        encoding="utf-8")
    os.replace(tmp_json, root / "latest.json")
    tmp_link = root / f".latest-{export_id}"
    try:
        os.symlink(export_id, tmp_link)
        os.replace(tmp_link, root / "latest")
    except OSError:  # a filesystem without symlinks: latest.json is enough
        tmp_link.unlink(missing_ok=True)


def latest_export_id(root: Path) -> str | None:
    try:
        data = json.loads((root / "latest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    value = data.get("export_id") if isinstance(data, dict) else None
    return value if isinstance(value, str) and (root / value).is_dir() else None


def latest_export(settings: Settings) -> SFTExport | None:
    """The newest complete export, or None."""
    export_id = latest_export_id(settings.sft_dir)
    if export_id is None:
        return None
    directory = settings.sft_dir / export_id
    try:
        manifest = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return SFTExport(export_id, directory, {key: directory / f"{key}.jsonl" for key in FILE_KEYS}, manifest)


# -- forgetting ----------------------------------------------------------------------------------------


def remove_from_exports(root: Path, *, segment_ids: Iterable[str] = (), session_file: str | None = None,
                        agent_id: str | None = None) -> dict[str, int]:
    """Take forgotten examples out of every finished export under ``root``.

    An example is forgotten when its segment is one of ``segment_ids`` or it came from the
    forgotten session file / agent (``session_file`` and ``agent_id`` together mean that
    agent's file; either alone, every match). An export holding some is rewritten without
    them (files, then the manifest, each replaced atomically; counts, distributions and
    line numbers follow; its selection digest is cleared so it is never mistaken for a
    fresh selection); one left with nothing is deleted, and ``latest`` moves to the newest
    export that remains (or goes). Exports being written right now (``.tmp-*``) are skipped.
    Returns {"rewritten", "deleted", "examples"}."""
    segments = set(segment_ids)

    def forgotten(source: dict[str, Any]) -> bool:
        if source.get("segment_id") in segments:
            return True
        if session_file and agent_id:
            return source.get("session_file") == session_file and source.get("agent_id") == agent_id
        if session_file:
            return source.get("session_file") == session_file
        return bool(agent_id) and source.get("agent_id") == agent_id

    out = {"rewritten": 0, "deleted": 0, "examples": 0}
    if not (segments or session_file or agent_id) or not root.is_dir():
        return out
    for directory in sorted(root.iterdir()):
        if directory.name.startswith(".") or directory.is_symlink() or not directory.is_dir():
            continue
        try:
            manifest = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
            sources = list(manifest.get("sources") or [])
        except (OSError, ValueError, AttributeError):
            log.warning("sft export %s: no readable manifest; cannot tell whether it holds forgotten data",
                        directory.name)
            continue
        gone = [s for s in sources if isinstance(s, dict) and forgotten(s)]
        if not gone:
            continue
        out["examples"] += len(gone)
        kept = [s for s in sources if not (isinstance(s, dict) and forgotten(s))]
        if not kept:
            shutil.rmtree(directory)
            out["deleted"] += 1
            log.info("sft export %s deleted: all %d of its examples were forgotten", directory.name, len(gone))
            continue
        _rewrite_without(directory, manifest, kept, gone)
        out["rewritten"] += 1
        log.info("sft export %s rewritten without %d forgotten example(s); %d remain", directory.name, len(gone),
                 len(kept))
    if out["deleted"]:
        _repoint_latest(root)
    return out


def _rewrite_without(directory: Path, manifest: dict[str, Any], kept: list[dict[str, Any]],
                     gone: list[dict[str, Any]]) -> None:
    drop = {split: {s.get("line") for s in gone if s.get("split") == split} for split in SPLITS}
    with_tools = 0
    for split in SPLITS:
        for fmt in ("openai", "sharegpt"):
            path = directory / f"{split}.{fmt}.jsonl"
            if not path.exists():
                continue
            lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
            remaining = [line for n, line in enumerate(lines, 1) if n not in drop[split]]
            if fmt == "openai":
                with_tools += sum(1 for line in remaining if json.loads(line).get("tools"))
            tmp = path.with_name(f".{path.name}.forget-{secrets.token_hex(3)}")
            tmp.write_text("".join(remaining), encoding="utf-8")
            _fsync(tmp)
            os.replace(tmp, path)
    numbered: Counter = Counter()
    for s in sorted(kept, key=lambda s: (str(s.get("split")), s.get("line") or 0)):
        numbered[s.get("split")] += 1
        s["line"] = numbered[s.get("split")]
    counts = dict(manifest.get("counts") or {})
    counts.update(selected=max(0, int(counts.get("selected", len(kept) + len(gone))) - len(gone)),
                  exported=len(kept), train=numbered["train"], validation=numbered["validation"],
                  with_tool_calls=with_tools)
    floor = (manifest.get("filters") or {}).get("min_quality_score") or 0.0
    previous = manifest.get("forgotten") or {}
    manifest.update(
        counts=counts, sources=kept, selection_digest=None,
        score_distribution=score_distribution([float(s["score"]) for s in kept if s.get("score") is not None],
                                              float(floor)),
        task_types=dict(sorted(Counter(s.get("task_type") or "unknown" for s in kept).items())),
        forgotten={"examples_removed": int(previous.get("examples_removed", 0)) + len(gone),
                   "rewritten_at": datetime.now(timezone.utc).isoformat()})
    tmp = directory / f".manifest.json.forget-{secrets.token_hex(3)}"
    tmp.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    _fsync(tmp)
    os.replace(tmp, directory / "manifest.json")


def _repoint_latest(root: Path) -> None:
    """After exports were deleted: ``latest`` names the newest export left, or is removed."""
    current = latest_export_id(root)
    if current is not None:
        return
    left = sorted(p.name for p in root.iterdir()
                  if not p.name.startswith(".") and not p.is_symlink() and (p / "manifest.json").is_file())
    if not left:
        (root / "latest.json").unlink(missing_ok=True)
        if (root / "latest").is_symlink():
            (root / "latest").unlink()
        return
    (root / "latest.json").unlink(missing_ok=True)
    _point_latest(root, left[-1])
