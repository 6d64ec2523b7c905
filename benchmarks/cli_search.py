"""``ultron search`` wall time from the shell, with the store's server running and without.

Without a server the command loads the embedding model in its own process (what every
run did before); with ``ultron serve`` up for the same store it asks the server, whose
model is warm. Private ULTRON_HOME, the default MiniLM embedder, ``--memories`` memories;
the two paths alternate run by run so load drift hits both.

    python benchmarks/cli_search.py [--memories 500] [--runs 10]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _support import machine_line, private_home  # noqa: E402
from mcp_latency import TOKEN, fill, percentile, start_api  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--memories", type=int, default=500)
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    with private_home("ultron-bench-cli-") as home:
        os.environ["ULTRON_LLM_PROVIDER"] = "rules"
        return run(args, home)


def run(args: argparse.Namespace, home: Path) -> int:
    from ultron.sdk import Ultron

    client = Ultron()
    client.upload_memory("pin numpy<2 for the old pandas wheels", "pandas import fails", "pip install 'numpy<2'")
    fill(client, args.memories - 1, np.random.default_rng(3))
    env = {**os.environ, "ULTRON_HOME": str(home), "ULTRON_API_TOKEN": TOKEN}
    proc, url = start_api(env, home / "api.log")
    env["ULTRON_API_PORT"] = url.rsplit(":", 1)[1]
    alone = {**env, "ULTRON_API_PORT": "9"}  # nothing listens there: the command runs by itself
    cmd = [sys.executable, "-m", "ultron.cli", "search", "pandas import fails after numpy upgrade"]
    times: dict[str, list[float]] = {"server running": [], "no server (model loaded here)": []}
    try:
        for _ in range(args.runs):
            for name, e in (("server running", env), ("no server (model loaded here)", alone)):
                t0 = time.perf_counter()
                done = subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=300)
                times[name].append(time.perf_counter() - t0)
                assert done.returncode == 0 and "numpy" in done.stdout, done.stderr
                assert ("answered by the server" in done.stderr) == (e is env), done.stderr
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
    print(machine_line())
    print(f"`ultron search`, {args.memories} memories ({client.memory.embedder.name}), {args.runs} runs each, "
          "alternating")
    base = percentile(times["no server (model loaded here)"], 50)
    print(f"{'path':<32} {'p50 s':>7} {'max s':>7} {'p50 / no server':>16}")
    for name, xs in times.items():
        print(f"{name:<32} {percentile(xs, 50):7.2f} {max(xs):7.2f} {percentile(xs, 50) / base:15.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
