"""The context bundle: one prompt-ready block for a task, within a token budget.

An agent asks once, before it starts, and gets what Ultron knows about the task: first
the most relevant skills (their "When to use" and "Steps", cut from SKILL.md), then the
most relevant memories (the L1 overview, or the L0 one-liner when space is short). Every
item carries its id in brackets (``[skill:<name>]``, ``[memory:<id>]``) so the agent can
say afterwards whether it helped (``feedback``).

The budget is counted with the project's tokenizer (``ultron.llm.tokens``, cl100k) on the
whole text as returned, and is never exceeded: items are added one at a time and each
addition is measured on the joined text; what does not fit degrades (fewer steps, then a
skill's one-line description; a memory's L0 instead of L1) or is left out.

It sits above the memory and skill stages (it composes both) and below the SDK.
"""

from __future__ import annotations

from typing import Any, Sequence

from ultron.db import outcomes as outcome_store
from ultron.llm.tokens import count_tokens, truncate_to_tokens
from ultron.memory.service import MemoryService
from ultron.skills.render import parse_skill_md, when_to_use
from ultron.skills.service import SkillService

MIN_BUDGET = 50
MAX_BUDGET = 100_000
DEFAULT_BUDGET = 1500
#: Skills may take this share of what the header leaves when memories are waiting too.
SKILL_SHARE = 0.6
MAX_SKILLS = 3
MAX_SESSION_ID_CHARS = 200
EMPTY = "No stored skill or memory matches this task yet."
FEEDBACK_HINT = "Items are labelled [skill:NAME] / [memory:ID]: report whether each helped (feedback)."


class _Block:
    """The text being built: parts joined by newlines, measured as a whole."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.parts: list[str] = []

    def text(self, extra: Sequence[str] = ()) -> str:
        return "\n".join([*self.parts, *extra])

    def tokens(self, extra: Sequence[str] = ()) -> int:
        return count_tokens(self.text(extra))

    def try_add(self, *parts: str, limit: int | None = None) -> bool:
        """Add the parts if the whole text stays within the budget (and ``limit``)."""
        cap = self.budget if limit is None else min(self.budget, limit)
        if self.tokens(parts) > cap:
            return False
        self.parts.extend(parts)
        return True


def _one_line(text: str) -> str:
    return " ".join(str(text or "").split())


def _skill_versions(skill: dict[str, Any]) -> list[tuple[str, str]]:
    """(detail, text) renderings of a skill, richest first: when to use and every step,
    then fewer steps, then the one-line description."""
    slug = skill["slug"]
    head = f"### [skill:{slug}] {_one_line(skill.get('name') or slug)}"
    md = skill.get("skill_md") or ""
    when = [_one_line(w).rstrip(".") for w in when_to_use(md)]
    steps = [_one_line(s) for s in parse_skill_md(md).steps]
    out: list[tuple[str, str]] = []
    when_line = f"When to use: {'; '.join(when)}" if when else ""
    for n in range(len(steps), 0, -1):
        lines = [head] + ([when_line] if when_line else []) + ["Steps:"] + [f"{i}. {s}" for i, s in
                                                                             enumerate(steps[:n], 1)]
        out.append(("full" if n == len(steps) else "l1", "\n".join(lines)))
    description = _one_line(skill.get("description") or "") or (when[0] if when else "")
    out.append(("l0", f"{head}\n{truncate_to_tokens(description, 80)}" if description else head))
    return out


def _memory_versions(record: Any, stale_note: str | None = None, local: bool = False) -> list[tuple[str, str]]:
    head = f"- [memory:{record.id}] ({record.memory_type})" + (" (learned in this repository)" if local else "")
    if stale_note:  # the agent should check the file before trusting the memory
        head += f" (possibly stale: {_one_line(stale_note)})"
    out = []
    if record.overview_l1 and _one_line(record.overview_l1) != _one_line(record.summary_l0):
        out.append(("l1", f"{head} {_one_line(record.overview_l1)}"))
    out.append(("l0", f"{head} {_one_line(record.summary_l0 or record.content)}"))
    return out


def _fit(text: str, budget: int) -> str:
    """The text, cut until it is within the budget (a last guard; the builder rarely needs it)."""
    cut, room = text, budget
    while cut and count_tokens(cut) > budget:
        room -= max(1, count_tokens(cut) - budget)
        cut = truncate_to_tokens(text, room, marker="…") if room > 0 else ""
    return cut


def _with_repository(found: list[Any], local: list[Any]) -> list[Any]:
    """What was learned in this repository first (a session starting there often has no task
    words yet), then the search's results; a local memory whose files changed goes last."""
    fresh = [r for r in local if not r.possibly_stale]
    stale = [r for r in local if r.possibly_stale]
    seen = {r.record.id for r in local}
    return fresh + [r for r in found if r.record.id not in seen] + stale


def validate(task: Any, token_budget: Any) -> tuple[str, int]:
    """The task (non-empty text) and budget (a whole number of tokens, MIN..MAX_BUDGET)."""
    if not isinstance(task, str) or not task.strip():
        raise ValueError("task must be a non-empty description of what the agent is about to do")
    if isinstance(token_budget, bool) or not isinstance(token_budget, int):
        raise ValueError("token_budget must be a whole number of tokens")
    if not MIN_BUDGET <= token_budget <= MAX_BUDGET:
        raise ValueError(f"token_budget must be between {MIN_BUDGET} and {MAX_BUDGET} tokens")
    return task.strip(), token_budget


def validate_session_id(session_id: Any) -> str | None:
    """None, or the session id as text (an agent's uuid or file stem; at most 200 characters)."""
    if session_id is None:
        return None
    if not isinstance(session_id, str) or not session_id.strip() or len(session_id.strip()) > MAX_SESSION_ID_CHARS \
            or "\x00" in session_id:
        raise ValueError(f"session_id must be non-empty text of at most {MAX_SESSION_ID_CHARS} characters")
    return session_id.strip()


def record_serve(engine: Any, session_id: str, agent_id: str | None, items: Sequence[tuple[str, str]]) -> int:
    """Record that these items (``("memory" | "skill", id)``) were served to the agent session,
    so its outcome can be attributed to them once it is ingested and scored. Returns the rows
    written. Hook code that builds its own context calls this directly."""
    with engine.begin() as conn:
        return outcome_store.record_serves(conn, session_id, agent_id, items)


def context_bundle(memory: MemoryService, skills: SkillService, task: str, token_budget: int = DEFAULT_BUDGET,
                   agent_id: str | None = None, repo_root: str | None = None,
                   session_id: str | None = None) -> dict[str, Any]:
    """``{"task", "token_budget", "tokens", "text", "items"}``; see the module docstring.
    ``agent_id`` limits the memories to that agent's. Memories shown count one hit each
    (they are search results). ``repo_root``: the checkout the agent works in; memories
    whose files changed or vanished there rank lower and say so (``possibly_stale``).
    ``session_id``: the agent's own id for the session it is working in (Claude Code's
    session id, a Codex rollout's id); every item served is recorded against it
    (``record_serve``), and when that session is ingested and scored its outcome is counted
    in each item's utility (``ultron.db.outcomes``)."""
    task, budget = validate(task, token_budget)
    session_id = validate_session_id(session_id)
    block = _Block(budget)
    block.try_add("# Context from Ultron")
    block.try_add(f"Task: {truncate_to_tokens(_one_line(task), max(8, min(64, budget // 5)), marker='…')}")
    block.try_add(FEEDBACK_HINT, limit=budget // 3)  # only when it leaves room for the items
    items: list[dict[str, Any]] = []

    memory_limit = max(3, min(20, budget // 80))
    # A bundle whose session's outcome will be counted explores (Thompson sampling on the
    # outcome utility, seeded by the session): see ranking.utility_factor.
    found = memory.search_memories(task, "l1", memory_limit, agent_id=agent_id, repo_root=repo_root,
                                   explore_seed=session_id)
    if repo_root is not None:
        found = _with_repository(found, memory.learned_in_repo(repo_root, max(2, memory_limit // 3), agent_id))
    hits = skills.search_skills(task, MAX_SKILLS)

    header_tokens = block.tokens()
    skill_cap = budget if not found else header_tokens + int((budget - header_tokens) * SKILL_SHARE)
    titled = False
    for hit in hits:
        skill = skills.get_skill(hit["slug"]) or hit
        for detail, text in _skill_versions(skill):
            parts = ([] if titled else ["", "## Skills"]) + [text]
            if block.try_add(*parts, limit=skill_cap):
                titled = True
                items.append({"kind": "skill", "id": skill["slug"], "detail": detail, "tokens": count_tokens(text)})
                break

    titled = False
    for result in found:
        for detail, text in _memory_versions(result.record, result.stale_reason, "repository" in result.matched):
            parts = ([] if titled else ["", "## Memories"]) + [text]
            if block.try_add(*parts):
                titled = True
                items.append({"kind": "memory", "id": result.record.id, "detail": detail,
                              "tokens": count_tokens(text),
                              **({"possibly_stale": True, "stale_reason": result.stale_reason}
                                 if result.possibly_stale else {})})
                break

    if not items:
        block.try_add("", EMPTY) or block.try_add(EMPTY)
    if session_id is not None:
        record_serve(memory.db.engine, session_id, agent_id, [(i["kind"], i["id"]) for i in items])
    text = _fit(block.text(), budget)
    return {"task": task, "token_budget": budget, "tokens": count_tokens(text), "text": text, "items": items}
