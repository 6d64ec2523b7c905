r"""The shape of one recogniser rule, shared by every table of the package.

A rule is one regex, the part of its match that is replaced, an optional check
that confirms or narrows the match, and what lets the engine skip it cheaply:

* ``triggers``: lower-case literals of which at least one must occur in a text
  for the regex to have any chance to match. The engine runs ONE scan per text
  for all triggers (:mod:`ultron.redaction.prefilter`) and then only the rules
  that can match, instead of every regex of the catalogue on every text.
* ``words``: for a regex that starts with an alternation of keywords (credential
  names, provider names), a regex piece per trigger. The pattern says ``{word}``
  where the alternation would be, and the engine runs it once per trigger seen in
  the text: the regex engine finds one literal fast, while an alternation is
  tried at every position of the text.
* ``gate``: for a rule with no literal to wait for (card numbers, national ids),
  plain regexes that a text must contain first (a digit, then ``\d{17}``), run
  by Python's own engine, which scans character classes several times faster;
  the engine evaluates each distinct gate once per text.
* ``fallback``: the rule runs after the others and never inside a span they
  found (the bare high-entropy tokens: most candidates are already known tokens).
* ``confirm``: for a rule whose ``check`` moves the span (from a credential word to
  the value after it), the costly judgement of the value, run only when the moved span
  is not inside a span found already.

The tables themselves live in :mod:`~ultron.redaction.formats` (provider token
formats), :mod:`~ultron.redaction.assignments` (keyword-anchored values),
:mod:`~ultron.redaction.entropy` (bare high-entropy tokens) and
:mod:`~ultron.redaction.catalogue` (personal data, and the tags of everything).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import regex  # presidio's own regex engine (variable-length lookbehind)

Span = tuple[int, int]
Check = Callable[[Any, Span], "Span | list[Span] | None"]


@dataclass(frozen=True)
class _Rule:
    """One regex; ``group`` names the part of the match that is replaced (the
    first of several alternative groups that took part), ``check`` may veto the
    match or narrow its span; the other fields let the engine skip it (see the
    module docstring)."""

    name: str
    pattern: Any  # a ``regex`` pattern, or a ``re`` one for ``stdlib`` rules
    group: str | tuple[str, ...] | int = 0
    check: Check | None = None
    escapes: bool = True
    triggers: tuple[str, ...] | None = None
    gate: "tuple[re.Pattern[str], ...]" = ()
    fallback: bool = False
    by_word: Mapping[str, Any] = field(default_factory=dict)
    confirm: Check | None = None

    def patterns_for(self, found: Iterable[str]) -> Sequence[Any]:
        """The patterns to run on a text in which the trigger words ``found``
        occur (the full pattern when the rule has no per-word patterns)."""
        if not self.by_word:
            return (self.pattern,)
        return [self.by_word[w] for w in sorted(self.by_word.keys() & found)] or (self.pattern,)


def _rule(
    name: str,
    pattern: str,
    *,
    group: str | tuple[str, ...] | int = 0,
    check: Check | None = None,
    ignore_case: bool = False,
    dotall: bool = False,
    escapes: bool = True,
    triggers: Iterable[str] | str | None = None,
    words: Mapping[str, str] | None = None,
    gate: str | tuple[str, ...] = (),
    stdlib: bool = False,
    fallback: bool = False,
    confirm: Check | None = None,
) -> _Rule:
    if isinstance(triggers, str):
        triggers = (triggers,)
    if words is not None:
        triggers = tuple(words)
    if triggers is not None:
        triggers = tuple(sorted({t.lower() for t in triggers}))
        if not all(triggers):
            raise ValueError(f"rule {name}: an empty trigger would match every text")
    compiled_gate = tuple(re.compile(g, re.ASCII) for g in ((gate,) if isinstance(gate, str) else gate))
    if stdlib:
        # Python's own engine scans plain character-class runs several times
        # faster; such a pattern has no variable lookbehind and its check sees escapes.
        std = re.ASCII | (re.IGNORECASE if ignore_case else 0) | (re.DOTALL if dotall else 0)
        return _Rule(name, re.compile(pattern, std), group, check, escapes, triggers, compiled_gate, fallback,
                     confirm=confirm)
    flags = regex.V0 | regex.ASCII  # CJK text glued to a token is still a boundary
    if ignore_case:
        flags |= regex.IGNORECASE
    if dotall:
        flags |= regex.DOTALL
    by_word: dict[str, Any] = {}
    if words is not None:
        if "{word}" not in pattern:
            raise ValueError(f"rule {name}: a rule with words needs {{word}} in its pattern")
        by_word = {
            w.lower(): regex.compile(_escape_aware(pattern.replace("{word}", piece)), flags)
            for w, piece in words.items()
        }
        pattern = pattern.replace("{word}", "|".join(f"(?:{piece})" for piece in words.values()))
    return _Rule(
        name, regex.compile(_escape_aware(pattern), flags), group, check, escapes, triggers, compiled_gate,
        fallback, by_word, confirm,
    )


_LEADING_BOUNDARY = regex.compile(r"\(\?<!\[((?:\\.|[^\]\\])+)\]\)")


def _escape_aware(pattern: str) -> str:
    """Let a leading ``(?<![chars])`` boundary also hold after a JSON escape.

    In JSON-encoded text (``json.dumps`` of a transcript or of tool-call arguments)
    a secret often follows ``\\n`` or a ``\\uXXXX`` escape of a CJK character:
    ``"note:\\nsk-..."``, ``"\\u5bc6\\u7801sk-..."``. A plain boundary sees the
    letter or hex digit and refuses; this one accepts a complete escape before the
    token and refuses to start on the escape's own letter (after a backslash)."""
    found = _LEADING_BOUNDARY.match(pattern)
    if found is None:
        return pattern
    chars = found.group(1)
    return (
        rf"(?:(?<=\\(?:[nrt]|u[0-9A-Fa-f]{{4}}))|(?<![\\{chars}]))"
        + pattern[found.end():]
    )
