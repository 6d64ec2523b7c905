"""The trajectory quality signals: what each counts, and why it points the way it does.

Each signal becomes one entry of ``metrics``: its raw ``value``, a ``score`` in
[0, 1] where 1 is good (or ``None`` when the signal says nothing about this
segment, e.g. no tool results to judge), its ``weight`` and a sentence saying
``how`` it was computed. Every score is a monotone function of its value with a
hand-set shape. The signals read the scorer's view of the segment (:class:`Digest`),
built on the shared reading of :mod:`.reader` (calls paired with results by id,
replayed history and sub-agent traffic left out, error results judged once).

* ``tool_calls`` - how many tool calls; a soft budget per user request, past
  which extra calls count as wandering.
* ``tool_error_rate`` - share of tool results that are errors
  (:func:`ultron.heuristics.reader.is_error_result`: ``name == "error"`` from Claude
  Code ``is_error``, ``<tool_use_error>``, or results that start like an error, or
  short results that mention one; long results are only searched for unmistakable
  markers such as a Python traceback so data that merely contains the word "error"
  does not count).
* ``repeated_failures`` - a tool that already failed in this segment failing again
  (the agent keeps hammering instead of changing approach).
* ``loops`` - exact repeats of an earlier call (same tool, same arguments), a
  repeat of a call that had failed counting three times, plus verbatim repeated
  assistant replies.
* ``user_frustration`` - user turns with corrections or frustration ("that's
  wrong", "I said", "still not working", "why did you", "?!", shouting in capitals),
  interrupted turns and tool calls the user rejected.
* ``outcome_cues`` - explicit success (the user's last turn says it works, or at
  least thanks: weak evidence) or failure
  (the user says it failed or gives up; the agent admits a failed attempt:
  "I was unable to", "I couldn't", "I apologize for the mistake"). The agent's own
  claims of success are not counted: agents claim success whether or not they had it.
* ``final_answer`` - the segment ends with a substantive assistant text (not a
  pending tool call, not an unanswered user request). A hand-off to a human ends
  the segment by design, so it is not scored here.
* ``efficiency`` - agent steps (assistant turns + tool calls) per user request,
  against a budget that depends on the task type.
* ``verbosity`` - assistant words per user request against a per-type budget:
  long answers per request go with convoluted, multi-step handling (and are worse
  to read); not scored for writing tasks, where the text is the deliverable.
* ``state_changes`` - successful calls of tools that change something (anything
  not named like a read: get/search/list/read/...). Every change is a chance for an
  irreversible mistake; what counts as "many" depends on the task type (a coding
  agent edits a lot, a service agent should change a booking once or twice).
* ``request_complexity`` - how many separate asks the user packed into the
  segment (joined requests: "also", "as well", "and then", ...). A prior, not a
  verdict: multi-part requests are less often fully satisfied.
* ``policy_events`` - transfers to a human (a hand-off tool call or the agent
  saying it transfers) and policy refusals ("I'm sorry, but I can't", "against
  policy"; in customer service also "is not allowed", "cannot be modified", "I can't
  cancel ..."). In a customer-service segment a held refusal or a hand-off is the
  compliant outcome (score 1), but changing something after it is not (0.4): the
  agent gave in. Elsewhere a refusal or hand-off means the agent did not do the task
  itself (0.3). No event: not scored. This is why "I'm sorry, I can't" is a policy
  event and not a failure cue: on service trajectories it marks the agent holding a
  rule, which is far more often right than wrong.
* ``deferred`` - the conversation ends with the task put off rather than done: in
  the user's last two turns the user says they will come back to it ("I'll get back
  to you", "once I have the ...", "I'll reach out", "talk soon"), or in the agent's
  last two texts the agent waits for something ("once you have ...", "whenever you're
  ready", "take your time"). Score 0 when deferred, else 1. Nothing was finished in
  this segment, whatever else went well: on service trajectories most such endings are
  an agent that asked the user for what it could have looked up.
"""

from __future__ import annotations

import math
import re
from typing import Any

from ultron.heuristics.reader import HANDOFF_TOOL, INTERRUPT, Segment, cap, read_segment, strip_stop
from ultron.sessions.messages import Message

_I = re.IGNORECASE
_REJECTION_HEAD = 400    # a rejection is said at the start of a result

# -- user messages that no human typed -------------------------------------------------
META_USER = re.compile(
    r"^\s*(?:<(?:local-command|command-|task-notification|ide_|system-reminder|user-prompt-submit)"
    r"|Caveat: The messages below|\[Request interrupted)", _I)
# A tool result saying the user rejected the call: a correction, counted with frustration.
_REJECTED = re.compile(r"user doesn'?t want to proceed|tool use was rejected|user (?:rejected|denied|declined)", _I)
# Closing turns: thanks / bye / acknowledgement with no new ask in them.
_CLOSING_CUE = re.compile(
    r"\b(?:thanks?|thank you|thx|appreciate|bye|goodbye|have a (?:good|great|nice) (?:day|one|evening)|cheers|"
    r"that'?s (?:all|it|everything)|all (?:good|set)|sounds good|got it|no further|nothing else)\b", _I)
_ACK = re.compile(r"^\W*(?:ok(?:ay)?|great|perfect|awesome|cool|nice|good|alright|all right|yes|yep|no|nope|"
                  r"sure|fine|noted|will do)\W*$", _I)
_ASK = re.compile(
    r"\?|\b(?:can|could|would|will) you\b|\bplease (?!let me know)(?!do)\w+|\bi (?:want|need|would like|'d like|"
    r"wish)\b|\bhow (?:do|can|to|much|many)\b|\bhelp me\b|\b(?:but|however|instead|actually)\b", _I)

# -- user frustration / corrections -----------------------------------------------------
_FRUSTRATION = re.compile(
    r"\bno,? (?:that'?s|it'?s|this is) (?:wrong|not|incorrect)|\bthat'?s (?:wrong|incorrect|not (?:right|correct|what))|"
    r"\bthat is (?:wrong|incorrect|not (?:right|correct|what))|\bi (?:said|told you|already (?:said|told|gave|asked))\b|"
    r"\bnot what i\b|\bstill (?:not|doesn'?t|does not|isn'?t|broken|failing|wrong|the same (?:error|problem|issue))|"
    r"\bwhy (?:did|would|are|do|didn'?t|don'?t) you\b|\b(?:doesn'?t|does not|didn'?t|did not|isn'?t|is not) work(?:ing)?\b|"
    r"\byou (?:forgot|missed|ignored|broke|deleted|didn'?t (?:listen|read|do))\b|\b(?:wtf|ugh+|argh+|come on|seriously)\b|"
    r"\b(?:frustrat\w*|annoy\w*|useless|ridiculous|terrible|unacceptable)\b|\bplease (?:just|listen|stop)\b|"
    r"\bthis is (?:wrong|broken|not (?:working|right))|\bwrong (?:again|file|answer|one)\b|\?!|!\?|\?\?\?", _I)
_WORD = re.compile(r"[A-Za-z]{2,}")

# -- explicit outcome cues --------------------------------------------------------------
_USER_SUCCESS = re.compile(
    r"\b(?:it|that|this|everything) (?:works|worked|is working|fixed it|did it|did the trick)\b|"
    r"\b(?:works|worked) (?:now|perfectly|great|fine)\b|\b(?:perfect|excellent|awesome|exactly what i)\b|"
    r"\b(?:problem|issue|it)(?:'s| is| has been) (?:solved|resolved|fixed)\b|\blooks good\b|\blgtm\b|\ball set\b|"
    r"\bthat(?:'s| is| was) (?:helpful|great|what i (?:needed|wanted))\b", _I)
_USER_THANKS = re.compile(r"\b(?:thanks|thank you|thx|ty|appreciate)\b", _I)
_USER_FAILURE = re.compile(
    r"\b(?:doesn'?t|does not|didn'?t|did not|isn'?t|is not|still not) (?:work|help|fix|solve)\w*|"
    r"\b(?:give up|giving up|forget it|never ?mind|not helpful|no help|waste of time|this is hopeless)\b|"
    r"\b(?:i'?ll|i will) (?:do it|fix it|figure it out) myself\b|\bstill (?:broken|failing|the same)\b|"
    r"\b(?:that|it) (?:failed|broke)\b", _I)
_ASSISTANT_FAILURE = re.compile(
    r"\bi (?:was|am) (?:unable|not able) to (?:find|fix|complete|resolve|get|make|locate|reproduce|run|finish|access)\b|"
    r"\bi (?:couldn'?t|could not|wasn'?t able to|failed to|did not manage to)\b|"
    r"\b(?:apologi[sz]e|sorry) for (?:the|my|any) (?:mistake|error|confusion|oversight|misunderstanding)|"
    r"\bmy (?:mistake|bad|apologies)\b|\b(?:that|this) (?:didn'?t|did not) work\b|"
    r"\b(?:still|keeps?) (?:failing|getting the same error)\b", _I)

# -- policy refusals and hand-offs ------------------------------------------------------
# Refusals to help at all: a policy event in any kind of task.
_REFUSAL_STRONG = re.compile(
    r"\b(?:i'?m|i am) (?:sorry|afraid),? (?:but )?(?:i |we )?(?:can(?:no|')t|can not|am unable|'?m unable|am not able|won'?t)|"
    r"\b(?:i|we) (?:can(?:no|')t|can not|am unable to|'?m unable to|am not able to|'?m not able to|won'?t) "
    r"(?:assist|help|comply|fulfil|fulfill)\b|\bagainst (?:our |the |company |my )?(?:polic(?:y|ies)|guidelines)\b", _I)
# Refusals of one action because a rule forbids it: policy events in customer service only
# (elsewhere "is not allowed" is as likely to describe a value or a config option).
_REFUSAL_POLICY = re.compile(
    r"\b(?:i|we) (?:can(?:no|')t|can not|am unable to|'?m unable to|am not able to|'?m not able to) "
    r"(?:process|do|make|change|modify|cancel|remove|provide|offer|allow|grant|issue|book|refund|"
    r"proceed|accommodate|override|waive|add|update|upgrade|downgrade|transfer|exchange|return)\b|"
    r"\b(?:our|the) polic(?:y|ies) (?:does not|doesn'?t|do not|don'?t) (?:allow|permit)|"
    r"\b(?:is|are) not (?:allowed|permitted|eligible)\b|\bnot (?:allowed|permitted) to\b|"
    r"\b(?:cannot|can'?t) be (?:modified|changed|cancell?ed|refunded|removed|exchanged|returned)\b", _I)
_HANDOFF_TEXT = re.compile(
    r"\b(?:transfer(?:ring)?|escalat(?:e|ing)|connect(?:ing)?|hand(?:ing)? (?:you )?(?:over|off)) (?:you |this |your \w+ )?"
    r"(?:to|with) (?:a |an |one of our |our )?(?:human|live|senior|specialist|supervisor|manager|support|representative)", _I)

# -- deferred endings --------------------------------------------------------------------
_USER_DEFER = re.compile(
    r"\b(?:i'?ll|i will|let me|i'?m going to|i need to) (?:\w+ )?(?:get back|reach out|contact|come back|find|gather|"
    r"locate|look (?:for|up|into)|check (?:on|for|my|with)|try (?:to find|again|later|reaching)|call)\b|"
    r"\btalk (?:to you )?soon\b|\bget back to you\b|\bonce i (?:have|find|get|locate)\b|\bwhen i (?:have|find|get)\b|"
    r"\bbe in touch\b|\bfollow up\b", _I)
_AGENT_WAITS = re.compile(
    r"\b(?:once|when|whenever) you(?:'ve| have)? (?:have|find|get|locate|gather)\b|\bwhenever you(?:'re| are) ready\b|"
    r"\btake your time\b", _I)
_DEFER_TAIL = 2          # how many closing turns of each side are read

# -- request complexity -----------------------------------------------------------------
_JOINED_ASK = re.compile(
    r"\b(?:also|as well|additionally|in addition|another thing|one more thing|plus|and then|after that|"
    r"on top of that|besides)\b|\btoo(?=\s*(?:[.?!,;]|$))", _I)


def is_closing(text: str) -> bool:
    """A user turn that only closes the conversation (thanks, bye, ok), asking nothing new."""
    if _ACK.match(text):
        return True
    return bool(_CLOSING_CUE.search(text)) and not _ASK.search(text)


def _shouting(text: str) -> bool:
    words = _WORD.findall(text)
    if len(words) < 3:
        return False
    caps = sum(1 for w in words if w.isupper() and len(w) >= 3)
    return caps >= 3 and caps >= 0.6 * len(words)


def metric(value: Any, score: float | None, weight: float, how: str) -> dict[str, Any]:
    if score is not None:
        score = round(min(1.0, max(0.0, float(score))), 4)
    if isinstance(value, float):
        value = round(value, 4)
    return {"value": value, "score": score, "weight": weight, "how": how}


class Digest:
    """The scorer's view of the segment, collecting everything the signals need.

    Built on the shared reading (:func:`ultron.heuristics.reader.read_segment`): calls
    paired with results by id, replayed history marked. The scorer skips replayed
    history *and* the texts repeated around it (``repeats_text``): a resumed session
    replays the conversation too, and counting it again would double every signal.
    A result without a call is counted as a result, not as a call.
    """

    def __init__(self, messages: list[Message] | Segment) -> None:
        seg = messages if isinstance(messages, Segment) else read_segment(messages)
        self.messages = seg.messages
        self.calls = seg.calls                  # reader.ToolCall: name, key, kind, error
        self.requests: list[str] = []           # human user turns that ask for something
        self.user_texts: list[str] = []         # every human user turn (stop token stripped)
        self.interrupts = 0
        self.rejections = 0                     # tool calls the user rejected
        self.assistant_turns = 0
        self.assistant_texts: list[str] = []
        self.results: list[tuple[int | None, str, bool]] = []   # (call index, tool name, is_error)
        self.msg_calls: dict[int, list[int]] = {}   # message index -> its call indices
        self.msg_result: dict[int, int] = {}        # tool message index -> call index
        for idx, e in enumerate(seg.entries):
            role = e.role
            if role == "user":
                text = strip_stop(e.text)
                if INTERRUPT.match(text):
                    self.interrupts += 1
                    continue
                if META_USER.match(text) or not text.strip() or e.repeats_text:
                    continue
                self.user_texts.append(text)
                if not is_closing(text):
                    self.requests.append(text)
            elif role == "assistant":
                if e.replayed or e.repeats_text:
                    continue
                self.assistant_turns += 1
                text = e.text.strip()
                if text:
                    self.assistant_texts.append(text)
                self.msg_calls[idx] = list(e.calls)
            elif role == "tool":
                if e.replayed:
                    continue
                err = bool(e.error)
                if err and _REJECTED.search(e.content[:_REJECTION_HEAD]):
                    self.rejections += 1
                ci = e.call
                if ci is not None:
                    self.msg_result[idx] = ci
                self.results.append((ci, self.calls[ci].name if ci is not None else (e.message.name or ""), err))


def tool_calls_metric(d: Digest, budget: float, w: float) -> dict[str, Any]:
    n = len(d.calls)
    allowed = budget * max(1, len(d.requests))
    score = 1.0 if n <= allowed else allowed / n
    return metric(n, score, w, f"number of tool calls; 1 up to {budget:g} per user request, then allowed/actual")


def error_rate_metric(d: Digest, w: float) -> dict[str, Any]:
    n = len(d.results)
    if n == 0:
        return metric(0.0, None, w, "share of tool results that are errors; not scored without tool results")
    errors = sum(1 for *_, e in d.results if e)
    rate = errors / n
    # A single error among many results costs little; the score falls with the
    # rate and, more gently, with the count (three errors are worse than one).
    score = (1.0 - rate) / (1.0 + 0.15 * max(0, errors - 1))
    return metric(rate, score, w, "errors / tool results (is_error, error-like start, or error text in a short "
                                  "result); score (1 - rate) / (1 + 0.15 * (errors - 1))")


def repeated_failures_metric(d: Digest, w: float) -> dict[str, Any]:
    failed_tools: set[str] = set()
    repeats = 0
    for _, name, err in d.results:
        if err:
            if name in failed_tools:
                repeats += 1
            failed_tools.add(name)
    if not d.results:
        return metric(0, None, w, "errors of a tool that had already failed; not scored without tool results")
    return metric(repeats, 1.0 / (1.0 + repeats), w,
                  "number of error results from a tool that had already failed in the segment; score 1 / (1 + n)")


def loops_metric(d: Digest, w: float) -> dict[str, Any]:
    seen: dict[tuple[str, str], bool] = {}   # (tool, args) -> an earlier identical call failed
    weight_sum = 0.0
    repeats = 0
    for c in d.calls:
        key = (c.name, c.key)
        if key in seen:
            repeats += 1
            weight_sum += 3.0 if seen[key] else 1.0
        seen[key] = seen.get(key, False) or bool(c.error)
    texts: set[str] = set()
    for t in d.assistant_texts:
        k = " ".join(t.split()).lower()
        if len(k) >= 40:
            if k in texts:
                repeats += 1
                weight_sum += 1.0
            texts.add(k)
    if not d.calls and not d.assistant_texts:
        return metric(0, None, w, "repeated identical tool calls or replies; nothing to check")
    return metric(repeats, 1.0 / (1.0 + 0.5 * weight_sum), w,
                  "repeats of an earlier identical tool call (a repeat of a failed call counts 3) or of a verbatim "
                  "assistant reply; score 1 / (1 + 0.5 * weighted repeats)")


def frustration_metric(d: Digest, w: float) -> dict[str, Any]:
    if not d.user_texts and not d.interrupts and not d.rejections:
        return metric(0, None, w, "user turns with corrections or frustration; no user turns")
    n = d.interrupts + d.rejections + sum(1 for t in d.user_texts if _FRUSTRATION.search(t) or _shouting(t))
    return metric(n, 1.0 / (1.0 + n), w,
                  "user turns with correction/frustration phrases, '?!', shouting in capitals, plus interrupted "
                  "turns and tool calls the user rejected; score 1 / (1 + n)")


def outcome_cues_metric(d: Digest, w: float) -> dict[str, Any]:
    pos = 0.0
    neg = 0.0
    last = len(d.user_texts) - 1
    for i, t in enumerate(d.user_texts):
        if _USER_FAILURE.search(t):
            neg += 2.0 if i == last else 1.0  # the user's last word counts double
        elif i == last:
            # Success is only read from the user's last turn: earlier "that works"
            # or "perfect" is usually agreement to a proposal, not a verified result.
            if _USER_SUCCESS.search(t):
                pos += 2.0
            elif _USER_THANKS.search(t):
                pos += 0.5                    # plain closing thanks: weak evidence
    for t in d.assistant_texts:
        if _ASSISTANT_FAILURE.search(t):
            neg += 1.0
    net = pos - neg
    how = ("net explicit cues: the user's last turn says it works (+2) or just thanks (+0.5), minus user turns "
           "saying it failed or giving up (-1, last turn -2) and agent turns admitting a failed attempt (-1); "
           "score 0.5 + 0.5 * tanh(net / 2)")
    if pos == 0 and neg == 0:
        return metric(0.0, None, w, how + "; not scored without cues")
    return metric(net, 0.5 + 0.5 * math.tanh(net / 2.0), w, how)


def final_answer_metric(d: Digest, w: float) -> dict[str, Any]:
    how = ("the segment ends with a substantive assistant text (>= 20 chars), after skipping closing user turns; "
           "a pending tool call or an unanswered user request is no final answer; a hand-off is not scored")
    msgs = d.messages
    i = len(msgs) - 1
    while i >= 0:
        m = msgs[i]
        if m.role == "system":
            i -= 1
            continue
        if m.role == "user":
            text = strip_stop(cap(m.content))
            if not text or META_USER.match(text) or is_closing(text):
                i -= 1
                continue
            return metric(False, 0.0, w, how)   # the user asked something that went unanswered
        break
    if i < 0:
        return metric(False, 0.0 if msgs else None, w, how)
    m = msgs[i]
    if m.role == "tool":
        ci = d.msg_result.get(i)
        if (ci is not None and d.calls[ci].kind == "handoff") or HANDOFF_TOOL.search(m.name or ""):
            return metric(False, None, w, how)
        return metric(False, 0.0, w, how)
    if m.role == "assistant":
        if m.tool_calls:
            if any(HANDOFF_TOOL.search(str(((tc or {}).get("function") or {}).get("name") or ""))
                   for tc in m.tool_calls):
                return metric(False, None, w, how)
            return metric(False, 0.0, w, how)
        ok = len((m.content or "").strip()) >= 20
        return metric(ok, 1.0 if ok else 0.0, w, how)
    return metric(False, 0.0, w, how)


def efficiency_metric(d: Digest, budget: float, w: float) -> dict[str, Any]:
    if d.assistant_turns == 0:
        return metric(0.0, None, w, "agent steps per user request; no agent steps")
    steps = d.assistant_turns + len(d.calls)
    ratio = steps / max(1, len(d.requests))
    score = 1.0 if ratio <= budget else budget / ratio
    return metric(ratio, score, w, f"(assistant turns + tool calls) / user requests; 1 up to {budget:g}, "
                                   "then budget/ratio")


def verbosity_metric(d: Digest, budget: float | None, w: float) -> dict[str, Any]:
    words = sum(len(t.split()) for t in d.assistant_texts)
    ratio = words / max(1, len(d.requests))
    how = "assistant words per user request; 1 up to the task type's budget, then budget/ratio"
    if budget is None:
        return metric(ratio, None, w, how + "; not scored for writing, where the text is the deliverable")
    if not d.assistant_texts:
        return metric(0.0, None, w, how + "; no assistant text")
    return metric(ratio, 1.0 if ratio <= budget else budget / ratio, w, how + f" ({budget:g})")


def state_changes_metric(d: Digest, half: float, w: float) -> dict[str, Any]:
    n = sum(1 for c in d.calls if c.kind == "write" and not c.error)
    if not d.calls:
        return metric(0, None, w, "successful state-changing tool calls; no tool calls")
    return metric(n, 1.0 / (1.0 + n / half), w,
                  f"successful calls of tools not named like reads/hand-offs; score 1 / (1 + n / {half:g})")


def complexity_metric(d: Digest, w: float) -> dict[str, Any]:
    if not d.requests:
        return metric(0, None, w, "separate asks in the user's requests; no requests")
    joined = sum(len(_JOINED_ASK.findall(t)) for t in d.requests)
    asks = len(d.requests) + joined
    # A segment with a single ask scores 1; every extra joined ask lowers it.
    score = 1.0 / (1.0 + 0.25 * joined)
    return metric(asks, score, w, "user requests plus joined asks ('also', 'as well', 'and then', ...); "
                                  "score 1 / (1 + 0.25 * joined asks)")


def deferred_metric(d: Digest, w: float) -> dict[str, Any]:
    n = sum(1 for t in d.user_texts[-_DEFER_TAIL:] if _USER_DEFER.search(t))
    n += sum(1 for t in d.assistant_texts[-_DEFER_TAIL:] if _AGENT_WAITS.search(cap(t)))
    how = ("the last two user turns say the user will come back to it ('I'll get back to you', 'once I have') or the "
           "last two agent texts wait for the user ('once you have', 'whenever you're ready'); 0 if so, else 1")
    if not d.user_texts and not d.assistant_texts:
        return metric(0, None, w, how + "; nothing said")
    return metric(n, 0.0 if n else 1.0, w, how)


def policy_metric(d: Digest, task_type: str, w: float) -> dict[str, Any]:
    service = task_type == "customer_service"
    events = 0
    first: int | None = None      # index into d.calls from which to look for later actions
    for idx in sorted(d.msg_calls):
        text = cap(d.messages[idx].content)
        if text and (_REFUSAL_STRONG.search(text) or _HANDOFF_TEXT.search(text)
                     or (service and _REFUSAL_POLICY.search(text))):
            events += 1
            if first is None:
                first = d.msg_calls[idx][0] if d.msg_calls[idx] else _next_call(d, idx)
        for ci in d.msg_calls[idx]:
            if d.calls[ci].kind == "handoff":
                events += 1
                if first is None:
                    first = ci
    how = ("transfers to a human and policy refusals by the agent; customer service: 1 if no successful state "
           "change follows the first event, else 0.4; other task types (only outright refusals to help and "
           "hand-offs count): 0.3; not scored without events")
    if events == 0:
        return metric(0, None, w, how)
    if not service:
        return metric(events, 0.3, w, how)
    acted_after = any(c.kind == "write" and not c.error for c in d.calls[first:]) if first is not None else False
    return metric(events, 0.4 if acted_after else 1.0, w, how)


def _next_call(d: Digest, idx: int) -> int:
    """Index of the first call made after message ``idx`` (len(calls) if none)."""
    for j in sorted(d.msg_calls):
        if j > idx and d.msg_calls[j]:
            return d.msg_calls[j][0]
    return len(d.calls)
