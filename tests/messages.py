"""Tiny message builders the heuristics tests share."""

from __future__ import annotations

import json

from ultron.sessions.messages import Message


def user(text: str) -> Message:
    return Message(role="user", content=text)


def say(text: str) -> Message:
    return Message(role="assistant", content=text)


def call(name: str, args: dict | str | None = None, cid: str = "c1", text: str = "") -> Message:
    raw = args if isinstance(args, str) else json.dumps(args or {})
    return Message(role="assistant", content=text, tool_calls=[
        {"id": cid, "type": "function", "function": {"name": name, "arguments": raw}}])


def result(cid: str, content: str, name: str | None = None) -> Message:
    return Message(role="tool", content=content, tool_call_id=cid, name=name)
