"""Train the lesson model from the labelled corpus and write its weights.

    python -m ultron.learned.train                 # fit on every author but the blind ones, write weights
    python -m ultron.learned.train --cv            # leave-authors-out figures first

Three hashed linear models (:mod:`ultron.learned.linear`), fitted with scikit-learn's
logistic regression (fixed seed; the solver is deterministic):

* **units**: which turn carries a lesson, and of which shape, or a third party's wish,
  or nothing (:data:`ultron.learned.corpus.CLASSES`), from the tokens of
  :func:`ultron.learned.units.featurize`;
* **segments**: does the segment teach anything at all, from every turn's first words and
  structure (:func:`ultron.learned.units.segment_tokens`); a lesson needs both its turn
  and its segment to pass (leave-authors-out, the pair kept 0.93 of lesson sessions with
  104 of 260 negatives firing, against 0.94 with 154 for the turns alone);
* **sentences**: which sentences of a lesson turn state it (a sentence holding one of
  the lesson's key terms), from :func:`ultron.learned.units.sentence_tokens`.

Sessions are rendered in their own format and in one other (rotating), so each shape
is seen through every parser. The blind authors (``BLIND``) are never trained on and
never read here: ``benchmarks/lessons.py --blind`` reports them once.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ultron.learned import corpus as C
from ultron.learned.linear import HashedLinear, sparse_rows, vocabulary
from ultron.learned.units import segment_tokens, sentence_tokens, sentences_of

WEIGHTS = Path(__file__).resolve().parent / "weights" / "lessons.npz"
#: authors whose sessions are read only for the final, blind figure
BLIND: tuple[str, ...] = ("a15", "a16")
UNIT_DIM = 1 << 18
SENT_DIM = 1 << 16
SEG_DIM = 1 << 18
SEED = 20261128
FORMATS = ("openai", "anthropic", "claude_code")


def build(specs: Sequence[dict[str, Any]], formats: str = "own+1", repeats=None) -> list[C.Labelled]:
    """Every spec rendered and labelled: in its ``own`` format, or (``own+1``) also in another
    format for two sessions in three (the other format rotates with the session's position)."""
    if repeats is None:
        repeats = C.repeat_index(specs)
    out: list[C.Labelled] = []
    for n, spec in enumerate(specs):
        own = spec.get("format") or "openai"
        fmts = [own] if formats == "own" else [own, FORMATS[(FORMATS.index(own) + 1 + n) % 3]]
        if fmts[1:] == [own]:
            fmts = fmts[:1]
        for fmt in fmts:
            lab = C.label_units(spec, fmt, repeats)
            if lab is not None:
                out.append(lab)
    return out


def _weights(labels: list[str]) -> np.ndarray:
    """Each class weighs in by the square root of its inverse frequency: 'none' turns are
    most turns, and fully balanced weights made every long explanation a lesson."""
    count = Counter(labels)
    w = {k: (len(labels) / (len(count) * v)) ** 0.5 for k, v in count.items()}
    return np.array([w[y] for y in labels])


def fit_units(data: Sequence[C.Labelled], c: float = 4.0) -> HashedLinear:
    from sklearn.linear_model import LogisticRegression

    rows = [u.tokens for lab in data for u in lab.units]
    ys = [y for lab in data for y in lab.labels]
    vocab = vocabulary(rows)
    x = sparse_rows(rows, UNIT_DIM, vocab)
    clf = LogisticRegression(C=c, max_iter=400, random_state=SEED)
    clf.fit(x, ys, sample_weight=_weights(ys))
    return _ordered(clf, clf.coef_.T, vocab)


def _ordered(clf, coef_t: np.ndarray, vocab: np.ndarray) -> HashedLinear:
    classes = tuple(str(k) for k in clf.classes_)
    order = [classes.index(k) for k in C.CLASSES if k in classes]
    return HashedLinear(coef_t[:, order].astype(np.float16), clf.intercept_[order].astype(np.float32),
                        tuple(classes[i] for i in order), vocab)


def fit_segments(data: Sequence[C.Labelled], c: float = 4.0) -> HashedLinear:
    """Does the segment teach anything at all (any lesson turn)? One row per segment."""
    from sklearn.linear_model import LogisticRegression

    ys = [int(bool(lab.spec["lessons"])) for lab in data]
    rows = [segment_tokens(lab.units) for lab in data]
    vocab = vocabulary(rows)
    clf = LogisticRegression(C=c, max_iter=500, random_state=SEED)
    clf.fit(sparse_rows(rows, SEG_DIM, vocab), ys)
    return HashedLinear(clf.coef_.T.astype(np.float16), clf.intercept_.astype(np.float32), ("teaches",), vocab)


def sentence_rows(data: Sequence[C.Labelled]) -> tuple[list[list[str]], list[int]]:
    """Positives: the lines of a lesson's turns that hold one of its key terms. Negatives: the
    other lines of those turns, and every line of sessions that teach nothing (read as if a
    lesson of a rotating shape were there), so that a line that states nothing general is
    never picked as a lesson."""
    rows: list[list[str]] = []
    ys: list[int] = []
    for n, lab in enumerate(data):
        if not lab.spec["lessons"]:
            shape = C.SHAPES[n % len(C.SHAPES)]
            for u in lab.units:
                for pos, (kind, s) in enumerate(sentences_of(u)):
                    rows.append(sentence_tokens(s, u, shape, pos, kind))
                    ys.append(0)
            continue
        for lesson in lab.spec["lessons"]:
            terms = [t.lower() for t in lesson.get("key_terms") or []]
            for k, u in enumerate(lab.units):
                if lab.turn_of_unit[k] not in (lesson.get("turns") or []):
                    continue
                for pos, (kind, s) in enumerate(sentences_of(u)):
                    rows.append(sentence_tokens(s, u, lesson["shape"], pos, kind))
                    low = s.lower()
                    ys.append(int(any(t in low for t in terms)))
    return rows, ys


def fit_sentences(data: Sequence[C.Labelled], c: float = 2.0) -> HashedLinear:
    from sklearn.linear_model import LogisticRegression

    rows, ys = sentence_rows(data)
    vocab = vocabulary(rows)
    clf = LogisticRegression(C=c, max_iter=400, random_state=SEED)
    clf.fit(sparse_rows(rows, SENT_DIM, vocab), ys)
    return HashedLinear(clf.coef_.T.astype(np.float16), clf.intercept_.astype(np.float32), ("states",), vocab)


def save(units: HashedLinear, sents: HashedLinear, segs: HashedLinear, meta: dict[str, Any],
         path: Path = WEIGHTS) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    gused = np.flatnonzero(np.abs(segs.weight).sum(axis=1))
    # only the non-zero rows are stored: most hashed columns never see a token
    used = np.flatnonzero(np.abs(units.weight).sum(axis=1))
    sused = np.flatnonzero(np.abs(sents.weight).sum(axis=1))
    np.savez_compressed(
        path, unit_rows=used.astype(np.int32), unit_w=units.weight[used], unit_b=units.bias,
        unit_dim=np.int64(units.dim), sent_rows=sused.astype(np.int32), sent_w=sents.weight[sused],
        sent_b=sents.bias, sent_dim=np.int64(sents.dim), seg_rows=gused.astype(np.int32), seg_w=segs.weight[gused],
        seg_b=segs.bias, seg_dim=np.int64(segs.dim),
        unit_vocab=units.vocab, sent_vocab=sents.vocab, seg_vocab=segs.vocab,
        meta=np.frombuffer(json.dumps({**meta, "classes": list(units.classes)}).encode(), dtype=np.uint8))


def authors(specs: Sequence[dict[str, Any]]) -> list[str]:
    return sorted({s["author"] for s in specs})


def training_specs(specs: Sequence[dict[str, Any]], blind: Sequence[str] = BLIND) -> list[dict[str, Any]]:
    return [s for s in specs if s["author"] not in blind]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=WEIGHTS)
    ap.add_argument("--c", type=float, default=4.0)
    args = ap.parse_args(argv)
    random.seed(SEED)
    np.random.seed(SEED)
    specs = training_specs(C.load())
    t0 = time.perf_counter()
    data = build(specs)
    print(f"{len(specs)} sessions by {len(authors(specs))} authors -> {len(data)} rendered, "
          f"{sum(len(d.units) for d in data)} turns ({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
    units = fit_units(data, args.c)
    sents = fit_sentences(data)
    segs = fit_segments(data)
    save(units, sents, segs, {"sessions": len(specs), "authors": authors(specs), "c": args.c, "seed": SEED,
                        "blind": list(BLIND)}, args.out)
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.2f} MB)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
