"""The memory extractors' view of a segment: who said what, the calls, the episodes.

Built on :func:`ultron.heuristics.reader.read_segment`, which reads the segment once
(main thread only, results paired with their calls by id, replayed history marked,
texts capped): this module decides what each message is *to the extractors*.

* Harness lines are not user requests: slash-command echoes, ``<local-command-…>``,
  ``<bash-…>``, ``Caveat: …``, ``[Request interrupted …]``, task notifications
  (``meta``); an interrupted turn is kept apart (``interrupt``: the episode goes on).
  IDE tag blocks (``<ide_opened_file>``, ``<system-reminder>`` …) and tau-bench's
  ``###STOP###`` are stripped from what the user typed.
* History replayed by a resumed session (a call message or result marked
  ``replayed``) is skipped. A text repeated after it is kept: the extractors only
  count what a memory can be made of, and a repeated request is still the request.
* A result with no call of its own (a tool-only segment) gets a call of its own
  (named after the result, "tool" when it has no name), so an error there is still
  an error memory.
* The first system message is kept (20,000 characters) as the policy that the
  ``life`` rule grounds its rules in.

The segment is also cut into *episodes*: a human request opens one when the agent's
last word before it was a finished answer that asked nothing (no "?", "please
confirm", "let me know", "would you like" ...). A reply to the agent's question, a
confirmation ("yes", "go ahead", "sounds good"), or a turn after an interrupted or
pending tool call continues the episode. An episode's *goal* is its first request
that is more than a bare identity answer ("my user id is ...").
"""

from __future__ import annotations

import re
from typing import Any

from ultron.heuristics.reader import INTERRUPT, STOP_TOKEN, Segment, cap, read_segment, tool_kind
from ultron.heuristics.text import RESULT_HEAD, RESULT_TAIL, clip

_I = re.IGNORECASE

# -- harness text that no human typed ---------------------------------------------------
_TAG_BLOCK = re.compile(
    r"<(ide_opened_file|ide_selection|system-reminder|ide_diagnostics)>.*?</\1>", re.DOTALL)
_META_USER = re.compile(
    r"^\s*(?:<(?:local-command|command-|task-notification|user-prompt-submit|bash-(?:input|stdout|stderr))"
    r"|Caveat: The messages below|\[Request interrupted)", _I)
_REJECTED = re.compile(
    r"user doesn'?t want to proceed|tool use was rejected|user (?:rejected|denied|declined)|"
    r"user chose to (?:stay|not|keep|cancel)", _I)
HOUSEKEEPING = frozenset({
    "todowrite", "todoread", "exitplanmode", "enterplanmode", "askuserquestion", "think",
    "taskoutput", "bashoutput", "killshell", "killbash", "listmcpresourcestool",
})
READ_TOOL = re.compile(r"^(?:get|search|list|find|read|fetch|lookup|look|query|retrieve|show|view|check|"
                       r"glob|grep|ls|cat|websearch|webfetch|calculate|describe)", _I)

# The agent's turn waits for the user: a question or a request to confirm / provide / choose.
ASKS = re.compile(
    r"\?|\b(?:please (?:confirm|provide|let me know|specify|choose|select|share|tell|review)|let me know|"
    r"would you like|do you want|shall i|should i|(?:can|could) you (?:please )?(?:confirm|provide|tell|share|let|"
    r"check|clarify)|which (?:one|option)|(?:reply|respond) with|awaiting your|once you confirm|if you confirm)\b", _I)
# A user turn that continues the current exchange rather than asking something new.
CONTINUE = re.compile(
    r"^\W*(?:yes|yeah|yep|sure|ok(?:ay)?|alright|all right|sounds good|that'?s (?:fine|acceptable|correct|right|good)|"
    r"correct|confirm(?:ed)?|please (?:proceed|go ahead)|go ahead|proceed|great|perfect)\b", _I)
_IDENTITY_ONLY = re.compile(
    r"^\W*(?:(?:sure|yes|ok(?:ay)?|hi|hello)\W+)*(?:thing\W+)?(?:my (?:user ?id|user name|username|name|email)(?: is)?|"
    r"i'?m [a-z]+_[a-z]+_\d+|it'?s [a-z]+_[a-z]+_\d+)", _I)


def _clean_user(text: str) -> str:
    text = cap(text)
    if STOP_TOKEN in text:
        text = text.replace(STOP_TOKEN, " ")
    if "<" in text:
        text = _TAG_BLOCK.sub(" ", text)
    return text.strip()


_CLOSING_TURN = re.compile(
    r"\b(?:thanks?|thank you|thx|appreciate|bye|goodbye|have a (?:good|great|nice) (?:day|one)|cheers|"
    r"that'?s (?:all|it|everything)|all (?:good|set)|no further|nothing else)\b|^\W*(?:ok(?:ay)?|great|perfect|"
    r"awesome|cool|nice|good|got it|noted)\W*$", _I)


def is_closing(text: str) -> bool:
    """A user turn that only closes (thanks, bye, ok) and asks nothing new."""
    return len(text.split()) <= 25 and bool(_CLOSING_TURN.search(text)) and not ASKS.search(text) and \
        not re.search(r"\b(?:can|could|would|will) you\b|\bplease \w+|\bi (?:need|want|would like|'d like)\b", text, _I)


def _is_user_decision(text: str) -> bool:
    return bool(_REJECTED.search(text[:400]))


# -- the view ----------------------------------------------------------------------------
class Call:
    """A tool call as the extractors see it (a result without a call gets one too)."""

    __slots__ = ("pos", "msg", "cid", "name", "raw", "args", "text", "kind", "error", "result", "result_msg",
                 "episode", "rejected")

    def __init__(self, pos: int, msg: int, cid: str, name: str, raw: str, args: dict | None, text: str,
                 kind: str) -> None:
        self.pos = pos
        self.msg = msg
        self.cid = cid
        self.name = name
        self.raw = raw              # the arguments as text (reader.ARGS_CAP characters)
        self.args = args
        self.text = text            # the assistant text in the same message
        self.kind = kind            # reader.tool_kind
        self.error: bool | None = None
        self.result = ""
        self.result_msg = -1
        self.episode = 0
        self.rejected = False

    @property
    def housekeeping(self) -> bool:
        return self.name.lower() in HOUSEKEEPING or self.name == ""


class Digest:
    """Who said what, calls with their results, episodes (see the module docstring)."""

    def __init__(self, messages: list[Any] | Segment) -> None:
        seg = messages if isinstance(messages, Segment) else read_segment(messages)
        self.segment = seg
        self.msgs = seg.messages
        n = len(self.msgs)
        self.kind: list[str] = [""] * n        # system / user / meta / interrupt / assistant / tool / skip
        self.text: list[str] = [""] * n        # cleaned, capped text
        self.msg_calls: dict[int, list[int]] = {}
        self.calls: list[Call] = []
        self.episode_of: list[int] = [0] * n
        self.episodes: list[tuple[int, int]] = []   # [start, end) message ranges
        self.system = ""
        self._collect()
        self._cut_episodes()

    def _collect(self) -> None:
        seg = self.segment
        mine_of: list[int] = [0] * len(seg.calls)     # reader call index -> position in self.calls
        for i, e in enumerate(seg.entries):
            role = e.role
            if role == "system":
                self.kind[i] = "system"
                if not self.system:
                    self.system = e.content[:20000]
                continue
            if role == "user":
                raw = e.text
                if INTERRUPT.match(raw):
                    self.kind[i] = "interrupt"
                    continue
                text = _clean_user(raw)
                if not text or _META_USER.match(text):
                    self.kind[i] = "meta"
                    continue
                self.kind[i] = "user"
                self.text[i] = text
                continue
            if e.replayed:
                self.kind[i] = "skip"
                continue
            if role == "assistant":
                text = e.text.strip()
                self.kind[i] = "assistant"
                self.text[i] = text
                mine = self.msg_calls.setdefault(i, [])
                for k in e.calls:
                    tc = seg.calls[k]
                    # the extractors judge a call by its first ARGS_CAP characters: a command too
                    # long to read there is judged by the tool's name alone
                    kind = tool_kind(tc.name, "") if tc.clipped else tc.kind
                    c = Call(len(self.calls), i, tc.id, tc.name, tc.text, tc.args, text, kind)
                    mine_of[k] = c.pos
                    mine.append(c.pos)
                    self.calls.append(c)
                continue
            if role == "tool":
                content = e.content
                self.kind[i] = "tool"
                if len(content) > RESULT_HEAD + RESULT_TAIL:
                    text = content[:RESULT_HEAD] + "\n…\n" + content[-RESULT_TAIL:]
                else:
                    text = content
                self.text[i] = text
                if e.call is not None:
                    c = self.calls[mine_of[e.call]]
                else:                                   # a result without its call (tool-only segment)
                    name = e.message.name
                    name = str(name or "tool") if name != "error" else "tool"
                    c = Call(len(self.calls), i, e.message.tool_call_id or "", name, "", None, "",
                             tool_kind(name, ""))
                    self.calls.append(c)
                c.result = text
                c.result_msg = i
                c.error = e.error
                if c.error and _is_user_decision(text):
                    c.rejected = True
                continue
            self.kind[i] = "skip"
    def _cut_episodes(self) -> None:
        start = 0
        last_assistant: int | None = None     # index of the last assistant message
        ep = 0
        for i, k in enumerate(self.kind):
            if k == "user" and last_assistant is not None and i > start:
                m = self.msgs[last_assistant]
                pending = bool(self.msg_calls.get(last_assistant))
                text = self.text[last_assistant]
                asked = bool(ASKS.search(text[-400:]))
                interrupted = any(self.kind[j] in ("interrupt",) for j in range(last_assistant, i))
                continues = bool(CONTINUE.match(self.text[i]))
                if (not pending and not asked and not interrupted and not continues and len(text) >= 20
                        and m.role == "assistant"):
                    self.episodes.append((start, i))
                    start = i
                    ep += 1
            if k == "assistant":
                last_assistant = i
            self.episode_of[i] = ep
        self.episodes.append((start, len(self.kind)))
        for c in self.calls:
            c.episode = self.episode_of[c.msg] if c.msg < len(self.episode_of) else ep

    # -- lookups ---------------------------------------------------------------------------
    def request_before(self, i: int) -> str:
        """The latest human request at or before message ``i``."""
        for j in range(min(i, len(self.kind) - 1), -1, -1):
            if self.kind[j] == "user":
                return self.text[j]
        return ""

    def episode_request(self, ep: int) -> str:
        """The episode's first substantive request (a bare identity answer is skipped)."""
        if ep >= len(self.episodes):
            return ""
        s, e = self.episodes[ep]
        first = ""
        for j in range(s, e):
            if self.kind[j] == "user":
                t = self.text[j]
                if not first:
                    first = t
                if not (_IDENTITY_ONLY.match(t) and len(t.split()) <= 14):
                    return t
        return first

    def task_context(self, i: int, skip: str = "") -> str:
        """"Task: <the episode's request>" plus the latest user turn before ``i`` when
        that says more than a confirmation."""
        goal = self.episode_request(self.episode_of[min(i, len(self.kind) - 1)]) if self.kind else ""
        if goal == skip and self.episodes:
            goal = self.episode_request(0)          # the segment's first request
        latest = self.request_before(i)
        parts = []
        if goal and goal != skip:
            parts.append("Task: " + clip(goal, 260))
        if latest and latest not in (goal, skip) and len(latest.split()) >= 4:
            parts.append("Then: " + clip(latest, 180))
        return " ".join(parts)

    def next_assistant_text(self, i: int, stop_at_user: bool = True) -> tuple[int, str]:
        for j in range(i + 1, len(self.kind)):
            k = self.kind[j]
            if k == "user" and stop_at_user:
                return -1, ""
            if k == "assistant" and self.text[j]:
                return j, self.text[j]
        return -1, ""

    def next_user_text(self, i: int) -> str:
        for j in range(i + 1, len(self.kind)):
            if self.kind[j] == "user":
                return self.text[j]
        return ""
