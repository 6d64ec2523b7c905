"""The Agent Skills spec check and the export's rendering, without a database: names,
front matter, descriptions, and a body held under 500 lines however much evidence a skill has."""

from pathlib import Path

import pytest

from ultron.skills.draft import Cited, SkillDraft
from ultron.skills.export import (DESCRIPTION_MAX, MAX_BODY_LINES, export_name, render_export, split_front,
                                  validate_skill_dir)
from ultron.skills.render import SkillHeader, render_skill_md


def write(root: Path, name: str, text: str) -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / "SKILL.md").write_text(text)
    return d


def stored_skill(n_memories: int, description: str = "Fix pandas missing in docker images.") -> dict:
    ids = [f"{i:08d}-0000-0000-0000-000000000000" for i in range(n_memories)]
    draft = SkillDraft(name="Pandas in docker", description=description,
                       when_to_use=("pandas is missing in a container",),
                       steps=(Cited("Add pandas to requirements.txt", (ids[0],)),), pitfalls=(), branches=(),
                       generator="rules")
    header = SkillHeader(slug="pandas-in-docker", version="1.2.0", cluster_id="c1", topic="pandas",
                         memory_ids=tuple(ids), score=0.9)
    md = render_skill_md(draft, header, [{"id": i, "memory_type": "error", "summary": "no pandas"} for i in ids])
    return {"id": "skill-1", "slug": "pandas-in-docker", "version": "1.2.0", "cluster_id": "c1", "score": 0.9,
            "lifecycle": "active", "reliability": 0.8, "name": draft.name, "description": description,
            "skill_md": md, "path": None}


@pytest.mark.parametrize("slug, name", [
    ("pandas-in-docker", "pandas-in-docker"), ("Pandas In Docker", "pandas-in-docker"),
    ("-a--b-", "a-b"), ("x" * 80, "x" * 64), ("", "skill"), ("---", "skill"),
])
def test_export_names_follow_the_spec(slug, name):
    assert export_name(slug) == name


def test_an_exported_skill_is_valid_with_string_metadata_and_a_what_and_when(tmp_path):
    text = render_export(stored_skill(5), "pandas-in-docker")
    d = write(tmp_path, "pandas-in-docker", text)
    assert validate_skill_dir(d) == []
    front, body, _ = split_front(text)
    assert front["description"] == ("Fix pandas missing in docker images. Use when: pandas is missing in a "
                                    "container.")
    assert front["metadata"] == {"version": "1.2.0", "ultron-id": "skill-1", "ultron-slug": "pandas-in-docker",
                                 "cluster-id": "c1", "lifecycle": "active", "score": "0.9000",
                                 "reliability": "0.8000", "generator": "ultron"}
    assert body.lstrip().startswith("# Pandas in docker") and 'skill="pandas-in-docker"' in body


def test_a_huge_evidence_list_is_cut_to_keep_the_body_short(tmp_path):
    text = render_export(stored_skill(2000, "x " * 900), "pandas-in-docker")
    front, body, _ = split_front(text)
    assert len(body.strip("\n").splitlines()) <= MAX_BODY_LINES
    assert "more memories (`ultron skills --show pandas-in-docker --json`" in body
    assert len(front["description"]) <= DESCRIPTION_MAX and front["description"].endswith("…")
    assert validate_skill_dir(write(tmp_path, "pandas-in-docker", text)) == []


@pytest.mark.parametrize("text, problem", [
    ("no front matter\n", "does not start with YAML front matter"),
    ("---\nname: [unclosed\n---\nbody\n", "not valid YAML"),
    ("---\n- a list\n---\nbody\n", "not a mapping"),
    ("---\ndescription: d\n---\nbody\n", "name is missing"),
    ("---\nname: Bad_Name\ndescription: d\n---\nbody\n", "not lowercase letters"),
    ("---\nname: a--b\ndescription: d\n---\nbody\n", "not lowercase letters"),
    ("---\nname: other\ndescription: d\n---\nbody\n", "differs from the directory name"),
    ("---\nname: s\n---\nbody\n", "description is missing"),
    ("---\nname: s\ndescription: '" + "d" * 1025 + "'\n---\nbody\n", "1025 characters"),
    ("---\nname: s\ndescription: d\nversion: 1\n---\nbody\n", "outside the spec: version"),
    ("---\nname: s\ndescription: d\nmetadata: {count: 3}\n---\nbody\n", "metadata values must be strings"),
    ("---\nname: s\ndescription: d\nmetadata: [1]\n---\nbody\n", "metadata is not a mapping"),
    ("---\nname: s\ndescription: d\ncompatibility: '" + "c" * 501 + "'\n---\nbody\n", "compatibility has 501"),
    ("---\nname: s\ndescription: d\n---\n", "the body is empty"),
    ("---\nname: s\ndescription: d\n---\n" + "line\n" * 500, "the body has 500 lines"),
])
def test_the_spec_check_names_each_problem(tmp_path, text, problem):
    d = write(tmp_path, "s" if "Bad_Name" not in text and "a--b" not in text else "x", text)
    problems = validate_skill_dir(d)
    assert any(problem in p for p in problems), problems


def test_the_spec_check_accepts_the_optional_fields(tmp_path):
    d = write(tmp_path, "s", "---\nname: s\ndescription: d\nlicense: MIT\ncompatibility: Claude Code\n"
                             "allowed-tools: Bash(git:*) Read\nmetadata: {author: me}\n---\n\n# S\n")
    assert validate_skill_dir(d) == []
    assert validate_skill_dir(tmp_path / "missing") == [f"{tmp_path / 'missing'}: no SKILL.md"]
