"""Task-segmentation benchmark on synthetic multi-task sessions.

Multi-task sessions are built by concatenating 2-4 single-task sessions from the
shared data (../shared/data relative to the repo, or $ULTRON_SHARED_DATA):

* tau-airline-dev/*.jsonl: one customer-service task each; ALL system messages are
  dropped so a boundary cannot be read off a system prompt;
* claude-code/*.jsonl: each whole transcript is one unit.

True boundaries are the 0-based indices of the first message of every unit after
the first. Metrics (over the whole concatenated session):

* boundary precision / recall / F1 with a +-1 message tolerance, each true boundary
  matched at most once (micro-averaged over all sessions);
* Pk with k = half the mean true segment length of that session (mean over sessions,
  and a pooled version).

Conditions: ``mixed`` (any units), ``same_task`` (tau trials of ONE task id: same
topic, the hardest), ``diff_task`` (tau units of distinct task ids), ``windows``
(30-message slices of mixed sessions, which mostly start mid-task, as a sliding
caller would see them). Each also runs with ``###STOP###`` removed from the text
as a robustness check.

Two more conditions come from the labelled lesson corpus (``benchmarks/data/lessons``,
1,342 single-task sessions by 20 independent authors, rendered in their own formats,
system prompts dropped), which nobody tuned the segmenter on: ``corpus`` concatenates 2-4
of them; ``corpus_joined`` does the same, but where a session ends with the person's
turn (a thank-you, a "works now") the next session's request is written into that same
message, as people do ("Thanks, that worked. Now write me a compose file"): the boundary
is that message.

    python benchmarks/segmentation.py [--n 300] [--seed 0]

The table compares the offline segmenter applied to the whole session in one go
(the baseline) with the full pipeline: the seed's sliding-window algorithm with the
rules provider, at the default window budget and at a small one that forces
several overlapping windows per session.

``evaluate(segment_fn, seed=0, n=300)`` takes segment_fn(messages) -> list of
(start, end, topic), 1-based inclusive, over the whole session, so any segmenter
(the rules one, an LLM provider behind sliding windows) can be plugged in.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable, Sequence

from ultron.sessions.messages import Message
from ultron.sessions.parsing import SessionParser

SegmentFn = Callable[[list[Message]], list[tuple[int, int, str]]]
_STOP = re.compile(r"\s*###STOP###\s*")
WINDOW = 30


def default_data_dir() -> Path:
    env = os.environ.get("ULTRON_SHARED_DATA")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[1].parent / "shared" / "data"


def load_units(data_dir: Path | None = None) -> list[dict]:
    """Every single-task unit: {'name', 'kind', 'task', 'messages'} (tau system prompts dropped)."""
    data_dir = Path(data_dir or default_data_dir())
    units = []
    for path in sorted((data_dir / "tau-airline-dev").glob("*.jsonl")):
        with open(path, "rb") as fh:
            msgs = [m for m in SessionParser().messages(fh) if m.role != "system"]
        task = int(re.match(r"task(\d+)", path.stem).group(1))
        units.append({"name": path.name, "kind": "tau", "task": task, "messages": msgs})
    for path in sorted((data_dir / "claude-code").glob("*.jsonl")):
        with open(path, "rb") as fh:
            msgs = [m for m in SessionParser().messages(fh) if m.role != "system"]
        units.append({"name": path.name, "kind": "claude_code", "task": None, "messages": msgs})
    return [u for u in units if u["messages"]]


def corpus_units() -> list[dict]:
    """Every session of the lesson corpus as a unit (system prompts dropped)."""
    root = Path(__file__).resolve().parents[1]
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    from ultron.learned import corpus

    out = []
    for spec in corpus.load():
        msgs = [m for m in corpus.render_messages(spec) if m.role != "system"]
        if msgs:
            out.append({"name": spec["id"], "kind": "corpus", "task": None, "messages": msgs})
    return out


def _joined(picked: list[dict]) -> tuple[list[Message], list[int]]:
    """The units one after another; a unit that ends with the person's turn takes the next
    unit's opening request into that message (the boundary is then that message)."""
    msgs: list[Message] = []
    bounds: list[int] = []
    offset = 0
    for u in picked:
        nxt = list(u["messages"])
        if msgs and msgs[-1].role == "user" and nxt and nxt[0].role == "user" \
                and isinstance(msgs[-1].content, str) and isinstance(nxt[0].content, str):
            last = msgs.pop()
            bounds.append(len(msgs))
            msgs.append(replace(last, content=last.content.rstrip() + " " + nxt[0].content.lstrip()))
            nxt = nxt[1:]
        elif msgs:
            bounds.append(len(msgs))
        msgs.extend(replace(m, line=m.line + offset) for m in nxt)
        offset = msgs[-1].line if msgs else offset
    return msgs, bounds


def build_sessions(units: list[dict], condition: str, n: int, seed: int) -> list[tuple[list[Message], list[int], list[str]]]:
    """n concatenations: (messages, true boundaries (0-based starts after the first), unit names)."""
    rng = random.Random(f"{seed}:{condition}")
    tau = [u for u in units if u["kind"] == "tau"]
    by_task: dict[int, list[dict]] = {}
    for u in tau:
        by_task.setdefault(u["task"], []).append(u)
    out = []
    for _ in range(n):
        k = rng.randint(2, 4)
        if condition == "mixed":
            picked = rng.sample(units, k)
        elif condition == "same_task":
            group = by_task[rng.choice(sorted(by_task))]
            picked = rng.sample(group, min(k, len(group)))
        elif condition == "diff_task":
            picked = [rng.choice(by_task[t]) for t in rng.sample(sorted(by_task), k)]
        elif condition in ("corpus", "corpus_joined"):
            picked = rng.sample(units, k)
            if condition == "corpus_joined":
                msgs, bounds = _joined(picked)
                out.append((msgs, bounds, [u["name"] for u in picked]))
                continue
        elif condition == "windows":
            # a 30-message slice of a mixed session, usually starting mid-task
            msgs, bounds, names = build_sessions(units, "mixed", 1, rng.randrange(1 << 30))[0]
            if len(msgs) > WINDOW:
                start = rng.randrange(0, len(msgs) - WINDOW + 1)
                msgs = msgs[start:start + WINDOW]
                bounds = [b - start for b in bounds if start < b < start + WINDOW]
            out.append((msgs, bounds, names))
            continue
        else:
            raise ValueError(condition)
        msgs: list[Message] = []
        bounds: list[int] = []
        offset = 0
        for u in picked:
            if msgs:
                bounds.append(len(msgs))
            # Lines as if the units were one file: increasing, same-line groups kept.
            msgs.extend(replace(m, line=m.line + offset) for m in u["messages"])
            offset = msgs[-1].line
        out.append((msgs, bounds, [u["name"] for u in picked]))
    return out


def strip_stop(msgs: list[Message]) -> list[Message]:
    out = []
    for m in msgs:
        if m.role == "user" and "###STOP###" in m.content:
            m = replace(m, content=_STOP.sub(" ", m.content).strip() or "Thanks.")
        out.append(m)
    return out


def boundaries_of(tasks: Sequence[tuple[int, int, str]], n: int) -> list[int]:
    """0-based start indices of every task but the first; checks the cover."""
    expected = 1
    for s, e, _ in tasks:
        if s != expected or e < s:
            raise AssertionError(f"not a contiguous cover at {s}-{e}")
        expected = e + 1
    if expected != n + 1:
        raise AssertionError(f"cover ends at {expected - 1}, session has {n}")
    return [s - 1 for s, _, _ in tasks[1:]]


def match(true: list[int], pred: list[int], tol: int = 1) -> int:
    """True positives: each true boundary matched at most once, to the nearest free prediction."""
    free = sorted(pred)
    tp = 0
    for b in sorted(true):
        best = None
        for p in free:
            if abs(p - b) <= tol and (best is None or abs(p - b) < abs(best - b)):
                best = p
        if best is not None:
            free.remove(best)
            tp += 1
    return tp


def pk(true: list[int], pred: list[int], n: int) -> tuple[int, int]:
    """(errors, probes) of Pk with k = half the mean true segment length."""
    starts = [0] + true
    mean_len = n / len(starts)
    k = max(1, round(mean_len / 2))
    ref = _labels(true, n)
    hyp = _labels(pred, n)
    probes = max(0, n - k)
    errors = sum((ref[i] == ref[i + k]) != (hyp[i] == hyp[i + k]) for i in range(probes))
    return errors, probes


def _labels(bounds: list[int], n: int) -> list[int]:
    lab, seg, bs = [], 0, set(bounds)
    for i in range(n):
        if i in bs:
            seg += 1
        lab.append(seg)
    return lab


def score(sessions, segment_fn: SegmentFn) -> dict:
    tp = fp = fn = 0
    pk_sum = 0.0
    pk_err = pk_probes = 0
    exact = 0
    t0 = time.perf_counter()
    for msgs, true, _names in sessions:
        pred = boundaries_of(segment_fn(msgs), len(msgs))
        hit = match(true, pred)
        tp += hit
        fp += len(pred) - hit
        fn += len(true) - hit
        exact += hit == len(true) == len(pred)
        e, p = pk(true, pred, len(msgs))
        pk_err += e
        pk_probes += p
        pk_sum += e / p if p else 0.0
    seconds = time.perf_counter() - t0
    prec = tp / (tp + fp) if tp + fp else 1.0
    rec = tp / (tp + fn) if tp + fn else 1.0
    f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
    return {
        "sessions": len(sessions),
        "messages": sum(len(m) for m, _, _ in sessions),
        "true_boundaries": tp + fn,
        "predicted_boundaries": tp + fp,
        "precision": round(prec, 4),
        "recall": round(rec, 4),
        "f1": round(f1, 4),
        "pk": round(pk_sum / len(sessions), 4) if sessions else 0.0,
        "pk_pooled": round(pk_err / pk_probes, 4) if pk_probes else 0.0,
        "all_boundaries_exact": round(exact / len(sessions), 4) if sessions else 0.0,
        "seconds": round(seconds, 3),
    }


def evaluate(segment_fn: SegmentFn, seed: int = 0, n: int = 300, data_dir: Path | None = None,
             conditions: Sequence[str] = ("mixed", "same_task", "diff_task", "windows"), with_stop_ablation: bool = True) -> dict:
    """Scores of segment_fn on n concatenations per condition (and with ###STOP### removed)."""
    units = load_units(data_dir) if any(not c.startswith("corpus") for c in conditions) else []
    corpus = corpus_units() if any(c.startswith("corpus") for c in conditions) else []
    results = {}
    for cond in conditions:
        sessions = build_sessions(corpus if cond.startswith("corpus") else units, cond, n, seed)
        results[cond] = score(sessions, segment_fn)
        if with_stop_ablation:
            stripped = [(strip_stop(m), b, names) for m, b, names in sessions]
            results[cond + "_no_stop"] = score(stripped, segment_fn)
    return {"seed": seed, "n": n, "units": len(units), "results": results}


def errors(segment_fn: SegmentFn, seed: int = 0, n: int = 300, condition: str = "mixed", limit: int = 20) -> list[dict]:
    """Misses and false alarms, for looking at."""
    units = load_units()
    out = []
    for msgs, true, names in build_sessions(units, condition, n, seed):
        pred = boundaries_of(segment_fn(msgs), len(msgs))
        missed = [b for b in true if not any(abs(p - b) <= 1 for p in pred)]
        extra = [p for p in pred if not any(abs(p - b) <= 1 for b in true)]
        if missed or extra:
            out.append({"names": names, "true": true, "pred": pred, "missed": missed, "extra": extra, "messages": msgs})
        if len(out) >= limit:
            break
    return out


def pipeline(budget_tokens: int) -> SegmentFn:
    """The full algorithm: sliding windows over the session, rules provider, line snapping."""
    from ultron.providers import RulesProvider
    from ultron.trajectory.segmentation import segment_messages

    provider = RulesProvider()

    def run(msgs: list[Message]) -> list[tuple[int, int, str]]:
        return [(s.start + 1, s.end + 1, s.topic) for s in segment_messages(msgs, provider, budget_tokens).spans]

    return run


def main(argv: list[str] | None = None) -> int:
    import platform

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--small-budget", type=int, default=2000, help="window budget (tokens) of the multi-window run")
    args = ap.parse_args(argv)
    if not default_data_dir().is_dir():
        print(f"{default_data_dir()} not found: nothing to measure")
        return 0
    from ultron.heuristics.segmenter import segment_window
    from ultron.settings import Settings

    default_budget = Settings.from_env({}).segment_budget_tokens
    runs = [
        ("whole session, one call (baseline)", segment_window),
        (f"pipeline, {default_budget:,}-token windows", pipeline(default_budget)),
        (f"pipeline, {args.small_budget:,}-token windows", pipeline(args.small_budget)),
    ]
    print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    print(f"data: {default_data_dir()}; {args.n} concatenations of 2-4 single-task sessions per condition, "
          f"seed {args.seed}; F1 with +-1 message tolerance; Pk with k = half the mean segment length\n")
    print(f"{'segmenter':38} {'condition':18} {'P':>6} {'R':>6} {'F1':>6} {'Pk':>6} {'exact':>6} {'secs':>6}")
    for name, fn in runs:
        res = evaluate(fn, seed=args.seed, n=args.n)["results"]
        res.update(evaluate(fn, seed=args.seed, n=args.n, conditions=("corpus", "corpus_joined"),
                            with_stop_ablation=False)["results"])
        for cond, r in res.items():
            print(f"{name:38} {cond:18} {r['precision']:6.3f} {r['recall']:6.3f} {r['f1']:6.3f} {r['pk']:6.3f} "
                  f"{r['all_boundaries_exact']:6.3f} {r['seconds']:6.2f}")
        print()
    print("goal: F1 >= 0.9 offline")
    return 0


if __name__ == "__main__":
    sys.exit(main())
