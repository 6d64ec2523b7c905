"""``pattern`` memories: a multi-step procedure that worked (kind procedural).

An episode with at least ``PATTERN_MIN_CALLS`` successful non-housekeeping tool
calls, every failed call followed by a later success of the same tool (or a fix
found by the error rule), whose last tool result is not an error and which ends with
an assistant text answer (closing thanks after it allowed). content = the goal;
resolution = the ordered steps with a gist of each call's key argument (command,
file name, query, or a few ``key=value``), runs of the same tool collapsed ("Read
x3: a.toml, b.toml, c.toml") except for shell commands, each of which is a step;
tools_used = tool names in order, deduplicated; context = the episode's other
requests and "Outcome: <the final answer's first sentence>".

Confidence: 0.45 + 0.04 * min(successful steps - 3, 5) + 0.10 [the final answer
reports completion] + 0.15 [the user's next turn confirms it works; plain thanks
+ 0.05] - 0.05 per resolved error (at most - 0.15) - 0.10 [read-only steps] - 0.20
[the final answer admits a failure].
"""

from __future__ import annotations

import os
import re
from typing import Any

from ultron.heuristics.candidates import CONTENT_CHARS, PROCEDURE_CHARS, candidate
from ultron.heuristics.episodes import CONTINUE, READ_TOOL, Call, Digest, is_closing
from ultron.heuristics.cues import KEEP_STEPS, is_security_lesson, user_confirms
from ultron.heuristics.lessons import is_standing
from ultron.heuristics.errors import SUCCESS_WORD, USER_SUCCESS
from ultron.heuristics.gists import COMMAND_KEYS, arg_gist
from ultron.heuristics.text import clip, first_sentence, sentences

PATTERN_MIN_CALLS = 3
_LOOKUP_STEP = re.compile(
    r"^\d+\. [^:]+: `(?:ssh \S+ ['\"]?)?(?:cd|ls|cat|head|tail|grep|rg|find|pwd|echo|which|wc|tree|stat|df|du|"
    r"pg_lsclusters|git (?:status|log|diff|show)|kubectl (?:get|describe)|docker ps|systemctl status)\b[^`]*`?['\"]?`?$")
_GIST_CHARS = 96           # a step's command: long enough to keep the flags that make it work

_I = re.IGNORECASE

_ASKS_MORE = re.compile(r"\?\s*$|^\W*(?:want me|shall i|should i|let me know|if you)\b", _I)
_DONE_OPENING = re.compile(r"^\W*(?:all )?(?:done|finished|complete[d]?|all set)\b", _I)
_USER_THANKS = re.compile(r"\b(?:thanks|thank you|thx|ty|appreciate|cheers)\b|[👍👌🙏🎉✅]", _I)
_ASSISTANT_FAILURE = re.compile(
    r"\bi (?:was|am) (?:unable|not able) to\b|\bi (?:couldn'?t|could not|wasn'?t able to|failed to)\b|"
    r"\bunfortunately,? (?:i|it|the|this)\b.{0,60}\b(?:not|n't|unable|fail)|\b(?:did not|didn'?t) (?:work|succeed)\b|"
    # an investigation that found nothing: no procedure in it
    r"\bnothing (?:obvious|conclusive|stands out|(?:in|on) \w+ (?:itself|side))\b|\bno (?:clear|obvious) (?:cause|culprit|reason)\b|"
    r"\bprobably not the cause\b|\b(?:couldn'?t|could not|can'?t|cannot) (?:find|pin|identify|reproduce) (?:the|a|any|it)\b",
    _I)
_COMPLETION = re.compile(
    r"\b(?:done|complete[ds]?|finished|passe[sd]|pass|merged|deployed|restored|backfilled|rotated|installed|live|success(?:ful(?:ly)?)?|created|updated|published|committed|booked|"
    r"cancell?ed|modified|all (?:set|good|tests pass)|is ready|now works|works|has been \w+ed)\b|✓", _I)


def extract_patterns(d: Digest, task_type: str | None, fixed_errors: set[int],
                     corrected: set[int] = frozenset()) -> list[dict[str, Any]]:
    """``corrected``: user messages that correct the agent; an episode holding one, or
    followed by one, did not do it the way the user wanted, so it is no procedure."""
    out: list[dict[str, Any]] = []
    by_episode: dict[int, list[Call]] = {}
    for c in d.calls:
        if not c.rejected:
            by_episode.setdefault(c.episode, []).append(c)
    for ep, (s, e) in enumerate(d.episodes):
        calls = by_episode.get(ep, [])
        work = [c for c in calls if not c.housekeeping]
        ok = [c for c in work if c.error is False]
        steps = sum(_steps(c) for c in ok)
        if steps < PATTERN_MIN_CALLS:
            continue
        if any(j in corrected for j in range(s, e)) or _next_user(d, e) in corrected:
            continue
        # ends with an assistant text answer
        last = -1
        for j in range(e - 1, s - 1, -1):
            if d.kind[j] in ("assistant", "tool", "user"):
                last = j
                break
        while last >= s and d.kind[last] == "user" and is_closing(d.text[last]):   # thanks / bye after it
            last -= 1
            while last >= s and d.kind[last] not in ("assistant", "tool", "user"):
                last -= 1
        if last < s or d.kind[last] != "assistant" or d.msg_calls.get(last) or len(d.text[last]) < 20:
            continue
        results = [c for c in work if c.error is not None]
        if results and results[-1].error:
            continue
        errors = [c for c in work if c.error]
        unresolved = [c for c in errors if c.pos not in fixed_errors
                      and not any(x.name == c.name and x.error is False and x.pos > c.pos for x in work)]
        if unresolved:
            continue
        goal = d.episode_request(ep)
        if not goal:
            continue
        final = d.text[last]
        # steps: runs of the same tool collapsed (not for commands, each of which is a step)
        runs: list[tuple[str, list[str], list[int]]] = []     # (tool, distinct gists, [count])
        for c in ok:
            gist = arg_gist(c.args, c.raw, _GIST_CHARS)
            command = c.args is not None and any(isinstance(c.args.get(k), str) for k in COMMAND_KEYS)
            parts = _chain_parts(c)
            if len(parts) > 1:            # a chained command: each part is a step of its own
                runs.extend((c.name, [f"`{clip(p, _GIST_CHARS)}`"], [1]) for p in parts[:4])
                continue
            if runs and runs[-1][0] == c.name and not command:
                runs[-1][2][0] += 1
                if gist and gist not in runs[-1][1]:
                    runs[-1][1].append(gist)
            else:
                runs.append((c.name, [gist] if gist else [], [1]))
        lines = []
        for n, (name, gists, (cnt,)) in enumerate(runs, 1):
            label = f"{name} x{cnt}" if cnt > 1 else name
            shown = ", ".join(_distinct(gists)[:6]) + (", …" if len(gists) > 6 else "")
            lines.append(f"{n}. {label}: {shown}" if shown else f"{n}. {label}")
        if sum(len(x) + 1 for x in lines) > PROCEDURE_CHARS - 30:
            # too long to show whole: the look-ups go first ("cd /tmp", "pg_lsclusters"), the
            # steps that change something stay, so the procedure still reads end to end
            keep = [ln for ln in lines if not _LOOKUP_STEP.match(ln)]
            lines = [re.sub(r"^\d+\.", f"{n}.", ln) for n, ln in enumerate(keep or lines, 1)]
        resolution = ""
        for n, ln in enumerate(lines):
            cand = (resolution + "\n" + ln) if resolution else ln
            if len(cand) > PROCEDURE_CHARS - 30:
                resolution += f"\n… (+{len(lines) - n} more steps)"
                break
            resolution = cand
        tools = list(dict.fromkeys(c.name for c in ok))
        user_after = d.next_user_text(last)
        # the user's word on the result: a turn after the last call of the episode ("perfect, thanks -
        # keep that as our standard"), or the first one after the episode
        after_work = [d.text[j] for j in range(ok[-1].msg + 1, e) if d.kind[j] == "user"]
        user_after = " ".join(after_work[:1] + [user_after]) if after_work else user_after
        keep = bool(KEEP_STEPS.search(user_after[:600]))
        confirmed = 0.15 if USER_SUCCESS.search(user_after[:400]) or keep else (
            0.05 if _USER_THANKS.search(user_after[:400]) else 0.0)
        all_reads = all(READ_TOOL.match(c.name) for c in ok)
        # a one-off change to code or docs ("rename X to Y", "add a test for Z"), made mostly of
        # edits: the change is the deliverable, there is no procedure in it to reuse
        edits = sum(1 for c in ok if _EDIT_TOOL.search(c.name) or _EDIT_CMD.match(_command(c)))
        changes = [c for c in ok if c.kind != "read" and not READ_TOOL.match(c.name)]
        one_off = _EDIT_GOAL.match(goal) is not None and edits * 2 >= len(changes)
        conf = (0.42 + 0.04 * min(steps - PATTERN_MIN_CALLS, 5)
                + (0.10 if _COMPLETION.search(final[:1500]) else 0.0) + confirmed
                - min(0.15, 0.05 * len(errors)) - (0.10 if all_reads else 0.0)
                - (0.20 if _ASSISTANT_FAILURE.search(final[:1500]) else 0.0) - (0.10 if one_off else 0.0))
        # the agent's closing account names what was done and how it was checked: its first sentences
        outcome = clip(" ".join(x for x in sentences(final[:2000])[:3] if not _ASKS_MORE.search(x)), 380)
        follow = [d.text[j] for j in range(s, e) if d.kind[j] == "user" and d.text[j] != goal
                  and not CONTINUE.match(d.text[j]) and not is_closing(d.text[j])][:2]
        context = " ".join([f"Also asked: {clip(' / '.join(follow), 300)}"] if follow else []) + (
            f" Outcome: {outcome}" if outcome else "")
        typ = "security" if is_security_lesson(" ".join([goal, *follow, final[:600]])) else "pattern"
        # the task, without the standing rules or preferences said with it (their own memories)
        task = " ".join(x for x in sentences(goal) if not is_standing(x)) or goal
        mem = candidate(typ, "procedural", clip(task, CONTENT_CHARS), context, resolution, tools,
                        conf, task_type, [c.raw[:300] for c in ok[:8]], resolution_chars=PROCEDURE_CHARS)
        # confirmed: the user says it worked, or thanks the agent after a finished run whose last
        # call reported success (tests passed, "deployed", exit 0 ...)
        # the run's last call reported success, or the agent's final answer opens by reporting it done
        verified = bool(_COMPLETION.search(final[:1500])) and (
            bool(SUCCESS_WORD.search(ok[-1].result[:600])) or bool(_DONE_OPENING.match(final)))
        mem["confirmed"] = (keep or user_confirms(user_after) or bool(USER_SUCCESS.search(user_after[:400]))
                            or (verified and bool(_USER_THANKS.search(user_after[:200]))))
        out.append(mem)
    return out


def _distinct(gists: list[str]) -> list[str]:
    """A run's gists with the part they share cut from all but the first: eleven calls to
    ``http://es:9200/...`` read as ``_reindex``, ``_aliases``, ``_count``, the steps themselves."""
    if len(gists) < 2:
        return gists
    common = os.path.commonprefix(gists)
    cut = max(common.rfind("/"), common.rfind(" ")) + 1
    if cut < 8:
        return gists
    return [gists[0]] + [g[cut:] or g for g in gists[1:]]


def _next_user(d: Digest, start: int) -> int:
    return next((j for j in range(start, len(d.kind)) if d.kind[j] == "user"), -1)


_CHAIN = re.compile(r"\s(?:&&|\|\||;)\s|;\s|\n")
_REMOTE = re.compile(r"^\s*ssh\s+(?:-\S+(?:\s+\S+)?\s+)*\S+\s+(['\"])(.*)\1\s*$", re.DOTALL)
_QUOTED = re.compile(r"'[^']*'|\"(?:[^\"\\]|\\.)*\"")


def _chain_parts(c: Call) -> list[str]:
    """The commands of a shell call chained with ``&&`` / ``;`` / new lines ([] when it has none).
    A separator inside quotes (``ssh host 'a; b'``) belongs to its argument: quoted spans are
    masked before splitting, and a line continued with a backslash is one command."""
    cmd = _command(c)[:600].replace("\\\n", " ")
    remote = _REMOTE.match(cmd)
    if remote:                   # ssh host '<commands>': the commands are the steps
        cmd = remote.group(2)
    masked = _QUOTED.sub(lambda m: "\0" * len(m.group(0)), cmd)
    parts, start = [], 0
    for m in _CHAIN.finditer(masked):
        parts.append(cmd[start:m.start()])
        start = m.end()
    parts.append(cmd[start:])
    return [p.strip() for p in parts if p.strip()]


def _steps(c: Call) -> int:
    """Steps in one call: a chained shell command is several steps of the procedure
    (``python -m venv .venv && pip install -e . && pytest``), at most four."""
    return max(1, min(4, len(_chain_parts(c))))


_EDIT_TOOL = re.compile(r"edit|write|str_replace|apply_patch|patch|create_file|fs_write", _I)
_EDIT_CMD = re.compile(r"^\s*(?:sed -i|mv |git mv|cp |rm |touch |cat >|echo .*>)", _I)
_EDIT_GOAL = re.compile(
    r"^\W*(?:(?:can you|could you|please|pls|now|ok(?:ay)?|hey|hi)\W+)*(?:rename|add|fix|change|update|remove|delete|"
    r"refactor|write|implement|create|move|tweak|bump|replace|make)\b", _I)


def _command(c: Call) -> str:
    return next((v for k, v in (c.args or {}).items() if k in COMMAND_KEYS and isinstance(v, str)), "")
