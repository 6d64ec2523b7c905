"""Does offline extraction keep the lessons a session teaches, and nothing else, on authors it never saw?

Run from the repository root:

    python benchmarks/lessons.py                       # shipped model on every author, by author
    python benchmarks/lessons.py --cv                  # leave-authors-out (retrains per fold)
    python benchmarks/lessons.py --curve               # learning curve on unseen authors
    python benchmarks/lessons.py --blind               # the blind authors (never trained on)
    python benchmarks/lessons.py --baseline 520602f    # the same sets through another commit, same run
    python benchmarks/lessons.py --shared              # memories kept from ../shared/data, third parties
    python benchmarks/lessons.py --all                 # everything above, with --baseline main's commit

Data: the labelled corpus (``benchmarks/data/lessons/corpus/*.jsonl.gz`` and the four older
splits; its README says who wrote what and how). Each session is rendered in its own
format (:mod:`ultron.testing.transcripts`) and goes the way the pipeline takes it, with
no API key: parsed (:class:`SessionParser`), cut into segments by the rules provider,
each segment scored (``score_trajectory`` plus the labelling-time lesson signal), the
memory gate applied (:mod:`ultron.memory.selection`), memories extracted by the rules
provider and typed by their type hint or the classifier.

A lesson is *kept* when one memory holds at least 60% of its key terms (content + context
+ resolution, case-insensitive); its type is right when the best such memory has the gold
type. Negatives are sessions with no lesson; a memory from one is a false memory, and a
memory from a third party's turn is a third party's wish stored as knowledge.

``--baseline REF`` runs the same evaluation in a subprocess on a git worktree of REF (its
own ``ultron`` package, this script), so both columns come from one run on one machine.
Speed: the median milliseconds per segment of scoring (labelling) and of extraction.
"""

from __future__ import annotations

import argparse
import importlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

CODE_ROOT = Path(os.environ.get("ULTRON_BENCH_CODE") or Path(__file__).resolve().parents[1])
REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED = REPO_ROOT.parent / "shared" / "data"
SHAPES = ("error_fix", "prose_fix", "correction", "preference", "general_lesson", "procedure", "security")
FORMATS = ("openai", "anthropic", "claude_code")
KEY_SHARE = 0.6

if str(CODE_ROOT) not in sys.path:
    sys.path.insert(0, str(CODE_ROOT))


class Pipeline:
    """Parse -> segment -> score -> gate -> extract -> keep, as the services do offline."""

    def __init__(self, gate: bool = True) -> None:
        from ultron.providers import RulesProvider
        from ultron.settings import Settings

        self.provider = RulesProvider()
        self.settings = Settings.from_env({})
        if not gate:      # every segment read: isolates extraction from the trajectory score
            self.settings = Settings.from_env({}, trajectory_memory_score_threshold=0.0)
        from ultron.memory import selection
        self.selection = selection
        try:
            from ultron.learned.lessons import teaches
            self.signals = lambda msgs, task_type: teaches(msgs, task_type)
        except ImportError:   # an older checkout: the rules' own signal
            from ultron.heuristics.extract import lesson_signals
            self.signals = lambda msgs, task_type: lesson_signals(msgs)
        self.score_ms: list[float] = []
        self.extract_ms: list[float] = []
        self.repeats = None

    def index(self, datas: list[bytes]) -> None:
        """Count the harness's repeated opening sentences over a set of sessions, as the
        pipeline counts them over its store: the extractor then reads segments without them."""
        try:
            from ultron.learned.units import RepeatIndex, opening_keys
        except ImportError:       # an older checkout: no harness stripping
            return
        from ultron.sessions.parsing import SessionParser

        counts: dict[int, int] = {}
        for data in datas:
            for k in opening_keys(list(SessionParser().messages(io.BytesIO(data)))):
                counts[k] = counts.get(k, 0) + 1
        self.repeats = RepeatIndex(counts)

    def memories(self, data: bytes) -> list[dict[str, Any]]:
        from ultron.heuristics import score_trajectory
        from ultron.sessions.parsing import SessionParser
        from ultron.trajectory.segmentation import segment_messages

        messages = list(SessionParser().messages(io.BytesIO(data)))
        if not messages:
            return []
        run = segment_messages(messages, self.provider, self.settings.segment_budget_tokens)
        out: list[dict[str, Any]] = []
        try:
            from ultron.heuristics.segmenter import with_closing
        except ImportError:       # an older checkout
            def with_closing(m, following):
                return m
        for span in run.spans:
            following = messages[span.end + 1] if span.end + 1 < len(messages) else None
            msgs = with_closing(messages[span.start:span.end + 1], following)
            t0 = time.perf_counter()
            metrics = score_trajectory(msgs, judge=self.provider.judge(msgs),
                                       judge_weight=self.settings.quality_judge_weight)
            summary = metrics["summary"]
            read = msgs       # what the lesson model reads: the harness's repeated text out
            if self.repeats is not None:
                from ultron.learned.units import strip_repeated
                read = strip_repeated(msgs, self.repeats)
            summary.update(self.signals(read, summary.get("task_type")))
            self.score_ms.append((time.perf_counter() - t0) * 1000)
            if not self.selection.is_extractable(summary, self.settings):
                continue
            t0 = time.perf_counter()
            cands = self.provider.extract_memories(read, summary["task_type"])
            system = next((m.content for m in messages if m.role == "system" and isinstance(m.content, str)), "")
            try:
                keep = self.selection.select(cands, summary, self.settings, msgs, system)
            except TypeError:    # an older checkout: no system-prompt check, or no worth check either
                try:
                    keep = self.selection.select(cands, summary, self.settings, msgs)
                except TypeError:
                    keep = self.selection.select(cands, summary, self.settings)
            for c in keep:
                typ = c.get("type_hint") or self.provider.classify_memory(c["content"], c["context"],
                                                                          c["resolution"], c["tags"])
                out.append({**c, "type": typ, "score": summary["overall_score"], "segment": span.start})
            self.extract_ms.append((time.perf_counter() - t0) * 1000)
        return out


def _transcripts():
    return importlib.import_module("ultron.testing.transcripts")


def key_share(memory: dict[str, Any], terms: list[str]) -> float:
    if not terms:
        return 0.0
    text = " ".join((memory.get(k) or "") for k in ("content", "context", "resolution")).lower()
    return sum(1 for t in terms if t.lower() in text) / len(terms)


def _third_party_hit(memory: dict[str, Any], spec: dict[str, Any]) -> bool:
    """The memory repeats a third party's wish (most of its words)."""
    text = " ".join((memory.get(k) or "") for k in ("content", "resolution")).lower()
    for tp in spec.get("third_party") or []:
        words = [w for w in tp["text"].lower().replace(",", " ").split() if len(w) > 3]
        if words and sum(w in text for w in words) / len(words) >= 0.6:
            return True
    return False


def evaluate(pipe: Pipeline, specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per lesson (and one per negative session)."""
    tr = _transcripts()
    rows = []
    rendered = [tr.render_jsonl(spec, spec.get("format") or "openai").encode("utf-8") for spec in specs]
    pipe.index(rendered)
    for spec, data in zip(specs, rendered):
        mems = pipe.memories(data)
        used: set[int] = set()
        tp = sum(1 for m in mems if _third_party_hit(m, spec))
        if not spec["lessons"]:
            rows.append({"id": spec["id"], "author": spec["author"], "shape": "negative",
                         "negative_kind": spec.get("negative_kind"), "n": len(mems), "kept": False, "type_ok": False,
                         "third_party": tp, "memories": mems, "spec": spec})
            continue
        for les in spec["lessons"]:
            shares = [key_share(m, les.get("key_terms") or []) for m in mems]
            hits = [(s, i) for i, s in enumerate(shares) if s >= KEY_SHARE]
            best = max(hits, key=lambda h: (h[0], mems[h[1]]["confidence"]))[1] if hits else None
            used.update(i for _, i in hits)
            rows.append({"id": spec["id"], "author": spec["author"], "shape": les["shape"], "gold": les["type"],
                         "n": len(mems), "kept": best is not None, "best_share": max(shares, default=0.0),
                         "type_ok": best is not None and mems[best]["type"] == les["type"],
                         "third_party": tp, "memories": mems, "spec": spec, "lesson": les})
        rows[-1]["extra"] = len(mems) - len(used)
    return rows


def figures(rows: list[dict[str, Any]]) -> dict[str, Any]:
    lesson = [r for r in rows if r["shape"] != "negative"]
    neg = [r for r in rows if r["shape"] == "negative"]
    out: dict[str, Any] = {"lessons": len(lesson), "negatives": len(neg)}
    for shape in SHAPES:
        rs = [r for r in lesson if r["shape"] == shape]
        out[f"n_{shape}"] = len(rs)
        out[shape] = sum(r["kept"] for r in rs) / len(rs) if rs else None
    kept = [r for r in lesson if r["kept"]]
    out["recall"] = len(kept) / len(lesson) if lesson else None
    out["type_accuracy"] = sum(r["type_ok"] for r in kept) / len(kept) if kept else None
    out["negative_memories"] = sum(r["n"] for r in neg)
    out["negative_sessions_with_memories"] = sum(1 for r in neg if r["n"])
    failed = [r for r in neg if r.get("negative_kind") == "failed_no_lesson"]
    out["failed_memories"] = sum(r["n"] for r in failed)
    out["failed_sessions"] = len(failed)
    seen: set[str] = set()
    tp = 0
    for r in rows:
        if r["id"] not in seen:
            seen.add(r["id"])
            tp += r["third_party"]
    out["third_party_memories"] = tp
    # why lessons were missed: the session left no memory at all (detection), or memories that
    # carry some but too few of the lesson's key terms (wording), or none of them (another lesson)
    missed = [r for r in lesson if not r["kept"]]
    out["missed_no_memory"] = sum(1 for r in missed if not r["n"])
    out["missed_some_terms"] = sum(1 for r in missed if r["n"] and r["best_share"] > 0)
    out["missed_other_memory"] = sum(1 for r in missed if r["n"] and not r["best_share"])
    extra = [r.get("extra", 0) for r in lesson if "extra" in r]
    out["extra_per_session"] = sum(extra) / len(extra) if extra else None
    return out


def _f(x: Any) -> str:
    return "–" if x is None else (f"{x:.2f}" if isinstance(x, float) else str(x))


def print_table(title: str, cols: dict[str, dict[str, Any]]) -> None:
    """Rows are measures, columns are what was measured (this build, a baseline ...)."""
    names = list(cols)
    print(f"\n{title}")
    print(f"  {'measure':<34}" + "".join(f"{n:>16}" for n in names))
    keys = ["recall"] + list(SHAPES) + ["missed_no_memory", "missed_some_terms", "missed_other_memory",
                                        "type_accuracy", "negative_memories", "negative_sessions_with_memories",
                                        "failed_memories", "third_party_memories", "extra_per_session",
                                        "lessons", "negatives", "score_ms_p50", "extract_ms_p50"]
    for k in keys:
        if not any(k in c for c in cols.values()):
            continue
        label = k if k not in SHAPES else f"  recall {k} (n={cols[names[0]].get('n_' + k, '?')})"
        print(f"  {label:<34}" + "".join(f"{_f(cols[n].get(k)):>16}" for n in names))


def _median(xs: list[float]) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return xs[len(xs) // 2]


def run_specs(specs: list[dict[str, Any]], gate: bool = True) -> dict[str, Any]:
    pipe = Pipeline(gate=gate)
    rows = evaluate(pipe, specs)
    out = figures(rows)
    out["score_ms_p50"] = _median(pipe.score_ms)
    out["extract_ms_p50"] = _median(pipe.extract_ms)
    out["_rows"] = rows
    return out


# -- corpus, folds, retraining ------------------------------------------------------------
def load_corpus() -> list[dict[str, Any]]:
    sys.path.insert(0, str(REPO_ROOT))       # the corpus loader of this tree, whatever CODE_ROOT is
    from ultron.learned import corpus
    return corpus.load()


def blind_authors() -> tuple[str, ...]:
    from ultron.learned.train import BLIND
    return BLIND


def folds(authors: list[str], k: int) -> list[list[str]]:
    """Authors dealt round-robin into ``k`` groups (sorted names: the same folds every run)."""
    out: list[list[str]] = [[] for _ in range(k)]
    for i, a in enumerate(sorted(authors)):
        out[i % k].append(a)
    return [f for f in out if f]


def fitted(train_specs: list[dict[str, Any]]):
    from ultron.learned import train
    from ultron.learned.lessons import LessonModel

    data = train.build(train_specs)
    return LessonModel(train.fit_units(data), train.fit_sentences(data), train.fit_segments(data), {})


def cross_validate(specs: list[dict[str, Any]], k: int, thresholds: list[str]) -> dict[str, dict[str, Any]]:
    """Leave-authors-out: each fold's model never saw the authors it is measured on. Every
    threshold pair "turn/segment" is measured on the same folds (the first is the shipped one)."""
    from ultron.learned import lessons

    blind = set(blind_authors())
    pool = [s for s in specs if s["author"] not in blind]
    rows: dict[str, list[dict[str, Any]]] = {t: [] for t in thresholds}
    shipped = lessons.UNIT_THRESHOLD, lessons.SEGMENT_THRESHOLD
    for held in folds(sorted({s["author"] for s in pool}), k):
        lessons.use_model(fitted([s for s in pool if s["author"] not in held]))
        try:
            for t in thresholds:
                lessons.UNIT_THRESHOLD, lessons.SEGMENT_THRESHOLD = (float(x) for x in t.split("/"))
                rows[t].extend(run_specs([s for s in pool if s["author"] in held])["_rows"])
        finally:
            lessons.use_model(None)
            lessons.UNIT_THRESHOLD, lessons.SEGMENT_THRESHOLD = shipped
    out = {}
    for t in thresholds:
        out[t] = figures(rows[t])
        out[t]["_per_author"] = {a: figures([r for r in rows[t] if r["author"] == a])
                                 for a in sorted({r["author"] for r in rows[t]})}
    return out


def learning_curve(specs: list[dict[str, Any]], sizes: list[int], test_authors: int = 4) -> list[tuple[int, dict]]:
    """Recall on a fixed group of unseen authors, training on growing random subsets of the rest."""
    import random

    from ultron.learned import lessons

    blind = set(blind_authors())
    pool = [s for s in specs if s["author"] not in blind]
    authors = sorted({s["author"] for s in pool})
    new = [a for a in authors if not a.startswith("legacy-")]
    held = (new or authors)[-test_authors:]
    test = [s for s in pool if s["author"] in held]
    train_pool = [s for s in pool if s["author"] not in held]
    random.Random(7).shuffle(train_pool)
    out = []
    sizes = sorted({min(n, len(train_pool)) for n in sizes})   # the last point: every session there is
    for n in sizes:
        lessons.use_model(fitted(train_pool[:n]))
        try:
            out.append((n, run_specs(test)))
        finally:
            lessons.use_model(None)
    print(f"  (test authors: {', '.join(held)}; {len(test)} sessions)")
    return out


# -- a baseline commit in a subprocess ----------------------------------------------------
def baseline(ref: str, named_sets: dict[str, list[dict[str, Any]]], gate: bool = True) -> dict[str, dict[str, Any]]:
    tree = Path(tempfile.mkdtemp(prefix="ultron-baseline-"))
    subprocess.run(["git", "-C", str(REPO_ROOT), "worktree", "add", "--detach", str(tree), ref], check=True,
                   capture_output=True)
    try:
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
            json.dump(named_sets, fh)
        out = subprocess.run([sys.executable, __file__, "--eval-sets", fh.name] + ([] if gate else ["--no-gate"]),
                             env={**os.environ, "ULTRON_BENCH_CODE": str(tree)}, check=True,
                             capture_output=True, text=True)
        return json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        subprocess.run(["git", "-C", str(REPO_ROOT), "worktree", "remove", "--force", str(tree)], check=False,
                       capture_output=True)


def eval_sets(path: str, gate: bool) -> None:
    sets = json.loads(Path(path).read_text())
    res = {}
    for name, specs in sets.items():
        f = run_specs(specs, gate)
        f.pop("_rows")
        res[name] = f
    print(json.dumps(res))


# -- ../shared/data -----------------------------------------------------------------------
def shared(pipe: Pipeline, show: bool, dump: str | None = None) -> dict[str, Any]:
    """Memories kept from ../shared/data and examples/ (``dump``: one JSON line per memory, with
    its source file, for a blind review)."""
    if not SHARED.is_dir():
        print("\n../shared/data is absent: shared-data memories skipped")
        return {}
    tau_prefs = tau_total = 0
    files = sorted(SHARED.glob("claude-code/*.jsonl")) + sorted(SHARED.glob("tau-airline-dev/*.jsonl")) \
        + sorted((REPO_ROOT / "examples").glob("*.jsonl"))
    out = open(dump, "w", encoding="utf-8") if dump else None
    if show:
        print("\nMemories kept from ../shared/data (type, confidence, content | resolution)")
    counts: dict[str, int] = defaultdict(int)
    pipe.index([path.read_bytes() for path in files])
    for path in files:
        mems = pipe.memories(path.read_bytes())
        counts[path.parent.name] += len(mems)
        for m in mems if out else ():
            out.write(json.dumps({"source": str(path.resolve()), "type": m["type"], "content": m["content"],
                                  "context": m["context"], "resolution": m["resolution"]}) + "\n")
        if path.parent.name == "tau-airline-dev":
            tau_total += len(mems)
            tau_prefs += sum(1 for m in mems if m["type"] == "preference")
        if show and mems:
            print(f"\n{path.parent.name}/{path.name}: {len(mems)} memories")
            for m in mems[:6]:
                print(f"  * {m['type']:<10} {m['confidence']:.2f} {m['content'][:120]!r}")
                if m["resolution"]:
                    print(f"      | {m['resolution'][:160]!r}")
    if out:
        out.close()
    return {"claude_code_memories": counts["claude-code"], "examples_memories": counts["examples"],
            "tau_memories": tau_total,
            "tau_third_party_preferences": tau_prefs}


def auroc_unseen_tasks() -> None:
    """The trajectory score against real reward, leave-task-out (benchmarks/quality_auroc.py)."""
    path = REPO_ROOT / "benchmarks" / "quality_auroc.py"
    if not SHARED.is_dir():
        return
    out = subprocess.run([sys.executable, str(path), "--bootstrap", "200"], capture_output=True, text=True,
                         env={**os.environ, "ULTRON_BENCH_CODE": str(CODE_ROOT)})
    lines = [ln for ln in out.stdout.splitlines() if ln.strip().startswith(("AUROC", "combination", "shipped"))][:6]
    print("\nTrajectory score vs real reward (benchmarks/quality_auroc.py, excerpt):")
    print("\n".join("  " + ln for ln in lines))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cv", action="store_true", help="leave-authors-out cross-validation (retrains)")
    ap.add_argument("--folds", type=int, default=6)
    ap.add_argument("--thresholds", help="with --cv: also measure these turn/segment thresholds, e.g. 0.6/0.4,0.5/0.5")
    ap.add_argument("--curve", action="store_true", help="learning curve on unseen authors")
    ap.add_argument("--blind", action="store_true", help="the blind authors, once")
    ap.add_argument("--baseline", metavar="REF", help="also measure this commit, in the same run")
    ap.add_argument("--shared", action="store_true", help="memories kept from ../shared/data")
    ap.add_argument("--show", action="store_true", help="print the shared-data memories")
    ap.add_argument("--dump", metavar="FILE", help="with --shared: write the memories as JSON lines for review")
    ap.add_argument("--show-misses", metavar="AUTHOR", help="print an author's misses and false memories")
    ap.add_argument("--all", action="store_true")
    ap.add_argument("--no-gate", action="store_true", help="read every segment, whatever its score")
    ap.add_argument("--eval-sets", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.eval_sets:
        eval_sets(args.eval_sets, not args.no_gate)
        return 0
    if args.all:
        args.cv = args.curve = args.blind = args.shared = True
    from benchmarks._support import machine_line

    print(machine_line())
    if os.environ.get("ULTRON_BENCH_CODE"):
        # measuring another tree (a baseline): only ../shared/data, whose reading needs no corpus loader
        if args.shared:
            print(f"\n../shared/data: {shared(Pipeline(gate=not args.no_gate), args.show, args.dump)}")
        return 0
    specs = load_corpus()
    blind = set(blind_authors())
    seen = [s for s in specs if s["author"] not in blind]
    authors = sorted({s["author"] for s in seen})
    print(f"corpus: {len(specs)} sessions by {len({s['author'] for s in specs})} authors "
          f"({len(seen)} by {len(authors)} non-blind authors; blind: {', '.join(sorted(blind))})")

    sets: dict[str, list[dict[str, Any]]] = {"seen authors (in-sample)": seen}
    if args.blind:
        sets["blind authors"] = [s for s in specs if s["author"] in blind]
    this = {name: run_specs(ss, not args.no_gate) for name, ss in sets.items()}
    base = baseline(args.baseline, sets, not args.no_gate) if args.baseline else {}
    for name in sets:
        cols = {"this build": this[name]}
        if name in base:
            cols[f"{args.baseline[:10]}"] = base[name]
        print_table(f"{name}: {len(sets[name])} sessions", cols)
    if args.show_misses:
        for r in this["seen authors (in-sample)"]["_rows"] + this.get("blind authors", {}).get("_rows", []):
            if r["author"] != args.show_misses or (r["shape"] != "negative" and r["kept"] and r["type_ok"]) \
                    or (r["shape"] == "negative" and not r["n"]):
                continue
            why = "negative kept" if r["shape"] == "negative" else ("wrong type" if r["kept"] else "missed")
            print(f"\n- {r['id']} [{r['shape']}] {why}: {(r.get('lesson') or {}).get('lesson')}")
            print(f"  key terms {(r.get('lesson') or {}).get('key_terms')}")
            for m in r["memories"][:4]:
                print(f"  * {m['type']} {m['confidence']:.2f} {m['content'][:150]!r} | {m['resolution'][:120]!r}")
    if args.cv:
        from ultron.learned import lessons

        t0 = time.perf_counter()
        shipped = f"{lessons.UNIT_THRESHOLD}/{lessons.SEGMENT_THRESHOLD}"
        extra = [x for x in (args.thresholds or "").split(",") if x and x != shipped]
        cvs = cross_validate(specs, args.folds, [shipped] + extra)
        cv = cvs[shipped]
        print_table(f"leave-authors-out, {args.folds} folds ({time.perf_counter() - t0:.0f} s); "
                    f"columns: turn/segment thresholds", {f"{t} shipped" if t == shipped else t: f
                                                          for t, f in cvs.items()})
        print("\n  per held-out author: recall / type accuracy / memories from negatives")
        for a, f in sorted(cv["_per_author"].items()):
            print(f"  {a:<18} {_f(f['recall']):>6} {_f(f['type_accuracy']):>6} {f['negative_memories']:>4}")
    if args.curve:
        print("\nLearning curve: recall on unseen authors by training sessions")
        for n, f in learning_curve(specs, [150, 300, 600, 1200]):
            print(f"  {n:>5} sessions: recall {_f(f['recall'])}, type accuracy {_f(f['type_accuracy'])}, "
                  f"memories from negatives {f['negative_memories']}")
    if args.shared:
        pipe = Pipeline(gate=not args.no_gate)
        got = shared(pipe, args.show, args.dump)
        print(f"\n../shared/data: {got}")
        auroc_unseen_tasks()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
