"""One cheap pass over a text that says which recognisers can possibly match it.

The catalogue has well over a hundred regexes and most texts (prose, code, tool
output) can match only a handful: a GitLab token needs ``glpat-`` (or another
GitLab prefix), a credential field needs a word like ``token`` or ``password``.
Each rule names such literals (its *triggers*, see :mod:`ultron.redaction.rules`);
this module compiles all of them into ONE regex (a trie of the lower-cased
literals, so the regex engine walks shared prefixes once) and runs it over the
lower-cased text. Only the rules whose triggers were seen, plus the rules that
have none, then run their own regexes.

The pass is exact, never a reason for a miss: the trie sits in a lookahead, so
it is tried at every position and overlapping literals (``key`` inside
``apikey``) are all seen, and a match stands for its prefixes too (the trie
takes the longest literal at a position).
"""

from __future__ import annotations

import re
from typing import Iterable, Sequence, TypeVar

T = TypeVar("T")


def _trie_pattern(literals: Iterable[str]) -> str:
    trie: dict = {}
    for word in literals:
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: dict) -> str:
        branches = [re.escape(ch) + emit(child) for ch, child in sorted(node.items()) if ch]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        return f"(?:{body})?" if "" in node else body

    return emit(trie)


def _prefixes(literal: str, literals: Sequence[str]) -> frozenset[str]:
    """The literals a match of ``literal`` stands for: itself and its prefixes
    (the trie takes the longest literal at a position)."""
    return frozenset(other for other in literals if literal.startswith(other))


class Prefilter:
    """Selects, for a text, the items whose triggers occur in it.

    ``items`` are ``(triggers, item)`` pairs; ``triggers`` is ``None`` for an item
    that must always run. :meth:`select` keeps the items' order."""

    def __init__(self, items: Sequence[tuple[tuple[str, ...] | None, T]]) -> None:
        self._items = [item for _, item in items]
        self._always = frozenset(i for i, (triggers, _) in enumerate(items) if triggers is None)
        by_literal: dict[str, set[int]] = {}
        for i, (triggers, _) in enumerate(items):
            for literal in triggers or ():
                by_literal.setdefault(literal.lower(), set()).add(i)
        literals = sorted(by_literal)
        self._by_literal = {literal: frozenset(indices) for literal, indices in by_literal.items()}
        self._prefixes = {literal: _prefixes(literal, literals) for literal in literals}
        # A lookahead tries the trie at EVERY position, so overlapping literals
        # (``key`` inside ``apikey``) are all seen.
        self._scan = re.compile("(?=(" + _trie_pattern(literals) + "))") if literals else None
        self._cache: dict[frozenset[str], tuple[list[T], frozenset[str]]] = {}

    def _scan_text(self, text: str) -> frozenset[str]:
        """Every trigger literal that occurs in ``text`` (lower-cased)."""
        if self._scan is None:
            return frozenset()
        found: set[str] = set()
        for literal in set(self._scan.findall(text.lower())):
            found |= self._prefixes[literal]
        return frozenset(found)

    def select(self, text: str) -> tuple[list[T], frozenset[str]]:
        """The items that may match ``text`` (in their order) and the trigger
        literals seen in it."""
        found = self._scan_text(text)
        cached = self._cache.get(found)
        if cached is None:
            indices = set(self._always)
            for literal in found:
                indices |= self._by_literal[literal]
            cached = [self._items[i] for i in sorted(indices)], found
            if len(self._cache) < 4096:
                self._cache[found] = cached
        return cached
