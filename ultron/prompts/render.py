"""How messages and memories are shown to a model.

Segmentation counts its window budget with :func:`render_message`, so what is
measured is exactly what is sent.
"""

from __future__ import annotations

from ultron.llm.tokens import count_tokens, truncate_to_tokens
from ultron.sessions.messages import Message

TOOL_ARGS_CHARS = 300


def render_message(index: int, msg: Message) -> str:
    """One numbered transcript line: role (sub-agent marked), text, calls with clipped arguments."""
    who = msg.role + (" (sub-agent)" if msg.is_sidechain else "")
    parts = [msg.content] if msg.content else []
    for call in msg.tool_calls or []:
        fn = call.get("function", {})
        args = str(fn.get("arguments", ""))
        if len(args) > TOOL_ARGS_CHARS:
            args = args[:TOOL_ARGS_CHARS] + "…"
        parts.append(f"[calls {fn.get('name', '?')}({args})]")
    if msg.role == "tool" and msg.name == "error":
        parts.insert(0, "[tool error]")
    return f"[{index}] {who}: " + (" ".join(parts) if parts else "(empty)")


def transcript(messages: list[Message], budget: int) -> str:
    """Every message, each shortened to an equal share when the whole would exceed ``budget``
    tokens: a judge or extractor must see how a task ended, not only how it began."""
    lines = [render_message(i, m) for i, m in enumerate(messages, 1)]
    if sum(count_tokens(line) for line in lines) > budget:
        share = max(32, budget // max(1, len(lines)))
        lines = [truncate_to_tokens(line, share) for line in lines]
    return "\n".join(lines)


def memory_text(m: dict[str, str]) -> str:
    """A memory's three fields as labelled lines."""
    return f"content: {m.get('content', '')}\ncontext: {m.get('context', '')}\nresolution: {m.get('resolution', '')}"
