"""The one message model every session format is normalised into."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

ROLES = ("system", "user", "assistant", "tool")
# Names other producers use for the same roles.
ROLE_ALIASES = {"developer": "system", "function": "tool", "human": "user", "ai": "assistant"}


@dataclass
class Message:
    """One chat message, OpenAI-shaped, remembering where in the file it came from.

    ``line`` is the 1-based source line, so every later step (segments, problems,
    previews) can point a user back at the exact place in the original file.
    """

    role: str
    content: str = ""
    line: int = 0
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    reasoning_content: str | None = None
    #: Claude Code sub-agent (sidechain) traffic, kept apart from the main thread.
    is_sidechain: bool = False
    #: the producer's own id for the line (Claude Code ``uuid``), when it has one.
    source_id: str | None = None
    #: producer-side message id used to merge streamed fragments (not stored).
    merge_key: str | None = field(default=None, repr=False, compare=False)

    def is_empty(self) -> bool:
        return not (self.content or self.tool_calls or self.reasoning_content)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("merge_key", None)
        return {k: v for k, v in out.items() if v not in (None, False) or k in ("role", "content")}
