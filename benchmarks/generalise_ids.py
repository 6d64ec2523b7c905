"""How many extracted memories still carry one customer's ids or names, before and after
``generalise`` (ultron.heuristics.generalise).

Run from the repository root:

    python benchmarks/generalise_ids.py
    python benchmarks/generalise_ids.py --examples 20

Data: ../shared/data/tau-airline-dev/*.jsonl (100 airline customer-service sessions) and
../shared/data/claude-code/*.jsonl. Each file is parsed, scored and its memories
extracted offline (``score_trajectory``, ``extract_memories``); memories with confidence
>= 0.5 are kept, as the pipeline does. The session's people are read once per file from
its user turns and tool results (``people_in``), the way candidate assembly calls it.

Printed per corpus: kept memories, the share of memories with any instance specific
(``instance_specifics`` over content, context and resolution) before and after
``generalise``, the kinds still found after, the time per field and per 600 characters,
and example before/after pairs. Target: <= 5% of tau-airline memories after.
If ../shared is absent the script says so and exits 0.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED = REPO_ROOT.parent / "shared" / "data"
CORPORA = ("tau-airline-dev", "claude-code")
FIELDS = ("content", "context", "resolution")
TARGET = 0.05

if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _support import machine_line  # noqa: E402


def memories(path: Path) -> tuple[list[dict], frozenset[str]]:
    from ultron.heuristics import extract_memories, score_trajectory
    from ultron.heuristics.generalise import people_in
    from ultron.sessions.parsing import SessionParser

    with open(path, "rb") as fh:
        msgs = list(SessionParser().messages(fh))
    people = frozenset(people_in(m.content for m in msgs if m.role in ("user", "tool")))
    meta = score_trajectory(msgs)
    kept = [m for m in extract_memories(msgs, task_type=meta["summary"]["task_type"]) if m["confidence"] >= 0.5]
    return kept, people


def run(corpus: str, n_examples: int) -> float | None:
    from ultron.heuristics.generalise import generalise, instance_specifics

    files = sorted((SHARED / corpus).glob("*.jsonl"))
    if not files:
        print(f"\n{corpus}: no files")
        return None
    total = before = after = 0
    left: Counter[str] = Counter()
    changed_fields: list[tuple[str, str, str]] = []
    timed: list[tuple[str, frozenset[str]]] = []
    for path in files:
        mems, people = memories(path)
        for mem in mems:
            total += 1
            fields = {k: mem.get(k) or "" for k in FIELDS}
            general = {k: generalise(v, people) for k, v in fields.items()}
            timed.extend((v, people) for v in fields.values())
            found_before = [x for v in fields.values() for x in instance_specifics(v, people)]
            found_after = [x for v in general.values() for x in instance_specifics(v, people)]
            before += bool(found_before)
            after += bool(found_after)
            left.update(found_after)
            changed_fields.extend((path.name, fields[k], general[k]) for k in FIELDS if general[k] != fields[k])
    print(f"\n{corpus}: {len(files)} sessions, {total} memories kept (confidence >= 0.5)")
    if not total:
        return None
    print(f"  with instance specifics: before {before} ({before / total:.1%}), after generalise "
          f"{after} ({after / total:.1%})")
    if left:
        print("  still found after: " + ", ".join(f"{k!r} x{v}" for k, v in left.most_common(10)))
    seconds = min(_time(timed) for _ in range(3))   # warm: a session's name pattern is compiled once
    chars = sum(len(t) for t, _ in timed)
    print(f"  speed: {seconds / len(timed) * 1e6:.1f} µs per field (mean {chars / len(timed):.0f} chars), "
          f"{seconds / chars * 600 * 1e6:.1f} µs per 600 chars")
    step = max(1, len(changed_fields) // max(1, n_examples))
    examples = changed_fields[::step][:n_examples]
    for name, old, new in examples:
        print(f"\n  [{name}]\n    before: {old[:300]!r}\n    after:  {new[:300]!r}")
    return after / total


def _time(texts: list[tuple[str, frozenset[str]]]) -> float:
    from ultron.heuristics.generalise import generalise

    t0 = time.perf_counter()
    for text, people in texts:
        generalise(text, people)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=10, help="before/after pairs per corpus (default 10)")
    args = parser.parse_args(argv)
    if not SHARED.is_dir():
        print(f"{SHARED} is absent: nothing to measure")
        return 0
    print(machine_line())
    shares = {c: run(c, args.examples) for c in CORPORA if (SHARED / c).is_dir()}
    tau = shares.get("tau-airline-dev")
    if tau is not None:
        print(f"\ntau-airline after generalise: {tau:.1%} (target <= {TARGET:.0%}): "
              + ("met" if tau <= TARGET else "MISSED"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
