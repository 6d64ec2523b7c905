"""A synthesised skill before it is rendered: what the LLM or the rules produced.

Providers return plain dicts (``ultron.prompts.skills.validate_skill`` fixes their
shape); the Skill Hub turns them into a :class:`SkillDraft` so the gate and the
renderer work on one typed structure whatever wrote it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence


@dataclass(frozen=True)
class Cited:
    """A step or pitfall with the ids of the memories it comes from."""

    text: str
    evidence: tuple[str, ...] = ()


@dataclass(frozen=True)
class Branch:
    """"If <condition> → <action>": contexts that were resolved differently."""

    condition: str
    action: str
    evidence: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        return f"{self.condition} {self.action}"


@dataclass(frozen=True)
class SkillDraft:
    name: str
    description: str
    when_to_use: tuple[str, ...] = ()
    steps: tuple[Cited, ...] = ()
    pitfalls: tuple[Cited, ...] = ()
    branches: tuple[Branch, ...] = ()
    generator: str = "rules"
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any], generator: str) -> "SkillDraft":
        """From a validated provider answer (see ``validate_skill``)."""
        return cls(
            name=data["name"], description=data["description"],
            when_to_use=tuple(data.get("when_to_use") or ()),
            steps=tuple(Cited(s["text"], tuple(s["evidence"])) for s in data.get("steps") or ()),
            pitfalls=tuple(Cited(p["text"], tuple(p["evidence"])) for p in data.get("pitfalls") or ()),
            branches=tuple(Branch(b["condition"], b["action"], tuple(b["evidence"]))
                           for b in data.get("branches") or ()),
            generator=generator,
        )

    def cited_ids(self) -> set[str]:
        return {e for item in (*self.steps, *self.pitfalls, *self.branches) for e in item.evidence}

    def map_text(self, fn: Callable[[str], str]) -> "SkillDraft":
        """The same draft with ``fn`` applied to every human-readable text (ids untouched)."""
        return replace(
            self, name=fn(self.name), description=fn(self.description),
            when_to_use=tuple(fn(w) for w in self.when_to_use),
            steps=tuple(Cited(fn(s.text), s.evidence) for s in self.steps),
            pitfalls=tuple(Cited(fn(p.text), p.evidence) for p in self.pitfalls),
            branches=tuple(Branch(fn(b.condition), fn(b.action), b.evidence) for b in self.branches))

    def embedding_text(self) -> str:
        """What skill search matches a query against: the name, description and situations.
        Steps are left out: a long text dilutes the vector (and sentence models cut it at
        256 word pieces), while the description already names the main steps."""
        return skill_embedding_text(self.name, self.description, self.when_to_use)


def skill_embedding_text(name: str, description: str, situations: Sequence[str]) -> str:
    """The text a skill's vector is built from (see :meth:`SkillDraft.embedding_text`); the
    re-embed rebuilds it from a stored skill with the situations read back from SKILL.md."""
    return "\n".join([name, description, *situations])
