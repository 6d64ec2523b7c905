"""What the HTTP API costs on top of the SDK: /memories/search latency over HTTP vs the
same ``Ultron.search_memories`` call in-process, in the same run on the same store.

Fills a private store with N uploaded memories, starts ``python -m ultron.api`` on it,
then alternates SDK and HTTP queries (one keep-alive connection) so both see the same
cache and load. A second table runs C concurrent HTTP clients for throughput.

    python benchmarks/api.py [--memories 300] [--queries 300] [--concurrency 4] [--embedder local|hash]
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _support import machine_line, private_home  # noqa: E402

TOKEN = "benchmark-token-0123456789"
TOPICS = ("pip install", "docker build", "pytest fixture", "git rebase", "postgres index", "nginx proxy",
          "pandas csv", "ssh key", "npm audit", "kubectl rollout", "terraform state", "redis timeout")
PROBLEMS = ("fails with a permission error", "times out after 30 seconds", "hits an SSL certificate error",
            "runs out of memory", "reports a version conflict", "hangs without output")
FIXES = ("pin the version", "set the proxy CA bundle", "raise the timeout", "clear the cache and retry",
         "run it as the service user", "use the --no-deps flag")


def percentile(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def row(name: str, times: list[float]) -> str:
    ms = [t * 1e3 for t in times]
    return (f"{name:28} {len(ms):6d} {statistics.mean(ms):9.2f} {percentile(ms, 50):9.2f} "
            f"{percentile(ms, 95):9.2f} {percentile(ms, 99):9.2f}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--memories", type=int, default=300)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--embedder", choices=("local", "hash"), default="local")
    args = ap.parse_args()
    with private_home("ultron-bench-api-"):
        os.environ["ULTRON_EMBEDDING_PROVIDER"] = args.embedder
        os.environ["ULTRON_LLM_PROVIDER"] = "rules"
        return run(args)


def run(args: argparse.Namespace) -> int:
    import httpx

    from ultron.sdk import Ultron

    rng = random.Random(7)
    client = Ultron()
    t0 = time.perf_counter()
    for i in range(args.memories):
        topic, problem, fix = rng.choice(TOPICS), rng.choice(PROBLEMS), rng.choice(FIXES)
        client.upload_memory(f"{topic} {problem} (case {i})", f"project {i % 17}", fix, [topic.split()[0]])
    fill = time.perf_counter() - t0
    queries = [f"{rng.choice(TOPICS)} {rng.choice(PROBLEMS)}" for _ in range(args.queries)]

    port = free_port()
    log = open(Path(os.environ["ULTRON_HOME"]) / "api.log", "wb")
    server = subprocess.Popen([sys.executable, "-m", "ultron.api", "--port", str(port)],
                              env={**os.environ, "ULTRON_API_TOKEN": TOKEN}, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(url + "/health").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                print("the API server did not start; see", log.name)
                return 1
            time.sleep(0.2)

        headers = {"Authorization": f"Bearer {TOKEN}"}
        sdk_times: list[float] = []
        http_times: list[float] = []
        with httpx.Client(base_url=url, headers=headers, timeout=60) as http:
            for q in queries[:20]:  # warm both paths: model, pools, plan caches
                client.search_memories(q, "l1", 10)
                http.post("/memories/search", json={"query": q, "limit": 10}).raise_for_status()
            for q in queries:
                t = time.perf_counter()
                client.search_memories(q, "l1", 10)
                sdk_times.append(time.perf_counter() - t)
                t = time.perf_counter()
                http.post("/memories/search", json={"query": q, "limit": 10}).raise_for_status()
                http_times.append(time.perf_counter() - t)

        def worker(chunk: list[str]) -> list[float]:
            out = []
            with httpx.Client(base_url=url, headers=headers, timeout=60) as http:
                for q in chunk:
                    t = time.perf_counter()
                    http.post("/memories/search", json={"query": q, "limit": 10}).raise_for_status()
                    out.append(time.perf_counter() - t)
            return out

        c = max(1, args.concurrency)
        chunks = [queries[i::c] for i in range(c)]
        t0 = time.perf_counter()
        with ThreadPoolExecutor(c) as pool:
            concurrent = [t for part in pool.map(worker, chunks) for t in part]
        wall = time.perf_counter() - t0
    finally:
        server.terminate()
        server.wait(30)

    print(machine_line())
    print(f"store: {args.memories} memories uploaded in {fill:.1f} s; embedder: {args.embedder}; "
          f"{args.queries} queries, limit 10, detail l1\n")
    print(f"{'path':28} {'n':>6} {'mean ms':>9} {'p50 ms':>9} {'p95 ms':>9} {'p99 ms':>9}")
    print(row("SDK search_memories", sdk_times))
    print(row("HTTP POST /memories/search", http_times))
    print(row(f"HTTP, {c} concurrent clients", concurrent))
    overhead = percentile(http_times, 50) - percentile(sdk_times, 50)
    print(f"\nHTTP overhead at p50: {overhead * 1e3:.2f} ms per request; "
          f"{c} concurrent clients: {len(concurrent) / wall:.0f} requests/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
