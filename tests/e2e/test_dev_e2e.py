"""`ultron dev` on a fresh state directory: database, UI, daemon, and the examples ingested."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

QUERY = """{ assetNodes(assetKeys: [{path: ["raw_sessions"]}]) { partitionKeys }
  assetOrError(assetKey: {path: ["raw_sessions"]}) {
    ... on Asset { assetMaterializations(limit: 50) { partition } } } }"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def graphql(port: int) -> dict:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", data=json.dumps({"query": QUERY}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())["data"]


def test_ultron_dev_serves_the_ui_with_the_examples_ingested(tmp_path):
    port = free_port()
    home = tmp_path / "home"
    env = {**os.environ, "ULTRON_HOME": str(home), "ULTRON_SENSOR_INTERVAL_SECONDS": "2"}
    log = open(tmp_path / "dev.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "ultron.cli", "dev", "--port", str(port)], env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 180
        materialized: set[str] = set()
        data: dict = {}
        while time.time() < deadline:
            assert proc.poll() is None, (tmp_path / "dev.log").read_text()[-3000:]
            try:
                data = graphql(port)
                materialized = {m["partition"] for m in data["assetOrError"]["assetMaterializations"]}
            except OSError:
                pass
            if len(materialized) >= 4:
                break
            time.sleep(2)
        examples = sorted(p.name for p in (home / "inbox" / "examples").glob("*.jsonl"))
        assert len(examples) == 4
        assert materialized == {f"examples:examples/{name}" for name in examples}, \
            (tmp_path / "dev.log").read_text()[-3000:]
        assert set(data["assetNodes"][0]["partitionKeys"]) == materialized
        status = subprocess.run([sys.executable, "-m", "ultron.cli", "status", "--json"], env=env,
                                capture_output=True, text=True, timeout=60)
        assert json.loads(status.stdout)["tables"]["trajectory_records"] == 4
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        log.close()
    # Everything it started has stopped, the database included.
    time.sleep(1)
    leftovers = subprocess.run(["pgrep", "-f", str(home)], capture_output=True, text=True).stdout.split()
    assert leftovers == []
