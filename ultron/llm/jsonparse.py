"""Lenient JSON extraction from model answers.

Models wrap JSON in prose or code fences even in JSON mode. We try, in order:
the whole text, each fenced block, then the outermost ``{...}`` or ``[...]``
slice. Only a value that parses is returned; the caller validates its shape.
"""

from __future__ import annotations

import json
import re
from typing import Any

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)


class NoJSON(ValueError):
    """The answer holds no parseable JSON value."""


def parse_lenient(text: str | None) -> Any:
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
        except ValueError:
            continue
    raise NoJSON(f"no JSON value found in the answer: {text[:120]!r}")
