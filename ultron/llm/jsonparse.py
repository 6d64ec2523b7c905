"""Lenient JSON extraction from model answers.

Models wrap JSON in prose or code fences even in JSON mode. We try, in order:
the whole text, each fenced block, then the outermost ``{...}`` or ``[...]``
slice. When none parses strictly, ``json-repair`` gets the same candidates: models
also write almost-JSON (trailing commas, single quotes, comments) that is plainly
meant as the value. Only an object or array comes out of repair, so prose never
turns into an empty answer that a validator might accept. The caller validates the
shape, and skips repair (``repair=False``) for an answer cut off by the token limit:
repairing that would invent the end of a half-written value.
"""

from __future__ import annotations

import json
import re
from typing import Any

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)


class NoJSON(ValueError):
    """The answer holds no parseable JSON value."""


def parse_lenient(text: str | None, *, repair: bool = True) -> Any:
    if text is None or not text.strip():
        raise NoJSON("empty answer")
    text = _THINK.sub("", text).strip()  # reasoning models sometimes inline their thoughts
    candidates = [text]
    candidates += [m.group(1).strip() for m in _FENCE.finditer(text)]
    for open_ch, close_ch in (("{", "}"), ("[", "]")):
        start, end = text.find(open_ch), text.rfind(close_ch)
        if start != -1 and end > start:
            candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except (ValueError, RecursionError):
            continue
    if repair:
        for candidate in candidates[1:] or candidates:
            value = _repaired(candidate)
            if value is not None:
                return value
    raise NoJSON(f"no JSON value found in the answer: {text[:120]!r}")


def _repaired(candidate: str) -> dict[str, Any] | list[Any] | None:
    """The object or array json-repair reads in ``candidate``, if any."""
    if "{" not in candidate and "[" not in candidate:
        return None
    import json_repair

    try:
        value = json_repair.loads(candidate)
    except Exception:  # noqa: BLE001 - a repair that fails is just no answer
        return None
    return value if isinstance(value, (dict, list)) and value else None
