"""The one reading of a segment that the quality scorer and the memory extractors share.

Both need the same facts about a segment's messages: which messages belong to the
main thread, which tool result answers which call, whether a result is an error,
whether a call only looks something up or changes something, and which messages are
history that a resumed session replayed into the log. Two loops computing these
apart will drift apart, and then the scorer and the extractors disagree about the
very same call. :func:`read_segment` makes the pass once; the scorer
(:mod:`.quality_metrics`) and the extractors (:mod:`.episodes`) each derive their
own view from the :class:`Segment` it returns and never walk tool calls or pair
results themselves.

What the pass does
------------------
* Sub-agent (sidechain) messages are left out when the segment has main-thread ones;
  anything that is not a :class:`~ultron.sessions.messages.Message` is ignored.
* Tool results are paired with their calls by id: a result goes to the oldest call
  with that id still waiting for one (some producers reuse ids). A result with no
  waiting call is an *orphan* (``Entry.call is None``): a tool-only segment, or a
  window that starts after the call.
* Each call's name and arguments are parsed once (:func:`read_arguments`) and its
  :func:`tool_kind` judged once; each result is judged once by :func:`is_error_result`.
* History replayed into the log by a resumed session is marked, not dropped, so each
  consumer decides what to do with it: an assistant message whose calls all repeat
  earlier (id, tool, arguments) triples, and a result with no waiting call repeating
  an answered (id, text), are ``replayed``. After a replayed call message, a user
  turn or a call-less assistant text repeating an earlier one is ``repeats_text``
  (the scorer skips those; the extractors keep them).
* Every text is read only up to a cap (:data:`TEXT_CAP`, :data:`ARGS_CAP`), so a 5 MB
  tool output costs the same as a 5 KB one.

Error results (:func:`is_error_result`): ``name == "error"`` (Claude Code's
``is_error``), a result that opens like an error (``Error``, ``FooException``,
``<tool_use_error>``, ``permission denied``, ``{"error": ...}`` ...), a short status
line that mentions one; a long result is only searched for unmistakable markers
(a Python traceback, ``command not found``, a non-zero exit code, a compiler's or build
tool's failure line), at its head and its tail, so data that merely contains the word
"error" is not an error.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from ultron.sessions.messages import Message

#: characters of a message's text that are read (enough for every cue).
TEXT_CAP = 4000
#: characters of a call's arguments kept as its text.
ARGS_CAP = 4000
#: tau-bench's end-of-conversation token: stripped, never a signal by itself.
STOP_TOKEN = "###STOP###"

_I = re.IGNORECASE

#: the harness note left when the user interrupted the agent.
INTERRUPT = re.compile(r"^\s*\[Request interrupted by user", _I)


def cap(text: str | None, n: int = TEXT_CAP) -> str:
    """``text`` cut to ``n`` characters ("" for None)."""
    if not text:
        return ""
    return text if len(text) <= n else text[:n]


def strip_stop(text: str) -> str:
    """``text`` without the stop token (and then stripped), unchanged when it has none."""
    return text.replace(STOP_TOKEN, "").strip() if STOP_TOKEN in text else text


# -- tool results -----------------------------------------------------------------------
_ERROR_HEAD = 400        # an error opens within this much of a result
_ERROR_SCAN = 2000       # unmistakable markers are searched this far
_SHORT_RESULT = 300      # a result this short is a status line
_ERR_HEAD = re.compile(
    r"^\s*[^\w{\"]{0,3}(?:error\b|errors?:|\w+(?:Error|Exception)\b|exception\b|traceback\b|fatal\b|failed\b|"
    r"failure\b|<tool_use_error>|permission denied|command not found|no such file|invalid\b|not found\b|"
    r"unable to\b|cannot\b|could not\b|denied\b|\{\s*\"(?:error|errors|detail)\"\s*:(?!\s*(?:null|false|\[\]|\"\"|\{\})))", _I)
_ERR_STRONG = re.compile(
    r"Traceback \(most recent call last\)|^\s*\w+(?:Error|Exception): |<tool_use_error>|"
    r"\bcommand not found\b|No such file or directory|Permission denied|"
    r"\bexit(?:ed with)? (?:code|status):? [1-9]\d*|\bnon-zero exit (?:code|status)|\bnpm ERR!|^FAILED |^E\s{3}|"
    r"\bSegmentation fault|^(?:error|fatal|ERROR|FATAL)(?:\[\w+\])?: |! \[(?:remote )?rejected\]|"
    r"Error response from daemon|"
    # build tools, compilers and runtimes: make's "*** [x] Error 2", gcc / tsc / rustc
    # diagnostics, esptool's "A fatal error occurred", "[FAILED]", "BUILD FAILED",
    # a Go panic or a Rust thread panicking, an unhandled rejection, curl's "(22)"
    r"^\s*(?:make(?:\[\d+\])?: )?\*\*\* .*\bError \d+|:\d+(?::\d+)?: (?:fatal )?error\b|\berror TS\d+|"
    r"\bfatal error\b|\[(?:FAILED|FAIL|ERROR)\]|\bBUILD FAILED\b|^FAILURE: |^panic: |\bpanicked at\b|"
    r"\bUnhandled(?:PromiseRejection| exception| rejection)|^curl: \(\d+\)|^ERROR\b|"
    r"^\s*(?:Tests?|Test Suites):\s+[1-9]\d* failed|\b[1-9]\d* (?:failed|failing)\b(?:,| in )", re.MULTILINE)
_ERROR_TAIL = 1200       # ... and at the end, where build tools report
_ERR_SHORT = re.compile(r"(?<!\b0 )(?<!\bno )\b(?:errors?|exception|failed|failures?|not found|invalid|denied|"
                        r"unauthori[sz]ed|forbidden)\b", _I)


def is_error_result(msg: Message) -> bool:
    """Whether a tool result reports a failure (see the module docstring)."""
    if (msg.name or "") == "error":
        return True
    text = msg.content or ""
    if not text:
        return False
    head = text[:_ERROR_HEAD]
    if _ERR_HEAD.match(head):
        return True
    if len(text) <= _SHORT_RESULT and not head.lstrip().startswith(("{", "[")):
        return bool(_ERR_SHORT.search(text))   # a short status line; JSON is judged by its keys above
    if _ERR_STRONG.search(text[:_ERROR_SCAN]):
        return True
    return len(text) > _ERROR_SCAN and bool(_ERR_STRONG.search(text[-_ERROR_TAIL:]))


# -- tools ------------------------------------------------------------------------------
_READ_VERBS = frozenset(
    "get search list find read fetch lookup look query retrieve show view check calculate calc compute "
    "count think glob grep ls cat head tail describe inspect browse open load preview peek stat status "
    "explain summarize summarise validate verify estimate websearch webfetch todo todowrite exit plan "
    "ask taskoutput bashoutput output wait sleep".split())
#: a tool that hands the conversation to a human.
HANDOFF_TOOL = re.compile(r"transfer|escalat|hand_?off|human|live_?agent|to_agent", _I)
_DELEGATE = frozenset({"task", "agent", "subagent", "spawn"})
_CAMEL = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_READ_SHELL = re.compile(
    r"^\s*(?:cd [^;&|]+&&\s*)?(?:ls|cat|head|tail|grep|rg|find|pwd|echo|which|wc|tree|stat|file|du|df|"
    r"git (?:status|log|diff|show|branch)|python3? -c ['\"]?import|pip (?:show|list)|env|printenv)\b")


def _name_tokens(name: str) -> list[str]:
    parts: list[str] = []
    for chunk in re.split(r"[\s_\-.:/]+", name or ""):
        parts.extend(t.lower() for t in _CAMEL.findall(chunk))
    return parts or [(name or "").lower()]


def tool_kind(name: str, arguments: str) -> str:
    """'handoff', 'read', 'delegate' or 'write' (changes something), from the tool's
    name (its first word: get / search / list / read ...) and, for a shell tool, its
    command (``ls``, ``cat``, ``git status`` ... only read)."""
    if HANDOFF_TOOL.search(name or ""):
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


_NOT_JSON = object()
_JSON_SPACE = " \t\n\r"


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return _NOT_JSON


def _arguments(value: Any) -> tuple[str, dict[str, Any] | None, str]:
    """(key, args, whole text) of a call's arguments; see :func:`read_arguments`."""
    if isinstance(value, str):
        s = value.strip()
        val = _loads(s) if s else _NOT_JSON
        # json.loads ignores only JSON whitespace around a value; str.strip() drops more
        whole = val if s == value.strip(_JSON_SPACE) else _loads(value)
        key = value.strip() if whole is _NOT_JSON else json.dumps(whole, sort_keys=True, default=str)
        if isinstance(val, dict):
            return key, val, key if whole is val else json.dumps(val, sort_keys=True, default=str)
        return key, None, s
    try:
        key = json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):
        key = str(value)
        return key, None, key
    if isinstance(value, dict):
        return key, value, key
    return key, None, "" if value is None else str(value)


def read_arguments(value: Any) -> tuple[str, dict[str, Any] | None, str]:
    """``(key, args, text)`` of a call's arguments, whatever their shape.

    ``key`` is a canonical form (sorted-key JSON when they parse: equal arguments,
    equal key) that recognises a repeated call; ``args`` the arguments when they are a
    JSON object; ``text`` what is shown and searched: the object as sorted-key JSON,
    else the raw text, cut to :data:`ARGS_CAP`."""
    key, args, text = _arguments(value)
    return key, args, cap(text, ARGS_CAP)


# -- the segment ------------------------------------------------------------------------
@dataclass(eq=False, slots=True)
class ToolCall:
    """One tool call of the segment (replayed calls are not listed)."""

    index: int                   # position in Segment.calls
    message: int                 # index of its assistant message in Segment.messages
    id: str                      # the producer's call id, or "@<message>.<n>" when it has none
    name: str
    key: str                     # canonical arguments (see read_arguments)
    args: dict[str, Any] | None  # the arguments, when they are a JSON object
    text: str                    # the arguments as text, cut to ARGS_CAP
    clipped: bool                # ``text`` was cut
    kind: str                    # tool_kind: handoff / read / delegate / write
    result: int = -1             # index of the message with its result, -1 while none
    error: bool | None = None    # is_error_result of that result, None while none


@dataclass(eq=False, slots=True)
class Entry:
    """One message of the segment as read."""

    message: Message
    role: str
    content: str                 # the whole content ("" for None)
    text: str                    # content cut to TEXT_CAP
    calls: tuple[int, ...] = ()  # assistant: its calls (indices into Segment.calls)
    call: int | None = None      # tool: the call it answers; None for an orphan result
    error: bool | None = None    # tool: is_error_result
    replayed: bool = False       # history a resumed session replayed (see the module docstring)
    repeats_text: bool = False   # after a replayed call message: repeats an earlier text


@dataclass(eq=False, slots=True)
class Segment:
    """A segment as read: its messages, one entry per message, its tool calls."""

    messages: list[Message]      # the messages read (main thread only when it has any)
    entries: list[Entry]         # one per message, same order
    calls: list[ToolCall] = field(default_factory=list)

    def failed_calls(self) -> list[ToolCall]:
        return [c for c in self.calls if c.error]


def _parse_calls(m: Message, i: int) -> list[tuple[str, str, str, dict | None, str]]:
    parsed = []
    for k, tc in enumerate(m.tool_calls or []):
        tc = tc if isinstance(tc, dict) else {}
        fn = tc.get("function") if isinstance(tc.get("function"), dict) else {}
        name = str(fn.get("name") or tc.get("name") or "")
        key, args, text = _arguments(fn.get("arguments", tc.get("arguments", "")))
        parsed.append((str(tc.get("id") or f"@{i}.{k}"), name, key, args, text))
    return parsed


def read_segment(messages: Iterable[Any]) -> Segment:
    """Read a segment once (see the module docstring)."""
    msgs = [m for m in messages or () if isinstance(m, Message)]
    main = [m for m in msgs if not m.is_sidechain]
    seg = Segment(main or msgs, [])
    entries, calls = seg.entries, seg.calls
    waiting: dict[str, list[int]] = {}            # call id -> calls still waiting for a result
    seen_calls: set[tuple[str, str, str]] = set()
    answered: set[tuple[str, str]] = set()
    seen_texts: set[tuple[str, str]] = set()
    replay = False                                # the last call message was replayed history
    for i, m in enumerate(seg.messages):
        content = m.content if isinstance(m.content, str) else ("" if m.content is None else str(m.content))
        e = Entry(m, m.role, content, cap(content))
        entries.append(e)
        if e.role == "user":
            key = ("user", strip_stop(e.text))
            if replay and key in seen_texts:
                e.repeats_text = True
            seen_texts.add(key)
        elif e.role == "assistant":
            parsed = _parse_calls(m, i)
            if parsed:
                keys = [(cid, name, key) for cid, name, key, _, _ in parsed]
                replay = all(k in seen_calls for k in keys)
                if replay:
                    e.replayed = True
                    continue
                seen_calls.update(keys)
            text = e.text.strip()
            if replay and not parsed and ("assistant", text) in seen_texts:
                e.repeats_text = True
            elif text:
                seen_texts.add(("assistant", text))
            mine = []
            for cid, name, key, args, raw in parsed:
                c = ToolCall(len(calls), i, cid, name, key, args, cap(raw, ARGS_CAP), len(raw) > ARGS_CAP,
                             tool_kind(name, key))
                waiting.setdefault(cid, []).append(c.index)
                mine.append(c.index)
                calls.append(c)
            e.calls = tuple(mine)
        elif e.role == "tool":
            cid = m.tool_call_id or ""
            queue = waiting.get(cid)
            if not queue and cid and (cid, content) in answered:
                e.replayed = True
                continue
            answered.add((cid, content))
            try:
                e.error = is_error_result(m)
            except Exception:  # noqa: BLE001 - an odd message is simply not an error
                e.error = False
            if queue:
                c = calls[queue.pop(0)]
                e.call = c.index
                c.result = i
                c.error = e.error
    return seg
