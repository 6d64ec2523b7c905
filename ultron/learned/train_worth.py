"""Train the worth check (:mod:`ultron.learned.worth`) from reviewers' verdicts.

    python -m ultron.learned.train_worth            # leave-authors-out figures, then fit and save
    python -m ultron.learned.train_worth --cv-only  # the figures only

Data: ``benchmarks/data/worth/labels.jsonl``. Each line is a memory the pipeline extracted
from a corpus session with a lesson model that never saw the session's author (out of
fold), and the verdict of a reviewer who saw only the rubric and the session (its README
says how it was made). The segment the memory came from is re-read from the corpus
(rendered in the session's format, parsed, cut into segments as the pipeline does), so
the features are computed exactly as at serving time.

A memory counts as worth serving when the reviewer found it useful or marginal and not
harmful. The threshold is the one that, over the leave-authors-out predictions, drops the
most unworthy memories while keeping :data:`KEEP_WORTHY` of the worthy ones: a lesson is
dear, and the lesson benchmark must not drop.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from ultron.learned import corpus
from ultron.learned.worth import FEATURES, SPARED, WEIGHTS, features

LABELS = corpus.REPO_ROOT / "benchmarks" / "data" / "worth" / "labels.jsonl"
KEEP_WORTHY = 0.97
C = 1.0
SEED = 0


#: what a reviewer's verdict must be for a memory to count as worth serving
WORTHY = ("useful", "marginal")


def worthy(row: dict[str, Any]) -> int:
    return int(row["verdict"] in WORTHY and not row.get("harmful"))


def load_labels(path: Path = LABELS) -> list[dict[str, Any]]:
    """The verdicts on the shapes the check reads (the principal's own word is spared)."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in rows if r.get("shape") not in SPARED]


def segment_digests(rows: list[dict[str, Any]]) -> dict[tuple[str, int], Any]:
    """(session, segment start) -> (the segment's Digest, its task type). Each row names the
    segment the pipeline cut (``segment``..``segment_end``, message indices), so the segment is
    read exactly as at serving time; the task type is the first of a candidate's tags."""
    from ultron.heuristics import classify_task_type
    from ultron.heuristics.episodes import Digest

    specs = {s["id"]: s for s in corpus.load()}
    rendered: dict[str, list[Any]] = {}
    out: dict[tuple[str, int], Any] = {}
    for r in rows:
        key = (r["session"], r["segment"])
        if key in out:
            continue
        msgs = rendered.setdefault(r["session"], corpus.render_messages(specs[r["session"]]))
        seg = msgs[r["segment"]:r["segment_end"] + 1]
        out[key] = (Digest(seg), classify_task_type(seg))
    return out


def matrix(rows: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    digests = segment_digests(rows)
    keep = [r for r in rows if (r["session"], r["segment"]) in digests]
    x = np.vstack([features({**r, "tags": [digests[(r["session"], r["segment"])][1]]},
                            digests[(r["session"], r["segment"])][0]) for r in keep])
    y = np.asarray([worthy(r) for r in keep])
    groups = np.asarray([r["author"] for r in keep])
    return x, y, groups


def fit(x: np.ndarray, y: np.ndarray):
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=C, class_weight="balanced", max_iter=2000, random_state=SEED).fit(x, y)


def out_of_fold(x: np.ndarray, y: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Each memory scored by a model that never saw its author."""
    p = np.zeros(len(y))
    for a in sorted(set(groups)):
        test = groups == a
        if len(set(y[~test])) < 2:
            p[test] = y[~test].mean()
            continue
        p[test] = fit(x[~test], y[~test]).predict_proba(x[test])[:, 1]
    return p


def threshold_for(p: np.ndarray, y: np.ndarray, keep: float = KEEP_WORTHY) -> float:
    """The highest threshold that keeps ``keep`` of the worthy memories."""
    good = np.sort(p[y == 1])
    if not len(good):
        return 0.5
    return float(good[int(np.floor((1 - keep) * len(good)))])


def report(p: np.ndarray, y: np.ndarray, t: float) -> dict[str, float]:
    from sklearn.metrics import roc_auc_score

    kept = p >= t
    return {"memories": int(len(y)), "worthy": int(y.sum()), "auroc": float(roc_auc_score(y, p)),
            "threshold": round(t, 3), "worthy_kept": float(kept[y == 1].mean()),
            "unworthy_dropped": float((~kept[y == 0]).mean()),
            "worthy_share_before": float(y.mean()), "worthy_share_after": float(y[kept].mean()) if kept.any() else 0.0}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cv-only", action="store_true")
    ap.add_argument("--out", type=Path, default=WEIGHTS)
    args = ap.parse_args(argv)
    from ultron.learned.train import BLIND

    rows = load_labels()
    x_all, y_all, g_all = matrix(rows)
    blind = np.isin(g_all, BLIND)       # the lesson model's blind authors stay unseen here too
    x, y, groups = x_all[~blind], y_all[~blind], g_all[~blind]
    p = out_of_fold(x, y, groups)
    t = threshold_for(p, y)
    fig = report(p, y, t)
    by_author = defaultdict(list)
    for a, yy, pp in zip(groups, y, p):
        by_author[a].append((yy, pp >= t))
    print("leave-authors-out:", json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in fig.items()}))
    for a in sorted(by_author):
        v = by_author[a]
        bad = [k for yy, k in v if not yy]
        print(f"  {a:<16} n={len(v):>3}  worthy kept {np.mean([k for yy, k in v if yy] or [0]):.2f}"
              f"  unworthy dropped {np.mean([not k for k in bad]) if bad else float('nan'):.2f}")
    m = fit(x, y)
    if blind.any():
        pb = m.predict_proba(x_all[blind])[:, 1]
        fb = report(pb, y_all[blind], t)
        print("blind authors:", json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in fb.items()}))
    if args.cv_only:
        return 0
    data = {"features": list(FEATURES), "coef": [round(float(c), 6) for c in m.coef_[0]],
            "intercept": round(float(m.intercept_[0]), 6), "threshold": round(t, 4),
            "meta": {"trained_on": len(y), "worthy": int(y.sum()), "C": C, "keep_worthy": KEEP_WORTHY,
                     "worthy_verdicts": list(WORTHY),
                     "leave_authors_out": {k: round(v, 4) if isinstance(v, float) else v for k, v in fig.items()}}}
    args.out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
