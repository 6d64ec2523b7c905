"""Skill synthesis: a cluster's memories turned into one procedure with cited evidence."""

from __future__ import annotations

from typing import Any

from ultron.llm.tokens import count_tokens, truncate_to_tokens
from ultron.prompts.render import memory_text

SKILL_SYSTEM = """You turn a cluster of related memories of AI agents (problems met and how they were solved) into one
reusable skill: a procedure another agent can follow (docs/rubric.md, "Skills"). Use only what the memories say;
invent nothing. Each memory has a reference like m1.
- name: the capability, as a title an agent would search for ("Fix ModuleNotFoundError when a container crashes on
  start"), never a list of topic words.
- description and when_to_use: the symptoms an agent can observe (an error text, a situation, a kind of request).
- steps: concrete and ordered, each with its substance (the command with its arguments, the file and the change, the
  setting and its value), merged across the memories and generalised: no one session's names (containers, images,
  customers, ids). No look-ups or narration as steps. Every step cites, in "evidence", the memories it comes from.
- pitfalls: things that go wrong, each with the sign that shows it.
- decision branches: from an observable symptom or cause to the action that fixes it, one per distinct cause.
Leave out memories of another domain or task than the rest: they do not belong in this skill.
Answer with JSON only:
{"name": "capability title", "description": "one or two sentences: what the skill does and when to use it",
 "when_to_use": ["observable symptom or situation", ...], "steps": [{"text": "imperative step", "evidence": ["m1", "m3"]}],
 "pitfalls": [{"text": "what goes wrong, and its sign", "evidence": ["m2"]}],
 "decision_branches": [{"if": "observable symptom or cause", "then": "what to do", "evidence": ["m4"]}]}"""
SKILL_ITEMS_MAX = 40
SKILL_TEXT_MAX = 1000


def _skill_text(value: Any, where: str, limit: int = SKILL_TEXT_MAX) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{where} must be a non-empty string, got {value!r}"[:200])
    text = " ".join(value.split())
    if len(text) > limit:
        raise ValueError(f"{where} has {len(text)} characters (at most {limit})")
    return text


def _skill_evidence(value: Any, where: str, refs: dict[str, str] | None) -> list[str]:
    """Memory ids; the prompt's references (m3, [m3], 3) become ids, anything else stays as given."""
    if value is None:
        return []
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list):
        raise ValueError(f"{where}.evidence must be a list of memory ids")
    out: list[str] = []
    for item in value:
        if isinstance(item, bool) or not isinstance(item, (str, int)):
            raise ValueError(f"{where}.evidence holds {item!r}, not a memory id")
        key = str(item).strip().strip("[]").strip()
        if refs:
            key = refs.get(key.lower()) or refs.get(f"m{key}") or key
        if key and key not in out:
            out.append(key)
    return out


def _skill_items(value: Any, where: str, refs: dict[str, str] | None, branch: bool = False) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{where} must be a list")
    if len(value) > SKILL_ITEMS_MAX:
        raise ValueError(f"{where} has {len(value)} items (at most {SKILL_ITEMS_MAX})")
    out = []
    for i, item in enumerate(value, 1):
        at = f"{where}[{i}]"
        if not isinstance(item, dict):
            raise ValueError(f"{at} must be an object, got {item!r}"[:200])
        evidence = _skill_evidence(item.get("evidence"), at, refs)
        if branch:
            out.append({"condition": _skill_text(item.get("if", item.get("condition")), f"{at}.if"),
                        "action": _skill_text(item.get("then", item.get("action")), f"{at}.then"),
                        "evidence": evidence})
        else:
            out.append({"text": _skill_text(item.get("text"), f"{at}.text"), "evidence": evidence})
    return out


def validate_skill(value: Any, refs: dict[str, str] | None = None, *, allow_no_steps: bool = False
                   ) -> dict[str, Any]:
    """The skill's shape (types, lengths, at least one step); whether it is grounded in the
    memories is the Skill Hub's quality gate, not this."""
    if not isinstance(value, dict):
        raise ValueError("expected a skill object {name, description, when_to_use, steps, pitfalls, ...}")
    when = value.get("when_to_use")
    when = [when] if isinstance(when, str) else (when or [])
    if not isinstance(when, list) or len(when) > SKILL_ITEMS_MAX:
        raise ValueError("when_to_use must be a list of strings")
    steps = _skill_items(value.get("steps"), "steps", refs)
    if not steps and not allow_no_steps:
        raise ValueError("a skill needs at least one step")
    branches = value.get("decision_branches", value.get("branches"))
    return {"name": _skill_text(value.get("name"), "name", 200),
            "description": _skill_text(value.get("description"), "description", 1024),
            "when_to_use": [_skill_text(w, f"when_to_use[{i}]") for i, w in enumerate(when, 1)],
            "steps": steps, "pitfalls": _skill_items(value.get("pitfalls"), "pitfalls", refs),
            "branches": _skill_items(branches, "decision_branches", refs, branch=True)}


def skill_prompt(topic: str, memories: list[dict[str, Any]], budget: int) -> tuple[str, dict[str, str]]:
    """The user message for SKILL_SYSTEM and its reference map (m1 -> memory id): short
    references are copied back reliably where 36-character ids are not. Each memory gets
    an equal share of the token budget (48 at least); memories beyond the budget are left
    out rather than overflowing the model's context."""
    refs: dict[str, str] = {}
    share = max(48, budget // max(1, len(memories)))
    blocks, used = [], 0
    for i, m in enumerate(memories, 1):
        block = truncate_to_tokens(f"[m{i}] type: {m.get('memory_type', '')}\n" + memory_text(m), share)
        used += count_tokens(block) + 2
        if used > budget and blocks:
            break
        refs[f"m{i}"] = str(m["id"])
        blocks.append(block)
    return f"Topic: {topic or '(none given)'}\n\nMemories:\n\n" + "\n\n".join(blocks), refs
