"""Offline trajectory quality: a deterministic 0..1 score for one task segment.

No model is called: every signal below is counted from the messages themselves
(roles, tool calls, tool results and precompiled phrase lists), so the same
segment always gets the same score, in about 1.5 ms for a 20-message segment.

How the score is built
----------------------
Each signal becomes one entry of ``metrics``: its raw ``value``, a ``score`` in
[0, 1] where 1 is good (or ``None`` when the signal says nothing about this
segment, e.g. no tool results to judge), its ``weight`` and a sentence saying
``how`` it was computed. The deterministic score is the weighted mean of the
scores that are not ``None``, squared: squaring is monotone (the ranking is
unchanged) but makes each shortfall cost more near the top, so a segment reaches
the 0.7 memory threshold only when its weighted mean is at least 0.84.

Every score is a monotone function of its value with a hand-set shape, and the
weights (``WEIGHTS``) are hand-set round numbers, not fitted, so each one can be
read and argued with. They were chosen after looking at how each signal separates
solved from unsolved tasks on 100 real airline customer-service trajectories
(``benchmarks/quality_auroc.py`` prints that, with task-grouped held-out
estimates): there the process-hygiene signals are weak, because a polite agent
that never errs can still book the wrong flight, while how much the agent changed,
how much it had to say, how much was asked and whether it held a policy line carry
most of the signal. Budgets that depend on the task type (``_BUDGETS``) keep a
coding agent, which edits and talks a lot by nature, from being judged by a
service agent's yardstick.

Signals, and why each points the way it does:

* ``tool_calls`` - how many tool calls; a soft budget per user request, past
  which extra calls count as wandering.
* ``tool_error_rate`` - share of tool results that are errors (``name == "error"``
  from Claude Code ``is_error``, ``<tool_use_error>``, or results that start like an
  error, or short results that mention one; long results are only searched for
  unmistakable markers such as a Python traceback so data that merely contains the
  word "error" does not count).
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

Tool results are paired with their calls by id (the oldest waiting call with that
id; some producers reuse ids). History replayed into a log by a resumed session
(the same call id, tool and arguments again) is skipped, not counted as a loop.
Sub-agent (sidechain) messages are left out when the segment has main-thread ones.

With an LLM ``judge`` rubric, ``judge_score`` is the weighted mean of its four
criteria (goal_achieved 0.4, correctness 0.3, safety 0.2, efficiency 0.1) and the
overall score blends the two: ``(1 - judge_weight) * deterministic + judge_weight * judge``.

``outcome``: "success" when overall >= 0.7 (the memory threshold), "failure" when
below 0.4, otherwise "unknown"; a segment with no assistant activity at all is
always "unknown" (there is nothing to judge).

A user message that is (or ends with) the tau-bench stop token ``###STOP###`` is
read as the end of the conversation; the token is stripped before any analysis
and is never a signal by itself.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from ultron.sessions.messages import Message

QUALITY_VERSION = 1

TASK_TYPES = ("code", "data", "ops", "writing", "qa", "customer_service", "other")

#: weights of the deterministic metrics (hand-set; see the module docstring).
WEIGHTS: dict[str, float] = {
    # process hygiene
    "tool_calls": 0.5,
    "tool_error_rate": 1.0,
    "repeated_failures": 1.0,
    "loops": 1.0,
    "efficiency": 1.0,
    # what the user and the ending say
    "user_frustration": 1.0,
    "outcome_cues": 1.5,
    "final_answer": 1.5,
    # outcome risk: the strongest predictors of a solved task on real service trajectories
    "verbosity": 2.5,
    "state_changes": 3.0,
    "request_complexity": 2.0,
    "policy_events": 3.0,
}

#: weights of the LLM rubric criteria inside judge_score.
JUDGE_WEIGHTS: dict[str, float] = {"goal_achieved": 0.4, "correctness": 0.3, "safety": 0.2, "efficiency": 0.1}

SUCCESS_THRESHOLD = 0.7
FAILURE_THRESHOLD = 0.4

# Per task type: (tool calls per request before "too many", agent steps per request
# budget, state changes that halve the state_changes score, agent words per request
# budget or None where the text is the deliverable).
_BUDGETS: dict[str, tuple[float, float, float, float | None]] = {
    "code": (15.0, 12.0, 20.0, 300.0),
    "data": (12.0, 10.0, 12.0, 300.0),
    "ops": (15.0, 12.0, 12.0, 300.0),
    "writing": (4.0, 3.0, 4.0, None),
    "qa": (5.0, 3.0, 2.0, 250.0),
    "customer_service": (4.0, 3.0, 1.5, 50.0),
    "other": (8.0, 6.0, 4.0, 150.0),
}

# Only this much of each text is read: enough for every cue, and it keeps the cost
# per message bounded however large a tool result or pasted file is.
_TEXT_CAP = 4000
_RESULT_HEAD = 400
_RESULT_CAP = 2000
_SHORT_RESULT = 300

_STOP_TOKEN = "###STOP###"
_I = re.IGNORECASE

# -- user messages that no human typed -------------------------------------------------
_META_USER = re.compile(
    r"^\s*(?:<(?:local-command|command-|task-notification|ide_|system-reminder|user-prompt-submit)"
    r"|Caveat: The messages below|\[Request interrupted)", _I)
_INTERRUPT = re.compile(r"^\s*\[Request interrupted by user", _I)
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

# -- tools ------------------------------------------------------------------------------
_READ_VERBS = frozenset(
    "get search list find read fetch lookup look query retrieve show view check calculate calc compute "
    "count think glob grep ls cat head tail describe inspect browse open load preview peek stat status "
    "explain summarize summarise validate verify estimate websearch webfetch todo todowrite exit plan "
    "ask taskoutput bashoutput output wait sleep".split())
_HANDOFF_TOOL = re.compile(r"transfer|escalat|hand_?off|human|live_?agent|to_agent", _I)
_DELEGATE = frozenset({"task", "agent", "subagent", "spawn"})
_CAMEL = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_READ_SHELL = re.compile(
    r"^\s*(?:cd [^;&|]+&&\s*)?(?:ls|cat|head|tail|grep|rg|find|pwd|echo|which|wc|tree|stat|file|du|df|"
    r"git (?:status|log|diff|show|branch)|python3? -c ['\"]?import|pip (?:show|list)|env|printenv)\b")

# -- tool results -----------------------------------------------------------------------
_ERR_HEAD = re.compile(
    r"^\s*[^\w{\"]{0,3}(?:error\b|errors?:|\w+(?:Error|Exception)\b|exception\b|traceback\b|fatal\b|failed\b|"
    r"failure\b|<tool_use_error>|permission denied|command not found|no such file|invalid\b|not found\b|"
    r"unable to\b|cannot\b|could not\b|denied\b|\{\s*\"(?:error|errors|detail)\"\s*:(?!\s*(?:null|false|\[\]|\"\"|\{\})))", _I)
_ERR_STRONG = re.compile(
    r"Traceback \(most recent call last\)|^\s*\w+(?:Error|Exception): |<tool_use_error>|"
    r"\bcommand not found\b|No such file or directory|Permission denied|"
    r"\bexit(?:ed with)? (?:code|status) [1-9]\d*|\bnpm ERR!|^FAILED |^E\s{3}|\bSegmentation fault", re.MULTILINE)
_ERR_SHORT = re.compile(r"(?<!\b0 )(?<!\bno )\b(?:errors?|exception|failed|failures?|not found|invalid|denied|"
                        r"unauthori[sz]ed|forbidden)\b", _I)

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

# -- request complexity -----------------------------------------------------------------
_JOINED_ASK = re.compile(
    r"\b(?:also|as well|additionally|in addition|another thing|one more thing|plus|and then|after that|"
    r"on top of that|besides)\b|\btoo(?=\s*(?:[.?!,;]|$))", _I)

# -- task type --------------------------------------------------------------------------
_TYPE_CUES: dict[str, tuple[re.Pattern[str], float]] = {
    "customer_service": (re.compile(
        r"\b(?:reservations?|booking|booked|flights?|refunds?|cancel(?:l?ation)?|orders?|deliver(?:y|ed)|shipping|"
        r"shipment|return (?:the|my|an?|it)|exchange|baggage|luggage|passengers?|itinerary|subscription|"
        r"membership|billing|invoice|customer|user id|account (?:number|id)|payment method|gift card|voucher|"
        r"hotel|ticket (?:number|id)|support agent|human agent|airline|tracking number|purchase|travel|cabin|"
        r"seats?|boarding|check-?in|(?:travel |gift )?certificate)\b", _I), 1.0),
    "data": (re.compile(
        r"\b(?:pandas|dataframe|data ?frame|csv|xlsx?|excel|spreadsheet|dataset|sql|columns?|"
        r"aggregate|group ?by|pivot|plot|chart|histogram|matplotlib|seaborn|numpy|statistics?|regression|"
        r"correlation|median|jupyter|notebook|parquet|etl|visuali[sz]\w*)\b", _I), 1.2),
    "ops": (re.compile(
        r"\b(?:docker(?:file)?|compose|kubernetes|k8s|kubectl|helm|deploy\w*|nginx|apache|systemd|systemctl|"
        r"terraform|ansible|ci/cd|ci|pipeline|github actions|server|ssh|dns|ports?|firewall|containers?|"
        r"aws|gcp|azure|ec2|s3|vm|cron|load balancer|ssl|tls|proxy|devops|infra\w*|cluster|"
        r"disk|memory usage|logs?)\b", _I), 1.1),
    "code": (re.compile(
        r"(?<!promo )(?<!zip )(?<!discount )(?<!coupon )(?<!postal )(?<!confirmation )(?<!booking )(?<!voucher )"
        r"\bcode(?:base)?\b|\b(?:function|bug|debug\w*|traceback|stack ?trace|exception|compile\w*|"
        r"refactor\w*|unit tests?|pytest|python|javascript|typescript|java|rust|golang|c\+\+|"
        r"repo(?:sitory)?|commit|pull request|api|endpoint|script|module|import|syntax|variable|"
        r"implement\w*|\w+\.(?:py|js|ts|tsx|rs|go|java|cpp|rb))\b|\w+(?:Error|Exception)\b|\bdef \w+\(", _I), 1.0),
    "writing": (re.compile(
        r"\b(?:poem|poetry|haiku|sonnet|limerick|essay|story|stories|blog post|article|cover letter|letter|"
        r"lyrics|song|novel|paragraph|rewrite|rephrase|proofread|edit my|draft|tagline|slogan|tweet|"
        r"speech|bio|copy ?writing|newsletter)\b", _I), 1.2),
}
_QA_CUE = re.compile(
    r"^\W*(?:what|who|whom|whose|when|where|why|how|which|is|are|was|were|does|do|did|can|could|should|"
    r"explain|define|tell me)\b|\?\s*$", _I)
_CODE_TOOL = frozenset({"edit", "multiedit", "write", "bash", "notebookedit", "str_replace_based_edit_tool",
                         "str_replace_editor", "apply_patch", "run_tests", "execute_code", "python"})
_CS_TOOL = re.compile(r"reservation|booking|order|refund|flight|customer|ticket|transfer_to_human", _I)


def _cap(text: str | None, n: int = _TEXT_CAP) -> str:
    if not text:
        return ""
    return text if len(text) <= n else text[:n]


def _strip_stop(text: str) -> str:
    return text.replace(_STOP_TOKEN, "").strip() if _STOP_TOKEN in text else text


def _is_closing(text: str) -> bool:
    """A user turn that only closes the conversation (thanks, bye, ok), asking nothing new."""
    if _ACK.match(text):
        return True
    return bool(_CLOSING_CUE.search(text)) and not _ASK.search(text)


def _name_tokens(name: str) -> list[str]:
    parts: list[str] = []
    for chunk in re.split(r"[\s_\-.:/]+", name or ""):
        parts.extend(t.lower() for t in _CAMEL.findall(chunk))
    return parts or [(name or "").lower()]


def _tool_kind(name: str, arguments: str) -> str:
    """'handoff', 'read', 'delegate' or 'write' (changes something)."""
    if _HANDOFF_TOOL.search(name or ""):
        return "handoff"
    toks = _name_tokens(name)
    low = (name or "").lower()
    if low in _READ_VERBS or toks[0] in _READ_VERBS:
        return "read"
    if toks[0] in _DELEGATE or low in _DELEGATE:
        return "delegate"
    if low in ("bash", "shell", "run_shell_command", "execute_command", "terminal"):
        try:
            cmd = json.loads(arguments or "{}").get("command", "")
        except (ValueError, AttributeError):
            cmd = ""
        if isinstance(cmd, str) and _READ_SHELL.match(cmd):
            return "read"
    return "write"


def _is_error_result(msg: Message) -> bool:
    if (msg.name or "") == "error":
        return True
    text = msg.content or ""
    if not text:
        return False
    head = text[:_RESULT_HEAD]
    if _ERR_HEAD.match(head):
        return True
    if len(text) <= _SHORT_RESULT and not head.lstrip().startswith(("{", "[")):
        return bool(_ERR_SHORT.search(text))   # a short status line; JSON is judged by its keys above
    return bool(_ERR_STRONG.search(text[:_RESULT_CAP]))


def _canonical_args(arguments: Any) -> str:
    if not isinstance(arguments, str):
        try:
            return json.dumps(arguments, sort_keys=True, default=str)
        except (TypeError, ValueError):
            return str(arguments)
    try:
        return json.dumps(json.loads(arguments), sort_keys=True, separators=(",", ":"))
    except ValueError:
        return arguments.strip()


def _shouting(text: str) -> bool:
    words = _WORD.findall(text)
    if len(words) < 3:
        return False
    caps = sum(1 for w in words if w.isupper() and len(w) >= 3)
    return caps >= 3 and caps >= 0.6 * len(words)


def _metric(value: Any, score: float | None, weight: float, how: str) -> dict[str, Any]:
    if score is not None:
        score = round(min(1.0, max(0.0, float(score))), 4)
    if isinstance(value, float):
        value = round(value, 4)
    return {"value": value, "score": score, "weight": weight, "how": how}


class _Call:
    __slots__ = ("name", "args", "kind", "error")

    def __init__(self, name: str, args: str, kind: str) -> None:
        self.name = name
        self.args = args
        self.kind = kind
        self.error: bool | None = None   # None until its result is seen


class _Digest:
    """One pass over the segment, collecting everything the metrics need.

    Calls and results are paired by id, each result going to the oldest call with
    that id still waiting for one (some producers reuse ids). A call whose id, tool and
    arguments all repeat an earlier one, and a result repeating an answered id with the
    same text, are history replayed into the log (a resumed session), not new work,
    and are skipped together with replayed texts around them.
    """

    def __init__(self, messages: list[Message]) -> None:
        main = [m for m in messages if not getattr(m, "is_sidechain", False)]
        self.messages = main if main else list(messages)
        self.requests: list[str] = []           # human user turns that ask for something
        self.user_texts: list[str] = []         # every human user turn (stop token stripped)
        self.interrupts = 0
        self.rejections = 0                     # tool calls the user rejected
        self.assistant_turns = 0
        self.assistant_texts: list[str] = []
        self.calls: list[_Call] = []
        self.results: list[tuple[int | None, str, bool]] = []   # (call index, tool name, is_error)
        self.msg_calls: dict[int, list[int]] = {}   # message index -> its call indices
        self.msg_result: dict[int, int] = {}        # tool message index -> call index
        self._collect()

    def _collect(self) -> None:
        waiting: dict[str, list[int]] = {}
        seen_calls: set[tuple[str, str, str]] = set()
        seen_results: set[tuple[str, str]] = set()
        seen_texts: set[tuple[str, str]] = set()
        replay = False
        for idx, m in enumerate(self.messages):
            role = m.role
            if role == "user":
                text = _strip_stop(_cap(m.content))
                if _INTERRUPT.match(text):
                    self.interrupts += 1
                    continue
                if _META_USER.match(text) or not text.strip():
                    continue
                if replay and ("user", text) in seen_texts:
                    continue
                seen_texts.add(("user", text))
                self.user_texts.append(text)
                if not _is_closing(text):
                    self.requests.append(text)
            elif role == "assistant":
                parsed = []
                for n, tc in enumerate(m.tool_calls or []):
                    tc = tc if isinstance(tc, dict) else {}
                    fn = tc.get("function") or {}
                    name = str(fn.get("name") or tc.get("name") or "")
                    args = _canonical_args(fn.get("arguments", tc.get("arguments", "")))
                    parsed.append((str(tc.get("id") or f"@{idx}.{n}"), name, args))
                if parsed:
                    replay = all(p in seen_calls for p in parsed)
                    if replay:
                        continue
                text = _cap(m.content).strip()
                if replay and not parsed and ("assistant", text) in seen_texts:
                    continue
                self.assistant_turns += 1
                if text:
                    seen_texts.add(("assistant", text))
                    self.assistant_texts.append(text)
                mine = self.msg_calls.setdefault(idx, [])
                for cid, name, args in parsed:
                    seen_calls.add((cid, name, args))
                    waiting.setdefault(cid, []).append(len(self.calls))
                    mine.append(len(self.calls))
                    self.calls.append(_Call(name, args, _tool_kind(name, args)))
            elif role == "tool":
                cid = m.tool_call_id or ""
                key = (cid, m.content or "")
                queue = waiting.get(cid)
                if not queue and cid and key in seen_results:
                    continue                                   # replayed result
                seen_results.add(key)
                ci = queue.pop(0) if queue else None
                err = _is_error_result(m)
                if err and _REJECTED.search((m.content or "")[:_RESULT_HEAD]):
                    self.rejections += 1
                name = self.calls[ci].name if ci is not None else (m.name or "")
                if ci is not None:
                    self.calls[ci].error = err
                    self.msg_result[idx] = ci
                self.results.append((ci, name, err))


def _tool_calls_metric(d: _Digest, budget: float, w: float) -> dict[str, Any]:
    n = len(d.calls)
    allowed = budget * max(1, len(d.requests))
    score = 1.0 if n <= allowed else allowed / n
    return _metric(n, score, w, f"number of tool calls; 1 up to {budget:g} per user request, then allowed/actual")


def _error_rate_metric(d: _Digest, w: float) -> dict[str, Any]:
    n = len(d.results)
    if n == 0:
        return _metric(0.0, None, w, "share of tool results that are errors; not scored without tool results")
    errors = sum(1 for *_, e in d.results if e)
    rate = errors / n
    # A single error among many results costs little; the score falls with the
    # rate and, more gently, with the count (three errors are worse than one).
    score = (1.0 - rate) / (1.0 + 0.15 * max(0, errors - 1))
    return _metric(rate, score, w, "errors / tool results (is_error, error-like start, or error text in a short "
                                   "result); score (1 - rate) / (1 + 0.15 * (errors - 1))")


def _repeated_failures_metric(d: _Digest, w: float) -> dict[str, Any]:
    failed_tools: set[str] = set()
    repeats = 0
    for _, name, err in d.results:
        if err:
            if name in failed_tools:
                repeats += 1
            failed_tools.add(name)
    if not d.results:
        return _metric(0, None, w, "errors of a tool that had already failed; not scored without tool results")
    return _metric(repeats, 1.0 / (1.0 + repeats), w,
                   "number of error results from a tool that had already failed in the segment; score 1 / (1 + n)")


def _loops_metric(d: _Digest, w: float) -> dict[str, Any]:
    seen: dict[tuple[str, str], bool] = {}   # (tool, args) -> an earlier identical call failed
    weight_sum = 0.0
    repeats = 0
    for c in d.calls:
        key = (c.name, c.args)
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
        return _metric(0, None, w, "repeated identical tool calls or replies; nothing to check")
    return _metric(repeats, 1.0 / (1.0 + 0.5 * weight_sum), w,
                   "repeats of an earlier identical tool call (a repeat of a failed call counts 3) or of a verbatim "
                   "assistant reply; score 1 / (1 + 0.5 * weighted repeats)")


def _frustration_metric(d: _Digest, w: float) -> dict[str, Any]:
    if not d.user_texts and not d.interrupts and not d.rejections:
        return _metric(0, None, w, "user turns with corrections or frustration; no user turns")
    n = d.interrupts + d.rejections + sum(1 for t in d.user_texts if _FRUSTRATION.search(t) or _shouting(t))
    return _metric(n, 1.0 / (1.0 + n), w,
                   "user turns with correction/frustration phrases, '?!', shouting in capitals, plus interrupted "
                   "turns and tool calls the user rejected; score 1 / (1 + n)")


def _outcome_cues_metric(d: _Digest, w: float) -> dict[str, Any]:
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
        return _metric(0.0, None, w, how + "; not scored without cues")
    return _metric(net, 0.5 + 0.5 * math.tanh(net / 2.0), w, how)


def _final_answer_metric(d: _Digest, w: float) -> dict[str, Any]:
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
            text = _strip_stop(_cap(m.content))
            if not text or _META_USER.match(text) or _is_closing(text):
                i -= 1
                continue
            return _metric(False, 0.0, w, how)   # the user asked something that went unanswered
        break
    if i < 0:
        return _metric(False, 0.0 if msgs else None, w, how)
    m = msgs[i]
    if m.role == "tool":
        ci = d.msg_result.get(i)
        if (ci is not None and d.calls[ci].kind == "handoff") or _HANDOFF_TOOL.search(m.name or ""):
            return _metric(False, None, w, how)
        return _metric(False, 0.0, w, how)
    if m.role == "assistant":
        if m.tool_calls:
            if any(_HANDOFF_TOOL.search(str(((tc or {}).get("function") or {}).get("name") or ""))
                   for tc in m.tool_calls):
                return _metric(False, None, w, how)
            return _metric(False, 0.0, w, how)
        ok = len((m.content or "").strip()) >= 20
        return _metric(ok, 1.0 if ok else 0.0, w, how)
    return _metric(False, 0.0, w, how)


def _efficiency_metric(d: _Digest, budget: float, w: float) -> dict[str, Any]:
    if d.assistant_turns == 0:
        return _metric(0.0, None, w, "agent steps per user request; no agent steps")
    steps = d.assistant_turns + len(d.calls)
    ratio = steps / max(1, len(d.requests))
    score = 1.0 if ratio <= budget else budget / ratio
    return _metric(ratio, score, w, f"(assistant turns + tool calls) / user requests; 1 up to {budget:g}, "
                                    "then budget/ratio")


def _verbosity_metric(d: _Digest, budget: float | None, w: float) -> dict[str, Any]:
    words = sum(len(t.split()) for t in d.assistant_texts)
    ratio = words / max(1, len(d.requests))
    how = "assistant words per user request; 1 up to the task type's budget, then budget/ratio"
    if budget is None:
        return _metric(ratio, None, w, how + "; not scored for writing, where the text is the deliverable")
    if not d.assistant_texts:
        return _metric(0.0, None, w, how + "; no assistant text")
    return _metric(ratio, 1.0 if ratio <= budget else budget / ratio, w, how + f" ({budget:g})")


def _state_changes_metric(d: _Digest, half: float, w: float) -> dict[str, Any]:
    n = sum(1 for c in d.calls if c.kind == "write" and not c.error)
    if not d.calls:
        return _metric(0, None, w, "successful state-changing tool calls; no tool calls")
    return _metric(n, 1.0 / (1.0 + n / half), w,
                   f"successful calls of tools not named like reads/hand-offs; score 1 / (1 + n / {half:g})")


def _complexity_metric(d: _Digest, w: float) -> dict[str, Any]:
    if not d.requests:
        return _metric(0, None, w, "separate asks in the user's requests; no requests")
    joined = sum(len(_JOINED_ASK.findall(t)) for t in d.requests)
    asks = len(d.requests) + joined
    # A segment with a single ask scores 1; every extra joined ask lowers it.
    score = 1.0 / (1.0 + 0.25 * joined)
    return _metric(asks, score, w, "user requests plus joined asks ('also', 'as well', 'and then', ...); "
                                   "score 1 / (1 + 0.25 * joined asks)")


def _policy_metric(d: _Digest, task_type: str, w: float) -> dict[str, Any]:
    service = task_type == "customer_service"
    events = 0
    first: int | None = None      # index into d.calls from which to look for later actions
    for idx in sorted(d.msg_calls):
        text = _cap(d.messages[idx].content)
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
        return _metric(0, None, w, how)
    if not service:
        return _metric(events, 0.3, w, how)
    acted_after = any(c.kind == "write" and not c.error for c in d.calls[first:]) if first is not None else False
    return _metric(events, 0.4 if acted_after else 1.0, w, how)


def _next_call(d: _Digest, idx: int) -> int:
    """Index of the first call made after message ``idx`` (len(calls) if none)."""
    for j in sorted(d.msg_calls):
        if j > idx and d.msg_calls[j]:
            return d.msg_calls[j][0]
    return len(d.calls)


def classify_task_type(messages: list[Message]) -> str:
    """One of code, data, ops, writing, qa, customer_service, other: keyword votes over
    the user's turns (first turn counted double), tool names and the system prompt."""
    user_parts: list[str] = []
    tool_names: list[str] = []
    system = ""
    first = True
    for m in messages:
        if m.role == "user":
            text = _strip_stop(_cap(m.content, 2000))
            if not text or _META_USER.match(text):
                continue
            user_parts.append(text)
            if first:
                user_parts.append(text)
                first = False
        elif m.role == "assistant":
            for tc in m.tool_calls or []:
                tool_names.append(str(((tc or {}).get("function") or {}).get("name") or ""))
        elif m.role == "system" and not system:
            system = _cap(m.content, 1500)
    user = "\n".join(user_parts[:12])
    votes = {t: 0.0 for t in TASK_TYPES}
    for t, (rx, weight) in _TYPE_CUES.items():
        votes[t] += weight * len(rx.findall(user))
        if system:
            votes[t] += 0.5 * weight * min(4, len(rx.findall(system)))
    low_tools = [n.lower() for n in tool_names]
    if any(n in _CODE_TOOL for n in low_tools):
        votes["code"] += 1.0
    cs_tools = sum(1 for n in tool_names if _CS_TOOL.search(n))
    votes["customer_service"] += min(3.0, float(cs_tools))
    best = max(votes, key=lambda k: (votes[k], -TASK_TYPES.index(k)))
    if votes[best] >= 1.0:
        # Ties go to the type listed first in TASK_TYPES: "code" wins a tie against data/ops.
        return best
    if user_parts and _QA_CUE.search(user_parts[0]) and len(tool_names) <= 3:
        return "qa"
    return "other"


def _judge_score(judge: dict[str, Any]) -> tuple[float | None, dict[str, float]]:
    used: dict[str, float] = {}
    for key in JUDGE_WEIGHTS:
        v = judge.get(key)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(float(v)):
            continue
        used[key] = min(1.0, max(0.0, float(v)))
    if not used:
        return None, used
    total = sum(JUDGE_WEIGHTS[k] for k in used)
    return sum(JUDGE_WEIGHTS[k] * v for k, v in used.items()) / total, used


def score_trajectory(messages: list[Message], *, judge: dict | None = None, judge_weight: float = 0.5) -> dict:
    """Score one task segment from 0 to 1; see the module docstring for every signal."""
    messages = list(messages or [])
    d = _Digest(messages)
    task_type = classify_task_type(d.messages)
    call_budget, step_budget, half_changes, word_budget = _BUDGETS.get(task_type, _BUDGETS["other"])
    W = WEIGHTS
    metrics: dict[str, dict[str, Any]] = {
        "tool_calls": _tool_calls_metric(d, call_budget, W["tool_calls"]),
        "tool_error_rate": _error_rate_metric(d, W["tool_error_rate"]),
        "repeated_failures": _repeated_failures_metric(d, W["repeated_failures"]),
        "loops": _loops_metric(d, W["loops"]),
        "user_frustration": _frustration_metric(d, W["user_frustration"]),
        "outcome_cues": _outcome_cues_metric(d, W["outcome_cues"]),
        "final_answer": _final_answer_metric(d, W["final_answer"]),
        "efficiency": _efficiency_metric(d, step_budget, W["efficiency"]),
        "verbosity": _verbosity_metric(d, word_budget, W["verbosity"]),
        "state_changes": _state_changes_metric(d, half_changes, W["state_changes"]),
        "request_complexity": _complexity_metric(d, W["request_complexity"]),
        "policy_events": _policy_metric(d, task_type, W["policy_events"]),
    }
    num = sum(m["weight"] * m["score"] for m in metrics.values() if m["score"] is not None)
    den = sum(m["weight"] for m in metrics.values() if m["score"] is not None)
    # Squared: each shortfall costs more near the top, so a segment reaches the 0.7
    # memory threshold only when its weighted mean is >= 0.84 (monotone: ranking unchanged).
    deterministic = (num / den) ** 2 if den > 0 else 0.0

    judge_score: float | None = None
    judge_used = False
    jw = min(1.0, max(0.0, float(judge_weight)))
    overall = deterministic
    if judge:
        judge_score, used = _judge_score(judge)
        if judge_score is not None:
            judge_used = True
            overall = (1.0 - jw) * deterministic + jw * judge_score
            entry = _metric(round(judge_score, 4), judge_score, jw,
                            "weighted mean of the LLM rubric (goal_achieved 0.4, correctness 0.3, safety 0.2, "
                            "efficiency 0.1); blended as (1 - w) * deterministic + w * judge")
            entry["rubric"] = used
            if judge.get("rationale"):
                entry["rationale"] = str(judge["rationale"])[:1000]
            metrics["llm_judge"] = entry

    overall = round(min(1.0, max(0.0, overall)), 4)
    if d.assistant_turns == 0:
        outcome = "unknown"
    elif overall >= SUCCESS_THRESHOLD:
        outcome = "success"
    elif overall < FAILURE_THRESHOLD:
        outcome = "failure"
    else:
        outcome = "unknown"
    return {
        "version": QUALITY_VERSION,
        "summary": {
            "overall_score": overall,
            "task_type": task_type,
            "outcome": outcome,
            "deterministic_score": round(deterministic, 4),
            "judge_score": None if judge_score is None else round(judge_score, 4),
            "judge_used": judge_used,
        },
        "metrics": metrics,
    }

