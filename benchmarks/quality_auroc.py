"""How well the offline quality score separates solved from unsolved tasks, held out by task.

Run from the repository root:

    python benchmarks/quality_auroc.py
    python benchmarks/quality_auroc.py --bootstrap 5000

Data: ../shared/data/tau-airline-dev/ (100 real gpt-4o airline customer-service
trajectories, tasks 0-24 x 4 trials, one session per file, and labels.csv with each
task's real reward). Each whole file is scored with ``score_trajectory`` (offline, no
judge). Held-out figures are *leave-one-task-out*: every fitted part of the model
(:mod:`ultron.heuristics.quality_model`: the per-signal standard deviations, the
intercept and the scale) is refitted on the other 24 tasks and the 4 trials of the
left-out task are scored with that fold's model. Bootstrap intervals resample the 25
tasks with replacement, all trials of a task together.

Printed, as plain tables:

1. AUROC of the shipped scorer in-sample and leave-task-out (95% bootstrap
   interval), next to the old hand-set combination (QUALITY_VERSION 1: weighted mean
   of 12 metric scores, squared; frozen below as ``OLD_WEIGHTS``) and a plain L2
   logistic regression on every metric, both measured in this same run;
2. the shipped constants against a refit on all 100 files, and how far each fitted
   weight moves across the 25 folds;
3. per metric: its weight, its own AUROC, and the leave-task-out AUROC without it;
4. calibration, leave-task-out: a reliability table and precision / recall at the
   thresholds that matter (0.7 memory floor, 0.8 SFT floor), for the shipped model
   and the old combination;
5. sanity scores for small sessions of other task types, and speed.

AUROC is computed by hand (Mann-Whitney with average ranks for ties); only numpy is
needed. If ../shared is absent the script says so and exits 0.
"""

from __future__ import annotations

import argparse
import csv
import json
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

#: QUALITY_VERSION 1, frozen for comparison: hand-set weights, weighted mean of the
#: scored metrics, squared.
OLD_WEIGHTS = {"tool_calls": 0.5, "tool_error_rate": 1.0, "repeated_failures": 1.0, "loops": 1.0,
               "user_frustration": 1.0, "outcome_cues": 1.5, "final_answer": 1.5, "efficiency": 1.0,
               "verbosity": 2.5, "state_changes": 3.0, "request_complexity": 2.0, "policy_events": 3.0}


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


def old_scores(S: np.ndarray, names: list[str]) -> np.ndarray:
    """QUALITY_VERSION 1 from a score matrix (NaN = not scored)."""
    W = np.array([OLD_WEIGHTS.get(k, 0.0) for k in names])
    mask = ~np.isnan(S)
    num = (np.where(mask, S, 0.0) * W).sum(1)
    den = (mask * W).sum(1)
    return np.where(den > 0, num / np.maximum(den, 1e-12), 0.0) ** 2


def logistic(X: np.ndarray, y: np.ndarray, offset=None, l2: float = 1e-3, steps: int = 100) -> np.ndarray:
    """L2-regularised logistic regression by Newton steps; X includes the intercept column
    (first, not penalised). Returns the coefficients."""
    n, k = X.shape
    off = np.zeros(n) if offset is None else offset
    beta = np.zeros(k)
    pen = np.full(k, l2)
    pen[0] = 1e-9
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(X @ beta + off)))
        g = X.T @ (p - y) + pen * beta
        H = X.T @ (X * (p * (1 - p))[:, None]) + np.diag(pen)
        step = np.linalg.solve(H, g)
        beta -= step
        if np.abs(step).max() < 1e-10:
            break
    return beta


class Model:
    """The shipped model's form with its fitted parts as arguments (see quality_model)."""

    def __init__(self, qm, names: list[str]) -> None:
        self.qm = qm
        self.names = names
        self.neutral = np.array([qm.NEUTRAL.get(k, 1.0) for k in names])
        self.fitted = np.array([k in qm.FITTED for k in names])
        self.prior = np.array([qm.PRIOR.get(k, 0.0) for k in names])

    def evidence(self, S: np.ndarray) -> np.ndarray:
        return np.where(np.isnan(S), 0.0, S - self.neutral)

    def fit(self, S: np.ndarray, y: np.ndarray, drop: str | None = None) -> tuple[float, np.ndarray]:
        """(intercept, weight vector) by the documented procedure; ``drop``: one metric left out."""
        E = self.evidence(S)
        use = self.fitted.copy()
        prior = self.prior.copy()
        if drop is not None:
            use[self.names.index(drop)] = False
            prior[self.names.index(drop)] = 0.0
        sd = E[:, use].std(0)
        sd = np.where(sd > 1e-9, sd, 1.0)
        r = (E[:, use] / sd).mean(1)
        a, s = logistic(np.column_stack([np.ones(len(y)), r]), y, offset=E @ prior)
        w = prior.copy()
        w[use] = s / (use.sum() * sd)
        return float(a), w

    def shipped(self) -> tuple[float, np.ndarray]:
        return self.qm.INTERCEPT, np.array([self.qm.WEIGHTS.get(k, 0.0) for k in self.names])

    def predict(self, S: np.ndarray, params: tuple[float, np.ndarray]) -> np.ndarray:
        a, w = params
        return 1.0 / (1.0 + np.exp(-(a + self.evidence(S) @ w)))


def loto(tasks: np.ndarray, fit_predict) -> np.ndarray:
    """Leave-one-task-out predictions: fit_predict(train_mask, test_mask) -> test predictions."""
    out = np.zeros(len(tasks))
    for t in np.unique(tasks):
        test = tasks == t
        out[test] = fit_predict(~test, test)
    return out


def boot_interval(pred, y, tasks, n: int, rng, minus=None) -> tuple[float, float, float]:
    """95% interval of the AUROC (of ``pred`` minus that of ``minus``, paired, when given)
    over task resamples, and the share of resamples where it is > 0."""
    uniq = np.unique(tasks)
    index = {t: np.where(tasks == t)[0] for t in uniq}
    vals = []
    for _ in range(n):
        idx = np.concatenate([index[t] for t in rng.choice(uniq, len(uniq))])
        if 0 < y[idx].sum() < len(idx):
            v = auroc(pred[idx], y[idx])
            vals.append(v - auroc(minus[idx], y[idx]) if minus is not None else v)
    vals = np.array(vals)
    return float(np.percentile(vals, 2.5)), float(np.percentile(vals, 97.5)), float((vals > 0).mean())


def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = lambda cells: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    out = [line(headers), line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    return "\n".join(out)


def calibration_rows(p: np.ndarray, y: np.ndarray) -> tuple[list[list[str]], list[list[str]]]:
    rel = []
    edges = [0.0, 0.2, 0.4, 0.6, 0.7, 0.8, 1.0001]
    for lo, hi in zip(edges[:-1], edges[1:]):
        m = (p >= lo) & (p < hi)
        rel.append([f"[{lo:.1f}, {min(hi, 1.0):.1f}{']' if hi > 1 else ')'}", f"{int(m.sum())}",
                    f"{p[m].mean():.2f}" if m.any() else "-", f"{y[m].mean():.2f}" if m.any() else "-"])
    prec = []
    for t in (0.4, 0.5, 0.6, 0.7, 0.8):
        m = p >= t
        prec.append([f">= {t:.1f}", f"{int(m.sum())}", f"{y[m].mean():.2f}" if m.any() else "-",
                     f"{(m & (y == 1)).sum() / max(1, y.sum()):.2f}"])
    return rel, prec


def sanity_sessions():
    """Small sessions of other task types: (name, messages, expectation)."""
    from ultron.sessions.messages import Message as M

    def call(name, args, cid):
        return M(role="assistant", content="", tool_calls=[
            {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}])

    def res(cid, text, name=None):
        return M(role="tool", content=text, tool_call_id=cid, name=name)

    fix = [M(role="user", content="My script crashes with KeyError: 'id' in app.py, can you fix it?"),
           call("Read", {"file_path": "app.py"}, "c1"), res("c1", "def load(row):\n    return row['id']\n"),
           call("Edit", {"file_path": "app.py", "old_string": "row['id']", "new_string": "row.get('id')"}, "c2"),
           res("c2", "The file app.py has been updated."), call("Bash", {"command": "python -m pytest -q"}, "c3"),
           res("c3", "4 passed in 0.12s"),
           M(role="assistant", content="Fixed: `load` now uses `row.get('id')`; all 4 tests pass.")]
    messy = [fix[0]]
    for i in range(4):
        messy += [call("Bash", {"command": "python app.py"}, f"r{i}"),
                  res(f"r{i}", "Traceback (most recent call last):\nKeyError: 'id'", name="error")]
    messy += [M(role="user", content="No, that's wrong. Why did you just run it again?!"),
              M(role="user", content="THIS IS STILL NOT WORKING"), call("Bash", {"command": "python app.py"}, "r9")]
    data = [M(role="user", content="Load sales.csv with pandas and plot the average price per category."),
            call("python", {"code": "df = pd.read_csv('sales.csv'); df.groupby('cat').price.mean().plot.bar()"}, "d1"),
            res("d1", "<Figure with 6 bars saved to prices.png>"),
            M(role="assistant", content="Here is the bar chart of the average price per category (prices.png)."),
            M(role="user", content="Perfect, thanks!")]
    ops_fail = [M(role="user", content="My docker compose stack won't start: the postgres container exits."),
                call("Bash", {"command": "docker compose up -d"}, "o1"), res("o1", "Error: port 5432 in use", "error"),
                call("Bash", {"command": "docker compose up -d"}, "o2"), res("o2", "Error: port 5432 in use", "error"),
                M(role="assistant", content="I was unable to start the stack; port 5432 is still in use."),
                M(role="user", content="It still doesn't work, I'll figure it out myself.")]
    poem = [M(role="user", content="Write a short poem about autumn rain."),
            M(role="assistant", content="Soft rain on amber leaves,\nthe gutters hum a slow refrain,\n"
                                        "and autumn, patient, grieves."),
            M(role="user", content="Lovely, thank you!")]
    return [("code: fixed, user says it works", fix + [M(role="user", content="It works now, thanks!")], ">= 0.8"),
            ("code: fixed, tests pass, no reply", fix, ">= 0.7"),
            ("code: failing, frustrated, unfinished", messy, "< 0.4"),
            ("data: chart made, user pleased", data, ">= 0.8"),
            ("ops: failed, user gives up", ops_fail, "< 0.4"),
            ("writing: poem, user pleased", poem, ">= 0.8")]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap", type=int, default=2000, help="task-grouped bootstrap resamples")
    args = ap.parse_args(argv)

    print(f"machine: {platform.platform()} | cpus={os.cpu_count()} | python {platform.python_version()}")
    labels_path = DATASET / "labels.csv"
    if not labels_path.exists():
        print(f"no labelled data at {DATASET} (../shared absent); nothing to measure")
        return 0

    from ultron.heuristics import quality_model as qm
    from ultron.heuristics.quality import QUALITY_VERSION, score_trajectory
    from ultron.sessions.parsing import SessionParser

    rows = list(csv.DictReader(open(labels_path, newline="")))
    sessions = []
    for r in rows:
        with open(DATASET / r["file"], "rb") as fh:
            sessions.append(list(SessionParser().messages(fh)))
    y = np.array([1 if float(r["reward"]) >= 0.5 else 0 for r in rows])
    tasks = np.array([r["task_id"] for r in rows])
    rng = np.random.default_rng(SEED)

    t0 = time.perf_counter()
    results = [score_trajectory(msgs) for msgs in sessions]
    elapsed = time.perf_counter() - t0
    n_msgs = sum(len(m) for m in sessions)

    overall = np.array([r["summary"]["overall_score"] for r in results])
    names = [k for k in results[0]["metrics"] if k in qm.WEIGHTS]
    S = np.array([[np.nan if r["metrics"][k]["score"] is None else r["metrics"][k]["score"] for k in names]
                  for r in results])
    model = Model(qm, names)
    assert np.allclose(model.predict(S, model.shipped()), overall, atol=2e-3), "matrix reproduces the scorer"
    old = old_scores(S, names)

    print(f"\ndata: {len(rows)} trajectories, {len(set(tasks))} tasks, {int(y.sum())} solved "
          f"({DATASET.relative_to(SHARED_DATA.parent)}); scorer version {QUALITY_VERSION}")

    # -- 1. discrimination ----------------------------------------------------------------
    p_loto = loto(tasks, lambda tr, te: model.predict(S[te], model.fit(S[tr], y[tr])))
    E = model.evidence(S)

    def full_logistic(tr, te):   # every metric's evidence, L2 on standardised columns
        mu, sd = E[tr].mean(0), E[tr].std(0) + 1e-9
        beta = logistic(np.column_stack([np.ones(tr.sum()), (E[tr] - mu) / sd]), y[tr], l2=1.0)
        return 1.0 / (1.0 + np.exp(-(np.column_stack([np.ones(te.sum()), (E[te] - mu) / sd]) @ beta)))

    p_logreg = loto(tasks, full_logistic)
    disc = []
    for label, ins, held, note in (
            ("shipped (v2, fitted as documented)", overall, p_loto, "refitted per fold"),
            ("old hand-set (v1, frozen)", old, old, "nothing fitted: held-out = in-sample"),
            ("L2 logistic on all metrics", None, p_logreg, "reference: per-metric weights")):
        lo, hi, _ = boot_interval(held, y, tasks, args.bootstrap, rng)
        disc.append([label, f"{auroc(ins, y):.3f}" if ins is not None else "-", f"{auroc(held, y):.3f}",
                     f"{lo:.3f}..{hi:.3f}", note])
    print("\nAUROC vs reward (leave-one-task-out; 95% interval: tasks resampled, "
          f"{args.bootstrap} times)")
    print(table(["combination", "in-sample", "leave-task-out", "95% interval", "note"], disc))
    lo, hi, share = boot_interval(p_loto, y, tasks, args.bootstrap, rng, minus=old)
    print(f"shipped minus old, leave-task-out, paired by task: {auroc(p_loto, y) - auroc(old, y):+.3f} "
          f"(95% {lo:+.3f}..{hi:+.3f}; shipped ahead in {share:.0%} of resamples)")

    # -- 2. constants and their stability ---------------------------------------------------
    a_all, w_all = model.fit(S, y)
    folds = [model.fit(S[tasks != t], y[tasks != t]) for t in np.unique(tasks)]
    fw = np.array([f[1] for f in folds])
    fa = np.array([f[0] for f in folds])
    _, w_ship = model.shipped()
    const_rows = [["INTERCEPT", f"{qm.INTERCEPT:g}", f"{a_all:.3f}", f"{fa.min():.3f}..{fa.max():.3f}"]]
    for i, k in enumerate(names):
        if model.fitted[i]:
            const_rows.append([k, f"{w_ship[i]:g}", f"{w_all[i]:.3f}", f"{fw[:, i].min():.3f}..{fw[:, i].max():.3f}"])
    print("\nfitted constants: shipped vs refit on all 100 files vs range over the 25 leave-one-task-out folds")
    print(table(["constant", "shipped", "refit", "fold range"], const_rows))

    # -- 3. per metric ------------------------------------------------------------------------
    base = auroc(p_loto, y)
    metric_rows = []
    for i, k in enumerate(names):
        col = S[:, i]
        scored = ~np.isnan(col)
        neutral = np.where(scored, col, model.neutral[i])
        without = loto(tasks, lambda tr, te: model.predict(S[te], model.fit(S[tr], y[tr], drop=k)))
        a_wo = auroc(without, y)
        metric_rows.append([k, "fitted" if model.fitted[i] else "prior", f"{w_ship[i]:g}", f"{auroc(neutral, y):.3f}",
                            f"{int(scored.sum())}", f"{a_wo:.3f}", f"{base - a_wo:+.3f}"])
    print("\nper metric (own AUROC with None as its neutral value; leave-task-out AUROC of the model without it)")
    print(table(["metric", "kind", "weight", "own auroc", "n scored", "loto w/o it", "it adds"], metric_rows))

    # -- 4. calibration -------------------------------------------------------------------------
    for label, p in (("shipped v2, leave-task-out", p_loto), ("old v1 (in-sample = held-out)", old)):
        rel, prec = calibration_rows(p, y)
        brier = float(((p - y) ** 2).mean())
        print(f"\ncalibration: {label}  (base rate {y.mean():.2f}, Brier {brier:.3f})")
        print(table(["score bin", "n", "mean score", "solved share"], rel))
        print(table(["threshold", "n at/above", "precision", "recall"], prec))
    outcomes = [r["summary"]["outcome"] for r in results]
    oc_rows = []
    for name, mask in (("solved", y == 1), ("unsolved", y == 0)):
        oc = [o for o, m in zip(outcomes, mask) if m]
        oc_rows.append([name, f"{int(mask.sum())}", f"{overall[mask].mean():.3f}", f"{old[mask].mean():.3f}",
                        f"{oc.count('success')}/{oc.count('unknown')}/{oc.count('failure')}"])
    print("\nshipped scores (in-sample) by label")
    print(table(["label", "n", "mean v2", "mean v1", "v2 success/unknown/failure"], oc_rows))

    # -- 5. other task types and speed --------------------------------------------------------
    san = []
    for label, msgs, want in sanity_sessions():
        out = score_trajectory(msgs)
        o_names = [k for k in out["metrics"] if k in OLD_WEIGHTS]
        o_s = np.array([[np.nan if out["metrics"][k]["score"] is None else out["metrics"][k]["score"] for k in o_names]])
        san.append([label, out["summary"]["task_type"], f"{out['summary']['overall_score']:.3f}",
                    f"{old_scores(o_s, o_names)[0]:.3f}", want])
    print("\nother task types (synthetic sessions)")
    print(table(["session", "task type", "v2", "v1", "expected v2"], san))

    windows = [m[i:i + 20] for m in sessions for i in range(0, len(m), 20) if len(m[i:i + 20]) == 20]
    t1 = time.perf_counter()
    for w in windows:
        score_trajectory(w)
    per_window = (time.perf_counter() - t1) / max(1, len(windows))
    print(f"\nspeed: {len(rows)} files, {n_msgs} messages scored in {elapsed * 1000:.1f} ms "
          f"({elapsed / len(rows) * 1000:.2f} ms per file); {len(windows)} 20-message windows at "
          f"{per_window * 1000:.2f} ms each (one core)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
