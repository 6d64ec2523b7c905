"""Offline throughput: sessions segmented and scored per second (rules provider).

Builds N sessions of about 25 messages (copies of the tau-airline sessions in
../shared/data, each under its own path; synthetic ones if ../shared is absent),
ingests them into a private ULTRON_HOME, then times the two steps the issue
targets through the real service and database: segment_pending_sessions and
label_pending_segments. Goal: 1,000 sessions in under 60 s on 2 cores. The same
work without the database (pure segmentation + scoring) is the baseline.

    python benchmarks/trajectory_throughput.py [--sessions 1000]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _support import machine_line, private_home  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TAU = ROOT.parent / "shared" / "data" / "tau-airline-dev"


def synthetic_session(rng: random.Random) -> list[dict]:
    rows = [{"role": "system", "content": "You are a helpful support agent."}]
    for turn in range(12):
        rows.append({"role": "user", "content": f"Please check order {rng.randint(1000, 9999)} and update the address."})
        if turn % 3 == 0:
            rows.append({"role": "assistant", "content": None, "tool_calls": [{"id": f"c{turn}", "type": "function",
                         "function": {"name": "get_order", "arguments": json.dumps({"id": turn})}}]})
            rows.append({"role": "tool", "tool_call_id": f"c{turn}", "content": json.dumps({"status": "ok"})})
        rows.append({"role": "assistant", "content": "Done, the order was updated. Anything else?"})
    return rows


def build_corpus(root: Path, n: int) -> tuple[list[Path], str]:
    root.mkdir(parents=True)
    sources = sorted(TAU.glob("*.jsonl")) if TAU.is_dir() else []
    rng = random.Random(7)
    files = []
    for i in range(n):
        dst = root / f"agent{i % 10}" / f"session-{i:05d}.jsonl"
        dst.parent.mkdir(exist_ok=True)
        if sources:
            shutil.copyfile(sources[i % len(sources)], dst)
        else:
            dst.write_text("".join(json.dumps(r) + "\n" for r in synthetic_session(rng)))
        files.append(dst)
    return files, ("tau-airline-dev copies" if sources else "synthetic")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sessions", type=int, default=1000)
    args = ap.parse_args()
    with private_home("ultron-throughput-") as home:
        return _run(args, home)


def _run(args: argparse.Namespace, home: Path) -> int:
    from ultron.providers import RulesProvider
    from ultron.sdk import Ultron
    from ultron.sessions.parsing import SessionParser
    from ultron.settings import Settings
    from ultron.heuristics.quality import score_trajectory
    from ultron.trajectory.segmentation import segment_messages

    files, kind = build_corpus(home / "corpus", args.sessions)
    settings = Settings.from_env(llm_provider="rules")
    client = Ultron(settings)

    # Baseline: the same algorithms with no database.
    parsed = [list(SessionParser().messages(open(f, "rb"))) for f in files]
    provider = RulesProvider()
    t0 = time.perf_counter()
    n_segments = 0
    for msgs in parsed:
        for span in segment_messages(msgs, provider, settings.segment_budget_tokens).spans:
            score_trajectory(msgs[span.start : span.end + 1])
            n_segments += 1
    pure = time.perf_counter() - t0

    t0 = time.perf_counter()
    report = client.ingest([home / "corpus"], "bench")
    ingest = time.perf_counter() - t0
    service = client.trajectory_service
    t0 = time.perf_counter()
    segmented = service.segment_pending_sessions(batch_size=args.sessions * 2)
    seg = time.perf_counter() - t0
    t0 = time.perf_counter()
    labels = service.label_pending_segments(batch_size=args.sessions * 20)
    lab = time.perf_counter() - t0

    messages = report.totals["messages"]
    ok_sessions = sum(1 for r in segmented if r.status == "segmented")
    ok_labels = sum(1 for lb in labels if lb.status == "labeled")
    print(machine_line())
    print(f"corpus: {len(files)} sessions ({kind}), {messages:,} messages, "
          f"{messages / len(files):.1f} messages/session\n")
    print(f"{'step':44} {'secs':>7} {'sessions/s':>11} {'vs pure':>8}")
    rows = [
        ("pure segment + score, no database (baseline)", pure, None),
        ("ingest (parse + COPY + archive)", ingest, None),
        ("segment_pending_sessions (rules, with DB)", seg, None),
        ("label_pending_segments (rules, with DB)", lab, None),
        ("segment + label total (target < 60 s)", seg + lab, (seg + lab) / pure),
    ]
    for name, secs, ratio in rows:
        print(f"{name:44} {secs:7.2f} {len(files) / secs:11.1f} {'' if ratio is None else f'{ratio:7.2f}x':>8}")
    print(f"\nsessions segmented: {ok_sessions}/{len(segmented)}; segments labelled: {ok_labels}/{len(labels)} "
          f"(pure run: {n_segments} segments)")
    print(f"target: {args.sessions} sessions segmented and scored in < 60 s: "
          f"{'PASS' if seg + lab < 60 else 'FAIL'} ({seg + lab:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
