"""The seed's window algorithm, driven by a provider that splits on task markers."""

import re

from ultron.prompts.render import render_message
from ultron.prompts.segmentation import WindowTask
from ultron.llm.usage import LLMUsage
from ultron.sessions.messages import Message
from ultron.trajectory.segmentation import Span, fingerprint, segment_messages, snap_to_lines


class MarkerProvider:
    """Splits a window where the task letter in '[A] ...' changes; records every window it sees."""

    name = "marker"

    def __init__(self):
        self.usage = LLMUsage()
        self.windows: list[list[str]] = []

    def segment(self, window):
        self.windows.append([m.content for m in window])
        tasks, start = [], 1
        letters = [(re.match(r"\[(\w)\]", m.content) or re.match("", "")).group(1) if m.content.startswith("[") else None
                   for m in window]
        for i in range(2, len(window) + 1):
            if letters[i - 1] and letters[i - 1] != letters[i - 2]:
                tasks.append(WindowTask(start, i - 1, f"task {letters[start - 1]}"))
                start = i
        tasks.append(WindowTask(start, len(window), f"task {letters[start - 1]}"))
        return tasks

    def judge(self, messages):
        return None


def conversation(spec: str, words: int = 5) -> list[Message]:
    """'AABBB' -> user/assistant messages alternating, marked with their task letter."""
    out = []
    for i, letter in enumerate(spec):
        out.append(Message("user" if i % 2 == 0 else "assistant", f"[{letter}] " + "word " * words, line=i + 1))
    return out


def cost(msg: Message) -> int:
    from ultron.llm.tokens import count_tokens

    return count_tokens(render_message(1, msg))


def test_short_sessions_need_no_call():
    provider = MarkerProvider()
    run = segment_messages(conversation("AB"), provider, 1000)
    assert run.spans == [Span(0, 1, "[A] word word word word word")] and provider.windows == []


def test_one_window_when_everything_fits():
    provider = MarkerProvider()
    run = segment_messages(conversation("AABBCC"), provider, 10_000)
    assert [(s.start, s.end, s.topic) for s in run.spans] == [(0, 1, "task A"), (2, 3, "task B"), (4, 5, "task C")]
    assert run.windows == 1


def test_several_tasks_restart_the_next_window_at_the_last_task():
    msgs = conversation("AABBBBCCCC")
    per = cost(msgs[0])
    provider = MarkerProvider()
    run = segment_messages(msgs, provider, budget_tokens=per * 5)  # five messages a window
    first, second = provider.windows[0], provider.windows[1]
    assert len(first) == 5 and first[-1].startswith("[B]")
    assert second[0] == msgs[2].content  # restarts at B's first message, B is looked at again
    assert [(s.start, s.end) for s in run.spans] == [(0, 1), (2, 5), (6, 9)]
    assert run.spans[1].topic == "task B"


def test_one_task_filling_the_window_moves_on_without_overlap():
    msgs = conversation("AAAAAABB")
    per = cost(msgs[0])
    provider = MarkerProvider()
    run = segment_messages(msgs, provider, budget_tokens=per * 3)
    starts = [w[0] for w in provider.windows]
    assert starts[:2] == [msgs[0].content, msgs[3].content]  # 1-3 then 4-6: no overlap
    assert [(s.start, s.end) for s in run.spans][-1] == (6, 7)
    covered = [i for s in run.spans for i in range(s.start, s.end + 1)]
    assert covered == list(range(len(msgs)))


def test_an_oversized_message_is_truncated_alone_in_its_window():
    msgs = conversation("AAB") + [Message("user", "[B] " + "huge " * 3000, line=4)] + conversation("BB")[1:]
    for i, m in enumerate(msgs):
        m.line = i + 1
    provider = MarkerProvider()
    run = segment_messages(msgs, provider, budget_tokens=400)
    lonely = [w for w in provider.windows if len(w) == 1 and w[0].startswith("[B] huge")]
    assert lonely and lonely[0][0].endswith("…[truncated]") and run.truncated_messages == 1
    assert all(not (len(w) > 1 and any("huge huge" in c for c in w)) for w in provider.windows)
    assert msgs[3].content.count("huge") == 3000  # the stored message itself is untouched


def test_boundaries_snap_to_source_lines():
    msgs = [Message("user", "a", line=1), Message("assistant", "b", line=2),
            Message("tool", "r1", line=3), Message("user", "c", line=3), Message("assistant", "d", line=4)]
    spans = snap_to_lines([Span(0, 2, "x"), Span(3, 4, "y")], msgs)
    assert [(s.start, s.end) for s in spans] == [(0, 3), (4, 4)]
    assert [(s.start, s.end) for s in snap_to_lines([Span(0, 2, "x"), Span(3, 3, "y")], msgs[:4])] == [(0, 3)]


def test_fingerprint_is_the_seeds_recipe():
    import hashlib

    msgs = [Message("user", "hi"), Message("assistant", "hello", tool_calls=[{"id": "x"}])]
    expected = hashlib.sha256(b"user\x00hi\x01assistant\x00hello\x01").hexdigest()[:16]
    assert fingerprint(msgs) == expected
    assert fingerprint([Message("user", "hi", line=9)]) == fingerprint([Message("user", "hi", line=1)])
