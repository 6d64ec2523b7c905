"""Task segmentation: the seed's sliding-window algorithm, provider-agnostic.

Each round packs as many messages as fit the token budget
(``llm_max_input_tokens - llm_prompt_reserve_tokens``, counted on the rendered
messages) and asks the provider for tasks over in-window indices 1..L.

* Several tasks: the next window starts at the first message of the last task, and
  that overlapping slice is replaced by the new round's result (the last task of a
  window may be cut off by the window edge, so it is looked at again in context).
* One task filling the window with more messages after it: the next window starts
  right after it (no overlap).
* A single message over budget is truncated, only inside a one-message window.
* Sessions of <= 2 messages are one segment without any call.

Boundaries are then snapped to source lines: a Claude Code line can hold several
messages (tool results plus text), and ``task_segments`` stores line ranges, so a
task never starts in the middle of a line.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace

from ultron.prompts.render import render_message
from ultron.providers import LLMProvider
from ultron.llm.tokens import count_tokens, truncate_to_tokens
from ultron.sessions.messages import Message

SHORT_SESSION = 2
TOPIC_CHARS = 80


@dataclass(frozen=True)
class Span:
    """A task: 0-based inclusive indices into the session's messages."""

    start: int
    end: int
    topic: str


@dataclass
class SegmentationRun:
    spans: list[Span]
    windows: int = 0
    truncated_messages: int = 0


def fingerprint(messages: list[Message]) -> str:
    """SHA-256 over each message's role, NUL, content, 0x01 — exactly the seed's recipe.

    ``content`` is the normalised text content as stored in ``session_messages``
    (tool calls, reasoning and line numbers are not hashed, so a segment keeps its
    fingerprint when only its position in the file moves). First 16 hex characters.
    """
    h = hashlib.sha256()
    for msg in messages:
        h.update((msg.role or "").encode("utf-8"))
        h.update(b"\x00")
        h.update((msg.content or "").encode("utf-8"))
        h.update(b"\x01")
    return h.hexdigest()[:16]


def default_topic(messages: list[Message]) -> str:
    """First line of the first user request (or of the first message with text)."""
    for msg in [m for m in messages if m.role == "user"] + list(messages):
        text = " ".join((msg.content or "").split())
        if text:
            return text[:TOPIC_CHARS]
    return "(no text)"


def segment_messages(messages: list[Message], provider: LLMProvider, budget_tokens: int) -> SegmentationRun:
    """Raises LLMUnavailable / LLMInvalidAnswer; the caller keeps the session pending."""
    n = len(messages)
    if n == 0:
        return SegmentationRun([])
    if n <= SHORT_SESSION:
        return SegmentationRun([Span(0, n - 1, default_topic(messages))])
    costs = [count_tokens(render_message(i + 1, m)) for i, m in enumerate(messages)]
    run = SegmentationRun([])
    spans: list[Span] = []
    start = 0
    while start < n:
        end = _pack(costs, start, budget_tokens)
        window = messages[start:end]
        if end - start == 1 and costs[start] > budget_tokens:
            window = [_truncated(messages[start], budget_tokens)]
            run.truncated_messages += 1
        tasks = provider.segment(window)
        run.windows += 1
        new = [Span(start + t.start - 1, start + t.end - 1, t.topic or default_topic(messages[start + t.start - 1:start + t.end]))
               for t in tasks]
        spans = [s for s in spans if s.end < start] + new
        if end >= n:
            break
        start = new[-1].start if len(new) > 1 else end
    run.spans = snap_to_lines(spans, messages)
    return run


def snap_to_lines(spans: list[Span], messages: list[Message]) -> list[Span]:
    """Move each boundary that falls inside a source line forward to the next line start."""
    out: list[Span] = []
    for span in spans:
        start = span.start
        if out:
            start = max(start, out[-1].end + 1)
            while start <= span.end and messages[start].line == messages[start - 1].line:
                start += 1
            if start > span.end:  # the whole span shares a line with the previous one
                out[-1] = replace(out[-1], end=span.end)
                continue
            out[-1] = replace(out[-1], end=start - 1)
        out.append(replace(span, start=start))
    return out


def _pack(costs: list[int], start: int, budget: int) -> int:
    """End (exclusive) of the window starting at ``start``: always at least one message."""
    total, end = 0, start
    while end < len(costs) and (end == start or total + costs[end] <= budget):
        total += costs[end]
        end += 1
    return end


def _truncated(msg: Message, budget: int) -> Message:
    overhead = count_tokens(render_message(1, replace(msg, content="")))
    return replace(msg, content=truncate_to_tokens(msg.content, max(1, budget - overhead)))
