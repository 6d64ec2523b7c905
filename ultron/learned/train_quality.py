"""Re-derive the trajectory score's constants for work other than customer service.

    python -m ultron.learned.train_quality

The score's customer-service weights were fitted on the 100 real tau-bench airline
trajectories (``benchmarks/quality_auroc.py``, leave-one-task-out). Applied to coding,
data and writing sessions they judged most successful work a failure (a successful
procedure scored 0.5 on average), because a service agent's yardsticks (few state
changes, a closing answer) are not a developer's. This fits three numbers for every
other task type, on the labelled corpus's sessions with their success labels:

    logit = INTERCEPT_OTHER + TRANSFER_OTHER * sum(fitted evidence) + PRIOR_SCALE_OTHER * sum(prior evidence)

(``ultron.heuristics.quality_model``), by logistic regression, validated leave-authors-
out and leave-domain-out. Three parameters on about a thousand sessions cannot memorise
an author; the printout gives the held-out AUROC and the share of successful procedures
that clear the 0.7 memory floor. The customer-service constants are left as fitted on
real rewards; the corpus's customer-service sessions are a cross-check only.
"""

from __future__ import annotations

import sys
from collections import defaultdict

import numpy as np

from ultron.learned import corpus as C


def _auroc(x: np.ndarray, y: np.ndarray) -> float:
    pos, neg = x[y == 1], x[y == 0]
    if not len(pos) or not len(neg):
        return float("nan")
    return float(((pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum())
                 / (len(pos) * len(neg)))


def features(specs):
    from ultron.heuristics import quality_model as qm
    from ultron.heuristics.quality import score_trajectory

    rows = []
    for s in specs:
        if s.get("success") is None:
            continue
        m = score_trajectory(C.render_messages(s))
        tt = m["summary"]["task_type"]
        f1 = sum(w * qm.evidence(k, m["metrics"][k].get("score")) for k, w in qm.FITTED.items() if k in m["metrics"])
        f2 = sum(w * qm.evidence(k, m["metrics"][k].get("score")) for k, w in qm.PRIOR.items() if k in m["metrics"])
        rows.append({"author": s["author"], "domain": s.get("domain", ""), "task": tt, "f1": f1, "f2": f2,
                     "y": int(bool(s["success"])), "shape": C.shape_of(s), "score": m["summary"]["overall_score"]})
    return rows


def fit(rows) -> tuple[float, float, float]:
    from sklearn.linear_model import LogisticRegression

    x = np.array([[r["f1"], r["f2"]] for r in rows])
    y = np.array([r["y"] for r in rows])
    clf = LogisticRegression(C=1.0).fit(x, y)
    return float(clf.intercept_[0]), float(clf.coef_[0, 0]), float(clf.coef_[0, 1])


def predict(rows, params) -> np.ndarray:
    a, t, s = params
    z = np.array([a + t * r["f1"] + s * r["f2"] for r in rows])
    return 1 / (1 + np.exp(-z))


def held_out(rows, key: str) -> np.ndarray:
    out = np.zeros(len(rows))
    groups = sorted({r[key] for r in rows})
    for g in groups:
        tr = [r for r in rows if r[key] != g]
        te = [i for i, r in enumerate(rows) if r[key] == g]
        out[te] = predict([rows[i] for i in te], fit(tr))
    return out


def main() -> int:
    from ultron.learned.train import training_specs

    rows = features(training_specs(C.load(legacy=False)))
    other = [r for r in rows if r["task"] != "customer_service"]
    cs = [r for r in rows if r["task"] == "customer_service"]
    y = np.array([r["y"] for r in other])
    params = fit(other)
    print(f"{len(other)} sessions outside customer service ({y.mean():.0%} succeeded), {len(cs)} in it",
          file=sys.stderr)
    print(f"INTERCEPT_OTHER = {params[0]:.2f}\nTRANSFER_OTHER = {params[1]:.2f}\nPRIOR_SCALE_OTHER = {params[2]:.2f}")
    now = np.array([r["score"] for r in other])
    # main's constants before this fit: the airline intercept, half the fitted weights, full priors
    before = 1 / (1 + np.exp(-np.array([1.3 + 0.5 * r["f1"] + r["f2"] for r in other])))
    loao = held_out(other, "author")
    by_domain = defaultdict(list)
    for r in other:
        by_domain[r["domain"].split()[0].lower() if r["domain"] else "?"].append(r)
    for r in other:
        r["dom"] = r["domain"].split()[0].lower() if r["domain"] else "?"
    lodo = held_out(other, "dom")
    print(f"AUROC vs success: before the fit {_auroc(before, y):.3f}; shipped {_auroc(now, y):.3f}; "
          f"refit leave-authors-out {_auroc(loao, y):.3f}; leave-domain-out {_auroc(lodo, y):.3f}")
    proc = [i for i, r in enumerate(other) if r["shape"] == "procedure" and r["y"]]
    fails = [i for i, r in enumerate(other) if not r["y"]]
    for name, idx in (("successful procedures", proc), ("failed sessions", fails)):
        print(f"{name} >= 0.7: before {sum(before[i] >= 0.7 for i in idx)}/{len(idx)}, shipped "
              f"{sum(now[i] >= 0.7 for i in idx)}/{len(idx)}, refit held out {sum(loao[i] >= 0.7 for i in idx)}/{len(idx)}")
    if cs:
        ycs = np.array([r["y"] for r in cs])
        print(f"customer service (tau-fitted, unchanged): AUROC on the corpus's sessions "
              f"{_auroc(np.array([r['score'] for r in cs]), ycs):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
