"""LLM tasks behind one interface, with a real and an offline implementation.

``OpenAIProvider`` asks a model; ``RulesProvider`` does the same tasks with
deterministic algorithms, so the whole pipeline runs (and is tested) with no key.
``build_provider(settings)`` picks one: ``ULTRON_LLM_PROVIDER=rules|openai|auto``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from ultron.llm.tokens import count_tokens, truncate_to_tokens
from ultron.llm.usage import LLMUsage
from ultron.sessions.messages import Message
from ultron.settings import Settings

RUBRIC = ("goal_achieved", "correctness", "efficiency", "safety")
MEMORY_TYPES = ("error", "security", "correction", "pattern", "preference", "life")
#: token limits of a memory's summaries (L0 one-liner, L1 overview)
L0_TOKENS = 64
L1_TOKENS = 256
TOOL_ARGS_CHARS = 300


@dataclass(frozen=True)
class WindowTask:
    """One task of a segmentation answer: 1-based inclusive in-window indices."""

    start: int
    end: int
    topic: str


class LLMProvider(Protocol):
    name: str
    usage: LLMUsage

    def segment(self, window: list[Message]) -> list[WindowTask]:
        """Split a window into tasks covering 1..len(window). Raises LLMUnavailable/LLMInvalidAnswer."""

    def judge(self, messages: list[Message]) -> dict[str, Any] | None:
        """Rubric scores for one task, or None when this provider has no judge."""

    def extract_memories(self, messages: list[Message], task_type: str | None) -> list[dict[str, Any]]:
        """Memory candidates {content, context, resolution, tags, kind, tools_used, confidence}."""

    def extract_from_text(self, text: str) -> list[dict[str, Any]]:
        """Memory candidates from free text (ingest_text)."""

    def classify_memory(self, content: str, context: str, resolution: str, tags: list[str]) -> str:
        """One of MEMORY_TYPES."""

    def summarize(self, content: str, context: str, resolution: str) -> tuple[str, str]:
        """(L0 one-liner, L1 overview); the caller enforces the token limits."""

    def same_memory(self, a: dict[str, str], b: dict[str, str]) -> bool:
        """Confirm a near-duplicate in the soft similarity zone."""

    def merge_memories(self, existing: dict[str, str], incoming: dict[str, str]) -> dict[str, str]:
        """Merged {content, context, resolution}."""

    def label_cluster(self, texts: list[str]) -> str:
        """A short topic label for a cluster, from a few of its members' texts."""

    def synthesize_skill(self, topic: str, memories: list[dict[str, Any]]) -> dict[str, Any]:
        """A skill from a cluster's memories ({id, memory_type, content, context, resolution}), shaped by
        validate_skill: name, description, when_to_use, steps/pitfalls/branches citing memory ids."""


def render_message(index: int, msg: Message) -> str:
    """How a message is shown to a model, and what the window budget counts."""
    who = msg.role + (" (sub-agent)" if msg.is_sidechain else "")
    parts = [msg.content] if msg.content else []
    for call in msg.tool_calls or []:
        fn = call.get("function", {})
        args = str(fn.get("arguments", ""))
        if len(args) > TOOL_ARGS_CHARS:
            args = args[:TOOL_ARGS_CHARS] + "…"
        parts.append(f"[calls {fn.get('name', '?')}({args})]")
    if msg.role == "tool" and msg.name == "error":
        parts.insert(0, "[tool error]")
    return f"[{index}] {who}: " + (" ".join(parts) if parts else "(empty)")


def validate_cover(value: Any, length: int) -> list[WindowTask]:
    """The answer must be tasks forming a contiguous, non-overlapping cover of 1..length."""
    items = value.get("tasks") if isinstance(value, dict) else value
    if not isinstance(items, list) or not items:
        raise ValueError("expected a non-empty list of tasks")
    tasks = []
    for item in items:
        if not isinstance(item, dict):
            raise ValueError(f"task is not an object: {item!r}")
        start, end = item.get("start"), item.get("end")
        if isinstance(start, bool) or isinstance(end, bool) or not isinstance(start, int) or not isinstance(end, int):
            raise ValueError(f"task bounds must be integers: {item!r}")
        topic = item.get("topic") or ""
        tasks.append(WindowTask(start, end, str(topic).strip()[:200]))
    expected = 1
    for t in tasks:
        if t.start != expected or t.end < t.start:
            raise ValueError(f"tasks do not cover 1..{length} contiguously at {t.start}-{t.end}")
        expected = t.end + 1
    if expected != length + 1:
        raise ValueError(f"tasks end at {expected - 1}, the window has {length} messages")
    return tasks


def validate_rubric(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError("expected an object with rubric scores")
    out: dict[str, Any] = {}
    for key in RUBRIC:
        score = value.get(key)
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not 0 <= score <= 1:
            raise ValueError(f"{key} must be a number in [0, 1], got {score!r}")
        out[key] = float(score)
    out["rationale"] = str(value.get("rationale") or "")[:1000]
    return out


SEGMENT_SYSTEM = """You split an AI agent's conversation into independent tasks.
A task is one user goal with everything done for it: the request, clarifications, tool calls, results and the answer.
A new task starts when the user turns to a different goal; follow-ups, corrections and answers to the agent's questions belong to the current task.
The messages are numbered 1..{n}. Answer with JSON only, in this shape:
{{"tasks": [{{"start": 1, "end": 3, "topic": "short topic of the task"}}, ...]}}
The tasks must be in order, contiguous and non-overlapping, and cover 1..{n} exactly: the first starts at 1, each next starts right after the previous ends, the last ends at {n}."""

JUDGE_SYSTEM = """You grade how well an AI agent handled one task, from the transcript.
Score each criterion from 0 to 1:
- goal_achieved: the user's goal was fully met (1) or not at all (0);
- correctness: the agent's actions and statements were correct;
- efficiency: few wasted steps, no loops or repeated failing calls;
- safety: no harmful, policy-violating or unauthorised actions.
Answer with JSON only: {"goal_achieved": 0.0, "correctness": 0.0, "efficiency": 0.0, "safety": 0.0, "rationale": "one sentence"}"""


def validate_memories(value: Any) -> list[dict[str, Any]]:
    items = value.get("memories") if isinstance(value, dict) else value
    if not isinstance(items, list):
        raise ValueError("expected {\"memories\": [...]}")
    out = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("content"), str) or not item["content"].strip():
            raise ValueError(f"memory without content: {item!r}")
        conf = item.get("confidence", 0.5)
        if isinstance(conf, bool) or not isinstance(conf, (int, float)):
            raise ValueError(f"confidence must be a number: {conf!r}")
        kind = item.get("kind") if item.get("kind") in ("procedural", "episodic") else "episodic"
        tags = item.get("tags") if isinstance(item.get("tags"), list) else []
        tools = item.get("tools_used") if isinstance(item.get("tools_used"), list) else []
        out.append({
            "content": item["content"].strip(), "context": str(item.get("context") or "").strip(),
            "resolution": str(item.get("resolution") or "").strip(),
            "tags": [str(t).strip().lower() for t in tags if str(t).strip()][:12],
            "kind": kind, "tools_used": [str(t) for t in tools][:20],
            "confidence": min(1.0, max(0.0, float(conf))),
            # the extractor's own reading of the type, when it gives a valid one
            "type_hint": item.get("type_hint") if item.get("type_hint") in MEMORY_TYPES else None,
        })
    return out


def validate_type(value: Any) -> str:
    kind = value.get("memory_type") if isinstance(value, dict) else value
    if kind not in MEMORY_TYPES:
        raise ValueError(f"memory_type must be one of {MEMORY_TYPES}, got {kind!r}")
    return kind


def validate_summaries(value: Any) -> tuple[str, str]:
    if not isinstance(value, dict) or not isinstance(value.get("l0"), str) or not isinstance(value.get("l1"), str):
        raise ValueError("expected {\"l0\": str, \"l1\": str}")
    if not value["l0"].strip():
        raise ValueError("empty l0")
    return value["l0"].strip(), value["l1"].strip()


def validate_same(value: Any) -> bool:
    same = value.get("same") if isinstance(value, dict) else value
    if not isinstance(same, bool):
        raise ValueError("expected {\"same\": true|false}")
    return same


def validate_merged(value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or not isinstance(value.get("content"), str) or not value["content"].strip():
        raise ValueError("expected {content, context, resolution}")
    return {k: str(value.get(k) or "").strip() for k in ("content", "context", "resolution")}


def validate_label(value: Any) -> str:
    from ultron.clusters.topics import clean_label

    topic = value.get("topic") if isinstance(value, dict) else value
    if not isinstance(topic, str) or not clean_label(topic):
        raise ValueError("expected {\"topic\": \"a short label\"}")
    return clean_label(topic)


LABEL_SYSTEM = """You name a cluster of related memories of AI agents (problems met, fixes, preferences).
Give the topic they share as a short label of 2 to 6 words, specific enough to tell it from other clusters
(e.g. "pandas import errors in Docker images"), not a sentence. Answer with JSON only: {"topic": "..."}"""


EXTRACT_SYSTEM = """You extract reusable knowledge from one task of an AI agent's work, for other agents to reuse.
Extract only what is supported by the transcript: errors and how they were fixed, corrections the user made,
stated preferences, and successful multi-step procedures. Skip chit-chat and anything private.
Answer with JSON only:
{"memories": [{"content": "the error / problem / preference, concise", "context": "where it happened",
  "resolution": "what fixed it or the steps", "tags": ["python", "docker"], "kind": "procedural|episodic",
  "tools_used": ["tool names"], "confidence": 0.0}]}
kind: procedural = a reusable how-to; episodic = a one-off event. confidence: 0..1, how sure and reusable.
Return {"memories": []} when there is nothing worth keeping."""

TEXT_EXTRACT_SYSTEM = EXTRACT_SYSTEM.replace("one task of an AI agent's work", "a text someone shared")

CLASSIFY_SYSTEM = """Classify one memory of an AI agent memory system. Types:
error (an error and its fix), security (a security event or risk), correction (a correction of a mistake),
pattern (an observed pattern or reusable procedure), preference (an explicit preference), life (a shareable everyday fact).
Answer with JSON only: {"memory_type": "error"}"""

SUMMARY_SYSTEM = """Summarise one memory at two levels. l0: one line, at most 40 words, the gist someone scans.
l1: an overview of at most 150 words with the problem, context and resolution.
Answer with JSON only: {"l0": "...", "l1": "..."}"""

SAME_SYSTEM = """Two memories are near-duplicates by embedding similarity. Decide whether they describe the same
knowledge (the same problem and fix, the same preference, the same procedure), so they should be merged.
Answer with JSON only: {"same": true} or {"same": false}"""

MERGE_SYSTEM = """Merge two versions of the same memory into one, keeping every distinct fact of both, without
repetition. Answer with JSON only: {"content": "...", "context": "...", "resolution": "..."}"""


def _memory_text(m: dict[str, str]) -> str:
    return f"content: {m.get('content', '')}\ncontext: {m.get('context', '')}\nresolution: {m.get('resolution', '')}"


SKILL_SYSTEM = """You turn a cluster of related memories of AI agents (problems met and how they were solved) into one
reusable skill: a procedure another agent can follow. Use only what the memories say; invent nothing.
Each memory has a reference like m1. Every step is an action taken from the memories' resolutions and cites, in
"evidence", the references of the memories it comes from. Merge steps that say the same thing and order them as they
should be done. Pitfalls: errors and mistakes to avoid, from the memories. Decision branches: where memories in
different contexts were resolved differently, one branch per context.
Answer with JSON only:
{"name": "short title", "description": "one or two sentences: what the skill does and when to use it",
 "when_to_use": ["situation", ...], "steps": [{"text": "imperative step", "evidence": ["m1", "m3"]}],
 "pitfalls": [{"text": "what goes wrong and how to avoid it", "evidence": ["m2"]}],
 "decision_branches": [{"if": "context", "then": "what to do", "evidence": ["m4"]}]}"""
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
        block = truncate_to_tokens(f"[m{i}] type: {m.get('memory_type', '')}\n" + _memory_text(m), share)
        used += count_tokens(block) + 2
        if used > budget and blocks:
            break
        refs[f"m{i}"] = str(m["id"])
        blocks.append(block)
    return f"Topic: {topic or '(none given)'}\n\nMemories:\n\n" + "\n\n".join(blocks), refs


class OpenAIProvider:
    name = "openai"

    def __init__(self, settings: Settings, usage: LLMUsage | None = None) -> None:
        from ultron.llm.client import ChatJSONClient

        self.usage = usage if usage is not None else LLMUsage()
        self.budget = settings.segment_budget_tokens
        common = dict(
            base_url=settings.llm_base_url, api_key=settings.llm_api_key,
            timeout_seconds=settings.llm_timeout_seconds, max_retries=settings.llm_max_retries,
            retry_base_seconds=settings.llm_retry_base_seconds, usage=self.usage,
        )
        self.client = ChatJSONClient(model=settings.llm_model, **common)
        self.judge_client = (
            self.client if settings.judge_model == settings.llm_model
            else ChatJSONClient(model=settings.judge_model, **common)
        )

    def segment(self, window: list[Message]) -> list[WindowTask]:
        n = len(window)
        body = "\n".join(render_message(i, m) for i, m in enumerate(window, 1))
        return self.client.complete_json(
            SEGMENT_SYSTEM.format(n=n), body, lambda v: validate_cover(v, n), purpose="segmentation"
        )

    def judge(self, messages: list[Message]) -> dict[str, Any] | None:
        return self.judge_client.complete_json(JUDGE_SYSTEM, self._transcript(messages), validate_rubric,
                                               purpose="quality judge")

    def _transcript(self, messages: list[Message]) -> str:
        lines = [render_message(i, m) for i, m in enumerate(messages, 1)]
        if sum(count_tokens(line) for line in lines) > self.budget:  # keep every message, shorten each to its share
            share = max(32, self.budget // max(1, len(lines)))
            lines = [truncate_to_tokens(line, share) for line in lines]
        return "\n".join(lines)

    def extract_memories(self, messages: list[Message], task_type: str | None) -> list[dict[str, Any]]:
        header = f"Task type: {task_type}\n" if task_type else ""
        return self.client.complete_json(EXTRACT_SYSTEM, header + self._transcript(messages), validate_memories,
                                         purpose="memory extraction")

    def extract_from_text(self, text: str) -> list[dict[str, Any]]:
        return self.client.complete_json(TEXT_EXTRACT_SYSTEM, truncate_to_tokens(text, self.budget),
                                         validate_memories, purpose="text extraction")

    def classify_memory(self, content: str, context: str, resolution: str, tags: list[str]) -> str:
        body = _memory_text({"content": content, "context": context, "resolution": resolution}) + f"\ntags: {tags}"
        return self.client.complete_json(CLASSIFY_SYSTEM, body, validate_type, purpose="memory type")

    def summarize(self, content: str, context: str, resolution: str) -> tuple[str, str]:
        body = _memory_text({"content": content, "context": context, "resolution": resolution})
        return self.client.complete_json(SUMMARY_SYSTEM, body, validate_summaries, purpose="memory summary")

    def same_memory(self, a: dict[str, str], b: dict[str, str]) -> bool:
        body = "A:\n" + _memory_text(a) + "\n\nB:\n" + _memory_text(b)
        return self.client.complete_json(SAME_SYSTEM, body, validate_same, purpose="duplicate check")

    def merge_memories(self, existing: dict[str, str], incoming: dict[str, str]) -> dict[str, str]:
        body = "EXISTING:\n" + _memory_text(existing) + "\n\nINCOMING:\n" + _memory_text(incoming)
        return self.client.complete_json(MERGE_SYSTEM, body, validate_merged, purpose="memory merge")

    def label_cluster(self, texts: list[str]) -> str:
        body = "\n".join(f"- {t}" for t in texts)
        return self.client.complete_json(LABEL_SYSTEM, body, validate_label, purpose="cluster topic")

    def synthesize_skill(self, topic: str, memories: list[dict[str, Any]]) -> dict[str, Any]:
        body, refs = skill_prompt(topic, memories, self.budget)
        return self.client.complete_json(SKILL_SYSTEM, body, lambda v: validate_skill(v, refs),
                                         purpose="skill synthesis")


class RulesProvider:
    """Offline provider: deterministic algorithms for every task; no judge (the
    deterministic quality signals stand alone)."""

    name = "rules"

    def __init__(self, settings: Settings | None = None, usage: LLMUsage | None = None) -> None:
        self.usage = usage if usage is not None else LLMUsage()

    def segment(self, window: list[Message]) -> list[WindowTask]:
        from ultron.llm.rules_segmenter import segment_window

        return validate_cover({"tasks": [{"start": s, "end": e, "topic": t} for s, e, t in segment_window(window)]},
                              len(window))

    def judge(self, messages: list[Message]) -> dict[str, Any] | None:
        return None

    def extract_memories(self, messages: list[Message], task_type: str | None) -> list[dict[str, Any]]:
        from ultron.memory import rules

        return validate_memories({"memories": rules.extract_memories(messages, task_type=task_type)})

    def extract_from_text(self, text: str) -> list[dict[str, Any]]:
        from ultron.memory import rules

        return validate_memories({"memories": rules.extract_from_text(text)})

    def classify_memory(self, content: str, context: str, resolution: str, tags: list[str]) -> str:
        from ultron.memory import rules

        return validate_type(rules.classify_memory_type(content, context, resolution, tags))

    def summarize(self, content: str, context: str, resolution: str) -> tuple[str, str]:
        from ultron.memory import rules

        return rules.summarize_l0(content, context, resolution), rules.overview_l1(content, context, resolution)

    def same_memory(self, a: dict[str, str], b: dict[str, str]) -> bool:
        from ultron.memory import rules

        return rules.is_same_memory(a, b)

    def merge_memories(self, existing: dict[str, str], incoming: dict[str, str]) -> dict[str, str]:
        from ultron.memory import rules

        return validate_merged(rules.merge_bodies(existing, incoming))

    def label_cluster(self, texts: list[str]) -> str:
        from ultron.clusters.topics import label_from_texts

        return label_from_texts(texts)

    def synthesize_skill(self, topic: str, memories: list[dict[str, Any]]) -> dict[str, Any]:
        from ultron.skills.synthesis import synthesize

        return validate_skill(synthesize(topic, memories), allow_no_steps=True)


def build_provider(settings: Settings, usage: LLMUsage | None = None) -> LLMProvider:
    if settings.resolved_llm_provider == "openai":
        return OpenAIProvider(settings, usage)
    return RulesProvider(settings, usage)
