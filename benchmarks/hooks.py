"""Latency of ``ultron hook`` as an agent runs it: a new process per event, JSON on stdin.

Target (agent hooks issue): session start p95 <= 300 ms with the server warm. The store is
a private ULTRON_HOME with the default embedder (MiniLM, as a user has it) and
``--memories`` memories; the server is a live ``ultron serve`` process, warmed by
``--warmup`` bundles first. Every round runs each path once, in turn, so load drifting
during the run hits them alike:

* ``python -c pass``: the interpreter's own start-up, the floor of any hook;
* ``POST /context``: the bundle the hook asks for, from inside this process (server time);
* ``hook session-start``: the whole hook, in a git repository with a Python project;
* ``hook stop``: copy a 200-turn transcript into the inbox and hand it to the server.

Then the server is stopped and ``hook session-start`` is timed again: with no server the
hook must still answer at once.

    python benchmarks/hooks.py [--memories 2000] [--rounds 100]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _support import machine_line, private_home  # noqa: E402
from mcp_latency import TOKEN, fill, percentile, start_api  # noqa: E402


def timed(cmd: list[str], payload: dict, env: dict[str, str], cwd: Path) -> tuple[float, bytes]:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, input=json.dumps(payload).encode(), capture_output=True, env=env, cwd=cwd, timeout=30)
    elapsed = (time.perf_counter() - t0) * 1000
    assert done.returncode == 0, done.stderr
    return elapsed, done.stdout


def project(home: Path) -> Path:
    repo = home / "work" / "invoice-service"
    (repo / "src").mkdir(parents=True)
    (repo / "pyproject.toml").write_text("[project]\nname = 'invoice-service'\n")
    (repo / "Dockerfile").write_text("FROM python:3.12-slim\n")
    subprocess.run(["git", "init", "-q", "-b", "fix/rounding", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "remote", "add", "origin", "git@example.com:acme/invoice-service.git"],
                   check=True)
    return repo


def transcript(path: Path, turns: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        for i in range(turns):
            fh.write(json.dumps({"type": "user", "sessionId": "bench", "uuid": f"u{i}",
                                 "message": {"role": "user", "content": f"step {i}: run the invoice tests"}}) + "\n")
            fh.write(json.dumps({"type": "assistant", "sessionId": "bench", "uuid": f"a{i}", "message": {
                "role": "assistant", "content": [{"type": "text", "text": "ran pytest: 42 passed " * 5}]}}) + "\n")
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--memories", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    args = ap.parse_args()
    with private_home("ultron-bench-hooks-") as home:
        os.environ["ULTRON_LLM_PROVIDER"] = "rules"
        return run(args, home)


def run(args: argparse.Namespace, home: Path) -> int:
    from ultron.sdk import Ultron

    client = Ultron()
    rng = np.random.default_rng(11)
    client.upload_memory("invoice-service tests need the db container: docker compose up -d db",
                         "pytest fails with connection refused on 5432", "docker compose up -d db, then pytest",
                         ["python", "docker"])
    fill(client, args.memories - 1, rng)
    print(f"store: {args.memories} memories ({client.memory.embedder.name})")
    repo = project(home)
    env = {**os.environ, "ULTRON_HOME": str(home), "ULTRON_API_TOKEN": TOKEN}
    proc, url = start_api(env, home / "api.log")
    env["ULTRON_API_PORT"] = url.rsplit(":", 1)[1]
    hook = [sys.executable, "-m", "ultron.cli", "hook", "claude-code"]
    start = {"session_id": "bench", "cwd": str(repo / "src"), "hook_event_name": "SessionStart", "source": "startup",
             "transcript_path": None}
    stop = {"session_id": "bench", "cwd": str(repo), "hook_event_name": "Stop",
            "transcript_path": str(transcript(home / "agent" / "-work-invoice" / "bench.jsonl", 200))}

    def bundle() -> float:
        body = json.dumps({"task": "Working in the invoice-service project (Python, Docker) on branch fix/rounding",
                           "token_budget": 1200}).encode()
        request = urllib.request.Request(url + "/context", data=body, method="POST", headers={
            "Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"})
        t0 = time.perf_counter()
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()
        return (time.perf_counter() - t0) * 1000

    paths = {"python -c pass": lambda: timed([sys.executable, "-c", "pass"], {}, env, repo)[0],
             "POST /context": bundle,
             "hook session-start": lambda: timed([*hook, "session-start"], start, env, repo)[0],
             "hook stop": lambda: timed([*hook, "stop"], stop, env, repo)[0]}
    try:
        for _ in range(args.warmup):
            for fn in paths.values():
                fn()
        _, out = timed([*hook, "session-start"], start, env, repo)
        context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
        assert "docker compose up -d db" in context, context
        times: dict[str, list[float]] = {name: [] for name in paths}
        for _ in range(args.rounds):
            for name, fn in paths.items():
                times[name].append(fn())
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
    times["hook session-start, no server"] = [timed([*hook, "session-start"], start, env, repo)[0]
                                              for _ in range(max(10, args.rounds // 4))]

    print(machine_line())
    print(f"{args.rounds} rounds after {args.warmup} warm-up; each round runs every path in turn")
    floor = percentile(times["python -c pass"], 50)
    print(f"{'path':<32} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'p50 - python':>13}")
    for name, xs in times.items():
        p50 = percentile(xs, 50)
        print(f"{name:<32} {p50:8.1f} {percentile(xs, 95):8.1f} {max(xs):8.1f} {p50 - floor:12.1f}")
    p95 = percentile(times["hook session-start"], 95)
    print(f"session start p95 {p95:.0f} ms: {'meets' if p95 <= 300 else 'MISSES'} the 300 ms target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
