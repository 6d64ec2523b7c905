"""The quality gate: structure of the rendered SKILL.md, grounding of every step, the score."""

import pytest

from ultron.skills import gate
from ultron.skills.draft import Branch, Cited, SkillDraft
from ultron.skills.render import SkillHeader, render_skill_md
from ultron.heuristics.skill_synthesis import synthesize

MEMBERS = [
    {"id": "a", "memory_type": "error", "content": "No module named pandas", "context": "report container",
     "resolution": "Add pandas to requirements.txt. Rebuild the image."},
    {"id": "b", "memory_type": "error", "content": "pandas import fails in CI", "context": "CI in Docker",
     "resolution": "Add pandas to requirements.txt and rebuild the image."},
    {"id": "c", "memory_type": "correction", "content": "Installed pandas on the host", "context": "laptop",
     "resolution": "Install it in the image instead."},
]


def draft(steps, pitfalls=(), branches=(), **kw):
    base = dict(name="Pandas in Docker", description="Get pandas into the image when imports fail.",
                when_to_use=("A container cannot import pandas",))
    base.update(kw)
    return SkillDraft(steps=tuple(Cited(t, tuple(e)) for t, e in steps),
                      pitfalls=tuple(Cited(t, tuple(e)) for t, e in pitfalls),
                      branches=tuple(Branch(c, a, tuple(e)) for c, a, e in branches), **base)


def check(d, members=MEMBERS, slug="pandas-in-docker"):
    grounding = gate.ground(d, members)
    header = SkillHeader(slug=slug, version="1.0.0", cluster_id="c1", topic="pandas",
                         memory_ids=tuple(m["id"] for m in members))
    md = render_skill_md(grounding.draft, header, [{"id": m["id"], "memory_type": m["memory_type"]} for m in members])
    return gate.evaluate(grounding, md, slug, members), grounding


GOOD_STEPS = [("Add pandas to requirements.txt", ["a", "b"]), ("Rebuild the image", ["a", "b"]),
              ("Install it in the image", ["c"])]


def test_a_grounded_skill_passes_with_a_score():
    result, _ = check(draft(GOOD_STEPS, [("Installing pandas on the host", ["c"])]))
    assert result.passed and result.reasons == []
    assert result.scores == {"grounding": 1.0, "coverage": 1.0, "corroboration": pytest.approx(2 / 9, abs=1e-3),
                             "structure": 1.0}
    assert 0 < result.score <= 1 and result.to_dict()["passed"]


def test_rules_synthesis_passes_its_own_gate():
    from ultron.prompts.skills import validate_skill

    d = SkillDraft.from_dict(validate_skill(synthesize("pandas", MEMBERS)), "rules")
    result, _ = check(d)
    assert result.passed, result.reasons


@pytest.mark.parametrize("bad, reason", [
    (("Add pandas to requirements.txt", ["zzz"]), "outside the cluster (zzz)"),
    (("Reboot the Kubernetes control plane", ["a"]), "not supported by the memories it cites"),
    (("Add pandas to requirements.txt", []), "cites no memory"),
])
def test_an_ungrounded_step_fails(bad, reason):
    result, _ = check(draft([GOOD_STEPS[0], bad]))
    assert not result.passed and "step 2" in result.reason and reason in result.reason


def test_an_invented_citation_anywhere_fails_but_unsupported_extras_are_dropped():
    result, _ = check(draft(GOOD_STEPS, [("Installing pandas on the host", ["ghost"])]))
    assert not result.passed and "pitfall 1 cites memories outside the cluster" in result.reason
    result, grounding = check(draft(GOOD_STEPS, [("Never run as root on Tuesdays", ["a"])],
                                    [("the moon is full", "sacrifice a goat", ["b"]),
                                     ("CI in Docker", "Add pandas to requirements.txt", ["b"])]))
    assert result.passed and len(result.dropped) == 2
    assert grounding.draft.pitfalls == () and [b.condition for b in grounding.draft.branches] == ["CI in Docker"]


def test_citations_that_do_not_support_a_step_are_pruned():
    _, grounding = check(draft([("Add pandas to requirements.txt", ["a", "c"])]))
    assert grounding.draft.steps[0].evidence == ("a",) and grounding.pruned_citations == 1


def test_coverage_and_corroboration_move_the_score():
    thin, _ = check(draft([("Add pandas to requirements.txt", ["a"])]))
    rich, _ = check(draft(GOOD_STEPS))
    assert rich.passed and rich.score > thin.score
    assert thin.scores["coverage"] == pytest.approx(1 / 3, abs=1e-3)
    # one memory's fix alone is a retelling, not a skill: a reader would not follow it
    assert not thin.passed and "no step is shared by two memories" in thin.reason


@pytest.mark.parametrize("name, step, reason", [
    ("Docker · requirements.txt · install", "Add pandas to requirements.txt", "lists topic terms"),
    ("Fix missing modules", "read_file path=requirements.txt", "raw tool call"),
    ("Fix missing modules", "Unfortunately, I cannot add pandas to requirements.txt", "talks to someone"),
    ("Fix missing modules", "Add pandas to requirements.txt and then:", "cut off"),
])
def test_a_skill_a_reader_would_fail_does_not_pass(name, step, reason):
    from dataclasses import replace as _replace
    result, _ = check(_replace(draft([(step, ["a", "b"])]), name=name))
    assert not result.passed and reason in result.reason


@pytest.mark.parametrize("md_edit, reason", [
    (lambda md: md.replace("## Pitfalls", "## Gotchas"), "missing sections: Pitfalls"),
    (lambda md: md.replace("---\n", "", 1), "no YAML front matter"),
    (lambda md: md.replace("name: pandas-in-docker", "name: [unclosed"), "not valid YAML"),
    (lambda md: md.replace("name: pandas-in-docker", "name: Pandas In Docker"), "is not the slug"),
    (lambda md: md.replace("metadata:", "meta:"), "lacks metadata"),
])
def test_structure_problems_are_named(md_edit, reason):
    d = draft(GOOD_STEPS)
    header = SkillHeader(slug="pandas-in-docker", version="1.0.0", cluster_id="c1", topic="t", memory_ids=("a",))
    md = md_edit(render_skill_md(d, header, []))
    assert any(reason in p for p in gate.structure_problems(md, "pandas-in-docker", d))


def test_structure_needs_steps_a_description_and_sane_lengths():
    result, _ = check(draft([]))
    assert not result.passed and "no steps" in result.reason
    long = draft([("Add pandas to requirements.txt " + "and more words " * 80, ["a"])])
    assert "longer than 1000 characters" in check(long)[0].reason
    wordy = draft(GOOD_STEPS, description="x" * 1100)
    assert "description has 1100 characters" in check(wordy)[0].reason
    nameless = draft(GOOD_STEPS, name="  ")
    assert "title" in check(nameless)[0].reason
