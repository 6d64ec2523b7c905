"""The quality gate a skill passes before it is published.

Two hard checks; either failing keeps the skill unpublished and the reason is
recorded on its cluster:

* **structure** of the rendered SKILL.md, parsed back: front matter that is YAML with
  ``name`` (the slug), a non-empty ``description`` (at most 1024 characters) and a
  ``metadata`` mapping; every section (When to use, Steps, Pitfalls, Decision
  branches, Evidence); 1 to ``MAX_STEPS`` numbered steps of sane length; a body
  (Evidence list aside) of at most ``MAX_BODY_CHARS``.
* **grounding**: every step cites memories of the cluster, and its words are found in
  at least one of them (at least ``MIN_OVERLAP`` of its stemmed content words). A cited
  id that is not a member fails the skill anywhere it appears: the citation was made
  up. A pitfall or branch no cited memory supports is dropped (reported), not fatal;
  citations that do not support their item are pruned.

The score in [0, 1] weighs what a reader of the skill cares about:

* ``grounding`` (0.35): mean word overlap of each step with its best supporting memory;
* ``coverage`` (0.25): share of the cluster's memories that support something in the skill;
* ``corroboration`` (0.25): how many independent memories back each step, averaged
  (one memory 0, then a third more for each further one, full at four), so a skill
  re-distilled from more experience that confirms its steps scores higher;
* ``structure`` (0.15): soft checks: situations given, two steps or more, pitfalls or
  branches present, a description of 20 characters or more, steps of at most 300.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Sequence, TypeVar

from ultron.heuristics.checker import check_skill
from ultron.skills.draft import Branch, Cited, SkillDraft
from ultron.skills.render import SECTIONS, parse_skill_md
from ultron.heuristics.skill_text import clip, containment, tokens
from ultron.skills.versioning import SLUG_MAX, SLUG_RE

MIN_OVERLAP = 0.5
MAX_STEPS = 30
MAX_STEP_CHARS = 1000
MAX_DESCRIPTION_CHARS = 1024
MAX_NAME_CHARS = 200
MAX_BODY_CHARS = 32_000
CORROBORATED = 3  # further memories behind a step at which it counts as fully corroborated
WEIGHTS = {"grounding": 0.35, "coverage": 0.25, "corroboration": 0.25, "structure": 0.15}

_Item = TypeVar("_Item", Cited, Branch)


@dataclass
class Grounding:
    """The draft with unsupported citations pruned and unsupported pitfalls/branches dropped."""

    draft: SkillDraft
    step_support: list[float]
    problems: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    pruned_citations: int = 0


@dataclass
class GateResult:
    passed: bool
    score: float
    scores: dict[str, float]
    reasons: list[str]
    dropped: list[str] = field(default_factory=list)
    pruned_citations: int = 0

    @property
    def reason(self) -> str:
        return "; ".join(self.reasons)

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "score": self.score, "scores": dict(self.scores), "reasons": list(self.reasons),
                "dropped": list(self.dropped), "pruned_citations": self.pruned_citations}


def member_words(members: Sequence[dict[str, Any]]) -> dict[str, set[str]]:
    return {m["id"]: tokens(" ".join(str(m.get(k) or "") for k in ("content", "context", "resolution")))
            for m in members}


#: the words a skill's own frame adds around what its memories say ("check X against the causes
#: under Decision branches", "confirm the fix: `cmd`", "(sign: `error`)"): not claims to ground
FRAME = tokens("check against the causes under decision branches and apply the fix of the cause that matches "
               "confirm sign note which name the error reports")


def _support(text: str, evidence: Sequence[str], words: dict[str, set[str]]) -> tuple[float, list[str], list[str]]:
    """(best overlap, supporting ids, unknown ids) of one cited text."""
    mine = tokens(text) - FRAME
    unknown = [e for e in evidence if e not in words]
    overlaps = {e: containment(mine, words[e]) for e in evidence if e in words}
    supporting = [e for e, o in overlaps.items() if o >= MIN_OVERLAP]
    return max(overlaps.values(), default=0.0), supporting, unknown


def ground(draft: SkillDraft, members: Sequence[dict[str, Any]]) -> Grounding:
    words = member_words(members)
    problems: list[str] = []
    dropped: list[str] = []
    pruned = 0
    steps, support = [], []
    for i, step in enumerate(draft.steps, 1):
        best, supporting, unknown = _support(step.text, step.evidence, words)
        quoted = clip(step.text, 80)
        if unknown:
            problems.append(f"step {i} cites memories outside the cluster ({', '.join(unknown[:3])}): {quoted!r}")
        elif not step.evidence:
            problems.append(f"step {i} cites no memory: {quoted!r}")
        elif not supporting:
            problems.append(f"step {i} is not supported by the memories it cites "
                            f"(best word overlap {best:.2f} < {MIN_OVERLAP}): {quoted!r}")
        pruned += len(step.evidence) - len(supporting) - len(unknown)
        steps.append(Cited(step.text, tuple(supporting) or step.evidence))
        support.append(best)
    pitfalls, pruned_pitfalls = _keep_supported(draft.pitfalls, "pitfall", "pitfall", words, problems, dropped)
    branches, pruned_branches = _keep_supported(draft.branches, "decision branch", "branch", words, problems,
                                                dropped)
    pruned += pruned_pitfalls + pruned_branches
    kept = replace(draft, steps=tuple(steps), pitfalls=pitfalls, branches=branches)
    return Grounding(kept, support, problems, dropped, pruned)


def _keep_supported(items: Sequence[_Item], label: str, short: str, words: dict[str, set[str]],
                    problems: list[str], dropped: list[str]) -> tuple[tuple[_Item, ...], int]:
    """(the items some cited memory supports, their citations cut to those; citations pruned).

    An item citing a non-member is a problem (reported as ``label`` and its number); an
    item no cited memory supports is dropped (reported as ``short`` and its text)."""
    kept: list[_Item] = []
    pruned = 0
    for i, item in enumerate(items, 1):
        _, supporting, unknown = _support(item.text, item.evidence, words)
        if unknown:
            problems.append(f"{label} {i} cites memories outside the cluster ({', '.join(unknown[:3])})")
        elif supporting:
            kept.append(replace(item, evidence=tuple(supporting)))
            pruned += len(item.evidence) - len(supporting)
        else:
            dropped.append(f"{short} {clip(item.text, 80)!r}: no cited memory supports it")
    return tuple(kept), pruned


def structure_problems(skill_md: str, slug: str, draft: SkillDraft) -> list[str]:
    parsed = parse_skill_md(skill_md)
    problems = list(parsed.problems)
    front = parsed.front or {}
    if parsed.front is not None:
        missing = [k for k in ("name", "description", "metadata") if k not in front]
        if missing:
            problems.append(f"front matter lacks {', '.join(missing)}")
        name = front.get("name")
        if "name" in front and (not isinstance(name, str) or not SLUG_RE.match(name) or len(name) > SLUG_MAX
                                or name != slug):
            problems.append(f"front matter name {name!r} is not the slug {slug!r} (lowercase-hyphen, "
                            f"at most {SLUG_MAX} characters)")
        desc = front.get("description")
        if "description" in front and (not isinstance(desc, str) or not desc.strip()):
            problems.append("description is empty")
        elif isinstance(desc, str) and len(desc) > MAX_DESCRIPTION_CHARS:
            problems.append(f"description has {len(desc)} characters (at most {MAX_DESCRIPTION_CHARS})")
        if "metadata" in front and not isinstance(front.get("metadata"), dict):
            problems.append("metadata is not a mapping")
    missing_sections = [s for s in SECTIONS if s not in parsed.sections]
    if missing_sections:
        problems.append(f"missing sections: {', '.join(missing_sections)}")
    if not parsed.steps:
        problems.append("no steps")
    elif len(parsed.steps) > MAX_STEPS:
        problems.append(f"{len(parsed.steps)} steps (at most {MAX_STEPS})")
    long_steps = [i for i, s in enumerate(parsed.steps, 1) if len(s) > MAX_STEP_CHARS]
    if long_steps:
        problems.append(f"steps {long_steps[:5]} are longer than {MAX_STEP_CHARS} characters")
    if any(not s.strip() for s in parsed.steps):
        problems.append("an empty step")
    if not draft.name.strip() or len(draft.name) > MAX_NAME_CHARS:
        problems.append(f"the title must have 1 to {MAX_NAME_CHARS} characters")
    body = len(skill_md) - len(parsed.sections.get("Evidence", ""))
    if body > MAX_BODY_CHARS:
        problems.append(f"SKILL.md has {body} characters besides the evidence list (at most {MAX_BODY_CHARS})")
    return problems


def reader_problems(draft: SkillDraft, members: Sequence[dict[str, Any]]) -> list[str]:
    """What a reader of the skill would fail it for, where a program can tell
    (:func:`ultron.heuristics.checker.check_skill`: one home for the mechanical checks)."""
    return [detail for _, detail in check_skill(draft.name, ((s.text, s.evidence) for s in draft.steps),
                                                (b.condition for b in draft.branches), len(members))]


def soft_structure(draft: SkillDraft) -> float:
    checks = (bool(draft.when_to_use), len(draft.steps) >= 2, bool(draft.pitfalls or draft.branches),
              len(draft.description.strip()) >= 20, all(len(s.text) <= 300 for s in draft.steps))
    return sum(checks) / len(checks)


def evaluate(grounding: Grounding, skill_md: str, slug: str, members: Sequence[dict[str, Any]]) -> GateResult:
    """Pass/fail with reasons, and the score. ``skill_md`` is the rendering of ``grounding.draft``."""
    draft = grounding.draft
    reasons = structure_problems(skill_md, slug, draft) + grounding.problems + reader_problems(draft, members)
    n = max(1, len(members))
    supporters = draft.cited_ids() & {m["id"] for m in members}
    steps = draft.steps
    scores = {
        "grounding": round(sum(grounding.step_support) / len(steps), 4) if steps else 0.0,
        "coverage": round(len(supporters) / n, 4),
        "corroboration": round(sum(min(1.0, (len(s.evidence) - 1) / CORROBORATED) for s in steps) / len(steps), 4)
        if steps else 0.0,
        "structure": round(soft_structure(draft), 4),
    }
    score = round(min(1.0, max(0.0, sum(WEIGHTS[k] * v for k, v in scores.items()))), 4)
    return GateResult(not reasons, score, scores, reasons, grounding.dropped, grounding.pruned_citations)
