"""Is a memory candidate worth serving? A learned check on the candidate as a reader sees it.

The lesson model finds the turns that teach; this check reads what came out of them the
way a reviewer does, against the written rubric (``docs/rubric.md``): is it a general
lesson, or a retelling of one session (an outcome line addressed to a customer, a fare,
a date), the user's own request, a line of the system prompt the agent already runs
under, or a fix with no substance? Reviewers who saw only the rubric judged memories
extracted from the labelled corpus (out of fold); a logistic regression on the features
below learned their verdicts (:mod:`ultron.learned.train_worth`; weights in
``weights/worth.json``). The features are structural on purpose: counts and overlaps,
no topic words, so the check carries to domains the reviewers never saw.

It applies to every provider's candidates (the LLM's too), since the rubric is one text,
except to what the principal said in their own words: a correction or a standing wish
(shapes :data:`SPARED`) is kept as said. Its features (it echoes a person's turn) are the
very ones a retold request has, and the check dropped sound corrections for them.
"""

from __future__ import annotations

import json
import math
import re
import threading
from pathlib import Path
from typing import Any

import numpy as np

from ultron.heuristics.episodes import Digest
from ultron.heuristics.text import containment, sentences, words

WEIGHTS = Path(__file__).resolve().parent / "weights" / "worth.json"
SHAPES = ("error_fix", "prose_fix", "correction", "preference", "general_lesson", "procedure", "security")
#: the principal's own word: never second-guessed by the check
SPARED = ("correction", "preference")

_PLACEHOLDER = re.compile(r"<[a-z_]+>")
_AMOUNT = re.compile(r"[$€£]\s?\d|\b\d+(?:[.,]\d+)?\s?(?:dollars|usd|eur|%)\b", re.IGNORECASE)
_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,:]\d+)*(?![\w.])")
_TOKEN = re.compile(r"[A-Za-z']+")
# closed-class words, not topic words: who a sentence addresses, and who is narrating
_SECOND = frozenset({"you", "your", "you're", "yours", "you'll", "you've"})
_FIRST = frozenset({"i", "i'm", "i'll", "i've", "me", "my", "let's", "we'll"})
_STEP = re.compile(r"^\s*\d+\.\s+(.*)$", re.MULTILINE)
# substance a reader can act on: a flag, an assignment, a path or file name, code, a call
_SUBSTANCE = re.compile(r"`[^`]+`|(?<![\w-])--?[a-z][\w-]+|\w=\S|\w/\w|\b\w+\.(?:py|js|ts|json|ya?ml|toml|txt|cfg|ini|sh|"
                        r"md|lock|sql|go|rs|java|xml|conf|env)\b|\w\(|\b[a-z]+_[a-z_]+\b|\b[A-Z][a-z]+[A-Z]\w+")
_ERRORISH = re.compile(r"error|exception|fail|denied|refused|not found|cannot|invalid|unable|missing|timeout",
                       re.IGNORECASE)

FEATURES = (
    *(f"shape={s}" for s in SHAPES),
    "placeholders_content", "placeholders_resolution", "amounts_content", "numbers_content",
    "content_words", "resolution_empty", "resolution_words", "steps", "bare_steps",
    "context_error", "context_empty", "system_cover", "request_cover", "user_cover", "user_verbatim",
    "from_user", "second_person", "first_person", "content_open_end", "resolution_open_end",
    "substance_content", "substance_resolution", "question", "has_system", "confidence",
    "content_is_error", "content_in_resolution", "serves_customers", "addresses_customer",
)


def _share(tokens: list[str], vocab: frozenset[str]) -> float:
    """How much of the sentence is these words (one in five words is the most)."""
    return min(1.0, 5 * sum(1 for t in tokens if t.lower() in vocab) / len(tokens)) if tokens else 0.0


def _flat(text: str) -> str:
    return " ".join(_TOKEN.findall(text.lower()))


def _cover(text_words: set[str], texts: list[str]) -> float:
    """How much of ``text_words`` one of ``texts`` holds (the best one)."""
    best = 0.0
    for t in texts:
        w = words(t)
        if w and text_words:
            best = max(best, len(text_words & w) / len(text_words))
    return best


def _open_end(text: str) -> float:
    t = text.rstrip()
    if not t:
        return 0.0
    return 1.0 if t.endswith((":", ",", ";", "…", "-", "(")) or t[-1].isalnum() and len(t) > 40 else 0.0


def _log(n: int, top: int) -> float:
    return min(1.0, math.log1p(n) / math.log1p(top))


def features(mem: dict[str, Any], d: Digest) -> np.ndarray:
    """The candidate's features, in :data:`FEATURES` order. ``d`` is the segment as it was
    stored (its system prompt unstripped: a restated standing instruction must be seen)."""
    content, context = mem.get("content") or "", mem.get("context") or ""
    resolution = mem.get("resolution") or ""
    steps = _STEP.findall(resolution)
    prose = _STEP.sub("", resolution).strip()
    cw = words(content)
    toks = _TOKEN.findall(content)
    users = [d.text[i] for i, k in enumerate(d.kind) if k == "user"]
    first = users[:1]
    system = sentences(d.system) if d.system else []
    key = _flat(content)[:160]
    from_user = bool(key) and any(key in _flat(u) for u in users)
    shape = mem.get("shape")
    x = [1.0 if shape == s else 0.0 for s in SHAPES]
    x += [
        min(len(_PLACEHOLDER.findall(content)), 3) / 3,
        min(len(_PLACEHOLDER.findall(resolution)), 3) / 3,
        min(len(_AMOUNT.findall(content)), 3) / 3,
        min(len(_NUMBER.findall(content)), 4) / 4,
        _log(len(toks), 60),
        0.0 if resolution.strip() else 1.0,
        _log(len(_TOKEN.findall(prose)), 120),
        min(len(steps), 8) / 8,
        sum(1 for s in steps if len(s.split()) < 2) / len(steps) if steps else 0.0,
        1.0 if _ERRORISH.search(context) else 0.0,
        0.0 if context.strip() else 1.0,
        _cover(cw, system),
        _cover(cw, first),
        _cover(cw, users),
        1.0 if key and any(key in _flat(u) for u in first) else 0.0,
        1.0 if from_user else 0.0,
        _share(toks, _SECOND),
        _share(toks, _FIRST),
        _open_end(content),
        _open_end(prose) if prose else 0.0,
        min(len(_SUBSTANCE.findall(content)), 3) / 3,
        min(len(_SUBSTANCE.findall(resolution)), 5) / 5,
        1.0 if content.rstrip().endswith("?") else 0.0,
        1.0 if d.system else 0.0,
        float(mem.get("confidence") or 0.0),
        1.0 if _ERRORISH.search(content) and not prose and not steps else 0.0,
        containment(cw, words(resolution)) if resolution else 0.0,
    ]
    served = 1.0 if "customer_service" in (mem.get("tags") or []) else 0.0
    x += [served, served * x[FEATURES.index("second_person")]]
    return np.asarray(x, dtype=np.float64)


class WorthModel:
    """A logistic regression over :data:`FEATURES`: P(a reviewer finds the memory worth serving)."""

    def __init__(self, coef: np.ndarray, intercept: float, threshold: float, meta: dict[str, Any]) -> None:
        self.coef, self.intercept, self.threshold, self.meta = coef, intercept, threshold, meta

    @classmethod
    def load(cls, path: Path = WEIGHTS) -> "WorthModel":
        data = json.loads(path.read_text())
        if tuple(data["features"]) != FEATURES:
            raise ValueError(f"{path}: trained on other features; retrain with ultron.learned.train_worth")
        return cls(np.asarray(data["coef"], dtype=np.float64), float(data["intercept"]),
                   float(data["threshold"]), data.get("meta", {}))

    def proba(self, x: np.ndarray) -> np.ndarray:
        x = np.atleast_2d(x)
        return 1.0 / (1.0 + np.exp(-(x @ self.coef + self.intercept)))


_model: WorthModel | None = None
_lock = threading.Lock()


def model() -> WorthModel | None:
    """The shipped model, or None when no weights are checked in (then nothing is dropped)."""
    global _model
    if _model is None and WEIGHTS.exists():
        with _lock:
            if _model is None:
                _model = WorthModel.load()
    return _model


def use_model(m: WorthModel | None) -> None:
    global _model
    _model = m


def score(candidates: list[dict[str, Any]], messages: list[Any] | Digest) -> list[float]:
    """P(worth serving) per candidate (1.0 each when no model is shipped)."""
    m = model()
    if m is None or not candidates:
        return [1.0] * len(candidates)
    d = messages if isinstance(messages, Digest) else Digest(messages)
    return [float(p) for p in m.proba(np.vstack([features(c, d) for c in candidates]))]


def keep(candidates: list[dict[str, Any]], messages: list[Any] | Digest) -> list[dict[str, Any]]:
    """The candidates a reviewer would find worth serving; each carries its ``worth``."""
    m = model()
    out = []
    for c, p in zip(candidates, score(candidates, messages)):
        c["worth"] = round(p, 3)
        if m is None or p >= m.threshold or c.get("shape") in SPARED:
            out.append(c)
    return out
