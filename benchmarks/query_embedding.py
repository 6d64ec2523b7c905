"""Where a search query's MiniLM embedding goes: the tokenizer, the forward pass, the
pooling; and what the forward pass costs on one intra-op thread against all of them, idle
and with the other core busy (a Postgres backend, another request), each beside the other
in the same run. Also checks that the vectors agree (cosine >= 1 - 1e-4).

    python benchmarks/query_embedding.py [--queries 300] [--busy]

``--busy`` keeps one other core busy with a spinning process while measuring, the way a
search's own database backend or a second request does on a 2-core machine.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _support import machine_line  # noqa: E402


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
    args = ap.parse_args()
    import torch

    from ultron.embeddings import local

    print(machine_line())
    print(f"load average at start: {os.getloadavg()[0]:.2f}; torch {torch.__version__}, "
          f"{torch.get_num_threads()} intra-op threads by default")
    embedder = local.LocalMiniLMEmbedder(query_precision="float32")
    m = local._load(embedder.model_dir)
    texts = questions(args.queries)
    embedder.embed_one("warm up")
    stop = multiprocessing.Event()
    spinner = multiprocessing.Process(target=spin, args=(stop,), daemon=True) if args.busy else None
    if spinner:
        spinner.start()
    everything = torch.get_num_threads()
    rows: dict[str, list[float]] = {}
    vectors: dict[int, list[np.ndarray]] = {1: [], everything: []}
    try:
        # alternate the two thread counts query by query, so load drift hits both alike
        for text in texts:
            for threads in (1, everything):
                with local._intra_op_threads(torch, threads), torch.inference_mode():
                    t0 = time.perf_counter()
                    enc = m.tokenizer.encode_batch([text])
                    t1 = time.perf_counter()
                    mask = torch.tensor([e.attention_mask for e in enc])
                    tokens = m.model(torch.tensor([e.ids for e in enc]), mask)
                    t2 = time.perf_counter()
                    weights = mask.unsqueeze(-1).to(tokens.dtype)
                    mean = (tokens * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)
                    unit = torch.nn.functional.normalize(mean, p=2, dim=1).numpy()[0]
                    t3 = time.perf_counter()
                vectors[threads].append(unit)
                for name, dt in (("tokenize", t1 - t0), ("forward", t2 - t1), ("pool", t3 - t2), ("total", t3 - t0)):
                    rows.setdefault(f"{name}, {threads} thread(s)", []).append(dt)
            t0 = time.perf_counter()
            embedder.embed_query(text + " ")  # what a search calls (QUERY_THREADS)
            rows.setdefault("embed_query as served", []).append(time.perf_counter() - t0)
    finally:
        if spinner:
            stop.set()
            spinner.join()
    print(f"{args.queries} LoCoMo questions, float32, {'another core busy' if args.busy else 'idle'}; "
          f"load average at the end {os.getloadavg()[0]:.2f}")
    print(f"{'step':28} {'p50 ms':>8} {'p95 ms':>8}")
    for name, times in rows.items():
        times = sorted(times)
        print(f"{name:28} {statistics.median(times) * 1e3:8.2f} {times[int(0.95 * (len(times) - 1))] * 1e3:8.2f}")
    one, many = np.array(vectors[1]), np.array(vectors[everything])
    cos = (one * many).sum(axis=1)
    print(f"cosine between 1 and {everything} thread(s): min {cos.min():.7f} (must be >= 0.9999)")
    return 0 if cos.min() >= 1 - 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
