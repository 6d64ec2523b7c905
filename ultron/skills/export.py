"""The exported skills tree: what agents load, in the Agent Skills layout.

``ULTRON_HOME/skills`` keeps every version (``{slug}-{version}/``, history included); an
agent wants one directory per skill holding its current version only. The export writes
``DIR/<name>/SKILL.md`` (plus the skill's supporting files, if it has any) for every
current, non-retired skill, where ``<name>`` is the slug: lowercase letters, digits and
single hyphens, at most 64 characters, and the front matter's ``name``.

The front matter is rewritten for the spec (agentskills.io): ``name``, ``description``
(what the skill does, then when to use it; at most 1024 characters) and ``metadata``, a
string-to-string map (version, ultron id, cluster, lifecycle, reliability). The body is the
stored SKILL.md's, its Evidence list cut so the body stays under ``MAX_BODY_LINES``.

Sharing the directory is safe: the exporter records what it wrote in ``DIR/.ultron-export.json``
and only ever replaces or removes those directories, so a user's own skills beside them
(``~/.claude/skills``) are never touched, and a name already taken by one is skipped.
Each skill directory is written to a temporary sibling and renamed into place, so an agent
never reads half a SKILL.md; one export at a time per directory (a lock on the directory), and the
database is read inside the lock, so the last export to run writes the newest state.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import shutil
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import yaml

from ultron.db import skills as store
from ultron.skills.versioning import SLUG_MAX, slugify

if TYPE_CHECKING:
    from ultron.db.database import Database

log = logging.getLogger("ultron.skills.export")

#: The one file Ultron keeps in a skills directory it exports to: which directories are its own.
MANIFEST = ".ultron-export.json"
#: The lock file of earlier versions, removed on the next export.
LOCK = ".ultron-export.lock"
_TMP = ".ultron-tmp-"
_OLD = ".ultron-old-"
NAME_MAX = SLUG_MAX
DESCRIPTION_MAX = 1024
COMPATIBILITY_MAX = 500
#: the spec recommends keeping SKILL.md's body under 500 lines; we stay well inside
MAX_BODY_LINES = 480
SPEC_BODY_LINES = 500
#: top-level front matter keys the Agent Skills spec defines
SPEC_KEYS = ("name", "description", "license", "compatibility", "metadata", "allowed-tools")
#: Ultron's own files in a stored skill directory; everything else there is a supporting file
INTERNAL_FILES = {"SKILL.md", "_meta.json"}
NAME_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_FRONT = re.compile(r"\A---\r?\n(.*?)\r?\n---\r?\n?", re.DOTALL)
_ID_KEY = "ultron-id"


@dataclass
class ExportResult:
    """What one export did; ``written`` and ``unchanged`` together are the exported skills."""

    dir: Path
    written: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"dir": str(self.dir), "written": list(self.written), "removed": list(self.removed),
                "unchanged": list(self.unchanged), "skipped": [dict(s) for s in self.skipped]}


# -- names, front matter, body ------------------------------------------------------------


def export_name(slug: str, fallback: str = "skill") -> str:
    """The directory and front matter ``name`` for a slug. Slugs already follow the rules;
    anything else is folded to lowercase-hyphen words and cut to ``NAME_MAX`` characters."""
    if NAME_RE.match(slug or "") and len(slug) <= NAME_MAX:
        return slug
    return slugify(slug, fallback, max_len=NAME_MAX)


def _one_line(text: Any) -> str:
    return " ".join(str(text or "").split())


def _clip(text: str, limit: int) -> str:
    """At most ``limit`` characters, cut at a word boundary with an ellipsis."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0].rstrip(" ,;:")
    return (cut or text[: limit - 1]) + "…"


def split_front(text: str) -> tuple[dict[str, Any] | None, str, list[str]]:
    """(front matter, body, problems) of a SKILL.md."""
    m = _FRONT.match(text)
    if not m:
        return None, text, ["SKILL.md does not start with YAML front matter between --- lines"]
    try:
        front = yaml.safe_load(m.group(1))
    except yaml.YAMLError as exc:
        return None, text[m.end():], [f"front matter is not valid YAML: {str(exc).splitlines()[0]}"]
    if not isinstance(front, dict):
        return None, text[m.end():], ["front matter is not a mapping"]
    return front, text[m.end():], []


def _situations(body: str) -> list[str]:
    m = re.search(r"^## When to use\s*$(.*?)(?=^## |\Z)", body, re.MULTILINE | re.DOTALL)
    return [line.strip()[2:].strip() for line in (m.group(1) if m else "").splitlines()
            if line.strip().startswith("- ")]


def describe(description: str, situations: list[str], name: str) -> str:
    """What the skill does, then when to use it: the line an agent decides on."""
    what = _one_line(description) or _one_line(name)
    when = "; ".join(s.rstrip(".") for s in (_one_line(x) for x in situations) if s)
    text = f"{what.rstrip()} Use when: {when}." if when else what
    return _clip(text, DESCRIPTION_MAX)


def _metadata(skill: dict[str, Any]) -> dict[str, str]:
    """The spec's metadata is a string map: every value a string."""
    meta = {"version": skill.get("version"), _ID_KEY: skill.get("id"), "ultron-slug": skill.get("slug"),
            "cluster-id": skill.get("cluster_id"), "lifecycle": skill.get("lifecycle"),
            "score": None if skill.get("score") is None else f"{float(skill['score']):.4f}",
            "reliability": None if skill.get("reliability") is None else f"{float(skill['reliability']):.4f}",
            "created-at": skill.get("created_at"), "generator": "ultron"}
    return {k: str(v) for k, v in meta.items() if v not in (None, "")}


def _trim_body(lines: list[str], name: str) -> list[str]:
    """At most ``MAX_BODY_LINES``: the Evidence list loses its tail first (the full list is one
    `ultron skills --show` away), then, if that is not enough, the body is cut."""
    limit = MAX_BODY_LINES - 2  # the feedback footer follows
    if len(lines) <= limit:
        return lines
    excess = len(lines) - limit
    try:
        start = lines.index("## Evidence")
    except ValueError:
        start = len(lines)
    items = [i for i in range(start, len(lines)) if lines[i].startswith("- `")]
    if len(items) > excess:
        drop = items[-(excess + 1):]
        note = f"- … and {len(drop)} more memories (`ultron skills --show {name} --json` lists them all)"
        dropped = set(drop)
        kept = [line for i, line in enumerate(lines) if i not in dropped]
        kept.insert(drop[0], note)
        return kept
    return lines[: limit - 1] + [f"_… cut to fit; the whole skill: `ultron skills --show {name}`_"]


def render_export(skill: dict[str, Any], name: str) -> str:
    """The exported SKILL.md of a stored skill (row with ``skill_md``)."""
    _, body, _ = split_front(str(skill.get("skill_md") or ""))
    lines = _trim_body(body.strip("\n").splitlines(), name)
    lines += ["", f"_From Ultron's skill hub. Say whether it helped: the `feedback` tool with "
                  f"skill=\"{name}\" (or `POST /skills/{name}/feedback`)._"]
    front = {"name": name, "description": describe(str(skill.get("description") or ""), _situations(body),
                                                    str(skill.get("name") or name)),
             "metadata": _metadata(skill)}
    dumped = yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=1 << 20)
    return "---\n" + dumped + "---\n\n" + "\n".join(lines).rstrip("\n") + "\n"


def supporting_files(skill: dict[str, Any]) -> dict[str, bytes]:
    """Files beside SKILL.md in the stored version directory (scripts/, references/, ...),
    by relative path; Ultron's own ``_meta.json`` and hidden files stay home."""
    root = Path(str(skill.get("path") or ""))
    if not skill.get("path") or not root.is_dir():
        return {}
    out: dict[str, bytes] = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if (p.is_file() and not p.is_symlink() and str(rel) not in INTERNAL_FILES
                and not any(part.startswith(".") for part in rel.parts)):
            out[rel.as_posix()] = p.read_bytes()
    return out


# -- the spec check -----------------------------------------------------------------------


def validate_skill_dir(path: str | Path) -> list[str]:
    """What in this skill directory breaks the Agent Skills spec; [] when it is loadable."""
    d = Path(path)
    skill_md = d / "SKILL.md"
    if not skill_md.is_file():
        return [f"{d}: no SKILL.md"]
    try:
        text = skill_md.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return [f"SKILL.md cannot be read as UTF-8: {exc}"]
    front, body, problems = split_front(text)
    if front is None:
        return problems
    extra = sorted(str(k) for k in front if k not in SPEC_KEYS)
    if extra:
        problems.append(f"front matter keys outside the spec: {', '.join(extra)}")
    name = front.get("name")
    if not isinstance(name, str) or not name:
        problems.append("name is missing or not a string")
    else:
        if len(name) > NAME_MAX:
            problems.append(f"name has {len(name)} characters (at most {NAME_MAX})")
        if not NAME_RE.match(name):
            problems.append(f"name {name!r} is not lowercase letters, digits and single inner hyphens")
        if name != d.name:
            problems.append(f"name {name!r} differs from the directory name {d.name!r}")
    desc = front.get("description")
    if not isinstance(desc, str) or not desc.strip():
        problems.append("description is missing or empty")
    elif len(desc) > DESCRIPTION_MAX:
        problems.append(f"description has {len(desc)} characters (at most {DESCRIPTION_MAX})")
    for key, limit in (("license", None), ("compatibility", COMPATIBILITY_MAX), ("allowed-tools", None)):
        if key in front:
            value = front[key]
            if not isinstance(value, str) or not value.strip():
                problems.append(f"{key} is not a non-empty string")
            elif limit and len(value) > limit:
                problems.append(f"{key} has {len(value)} characters (at most {limit})")
    if "metadata" in front:
        meta = front["metadata"]
        if not isinstance(meta, dict):
            problems.append("metadata is not a mapping")
        else:
            bad = sorted(str(k) for k, v in meta.items() if not isinstance(k, str) or not isinstance(v, str))
            if bad:
                problems.append(f"metadata values must be strings: {', '.join(bad)}")
    n_lines = len(body.strip("\n").splitlines())
    if not body.strip():
        problems.append("the body is empty")
    elif n_lines >= SPEC_BODY_LINES:
        problems.append(f"the body has {n_lines} lines (keep it under {SPEC_BODY_LINES})")
    return problems


def validate_tree(root: str | Path, names: list[str] | None = None) -> dict[str, list[str]]:
    """Spec problems per skill directory under ``root`` (only ``names`` when given)."""
    r = Path(root)
    dirs = [r / n for n in names] if names is not None else \
        sorted(p for p in r.iterdir() if p.is_dir() and not p.name.startswith("."))
    return {p.name: problems for p in dirs if (problems := validate_skill_dir(p))}


# -- writing the tree ---------------------------------------------------------------------


@contextmanager
def _locked(root: Path) -> Iterator[None]:
    """One export at a time per directory: a lock on the directory itself, so the agent's
    skills directory holds no lock file (the manifest is the one file Ultron keeps there).
    A lock file an earlier version left is removed."""
    fd = os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            (root / LOCK).unlink(missing_ok=True)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _read_manifest(root: Path) -> dict[str, dict[str, str]]:
    try:
        data = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
        skills = data.get("skills")
        return {str(k): dict(v) for k, v in skills.items()} if isinstance(skills, dict) else {}
    except (OSError, ValueError, AttributeError, TypeError):
        return {}


def _write_manifest(root: Path, skills: dict[str, dict[str, str]]) -> None:
    text = json.dumps({"generator": "ultron", "format": 1,
                       "note": "Skill directories Ultron exported here; it replaces and removes only these.",
                       "skills": dict(sorted(skills.items()))}, indent=2, ensure_ascii=False) + "\n"
    path = root / MANIFEST
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return
    tmp = root / f"{MANIFEST}.tmp-{uuid.uuid4().hex[:8]}"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _ours(d: Path) -> bool:
    """A directory the exporter wrote (its SKILL.md carries the ultron id), not one a user
    put in its place."""
    try:
        front, _, _ = split_front((d / "SKILL.md").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return False
    return bool(front) and isinstance(front.get("metadata"), dict) and _ID_KEY in front["metadata"]


def _same(d: Path, files: dict[str, bytes]) -> bool:
    if not d.is_dir():
        return False
    present = {p.relative_to(d).as_posix() for p in d.rglob("*") if p.is_file()}
    if present != set(files):
        return False
    return all((d / rel).read_bytes() == data for rel, data in files.items())


def _fsync_dir(d: Path) -> None:
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_dir(root: Path, name: str, files: dict[str, bytes]) -> None:
    """Fill a hidden temporary sibling, then rename it into place (the old copy is moved
    aside first and deleted after), so ``root/name`` is always absent or complete."""
    tag = uuid.uuid4().hex[:8]
    tmp = root / f"{_TMP}{name}-{tag}"
    tmp.mkdir()
    try:
        for rel, data in files.items():
            target = tmp / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
        final = root / name
        if final.exists():
            old = root / f"{_OLD}{name}-{tag}"
            os.rename(final, old)
            os.rename(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, final)
        _fsync_dir(root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _clean_leftovers(root: Path) -> None:
    """Temporary directories of an export that crashed midway."""
    for p in root.iterdir():
        if p.is_dir() and (p.name.startswith(_TMP) or p.name.startswith(_OLD)):
            shutil.rmtree(p, ignore_errors=True)


def _planned(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """name -> skill row; a name two slugs fold to gets a ``-2`` style suffix."""
    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        base = export_name(str(row["slug"]))
        name, i = base, 2
        while name in out:
            suffix = f"-{i}"
            name = base[: NAME_MAX - len(suffix)].rstrip("-") + suffix
            i += 1
        out[name] = row
    return out


def export_skills(db: "Database", to: str | Path, *, visible: "Sequence[str] | None" = None) -> ExportResult:
    """Bring ``to`` in line with the store: every current, non-retired skill as
    ``to/<name>/SKILL.md`` (+ supporting files); exported skills that were superseded
    under another name, retired or forgotten are removed. Unchanged skills are not
    rewritten, so a repeated export touches nothing."""
    root = Path(to).expanduser().resolve()
    root.mkdir(parents=True, exist_ok=True)
    result = ExportResult(root)
    with _locked(root):
        _clean_leftovers(root)
        owned = _read_manifest(root)
        with db.engine.connect() as conn:
            rows = store.exportable_skills(conn, visible=visible)
        manifest: dict[str, dict[str, str]] = {}
        for name, skill in _planned(rows).items():
            target = root / name
            if target.exists() and not (name in owned and _ours(target)):
                result.skipped.append({"name": name, "reason": f"{target} exists and is not an Ultron export"})
                continue
            files = {"SKILL.md": render_export(skill, name).encode("utf-8")}
            for rel, data in supporting_files(skill).items():
                files.setdefault(rel, data)
            if _same(target, files):
                result.unchanged.append(name)
            else:
                _write_dir(root, name, files)
                result.written.append(name)
            manifest[name] = {"slug": str(skill["slug"]), "version": str(skill["version"]), "id": str(skill["id"])}
        for name in sorted(set(owned) - set(manifest)):
            target = root / name
            if target.is_dir() and _ours(target):
                shutil.rmtree(target)
                result.removed.append(name)
        _write_manifest(root, manifest)
    if result.written or result.removed:
        log.info("skills export %s: wrote %s, removed %s", root, result.written, result.removed)
    return result


def sync_export(ctx_or_settings: Any, db: "Database | None" = None) -> dict[str, Any] | None:
    """Keep ``ULTRON_SKILLS_EXPORT_DIR`` and connected agents' skills directories in sync
    (None when there is neither); the result is the first directory's, the others under ``also``. Takes a
    ServiceContext, an Ultron client or Settings (then ``db`` too). Called after skill
    evolution, forget and feedback that changes a lifecycle; a failure to write the
    directory is logged and reported, never raised: the store is already right, and the
    next sync repairs the tree."""
    settings = getattr(ctx_or_settings, "settings", ctx_or_settings)
    db = db if db is not None else getattr(ctx_or_settings, "db", None)
    targets = _export_dirs(settings)
    if not targets or db is None:
        return None
    results = []
    for to in targets:
        try:
            results.append(export_skills(db, to).to_dict())
        except OSError as exc:
            log.warning("could not sync the skills export %s: %s", to, exc)
            results.append({"dir": str(to), "error": str(exc), "written": [], "removed": []})
    first = results[0]
    if len(results) > 1:
        first["also"] = results[1:]
    return first


def _export_dirs(settings: Any) -> list[Path]:
    """ULTRON_SKILLS_EXPORT_DIR, then the skills directory of every agent ``ultron connect``
    connected (``$ULTRON_HOME/connections.json``)."""
    from ultron.integrations.connect import skills_dirs

    dirs = [settings.skills_export_dir] if getattr(settings, "skills_export_dir", None) else []
    home = getattr(settings, "home", None)
    if home is not None:
        dirs += [d for d in skills_dirs(Path(home)) if d not in dirs]
    return dirs
