"""Offline synthesis of a troubleshooting skill: several error memories with one symptom
become "you see X; check these files for these causes; each cause has its fix; confirm".

This is how an expert writes up a family of fixes (``docs/rubric.md``, skills): the title
names the capability ("Fix ModuleNotFoundError when a container crashes on start"), the
situations name the symptom an agent can observe (the error text with the parts that
differ between sessions shown as "…"), the steps are what every case shares (where to
look, how to confirm), and each decision branch runs from a cause an agent can check to
the fix that removed it. A member whose error is another one (a different exception) is
left out: a skill never mixes unrelated problems.

Memories come as :mod:`ultron.learned.lessons` writes error lessons: content = what was
wrong, context = "Error: <line> Task: <request>", resolution = the fix, then numbered steps.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from ultron.heuristics.checker import numbered_steps, prose_of
from ultron.heuristics.phrasing import common_form, file_names, first_error, without_opener
from ultron.heuristics.skill_text import clip, near_duplicate, tokens

ERROR_TYPES = ("error", "security")
MAX_BRANCHES = 8
MAX_PITFALLS = 6
STEP_CHARS = 300
CONDITION_CHARS = 200
ACTION_CHARS = 300
DESCRIPTION_CHARS = 600
_ERROR = re.compile(r"\bError:\s*(.+?)(?=\s+(?:Task|Attempted|Applies when|Seen when):|$)", re.S)
_TASK = re.compile(r"\bTask:\s*(.+)", re.S)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`])")
_CODE = re.compile(r"`[^`]+`|[=/$]|--?\w|\w\.\w")
_OUTCOME_TAIL = re.compile(r",\s*so\s+(?:that\s+)?(?:nothing|it|the|no)\b.*$", re.I)


@dataclass
class _Case:
    """One member memory read as a case: its symptom, situation, cause, fix and steps."""

    id: str
    error: str
    situation: str
    cause: str
    fix: str
    steps: list[str] = field(default_factory=list)


def _first_sentence(text: str) -> str:
    text = " ".join((text or "").split())
    return _SENTENCE_END.split(text, maxsplit=1)[0] if text else ""


def _case(m: dict[str, Any]) -> _Case:
    context = str(m.get("context") or "")
    resolution = str(m.get("resolution") or "")
    err = _ERROR.search(context)
    task = _TASK.search(context)
    prose = prose_of(resolution)
    return _Case(
        id=m["id"],
        error=" ".join(err.group(1).split()) if err else "",
        situation=_first_sentence(task.group(1)) if task else "",
        cause=without_opener(_first_sentence(str(m.get("content") or ""))),
        fix=_first_sentence(prose),
        steps=numbered_steps(resolution),
    )


def troubleshooting(topic: str, memories: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The skill dict, or None when the members share no symptom (the generic synthesis
    then reads them)."""
    cases = [_case(m) for m in memories if m.get("memory_type") in ERROR_TYPES and m.get("id")]
    kind = first_error(c.error or c.cause for c in cases)
    if kind and 2 * sum(kind in c.error or kind in c.cause for c in cases) > len(cases):
        # most cases name this error: the others are another problem, left out
        cases = [c for c in cases if kind in c.error or kind in c.cause]
    else:
        kind = ""
    if len(cases) < 2:
        return None
    errors = [c.error for c in cases if c.error]
    # the symptom is the error most cases show, the parts that differ as "…"; too little shared is none
    symptom = _shared(errors) if 2 * len(errors) > len(cases) else ""
    situation = _shared([c.situation for c in cases if c.situation])
    name = _title(kind, situation, topic)
    steps = _steps(cases, symptom)
    if not steps or not (kind or symptom or situation):
        return None        # no symptom or nothing the cases share: not one problem
    branches = _branches(cases)
    pitfalls = _pitfalls(cases, symptom)
    when = []
    if symptom:
        when.append(f"You see `{symptom}`.")
    sit = _generic(situation)
    if sit:
        when.append(sit[:1].upper() + sit[1:] + ".")
    if not when:
        when.append(f"The task involves {topic}." if topic else "An error like the ones below comes up.")
    head = f"{name}. " + (f"Symptom: {symptom}. " if symptom else "")
    fixes: list[str] = []
    for b in branches:
        # whole fixes only, as many as fit: a fix cut mid-sentence reads as noise
        fix = _OUTCOME_TAIL.sub("", b["action"]).rstrip(". ")
        if len(head) + len("Known fixes: .") + sum(len(f) + 2 for f in fixes) + len(fix) > DESCRIPTION_CHARS:
            break
        fixes.append(fix)
    description = head + (f"Known fixes: {'; '.join(fixes)}." if fixes else "")
    return {"name": name, "description": description, "when_to_use": when, "steps": steps,
            "pitfalls": pitfalls, "branches": branches}


def _shared(texts: list[str]) -> str:
    """What the texts share, their differing names shown as "…" ("The … container crashes on
    start."), or "" when little is shared (fewer than three words, or under half of it)."""
    if len(texts) < 2:
        return ""
    form = common_form(texts)
    words = [w for w in form.split() if "…" not in w]
    if len(words) < 3 or len(words) < 0.5 * len(form.split()):
        return ""
    return form


def _generic(situation: str) -> str:
    """"The … container crashes on start." reads "a container crashes on start": the one-off
    name goes with its article; "" when a name stays in the middle."""
    sit = re.split(r"[.?!;]\s", situation.rstrip(".?! "))[0]
    sit = re.sub(r"^(?:the|a|an|my|our)\s+(?:\S*…\S*\s+)+", "a ", sit, flags=re.I)
    sit = re.sub(r"^(?:The|A|An)\b", lambda m: m.group(0).lower(), sit)
    return "" if "…" in sit else sit


def _lead(text: str) -> str:
    """"If the build …", not "If The build …"; names keep their capital."""
    return re.sub(r"^(?:The|A|An|This|That|It)\b", lambda m: m.group(0).lower(), text)


def _title(kind: str, situation: str, topic: str) -> str:
    sit = _generic(situation)
    if kind and sit:
        return clip(f"Fix {kind} when {sit}", 100)
    if kind:
        shown = ", ".join(t.strip() for t in re.split(r"\s*·\s*", topic or "") if t.strip())
        return clip(f"Fix {kind}" + (f" ({shown})" if shown else ""), 100)
    if sit:
        return clip(f"Fix: {sit}", 100)
    return clip("Troubleshooting " + ", ".join(t.strip() for t in re.split(r"\s*·\s*", topic or "") if t.strip()),
                100) if topic else "Troubleshooting"


_PIN = re.compile(r"(?<=[A-Za-z0-9_\]])==\d[\w.]*")
_SUFFIXED = re.compile(r"\bDockerfile\.[\w-]+")


def _general(text: str) -> str:
    """One case's specifics out of a skill's text: version pins ("flask==3.0.3" reads "flask")
    and a file's one-off suffix ("Dockerfile.worker" reads "the Dockerfile")."""
    text = _PIN.sub("", text)
    return _SUFFIXED.sub("the Dockerfile", text).replace("the the Dockerfile", "the Dockerfile")


def _steps(cases: list[_Case], symptom: str) -> list[dict[str, Any]]:
    """What the error names, where to look (the files most cases name), then what most cases
    did to confirm."""
    out: list[dict[str, Any]] = []
    named: dict[str, list[str]] = {}
    for c in cases:
        for f in file_names(" ".join([c.cause, c.fix])):
            named.setdefault(f, []).append(c.id)
    look = [f for f, who in sorted(named.items(), key=lambda kv: -len(kv[1])) if len(who) >= 2][:3]
    if "…" in symptom:
        who = [c.id for c in cases if c.error]
        out.append({"text": f"Note which name the error reports: `{symptom}`.", "evidence": who})
    if look:
        who = sorted({i for f in look for i in named[f]}, key=[c.id for c in cases].index)
        out.append({"text": f"Check {' and '.join(look)} against the causes under Decision branches, "
                            f"and apply the fix of the cause that matches.", "evidence": who})
    # steps most cases share (a rebuild, a test run): the differing names shown as "…"
    groups: list[tuple[set[str], list[str], list[str]]] = []
    for c in cases:
        for step in c.steps:
            words = tokens(step)
            g = next((g for g in groups if near_duplicate(words, g[0])), None)
            if g is None:
                groups.append((words, [step], [c.id]))
            elif c.id not in g[2]:
                g[1].append(step)
                g[2].append(c.id)
    need = max(2, math.ceil(len(cases) / 2))
    for words, variants, who in groups:
        if len(who) >= need:
            out.append({"text": clip(f"Confirm the fix: `{_template(variants)}`", STEP_CHARS), "evidence": who})
    return out


def _template(commands: list[str]) -> str:
    """The command most cases ran, each one's own name as ``<name>``: "docker build -t api . &&
    docker run --rm api" and "… -t etl . && … etl" read "docker build -t <name> . && docker run
    --rm <name>". Variants of another shape (a compose run among plain runs) are left out."""
    by_shape: dict[int, list[str]] = {}
    for c in commands:
        by_shape.setdefault(len(c.split()), []).append(c.strip("`"))
    most = max(by_shape.values(), key=len)
    return common_form(most).replace("…", "<name>")


def _branches(cases: list[_Case]) -> list[dict[str, Any]]:
    """From a cause an agent can check to its fix; cases with the same cause are one branch."""
    out: list[dict[str, Any]] = []
    for c in cases:
        if not c.cause or not c.fix:
            continue
        action = c.fix
        if not _CODE.search(action):
            # the fix says what to do but not with what: the edit that made it does
            edit = next((s for s in c.steps if s.startswith(("Write ", "In "))), "")
            if edit:
                action = f"{action.rstrip('.')}: {edit}"
        cond = _general(_OUTCOME_TAIL.sub("", c.cause).rstrip(" ."))
        action = _general(action)
        same = next((b for b in out if near_duplicate(tokens(cond), tokens(b["condition"]))), None)
        if same:
            same["evidence"].append(c.id)
            continue
        out.append({"condition": clip(_lead(cond), CONDITION_CHARS), "action": clip(action, ACTION_CHARS),
                    "evidence": [c.id]})
    out.sort(key=lambda b: -len(b["evidence"]))
    return out[:MAX_BRANCHES]


def _pitfalls(cases: list[_Case], symptom: str = "") -> list[dict[str, Any]]:
    """What goes wrong, each with the sign it gives (the shared symptom, else the case's error)."""
    out: list[dict[str, Any]] = []
    for c in cases:
        if not c.cause:
            continue
        cause = _general(_OUTCOME_TAIL.sub("", c.cause).rstrip(" ."))
        sign = symptom or c.error
        cause = cause[:1].upper() + cause[1:] if cause.startswith("the ") else cause
        text = f"{cause}" + (f" (sign: `{sign}`)" if sign else "")
        if any(near_duplicate(tokens(cause), tokens(p["text"])) for p in out):
            continue
        out.append({"text": clip(text, 260), "evidence": [c.id]})
    return out[:MAX_PITFALLS]
