"""``error`` memories: a failed tool call and what fixed it (kind procedural).

A failed tool call (not a call the user rejected, not a housekeeping tool such as
TodoWrite / ExitPlanMode) is paired with the later successful call that most
plausibly fixed it, searched among the next ``FIX_WINDOW`` calls of the same
episode: the best by ``same tool`` first, then by argument similarity
(``0.5 * Jaccard + 0.5 * share of the failed call's argument words kept``); a
different tool qualifies only if it is not a mere lookup (a read-only tool or shell
command, unless the failed call was one too) and has similarity >=
``OTHER_TOOL_MIN_SIM`` or is the first success right after the error with a fix
announced ("instead", "let me try / fix / use", "workaround"). Repeats of the same
error (same tool, same message with digits and ids masked) are one memory.

content = "<tool> failed: <error line>" (the exception / ``error:`` line, the last
one of a traceback, never the dump); context = the episode's goal, the latest user
turn and the failing call; resolution = the agent's explanation (sentences with a
cause or fix cue, no questions), the successful calls in between (at most two
shown), then "Worked: <fixing call>" (for a retry of the same tool only the
arguments that changed) or, when the very same call later succeeded unchanged,
"Fix: <the calls in between>. Then re-ran: <call>", with the result when that is
a short status line.

An error with no fix is still emitted, with low confidence, so the caller counts it.
An error whose line is about permissions or credentials is typed ``security``.

Confidence, with a fix: 0.40 + 0.20 [same tool] + 0.15 * similarity + 0.10
[explicit success: a success word in the fix's result, the agent's next text or the
user's next turn] + 0.05 [the agent explained the error] + 0.05 [the fix is the very
next call] - 0.15 [the same error happened again after the fix] - 0.05 [more than
five calls between the error and the fix]. With no fix: 0.20 + 0.10 [the agent
explained it].
"""

from __future__ import annotations

import re
from typing import Any

from ultron.heuristics.candidates import CONTENT_CHARS, candidate
from ultron.heuristics.cues import is_security_lesson, user_confirms
from ultron.heuristics.episodes import ASKS, READ_TOOL, Call, Digest
from ultron.heuristics.gists import arg_similarity, call_gist, changed_gist
from ultron.heuristics.text import RESULT_HEAD, RESULT_TAIL, clip, first_sentence, norm_key, sentences

FIX_WINDOW = 12            # calls after an error searched for its fix
OTHER_TOOL_MIN_SIM = 0.25  # argument similarity for a different tool to count as the fix

_I = re.IGNORECASE

EXC_LINE = re.compile(r"^\s*(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Warning)\b(?::|\s*$)")
ERR_LINE = re.compile(
    r"\[error\]|\berror:|^\s*(?:error\b|fatal\b|npm ERR!|E\s{2,}\S|FAILED\b|failure\b|panic\b|"
    r"exception\b|cannot\b|could not\b|unable to\b)|"
    r"\b(?:command not found|No such file or directory|Permission denied|not found|"
    r"is not (?:available|allowed|defined|recognized)|does not exist|unknown (?:option|command|skill|argument)|"
    r"invalid\b|denied\b|not enough|failed\b|timed? ?out)", _I)
_TOOL_ERR_TAG = re.compile(r"</?tool_use_error>")
_EXIT_LINE = re.compile(r"^\s*exit(?:ed with)? (?:code|status) -?\d+\s*$", _I)
_ERR_PREFIX = re.compile(r"^\s*(?:error|err)\s*[:!-]\s*", _I)
SEC_ERR = re.compile(
    r"permission denied|access denied|\beacces\b|\beperm\b|operation not permitted|\bforbidden\b|\b403\b|"
    r"\b401\b|unauthori[sz]ed|authentication (?:failed|required|error)|not authori[sz]ed|"
    r"invalid (?:token|credentials?|api[ _-]?key|password)|(?:bad|expired|revoked) (?:token|credentials?)|"
    r"ssl certificate|certificate verify failed|\bsecret\b|credential", _I)
_FIX_CUE = re.compile(
    r"\binstead\b|\blet me (?:try|fix|use|correct|change|update|retry|install|add|set)\b|\bwork ?around\b|"
    r"\balternative(?:ly)?\b|\bmanually\b|\bthe (?:fix|issue|problem|error) (?:is|was)\b|\btry (?:again|with)\b", _I)
_CAUSE_CUE = re.compile(
    r"\bbecause\b|\bsince\b|\bdue to\b|\bmeans\b|\bneed(?:s|ed)? to\b|\brequires?\b|\bmissing\b|\bnot (?:set|installed|"
    r"available|supported|found|loaded|enough)\b|\bthe (?:issue|problem|error|cause) (?:is|was)\b|\bhappens when\b|"
    r"\binstead\b|\bshould\b|\blet me\b|\bdoesn'?t (?:exist|support|have|accept)\b|\bisn'?t\b|\bwasn'?t\b", _I)
SUCCESS_WORD = re.compile(
    r"\b(?:success(?:ful(?:ly)?)?|succeeded|passed|works|worked|working now|fixed|resolved|done|completed?|"
    r"created|updated|published|installed|committed|booked|cancell?ed|modified|saved|ok)\b|✓|\ball \d+ tests? passed\b",
    _I)
# The user saying it works now (the pattern rule reads it too).
USER_SUCCESS = re.compile(
    r"\b(?:it|that|this|everything) (?:works|worked|is working|fixed it|did it|did the trick)\b|"
    r"\b(?:works|worked) (?:now|perfectly|great|fine)\b|\b(?:perfect|excellent|awesome|exactly what i)\b|"
    r"\b(?:problem|issue|it)(?:'s| is| has been) (?:solved|resolved|fixed)\b|\blooks good\b|\blgtm\b|\bnice\b|"
    r"\bgreat\b|\b(?:amazing|fantastic|brilliant|love it|exactly right)\b|🎉|🙌", _I)


#: a business rule in a service's refusal (not a technical fault)
POLICY_REJECTION = re.compile(
    r"\b(?:not (?:permitted|allowed|eligible)|only (?:allowed|permitted|possible|available)|ineligible|"
    r"within \d+ (?:days?|hours?|months?)|(?:more|less|older) than \d+ (?:days?|hours?|months?)|policy|"
    r"exceeds? the (?:\w+ )?(?:limit|maximum|allowance)|requires? (?:approval|a manager|an adjuster)|"
    r"(?:rejected|declined|refused)\b.{0,40}\b(?:rule|policy|days|limit))", _I)
_SHELL_TOOL = re.compile(r"bash|shell|exec|terminal|command|run_|sql|python|code|powershell|cmd", _I)


_WHAT_WENT_WRONG = re.compile(r"^\W*(?:what went wrong|caused by|reason|details?)\s*:?\s*$", _I)
_GENERIC_ERR = re.compile(
    r"^\W*(?:FAILURE: )?build failed\b|\bBUILD FAILED\b|^\W*(?:make(?:\[\d+\])?: )?\*\*\*.*\bError \d+\s*$|"
    r"^\W*error: could not compile\b|\bfailed with (?:exit )?(?:code|status)\b|^\W*encountered an error:?\s*$|"
    r"^\W*(?:a )?fatal error occurred:?\s*$|^\W*npm ERR! (?:code|errno|A complete log)\b|^\W*error: command failed\b|"
    r"^\W*warning: build failed\b|^\W*\[?error\]?:?\s*$|waiting for other jobs to finish|^\W*ERROR: Job failed\b", _I)


def error_line(text: str) -> str:
    """The informative line of an error result: an exception line (the last one of a
    traceback), else the first line that reads like an error, else the first line."""
    if not text:
        return ""
    if len(text) > RESULT_HEAD + RESULT_TAIL:
        text = text[:RESULT_HEAD] + "\n" + text[-RESULT_TAIL:]
    text = _TOOL_ERR_TAG.sub("", text)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return ""
    body = [ln for ln in lines if not _EXIT_LINE.match(ln)] or lines
    # a build tool names the real problem under a header ("* What went wrong:", "Caused by:")
    for n, ln in enumerate(body[:-1]):
        if _WHAT_WENT_WRONG.match(ln):
            nxt = body[n + 1].lstrip("> ").strip()
            if len(nxt) >= 12 and not _GENERIC_ERR.search(nxt):
                return nxt
    traceback = any(ln.startswith("Traceback (most recent call last)") for ln in body)
    exc = [ln for ln in body if EXC_LINE.match(ln)]
    if exc:
        return exc[-1] if traceback else exc[0]
    found = [ln for ln in body[:40] if ERR_LINE.search(ln)]
    # "BUILD FAILED", "make: *** Error 2", "A fatal error occurred": true but generic; the
    # line that names what went wrong is the one to remember
    specific = [ln for ln in found if not _GENERIC_ERR.search(ln)]
    if specific or found:
        return (specific or found)[0]
    return body[0]


_OWN_STEP = re.compile(r"^\W*(?:let me|let's|i'?ll|i will|i'?m going to|first,? i|now i|next,? i|i need to check)\b", _I)
CAUSE = re.compile(
    r"\bbecause\b|\bsince\b|\bdue to\b|\bmeans\b|\bmissing\b|\bnot (?:set|installed|available|supported|found|"
    r"loaded|enough|in sync)\b|\bthe (?:issue|problem|error|cause|culprit|reason) (?:is|was)\b|\bhappens when\b|"
    r"\bcaused by\b|\bdoesn'?t (?:exist|support|have|accept|match)\b|\bisn'?t\b|\bwasn'?t\b|\bout of (?:sync|date)\b|"
    r"\brequires?\b|\bexpects?\b|\bonly (?:accepts?|works|supports?)\b|\bno longer\b|\bremoved in\b|\bdeprecated\b", _I)


def _explanation(d: Digest, after_msg: int, before_msg: int) -> str:
    """The agent's sentences between an error and its fix that explain its cause or fix:
    a cause first, then a stated fix; the agent narrating its own next step ("let me
    check ...") only when nothing else is said."""
    ranked: list[tuple[int, int, str]] = []
    n = 0
    for j in range(after_msg + 1, min(before_msg + 1, len(d.kind))):
        if d.kind[j] != "assistant" or not d.text[j]:
            continue
        for s in sentences(d.text[j][:1500]):
            if ASKS.search(s) or s.endswith(":") or len(s) < 12:
                continue
            own = bool(_OWN_STEP.match(s))
            rank = 0 if CAUSE.search(s) and not own else 1 if _FIX_CUE.search(s) and not own else \
                2 if not own else 3 if _FIX_CUE.search(s) else 4
            ranked.append((rank, n, s))
            n += 1
    picked = [s for rank, _, s in sorted(ranked)[:2] if rank < 4]
    if not picked and ranked:
        picked = [ranked[0][2]]
    return clip(" ".join(picked), 260)


_SUMMARY_CUE = re.compile(
    r"\b(?:root cause|cause|the (?:problem|issue|error|culprit|fix|solution) (?:was|is)|fix(?:ed)?|solution|"
    r"because|resolved|works now|now (?:passes|works|builds|starts))\b", _I)


def _closing_summary(d: Digest, after_msg: int, episode_end: int) -> str:
    """The agent's wrap-up of the episode ("Cause: … Fix: …"), when it gives one: the most
    reusable account of an error and its fix."""
    for j in range(min(episode_end, len(d.kind)) - 1, after_msg, -1):
        if d.kind[j] != "assistant" or not d.text[j] or d.msg_calls.get(j):
            continue
        picked = [s for s in sentences(d.text[j][:2500]) if _SUMMARY_CUE.search(s) and not ASKS.search(s)
                  and len(s) >= 15 and not _OWN_STEP.match(s) and not s.rstrip().endswith(":")]
        return clip(" ".join(picked[:2]), 300)
    return ""


_DONE_VERB = re.compile(
    r"\b(?:added|moved|replaced|changed|set|installed|copied|put|fixed|updated|removed|renamed|pinned|switched|"
    r"rebuilt|reordered|upgraded|downgraded|created|edited|declared|configured|enabled|disabled)\b", _I)


def _fix_summary(text: str) -> str:
    """The agent's own account of what fixed it ("Added flask to requirements.txt and rebuilt
    the image"): the first sentence after the fix that reports a change. It is the most
    reusable part of an error memory, and tool gists alone ("write_file Dockerfile") lose it."""
    for sent in sentences(text[:1200])[:3]:
        if len(sent) >= 12 and not ASKS.search(sent) and (_DONE_VERB.search(sent) or _FIX_CUE.search(sent)):
            return clip(sent, 220)
    return ""


def _is_read(c: Call) -> bool:
    """A call that only looks something up (the trajectory scorer's read/write split)."""
    return c.kind == "read" or bool(READ_TOOL.match(c.name))


def _find_fix(d: Digest, err: Call) -> tuple[Call | None, float]:
    best: tuple[float, int, Call, float] | None = None
    first_success = True
    seen = 0
    for c in d.calls[err.pos + 1:]:
        if c.episode != err.episode:
            break
        if c.housekeeping:
            continue
        seen += 1
        if seen > FIX_WINDOW:
            break
        if c.error is not False:
            if c.error and c.name == err.name:
                first_success = False
            continue
        sim = arg_similarity(err, c)
        same = c.name == err.name
        if _is_read(c) and not _is_read(err):
            continue          # looking something up is a step towards a fix, not the fix
        if not same:
            announced = first_success and bool(_FIX_CUE.search(c.text[:600]))
            if sim < OTHER_TOOL_MIN_SIM and not announced:
                first_success = False
                continue
        score = (2.0 if same else 0.0) + sim
        if best is None or score > best[0] + 1e-9:
            best = (score, c.pos, c, sim)
        first_success = False
    if best is None:
        return None, 0.0
    return best[2], best[3]


def extract_errors(d: Digest, task_type: str | None, corrected: set[int] = frozenset()
                   ) -> tuple[list[dict[str, Any]], set[int]]:
    """Error memories, and the positions of the failed calls that found a fix.

    ``corrected``: user messages that correct the agent or state a convention. When one
    comes between an error and its fix, the user's words are the lesson (their own
    memory) and the error memory is kept below them."""
    out: list[dict[str, Any]] = []
    fixed: set[int] = set()
    done: set[tuple[str, str]] = set()
    for err in d.calls:
        if not err.error or err.rejected or err.housekeeping:
            continue
        fix, sim = _find_fix(d, err)
        if fix is not None:
            fixed.add(err.pos)
        line = error_line(err.result)
        if not line:
            continue
        key = (err.name, norm_key(line))
        if key in done:
            continue
        done.add(key)
        # later failures with the same message belong to this memory
        repeats = [c for c in d.calls[err.pos + 1:] if c.error and c.name == err.name
                   and norm_key(error_line(c.result)) == key[1]]
        if fix is not None:
            # a retry that failed the same way before the fix: the fix is judged from the last one
            before = [c for c in repeats if c.pos < fix.pos]
            last_err = before[-1] if before else err
            fix2, sim2 = _find_fix(d, last_err)
            if fix2 is fix:
                sim = max(sim, sim2)
        else:
            last_err = repeats[-1] if repeats else err
        request = d.request_before(err.msg)
        shown = _ERR_PREFIX.sub("", line) or line
        content = f"{err.name or 'tool'} failed: {clip(shown, CONTENT_CHARS - 20)}"
        context_parts = []
        task = d.task_context(err.msg)
        if task:
            context_parts.append(task)
        context_parts.append("Attempted: " + call_gist(err.name, err.args, err.raw, 200))
        if len(repeats) > 0:
            context_parts.append(f"(failed {len(repeats) + 1} times)")
        context = " ".join(context_parts)
        type_hint = "error"
        tools = [err.name]
        if fix is None:
            episode_end = d.episodes[last_err.episode][1] - 1 if last_err.episode < len(d.episodes) else len(d.kind)
            expl = _explanation(d, last_err.result_msg, episode_end)
            if not expl:
                j, t = d.next_assistant_text(last_err.result_msg)
                expl = first_sentence(t, 200) if j >= 0 else ""
            resolution = ("Unresolved. Agent's reading: " + expl) if expl else ""
            conf = 0.20 + (0.10 if expl else 0.0)
            out.append(candidate(type_hint, "procedural", content, context, resolution, tools, conf, task_type,
                               [err.raw[:400]]))
            continue
        same = fix.name == err.name
        between = [c for c in d.calls[last_err.pos + 1:fix.pos]
                   if c.error is False and not c.housekeeping]
        expl = _explanation(d, last_err.result_msg, fix.msg)
        fix_gist = changed_gist(fix.name, last_err, fix) if same else call_gist(fix.name, fix.args, fix.raw, 200)
        res_parts = []
        if expl:
            res_parts.append(expl)
        if between:
            steps = "; ".join(call_gist(c.name, c.args, c.raw, 80) for c in between[:2])
            more = f" (+{len(between) - 2} more)" if len(between) > 2 else ""
            label = "Fix" if same and fix.raw == last_err.raw else "First"
            res_parts.append(f"{label}: {steps}{more}.")
        result_line = first_sentence(fix.result, 140) if fix.result else ""
        status = ""
        if result_line and (len(fix.result) <= 200 or SUCCESS_WORD.search(result_line)):
            status = f" -> {result_line}"
        if same and between and fix.raw == last_err.raw:
            # the same call succeeded unchanged: the steps in between were the fix
            res_parts.append(f"Then re-ran: {fix_gist}{status}")
        else:
            res_parts.append(f"Worked: {fix_gist}{status}")
        j, after_text = d.next_assistant_text(fix.result_msg if fix.result_msg >= 0 else fix.msg)
        summary = _fix_summary(after_text) if j >= 0 else ""
        if summary and summary not in expl:
            # right after the diagnosis: what was changed, in the agent's words, then the calls
            res_parts.insert(1 if expl else 0, summary if summary.endswith((".", "!")) else summary + ".")
        episode_end = d.episodes[fix.episode][1] if fix.episode < len(d.episodes) else len(d.kind)
        wrap_up = _closing_summary(d, fix.result_msg if fix.result_msg >= 0 else fix.msg, episode_end)
        if wrap_up and wrap_up not in expl and wrap_up != summary:
            res_parts.insert(0, wrap_up)      # the agent's own "cause / fix" account leads
        lesson = wrap_up or summary or expl
        if lesson:
            content = clip(f"{content} — {lesson}", CONTENT_CHARS)
        resolution = " ".join(res_parts)
        if is_security_lesson(resolution):
            type_hint = "security"        # the fix is about a credential (rotate, revoke, keep it out of git)
        elif POLICY_REJECTION.search(line) and not _SHELL_TOOL.search(err.name or ""):
            # a service refusing by its rules ("downgrades are not permitted within 30 days"): what
            # was learned is the business rule and the allowed way round it, not a fault fixed
            type_hint = "pattern"
        success = bool(SUCCESS_WORD.search(fix.result[:600]) or SUCCESS_WORD.search(after_text[:400])
                       or USER_SUCCESS.search(d.next_user_text(fix.result_msg)[:400]))
        recurred = any(c.pos > fix.pos for c in repeats)
        gap = fix.pos - last_err.pos - 1
        conf = (0.40 + (0.20 if same else 0.0) + 0.15 * min(1.0, sim) + (0.10 if success else 0.0)
                + (0.05 if expl else 0.0) + (0.05 if gap == 0 else 0.0) - (0.15 if recurred else 0.0)
                - (0.05 if gap > 5 else 0.0))
        told = any(j in corrected for j in range(last_err.result_msg, fix.msg))
        if told:
            conf -= 0.20
        tools = [err.name] + [c.name for c in between] + [fix.name]
        mem = candidate(type_hint, "procedural", content, context, resolution, tools, conf, task_type,
                        [err.raw[:400], fix.raw[:400], request])
        # the user saying it works now, after the fix and before asking anything new
        # confirmed: the user says it works now, or the fix reports success and the error did not come back
        later = [c for c in d.calls[fix.pos + 1:] if c.episode == fix.episode and not c.housekeeping]
        mem["confirmed"] = not recurred and not told and (
            user_confirms(d.next_user_text(fix.result_msg if fix.result_msg >= 0 else fix.msg)) or success
            or not any(c.error for c in later))      # nothing failed after the fix
        out.append(mem)
    return out, fixed
