"""Offline trajectory quality: a deterministic 0..1 score for one task segment.

No model is called: every signal (:mod:`.quality_metrics`) is counted from the
messages themselves (roles, tool calls, tool results and precompiled phrase lists),
so the same segment always gets the same score, in about 1.5 ms for a 20-message
segment.

How the score is built
----------------------
The signals are combined by a small calibrated logistic model
(:mod:`.quality_model`, where the weights, how they were fitted and how they were
checked are documented): ``deterministic_score = sigmoid(INTERCEPT + sum(weight *
(score - neutral)))``, so that the score reads like the probability that the task
was done. Five outcome-risk signals (verbosity, state changes, deferred endings,
policy events, request complexity) have weights fitted with task-grouped
validation on 100 real airline customer-service trajectories; the hygiene and
explicit-outcome signals (errors, loops, frustration, the user's "it works", a
missing final answer) have hand-set prior weights, because service data cannot
estimate them. Budgets that depend on the task type (``_BUDGETS``) normalise every
count before it is scored, so a coding agent, which edits and talks a lot by
nature, is not judged by a service agent's yardstick; outside customer service the
fitted weights also count at half strength. Each metric's ``weight`` is its weight in
that model (log-odds per unit of score).

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

import math
import re
from typing import Any

from ultron.heuristics.quality_metrics import (
    META_USER, Digest, complexity_metric, deferred_metric, efficiency_metric, error_rate_metric,
    final_answer_metric, frustration_metric, loops_metric, metric, outcome_cues_metric, policy_metric,
    repeated_failures_metric, state_changes_metric, tool_calls_metric, verbosity_metric)
from ultron.heuristics.quality_model import WEIGHTS, logit, sigmoid
from ultron.heuristics.reader import cap, strip_stop
from ultron.sessions.messages import Message
from ultron.vocabulary import RUBRIC, TASK_TYPES

#: 2: overall_score is a calibrated logistic model (quality_model); 1: squared weighted mean.
QUALITY_VERSION = 2

#: weights of the LLM rubric criteria inside judge_score.
JUDGE_WEIGHTS: dict[str, float] = {"goal_achieved": 0.4, "correctness": 0.3, "safety": 0.2, "efficiency": 0.1}
assert set(JUDGE_WEIGHTS) == set(RUBRIC), "one weight per rubric criterion"

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

_I = re.IGNORECASE

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


def classify_task_type(messages: list[Message]) -> str:
    """One of code, data, ops, writing, qa, customer_service, other: keyword votes over
    the user's turns (first turn counted double), tool names and the system prompt."""
    user_parts: list[str] = []
    tool_names: list[str] = []
    system = ""
    first = True
    for m in messages:
        if m.role == "user":
            text = strip_stop(cap(m.content, 2000))
            if not text or META_USER.match(text):
                continue
            user_parts.append(text)
            if first:
                user_parts.append(text)
                first = False
        elif m.role == "assistant":
            for tc in m.tool_calls or []:
                tool_names.append(str(((tc or {}).get("function") or {}).get("name") or ""))
        elif m.role == "system" and not system:
            system = cap(m.content, 1500)
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
    """Score one task segment from 0 to 1 (the module docstring says how; every signal is in
    :mod:`.quality_metrics`)."""
    messages = list(messages or [])
    d = Digest(messages)
    task_type = classify_task_type(d.messages)
    call_budget, step_budget, half_changes, word_budget = _BUDGETS.get(task_type, _BUDGETS["other"])
    W = WEIGHTS
    metrics: dict[str, dict[str, Any]] = {
        "tool_calls": tool_calls_metric(d, call_budget, W["tool_calls"]),
        "tool_error_rate": error_rate_metric(d, W["tool_error_rate"]),
        "repeated_failures": repeated_failures_metric(d, W["repeated_failures"]),
        "loops": loops_metric(d, W["loops"]),
        "user_frustration": frustration_metric(d, W["user_frustration"]),
        "outcome_cues": outcome_cues_metric(d, W["outcome_cues"]),
        "final_answer": final_answer_metric(d, W["final_answer"]),
        "efficiency": efficiency_metric(d, step_budget, W["efficiency"]),
        "verbosity": verbosity_metric(d, word_budget, W["verbosity"]),
        "state_changes": state_changes_metric(d, half_changes, W["state_changes"]),
        "request_complexity": complexity_metric(d, W["request_complexity"]),
        "policy_events": policy_metric(d, task_type, W["policy_events"]),
        "deferred": deferred_metric(d, W["deferred"]),
    }
    deterministic = sigmoid(logit(metrics, task_type))

    judge_score: float | None = None
    judge_used = False
    jw = min(1.0, max(0.0, float(judge_weight)))
    overall = deterministic
    if judge:
        judge_score, used = _judge_score(judge)
        if judge_score is not None:
            judge_used = True
            overall = (1.0 - jw) * deterministic + jw * judge_score
            entry = metric(round(judge_score, 4), judge_score, jw,
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
