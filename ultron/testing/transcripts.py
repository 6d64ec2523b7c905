"""A session written once as a small spec, rendered in each format agents write.

The lesson corpus (``benchmarks/data/lessons``) and the tests that read it describe a
session once, format-free; this module turns it into the JSONL lines of an OpenAI
chat log, an Anthropic Messages log (content blocks) or a Claude Code transcript, so
every lesson shape is exercised through each of the three parsers' paths.

A spec::

    {"id": "pnpm-01", "shape": "correction", "type": "correction",
     "lesson": "...", "key_terms": ["pnpm", "npm"], "system": "optional system prompt",
     "turns": [
        {"role": "user", "text": "..."},
        {"role": "assistant", "text": "...",
         "calls": [{"name": "Bash", "args": {"command": "npm install"},
                    "result": "npm ERR! ...", "error": true}]},
     ]}

Each call's result follows its assistant turn (as a ``tool`` message, or a
``tool_result`` block in a user turn for the two block formats). ``error`` sets
``is_error`` where the format has it; OpenAI logs carry only the result text.
"""

from __future__ import annotations

import json
import uuid as uuidlib
from pathlib import Path
from typing import Any, Iterable

FORMATS = ("openai", "anthropic", "claude_code")


def _calls(turn: dict[str, Any], sid: str, t: int) -> list[tuple[str, dict[str, Any]]]:
    return [(c.get("id") or f"call_{sid}_{t}_{k}", c) for k, c in enumerate(turn.get("calls") or [])]


def _openai(spec: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if spec.get("system"):
        out.append({"role": "system", "content": spec["system"]})
    for t, turn in enumerate(spec["turns"]):
        if turn["role"] == "user":
            out.append({"role": "user", "content": turn["text"]})
            continue
        calls = _calls(turn, spec["id"], t)
        msg: dict[str, Any] = {"role": "assistant", "content": turn.get("text") or ""}
        if calls:
            msg["tool_calls"] = [{"id": cid, "type": "function",
                                  "function": {"name": c["name"], "arguments": json.dumps(c.get("args") or {})}}
                                 for cid, c in calls]
        out.append(msg)
        for cid, c in calls:
            out.append({"role": "tool", "tool_call_id": cid, "name": c["name"], "content": c.get("result", "")})
    return out


def _assistant_blocks(turn: dict[str, Any], calls: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if turn.get("text"):
        blocks.append({"type": "text", "text": turn["text"]})
    blocks.extend({"type": "tool_use", "id": cid, "name": c["name"], "input": c.get("args") or {}} for cid, c in calls)
    return blocks


def _result_blocks(calls: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    return [{"type": "tool_result", "tool_use_id": cid, "content": c.get("result", ""),
             **({"is_error": True} if c.get("error") else {})} for cid, c in calls]


def _anthropic(spec: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if spec.get("system"):
        out.append({"role": "system", "content": spec["system"]})
    for t, turn in enumerate(spec["turns"]):
        if turn["role"] == "user":
            out.append({"role": "user", "content": [{"type": "text", "text": turn["text"]}]})
            continue
        calls = _calls(turn, spec["id"], t)
        out.append({"role": "assistant", "content": _assistant_blocks(turn, calls)})
        if calls:
            out.append({"role": "user", "content": _result_blocks(calls)})
    return out


def _claude_code(spec: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    session = str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, "ultron-lesson:" + spec["id"]))
    parent: str | None = None

    def line(kind: str, message: dict[str, Any]) -> None:
        nonlocal parent
        uid = str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, f"{session}:{len(out)}"))
        out.append({"type": kind, "message": message, "uuid": uid, "parentUuid": parent, "isSidechain": False,
                    "sessionId": session, "cwd": "/workspace/project", "version": "2.0.0",
                    "timestamp": f"2026-01-01T00:{len(out) // 60:02d}:{len(out) % 60:02d}.000Z"})
        parent = uid

    # Claude Code writes no system line in its transcripts: a spec's system prompt is left out.
    for t, turn in enumerate(spec["turns"]):
        if turn["role"] == "user":
            line("user", {"role": "user", "content": turn["text"]})
            continue
        calls = _calls(turn, spec["id"], t)
        line("assistant", {"id": f"msg_{spec['id']}_{t}", "role": "assistant", "model": "claude-test",
                           "content": _assistant_blocks(turn, calls)})
        if calls:
            line("user", {"role": "user", "content": _result_blocks(calls)})
    return out


_RENDER = {"openai": _openai, "anthropic": _anthropic, "claude_code": _claude_code}


def render(spec: dict[str, Any], fmt: str) -> list[dict[str, Any]]:
    """The spec's session as the JSON objects (one per line) of format ``fmt``."""
    if fmt not in _RENDER:
        raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    return _RENDER[fmt](spec)


def render_jsonl(spec: dict[str, Any], fmt: str) -> str:
    return "".join(json.dumps(obj, ensure_ascii=False) + "\n" for obj in render(spec, fmt))


def write_session(spec: dict[str, Any], fmt: str, directory: Path) -> Path:
    """Write the rendered session to ``directory/<id>.<fmt>.jsonl`` and return the path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{spec['id']}.{fmt}.jsonl"
    path.write_text(render_jsonl(spec, fmt), encoding="utf-8")
    return path


def load_specs(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """Every spec in the given JSON files (a file holds one spec or a list of them)."""
    out: list[dict[str, Any]] = []
    for path in sorted(paths):
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        out.extend(data if isinstance(data, list) else [data])
    return out
