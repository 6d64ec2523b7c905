"""Which agent session a file holds: the id an agent's hook reports when it asks for a
context bundle, so the session's outcome can be credited to what it was given.

Claude Code names its transcripts ``<session-id>.jsonl`` and writes ``sessionId`` on every
line; Codex writes ``rollout-<timestamp>-<uuid>.jsonl`` and names the uuid in its
``session_meta`` line. The id inside the file wins (the parser reads it); otherwise a
trailing UUID of the file name, otherwise the whole stem.
"""

from __future__ import annotations

import re
from pathlib import Path

_TRAILING_UUID = re.compile(r"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})$")


def agent_session_id(found: str | None, path: str | Path) -> str:
    """The agent's session id: ``found`` in the content, else derived from the file name."""
    if found:
        return found
    stem = Path(path).name
    if stem.endswith(".jsonl"):
        stem = stem[: -len(".jsonl")]
    match = _TRAILING_UUID.search(stem)
    return match.group(1) if match else stem
