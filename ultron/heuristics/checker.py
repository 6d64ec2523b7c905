"""What the memory rubric (``docs/rubric.md``) lets a program check: the mechanical flags.

A reviewer judges whether a memory is a lesson; some failures need no judgement and are
flagged here, in tests and in ``benchmarks/guidance.py``:

* ``restates_request``: the content is (most of) the request that opened its segment:
  the task, not something learned (a person's later turn may state the lesson itself);
* ``bare_step``: a numbered step that is a tool's name without its substance;
* ``narration_step``: a numbered step that narrates ("Checking the Dockerfile") instead of
  saying what to do;
* ``cut_off``: the content or the resolution's prose ends mid-thought (a trailing ":",
  ",", ";", "(" or an ellipsis where the text was clipped);
* ``instance_name``: a code from one session (a booking reference, a ticket key, a
  customer's id: capitals with digits) that the person typed and no other session of the
  checked set knows;
* ``same_as_sibling``: two memories of one segment that say the same thing.

And for a skill (:func:`check_skill`, which the skill quality gate applies):

* ``topic_title``: a title that lists topic terms ("Docker · requirements.txt") instead of
  naming what the skill does;
* ``unshared``: no step that two memories share (cases side by side, not a procedure), or
  steps that rest on under a third of the memories (a cluster of several problems);
* ``bare_step`` / ``talk_step`` / ``cut_off``: a step that is a raw tool call, that talks
  to someone ("Unfortunately, I cannot …") instead of saying what to do, or that stops
  mid-thought;
* ``instance_branch``: a decision branch keyed by one case's code instead of a symptom.

Pure functions over plain dicts: ``{content, context, resolution, session, segment}``
and, per memory, the person's requests of its segment.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterable

from ultron.heuristics.text import containment, words

CHECKS = ("restates_request", "bare_step", "narration_step", "cut_off", "instance_name", "same_as_sibling")

_STEP = re.compile(r"^\s*\d+\.\s+(.*\S)\s*$", re.MULTILINE)
_NAME_ONLY = re.compile(r"^[A-Za-z_][\w.-]*$")
# a step that opens with a progressive verb and holds no command, path or value
_NARRATION = re.compile(r"^(?:[A-Z][a-z]+ing|Let me|Now I|I'll|I will|I'm going to)\b")
_SUBSTANCE = re.compile(r"[=/`$|<>]|--?\w|\w\.\w|\w\(|\d")
_OPEN_END = (":", ",", ";", "(", "…", "...")
# a code: a ticket key (AUTH-144) or a booking reference / id (FQ8APE, H9ZU1C): capitals with digits
_NAMEISH = re.compile(r"\b[A-Z][A-Z0-9]*-\d+\b|\b(?=[A-Z0-9]*\d)(?=[A-Z0-9]*[A-Z])[A-Z0-9]{5,10}\b")
RESTATES = 0.8
SAME = 0.75


@dataclass(frozen=True)
class Flag:
    check: str
    memory: int          # index in the checked list
    detail: str


def numbered_steps(resolution: str) -> list[str]:
    """A resolution's numbered steps ("1. …"), without their numbers."""
    return _STEP.findall(resolution or "")


def prose_of(resolution: str) -> str:
    """A resolution without its numbered steps."""
    return _STEP.sub("", resolution or "").strip()


def _cut_off(text: str) -> bool:
    return (text or "").rstrip().endswith(_OPEN_END)


def check_memory(mem: dict[str, Any], requests: Iterable[str] = ()) -> list[tuple[str, str]]:
    """The flags of one memory, as (check, detail); ``requests`` are its segment's person's
    turns, the opening request first."""
    out: list[tuple[str, str]] = []
    content = mem.get("content") or ""
    cw = words(content)
    for r in list(requests)[:1]:
        rw = words(r)
        if cw and rw and len(cw & rw) / len(cw) >= RESTATES:
            out.append(("restates_request", r[:120]))
    for step in numbered_steps(mem.get("resolution") or ""):
        if _NAME_ONLY.match(step.strip()):
            out.append(("bare_step", step[:80]))
        elif _NARRATION.match(step) and not _SUBSTANCE.search(step):
            out.append(("narration_step", step[:80]))
    for field, text in (("content", content), ("resolution", prose_of(mem.get("resolution") or ""))):
        if _cut_off(text):
            out.append(("cut_off", f"{field} ends: …{text.rstrip()[-40:]}"))
    return out


def check(memories: list[dict[str, Any]], requests: list[list[str]]) -> list[Flag]:
    """Every flag of a set of memories (``requests[i]``: the person's turns of memory i's
    segment). Instance names and siblings are judged across the set: a name is one
    session's when no other session of the set has it."""
    flags = [Flag(c, i, d) for i, m in enumerate(memories) for c, d in check_memory(m, requests[i])]
    sessions_of: dict[str, set[str]] = defaultdict(set)
    for m, reqs in zip(memories, requests):
        for r in reqs:
            for name in _NAMEISH.findall(r):
                sessions_of[name].add(str(m.get("session")))
    for i, m in enumerate(memories):
        text = " ".join(m.get(k) or "" for k in ("content", "context", "resolution"))
        mine = {n for n in _NAMEISH.findall(text) if len(sessions_of.get(n, ())) == 1}
        for name in sorted(mine):
            flags.append(Flag("instance_name", i, name))
    by_segment: dict[tuple[str, Any], list[int]] = defaultdict(list)
    for i, m in enumerate(memories):
        by_segment[(str(m.get("session")), m.get("segment"))].append(i)
    for idx in by_segment.values():
        for a_pos, a in enumerate(idx):
            for b in idx[a_pos + 1:]:
                wa = words(memories[a]["content"] + " " + (memories[a].get("resolution") or ""))
                wb = words(memories[b]["content"] + " " + (memories[b].get("resolution") or ""))
                if containment(wa, wb) >= SAME:
                    flags.append(Flag("same_as_sibling", b, memories[a]["content"][:80]))
    return flags


SKILL_CHECKS = ("topic_title", "unshared", "bare_step", "talk_step", "cut_off", "instance_branch")
_TOOL_TRACE = re.compile(r"^[A-Za-z_][\w.-]*\s+(?:\{|[A-Za-z_]\w*=)")
_TALK = re.compile(r"^(?:I\b|I'|Your\b|You(?:'re| are)\b|Unfortunately|Sorry|We\b|Let me|Thank)|\?\s*$")


def _cut_step(text: str) -> bool:
    t = text.rstrip()
    return t.endswith(("…", ":", ",", ";")) and t.count("`") % 2 == 0 and not t.endswith("…`")


def check_skill(name: str, steps: Iterable[tuple[str, Iterable[str]]], conditions: Iterable[str],
                members: int) -> list[tuple[str, str]]:
    """The flags of one skill: its title, its steps as (text, cited ids), its branches'
    conditions, and how many memories it was made from."""
    out: list[tuple[str, str]] = []
    steps = [(t, tuple(e)) for t, e in steps]
    if "·" in name:
        out.append(("topic_title", f"the title {name[:60]!r} lists topic terms instead of naming what the skill does"))
    if members >= 2 and steps and not any(len(e) >= 2 for _, e in steps):
        out.append(("unshared", "no step is shared by two memories: the skill retells cases instead of distilling them"))
    behind = {i for _, e in steps for i in e}
    if members >= 4 and steps and 3 * len(behind) < members:
        out.append(("unshared", f"the steps rest on {len(behind)} of {members} memories: the cluster is not one "
                                "procedure"))
    for i, (text, _) in enumerate(steps, 1):
        text = text.strip()
        if _TOOL_TRACE.match(text) and "`" not in text:
            out.append(("bare_step", f"step {i} is a raw tool call: {text[:60]!r}"))
        elif _TALK.search(text):
            out.append(("talk_step", f"step {i} talks to someone instead of saying what to do: {text[:60]!r}"))
        elif _cut_step(text):
            out.append(("cut_off", f"step {i} is cut off: {text[:60]!r}"))
    for i, cond in enumerate(conditions, 1):
        code = _NAMEISH.search(cond)
        if code:
            out.append(("instance_branch", f"decision branch {i} is keyed by one case's name {code.group(0)!r}, "
                                           "not a symptom"))
    return out


def counts(flags: Iterable[Flag]) -> dict[str, int]:
    out = {c: 0 for c in CHECKS}
    for f in flags:
        out[f.check] += 1
    return out
