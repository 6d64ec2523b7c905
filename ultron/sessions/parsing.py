"""Streaming parser for agent session ``.jsonl`` files.

It reads one line at a time with a hard per-line byte limit, so a 100 MB file or
a single multi-megabyte line never has to sit in memory whole. Every line that
cannot be used becomes a located :class:`Problem`; the lines around it are kept.

Four shapes are understood, per line, and the file's format is reported as the
most specific shape seen in it:

* ``openai``: ``{"role", "content", "tool_calls", "tool_call_id", "name", "reasoning_content"}``
* ``anthropic``: ``{"role", "content": [blocks]}`` with text / thinking / tool_use / tool_result
* ``claude_code``: Claude Code transcripts, ``{"type", "message": {...}, "uuid", "isSidechain"}``
* ``codex``: Codex CLI rollouts, ``{"timestamp", "type", "payload"}`` lines whose ``response_item``
  payloads are Responses-API items; the 2025 files without the envelope too
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Iterator

from ultron.sessions.messages import ROLE_ALIASES, ROLES, Message

BOM = b"\xef\xbb\xbf"
BINARY_SNIFF_BYTES = 8192
_DRAIN_CHUNK = 1 << 20
# JSON escapes that decode to characters Postgres text cannot hold (NUL) or
# that are not valid Unicode scalar values (lone surrogates).
_SUSPECT_ESCAPE = re.compile(rb"\\u(?:0000|[dD][89a-fA-F][0-9a-fA-F]{2})")
_SURROGATE = re.compile("[\ud800-\udfff]")
_FORMAT_RANK = {"openai": 0, "anthropic": 1, "claude_code": 2, "codex": 3}
# Claude Code line types that never carry a chat message.
_NON_MESSAGE_TYPES = {"file-history-snapshot", "queue-operation", "summary", "progress", "system"}
# Codex rollout envelopes; only session_meta and response_item can hold something to read.
_CODEX_ENVELOPES = {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}
# Responses-API items Codex records that carry nothing for a transcript (reasoning is encrypted
# or a summary; snapshots and compaction are harness bookkeeping).
_CODEX_SILENT_ITEMS = {"reasoning", "ghost_snapshot", "compaction", "compaction_summary"}
_CODEX_CALLS = {"function_call", "custom_tool_call", "local_shell_call", "web_search_call"}
_CODEX_OUTPUTS = {"function_call_output", "custom_tool_call_output"}
_CODEX_ITEMS = {"message"} | _CODEX_SILENT_ITEMS | _CODEX_CALLS | _CODEX_OUTPUTS
# Context Codex injects with role "user": AGENTS.md contents, or a whole block that is one
# snake_case element (<environment_context>, <user_instructions>, <turn_aborted> ...).
_CODEX_HARNESS = re.compile(r"\s*(?:# AGENTS\.md instructions for |<([a-z]+(?:_[a-z]+)+)>.*</\1>\s*$)", re.S)
# Newer Codex prints a shell call's status as the output's first line.
_EXIT_CODE_LINE = re.compile(r"\s*Exit code: (-?\d+)")
# Codex writes an assistant turn's text and each of its calls as separate items: one merge
# key joins adjacent ones into one OpenAI-shaped assistant message.
_CODEX_TURN = "codex:assistant"


@dataclass(frozen=True)
class Problem:
    """Something wrong at a place in a file. ``line`` is 1-based, None for the whole file."""

    line: int | None
    error: str

    def to_dict(self) -> dict[str, Any]:
        return {"line": self.line, "error": self.error}


class FileRejected(Exception):
    """The whole file is unusable (binary, unreadable); nothing from it is stored."""


@dataclass
class ParseStats:
    lines: int = 0
    bytes_read: int = 0
    format: str | None = None
    roles: Counter = field(default_factory=Counter)
    problem_total: int = 0
    #: The agent's own id for the session, when the file names one (Claude Code's ``sessionId``,
    #: a Codex rollout's ``session_meta.payload.id``): the first one seen wins.
    session_id: str | None = None


class SessionParser:
    """Turns a binary stream into normalised messages, collecting problems on the way.

    Iterate :meth:`messages`; afterwards ``problems``, ``stats`` and ``sha256``
    describe the whole file, including the bytes of any skipped lines.
    """

    def __init__(self, *, max_line_bytes: int = 8 * 1024 * 1024, max_problems: int = 1000) -> None:
        self.max_line_bytes = max_line_bytes
        self.max_problems = max_problems
        self.problems: list[Problem] = []
        self.stats = ParseStats()
        self._hasher = hashlib.sha256()

    @property
    def sha256(self) -> str:
        return self._hasher.hexdigest()

    def problem(self, line: int | None, error: str) -> None:
        self.stats.problem_total += 1
        if len(self.problems) < self.max_problems:
            self.problems.append(Problem(line, error))

    def finish_problems(self) -> list[Problem]:
        """Problems to store, with a closing note if some were dropped."""
        dropped = self.stats.problem_total - len(self.problems)
        if dropped > 0:
            return self.problems + [Problem(None, f"{dropped} more problems not recorded")]
        return list(self.problems)

    # -- reading ---------------------------------------------------------------------

    def _lines(self, stream: BinaryIO) -> Iterator[tuple[int, bytes]]:
        limit = self.max_line_bytes
        lineno = 0
        while True:
            raw = stream.readline(limit + 1)
            if not raw:
                return
            lineno += 1
            self.stats.lines = lineno
            self._hasher.update(raw)
            self.stats.bytes_read += len(raw)
            if len(raw) > limit and not raw.endswith(b"\n"):
                total = len(raw)
                while True:  # skip the rest of the oversized line without holding it
                    chunk = stream.readline(_DRAIN_CHUNK)
                    if not chunk:
                        break
                    self._hasher.update(chunk)
                    self.stats.bytes_read += len(chunk)
                    total += len(chunk)
                    if chunk.endswith(b"\n"):
                        break
                self.problem(lineno, f"line is {total} bytes, over the {limit}-byte limit (ULTRON_MAX_LINE_BYTES); skipped")
                continue
            yield lineno, raw

    def messages(self, stream: BinaryIO) -> Iterator[Message]:
        """Yield messages in file order; Claude Code's streamed fragments are merged."""
        head = stream.peek(BINARY_SNIFF_BYTES)[:BINARY_SNIFF_BYTES] if hasattr(stream, "peek") else b""
        if b"\x00" in head:
            raise FileRejected("binary file (NUL bytes in the first 8 KiB); not a .jsonl session")
        pending: Message | None = None
        for lineno, raw in self._lines(stream):
            for msg in self._parse_line(lineno, raw):
                if pending is not None and msg.merge_key and msg.merge_key == pending.merge_key:
                    _merge_into(pending, msg)
                    continue
                if pending is not None:
                    yield from self._emit(pending)
                pending = msg
        if pending is not None:
            yield from self._emit(pending)

    def _emit(self, msg: Message) -> Iterator[Message]:
        if msg.role != "tool" and msg.is_empty():
            return  # nothing an LLM could read; tool rows stay to keep indices aligned
        self.stats.roles[msg.role] += 1
        yield msg

    # -- one line --------------------------------------------------------------------

    def _parse_line(self, lineno: int, raw: bytes) -> list[Message]:
        if lineno == 1 and raw.startswith(BOM):
            raw = raw[len(BOM):]
            self.problem(lineno, "UTF-8 byte-order mark removed; line kept")
        if not raw.strip():
            return []
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            text = raw.decode("utf-8", errors="replace")
            self.problem(lineno, f"invalid UTF-8 at byte {exc.start}; replaced with U+FFFD, line kept")
        try:
            obj = json.loads(text)
        except RecursionError:
            self.problem(lineno, "JSON nested too deeply to parse; skipped")
            return []
        except ValueError as exc:
            msg = getattr(exc, "msg", str(exc))
            col = getattr(exc, "colno", None)
            where = f" at column {col}" if col else ""
            self.problem(lineno, f"not valid JSON: {msg}{where}; skipped")
            return []
        if not isinstance(obj, dict):
            self.problem(lineno, f"expected a JSON object, got {_json_type(obj)}; skipped")
            return []
        try:
            messages = self._normalise(lineno, obj)
        except RecursionError:
            self.problem(lineno, "message nested too deeply to normalise; skipped")
            return []
        if messages and _SUSPECT_ESCAPE.search(raw):
            self._sanitise(lineno, messages)
        return messages

    def _sanitise(self, lineno: int, messages: list[Message]) -> None:
        found: set[str] = set()
        for msg in messages:
            for attr in ("content", "reasoning_content", "name", "tool_call_id", "source_id"):
                value = getattr(msg, attr)
                if value:
                    setattr(msg, attr, _clean_text(value, found))
            if msg.tool_calls:
                msg.tool_calls = _clean_obj(msg.tool_calls, found)
        if "nul" in found:
            self.problem(lineno, "NUL characters removed (PostgreSQL text cannot store them); line kept")
        if "surrogate" in found:
            self.problem(lineno, "lone UTF-16 surrogates replaced with U+FFFD; line kept")

    def _normalise(self, lineno: int, obj: dict[str, Any]) -> list[Message]:
        if obj.get("_type") == "metadata":
            return []
        line_type = obj.get("type")
        if self.stats.session_id is None:
            self.stats.session_id = _session_id(obj, line_type)
        if _is_codex(obj, line_type):
            self._note_format("codex")
            return self._codex(lineno, obj, line_type)
        if isinstance(obj.get("message"), dict) and isinstance(line_type, str):
            return self._claude_code(lineno, obj, line_type)
        if "role" not in obj and isinstance(line_type, str):
            if line_type in _NON_MESSAGE_TYPES or "message" not in obj:
                return []  # a transcript bookkeeping line: nothing to read
            self.problem(lineno, f"'message' is {_json_type(obj['message'])}, expected an object; skipped")
            return []
        self._note_format("anthropic" if isinstance(obj.get("content"), list) and _has_blocks(obj["content"]) else "openai")
        return self._chat(lineno, obj, is_sidechain=False, source_id=None, merge_key=None)

    def _claude_code(self, lineno: int, obj: dict[str, Any], line_type: str) -> list[Message]:
        if line_type not in ("user", "assistant"):
            return []
        self._note_format("claude_code")
        inner = dict(obj["message"])
        inner.setdefault("role", line_type)
        source_id = obj.get("uuid") if isinstance(obj.get("uuid"), str) else None
        sidechain = bool(obj.get("isSidechain"))
        merge_key = None
        if inner.get("role") == "assistant" and isinstance(inner.get("id"), str):
            # Claude Code writes one line per content block of a streamed reply.
            merge_key = f"{int(sidechain)}:{inner['id']}"
        return self._chat(lineno, inner, is_sidechain=sidechain, source_id=source_id, merge_key=merge_key)

    # -- Codex rollouts ------------------------------------------------------------------

    def _codex(self, lineno: int, obj: dict[str, Any], line_type: Any) -> list[Message]:
        if line_type in _CODEX_ENVELOPES and "payload" in obj:
            if line_type == "session_meta":
                return self._codex_meta(lineno, obj["payload"])
            if line_type == "response_item":
                return self._codex_item(lineno, obj["payload"])
            return []  # event_msg repeats the items for the UI; turn_context and compacted hold no words
        if line_type is None:
            # 2025 files: a bare session header first, then {"record_type": "state"} markers.
            return [] if "record_type" in obj else self._codex_meta(lineno, obj)
        return self._codex_item(lineno, obj)

    def _codex_meta(self, lineno: int, meta: Any) -> list[Message]:
        """The session's base instructions are Codex's system prompt, never the user's words."""
        if not isinstance(meta, dict):
            self.problem(lineno, f"'payload' is {_json_type(meta)}, expected an object; skipped")
            return []
        text = _instructions_text(meta.get("instructions")) or _instructions_text(meta.get("base_instructions"))
        return [Message(role="system", content=text, line=lineno)] if text else []

    def _codex_item(self, lineno: int, item: Any) -> list[Message]:
        if not isinstance(item, dict):
            self.problem(lineno, f"'payload' is {_json_type(item)}, expected an object; skipped")
            return []
        kind = item.get("type")
        if kind == "message":
            return self._codex_message(lineno, item)
        if kind in _CODEX_CALLS:
            return [Message(role="assistant", line=lineno, tool_calls=[_codex_call(kind, item)], merge_key=_CODEX_TURN)]
        if kind in _CODEX_OUTPUTS:
            return [_codex_output(lineno, item)]
        if kind not in _CODEX_SILENT_ITEMS:
            self.problem(lineno, f"unknown Codex response item type {kind!r}; skipped")
        return []

    def _codex_message(self, lineno: int, item: dict[str, Any]) -> list[Message]:
        """A Responses-API message; the harness context Codex sends as "user" is told apart.

        Codex puts AGENTS.md and the environment description in user-role messages, at
        times in the same message as the request: each block is judged on its own, so
        only what the person typed is read as the user's words.
        """
        role = item.get("role")
        if not isinstance(role, str) or ROLE_ALIASES.get(role.lower(), role.lower()) not in ROLES:
            what = "missing 'role'" if role is None else f"unknown role {role!r} (expected one of {', '.join(ROLES)})"
            self.problem(lineno, f"{what}; skipped")
            return []
        role = ROLE_ALIASES.get(role.lower(), role.lower())
        texts = self._codex_texts(lineno, item.get("content"))
        if role == "assistant":
            return [Message(role=role, content="\n".join(texts), line=lineno, merge_key=_CODEX_TURN)]
        if role != "user":
            return [Message(role=role, content="\n".join(texts), line=lineno)]
        harness = [t for t in texts if _CODEX_HARNESS.match(t)]
        own = [t for t in texts if not _CODEX_HARNESS.match(t)]
        out = [Message(role="system", content="\n".join(harness), line=lineno)] if harness else []
        if own:
            out.append(Message(role="user", content="\n".join(own), line=lineno))
        return out

    def _codex_texts(self, lineno: int, content: Any) -> list[str]:
        if content is None or isinstance(content, str):
            return [content] if content else []
        if not isinstance(content, list):
            self.problem(lineno, f"'content' is {_json_type(content)}, expected an array of content items; "
                                 "converted to text")
            return [_json_text(content)]
        texts: list[str] = []
        bad_blocks = 0
        for block in content:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind in ("input_text", "output_text", "text") and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif kind in ("input_image", "image"):
                texts.append("[image]")
            else:
                bad_blocks += 1
        if bad_blocks:
            self.problem(lineno, f"{bad_blocks} content item(s) of unknown shape ignored; rest of line kept")
        return texts

    def _note_format(self, fmt: str) -> None:
        # Plain text lines look the same in every format; the most specific shape seen wins.
        if _FORMAT_RANK[fmt] > _FORMAT_RANK.get(self.stats.format, -1):
            self.stats.format = fmt

    def _chat(
        self, lineno: int, obj: dict[str, Any], *, is_sidechain: bool, source_id: str | None, merge_key: str | None
    ) -> list[Message]:
        role = obj.get("role")
        if role is None:
            self.problem(lineno, "missing 'role'; skipped")
            return []
        if not isinstance(role, str) or ROLE_ALIASES.get(role.lower(), role.lower()) not in ROLES:
            self.problem(lineno, f"unknown role {role!r} (expected one of {', '.join(ROLES)}); skipped")
            return []
        role = ROLE_ALIASES.get(role.lower(), role.lower())

        def make(r: str, **kw: Any) -> Message:
            return Message(role=r, line=lineno, is_sidechain=is_sidechain, source_id=source_id, **kw)

        base = make(
            role,
            tool_call_id=_opt_str(obj.get("tool_call_id")),
            name=_opt_str(obj.get("name")),
            reasoning_content=_opt_str(obj.get("reasoning_content")) or None,
            merge_key=merge_key,
        )
        tool_calls = obj.get("tool_calls")
        if tool_calls is not None:
            if isinstance(tool_calls, list):
                base.tool_calls = [_openai_tool_call(tc) for tc in tool_calls if isinstance(tc, dict)] or None
            else:
                self.problem(lineno, f"'tool_calls' is {_json_type(tool_calls)}, expected an array; ignored")

        content = obj.get("content")
        if content is None or isinstance(content, str):
            base.content = content or ""
            return [base]
        if isinstance(content, list):
            return self._blocks(lineno, content, base, make)
        self.problem(lineno, f"'content' is {_json_type(content)}, expected a string or an array of blocks; converted to text")
        base.content = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
        return [base]

    def _blocks(self, lineno: int, blocks: list[Any], base: Message, make) -> list[Message]:
        """Split content blocks into messages, keeping their order.

        Text, thinking and tool_use blocks accumulate on the current message; each
        tool_result becomes its own ``tool`` message, so a user turn that answers
        two tool calls and then says something becomes tool, tool, user.
        """
        out: list[Message] = []
        current = base
        texts: list[str] = []
        thoughts: list[str] = [base.reasoning_content] if base.reasoning_content else []

        def flush() -> None:
            nonlocal texts, thoughts
            current.content = "\n".join(t for t in texts if t)
            current.reasoning_content = "\n".join(t for t in thoughts if t) or None
            if not current.is_empty() or current.role == "tool":
                out.append(current)
            texts, thoughts = [], []

        bad_blocks = 0
        for block in blocks:
            if isinstance(block, str):
                texts.append(block)
                continue
            if not isinstance(block, dict):
                bad_blocks += 1
                continue
            kind = block.get("type")
            if kind in ("text", "input_text", "output_text"):
                texts.append(_opt_str(block.get("text")) or "")
            elif kind in ("thinking", "redacted_thinking"):
                thoughts.append(_opt_str(block.get("thinking")) or "")
            elif kind == "tool_use":
                call = {
                    "id": _opt_str(block.get("id")) or "",
                    "type": "function",
                    "function": {"name": _opt_str(block.get("name")) or "", "arguments": _json_text(block.get("input", {}))},
                }
                current.tool_calls = (current.tool_calls or []) + [call]
            elif kind == "tool_result":
                if texts or thoughts or current.tool_calls:
                    flush()
                    current = make(base.role, merge_key=None)
                result = make(
                    "tool",
                    tool_call_id=_opt_str(block.get("tool_use_id")),
                    content=_block_text(block.get("content")),
                )
                if block.get("is_error"):
                    result.name = "error"
                out.append(result)
                current = make(base.role, merge_key=None)
            elif kind in ("image", "image_url", "document"):
                texts.append(f"[{kind}]")
            else:
                bad_blocks += 1
        if bad_blocks:
            self.problem(lineno, f"{bad_blocks} content block(s) of unknown shape ignored; rest of line kept")
        if texts or thoughts or current.tool_calls or not out:
            flush()
        return out


def _session_id(obj: dict[str, Any], line_type: Any) -> str | None:
    """The agent's session id a line carries: Claude Code puts ``sessionId`` on every line,
    Codex names it once, in its ``session_meta`` line's payload."""
    found = obj.get("sessionId")
    if line_type == "session_meta" and isinstance(obj.get("payload"), dict):
        found = found or obj["payload"].get("id")
    if isinstance(found, str) and 0 < len(found.strip()) <= 200 and "\x00" not in found:
        return found.strip()
    return None


def _merge_into(target: Message, extra: Message) -> None:
    if extra.content:
        target.content = f"{target.content}\n{extra.content}" if target.content else extra.content
    if extra.reasoning_content:
        target.reasoning_content = (
            f"{target.reasoning_content}\n{extra.reasoning_content}" if target.reasoning_content else extra.reasoning_content
        )
    if extra.tool_calls:
        target.tool_calls = (target.tool_calls or []) + extra.tool_calls


def _is_codex(obj: dict[str, Any], line_type: Any) -> bool:
    """Whether a line is Codex's: an envelope, or (2025) a bare item, header or state marker."""
    if isinstance(line_type, str):
        if line_type in _CODEX_ENVELOPES:
            return "payload" in obj
        return line_type in _CODEX_ITEMS and "message" not in obj
    if line_type is not None or "role" in obj:
        return False
    header = {"id", "timestamp"} <= obj.keys() and ("instructions" in obj or "git" in obj)
    return header or obj.keys() == {"record_type"}


def _instructions_text(value: Any) -> str:
    if isinstance(value, dict):  # newer files: base_instructions = {"text": ...}
        value = value.get("text")
    return value.strip() if isinstance(value, str) else ""


def _codex_call(kind: str, item: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI-shaped tool call; arguments always encode a JSON object, as that shape requires."""
    call_id = _opt_str(item.get("call_id") or item.get("id")) or ""
    if kind == "function_call":
        name, args = _opt_str(item.get("name")) or "", item.get("arguments", "")
        arguments = args if isinstance(args, str) else _json_text(args)
    elif kind == "custom_tool_call":  # free-form input (apply_patch's envelope), wrapped as the SFT export does
        name, arguments = _opt_str(item.get("name")) or "", _json_text({"input": _opt_str(item.get("input")) or ""})
    else:  # local_shell_call / web_search_call: the action is the call
        name = "local_shell" if kind == "local_shell_call" else "web_search"
        action = item.get("action")
        arguments = _json_text(action if isinstance(action, dict) else {"action": action})
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _codex_output(lineno: int, item: dict[str, Any]) -> Message:
    text, failed = _codex_output_text(item.get("output"))
    result = Message(role="tool", content=text, line=lineno, tool_call_id=_opt_str(item.get("call_id")))
    if failed:
        result.name = "error"  # where Claude Code's is_error goes
    return result


def _codex_output_text(output: Any) -> tuple[str, bool]:
    """``(text, failed)`` of a tool output, whichever way this Codex version wrote it.

    A string, either plain (newer shells open it with "Exit code: N") or JSON-encoded
    ``{"output", "metadata": {"exit_code"}}``; older files an object ``{"content",
    "success"}``; MCP results a list of content items.
    """
    if isinstance(output, str):
        wrapped = _json_object(output)
        if wrapped is not None and "output" in wrapped:
            meta = wrapped.get("metadata") if isinstance(wrapped.get("metadata"), dict) else {}
            code = meta.get("exit_code")
            return _block_text(wrapped["output"]), isinstance(code, int) and code != 0
        status = _EXIT_CODE_LINE.match(output)
        return output, bool(status and int(status.group(1)) != 0)
    if isinstance(output, dict):
        return _block_text(output.get("content", output.get("output"))), output.get("success") is False
    return _block_text(output), False


def _json_object(text: str) -> dict[str, Any] | None:
    if not text.lstrip().startswith("{"):
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _openai_tool_call(tc: dict[str, Any]) -> dict[str, Any]:
    fn = tc.get("function") if isinstance(tc.get("function"), dict) else {}
    args = fn.get("arguments", "")
    return {
        "id": _opt_str(tc.get("id")) or "",
        "type": "function",
        "function": {"name": _opt_str(fn.get("name")) or "", "arguments": args if isinstance(args, str) else _json_text(args)},
    }


def _block_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict):
                if isinstance(part.get("text"), str):
                    parts.append(part["text"])
                elif part.get("type"):
                    parts.append(f"[{part['type']}]")
        return "\n".join(parts)
    return _json_text(content)


def _has_blocks(content: list[Any]) -> bool:
    return any(isinstance(b, dict) and b.get("type") in ("tool_use", "tool_result", "thinking") for b in content)


def _opt_str(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else str(value)


def _json_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _json_type(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


def _clean_text(value: str, found: set[str]) -> str:
    if "\x00" in value:
        found.add("nul")
        value = value.replace("\x00", "")
    if _SURROGATE.search(value):
        found.add("surrogate")
        value = _SURROGATE.sub("\ufffd", value)
    return value


def _clean_obj(value: Any, found: set[str]) -> Any:
    if isinstance(value, str):
        return _clean_text(value, found)
    if isinstance(value, list):
        return [_clean_obj(v, found) for v in value]
    if isinstance(value, dict):
        return {_clean_text(str(k), found): _clean_obj(v, found) for k, v in value.items()}
    return value
