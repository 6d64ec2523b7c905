"""A fake model that answers every one of Ultron's prompts the way a cooperative model would,
deterministically, for runs against ``FakeOpenAI`` (the concurrent-workers test, the fault
benchmark). Segmentation answers what the offline segmenter finds in the rendered window, so
window overlap behaves as with a real model; the other tasks get fixed, valid answers."""

from __future__ import annotations

import re
from typing import Any

from ultron.heuristics.segmenter import segment_window
from ultron.sessions.messages import Message

RENDERED = re.compile(r"^\[(\d+)\] (system|user|assistant|tool)(?: \(sub-agent\))?: (.*)$")

#: (a phrase of the task's system prompt, the task's short name)
_TASKS = (("split an AI", "segment"), ("grade how", "judge"), ("write down the lessons", "extract"),
          ("Classify one", "classify"), ("Summarise one", "summarize"), ("name a cluster", "topic"),
          ("near-duplicates", "same"))


def rendered_messages(user: str) -> list[Message]:
    """The messages of a prompt that rendered them as ``[line] role: text``."""
    msgs: list[Message] = []
    for line in user.split("\n"):
        m = RENDERED.match(line)
        if m:
            msgs.append(Message(m.group(2), m.group(3)))
        elif msgs:
            msgs[-1].content += "\n" + line
    return msgs


def task_of(body: dict[str, Any]) -> str:
    """Which of Ultron's tasks a chat request is (``other``: skill synthesis and the rest)."""
    system = body["messages"][0]["content"]
    return next((kind for needle, kind in _TASKS if needle in system), "other")


def answer(body: dict[str, Any]) -> Any:
    """The JSON a cooperative model would return to this chat request."""
    user = body["messages"][-1]["content"]
    task = task_of(body)
    if task == "segment":
        return {"tasks": [{"start": s, "end": e, "topic": t} for s, e, t in segment_window(rendered_messages(user))]}
    if task == "judge":
        return {"goal_achieved": 0.9, "correctness": 0.9, "efficiency": 0.8, "safety": 1.0, "rationale": "fake"}
    if task == "extract":
        msgs = rendered_messages(user)
        asked = next((m.content for m in msgs if m.role == "user"), user)[:160].strip() or "the task"
        done = next((m.content for m in reversed(msgs) if m.role == "assistant"), "")[:200].strip() or "it worked"
        return {"memories": [{"type": "pattern", "content": f"How to handle: {asked}", "context": asked,
                              "resolution": done, "tags": ["docker"], "kind": "procedural", "tools_used": [],
                              "confirmed": True, "confidence": 0.9}]}
    if task == "classify":
        return {"memory_type": "pattern"}
    if task == "summarize":
        return {"l0": user[:80], "l1": user[:300]}
    if task == "same":
        return {"same": False}
    if task == "topic":
        return {"topic": "docker build problems"}
    return {}  # skills: not a valid skill, so the rules write it (after the one retry)
