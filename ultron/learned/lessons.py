"""Learned lesson extraction: which turns of a segment teach something, and what they say.

The decision is the trained model's (:mod:`ultron.learned.train`, weights in
``weights/lessons.npz``), not a phrase list's:

1. every turn gets a class from the *unit* model: a lesson shape, a third party's wish,
   or nothing (:mod:`ultron.learned.units` lists its features); the *segment* model says
   whether the segment teaches anything at all, and a turn counts only when both pass;
2. turns whose lesson probability reaches :data:`UNIT_THRESHOLD` are grouped (neighbours
   within two turns), and the group's shape is the one with the most probability mass;
3. the *sentence* model picks, among the group's sentences, calls and error lines, the
   ones that state the lesson: the best is the memory's content, the next ones its
   resolution; an error shape's context is the error line it answers.

A third party's turn (a customer's wish in a support session) is never a memory of the
team's. Text the harness repeats in every session is taken out before the model reads
the segment (:class:`ultron.learned.units.RepeatIndex`), so it is never a lesson. The
memory's type follows its shape (:data:`ultron.vocabulary.LESSON_SHAPE_TYPES`).
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ultron.heuristics.candidates import CONTENT_CHARS, CONTEXT_CHARS, PROCEDURE_CHARS, RESOLUTION_CHARS, candidate, dedupe
from ultron.heuristics.extract import generalise_segment
from ultron.heuristics.phrasing import as_instruction, is_harness, is_lookup, reports_change, step_of_call, without_opener
from ultron.heuristics.checker import RESTATES
from ultron.heuristics.text import clip, norm_key, words
from ultron.learned.corpus import THIRD_PARTY
from ultron.learned.linear import HashedLinear
from ultron.vocabulary import LESSON_SHAPE_TYPES, LESSON_SHAPES
from ultron.learned.units import ERROR_LINE, Unit, featurize, segment_tokens, sentence_tokens, sentences_of, units_of

WEIGHTS = Path(__file__).resolve().parent / "weights" / "lessons.npz"
SHAPES = LESSON_SHAPES
TYPE_OF_SHAPE = LESSON_SHAPE_TYPES
#: a turn carries a lesson at this probability (chosen by leave-authors-out validation)
UNIT_THRESHOLD = 0.5
#: the segment model's probability a segment must have for any of its turns to count
SEGMENT_THRESHOLD = 0.4
#: the labelling-time test "does this segment teach anything" is looser: it only opens the gate
GATE_THRESHOLD = 0.35
GATE_SEGMENT_THRESHOLD = 0.3
GROUP_GAP = 2
#: shapes whose lesson is what was wrong and whose resolution is the fix
FIX_SHAPES = ("error_fix", "prose_fix", "security")


@dataclass
class LessonModel:
    units: HashedLinear
    sentences: HashedLinear
    segments: HashedLinear
    meta: dict[str, Any]

    @classmethod
    def load(cls, path: Path = WEIGHTS) -> "LessonModel":
        z = np.load(path)

        def dense(prefix: str) -> np.ndarray:
            rows, w = z[f"{prefix}_rows"], z[f"{prefix}_w"]
            full = np.zeros((int(z[f"{prefix}_dim"]), w.shape[1]), dtype=np.float16)
            full[rows] = w
            return full

        def vocab(prefix: str) -> np.ndarray | None:
            return z[f"{prefix}_vocab"] if f"{prefix}_vocab" in z.files else None

        meta = json.loads(bytes(z["meta"]).decode())
        return cls(HashedLinear(dense("unit"), z["unit_b"], tuple(meta["classes"]), vocab("unit")),
                   HashedLinear(dense("sent"), z["sent_b"], ("states",), vocab("sent")),
                   HashedLinear(dense("seg"), z["seg_b"], ("teaches",), vocab("seg")), meta)

    def segment_proba(self, units: list[Unit]) -> float:
        return float(self.segments.proba([segment_tokens(units)])[0, 0]) if units else 0.0

    def unit_proba(self, units: list[Unit]) -> np.ndarray:
        if not units:
            return np.zeros((0, len(self.units.classes)))
        return self.units.proba([u.tokens for u in units])

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
    served: bool = False      # the person typing is a customer the agent serves (a third party)


def detect(messages: list[Any], task_type: str | None = None, threshold: float | None = None,
           segment_threshold: float | None = None):
    """The segment's units, their class probabilities and the lessons found (turns at
    ``threshold``, default :data:`UNIT_THRESHOLD`, in a segment the segment model passes at
    ``segment_threshold``, default :data:`SEGMENT_THRESHOLD`)."""
    threshold = UNIT_THRESHOLD if threshold is None else threshold
    segment_threshold = SEGMENT_THRESHOLD if segment_threshold is None else segment_threshold
    m = model()
    d, units = units_of(messages)
    featurize(d, units, task_type)
    p = m.unit_proba(units)
    share = m.lesson_share(p)
    served = serves_customers(m, units, p, task_type)
    hits = [k for k in range(len(units)) if share[k] >= threshold and not _customer(units[k], served)]
    if hits and m.segment_proba(units) < segment_threshold:
        hits = []
    shape_cols = {s: m.units.classes.index(s) for s in SHAPES if s in m.units.classes}
    top = {k: max(shape_cols, key=lambda s: p[k, shape_cols[s]]) for k in hits}
    groups: list[list[int]] = []
    for k in hits:
        # neighbours join a lesson unless they plainly carry another one (a fix, then a wish):
        # another shape in another speaker's turn
        last = groups[-1][-1] if groups else None
        if last is not None and k - last <= GROUP_GAP and (top[k] == top[last] or units[k].role == units[last].role):
            groups[-1].append(k)
        else:
            groups.append([k])
    found = []
    for g in groups:
        mass = {s: float(p[g, c].sum()) for s, c in shape_cols.items()}
        for s in _not_the_principals(units, g, served):
            mass.pop(s, None)
        if not mass:
            continue
        shape = max(mass, key=mass.get)
        if mass[shape] < threshold * 0.5:       # what was left was the principal's word, not ours
            continue
        found.append(Found(shape, float(share[g].max()), g, served))
    return d, units, p, found


#: shapes only the principal's own words can carry
PRINCIPAL_SHAPES = ("preference", "correction")


#: P(third party) one of the person's turns needs for a customer-service segment's person to
#: be read as a customer (leave-authors-out: the keyword task type alone also silenced
#: analysts and engineers whose work mentions orders or bookings)
CUSTOMER_MIN = 0.2


def serves_customers(m: LessonModel, units: list[Unit], p: np.ndarray, task_type: str | None) -> bool:
    """Whether the person typing is a customer the agent serves: the segment reads as customer
    service, and the unit model hears a third party in at least one of the person's turns."""
    if task_type != "customer_service" or THIRD_PARTY not in m.units.classes:
        return False
    col = m.units.classes.index(THIRD_PARTY)
    return any(u.role == "user" and p[k, col] >= CUSTOMER_MIN for k, u in enumerate(units))


def _customer(unit: Unit, served: bool) -> bool:
    """When the agent serves customers the person typing is one: a third party, never the
    source of the team's knowledge (their words stay in the provenance)."""
    return served and unit.role == "user"


def _not_the_principals(units: list[Unit], group: list[int], served: bool) -> tuple[str, ...]:
    """Whose knowledge: a standing wish or a correction is the principal's, so it needs a
    person's turn in the group; and when the person typing is a customer, a third party,
    their wishes and corrections are never the team's."""
    if served or not any(units[k].role == "user" for k in group):
        return PRINCIPAL_SHAPES
    return ()


def teaches(messages: list[Any], task_type: str | None = None) -> dict[str, Any]:
    """Labelling-time signal for the memory gate: does any turn look like a lesson?"""
    _, _, _, found = detect(messages, task_type, GATE_THRESHOLD, GATE_SEGMENT_THRESHOLD)
    return {"teaches_lesson": bool(found), "lesson_shapes": sorted({f.shape for f in found}),
            "lesson_types": sorted({TYPE_OF_SHAPE[f.shape] for f in found})}


def _pick(units: list[Unit], group: list[int], shape: str) -> list[tuple[float, int, str, str]]:
    """The group's candidate lines scored by the sentence model, best first:
    ``(probability, unit, kind, text)``."""
    rows, where = [], []
    for k in group:
        for pos, (kind, s) in enumerate(sentences_of(units[k])):
            rows.append(sentence_tokens(s, units[k], shape, pos, kind))
            where.append((k, kind, s))
    if not rows:
        return []
    p = model().sentences.proba(rows)[:, 0]
    return sorted(((float(p[i]), k, kind, s) for i, (k, kind, s) in enumerate(where)), key=lambda x: -x[0])


_WORDY = re.compile(r"[A-Za-z]{2,}")


def _statement(line: str) -> bool:
    """A line that can state a lesson: a sentence of at least five words, not a question
    (a lesson is said, not asked), not a table, tree or file listing."""
    line = line.strip()
    return (len(_WORDY.findall(line)) >= 5 and not line.endswith("?")
            and not line.startswith(("|", "│", "├", "└", "#", ">", "-", "*")))


def _error_line(units: list[Unit], group: list[int]) -> str:
    """The error text a reader would search for: a traceback's header says nothing, the
    exception line that ends it does."""
    for k in list(group) + [group[0] - 1, group[0] - 2]:
        # the harness refusing its own bookkeeping ("User chose to stay in plan mode") is no error
        if 0 <= k < len(units) and not all(is_harness(c.name) for c in units[k].calls if c.error):
            lines = [ln for ln in units[k].error_lines(2) if not ln.startswith("Traceback (most recent call")]
            if lines:
                return lines[0]
    return ""


#: the sentence model's probability the best line needs to be a memory's content
CONTENT_MIN = 0.3
#: lines kept in a resolution besides its steps, and the probability they need
RESOLUTION_LINES = 4
RESOLUTION_MIN = 0.25
MAX_STEPS = 8
#: turns read on each side of a found lesson's turns
SPAN = 1


def _whole(unit: Unit, line: str) -> str:
    """A line that announces what follows ("for any Go tests you write for me:") is only half
    a lesson: the lines it introduces come with it, as far as a content's room goes."""
    if not line.rstrip().endswith(":"):
        return line
    texts = [s for kind, s in sentences_of(unit) if kind == "text"]
    try:
        at = texts.index(line)
    except ValueError:
        return line
    out = line.rstrip()
    for nxt in texts[at + 1:at + 4]:
        if len(out) + len(nxt) + 1 > CONTENT_CHARS:
            break
        out += " " + nxt.strip()
    return out


#: the agent announcing its next move ("I'll check …") or a ticket's heading ("INC-2231: …")
_NOT_A_STATEMENT = re.compile(r"^\W*(?:(?i:let me|now i|i'?ll|i will|i'?m going to|first,? i)\b|[A-Z][A-Z0-9]*-\d+\b)")
_TOOL_SAID = re.compile(r"\b\w+(?:Exception|Error)\b|^(?:[\w.-]+:\s*)?(?:error|fatal|hint|warning|E)\b[:\s]|^\$ ")


def _pasted_error(units: list[Unit]) -> str:
    """The error line the person pasted into the opening request, when no call failed: what a
    reader would search for, kept in the context (the request itself is not the lesson)."""
    opening = next((u for u in units if u.role == "user"), None)
    lines = [ln.strip().strip("`").strip() for ln in (opening.text if opening else "").splitlines()]
    hits = [ln for ln in lines if ln and ERROR_LINE.search(ln)]
    # the tool's own error lines ("…Exception: …", "fatal: …", "hint: …") before the person's prose about them
    named = [ln for ln in hits if _TOOL_SAID.search(ln)]
    return " ".join(ln[:240] for ln in (named or hits)[:2])


def _restates(line: str, opening: set[str], whole: bool = False) -> bool:
    """Is the line (most of) the segment's opening request, given as its words? (the mechanical
    check of :mod:`ultron.heuristics.checker`, applied before a line becomes a memory).
    ``whole``: is it the request itself, not one sentence of it?"""
    mine = words(line)
    if not mine or not opening or len(mine & opening) / len(mine) < RESTATES:
        return False
    return not whole or len(mine & opening) / len(opening) >= RESTATES


def _corrected_at(units: list[Unit], group: list[int]) -> int:
    """The unit of the principal's correcting turn (the group's first person's turn), or -1."""
    return next((k for k in group if units[k].role == "user"), -1)


def build(d, units: list[Unit], f: Found, task_type: str | None) -> dict[str, Any] | None:
    """One memory candidate from one found lesson: content is the best prose line (a call or
    an error line is never the lesson itself), the resolution the next best lines and, for a
    lesson done through tools, its successful calls as numbered steps."""
    group = sorted(set(f.units))
    # the turns just before and after are read too: a fix is often stated in the turn after
    # the failed call the model flagged, a rule in the reply to the turn that broke it
    span = sorted({k for g in group for k in range(g - SPAN, g + SPAN + 1)
                   if 0 <= k < len(units) and not _customer(units[k], f.served)})
    picked = _pick(units, span, f.shape)
    prose = [x for x in picked if x[2] == "text" and _statement(x[3])]
    # the request that opened the segment is the task, not what was learned doing it: for a
    # fix or a procedure no line of it is the lesson; for a wish or a correction, the request
    # as a whole is not (a standing wish stated in passing, one sentence of it, can be)
    opening = words(next((u.text for u in units if u.role == "user"), ""))
    whole = f.shape not in FIX_SHAPES + ("procedure",)
    prose = [x for x in prose if not _restates(x[3], opening, whole)]
    # a line that narrates the agent's next move or heads a ticket is no lesson's statement:
    # the next best line states it, when one does
    plain = [x for x in prose if not _NOT_A_STATEMENT.search(x[3])]
    if plain and plain[0][0] >= CONTENT_MIN:
        prose = plain + [x for x in prose if x not in plain]
    if not prose or prose[0][0] < CONTENT_MIN:
        return None            # nothing in these turns states a lesson: no memory
    content = without_opener(_whole(units[prose[0][1]], prose[0][3]))
    # a correction's resolution is what was done once the principal set the agent right: the
    # rejected attempt before it is the very thing not to do
    after = _corrected_at(units, group) if f.shape == "correction" else -1
    rest = [s for p, k, kind, s in prose[1:] if p >= RESOLUTION_MIN and norm_key(s) != norm_key(content)
            and (k >= after or units[k].role == "user")]
    rest = rest[:RESOLUTION_LINES]
    if f.shape in FIX_SHAPES and reports_change(content):
        # "Moved X and rebuilt …" is what was done; the lesson is what was wrong, when a line says it
        cause = next((s for s in rest if not reports_change(s)), None)
        if cause is not None:
            rest = [content] + [s for s in rest if s is not cause]
            content = without_opener(cause)
    rest = [as_instruction(s) for s in rest]
    context_parts = []
    if f.shape in ("error_fix", "prose_fix", "security"):
        err = _error_line(units, group) or _pasted_error(units)
        if err and err not in content:
            context_parts.append(err if err.lower().startswith("error") else "Error: " + err)
    task = d.task_context(units[group[0]].msg)
    if task:
        context_parts.append(task)
    resolution = " ".join(rest)
    # a step says what to do with its substance; a call that only looked something up is not one
    calls = {c.gist(): c for k in span for c in units[k].calls}
    steps = [step_of_call(c.name, c.args, s) if c else clip(s, 220)
             for p, k, kind, s in sorted((x for x in picked if x[2] == "call"), key=lambda x: x[1])
             for c in [calls.get(s)]
             if (p >= RESOLUTION_MIN or f.shape in ("error_fix", "procedure")) and k > after
             and not (c and is_lookup(c.name, s))][:MAX_STEPS]
    if f.shape == "preference":
        # a standing wish is how to work, not what was done in this session: the calls made
        # around it (reviewers found one that did the very thing the person then forbade) are no part of it
        steps = []
    if steps:
        resolution = (resolution + "\n" + "\n".join(f"{i + 1}. {s}" for i, s in enumerate(steps))).strip()
    tools = sorted({c.name for k in span for c in units[k].calls})[:5]
    evidence = [units[k].reading()[:1000] for k in span]
    limit = PROCEDURE_CHARS if f.shape == "procedure" or len(steps) > 3 else RESOLUTION_CHARS
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
    generalise_segment(out, d)
    return dedupe(out)
