"""Checks on text an agent sends, shared by the HTTP models and the MCP tools, so both
refuse the same arguments with the same words."""

from __future__ import annotations

from ultron.sessions.discovery import validate_agent_id


def storable(value: str) -> str:
    """PostgreSQL text holds no NUL, and a lone surrogate cannot be encoded: refuse both up front."""
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode (no lone surrogate escapes)") from None
    return value


def optional_agent_id(value: str | None) -> str | None:
    """None, or an agent id that names a directory level of the inbox (see validate_agent_id)."""
    return None if value is None else validate_agent_id(value)
