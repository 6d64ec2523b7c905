"""The two on-disk shapes of a cleaned conversation, the tool schemas they carry, and the
redaction pass every exported string goes through.

* OpenAI chat fine-tuning: ``{"messages": [...], "tools": [...]}``; assistant turns keep
  ``tool_calls`` (``arguments`` a JSON string), tool messages keep ``tool_call_id`` and
  ``name``.
* ShareGPT as LLaMA-Factory reads it: ``{"conversations": [{"from", "value"}], "system",
  "tools"}`` with ``human``/``observation`` on odd and ``gpt``/``function_call`` on even
  positions. A ``function_call`` value is ``{"name", "arguments": {...}}``, or a list of
  them for parallel calls; the matching ``observation`` is the result, or a JSON list of
  the results in call order. ``tools`` is a JSON string.

Recorded sessions carry no tool definitions, so ``tools`` is inferred from the calls an
example makes: the argument keys become properties typed by the values seen, and a key
present in every call is required. That is what the example actually shows the model.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, Callable

Dict = dict[str, Any]

_JSON_TYPES: tuple[tuple[type, str], ...] = (
    (bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"), (list, "array"), (dict, "object"),
)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    for cls, name in _JSON_TYPES:
        if isinstance(value, cls):
            return name
    return "string"


def infer_tools(messages: list[Dict]) -> list[Dict]:
    """OpenAI ``tools`` entries for the functions this conversation calls, by name."""
    seen: dict[str, dict[str, Any]] = {}
    for m in messages:
        for call in m.get("tool_calls") or []:
            fn = call["function"]
            try:
                args = json.loads(fn["arguments"])
            except ValueError:
                args = {}
            if not isinstance(args, dict):
                args = {}
            entry = seen.setdefault(fn["name"], {"calls": 0, "types": {}, "present": Counter()})
            entry["calls"] += 1
            for key, value in args.items():
                entry["types"].setdefault(key, set()).add(_json_type(value))
                entry["present"][key] += 1
    tools = []
    for name in sorted(seen):
        entry = seen[name]
        properties = {}
        for key in sorted(entry["types"]):
            types = entry["types"][key]
            if {"integer", "number"} <= types:
                types = types - {"integer"}
            properties[key] = {"type": next(iter(types)) if len(types) == 1 else sorted(types)}
        parameters: Dict = {"type": "object", "properties": properties}
        required = [k for k in sorted(properties) if entry["present"][k] == entry["calls"]]
        if required:
            parameters["required"] = required
        tools.append({"type": "function", "function": {"name": name, "parameters": parameters}})
    return tools


def redact_messages(messages: list[Dict], redact: Callable[[str], str]) -> list[Dict]:
    """Every free-text field through the project's redactor: contents, tool names,
    arguments (redacted as JSON text, which the redactor keeps parseable) and results."""
    out = []
    for m in messages:
        r = dict(m)
        if isinstance(r.get("content"), str):
            r["content"] = redact(r["content"])
        if r.get("name"):
            r["name"] = redact(r["name"])
        if r.get("tool_calls"):
            r["tool_calls"] = [_redact_call(c, redact) for c in r["tool_calls"]]
        out.append(r)
    return out


def _redact_call(call: Dict, redact: Callable[[str], str]) -> Dict:
    fn = call["function"]
    args = redact(fn["arguments"])
    try:
        ok = isinstance(json.loads(args), dict)
    except ValueError:
        ok = False
    if not ok:  # never expected; still, the output must stay a JSON object and stay redacted
        args = json.dumps(_redact_leaves(json.loads(fn["arguments"]), redact), ensure_ascii=False)
    return {**call, "function": {"name": redact(fn["name"]), "arguments": args}}


def _redact_leaves(value: Any, redact: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [_redact_leaves(v, redact) for v in value]
    if isinstance(value, dict):
        return {redact(k): _redact_leaves(v, redact) for k, v in value.items()}
    return value


def openai_record(messages: list[Dict], tools: list[Dict]) -> Dict:
    out: Dict = {"messages": [_openai_message(m) for m in messages]}
    if tools:
        out["tools"] = tools
    return out


def _openai_message(m: Dict) -> Dict:
    if m["role"] == "assistant":
        out: Dict = {"role": "assistant", "content": m.get("content")}
        if m.get("tool_calls"):
            out["tool_calls"] = [{"id": c["id"], "type": "function",
                                  "function": {"name": c["function"]["name"],
                                               "arguments": c["function"]["arguments"]}} for c in m["tool_calls"]]
        return out
    if m["role"] == "tool":
        return {"role": "tool", "tool_call_id": m["tool_call_id"], "name": m["name"], "content": m["content"]}
    return {"role": m["role"], "content": m["content"]}


def sharegpt_record(messages: list[Dict], tools: list[Dict]) -> tuple[Dict, int]:
    """The ShareGPT line and how many assistant texts it could not carry (the text of a turn
    that also calls tools: ``function_call`` holds only the call)."""
    conversations: list[Dict] = []
    out: Dict = {}
    dropped_texts = 0
    i = 0
    while i < len(messages):
        m = messages[i]
        if m["role"] == "system":
            out["system"] = m["content"]
        elif m["role"] == "user":
            conversations.append({"from": "human", "value": m["content"]})
        elif m["role"] == "assistant" and m.get("tool_calls"):
            calls = [{"name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"])}
                     for c in m["tool_calls"]]
            if (m.get("content") or "").strip():
                dropped_texts += 1
            conversations.append({"from": "function_call",
                                  "value": json.dumps(calls[0] if len(calls) == 1 else calls, ensure_ascii=False)})
            results = []
            while i + 1 < len(messages) and messages[i + 1]["role"] == "tool":
                i += 1
                results.append(messages[i]["content"])
            value = results[0] if len(results) == 1 else json.dumps(results, ensure_ascii=False)
            conversations.append({"from": "observation", "value": value})
        elif m["role"] == "assistant":
            conversations.append({"from": "gpt", "value": m["content"]})
        i += 1
    record: Dict = {"conversations": conversations}
    if "system" in out:
        record["system"] = out["system"]
    if tools:
        record["tools"] = json.dumps([t["function"] for t in tools], ensure_ascii=False)
    return record, dropped_texts
