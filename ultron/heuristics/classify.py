"""A memory's type from its words, without a model.

Weighted cue counts per type (content x1, resolution x0.75, context x0.5, each
pattern counted at most three times per field; tags naming a type or a topic add
2 / 1); the highest score wins, ties broken in the order security, error,
correction, preference, life, pattern; no cue at all -> "pattern".
"""

from __future__ import annotations

import re

from ultron.heuristics.reader import cap
from ultron.vocabulary import MEMORY_TYPES

#: tie-break order of classify_memory_type (first wins).
TYPE_PRIORITY = ("security", "error", "correction", "preference", "life", "pattern")

_I = re.IGNORECASE

_TYPE_CUES: dict[str, tuple[tuple[re.Pattern[str], float], ...]] = {
    "security": (
        (re.compile(r"\b(?:credentials?|secrets?|api[ _-]?keys?|passwords?|private keys?|access tokens?|"
                    r"tokens? (?:leak|expos)\w*|leak(?:ed|s)?|exposed|vulnerab\w*|cve-\d{4}-\d+|exploit\w*|"
                    r"injection|xss|csrf|malware|phishing|privilege escalation|least privilege|encrypt\w*|"
                    r"unauthori[sz]ed|forbidden|permission denied|access denied|permissions?|auth(?:entication|"
                    r"orization)|security|sudo|chmod|rbac|iam|ssl|tls|certificates? verif\w*|redact\w*|"
                    r"rotate (?:the )?(?:key|token|secret)s?)\b", _I), 1.5),
    ),
    "error": (
        (re.compile(r"\b\w+(?:Error|Exception)\b|\btraceback\b|\berrors?\b|\bfail(?:ed|s|ure|ing)?\b|\bcrash\w*\b|"
                    r"\bexit (?:code|status) [1-9]\d*|\bsegfault\b|\bstack ?trace\b|\bbug\b|\bbroken\b"), 1.0),
        (re.compile(r"\b(?:exception|cannot|can'?t|unable to|not found|invalid|denied|timed? ?out|"
                    r"no such file|command not found|does not exist)\b", _I), 0.5),
    ),
    "correction": (
        (re.compile(r"\binstead\b|\bshould (?:be|have|use)\b|\bactually\b|\bwrong\b|\bincorrect\b|\bmistake\b|"
                    r"\bcorrect(?:ed|ion)\b|\bi (?:said|meant)\b|\brather than\b|\bnot what\b|\bmisunderst\w+", _I),
         1.2),
    ),
    "preference": (
        (re.compile(r"\bprefer(?:s|red|ence)?\b|\bfavou?rite\b|\bi (?:really )?(?:like|love|hate|dislike)\b|"
                    r"\b(?:always|never)\b|\bfrom now on\b|\bby default\b|\bgoing forward\b|\bi'?d rather\b", _I),
         1.2),
    ),
    "pattern": (
        (re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+\S|\bsteps?\b|\bhow to\b|\bfirst\b.{0,80}\bthen\b|\bworkflow\b|"
                    r"\bprocedure\b|\brecipe for\b|\bchecklist\b", _I | re.MULTILINE), 0.8),
        (re.compile(r"\b(?:run|use|install|configure|set up|setup|create|deploy|build|then|after that)\b", _I),
         0.3),
    ),
    "life": (
        (re.compile(r"\b(?:travel|trips?|flights?|airlines?|airports?|baggage|luggage|passports?|visas?|hotels?|"
                    r"restaurants?|food|recipes?|cooking|diet|health|doctor|medicine|exercise|sleep|money|budget|"
                    r"bank|tax(?:es)?|insurance|refunds?|weather|shopping|groceries|rent|commute|holiday|"
                    r"vacation)\b", _I), 1.0),
    ),
}
_TAG_TYPE = {"error": "error", "errors": "error", "bug": "error", "security": "security", "secrets": "security",
             "credentials": "security", "correction": "correction", "preference": "preference",
             "preferences": "preference", "pattern": "pattern", "howto": "pattern", "how-to": "pattern",
             "workflow": "pattern", "life": "life", "travel": "life", "airline": "life", "health": "life",
             "food": "life", "finance": "life"}


def _type_scores(content: str, context: str, resolution: str, tags: list[str] | None) -> dict[str, float]:
    scores = {t: 0.0 for t in MEMORY_TYPES}
    fields = ((cap(content, 3000), 1.0), (cap(resolution, 3000), 0.75), (cap(context, 3000), 0.5))
    for t, cues in _TYPE_CUES.items():
        for rx, w in cues:
            for text, fw in fields:
                if text:
                    n = len(rx.findall(text))
                    if n:
                        scores[t] += w * fw * min(n, 3)
    for tag in tags or []:
        t = _TAG_TYPE.get(str(tag).strip().lower())
        if t:
            scores[t] += 2.0 if str(tag).strip().lower() == t else 1.0
    return scores


def classify_memory_type(content: str, context: str = "", resolution: str = "",
                         tags: list[str] | None = None) -> str:
    """error / security / correction / pattern / preference / life by weighted cues
    (see the module docstring); deterministic ties; "pattern" when nothing matches."""
    scores = _type_scores(content or "", context or "", resolution or "", tags)
    top = max(scores.values())
    if top <= 0:
        return "pattern"
    for t in TYPE_PRIORITY:
        if scores[t] == top:
            return t
    return "pattern"
