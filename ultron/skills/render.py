"""SKILL.md and _meta.json: rendering, parsing back, and the atomic directory write.

SKILL.md follows the agent-skills layout: YAML front matter (``name`` = the slug,
``description``, ``metadata``) then a markdown body with fixed sections. The gate
parses the rendered text back with :func:`parse_skill_md`, so what is checked is
exactly what an agent will read.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import yaml

from ultron.skills.draft import SkillDraft

SECTIONS = ("When to use", "Steps", "Pitfalls", "Decision branches", "Evidence")
NONE_RECORDED = "_None recorded._"
_FRONT = re.compile(r"\A---\n(.*?)\n---\n", re.DOTALL)
_HEADING = re.compile(r"^## (.+?)\s*$", re.MULTILINE)
_STEP = re.compile(r"^\d+\.\s+(.*)$")
_EVIDENCE = re.compile(r"\s*\(evidence: [^)]*\)\s*$")


@dataclass(frozen=True)
class SkillHeader:
    """Everything about a version that is not the draft's content."""

    slug: str
    version: str
    cluster_id: str
    topic: str
    parent_version: str | None = None
    memory_ids: tuple[str, ...] = ()
    superseded_slugs: tuple[str, ...] = ()
    created_at: str = ""
    score: float | None = None
    scores: dict[str, float] = field(default_factory=dict)


def _cite(ids: Sequence[str]) -> str:
    return f" (evidence: {', '.join(f'`{i}`' for i in ids)})" if ids else ""


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def render_skill_md(draft: SkillDraft, header: SkillHeader, members: Sequence[dict[str, Any]]) -> str:
    """The SKILL.md text. ``members`` ({id, memory_type, summary}) fill the Evidence section."""
    metadata: dict[str, Any] = {
        "version": header.version,
        "parent_version": header.parent_version,
        "cluster_id": header.cluster_id,
        "topic": header.topic,
        "memory_count": len(header.memory_ids),
        "generator": draft.generator,
    }
    if header.score is not None:
        metadata["score"] = round(header.score, 4)
    if header.superseded_slugs:
        metadata["superseded_slugs"] = list(header.superseded_slugs)
    if header.created_at:
        metadata["created_at"] = header.created_at
    front = yaml.safe_dump({"name": header.slug, "description": _one_line(draft.description), "metadata": metadata},
                           sort_keys=False, allow_unicode=True, width=1 << 20)
    lines = ["---", front.rstrip("\n"), "---", "", f"# {_one_line(draft.name)}", ""]
    lines += ["## When to use", ""]
    lines += [f"- {_one_line(w)}" for w in draft.when_to_use] or [NONE_RECORDED]
    lines += ["", "## Steps", ""]
    lines += [f"{i}. {_one_line(s.text)}{_cite(s.evidence)}" for i, s in enumerate(draft.steps, 1)] or [NONE_RECORDED]
    lines += ["", "## Pitfalls", ""]
    lines += [f"- {_one_line(p.text)}{_cite(p.evidence)}" for p in draft.pitfalls] or [NONE_RECORDED]
    lines += ["", "## Decision branches", ""]
    lines += [f"- If {_one_line(b.condition)} → {_one_line(b.action)}{_cite(b.evidence)}"
              for b in draft.branches] or [NONE_RECORDED]
    lines += ["", "## Evidence", "", f"Distilled from {len(header.memory_ids)} memories:", ""]
    summaries = {m["id"]: m for m in members}
    for memory_id in header.memory_ids:
        m = summaries.get(memory_id, {})
        gist = _one_line(m.get("summary") or "")
        lines.append(f"- `{memory_id}` ({m.get('memory_type', 'memory')})" + (f": {gist}" if gist else ""))
    return "\n".join(lines) + "\n"


def render_meta(draft: SkillDraft, header: SkillHeader, gate: dict[str, Any]) -> dict[str, Any]:
    return {
        "slug": header.slug,
        "name": draft.name,
        "version": header.version,
        "parent_version": header.parent_version,
        "cluster_id": header.cluster_id,
        "topic": header.topic,
        "generator": draft.generator,
        "scores": {"score": header.score, **header.scores},
        "gate": gate,
        "memory_ids": list(header.memory_ids),
        "memory_count": len(header.memory_ids),
        "superseded_slugs": list(header.superseded_slugs),
        "created_at": header.created_at,
    }


@dataclass
class ParsedSkill:
    front: dict[str, Any] | None
    sections: dict[str, str]
    steps: list[str]
    problems: list[str]


def parse_skill_md(text: str) -> ParsedSkill:
    """Front matter, sections and numbered steps of a SKILL.md; problems say what would not parse."""
    problems: list[str] = []
    front: dict[str, Any] | None = None
    m = _FRONT.match(text)
    body = text
    if not m:
        problems.append("no YAML front matter (--- ... ---) at the top")
    else:
        body = text[m.end():]
        try:
            loaded = yaml.safe_load(m.group(1))
        except yaml.YAMLError as exc:
            problems.append(f"front matter is not valid YAML: {str(exc).splitlines()[0]}")
        else:
            if isinstance(loaded, dict):
                front = loaded
            else:
                problems.append("front matter is not a mapping")
    sections: dict[str, str] = {}
    heads = list(_HEADING.finditer(body))
    for i, h in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(body)
        sections[h.group(1)] = body[h.end():end].strip()
    steps = [_EVIDENCE.sub("", sm.group(1)) for line in sections.get("Steps", "").splitlines()
             if (sm := _STEP.match(line.strip()))]
    return ParsedSkill(front, sections, steps, problems)


def when_to_use(skill_md: str) -> list[str]:
    """The "When to use" situations of a SKILL.md, as :func:`render_skill_md` wrote them
    (no situation when the section says NONE_RECORDED)."""
    section = parse_skill_md(skill_md).sections.get("When to use", "")
    return [line.strip()[2:].strip() for line in section.splitlines() if line.strip().startswith("- ")]


def write_skill_dir(root: Path, dirname: str, files: dict[str, str]) -> Path:
    """Write ``files`` into ``root/dirname`` all at once: a temporary sibling directory is
    filled and fsynced, then renamed into place, so readers never see half a skill.

    A directory already there without a database row is the leftover of a crashed
    publish (the caller checks the row) and is replaced."""
    root.mkdir(parents=True, exist_ok=True)
    final = root / dirname
    tmp = root / f".{dirname}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        for name, text in files.items():
            with open(tmp / name, "w", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
        if final.exists():
            shutil.rmtree(final)
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def meta_json(meta: dict[str, Any]) -> str:
    return json.dumps(meta, indent=2, ensure_ascii=False, default=str) + "\n"
