"""Runs the catalogue on presidio, offline, and turns its overlapping findings into
one replacement per span.

Presidio gives the project a standard recognizer interface (extra recognizers and
an optional spaCy model plug in unchanged); the setup here keeps it off the network:
the ``no_op`` NLP engine, and a spaCy model only when it is installed. Building an
analyzer takes seconds, hence the process-wide :func:`get_redactor`.

Speed: redaction dominates ingestion. Every text first goes through ONE prefilter
pass (:mod:`ultron.redaction.prefilter`) that says which of the catalogue's rules
can match it; only those run (a rule's ``gate`` and per-word patterns, see
:mod:`ultron.redaction.rules`, cut the rest). Our own rules (the catalogue and
``extra_entities``) are run directly, the way their presidio recognizers would
run them: going through ``AnalyzerEngine.analyze`` for them would add NLP
artifacts, context enhancement and score bookkeeping that change nothing for
fixed-score regex rules and cost more than the regexes. The analyzer holds
every recognizer and is asked for the entities of foreign recognizers (a spaCy
model, ``extra_recognizers``) when there are any; without them it is built only
if someone asks for it (importing presidio pulls in spaCy and transformers). The
bare-token layer runs last and skips what the other rules already found.

Decisions (the tests pin each of them):

* Overlaps are resolved to non-overlapping spans: the longest span wins, ties go
  to the more specific kind (private key > provider tokens > AWS secret > URL
  password > auth header > JWT > named credential > bare high-entropy token >
  PII), then to the earlier start.
  So ``api_key="sk-..."`` becomes ``api_key="<LLM_API_KEY>"`` and
  ``secret="sk-... and more"`` becomes ``secret="<REDACTED_CREDENTIAL>"``. A
  candidate that only partly overlaps a winner keeps the part that sticks out
  (under its own tag) rather than leaking it. Spans are replaced right to left.
* ``<TAG>`` strings are never re-redacted, so ``redact(redact(x)) == redact(x)``.
* A late (fallback) rule whose check moves its span (from a credential word to the
  value after it) does not re-find a value another rule found: the moved span is
  skipped when it lies inside a found one, so the value keeps its specific tag.
"""

from __future__ import annotations

import bisect
import logging
import os
import threading
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, Sequence

import regex  # presidio's own regex engine (variable-length lookbehind)

from ultron.redaction.catalogue import _EXTRA_PRIORITY, _PRIORITY, _RULES, TAGS, _Rule, _rule
from ultron.redaction.checks import _respect_escapes
from ultron.redaction.prefilter import Prefilter
from ultron.redaction.rules import Span

if TYPE_CHECKING:
    from presidio_analyzer import AnalyzerEngine, EntityRecognizer

# The package's logger, whichever module logs: tests and users filter on it.
logger = logging.getLogger("ultron.redaction")

SPACY_MODEL_ENV = "ULTRON_REDACTION_SPACY_MODEL"
LANGUAGE = "en"
_SPACY_ENTITIES = ("PERSON", "LOCATION")


def _span_of(match: "regex.Match[str]", group: str | tuple[str, ...] | int) -> Span | None:
    if isinstance(group, tuple):
        for name in group:
            if match.start(name) >= 0:
                return match.span(name)
        return None
    start, end = match.span(group)
    return (start, end) if start >= 0 else None


def _find(
    rule: _Rule,
    text: str,
    words: Iterable[str] = (),
    covered: Sequence[Span] = (),
    gates: dict[Any, bool] | None = None,
) -> Iterator[Span]:
    """The spans ``rule`` redacts in ``text``, checked and escape-safe. ``words``
    are the trigger words seen in the text (for per-word patterns); a match inside
    a ``covered`` span (sorted, non-overlapping) is skipped unchecked; ``gates``
    remembers, for this text, which gate regexes were found. A check may return
    several spans (the values of a ``Cookie:`` header)."""
    for gate in rule.gate:
        found = gates.get(gate) if gates is not None else None
        if found is None:
            found = gate.search(text) is not None
            if gates is not None:
                gates[gate] = found
        if not found:
            return
    ends = [e for _, e in covered]
    for pattern in rule.patterns_for(words):
        for match in pattern.finditer(text):
            span = _span_of(match, rule.group)
            if span is None or span[0] == span[1]:
                continue
            if ends:
                i = bisect.bisect_left(ends, span[1])
                if i < len(covered) and covered[i][0] <= span[0]:
                    continue  # already inside a found span
            spans: Iterable[Span] = (span,)
            if rule.check is not None:
                checked = rule.check(match, span)
                if checked is None:
                    continue
                spans = checked if isinstance(checked, list) else (checked,)
            for span in spans:
                if rule.escapes:
                    span = _respect_escapes(text, *span)
                if span[0] >= span[1]:
                    continue
                if ends and rule.check is not None:
                    i = bisect.bisect_left(ends, span[1])
                    if i < len(covered) and covered[i][0] <= span[0]:
                        continue  # a check moved the span (from a name to its value) into a found one
                if rule.confirm is not None and rule.confirm(match, span) is None:
                    continue
                yield span


# ------------------------------------------------------------- the recognizer


def _recognizer_class() -> type:
    """Build the presidio recognizer class lazily: importing presidio is slow."""
    from presidio_analyzer import LocalRecognizer, RecognizerResult

    class _RuleRecognizer(LocalRecognizer):
        """A presidio recognizer running our rules for one entity."""

        def __init__(self, entity: str, rules: Sequence[_Rule], score: float = 0.9) -> None:
            self._rules = tuple(rules)
            self._score = score
            super().__init__(supported_entities=[entity], name=f"ultron_{entity.lower()}")

        def load(self) -> None:  # noqa: D102 - nothing to load
            pass

        def analyze(self, text: str, entities: list[str], nlp_artifacts: Any = None) -> list:
            entity = self.supported_entities[0]
            results = []
            for rule in self._rules:
                for span in _find(rule, text, rule.by_word):
                    results.append(
                        RecognizerResult(
                            entity_type=entity,
                            start=span[0],
                            end=span[1],
                            score=self._score,
                            recognition_metadata={
                                RecognizerResult.RECOGNIZER_NAME_KEY: self.name,
                                RecognizerResult.RECOGNIZER_IDENTIFIER_KEY: self.id,
                                "rule": rule.name,
                            },
                        )
                    )
            return results

    return _RuleRecognizer


# ------------------------------------------------------------------ spaCy option

_warned_models: set[str] = set()
_warn_lock = threading.Lock()


def _configured_spacy_model() -> str | None:
    try:
        from ultron.settings import Settings

        return Settings.from_env().redaction_spacy_model
    except Exception:  # noqa: BLE001 - a bad unrelated ULTRON_* value must not stop redaction
        return os.environ.get(SPACY_MODEL_ENV) or None


def _warn_once(model: str, message: str) -> None:
    with _warn_lock:
        if model in _warned_models:
            return
        _warned_models.add(model)
    logger.warning(message)


def _spacy_engine(model: str) -> Any | None:
    """A presidio spaCy engine for an installed model, else None (warned once)."""
    try:
        import spacy.util

        installed = spacy.util.is_package(model)
    except Exception:  # noqa: BLE001 - spaCy missing or broken: no model
        installed = False
    if not installed:
        _warn_once(
            model,
            f"spaCy model {model!r} is not installed; redaction runs with regex "
            "recognizers only (no name/location detection)",
        )
        return None
    try:
        from presidio_analyzer.nlp_engine import NlpEngineProvider

        provider = NlpEngineProvider(
            nlp_configuration={
                "nlp_engine_name": "spacy",
                "models": [{"lang_code": LANGUAGE, "model_name": model}],
            }
        )
        return provider.create_engine()
    except Exception as exc:  # noqa: BLE001 - fall back to no_op rather than fail ingestion
        _warn_once(model, f"spaCy model {model!r} could not be loaded ({exc}); using regex only")
        return None


# ---------------------------------------------------------------- the redactor

class Redactor:
    """Replace secrets and personal data in text with ``<TAG>`` placeholders.

    Build once and reuse (:func:`get_redactor`): building compiles the rules (and,
    with foreign recognizers, imports presidio); :meth:`redact` is cheap and thread-safe.

    ``extra_entities`` maps an entity name to one regex or a list of them; each
    match is replaced by ``<NAME>`` (e.g. ``{"EMPLOYEE_ID": r"\\bEMP-\\d{6}\\b"}``).
    ``extra_recognizers`` are further presidio recognizers (tags ``<ENTITY>``).
    """

    def __init__(
        self,
        *,
        spacy_model: str | None = None,
        extra_entities: Mapping[str, str | Sequence[str]] | None = None,
        extra_recognizers: Iterable["EntityRecognizer"] | None = None,
    ) -> None:
        self._tags = dict(TAGS)
        self._priority = dict(_PRIORITY)
        # (entity, rules) of our own recognizers; presidio objects are made from them
        # only when the analyzer is built (see :attr:`analyzer`).
        own_recognizers: list[tuple[str, Sequence[_Rule]]] = list(_RULES.items())
        extra: list[EntityRecognizer] = list(extra_recognizers or ())
        own: list[tuple[tuple[str, ...] | None, tuple[str, _Rule]]] = [
            (rule.triggers, (entity, rule)) for entity, rules in _RULES.items() for rule in rules
        ]
        foreign: set[str] = set()
        for entity, patterns in (extra_entities or {}).items():
            entity = entity.strip().upper()
            if not regex.fullmatch(r"[A-Z][A-Z0-9_]*", entity):
                raise ValueError(f"extra entity names are UPPER_SNAKE_CASE, not {entity!r}")
            if isinstance(patterns, str):
                patterns = [patterns]
            rules = [_rule(f"extra_{entity.lower()}_{i}", p) for i, p in enumerate(patterns)]
            own_recognizers.append((entity, rules))
            own.extend((None, (entity, rule)) for rule in rules)
            self._tags.setdefault(entity, f"<{entity}>")
            self._priority.setdefault(entity, _EXTRA_PRIORITY)
        for recognizer in extra:
            foreign.update(recognizer.get_supported_entities())
            for entity in recognizer.get_supported_entities():
                self._tags.setdefault(entity, f"<{entity}>")
                self._priority.setdefault(entity, _EXTRA_PRIORITY)

        if spacy_model is None:
            spacy_model = _configured_spacy_model()
        nlp_engine = _spacy_engine(spacy_model) if spacy_model else None
        self.spacy_model: str | None = spacy_model if nlp_engine is not None else None
        if nlp_engine is not None:
            foreign.update(_SPACY_ENTITIES)
        self._analyzer_parts = (own_recognizers, extra, nlp_engine)
        self._analyzer: AnalyzerEngine | None = None
        self._analyzer_lock = threading.Lock()
        if foreign:  # analyze() needs it for every text: build it now, as before
            self._build_analyzer()
        self._prefilter = Prefilter(own)
        self._foreign = sorted(foreign)
        tag_names = sorted({t[1:-1] for t in self._tags.values()}, key=len, reverse=True)
        self._tag_pattern = regex.compile("<(?:" + "|".join(map(regex.escape, tag_names)) + ")>")

    @property
    def analyzer(self) -> "AnalyzerEngine":
        """The presidio analyzer with every recognizer (ours, the extra ones, spaCy's).

        Built on first access when no recognizer needs it for :meth:`redact` (the
        default: our rules run directly, see the module docstring): importing
        presidio imports spaCy and, through its optional transformers engine, most of
        transformers and torch, about 90 MB (400 MB without the embedder) that a
        process only redacting with our rules never uses."""
        return self._analyzer if self._analyzer is not None else self._build_analyzer()

    def _build_analyzer(self) -> "AnalyzerEngine":
        with self._analyzer_lock:
            if self._analyzer is None:
                from presidio_analyzer import AnalyzerEngine, RecognizerRegistry
                from presidio_analyzer.nlp_engine import NoOpNlpEngine

                own_recognizers, extra, nlp_engine = self._analyzer_parts
                rule_recognizer = _recognizer_class()
                recognizers: list[EntityRecognizer] = [
                    rule_recognizer(entity, rules) for entity, rules in own_recognizers
                ]
                recognizers.extend(extra)
                if nlp_engine is not None:
                    from presidio_analyzer.predefined_recognizers import SpacyRecognizer

                    recognizers.append(
                        SpacyRecognizer(supported_language=LANGUAGE, supported_entities=list(_SPACY_ENTITIES))
                    )
                else:
                    nlp_engine = NoOpNlpEngine(models=[{"lang_code": LANGUAGE, "model_name": "no_op"}])
                    nlp_engine.load()
                registry = RecognizerRegistry(recognizers=recognizers, supported_languages=[LANGUAGE])
                self._analyzer = AnalyzerEngine(
                    registry=registry, nlp_engine=nlp_engine, supported_languages=[LANGUAGE]
                )
            return self._analyzer

    # ---------------------------------------------------------------- public

    def redact(self, text: str) -> str:
        """``text`` with every detected span replaced by its tag."""
        return self.redact_with_report(text)[0]

    def redact_with_report(self, text: str) -> tuple[str, list[dict]]:
        """The redacted text and one finding per replaced span:
        ``{"entity", "start", "end", "tag"}`` with offsets into the input text.
        Findings never carry the detected text."""
        if not text:
            return text, []
        spans = self._spans(text)
        pieces: list[str] = []
        cursor = len(text)
        for start, end, entity in reversed(spans):  # right to left
            pieces.append(text[end:cursor])
            pieces.append(self._tags[entity])
            cursor = start
        pieces.append(text[:cursor])
        redacted = "".join(reversed(pieces))
        findings = [
            {"entity": entity, "start": start, "end": end, "tag": self._tags[entity]}
            for start, end, entity in spans
        ]
        return redacted, findings

    # -------------------------------------------------------------- internal

    def _spans(self, text: str) -> list[tuple[int, int, str]]:
        """Non-overlapping (start, end, entity) spans sorted by start."""
        rules, words = self._prefilter.select(text)
        gates: dict[Any, bool] = {}
        found = [
            (start, end, entity)
            for entity, rule in rules
            if not rule.fallback
            for start, end in _find(rule, text, words, (), gates)
        ]
        fallbacks = [(entity, rule) for entity, rule in rules if rule.fallback]
        if fallbacks:
            covered = _merge((start, end) for start, end, _ in found)
            found.extend(
                (start, end, entity)
                for entity, rule in fallbacks
                for start, end in _find(rule, text, words, covered)
            )
        if self._foreign:
            found.extend(
                (r.start, r.end, r.entity_type)
                for r in self.analyzer.analyze(text=text, language=LANGUAGE, entities=self._foreign)
                if r.score > 0
            )
        if not found:
            return []
        tags = [m.span() for m in self._tag_pattern.finditer(text)] if "<" in text else []
        candidates = []
        for start, end, entity in set(found):
            if entity not in self._tags:
                continue
            if any(start < t_end and t_start < end for t_start, t_end in tags):
                continue  # never re-redact (part of) a tag
            candidates.append((start, end, entity))
        # Longest first, then the more specific kind, then the earlier start.
        candidates.sort(key=lambda c: (c[0] - c[1], -self._priority.get(c[2], 0), c[0], c[2]))
        # Chosen spans never overlap, so sorted by start they are sorted by end too.
        starts: list[int] = []
        ends: list[int] = []
        kinds: list[str] = []

        def choose(start: int, end: int, entity: str) -> None:
            i = bisect.bisect_left(starts, start)
            starts.insert(i, start)
            ends.insert(i, end)
            kinds.insert(i, entity)

        for start, end, entity in candidates:
            first = bisect.bisect_right(ends, start)  # first chosen span ending after start
            last = bisect.bisect_left(starts, end)  # chosen spans from here start at/after end
            if first >= last:
                choose(start, end, entity)
                continue
            # A partial overlap keeps what sticks out, under its own tag: dropping
            # it would leak e.g. a password glued to a private key block.
            blocked = list(zip(starts[first:last], ends[first:last]))
            cursor = start
            for s, e in blocked + [(end, end)]:
                if s > cursor:
                    piece = _respect_escapes(text, cursor, s)
                    if piece[0] < piece[1] and any(ch.isalnum() for ch in text[piece[0] : piece[1]]):
                        choose(piece[0], piece[1], entity)
                cursor = max(cursor, e)
        for start, end, entity in _echoes(text, list(zip(starts, ends, kinds))):
            first = bisect.bisect_right(ends, start)
            if first >= bisect.bisect_left(starts, end):
                choose(start, end, entity)
        return list(zip(starts, ends, kinds))


#: kinds that name a person or a place are found by what they are; only secrets echo
_ECHO_KINDS = frozenset({"PERSON", "LOCATION", "EMAIL_ADDRESS", "PHONE_NUMBER", "USER_PATH", "IP_ADDRESS", "UUID"})
#: the shortest piece of a secret that is a secret too (a search for its first part, say)
ECHO_MIN = 8


def _echoes(text: str, chosen: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """A secret found once leaks again as a piece of itself elsewhere in the text (``git log
    -S 'first-half'``, a grep for its prefix): every other run of at least ECHO_MIN
    characters that starts like a found secret is that secret too."""
    out = []
    for start, end, entity in chosen:
        value = text[start:end]
        if entity in _ECHO_KINDS or len(value) < ECHO_MIN:
            continue
        at = text.find(value[:ECHO_MIN])
        while at != -1:
            if not (start <= at < end):
                n = ECHO_MIN
                while n < len(value) and at + n < len(text) and text[at + n] == value[n]:
                    n += 1
                out.append((at, at + n, entity))
            at = text.find(value[:ECHO_MIN], at + 1)
    return out


def _merge(spans: Iterable[Span]) -> list[Span]:
    """Sorted, non-overlapping union of ``spans``."""
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(start, end) for start, end in merged]


_redactor: Redactor | None = None
_redactor_lock = threading.Lock()


def get_redactor() -> Redactor:
    """The process-wide redactor (built on first use; building takes seconds)."""
    global _redactor
    if _redactor is None:
        with _redactor_lock:
            if _redactor is None:
                _redactor = Redactor()
    return _redactor
