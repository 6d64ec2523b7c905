"""How well the offline quality score separates solved from unsolved tasks.

Run from the repository root:

    python benchmarks/quality_auroc.py
    python benchmarks/quality_auroc.py --bootstrap 5000

Data: ../shared/data/tau-airline-dev/ (100 real gpt-4o airline customer-service
trajectories, one session per file, and labels.csv with each task's real reward).
Each whole file is scored with ``score_trajectory`` (offline, no judge) and the
script prints, as plain-text tables:

1. the AUROC of ``overall_score`` against reward (1.0 = solved);
2. for every metric: the AUROC of its score (None counted as a neutral 0.5), the
   AUROC over only the files where it was scored, and the overall AUROC with that
   metric's weight set to 0 (what it adds);
3. held-out estimates. The shipped weights are hand-set, not fitted, so there is no
   fitting step to cross-validate; instead the table gives a task-grouped bootstrap
   interval (tasks resampled with replacement, all trials of a task together) and
   a split-half estimate (random halves of the 25 tasks, AUROC on each half). As a
   reference it also gives the leave-one-task-out AUROC of a logistic regression
   fitted on the metric scores of the other 24 tasks, to show what fitting the
   weights to these 100 files would buy over the hand-set ones;
4. the mean score of solved and unsolved files, the outcome counts, and speed.

AUROC is computed by hand (Mann-Whitney with average ranks for ties); only numpy
is needed. If ../shared is absent the script says so and exits 0.
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
DATASET = SHARED_DATA / "tau-airline-dev"
SEED = 20240611

if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))


def auroc(scores, labels) -> float:
    """Probability that a random positive outranks a random negative (ties count 1/2)."""
    x = np.asarray(scores, dtype=float)
    y = np.asarray(labels, dtype=int)
    n_pos = int(y.sum())
    n_neg = len(y) - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x), dtype=float)
    xs = x[order]
    i = 0
    while i < len(xs):          # average ranks over runs of equal scores
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return float((ranks[y == 1].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def weighted_scores(S: np.ndarray, W: np.ndarray) -> np.ndarray:
    """The scorer's combination (weighted mean over scored metrics, squared) from a score matrix."""
    mask = ~np.isnan(S)
    num = (np.where(mask, S, 0.0) * W).sum(1)
    den = (mask * W).sum(1)
    return np.where(den > 0, num / np.maximum(den, 1e-12), 0.0) ** 2


def fit_logistic(X: np.ndarray, y: np.ndarray, l2: float = 1.0, steps: int = 500) -> tuple[np.ndarray, float]:
    """Plain L2-regularised logistic regression by Newton steps (standardised inputs)."""
    n, k = X.shape
    w = np.zeros(k)
    b = 0.0
    for _ in range(steps):
        z = X @ w + b
        p = 1.0 / (1.0 + np.exp(-z))
        g_w = X.T @ (p - y) + l2 * w
        g_b = float((p - y).sum())
        r = p * (1 - p)
        H = np.zeros((k + 1, k + 1))
        H[:k, :k] = X.T @ (X * r[:, None]) + l2 * np.eye(k)
        H[:k, k] = H[k, :k] = X.T @ r
        H[k, k] = r.sum() + 1e-9
        step = np.linalg.solve(H, np.append(g_w, g_b))
        w -= step[:k]
        b -= step[k]
        if np.abs(step).max() < 1e-8:
            break
    return w, b


def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = lambda cells: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    out = [line(headers), line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap", type=int, default=2000, help="task-grouped bootstrap resamples")
    ap.add_argument("--splits", type=int, default=500, help="random task split-halves")
    args = ap.parse_args(argv)

    print(f"machine: {platform.platform()} | cpus={os.cpu_count()} | python {platform.python_version()}")
    labels_path = DATASET / "labels.csv"
    if not labels_path.exists():
        print(f"no labelled data at {DATASET} (../shared absent); nothing to measure")
        return 0

    from ultron.sessions.parsing import SessionParser
    from ultron.heuristics.quality import QUALITY_VERSION, score_trajectory

    rows = list(csv.DictReader(open(labels_path, newline="")))
    sessions = []
    for r in rows:
        with open(DATASET / r["file"], "rb") as fh:
            sessions.append(list(SessionParser().messages(fh)))
    y = np.array([1 if float(r["reward"]) >= 0.5 else 0 for r in rows])
    tasks = np.array([r["task_id"] for r in rows])

    t0 = time.perf_counter()
    results = [score_trajectory(msgs) for msgs in sessions]
    elapsed = time.perf_counter() - t0
    n_msgs = sum(len(m) for m in sessions)

    overall = np.array([r["summary"]["overall_score"] for r in results])
    names = list(results[0]["metrics"])
    S = np.array([[np.nan if r["metrics"][k]["score"] is None else r["metrics"][k]["score"] for k in names]
                  for r in results])
    W = np.array([results[0]["metrics"][k]["weight"] for k in names])
    # sanity: the matrix reproduces the scorer's own combination
    assert np.allclose(weighted_scores(S, W), overall, atol=2e-3)

    a_all = auroc(overall, y)
    print(f"\ndata: {len(rows)} trajectories, {len(set(tasks))} tasks, {int(y.sum())} solved "
          f"({DATASET.relative_to(SHARED_DATA.parent)}); scorer version {QUALITY_VERSION}; weights hand-set")
    print(f"\nAUROC of overall_score vs reward: {a_all:.3f}   (goal >= 0.75)\n")

    metric_rows = []
    for i, k in enumerate(names):
        col = S[:, i]
        scored = ~np.isnan(col)
        neutral = np.where(scored, col, 0.5)
        only = auroc(col[scored], y[scored]) if scored.any() else float("nan")
        W0 = W.copy()
        W0[i] = 0.0
        drop = auroc(weighted_scores(S, W0), y)
        metric_rows.append([k, f"{W[i]:g}", f"{auroc(neutral, y):.3f}", f"{only:.3f}", f"{int(scored.sum())}",
                            f"{drop:.3f}", f"{drop - a_all:+.3f}"])
    print("per-metric AUROC (score vs reward)")
    print(table(["metric", "weight", "auroc(None=0.5)", "auroc(scored only)", "n scored",
                 "overall w/o it", "delta"], metric_rows))

    # -- held-out estimates ---------------------------------------------------------------
    rng = np.random.default_rng(SEED)
    uniq = np.array(sorted(set(tasks)))
    index = {t: np.where(tasks == t)[0] for t in uniq}
    boots = []
    for _ in range(args.bootstrap):
        idx = np.concatenate([index[t] for t in rng.choice(uniq, len(uniq))])
        if 0 < y[idx].sum() < len(idx):
            boots.append(auroc(overall[idx], y[idx]))
    halves = []
    for _ in range(args.splits):
        perm = rng.permutation(uniq)
        for half in (perm[: len(uniq) // 2], perm[len(uniq) // 2:]):
            idx = np.concatenate([index[t] for t in half])
            if 0 < y[idx].sum() < len(idx):
                halves.append(auroc(overall[idx], y[idx]))
    X = np.where(np.isnan(S), 0.5, S)
    loto = np.zeros(len(y))
    for t in uniq:
        test = tasks == t
        mu = X[~test].mean(0)
        sd = X[~test].std(0) + 1e-9
        w, b = fit_logistic((X[~test] - mu) / sd, y[~test])
        loto[test] = ((X[test] - mu) / sd) @ w + b
    est_rows = [
        ["hand-set weights, all 100 files", f"{a_all:.3f}", "-"],
        [f"task-grouped bootstrap ({len(boots)} resamples)", f"{np.median(boots):.3f}",
         f"95% {np.percentile(boots, 2.5):.3f}..{np.percentile(boots, 97.5):.3f}"],
        [f"split-half by task ({len(halves)} halves)", f"{np.mean(halves):.3f}",
         f"5%..95% {np.percentile(halves, 5):.3f}..{np.percentile(halves, 95):.3f}"],
        ["reference: logistic fit, leave-one-task-out", f"{auroc(loto, y):.3f}", "fitted on 24 tasks per fold"],
    ]
    print("\nheld-out estimates")
    print(table(["estimate", "auroc", "spread"], est_rows))

    # -- calibration and speed ------------------------------------------------------------
    outcomes = [r["summary"]["outcome"] for r in results]
    cal_rows = []
    for name, mask in (("solved", y == 1), ("unsolved", y == 0)):
        sub = overall[mask]
        oc = [o for o, m in zip(outcomes, mask) if m]
        cal_rows.append([name, f"{int(mask.sum())}", f"{sub.mean():.3f}", f"{np.median(sub):.3f}",
                         f"{(sub >= 0.7).mean():.2f}", f"{oc.count('success')}/{oc.count('unknown')}/{oc.count('failure')}"])
    print("\nscores by label")
    print(table(["label", "n", "mean", "median", "share >= 0.7", "success/unknown/failure"], cal_rows))
    print(f"\nspeed: {len(rows)} files, {n_msgs} messages scored in {elapsed * 1000:.1f} ms "
          f"({elapsed / len(rows) * 1000:.2f} ms per file, one core)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
