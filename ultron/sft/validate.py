"""Checks an SFT file line by line, the way a trainer would read it.

Pure (reads the file, writes nothing), so the blocking Dagster asset check, the CLI and
the tests run the same thing. Each broken line gets one located error (its first
defect, ``message N`` counted from 1), since a later defect is often a consequence of
the first. The checks:

* every line is a JSON object of the format's shape;
* roles are in order: system only first, then a user turn; after a user turn comes the
  assistant; an assistant turn with tool calls is followed by tool results, which are
  followed by more assistant work (never directly by the user); the example ends with
  an assistant answer;
* every tool call id has its tool result (and every result answers a call of the turn
  right before it);
* no assistant turn is empty (no text and no tool calls).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FORMATS = ("openai", "sharegpt")
MAX_ERRORS = 1000


@dataclass
class ValidationResult:
    path: str
    fmt: str
    lines: int = 0
    valid_lines: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)
    error_count: int = 0

    @property
    def passed(self) -> bool:
        return self.error_count == 0

    def add(self, line: int, error: str) -> None:
        self.error_count += 1
        if len(self.errors) < MAX_ERRORS:
            self.errors.append({"line": line, "error": error})

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "fmt": self.fmt, "lines": self.lines, "valid_lines": self.valid_lines,
                "passed": self.passed, "error_count": self.error_count, "errors": self.errors}


class _Invalid(Exception):
    pass


def validate_sft_file(path: str | Path, fmt: str) -> ValidationResult:
    """``fmt``: ``openai`` or ``sharegpt``. A missing or unreadable file is one error at line 0."""
    result = ValidationResult(str(path), fmt)
    if fmt not in FORMATS:
        result.add(0, f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
        return result
    check = _check_openai if fmt == "openai" else _check_sharegpt
    try:
        fh = open(path, "rb")
    except OSError as exc:
        result.add(0, f"cannot read the file: {exc.strerror or exc}")
        return result
    with fh:
        for number, raw in enumerate(fh, start=1):
            result.lines += 1
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                result.add(number, f"not UTF-8 (byte {exc.start})")
                continue
            if not text.strip():
                result.add(number, "empty line")
                continue
            try:
                record = json.loads(text)
            except ValueError as exc:
                result.add(number, f"not valid JSON: {exc}")
                continue
            try:
                if not isinstance(record, dict):
                    raise _Invalid(f"a line must be a JSON object, not {type(record).__name__}")
                check(record)
            except _Invalid as exc:
                result.add(number, str(exc))
                continue
            result.valid_lines += 1
    return result


def validate_export(directory: str | Path) -> dict[str, ValidationResult]:
    """Every ``*.openai.jsonl`` / ``*.sharegpt.jsonl`` file of an export directory."""
    out = {}
    for path in sorted(Path(directory).glob("*.jsonl")):
        fmt = path.name.removesuffix(".jsonl").rsplit(".", 1)[-1]
        if fmt in FORMATS:
            out[path.name] = validate_sft_file(path, fmt)
    return out


# -- OpenAI chat ----------------------------------------------------------------------------------

_ROLES = ("system", "user", "assistant", "tool")


def _check_openai(record: dict[str, Any]) -> None:
    messages = record.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _Invalid("'messages' must be a non-empty array")
    _check_tools(record.get("tools"))
    state = "start"  # start | system | user | answer | calls | tool
    pending: Counter = Counter()
    for index, m in enumerate(messages, start=1):
        where = f"message {index}"
        if not isinstance(m, dict):
            raise _Invalid(f"{where}: must be an object")
        role = m.get("role")
        if role not in _ROLES:
            raise _Invalid(f"{where}: unknown role {role!r}")
        where = f"message {index} ({role})"
        content = m.get("content")
        calls = m.get("tool_calls")
        if role == "assistant" and calls is not None and not isinstance(calls, list):
            raise _Invalid(f"{where}: 'tool_calls' must be an array")
        if not (isinstance(content, str) or (content is None and role == "assistant" and calls)):
            raise _Invalid(f"{where}: 'content' must be a string")
        if state in ("calls", "tool") and role != "tool" and pending:
            raise _Invalid(f"{where}: tool call id(s) {', '.join(map(repr, sorted(pending)))} have no tool result")
        if role == "system":
            if index != 1:
                raise _Invalid(f"{where}: a system message may only come first")
            state = "system"
        elif role == "user":
            if state in ("start", "system", "answer"):
                state = "user"
            elif state == "user":
                raise _Invalid(f"{where}: two user messages in a row")
            else:
                raise _Invalid(f"{where}: tool results must be followed by an assistant turn, not the user")
        elif role == "assistant":
            if state in ("start", "system"):
                raise _Invalid(f"{where}: the conversation must start with a user message")
            if state == "answer":
                raise _Invalid(f"{where}: two assistant answers in a row")
            if not calls and not (content or "").strip():
                raise _Invalid(f"{where}: empty assistant turn (no content and no tool calls)")
            if calls:
                pending = Counter(_check_call(c, f"{where}: tool call {k}") for k, c in enumerate(calls, start=1))
                duplicated = [i for i, n in pending.items() if n > 1]
                if duplicated:
                    raise _Invalid(f"{where}: tool call id {duplicated[0]!r} is used twice")
                state = "calls"
            else:
                state = "answer"
        else:  # tool
            if state not in ("calls", "tool"):
                raise _Invalid(f"{where}: a tool result must follow an assistant tool call or another tool result")
            call_id = m.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise _Invalid(f"{where}: missing 'tool_call_id'")
            if not pending[call_id]:
                raise _Invalid(f"{where}: tool_call_id {call_id!r} answers no call of the assistant turn before it")
            pending[call_id] -= 1
            pending += Counter()  # drop zero counts
            state = "tool"
    if state != "answer":
        if pending:
            missing = ", ".join(map(repr, sorted(pending)))
            raise _Invalid(f"message {len(messages)}: tool call id(s) {missing} have no tool result")
        raise _Invalid(f"message {len(messages)}: the conversation must end with an assistant answer")


def _check_call(call: Any, where: str) -> str:
    if not isinstance(call, dict):
        raise _Invalid(f"{where}: must be an object")
    call_id = call.get("id")
    if not isinstance(call_id, str) or not call_id:
        raise _Invalid(f"{where}: missing 'id'")
    if call.get("type") != "function":
        raise _Invalid(f"{where}: 'type' must be 'function'")
    fn = call.get("function")
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
        raise _Invalid(f"{where}: 'function.name' is missing")
    args = fn.get("arguments")
    if not isinstance(args, str):
        raise _Invalid(f"{where}: 'function.arguments' must be a JSON string")
    try:
        parsed = json.loads(args)
    except ValueError:
        raise _Invalid(f"{where}: 'function.arguments' is not valid JSON") from None
    if not isinstance(parsed, dict):
        raise _Invalid(f"{where}: 'function.arguments' must encode a JSON object")
    return call_id


def _check_tools(tools: Any) -> None:
    if tools is None:
        return
    if not isinstance(tools, list):
        raise _Invalid("'tools' must be an array")
    for k, tool in enumerate(tools, start=1):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(fn, dict):
            raise _Invalid(f"tool {k}: must be {{'type': 'function', 'function': {{...}}}}")
        if not isinstance(fn.get("name"), str) or not fn["name"] or not isinstance(fn.get("parameters", {}), dict):
            raise _Invalid(f"tool {k}: needs a 'name' and an object 'parameters'")


# -- ShareGPT ------------------------------------------------------------------------------------------

_ODD = ("human", "observation")  # positions 1, 3, 5 ... (LLaMA-Factory's alternation)
_EVEN = ("gpt", "function_call")


def _check_sharegpt(record: dict[str, Any]) -> None:
    turns = record.get("conversations")
    if not isinstance(turns, list) or not turns:
        raise _Invalid("'conversations' must be a non-empty array")
    if "system" in record and not isinstance(record["system"], str):
        raise _Invalid("'system' must be a string")
    if "tools" in record:
        try:
            tools = json.loads(record["tools"]) if isinstance(record["tools"], str) else None
        except ValueError:
            tools = None
        if not isinstance(tools, list):
            raise _Invalid("'tools' must be a JSON string holding an array")
    if isinstance(turns[0], dict) and turns[0].get("from") == "system":
        if not isinstance(turns[0].get("value"), str):
            raise _Invalid("turn 1 (system): 'value' must be a string")
        turns = turns[1:]
        offset = 2
    else:
        offset = 1
    if not turns:
        raise _Invalid("'conversations' holds no turn besides the system prompt")
    calls_open = 0
    for k, turn in enumerate(turns):
        where = f"turn {k + offset}"
        if not isinstance(turn, dict):
            raise _Invalid(f"{where}: must be an object")
        who = turn.get("from")
        value = turn.get("value")
        where = f"turn {k + offset} ({who})"
        if not isinstance(value, str):
            raise _Invalid(f"{where}: 'value' must be a string")
        if who not in _ODD + _EVEN:
            raise _Invalid(f"{where}: unknown 'from' {who!r}" + (" (system may only come first)"
                                                               if who == "system" else ""))
        if calls_open and who != "observation":
            raise _Invalid(f"{where}: the function_call before it has no observation (tool result)")
        expected = _ODD if k % 2 == 0 else _EVEN
        if who not in expected:
            raise _Invalid(f"{where}: roles out of order, expected {' or '.join(expected)}")
        if who == "gpt" and not value.strip():
            raise _Invalid(f"{where}: empty assistant turn")
        if who == "function_call":
            calls_open = _function_calls(value, where)
        elif who == "observation":
            if not calls_open:
                raise _Invalid(f"{where}: an observation must follow a function_call")
            if calls_open > 1:
                try:
                    results = json.loads(value)
                except ValueError:
                    results = None
                if not isinstance(results, list) or len(results) != calls_open:
                    raise _Invalid(f"{where}: {calls_open} parallel calls need a JSON array of {calls_open} results")
            calls_open = 0
    last = turns[-1].get("from")
    if calls_open:
        raise _Invalid(f"turn {len(turns) - 1 + offset}: the last function_call has no observation (tool result)")
    if last != "gpt":
        raise _Invalid(f"turn {len(turns) - 1 + offset}: the conversation must end with a gpt answer")


def _function_calls(value: str, where: str) -> int:
    try:
        parsed = json.loads(value)
    except ValueError:
        raise _Invalid(f"{where}: the value is not valid JSON") from None
    calls = parsed if isinstance(parsed, list) else [parsed]
    if not calls:
        raise _Invalid(f"{where}: empty call list (empty assistant turn)")
    for call in calls:
        if not isinstance(call, dict) or not isinstance(call.get("name"), str) or not call["name"]:
            raise _Invalid(f"{where}: each call needs a 'name'")
        if not isinstance(call.get("arguments", {}), dict):
            raise _Invalid(f"{where}: 'arguments' must be an object")
    return len(calls)
