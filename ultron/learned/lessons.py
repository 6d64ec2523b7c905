"""Learned lesson extraction: which turns of a segment teach something, and what they say.

The decision is the trained model's (:mod:`ultron.learned.train`, weights in
``weights/lessons.npz``), not a phrase list's:

1. every turn gets a class from the *unit* model: a lesson shape, a third party's wish,
   or nothing (:mod:`ultron.learned.units` lists its features);
2. turns whose lesson probability reaches :data:`UNIT_THRESHOLD` are grouped (neighbours
   within two turns), and the group's shape is the one with the most probability mass;
3. the *sentence* model picks, among the group's sentences, calls and error lines, the
   ones that state the lesson: the best is the memory's content, the next ones its
   resolution; an error shape's context is the error line it answers.

A third party's turn (a customer's wish in a support session) is never a memory of the
team's. Text the harness repeats in every session is taken out before the model reads
the segment (:class:`ultron.learned.units.RepeatIndex`), so it is never a lesson. The memory's type follows its shape
(:data:`ultron.learned.corpus.TYPE_OF_SHAPE`).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ultron.heuristics.candidates import CONTEXT_CHARS, PROCEDURE_CHARS, RESOLUTION_CHARS, candidate, dedupe
from ultron.heuristics.generalise import generalise, people_in
from ultron.heuristics.text import clip, norm_key
from ultron.learned.linear import HashedLinear
from ultron.vocabulary import LESSON_SHAPE_TYPES, LESSON_SHAPES
from ultron.learned.units import Unit, featurize, sentence_tokens, sentences_of, units_of

WEIGHTS = Path(__file__).resolve().parent / "weights" / "lessons.npz"
SHAPES = LESSON_SHAPES
TYPE_OF_SHAPE = LESSON_SHAPE_TYPES
#: a turn carries a lesson at this probability (chosen by leave-authors-out validation)
UNIT_THRESHOLD = 0.5
#: the labelling-time test "does this segment teach anything" is looser: it only opens the gate
GATE_THRESHOLD = 0.35
GROUP_GAP = 2


@dataclass
class LessonModel:
    units: HashedLinear
    sentences: HashedLinear
    meta: dict[str, Any]

    @classmethod
    def load(cls, path: Path = WEIGHTS) -> "LessonModel":
        z = np.load(path)

        def dense(prefix: str) -> np.ndarray:
            rows, w = z[f"{prefix}_rows"], z[f"{prefix}_w"]
            full = np.zeros((int(z[f"{prefix}_dim"]), w.shape[1]), dtype=np.float16)
            full[rows] = w
            return full

        meta = json.loads(bytes(z["meta"]).decode())
        return cls(HashedLinear(dense("unit"), z["unit_b"], tuple(meta["classes"])),
                   HashedLinear(dense("sent"), z["sent_b"], ("states",)), meta)

    def unit_proba(self, units: list[Unit]) -> np.ndarray:
        return self.units.proba([u.tokens for u in units]) if units else np.zeros((0, len(self.units.classes)))

    def lesson_share(self, p: np.ndarray) -> np.ndarray:
        """P(the turn carries a lesson of any shape)."""
        cols = [self.units.classes.index(s) for s in SHAPES if s in self.units.classes]
        return p[:, cols].sum(axis=1) if len(p) else np.zeros(0)


_model: LessonModel | None = None
_lock = threading.Lock()


def model() -> LessonModel:
    """The shipped model, loaded once per process (a few milliseconds)."""
    global _model
    if _model is None:
        with _lock:
            if _model is None:
                _model = LessonModel.load()
    return _model


def use_model(m: LessonModel | None) -> None:
    """Serve ``m`` instead of the shipped weights (cross-validation folds); ``None`` restores them."""
    global _model
    _model = m


@dataclass
class Found:
    shape: str
    score: float
    units: list[int]          # positions in the unit list


def detect(messages: list[Any], task_type: str | None = None, threshold: float = UNIT_THRESHOLD):
    """The segment's units, their class probabilities and the lessons found."""
    m = model()
    d, units = units_of(messages)
    featurize(d, units, task_type)
    p = m.unit_proba(units)
    share = m.lesson_share(p)
    hits = [k for k in range(len(units)) if share[k] >= threshold]
    groups: list[list[int]] = []
    for k in hits:
        if groups and k - groups[-1][-1] <= GROUP_GAP:
            groups[-1].append(k)
        else:
            groups.append([k])
    shape_cols = {s: m.units.classes.index(s) for s in SHAPES if s in m.units.classes}
    found = []
    for g in groups:
        mass = {s: float(p[g, c].sum()) for s, c in shape_cols.items()}
        shape = max(mass, key=mass.get)
        found.append(Found(shape, float(share[g].max()), g))
    return d, units, p, found


def teaches(messages: list[Any], task_type: str | None = None) -> dict[str, Any]:
    """Labelling-time signal for the memory gate: does any turn look like a lesson?"""
    _, _, _, found = detect(messages, task_type, GATE_THRESHOLD)
    return {"teaches_lesson": bool(found), "lesson_shapes": sorted({f.shape for f in found}),
            "lesson_types": sorted({TYPE_OF_SHAPE[f.shape] for f in found})}


def _pick(units: list[Unit], group: list[int], shape: str) -> list[tuple[float, int, str]]:
    """The group's candidate sentences scored by the sentence model, best first."""
    rows, where = [], []
    for k in group:
        for pos, s in enumerate(sentences_of(units[k])):
            rows.append(sentence_tokens(s, units[k], shape, pos))
            where.append((k, s))
    if not rows:
        return []
    p = model().sentences.proba(rows)[:, 0]
    return sorted(((float(p[i]), k, s) for i, (k, s) in enumerate(where)), key=lambda x: -x[0])


def _error_line(units: list[Unit], group: list[int]) -> str:
    for k in list(group) + [group[0] - 1, group[0] - 2]:
        if 0 <= k < len(units):
            lines = units[k].error_lines(1)
            if lines:
                return lines[0]
    return ""


def _steps(units: list[Unit], group: list[int]) -> list[str]:
    out = []
    for k in group:
        for c in units[k].calls:
            if not c.error and c.args:
                out.append(clip(f"{c.name}: {c.args}", 200))
    return out


def build(d, units: list[Unit], f: Found, task_type: str | None) -> dict[str, Any] | None:
    """One memory candidate from one found lesson."""
    group = sorted(set(f.units))
    picked = _pick(units, group, f.shape)
    if not picked:
        return None
    content = picked[0][2]
    rest = [s for p, k, s in picked[1:] if p >= 0.3 and norm_key(s) != norm_key(content)][:3]
    context_parts = []
    if f.shape in ("error_fix", "prose_fix", "security"):
        err = _error_line(units, group)
        if err and err not in content:
            context_parts.append("Error: " + err)
    task = d.task_context(units[group[0]].msg)
    if task:
        context_parts.append(task)
    resolution = " ".join(rest)
    if f.shape in ("error_fix", "procedure"):
        steps = _steps(units, group)
        if steps:
            numbered = "\n".join(f"{i + 1}. {s}" for i, s in enumerate(steps[:8]))
            resolution = (resolution + "\n" + numbered).strip()
    tools = sorted({c.name for k in group for c in units[k].calls})[:5]
    evidence = [units[k].reading()[:1000] for k in group]
    limit = PROCEDURE_CHARS if f.shape == "procedure" else RESOLUTION_CHARS
    mem = candidate(TYPE_OF_SHAPE[f.shape], "episodic" if f.shape == "preference" else "procedural",
                    content, clip(" ".join(context_parts), CONTEXT_CHARS), resolution, tools,
                    round(min(0.99, 0.5 + 0.5 * f.score), 3), task_type, evidence, limit)
    mem["confirmed"] = True
    mem["shape"] = f.shape
    return mem


def extract(messages: list[Any], task_type: str | None = None) -> list[dict[str, Any]]:
    """Memory candidates of one segment, one per lesson found. The caller takes the
    harness's repeated sentences out first (:func:`ultron.learned.units.strip_repeated`)."""
    d, units, _, found = detect(messages, task_type)
    out = [m for m in (build(d, units, f, task_type) for f in found) if m]
    if out:
        people = people_in(d.text[i] for i, k in enumerate(d.kind) if k in ("user", "tool"))
        for m in out:
            for key in ("content", "context", "resolution"):
                if m[key]:
                    m[key] = generalise(m[key], people)
    return dedupe(out)
