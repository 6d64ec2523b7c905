"""Gather one author's batch files into ``corpus/<author>.jsonl.gz`` (sorted, byte-stable).

    python benchmarks/data/lessons/compile_corpus.py /path/to/author_dir [...]

Each author wrote ``batch_NN.json`` files (JSON lists of specs) in a directory of their
own; this checks every spec's gold (shapes, types, turn indices, key terms present)
and writes the author's sessions as one gzip file with a fixed timestamp, so the same
input gives the same bytes. Specs that fail a check are reported and left out.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHAPES = {"error_fix": "error", "prose_fix": "error", "correction": "correction", "preference": "preference",
          "general_lesson": "pattern", "procedure": "pattern", "security": "security"}


def problems(s: dict) -> list[str]:
    out = []
    turns = s.get("turns") or []
    if not turns or turns[0].get("role") != "user":
        out.append("first turn is not a user turn")
    blob = (json.dumps(s.get("system") or "") + json.dumps(turns, ensure_ascii=False)).lower()
    for les in s.get("lessons") or []:
        if SHAPES.get(les.get("shape")) != les.get("type"):
            out.append(f"shape/type {les.get('shape')}/{les.get('type')}")
        if any(not isinstance(i, int) or not 0 <= i < len(turns) for i in les.get("turns") or [None]):
            out.append("lesson turns")
        missing = [t for t in les.get("key_terms") or [] if t.lower() not in blob
                   and json.dumps(t.lower(), ensure_ascii=False)[1:-1] not in blob]
        if missing:
            out.append(f"key terms not in the session: {missing}")
    return out


def main(argv: list[str]) -> int:
    for src in map(Path, argv):
        specs, bad = [], 0
        for path in sorted(src.glob("batch_*.json")):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except json.JSONDecodeError as exc:
                print(f"{path}: not JSON ({exc})")
                continue
            for s in data if isinstance(data, list) else [data]:
                p = problems(s)
                if p:
                    bad += 1
                    print(f"{path} {s.get('id')}: {'; '.join(p)}")
                    continue
                s["author"] = src.name
                specs.append(s)
        seen, unique = set(), []
        for s in sorted(specs, key=lambda s: s["id"]):
            if s["id"] not in seen:
                seen.add(s["id"])
                unique.append(s)
        out = HERE / "corpus" / f"{src.name}.jsonl.gz"
        out.parent.mkdir(exist_ok=True)
        with open(out, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as gz:
            for s in unique:
                gz.write((json.dumps(s, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8"))
        print(f"{src.name}: {len(unique)} sessions -> {out.relative_to(HERE.parents[2])} ({bad} left out)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
