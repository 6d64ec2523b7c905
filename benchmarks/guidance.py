"""Mechanical flags (ultron/heuristics/checker.py) on the memories kept from examples/, ../shared/data
and the lesson corpus, the way the pipeline keeps them offline.

    python benchmarks/guidance.py            # counts per check and per source
    python benchmarks/guidance.py --show     # every flag with its memory
    python benchmarks/guidance.py --skills   # also: the skills the pipeline makes of examples/ + ../shared/data

The memories come from ``benchmarks/lessons.py``'s ``Pipeline`` (parse, segment, score, gate,
extract, select, with the worth check); the corpus part reads the two blind authors' sessions
(120), whose lessons the model never saw. Target (the guidance issue): 0 flags on examples/
and ../shared/data.

``--skills`` runs the real pipeline (``ultron ingest`` + ``ultron maintenance``, rules provider,
a private embedded server) on examples/ and ../shared/data, then checks every cluster's skill
draft (``check_skill``) and says whether the quality gate published it: a flagged draft must
not be published.
"""

from __future__ import annotations

import argparse
import io
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def _requests(data: bytes) -> dict[int, list[str]]:
    """Segment start -> the person's turns in it (as the pipeline cut the session)."""
    from ultron.heuristics.episodes import Digest
    from ultron.providers import RulesProvider
    from ultron.sessions.parsing import SessionParser
    from ultron.settings import Settings
    from ultron.trajectory.segmentation import segment_messages

    msgs = list(SessionParser().messages(io.BytesIO(data)))
    out = {}
    for span in segment_messages(msgs, RulesProvider(), Settings.from_env({}).segment_budget_tokens).spans:
        d = Digest(msgs[span.start:span.end + 1])
        out[span.start] = [d.text[i] for i, k in enumerate(d.kind) if k == "user"]
    return out


def collect() -> dict[str, tuple[list[dict], list[list[str]]]]:
    import lessons as L

    pipe = L.Pipeline()
    sets: dict[str, tuple[list[dict], list[list[str]]]] = {}
    sources = {"examples": sorted((ROOT / "examples").glob("*.jsonl"))}
    if L.SHARED.is_dir():
        sources["shared claude-code"] = sorted(L.SHARED.glob("claude-code/*.jsonl"))
        sources["shared tau-airline"] = sorted(L.SHARED.glob("tau-airline-dev/*.jsonl"))
    for name, files in sources.items():
        mems, reqs = [], []
        for path in files:
            data = path.read_bytes()
            per_segment = _requests(data)
            for m in pipe.memories(data):
                mems.append({**m, "session": path.name})
                reqs.append(per_segment.get(m["segment"], []))
        sets[name] = (mems, reqs)
    tr = L._transcripts()
    blind = set(L.blind_authors())
    mems, reqs = [], []
    for spec in (s for s in L.load_corpus() if s["author"] in blind):
        data = tr.render_jsonl(spec, spec.get("format") or "openai").encode("utf-8")
        per_segment = _requests(data)
        for m in pipe.memories(data):
            mems.append({**m, "session": spec["id"]})
            reqs.append(per_segment.get(m["segment"], []))
    sets["corpus, blind authors"] = (mems, reqs)
    return sets


def main(argv: list[str] | None = None) -> int:
    from ultron.heuristics.checker import CHECKS, check, counts

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--show", action="store_true")
    ap.add_argument("--skills", action="store_true")
    args = ap.parse_args(argv)
    sets = collect()
    print(f"{'source':<24}{'memories':>9}" + "".join(f"{c:>18}" for c in CHECKS) + f"{'flagged':>9}")
    for name, (mems, reqs) in sets.items():
        flags = check(mems, reqs)
        n = counts(flags)
        flagged = len({f.memory for f in flags})
        print(f"{name:<24}{len(mems):>9}" + "".join(f"{n[c]:>18}" for c in CHECKS) + f"{flagged:>9}")
        if args.show:
            by = defaultdict(list)
            for f in flags:
                by[f.memory].append(f)
            for i, fs in sorted(by.items()):
                print(f"   [{mems[i]['session']}] {mems[i]['content'][:90]!r}")
                for f in fs:
                    print(f"      {f.check}: {f.detail}")
    if args.skills:
        skills()
    return 0


def skills() -> None:
    """Every cluster's skill draft from the real pipeline: its checker flags and the gate's verdict."""
    import json
    import os
    import subprocess

    from _support import private_home

    import lessons as L

    paths = [str(ROOT / "examples")]
    if L.SHARED.is_dir():
        paths += [str(L.SHARED / "claude-code"), str(L.SHARED / "tau-airline-dev")]
    with private_home("ultron-bench-guidance-"):
        cli = [str(Path(sys.executable).parent / "ultron")]
        subprocess.run(cli + ["--init", "ingest", "--agent-id", "bench", "--no-progress", *paths], check=True,
                       capture_output=True)
        report = json.loads(subprocess.run(cli + ["maintenance", "--json"], check=True, capture_output=True,
                                           text=True).stdout)
        from ultron.db import clusters as C
        from ultron.db.database import Database
        from ultron.heuristics.checker import check_skill
        from ultron.heuristics.skill_synthesis import synthesize
        from ultron.prompts.skills import validate_skill
        from ultron.settings import Settings
        from ultron.skills.service import _member

        evolved = report.get("skills") or {}
        published = {e["cluster_id"] for e in evolved.get("published") or ()}
        failed = {e["cluster_id"]: e.get("reason", "") for e in evolved.get("failed") or ()}
        db = Database.open(Settings.from_env(os.environ))
        print(f"\n{'skill draft (title)':<64}{'memories':>9}{'flags':>7}  published")
        with db.engine.connect() as conn:
            for c in C.active_clusters(conn):
                members = [_member(r) for r in C.cluster_members(conn, c["id"])]
                draft = validate_skill(synthesize(c.get("topic") or "", members), allow_no_steps=True)
                flags = check_skill(draft["name"], [(s["text"], s["evidence"]) for s in draft["steps"]],
                                    [b["condition"] for b in draft["branches"]], len(members))
                verdict = "yes" if c["id"] in published else "no"
                print(f"{draft['name'][:62]:<64}{len(members):>9}{len(flags):>7}  {verdict}")
                for check_name, detail in flags:
                    print(f"      {check_name}: {detail}")
                if c["id"] in failed:
                    print(f"      gate: {failed[c['id']][:160]}")
        db.dispose() if hasattr(db, "dispose") else None


if __name__ == "__main__":
    raise SystemExit(main())
