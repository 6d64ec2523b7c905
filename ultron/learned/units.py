"""A segment as the lesson model reads it: one *unit* per turn, each with its features.

A unit is a person's turn (what the user typed) or an agent's turn (its text, its tool
calls and what they returned). The model decides per unit whether it carries a lesson
and of which shape, so a unit must say what a reader would look at: the words, the
calls and whether they failed, where the turn sits, and what came just before and after
(a failed call before a fix, a "that worked" after it). Every feature is a string
token; :mod:`ultron.learned.linear` hashes tokens into columns, so training and serving
share one definition and a new feature needs no schema.

The tokens (docs/concepts.md, "The learned lesson model", lists them too):

* ``w:`` words and ``b:`` word pairs of the turn's own text, prefixed by the role
  (``u``/``a``); ``c:`` words of its calls' names and arguments; ``r:`` words of the
  first error lines of failed results;
* ``p:`` the first words of the previous turn, ``n:`` of the next person's turn (a
  confirmation or a push-back is the strongest evidence there is), ``z:`` of the segment's
  last person's turn, and whether its last call failed (how the task ended);
* ``s:`` structure: role, first/last turn, position bin, length bin, calls made,
  failed here, failed before, a later call of the same tool succeeded, code block,
  list, question mark, no successful call since a failure, the segment's task type, a
  system prompt present.

Sentences the harness repeats at the opening of every session (:class:`RepeatIndex`) are
taken out before any of this is read.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from ultron.heuristics.episodes import Digest
from ultron.heuristics.text import sentences
from ultron.sessions.messages import Message

_TOKEN = re.compile(r"[a-z][a-z0-9_]*|\d+")
ERROR_LINE = re.compile(r"error|exception|fail|denied|refused|not found|cannot|can't|invalid|fatal|traceback|"
                         r"unable|missing|conflict|timeout|timed out|panic|warning", re.IGNORECASE)
_CODE = re.compile(r"```|^\s{4}\S", re.MULTILINE)
_LIST = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+\S", re.MULTILINE)
#: words read per turn: a lesson is stated in the first few hundred words of a turn
TEXT_WORDS = 220
CONTEXT_WORDS = 12


@dataclass(slots=True)
class Call:
    name: str
    args: str
    result: str
    error: bool

    def gist(self) -> str:
        """The call as a step a person would write: the command itself when the arguments
        hold one, else ``name key=value ...``."""
        try:
            data = json.loads(self.args) if self.args.startswith("{") else None
        except ValueError:
            data = None
        if isinstance(data, dict):
            for key in ("command", "cmd", "code", "query", "sql", "script"):
                if isinstance(data.get(key), str) and data[key].strip():
                    return data[key].strip()
            parts = [f"{k}={v}" for k, v in data.items() if isinstance(v, (str, int, float, bool))]
            return f"{self.name} {' '.join(parts)}".strip()
        return f"{self.name} {self.args}".strip()


@dataclass(slots=True)
class Unit:
    """One turn: ``msg`` is its message index in the segment (the Digest's numbering)."""

    msg: int
    role: str                     # "user" or "assistant"
    text: str
    calls: list[Call] = field(default_factory=list)
    tokens: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return any(c.error for c in self.calls)

    def error_lines(self, n: int = 2) -> list[str]:
        out: list[str] = []
        for c in self.calls:
            if not c.error:
                continue
            lines = [ln.strip() for ln in c.result.splitlines() if ln.strip()]
            hit = [ln for ln in lines if ERROR_LINE.search(ln)] or lines
            out.extend(ln[:240] for ln in hit[:n])
        return out[:n]

    def reading(self) -> str:
        """The turn as one text (its words, calls and error lines), for evidence and review."""
        parts = [self.text]
        for c in self.calls:
            parts.append(f"{c.name} {c.args}".strip())
        parts.extend(self.error_lines())
        return "\n".join(p for p in parts if p)


def _words(text: str, n: int) -> list[str]:
    return _TOKEN.findall(text.lower())[:n]


def _bin(x: float, edges: Iterable[float]) -> int:
    return sum(1 for e in edges if x >= e)


def units_of(messages: list[Any] | Digest) -> tuple[Digest, list[Unit]]:
    """The segment's turns, in order (harness lines, replays and empty turns are not turns)."""
    d = messages if isinstance(messages, Digest) else Digest(messages)
    out: list[Unit] = []
    for i, kind in enumerate(d.kind):
        if kind == "user":
            out.append(Unit(i, "user", d.text[i]))
        elif kind == "assistant":
            calls = [Call(c.name, (c.raw or "")[:400], c.result or "", bool(c.error))
                     for c in (d.calls[k] for k in d.msg_calls.get(i, []))]
            if d.text[i] or calls:
                out.append(Unit(i, "assistant", d.text[i], calls))
    return d, out


class RepeatIndex:
    """Sentences that arrive unchanged in many sessions: harness templates and system
    prompts. A sentence seen at the opening of at least ``min_sessions`` sessions is the
    harness's, not something anyone learned, and is taken out of what the lesson model
    reads. Sentences are compared by a 64-bit hash of their words (no text is stored):
    the pipeline counts sessions per hash in the database (``ultron.db.openings``), the
    benchmarks and training over the corpus."""

    def __init__(self, counts: dict[int, int] | None = None, min_sessions: int = 3) -> None:
        self.counts = counts or {}
        self.min_sessions = min_sessions

    @staticmethod
    def key(sentence: str) -> int | None:
        """The sentence's hash, or None when it is too short to be a harness's."""
        words = _TOKEN.findall(sentence.lower())
        if len(words) < 4:
            return None
        digest = hashlib.blake2b(" ".join(words[:60]).encode("utf-8"), digest_size=8).digest()
        return int.from_bytes(digest, "big", signed=True)

    @classmethod
    def keys(cls, texts: Iterable[str]) -> set[int]:
        """The keys of one session's opening texts (system prompt, first request)."""
        out = set()
        for t in texts:
            for s in sentences(t or ""):
                k = cls.key(s)
                if k is not None:
                    out.add(k)
        return out

    def repeated(self, sentence: str) -> bool:
        k = self.key(sentence)
        return k is not None and self.counts.get(k, 0) >= self.min_sessions

    def strip(self, text: str) -> str:
        """``text`` without its repeated sentences (unchanged when none is)."""
        if not self.counts or not text:
            return text
        sents = sentences(text)
        keep = [s for s in sents if not self.repeated(s)]
        return text if len(keep) == len(sents) else "\n".join(keep)


def strip_repeated(messages: list[Message], repeats: RepeatIndex) -> list[Message]:
    """The segment with the harness's repeated sentences taken out of its system prompt and
    its first user message: what every extractor (model or LLM) then reads."""
    if not repeats.counts:
        return messages
    out, first_user = [], True
    for m in messages:
        if m.role == "system" or (m.role == "user" and first_user and isinstance(m.content, str) and m.content):
            if m.role == "user":
                first_user = False
            text = repeats.strip(m.content if isinstance(m.content, str) else "")
            if text != m.content:
                m = dataclasses.replace(m, content=text)
        out.append(m)
    return out


def opening_keys(messages: list[Message]) -> set[int]:
    """The hashes of what a harness would repeat in this segment: its system prompt and its
    first user message."""
    system = next((m.content for m in messages if m.role == "system" and isinstance(m.content, str)), "")
    first = next((m.content for m in messages if m.role == "user" and isinstance(m.content, str) and m.content), "")
    return RepeatIndex.keys([system, first])


def featurize(d: Digest, units: list[Unit], task_type: str | None = None) -> list[Unit]:
    """Fill each unit's ``tokens`` (see the module docstring)."""
    n = len(units)
    has_system = bool(d.system)
    # how the segment ends: the last person's words and whether its last call failed
    last_user = next((u for u in reversed(units) if u.role == "user"), None)
    ending = [f"z:{w}" for w in _words(last_user.text, CONTEXT_WORDS)] if last_user is not None else []
    calls = [c for u in units for c in u.calls]
    if calls:
        ending.append("s:ends_failed" if calls[-1].error else "s:ends_ok")
    first_user = next((k for k, u in enumerate(units) if u.role == "user"), -1)
    failed_at = [k for k, u in enumerate(units) if u.failed]
    for k, u in enumerate(units):
        r = "u" if u.role == "user" else "a"
        text = u.text
        words = _words(text, TEXT_WORDS)
        toks = [f"w:{r}:{w}" for w in words]
        toks += [f"b:{r}:{a}_{b}" for a, b in zip(words, words[1:])]
        for c in u.calls:
            toks += [f"c:{w}" for w in _words(f"{c.name} {c.args}", 30)]
            toks.append("s:call_err" if c.error else "s:call_ok")
        for ln in u.error_lines():
            toks += [f"r:{w}" for w in _words(ln, 25)]
        prev = units[k - 1] if k else None
        if prev is not None:
            toks += [f"p:{prev.role[0]}:{w}" for w in _words(prev.text, CONTEXT_WORDS)]
            if prev.failed:
                toks.append("s:after_fail")
        nxt = next((v for v in units[k + 1:] if v.role == "user"), None)
        if nxt is not None:
            toks += [f"n:{w}" for w in _words(nxt.text, CONTEXT_WORDS)]
        else:
            toks.append("s:no_next_user")
        names = {c.name for c in u.calls}
        if u.failed:
            later_ok = any(c.name in names and not c.error for v in units[k + 1:k + 6] for c in v.calls)
            toks.append("s:fail_then_ok" if later_ok else "s:fail_not_fixed")
        if any(f < k for f in failed_at):
            toks.append("s:fail_before")
            if not any(not c.error for v in units[k:] for c in v.calls):
                toks.append("s:no_success_since_fail")
        if any(f > k for f in failed_at):
            toks.append("s:fail_after")
        toks += [
            f"s:role:{r}",
            f"s:pos:{_bin(k / max(1, n - 1), (0.2, 0.4, 0.6, 0.8, 0.999))}",
            f"s:len:{r}:{_bin(len(words), (4, 10, 25, 60, 150))}",
            f"s:calls:{min(3, len(u.calls))}",
            f"s:n:{_bin(n, (3, 6, 12, 24))}",
            f"s:task:{task_type or 'none'}",
        ]
        toks += ending
        if k == first_user:
            toks.append("s:first_user")
        if k == n - 1:
            toks.append("s:last")
        if has_system:
            toks.append("s:system")
        if _CODE.search(text):
            toks.append(f"s:code:{r}")
        if _LIST.search(text):
            toks.append(f"s:list:{r}")
        if "?" in text[-200:]:
            toks.append(f"s:asks:{r}")
        u.tokens = toks
    return units


def segment_tokens(units: list[Unit]) -> list[str]:
    """Features of a whole segment, for the segment model's "does this teach anything at all":
    every turn's first words by role, and the turns' call and structure tokens."""
    toks: list[str] = []
    for u in units:
        r = u.role[0]
        toks += [f"{r}:{w}" for w in _words(u.text, 80)]
        toks += [t for t in u.tokens if t.startswith(("s:", "c:"))]
    return toks


def sentence_tokens(sentence: str, unit: Unit, shape: str, position: int, kind: str = "text") -> list[str]:
    """Features of one candidate line of a lesson turn (a sentence, a call, an error line), for
    picking the lines that state the lesson."""
    words = _words(sentence, 60)
    r = "u" if unit.role == "user" else "a"
    toks = [f"w:{w}" for w in words] + [f"b:{a}_{b}" for a, b in zip(words, words[1:])]
    toks += [f"s:shape:{shape}", f"s:role:{r}", f"s:pos:{min(position, 4)}", f"s:kind:{kind}",
             f"s:len:{_bin(len(words), (4, 8, 15, 30, 60))}", f"s:{shape}:{r}", f"s:{shape}:{kind}"]
    if re.search(r"[`/=]|\w[._-]\w", sentence):
        toks.append("s:technical")
    if ERROR_LINE.search(sentence):
        toks.append("s:errorish")
    return toks


def sentences_of(unit: Unit) -> list[tuple[str, str]]:
    """A unit's candidate lines with their kind: its sentences (``text``), its successful
    calls (``call``) and its error lines (``error``)."""
    out = [("text", s) for s in sentences(unit.text) if len(s.split()) >= 3]
    out += [("call", c.gist()) for c in unit.calls if c.args and not c.error][:6]
    out += [("error", ln) for ln in unit.error_lines()]
    return out[:40]

