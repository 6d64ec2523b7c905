"""Turning a segment's stored messages into a conversation that is valid training data.

A segment is cut out of a real session, so its edges and insides are often not a
well-formed chat: it may start with the agent's reply, end on a tool call whose
result is in the next segment, hold sub-agent traffic, a tool result whose call was
lost, a turn the user interrupted, or an empty streamed fragment. Trainers either
reject such examples or, worse, learn from them. The clean-up below repairs what
can be repaired without inventing text and drops the rest, counting every action by
name so the manifest says exactly what was done.

The result follows one grammar, which ``validate`` checks and both output formats
rely on (ShareGPT needs strict alternation):

    [system] ( user  ( assistant+calls  tool-results-for-every-call )*  assistant )+

* ``system`` only first; leading system messages are merged, later ones dropped.
* Every assistant turn has text or tool calls; a tool-call turn is followed by one
  result per call, in call order, and then by more agent work or the agent's answer.
* A tool-call turn not followed by the agent (the user spoke next, or the segment
  ends) was interrupted or is unfinished: its calls and results are dropped (its text,
  if any, stays). Training on work the user stopped would teach the wrong thing.
* Consecutive user messages are merged, as are an assistant's text and the turn that
  follows it, so roles alternate.
"""

from __future__ import annotations

import json
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, Sequence

from ultron.sessions.messages import ROLE_ALIASES, Message

Dict = dict[str, Any]


@dataclass
class CleanConversation:
    """``messages`` is None when nothing trainable is left; ``skipped`` then says why."""

    messages: list[Dict] | None
    repairs: Counter = field(default_factory=Counter)
    skipped: str | None = None


def clean_conversation(messages: Sequence[Message]) -> CleanConversation:
    repairs: Counter = Counter()
    items = _normalise(_main_thread(messages, repairs), repairs)
    units = _pair_tools(items, repairs)
    units = _settle(units, repairs)
    flat = [m for unit in units for m in unit]
    if not any(m["role"] == "assistant" for m in flat):
        return CleanConversation(None, repairs, "no_messages" if not messages else "no_assistant_turn")
    for m in flat:
        if m["role"] != "assistant":
            continue
        if not m.get("tool_calls"):
            m.pop("tool_calls", None)
        elif not m["content"]:
            m["content"] = None  # the OpenAI shape of a turn that only calls tools
    return CleanConversation(flat, repairs)


# -- pass 1: one thread, one shape ----------------------------------------------------------


def _main_thread(messages: Sequence[Message], repairs: Counter) -> list[Message]:
    """Sub-agent (sidechain) traffic interleaves with the main thread and would break it;
    a segment made only of a sub-agent's conversation is a conversation of its own."""
    main = [m for m in messages if not m.is_sidechain]
    if main and len(main) < len(messages):
        repairs["sidechain_messages_dropped"] += len(messages) - len(main)
        return main
    return list(messages)


def _normalise(messages: Sequence[Message], repairs: Counter) -> list[Dict]:
    out: list[Dict] = []
    system: list[str] = []
    for msg in messages:
        role = ROLE_ALIASES.get(msg.role, msg.role)
        content = msg.content if isinstance(msg.content, str) else ("" if msg.content is None else str(msg.content))
        if role == "system":
            if out:
                repairs["misplaced_system_dropped"] += 1
            elif content.strip():
                system.append(content)
            continue
        if role == "user":
            if not content.strip():
                repairs["empty_user_dropped"] += 1
                continue
            out.append({"role": "user", "content": content})
        elif role == "assistant":
            out.append({"role": "assistant", "content": content, "tool_calls": _calls(msg.tool_calls, repairs)})
        elif role == "tool":
            out.append({"role": "tool", "content": content, "tool_call_id": msg.tool_call_id or ""})
        else:
            repairs["unknown_role_dropped"] += 1
    if len(system) > 1:
        repairs["system_messages_merged"] += len(system) - 1
    if system:
        out.insert(0, {"role": "system", "content": "\n\n".join(system)})
    return out


def _calls(raw: Any, repairs: Counter) -> list[Dict]:
    calls: list[Dict] = []
    for tc in raw or []:
        fn = tc.get("function") if isinstance(tc, dict) else None
        name = fn.get("name") if isinstance(fn, dict) else None
        if not isinstance(name, str) or not name.strip():
            repairs["invalid_tool_calls_dropped"] += 1
            continue
        calls.append({"id": str(tc.get("id") or ""), "type": "function",
                      "function": {"name": name, "arguments": _arguments(fn.get("arguments"), repairs)}})
    return calls


def _arguments(raw: Any, repairs: Counter) -> str:
    """A JSON object as a string, as the OpenAI format requires; the original text is kept
    when it already is one. Anything else is wrapped, never thrown away."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return "{}"
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except ValueError:
            repairs["tool_arguments_wrapped"] += 1
            return json.dumps({"input": raw}, ensure_ascii=False)
        if isinstance(value, dict):
            return raw
    else:
        value = raw
        if isinstance(value, dict):
            return json.dumps(value, ensure_ascii=False)
    repairs["tool_arguments_wrapped"] += 1
    return json.dumps({"input": value}, ensure_ascii=False)


# -- pass 2: every call gets its result -----------------------------------------------------


def _pair_tools(items: list[Dict], repairs: Counter) -> list[list[Dict]]:
    """Units: a tool-call turn together with its results, or one other message.

    Results are matched to calls by id (the oldest waiting call with that id, as some
    producers reuse ids), only among the tool messages right after the turn; a result
    anywhere else is an orphan. Calls without a result are removed from their turn."""
    units: list[list[Dict]] = []
    i, n = 0, len(items)
    turn_no = 0
    while i < n:
        m = items[i]
        if m["role"] == "tool":
            repairs["orphan_tool_results_dropped"] += 1
            i += 1
            continue
        if m["role"] != "assistant" or not m["tool_calls"]:
            units.append([m])
            i += 1
            continue
        turn_no += 1
        j = i + 1
        waiting: dict[str, deque[int]] = {}
        for k, call in enumerate(m["tool_calls"]):
            waiting.setdefault(call["id"], deque()).append(k)
        answer: dict[int, Dict] = {}
        while j < n and items[j]["role"] == "tool":
            queue = waiting.get(items[j]["tool_call_id"])
            if queue:
                answer[queue.popleft()] = items[j]
            else:
                repairs["orphan_tool_results_dropped"] += 1
            j += 1
        calls, results, used = [], [], set()
        for k, call in enumerate(m["tool_calls"]):
            if k not in answer:
                repairs["unmatched_tool_calls_dropped"] += 1
                continue
            call_id = call["id"]
            if not call_id:
                call_id = f"call_{turn_no}_{k}"
                repairs["missing_tool_call_ids_filled"] += 1
            elif call_id in used:
                suffix = 2
                while f"{call['id']}_{suffix}" in used:
                    suffix += 1
                call_id = f"{call['id']}_{suffix}"
                repairs["duplicate_tool_call_ids_renamed"] += 1
            used.add(call_id)
            calls.append({**call, "id": call_id})
            results.append({"role": "tool", "tool_call_id": call_id, "name": call["function"]["name"],
                            "content": answer[k]["content"]})
        head = {**m, "tool_calls": calls}
        units.append([head, *results])
        i = j
    return units


# -- pass 3: the grammar ----------------------------------------------------------------------


def _role(unit: list[Dict]) -> str:
    return unit[0]["role"]


def _is_call(unit: list[Dict]) -> bool:
    return unit[0]["role"] == "assistant" and bool(unit[0]["tool_calls"])


def _settle(units: list[list[Dict]], repairs: Counter) -> list[list[Dict]]:
    """Apply the structural repairs until none applies (each one only removes or merges,
    so this ends; two rounds are the usual case)."""
    while True:
        before = sum(len(u) for u in units), len(units)
        units = _drop_empty_assistants(units, repairs)
        units = _drop_trailing_users(units, repairs)
        units = _drop_interrupted_calls(units, repairs)
        units = _merge_neighbours(units, repairs)
        units = _drop_leading(units, repairs)
        if (sum(len(u) for u in units), len(units)) == before:
            return units


def _drop_empty_assistants(units: list[list[Dict]], repairs: Counter) -> list[list[Dict]]:
    out = []
    for unit in units:
        head = unit[0]
        if head["role"] == "assistant" and not head["tool_calls"] and not (head["content"] or "").strip():
            repairs["empty_assistant_dropped"] += 1
            continue
        out.append(unit)
    return out


def _drop_trailing_users(units: list[list[Dict]], repairs: Counter) -> list[list[Dict]]:
    while units and _role(units[-1]) == "user":
        units = units[:-1]
        repairs["trailing_user_dropped"] += 1
    return units


def _drop_interrupted_calls(units: list[list[Dict]], repairs: Counter) -> list[list[Dict]]:
    """Right to left, so a run of call turns cut off by the user goes in one pass."""
    out: list[list[Dict]] = []
    follower = "end"
    for unit in reversed(units):
        if _is_call(unit) and follower != "assistant":
            repairs["interrupted_tool_turns_dropped"] += 1
            head = unit[0]
            if not (head["content"] or "").strip():
                continue
            unit = [{**head, "tool_calls": []}]
        out.append(unit)
        follower = _role(unit)
    out.reverse()
    return out


def _merge_neighbours(units: list[list[Dict]], repairs: Counter) -> list[list[Dict]]:
    out: list[list[Dict]] = []
    for unit in units:
        prev = out[-1] if out else None
        if prev is not None and _role(prev) == "user" and _role(unit) == "user":
            out[-1] = [{**prev[0], "content": f"{prev[0]['content']}\n\n{unit[0]['content']}"}]
            repairs["user_messages_merged"] += 1
            continue
        if prev is not None and _role(prev) == "assistant" and not _is_call(prev) and _role(unit) == "assistant":
            text = "\n\n".join(t for t in (prev[0]["content"], unit[0]["content"]) if (t or "").strip())
            out[-1] = [{**unit[0], "content": text}, *unit[1:]]
            repairs["assistant_messages_merged"] += 1
            continue
        out.append(unit)
    return out


def _drop_leading(units: list[list[Dict]], repairs: Counter) -> list[list[Dict]]:
    """The conversation opens with the user (after an optional system prompt)."""
    start = 1 if units and _role(units[0]) == "system" else 0
    k = start
    while k < len(units) and _role(units[k]) != "user":
        repairs["leading_messages_dropped"] += len(units[k])
        k += 1
    return units if k == start else units[:start] + units[k:]
