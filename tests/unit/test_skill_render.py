"""SKILL.md / _meta.json rendering, parsing back, atomic directory writes, versions and slugs."""

import json
import os

import pytest

from ultron.skills.draft import Branch, Cited, SkillDraft
from ultron.skills.render import (SECTIONS, SkillHeader, meta_json, parse_skill_md, render_meta, render_skill_md,
                                  write_skill_dir)
from ultron.skills.versioning import latest, next_minor, parse_version, slug_candidates, slugify

DRAFT = SkillDraft(
    name="Pandas: in Docker --- \"quoted\"", description="Fix it: when 'pandas' is missing\nin a container # really",
    when_to_use=("A container cannot import pandas",),
    steps=(Cited("Add pandas to requirements.txt", ("m1", "m2")), Cited("Rebuild: `docker build -t app .`", ("m1",))),
    pitfalls=(Cited("Installing on the host", ("m3",)),),
    branches=(Branch("CI runs in Docker", "pip install pandas in the Dockerfile", ("m2",)),))
HEADER = SkillHeader(slug="pandas-in-docker", version="1.1.0", parent_version="1.0.0", cluster_id="c-1",
                     topic="pandas", memory_ids=("m1", "m2", "m3"), superseded_slugs=("old-pandas",),
                     created_at="2026-01-01T00:00:00+00:00", score=0.87654, scores={"grounding": 1.0})


def test_skill_md_front_matter_and_sections():
    md = render_skill_md(DRAFT, HEADER, [{"id": "m1", "memory_type": "error", "summary": "no module pandas"}])
    parsed = parse_skill_md(md)
    assert parsed.problems == []
    assert parsed.front["name"] == "pandas-in-docker"
    assert parsed.front["description"] == "Fix it: when 'pandas' is missing in a container # really"
    assert parsed.front["metadata"] == {"version": "1.1.0", "parent_version": "1.0.0", "cluster_id": "c-1",
                                        "topic": "pandas", "memory_count": 3, "generator": "rules", "score": 0.8765,
                                        "superseded_slugs": ["old-pandas"], "created_at": "2026-01-01T00:00:00+00:00"}
    assert list(parsed.sections) == list(SECTIONS)
    assert parsed.steps == ["Add pandas to requirements.txt", "Rebuild: `docker build -t app .`"]
    assert "1. Add pandas to requirements.txt (evidence: `m1`, `m2`)" in md
    assert "- If CI runs in Docker → pip install pandas in the Dockerfile (evidence: `m2`)" in md
    assert "- `m1` (error): no module pandas" in md and "- `m3` (memory)" in md
    assert md.splitlines()[0] == "---" and "# Pandas: in Docker --- \"quoted\"" in md


def test_empty_sections_say_so():
    md = render_skill_md(SkillDraft("T", "d", steps=(Cited("Run it", ("m1",)),)), HEADER, [])
    sections = parse_skill_md(md).sections
    assert sections["Pitfalls"] == sections["Decision branches"] == sections["When to use"] == "_None recorded._"


def test_meta_json_carries_versions_scores_and_evidence():
    meta = json.loads(meta_json(render_meta(DRAFT, HEADER, {"passed": True})))
    assert meta["version"] == "1.1.0" and meta["parent_version"] == "1.0.0" and meta["cluster_id"] == "c-1"
    assert meta["scores"] == {"score": 0.87654, "grounding": 1.0} and meta["gate"] == {"passed": True}
    assert meta["memory_ids"] == ["m1", "m2", "m3"] and meta["superseded_slugs"] == ["old-pandas"]


def test_skill_directories_are_written_whole(tmp_path):
    path = write_skill_dir(tmp_path, "s-1.0.0", {"SKILL.md": "a", "_meta.json": "{}"})
    assert path == tmp_path / "s-1.0.0" and (path / "SKILL.md").read_text() == "a"
    # a leftover of a crashed publish is replaced, and no temporary directory stays behind
    (path / "junk").write_text("x")
    write_skill_dir(tmp_path, "s-1.0.0", {"SKILL.md": "b"})
    assert sorted(os.listdir(path)) == ["SKILL.md"] and os.listdir(tmp_path) == ["s-1.0.0"]


def test_a_failed_write_leaves_nothing(tmp_path):
    with pytest.raises(OSError):
        write_skill_dir(tmp_path, "s-1.0.0", {"SKILL.md": "a", "sub/dir.md": "b"})
    assert os.listdir(tmp_path) == []


def test_versions():
    assert next_minor("1.0.0") == "1.1.0" and next_minor("1.9.3") == "1.10.0"
    assert latest(["1.2.0", "1.10.0", "bad"]) == "1.10.0" and latest([]) is None
    with pytest.raises(ValueError, match="MAJOR.MINOR.PATCH"):
        parse_version("v1")


def test_slugs():
    assert slugify("Pandas missing in Docker images!") == "pandas-missing-in-docker-images"
    assert slugify("Ünïcode café — fixes") == "unicode-cafe-fixes"
    assert slugify("数据", fallback="skill-c1") == "skill-c1"
    long = slugify("word " * 40)
    assert len(long) <= 48 and not long.endswith("-")
    assert slug_candidates("a")[:3] == ["a", "a-2", "a-3"]
    for awkward in ("yes", "null", "123", "1-0"):     # YAML would read these as bool / None / int
        md = render_skill_md(DRAFT, SkillHeader(slug=awkward, version="1.0.0", cluster_id="c", topic="t"), [])
        assert parse_skill_md(md).front["name"] == awkward
