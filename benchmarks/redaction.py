"""Planted secrets through the full pipeline, and every redactor scored on a generated corpus.

Part 1 (pipeline, needs the embedded PostgreSQL): ingests sessions carrying one secret
of every planted kind (plus an ingest_text note), runs segmentation, labelling,
extraction, tiers, clustering, skill evolution and an SFT export offline, then counts,
for each planted string, the rows of every table and the files under ULTRON_HOME
(SKILL.md, _meta.json, SFT files) that contain it. Everything outside raw_user_uploads
must be 0; the raw archive keeps the original bytes by design. Also prints the redactor's speed on
typical message sizes.

Part 2 (corpus): scores the current redactor and, side by side, the baseline (the
single-file ``ultron/redaction.py`` of revision 56b1a04, loaded from git) on
:mod:`ultron.testing.secret_corpus`: recall per family and per context (a case is
caught when none of its secret substrings is left; a caught case that still shows an
8+ character fragment of a secret is a partial leak, reported apart), the formats
with misses, non-secrets altered, UUIDs (replaced by policy, reported apart), and
throughput over the corpus and over real session text
(/work/shared/data/claude-code/*.jsonl, when present). Targets: recall >= 0.99
overall and >= 0.95 in every family, <= 2% non-secrets altered, throughput no worse
than the baseline. With ``--against REV`` the ``ultron/redaction`` package of that git
revision (e.g. HEAD, before a working-tree change) is scored too, in the same run, and
the cases it and the current redactor disagree on are listed.

    python benchmarks/redaction.py                  # both parts
    python benchmarks/redaction.py --corpus-only    # part 2 only (no database)
    python benchmarks/redaction.py --corpus-only --seed 7 --samples 5
    python benchmarks/redaction.py --corpus-only --against HEAD   # + the committed redactor, and
                                                                  # what the working tree changes

Exit status: 1 when the pipeline leaks or the current redactor misses a corpus target.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _support import machine_line, private_home  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus-only", action="store_true",
                        help="skip the pipeline part (embedded PostgreSQL, slow); score the corpus only")
    parser.add_argument("--seed", type=int, default=0, help="corpus seed (default 0)")
    parser.add_argument("--samples", type=int, default=3, help="samples per format (default 3)")
    parser.add_argument("--against", metavar="REV", default=None,
                        help="also score ultron/redaction/ as of git revision REV (e.g. HEAD, today's main) "
                             "beside the working tree's, in the same run")
    args = parser.parse_args(argv)
    status = 0
    if not args.corpus_only:
        with private_home("ultron-bench-redaction-") as home:
            status = run(home)
        print()
    else:
        print(machine_line())
    return corpus_benchmark(args.seed, args.samples, args.against) or status


def run(home: Path) -> int:
    import sqlalchemy as sa

    from ultron.redaction import get_redactor
    from ultron.sdk import Ultron
    from ultron.settings import Settings
    from ultron.testing.planted import PLANTED, session_rows

    client = Ultron(Settings.from_env(embedding_provider="hash"))
    # Several sessions carrying the same secrets, so memories merge, cluster and crystallise
    # into a skill, and every segment goes to the SFT export: each place text can reach.
    copies = max(client.settings.crystallization_threshold, 3) + 1
    for i in range(copies):
        rows = session_rows()
        rows[0] = {**rows[0], "content": f"(attempt {i + 1}) " + rows[0]["content"]}
        path = home / "inbox" / "bench" / f"secrets-{i}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    client.ingest([home / "inbox" / "bench"], "bench")
    svc = client
    svc.segment_pending_sessions(1000)
    svc.label_pending_segments(1000)
    with client.db.engine.begin() as conn:  # extract regardless of the score: the point is where text goes
        conn.execute(sa.text("UPDATE task_segments SET quality_metrics = jsonb_set(CAST(quality_metrics AS jsonb), "
                             "'{summary,overall_score}', '0.95')::text"))
    extracted = svc.extract_memories_from_segments(1000)
    client.ingest_text(f"Rotate {PLANTED['openai_key']} and tell {PLANTED['email']} (card {PLANTED['credit_card']}).")
    client.run_tier_rebalance()
    clusters = client.run_clustering()
    skills = client.run_skill_evolution()
    export = client.export_sft_dataset(min_quality_score=0.0)
    files = [f for f in home.rglob("*") if f.is_file() and "pgdata" not in f.parts and "inbox" not in f.parts]

    with client.db.engine.connect() as conn:
        tables = conn.execute(sa.text(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' "
            "AND table_type = 'BASE TABLE' ORDER BY 1")).scalars().all()
        rows = []
        for kind, secret in PLANTED.items():
            outside = {t: conn.execute(sa.text(f'SELECT count(*) FROM "{t}" x WHERE position(:s in x::text) > 0'),
                                       {"s": secret}).scalar_one() for t in tables if t != "raw_user_uploads"}
            raw = conn.execute(sa.text("SELECT count(*) FROM raw_user_uploads WHERE position(:s in "
                                       "convert_from(content, 'UTF8')) > 0"), {"s": secret}).scalar_one()
            in_files = [f.relative_to(home).as_posix() for f in files
                        if secret in f.read_text(encoding="utf-8", errors="replace")]
            rows.append((kind, sum(outside.values()) + len(in_files), raw,
                         [t for t, n in outside.items() if n] + in_files))
        memories = conn.execute(sa.text("SELECT count(*) FROM memory_records")).scalar_one()

    print(machine_line())
    print(f"pipeline: {copies} sessions → segment → label → extract "
          f"({sum(r.inserted + r.merged for r in extracted)} memory uploads) + ingest_text → tiers → clusters "
          f"({clusters['clusters']}) → skills ({len(skills['published'])} published) → SFT export "
          f"({export.manifest.get('counts', {}).get('exported', export.manifest.get('counts'))}); "
          f"{memories} memories stored; {len(files)} files under ULTRON_HOME scanned (pgdata and the inbox aside)\n")
    print(f"{'planted kind':16} {'rows/files outside raw':>25} {'raw archive rows':>17}  where")
    for kind, n, raw, where in rows:
        print(f"{kind:16} {n:25} {raw:17}  {', '.join(where) or '-'}")
    leaks = sum(n for _, n, _, _ in rows)
    print(f"\nleaks outside raw_user_uploads: {leaks} (goal 0)")

    redactor = get_redactor()
    samples = {
        "short message (60 B)": "Thanks, that worked. Now can you write me a docker compose file?",
        "tool output (1 KB)": "Ran 12 tests in 0.31s; file src/app/dates.py updated; cache at /var/cache/app. " * 12,
        "secret-dense (1 KB)": " ".join(PLANTED.values()) * 2,
    }
    print(f"\n{'redactor speed':24} {'ms per text':>12}")
    for name, text in samples.items():
        times = []
        for _ in range(200):
            t = time.perf_counter()
            redactor.redact(text)
            times.append(time.perf_counter() - t)
        print(f"{name:24} {statistics.median(times) * 1e3:12.3f}")
    return 0 if leaks == 0 else 1


# ============================================================================ corpus section

REPO = Path(__file__).resolve().parents[1]
BASELINE_REV = "56b1a04"
SESSION_DIR = Path("/work/shared/data/claude-code")
FRAGMENT = 8  # a surviving run of this many characters of a secret is a partial leak
TARGET_RECALL, TARGET_FAMILY_RECALL, TARGET_ALTERED = 0.99, 0.95, 0.02
SPEED_TOLERANCE = 0.9  # "no worse than baseline", allowing 10% of timing noise


def load_baseline() -> Any:
    """The redaction module of BASELINE_REV, imported by path (it needs only ultron.settings)."""
    src = subprocess.run(["git", "-C", str(REPO), "show", f"{BASELINE_REV}:ultron/redaction.py"],
                         check=True, capture_output=True, text=True).stdout
    with tempfile.TemporaryDirectory(prefix="ultron-redaction-baseline-") as tmp:
        path = Path(tmp) / "ultron_redaction_baseline.py"
        path.write_text(src)
        spec = importlib.util.spec_from_file_location("ultron_redaction_baseline", path)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
        spec.loader.exec_module(module)
    return module


def load_revision(rev: str) -> Any:
    """The ``ultron.redaction`` package of git revision ``rev`` (e.g. ``HEAD``: today's main,
    to compare a working-tree change with in the same run), imported from a temporary copy
    under its own name so that it lives beside the current one."""
    listing = subprocess.run(["git", "-C", str(REPO), "ls-tree", "--name-only", f"{rev}:ultron/redaction"],
                             check=True, capture_output=True, text=True).stdout.split()
    name = "ultron_redaction_" + "".join(c if c.isalnum() else "_" for c in rev).lower()
    tmp = Path(tempfile.mkdtemp(prefix="ultron-redaction-rev-"))
    package = tmp / name
    package.mkdir()
    for file in listing:
        if file.endswith(".py"):
            src = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:ultron/redaction/{file}"],
                                 check=True, capture_output=True, text=True).stdout
            (package / file).write_text(src.replace("ultron.redaction", name))
    sys.path.insert(0, str(tmp))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(tmp))


def session_texts() -> list[str]:
    """Every message content string of the shared Claude Code sessions (text, tool input, tool result)."""
    out: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, str):
            if node.strip():
                out.append(node)
        elif isinstance(node, list):
            for item in node:
                walk(item)
        elif isinstance(node, dict):
            for key in ("text", "content", "thinking"):
                if key in node:
                    walk(node[key])
            if "input" in node:
                out.append(json.dumps(node["input"], ensure_ascii=False))

    for path in sorted(SESSION_DIR.glob("*.jsonl")) if SESSION_DIR.is_dir() else []:
        for line in path.read_text(errors="replace").splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            message = row.get("message") if isinstance(row, dict) else None
            if isinstance(message, dict):
                walk(message.get("content"))
    return out


def leak_status(case: Any, output: str) -> str:
    """'missed' (a whole secret is left), 'partial' (an 8+ character piece of one is left) or 'caught'."""
    if any(secret in output for secret in case.secrets):
        return "missed"
    background = case.text
    for secret in case.secrets:
        background = background.replace(secret, "\0")
    for secret in case.secrets:
        for i in range(len(secret) - FRAGMENT + 1):
            piece = secret[i:i + FRAGMENT]
            if any(piece in p for p in case.public) or piece in background:
                continue  # the format's fixed prefix, or text that is there anyway
            if piece in output:
                return "partial"
    return "caught"


@dataclass
class Result:
    label: str
    status: list[str] = field(default_factory=list)          # per secret case
    outputs: list[str] = field(default_factory=list)
    altered: list[tuple[Any, str]] = field(default_factory=list)  # (non-secret case, output)
    uuid: Counter = field(default_factory=Counter)
    corpus_kbps: float = 0.0
    session_kbps: float | None = None

    def recall(self, idx: list[int]) -> float:
        return sum(self.status[i] != "missed" for i in idx) / len(idx) if idx else float("nan")


def _time_all(redact: Callable[[str], str], texts: list[str], repeats: int) -> float:
    """Median seconds to redact every text once."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for text in texts:
            redact(text)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def score(label: str, redact: Callable[[str], str], corpus: Any, session: list[str]) -> Result:
    res = Result(label)
    redact("warm-up: token ghp_000 and mail a@b.example")
    for case in corpus.secrets:
        out = redact(case.text)
        res.outputs.append(out)
        res.status.append(leak_status(case, out))
    for case in corpus.non_secrets:
        out = redact(case.text)
        if out != case.expected:
            res.altered.append((case, out))
    for case in corpus.uuids:
        out = redact(case.text)
        res.uuid["replaced by <UUID>" if out == case.expected else "left unchanged" if out == case.text
                  else "changed otherwise"] += 1
    texts = list(corpus.texts())
    size = sum(len(t.encode()) for t in texts)
    res.corpus_kbps = size / 1024 / _time_all(redact, texts, 3)
    if session:
        ssize = sum(len(t.encode()) for t in session)
        res.session_kbps = ssize / 1024 / _time_all(redact, session, 2)
    return res


def _diff(before: str, after: str, pad: int = 30) -> str:
    """The changed part of a text with some context around it."""
    if len(before) <= 110 and len(after) <= 110:
        return f"{before!r} -> {after!r}"
    i = 0
    while i < min(len(before), len(after)) and before[i] == after[i]:
        i += 1
    j = 0
    while j < min(len(before), len(after)) - i and before[-1 - j] == after[-1 - j]:
        j += 1
    lo = max(0, i - pad)
    b, a = before[lo:len(before) - j + pad], after[lo:len(after) - j + pad]
    cut = lambda s: s if len(s) <= 100 else s[:100] + "…"  # noqa: E731
    return f"{'…' if lo else ''}{cut(b)!r} -> {cut(a)!r}"


def _mark(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def corpus_benchmark(seed: int, samples: int, against: str | None = None) -> int:
    from ultron.testing.secret_corpus import FAMILIES, FORMATS, generate

    corpus = generate(seed=seed, samples_per_format=samples)
    session = session_texts()
    texts = list(corpus.texts())
    print(f"\n=== secret corpus: seed {seed}, {len(FORMATS)} formats x {samples} samples = {len(corpus.secrets)} "
          f"secret cases, {len(corpus.non_secrets)} non-secrets, {len(corpus.uuids)} UUID lines "
          f"({sum(len(t.encode()) for t in texts) / 1024:.0f} KB)")
    print(f"session text: {len(session)} message contents, {sum(len(t.encode()) for t in session) / 1024:.0f} KB "
          f"from {SESSION_DIR}" if session else f"session text: none ({SESSION_DIR} missing), throughput line skipped")

    try:
        baseline_mod = load_baseline()
        baseline = score(f"baseline {BASELINE_REV}", baseline_mod.get_redactor().redact, corpus, session)
    except Exception as exc:  # noqa: BLE001 - the current redactor is still scored
        print(f"baseline {BASELINE_REV} could not be loaded: {type(exc).__name__}: {exc}")
        baseline = None
    other = None
    if against:
        try:
            rev_mod = load_revision(against)
            other = score(against, rev_mod.get_redactor().redact, corpus, session)
        except Exception as exc:  # noqa: BLE001 - the others are still scored
            print(f"ultron/redaction at {against} could not be loaded: {type(exc).__name__}: {exc}")
    try:
        from ultron.redaction import get_redactor

        current = score("current", get_redactor().redact, corpus, session)
    except Exception as exc:  # noqa: BLE001 - e.g. the package is being edited; the baseline is still shown
        print(f"current redactor could not be loaded or run: {type(exc).__name__}: {exc}")
        current = None
    runs = [r for r in (baseline, other, current) if r]
    if not runs:
        return 1
    main_run = current or baseline  # the run the detail tables describe
    who = main_run.label

    by_family: dict[str, list[int]] = defaultdict(list)
    by_context: dict[str, list[int]] = defaultdict(list)
    for i, case in enumerate(corpus.secrets):
        by_family[case.family].append(i)
        by_context[case.context].append(i)
    every = list(range(len(corpus.secrets)))

    def cols(values: list[str]) -> str:
        return "".join(f"{v:>11}" for v in values)

    header = cols([r.label.split()[0] for r in runs])
    print(f"\n{'recall by family':20}{'formats':>8}{'cases':>7}{header}{'partial':>9}  target")
    n_formats = Counter(f.family for f in FORMATS)
    for fam in FAMILIES:
        idx = by_family.get(fam, [])
        vals = [f"{r.recall(idx):.3f}" for r in runs]
        partial = sum(main_run.status[i] == "partial" for i in idx)
        ok = main_run.recall(idx) >= TARGET_FAMILY_RECALL
        print(f"{fam:20}{n_formats[fam]:8}{len(idx):7}{cols(vals)}{partial:9}  >= {TARGET_FAMILY_RECALL:.2f} "
              f"{_mark(ok)}")
    vals = [f"{r.recall(every):.3f}" for r in runs]
    partial = sum(s == "partial" for s in main_run.status)
    print(f"{'overall':20}{len(FORMATS):8}{len(every):7}{cols(vals)}{partial:9}  >= {TARGET_RECALL:.2f} "
          f"{_mark(main_run.recall(every) >= TARGET_RECALL)}")
    print(f"(recall: no whole secret left; partial: {who}, caught but a piece of {FRAGMENT}+ characters "
          "of the secret is left)")

    print(f"\n{'recall by context':20}{'cases':>7}{header}")
    for ctx in sorted(by_context, key=lambda c: -len(by_context[c])):
        idx = by_context[ctx]
        print(f"{ctx:20}{len(idx):7}{cols([f'{r.recall(idx):.3f}' for r in runs])}")

    # formats with misses, with the baseline's count beside
    missed: dict[str, list[str]] = defaultdict(list)
    base_missed: Counter = Counter()
    family_of = {f.name: f.family for f in FORMATS}
    total_of: Counter = Counter(c.format for c in corpus.secrets)
    for i, case in enumerate(corpus.secrets):
        if main_run.status[i] == "missed":
            missed[case.format].append(case.context)
        if baseline and baseline.status[i] == "missed":
            base_missed[case.format] += 1
    rows = sorted(missed.items(), key=lambda kv: (FAMILIES.index(family_of[kv[0]]), kv[0]))
    print(f"\nformats with misses ({who}): {len(rows)} of {len(FORMATS)}"
          + (f"; the baseline has misses in {len(base_missed)}" if baseline and main_run is not baseline else ""))
    if rows:
        print(f"{'format':38}{'family':19}{'missed':>7}{'baseline':>9}  contexts missed ({who})")
        for name, ctxs in rows[:40]:
            bm = f"{base_missed[name]}/{total_of[name]}" if baseline else "-"
            print(f"{name:38}{family_of[name]:19}{len(ctxs):>4}/{total_of[name]:<2}{bm:>9}  "
                  f"{', '.join(sorted(set(ctxs)))}")
        if len(rows) > 40:
            print(f"... and {len(rows) - 40} more formats with misses")

    if other and current:
        # what the working tree changes against REV, case by case
        gained = [i for i in every if other.status[i] == "missed" and current.status[i] != "missed"]
        lost = [i for i in every if other.status[i] != "missed" and current.status[i] == "missed"]
        print(f"\nagainst {other.label}: {len(gained)} secret cases caught now and missed there, "
              f"{len(lost)} missed now and caught there")
        for label, idx in (("caught now", gained), ("missed now", lost)):
            fams = Counter(corpus.secrets[i].family for i in idx)
            fmts = Counter(corpus.secrets[i].format for i in idx)
            if idx:
                print(f"  {label}: by family " + ", ".join(f"{k} {v}" for k, v in fams.most_common())
                      + "; by format " + ", ".join(f"{k} {v}" for k, v in fmts.most_common(30)))
        before = {case.text for case, _ in other.altered}
        newly = [(case, out) for case, out in current.altered if case.text not in before]
        print(f"  non-secrets altered now and not there: {len(newly)}")
        for case, out in newly[:20]:
            print(f"    [{case.category}] {_diff(case.text, out)}")

    partial_rows = [(corpus.secrets[i], main_run.outputs[i]) for i, s in enumerate(main_run.status) if s == "partial"]
    if partial_rows:
        print(f"\npartial leaks ({who}), up to 10 of {len(partial_rows)}:")
        for case, out in partial_rows[:10]:
            print(f"  {case.format} [{case.context}]: {_diff(case.text, out)}")

    n_ns = len(corpus.non_secrets)
    print(f"\n{'non-secrets altered':20}{'count':>7}{'share':>8}  target <= {TARGET_ALTERED:.0%}")
    for r in runs:
        share = len(r.altered) / n_ns
        print(f"{r.label:20}{len(r.altered):7}{share:8.1%}  {_mark(share <= TARGET_ALTERED)}")
    cats = Counter(case.category for case, _ in main_run.altered)
    if cats:
        print(f"{who}, by category: " + ", ".join(f"{k} {v}" for k, v in cats.most_common()))
        print(f"examples ({who}), up to 20 of {len(main_run.altered)}:")
        for case, out in main_run.altered[:20]:
            print(f"  [{case.category}] {_diff(case.text, out)}")

    print(f"\nUUID lines ({len(corpus.uuids)}, replaced by policy):")
    for r in runs:
        print(f"  {r.label:20} " + ", ".join(f"{k} {r.uuid[k]}" for k in
                                               ("replaced by <UUID>", "left unchanged", "changed otherwise")))

    print(f"\n{'throughput (KB/s)':20}" + cols([r.label.split()[0] for r in runs]) + "  target")
    speed_ok = True
    for key, name in (("corpus_kbps", "corpus text"), ("session_kbps", "session text")):
        values = [getattr(r, key) for r in runs]
        if any(v is None for v in values):
            print(f"{name:20}  (skipped: no session files)")
            continue
        line = f"{name:20}" + cols([f"{v:.0f}" for v in values])
        if baseline and current:
            ratio = getattr(current, key) / getattr(baseline, key)
            ok = ratio >= SPEED_TOLERANCE
            speed_ok &= ok
            line += f"  >= baseline: x{ratio:.2f} {_mark(ok)}"
        print(line)

    overall_ok = main_run.recall(every) >= TARGET_RECALL
    families_ok = all(main_run.recall(by_family[f]) >= TARGET_FAMILY_RECALL for f in FAMILIES if by_family[f])
    altered_ok = len(main_run.altered) / n_ns <= TARGET_ALTERED
    print(f"\ntargets ({who}): recall overall {_mark(overall_ok)}, every family {_mark(families_ok)}, "
          f"non-secrets altered {_mark(altered_ok)}, throughput "
          f"{_mark(speed_ok) if baseline and current else 'n/a'}")
    return 0 if current and overall_ok and families_ok and altered_ok and speed_ok else 1

if __name__ == "__main__":
    sys.exit(main())
