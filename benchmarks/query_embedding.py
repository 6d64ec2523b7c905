"""Where a search query's MiniLM embedding goes, and what it cost before: the tokenizer and
the ONNX Runtime graph (forward pass and pooling) of this build, beside a revision's
embedder (``--against``, default the last one that ran torch) as that revision served a
query, and in float32, query by query in the same run; idle or with the other core busy.
Also checks that the vectors agree (cosine >= 1 - 1e-4).

    python benchmarks/query_embedding.py [--queries 300] [--busy] [--against REV]

``--busy`` keeps one other core busy with a spinning process while measuring, the way a
search's own database backend or a second request does on a 2-core machine.
"""

from __future__ import annotations

import argparse
import inspect
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _support import machine_line, module_at  # noqa: E402


def spin(stop) -> None:
    while not stop.is_set():
        sum(i * i for i in range(10_000))


def questions(n: int) -> list[str]:
    from retrieval import LOCOMO  # benchmarks/retrieval.py

    if LOCOMO.is_file():
        import json

        data = json.loads(LOCOMO.read_text())
        out = [qa["question"] for conv in data for qa in conv.get("qa", []) if qa.get("question")]
        if out:
            return [out[i % len(out)] for i in range(n)]
    return [f"how do I fix the deploy error number {i} on the staging host" for i in range(n)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--busy", action="store_true", help="keep another core busy while measuring")
    ap.add_argument("--against", metavar="REV", default="a05ef23",
                    help="the revision whose embedder is timed beside this build's (default: the last on torch)")
    args = ap.parse_args()
    from ultron.embeddings import local

    print(machine_line())
    embedder = local.LocalMiniLMEmbedder().load()
    encoder = local._load(embedder.model_dir)
    old = module_at(args.against, "ultron/embeddings/local.py", "baseline_local")
    served, float32 = old.LocalMiniLMEmbedder(), None
    precision = "default"
    if "query_precision" in inspect.signature(old.LocalMiniLMEmbedder).parameters:
        float32 = old.LocalMiniLMEmbedder(query_precision="float32")
        precision = "bfloat16" if served.query_bfloat16 else "float32"
    print(f"load average at start: {os.getloadavg()[0]:.2f}; {args.against}'s queries as served: {precision}")
    texts = questions(args.queries)
    for warm in (embedder.embed_one, getattr(served, "embed_query", served.embed_one)):
        warm("warm up")
    stop = multiprocessing.Event()
    spinner = multiprocessing.Process(target=spin, args=(stop,), daemon=True) if args.busy else None
    if spinner:
        spinner.start()
    rows: dict[str, list[float]] = {}
    ours, theirs = [], []

    def timed(name: str, call, *a):
        t0 = time.perf_counter()
        out = call(*a)
        rows.setdefault(name, []).append(time.perf_counter() - t0)
        return out

    try:
        # one query at a time through each, in turn, so load drift hits them alike
        for text in texts:
            enc = timed("tokenize", encoder.tokenizer.encode_batch, [text])
            feed = {"input_ids": np.array([enc[0].ids], dtype=np.int64),
                    "attention_mask": np.array([enc[0].attention_mask], dtype=np.int64)}
            timed("ONNX graph: forward + pooling", encoder.session.run, None, feed)
            ours.append(timed("this build, as served", embedder.embed_one, text + " "))
            timed(f"{args.against}, as served", getattr(served, "embed_query", served.embed_one), text + " ")
            if float32 is not None:
                theirs.append(timed(f"{args.against}, float32", float32.embed_query, text + " "))
    finally:
        if spinner:
            stop.set()
            spinner.join()
    print(f"{args.queries} LoCoMo questions, {'another core busy' if args.busy else 'idle'}; "
          f"load average at the end {os.getloadavg()[0]:.2f}")
    print(f"{'step':34} {'p50 ms':>8} {'p95 ms':>8}")
    for name, times in rows.items():
        times = sorted(times)
        print(f"{name:34} {statistics.median(times) * 1e3:8.2f} {times[int(0.95 * (len(times) - 1))] * 1e3:8.2f}")
    if not theirs:
        return 0
    cos = (np.array(ours) * np.array(theirs)).sum(axis=1)
    print(f"cosine to {args.against}'s float32 query vectors: min {cos.min():.7f} (must be >= 0.9999)")
    return 0 if cos.min() >= 1 - 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
