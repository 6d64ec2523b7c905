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
    ... on Asset { assetMaterializations(limit: 50) { partition } } }
  scores: assetOrError(assetKey: {path: ["quality_metrics"]}) {
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

    def log_tail() -> str:
        log.flush()
        return (tmp_path / "dev.log").read_text()[-4000:]

    proc = subprocess.Popen([sys.executable, "-m", "ultron.cli", "dev", "--port", str(port)], env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 180
        materialized: set[str] = set()
        scored: set[str] = set()
        data: dict = {}
        while time.time() < deadline:
            assert proc.poll() is None, log_tail()
            try:
                data = graphql(port)
                materialized = {m["partition"] for m in data["assetOrError"]["assetMaterializations"]}
                scored = {m["partition"] for m in data["scores"]["assetMaterializations"]}
            except OSError:
                pass
            if len(materialized) >= 4 and len(scored) >= 4:
                break
            time.sleep(2)
        examples = sorted(p.name for p in (home / "inbox" / "examples").glob("*.jsonl"))
        assert len(examples) == 4, log_tail()
        assert materialized == {f"examples:examples/{name}" for name in examples}, log_tail()
        assert set(data["assetNodes"][0]["partitionKeys"]) == materialized, data
        assert scored == materialized, log_tail()  # the sensor's runs also segment and score
        status = subprocess.run([sys.executable, "-m", "ultron.cli", "status", "--json"], env=env,
                                capture_output=True, text=True, timeout=60)
        tables = json.loads(status.stdout)["tables"]
        assert tables["trajectory_records"] == 4 and tables["task_segments"] >= 4, status.stderr
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise AssertionError("ultron dev did not stop within 60 s of SIGINT\n" + log_tail())
        finally:
            log.close()
    # Everything it started has stopped, the database included.
    deadline = time.time() + 15
    while True:
        leftovers = subprocess.run(["pgrep", "-af", str(home)], capture_output=True, text=True).stdout
        if not leftovers or time.time() > deadline:
            break
        time.sleep(0.5)
    assert leftovers == "", leftovers
