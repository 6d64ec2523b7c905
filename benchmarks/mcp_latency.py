"""``search_memories`` latency at 10k memories: the SDK call, and the same call as an MCP
tool over stdio (a real ``ultron mcp`` subprocess) and over streamable HTTP (``/mcp`` of a
live API server), measured in the same run on the same store and queries.

The store is a private ULTRON_HOME with the hashing embedder (the MCP server processes
must embed queries exactly as the store was embedded); one memory goes through the SDK's
upload (recording the embedding profile), the rest are bulk-copied. Each query is timed
on all three paths in turn, so load drifting during the run hits them alike. The MCP
client is the official one (``mcp.Client``), one session per transport, as an agent
would hold it.

    python benchmarks/mcp_latency.py [--memories 10000] [--queries 200]
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _support import machine_line, private_home  # noqa: E402

TOKEN = "bench-token-0123456789abcdef"
WORDS = ("error timeout docker pandas csv import module permission deploy flight booking refund cache memory "
         "index query token network proxy build test commit branch merge schema kubernetes pod restart").split()


def fill(client, n: int, rng: np.random.Generator) -> None:
    """``n`` memories with real hashing-embedder vectors, by COPY (seconds, not minutes)."""
    texts = [f"memory {i}: " + " ".join(rng.choice(WORDS, 8)) for i in range(n)]
    vectors = client.memory.embedder.embed(texts)
    with client.db.engine.begin() as conn:
        raw = conn.connection.driver_connection
        with raw.cursor() as cur:
            with cur.copy("COPY memory_records (id, memory_type, content, context, resolution, summary_l0, "
                          "overview_l1, tier, hit_count, embedding) FROM STDIN") as copy:
                for i, (text, vec) in enumerate(zip(texts, vectors)):
                    words = text.split(": ", 1)[1]
                    copy.write_row((str(uuid.UUID(int=i + 1)), "error", text, "bench", "resolution " + words,
                                    words[:60], words, "WARM", int(rng.integers(0, 50)),
                                    "[" + ",".join(f"{x:.6f}" for x in vec) + "]"))
        conn.exec_driver_sql("ANALYZE memory_records")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_api(env: dict[str, str], log: Path) -> tuple[subprocess.Popen, str]:
    import httpx

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "ultron.api", "--port", str(port)], env=env,
                            stdout=open(log, "ab"), stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the API server exited: {log.read_text()[-2000:]}")
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    proc.terminate()
    raise SystemExit("the API server did not start")


def percentile(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


async def measure(client, queries: list[str], env: dict[str, str], url: str, warmup: int) -> dict[str, list[float]]:
    from contextlib import AsyncExitStack

    from mcp import Client
    from mcp.client.stdio import StdioServerParameters
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    stdio_params = StdioServerParameters(command=sys.executable, args=["-m", "ultron.cli", "mcp"], env=env)
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"})
    async with AsyncExitStack() as stack:
        stdio = await stack.enter_async_context(Client(stdio_params, read_timeout_seconds=120))
        over_http = await stack.enter_async_context(
            Client(streamable_http_client(url + "/mcp", http_client=http), read_timeout_seconds=120))
        paths = {"SDK": None, "MCP stdio": stdio, "MCP HTTP": over_http}
        times: dict[str, list[float]] = {name: [] for name in paths}
        for i, q in enumerate(queries):
            for name, session in paths.items():
                t0 = time.perf_counter()
                if session is None:
                    hits = client.search_memories(q, limit=10)
                    n = len(hits)
                else:
                    result = await session.call_tool("search_memories", {"query": q, "limit": 10})
                    assert not result.is_error, result.content[0].text
                    n = result.structured_content["count"]
                elapsed = time.perf_counter() - t0
                assert n == 10, (name, q, n)
                if i >= warmup:
                    times[name].append(elapsed * 1000)
        return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    args = ap.parse_args()
    with private_home("ultron-bench-mcp-") as home:
        os.environ.update({"ULTRON_EMBEDDING_PROVIDER": "hash", "ULTRON_LLM_PROVIDER": "rules"})
        return run(args, home)


def run(args, home: Path) -> int:
    import anyio

    from ultron.sdk import Ultron

    client = Ultron()
    rng = np.random.default_rng(7)
    client.upload_memory("benchmark seed memory: docker build timeout", "bench", "raise the timeout")
    t0 = time.perf_counter()
    fill(client, args.memories - 1, rng)
    print(f"store: {args.memories} memories ({client.memory.embedder.name}), filled in "
          f"{time.perf_counter() - t0:.1f} s")
    queries = [" ".join(rng.choice(WORDS, 3)) for _ in range(args.queries + args.warmup)]

    env = {**os.environ, "ULTRON_HOME": str(home), "ULTRON_API_TOKEN": TOKEN}
    proc, url = start_api(env, home / "api.log")
    try:
        times = anyio.run(measure, client, queries, env, url, args.warmup)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)

    print(machine_line())
    print(f"search_memories(limit=10), {args.queries} queries after {args.warmup} warm-up, "
          "each query on every path in turn")
    sdk50, sdk95 = percentile(times["SDK"], 50), percentile(times["SDK"], 95)
    print(f"{'path':<10} {'p50 ms':>8} {'p95 ms':>8} {'mean ms':>8} {'p50 / SDK':>10} {'p95 / SDK':>10}")
    for name, xs in times.items():
        p50, p95 = percentile(xs, 50), percentile(xs, 95)
        print(f"{name:<10} {p50:8.2f} {p95:8.2f} {sum(xs) / len(xs):8.2f} {p50 / sdk50:9.2f}x {p95 / sdk95:9.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
