"""`ultron dev` on a fresh state directory: what README's first command promises.

Database, UI and daemon; the examples ingested by the sensor; the automation sensor
carrying them on to tiers, clusters, skills (SKILL.md in ULTRON_HOME, and a loadable Agent
Skills tree in ULTRON_SKILLS_EXPORT_DIR) and an SFT export
that passes its blocking check; a backfill over every session partition; and the
authenticated HTTP API beside the UI. Ctrl-C stops all of it, the database included."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

from ultron.skills.export import validate_tree

QUERY = """{ assetNodes(assetKeys: [{path: ["raw_sessions"]}]) { partitionKeys }
  assetOrError(assetKey: {path: ["raw_sessions"]}) {
    ... on Asset { assetMaterializations(limit: 100) { partition } } }
  scores: assetOrError(assetKey: {path: ["quality_metrics"]}) {
    ... on Asset { assetMaterializations(limit: 100) { partition } } }
  skills: assetOrError(assetKey: {path: ["skills"]}) {
    ... on Asset { assetMaterializations(limit: 5) { runId } } }
  sft: assetOrError(assetKey: {path: ["sft_dataset"]}) {
    ... on Asset { assetMaterializations(limit: 1) { runId metadataEntries { label
      ... on PathMetadataEntry { path } } } } }
  checks: assetNodes(assetKeys: [{path: ["sft_dataset"]}]) {
    assetChecksOrError { ... on AssetChecks { checks { name executionForLatestMaterialization {
      evaluation { success } } } } } } }"""

BACKFILL = """mutation($params: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $params) {
  __typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message } } }"""
BACKFILL_STATUS = """query($id: String!) { partitionBackfillOrError(backfillId: $id) {
  ... on PartitionBackfill { status } ... on PythonError { message } } }"""
ALL_ASSETS = ["raw_sessions", "task_segments", "quality_metrics", "memories", "tiers", "clusters", "skills",
              "sft_dataset"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def graphql(port: int, query: str = QUERY, variables: dict | None = None) -> dict:
    body = json.dumps({"query": query, "variables": variables or {}}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=20) as resp:
        return json.loads(resp.read())["data"]


def http_get(url: str, token: str | None = None) -> tuple[int, dict]:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=20) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def wait_for(predicate, timeout: float, what: str, log_tail, proc):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        assert proc.poll() is None, log_tail()
        try:
            last = predicate()
            if last:
                return last
        except OSError:
            pass
        time.sleep(2)
    raise AssertionError(f"timed out waiting for {what}: {last!r}\n{log_tail()}")


def test_ultron_dev_runs_the_whole_graph_on_the_examples(tmp_path, fresh_store_env):
    port, api_port = free_port(), free_port()
    home = tmp_path / "home"
    # The default embedder, as a user gets it: whether the examples cluster into a skill is under test.
    # ULTRON_SKILLS_EXPORT_DIR: what an agent loads (e.g. ~/.claude/skills) is kept in sync.
    export_dir = tmp_path / "agent-skills"
    env = {**os.environ, **fresh_store_env, "ULTRON_HOME": str(home), "ULTRON_SENSOR_INTERVAL_SECONDS": "2",
           "ULTRON_API_PORT": str(api_port), "ULTRON_EMBEDDING_PROVIDER": "local",
           "ULTRON_SKILLS_EXPORT_DIR": str(export_dir)}
    env.pop("ULTRON_API_TOKEN", None)
    log = open(tmp_path / "dev.log", "w")

    def log_tail() -> str:
        log.flush()
        return (tmp_path / "dev.log").read_text()[-6000:]

    proc = subprocess.Popen([sys.executable, "-m", "ultron.cli", "dev", "--port", str(port)], env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        examples = None

        def ingested():
            nonlocal examples
            data = graphql(port)
            materialized = {m["partition"] for m in data["assetOrError"]["assetMaterializations"]}
            scored = {m["partition"] for m in data["scores"]["assetMaterializations"]}
            examples = sorted(p.name for p in (home / "inbox" / "examples").glob("*.jsonl"))
            want = {f"examples:examples/{name}" for name in examples}
            return data if examples and materialized == want and scored == want else None

        data = wait_for(ingested, 240, "the examples to be ingested and scored", log_tail, proc)
        assert len(examples) == len(os.listdir(os.path.join(os.path.dirname(__file__), "../../examples")))
        assert set(data["assetNodes"][0]["partitionKeys"]) == {f"examples:examples/{n}" for n in examples}

        # The automation sensor carries them on: skills on disk, an SFT export that passed its check.
        def downstream():
            d = graphql(port)
            skill_files = list((home / "skills").glob("*/SKILL.md"))
            exported = list(export_dir.glob("*/SKILL.md")) if export_dir.is_dir() else []
            [check] = d["checks"][0]["assetChecksOrError"]["checks"]
            execution = check["executionForLatestMaterialization"]
            passed = execution and execution["evaluation"] and execution["evaluation"]["success"]
            ready = d["skills"]["assetMaterializations"] and skill_files and exported and passed
            return (skill_files, d) if ready else None

        skill_files, data = wait_for(downstream, 300, "skills and a checked SFT export", log_tail, proc)
        text = skill_files[0].read_text()
        assert text.startswith("---") and "Steps" in text and "Evidence" in text
        # A loadable <name>/SKILL.md per current skill in the export directory, and nothing else.
        assert validate_tree(export_dir) == {}
        current = {p.parent.name.rsplit("-", 1)[0] for p in skill_files}
        assert {p.parent.name for p in export_dir.glob("*/SKILL.md")} <= current
        manifests = list((home / "sft").glob("*/manifest.json"))
        assert manifests and json.loads(manifests[0].read_text())["counts"]["exported"] >= 5

        # The authenticated HTTP API beside the UI.
        token = (home / "api_token").read_text().strip()
        base = f"http://127.0.0.1:{api_port}"
        assert http_get(f"{base}/health")[0] == 200
        assert http_get(f"{base}/stats")[0] == 401
        status, stats = http_get(f"{base}/stats", token)
        assert status == 200 and stats["skills"]["current"] >= 1, stats
        slug = json.loads((skill_files[0].parent / "_meta.json").read_text()).get("slug") or \
            skill_files[0].parent.name.rsplit("-", 1)[0]
        assert http_get(f"{base}/skills/{slug}", token)[0] == 200

        # A backfill over every session partition and the whole-store assets completes.
        launched = graphql(port, BACKFILL, {"params": {
            "assetSelection": [{"path": [a]} for a in ALL_ASSETS], "allPartitions": True}})
        result = launched["launchPartitionBackfill"]
        assert result["__typename"] == "LaunchBackfillSuccess", result

        def backfill_done():
            s = graphql(port, BACKFILL_STATUS, {"id": result["backfillId"]})["partitionBackfillOrError"]["status"]
            return s if s not in ("REQUESTED", "CANCELING", "FAILING") else None

        assert wait_for(backfill_done, 300, "the backfill", log_tail, proc) in ("COMPLETED", "COMPLETED_SUCCESS")
        status = subprocess.run([sys.executable, "-m", "ultron.cli", "status", "--json"], env=env,
                                capture_output=True, text=True, timeout=60)
        tables = json.loads(status.stdout)["tables"]
        assert tables["trajectory_records"] == len(examples), status.stderr
        # A console a person can read: no Dagster beta or supersession warnings, no warning
        # about the dagster.yaml it copied into DAGSTER_HOME, and logs at INFO: none of the
        # DEBUG lines, one per run event (STEP_START, HANDLED_OUTPUT, RUN_SUCCESS...), that
        # Dagster's console logger prints by default in the sensor's, automation's and backfill's runs.
        console = (tmp_path / "dev.log").read_text()
        assert "BetaWarning" not in console and "SupersessionWarning" not in console, console[-3000:]
        assert "will not be used to configure Dagster" not in console
        plain = re.sub(r"\x1b\[[0-9;]*m", "", console)  # the daemon's lines are colored
        debug = [line for line in plain.splitlines() if " - DEBUG - " in line]
        assert not debug, f"{len(debug)} DEBUG lines in the console, e.g.\n" + "\n".join(debug[:10])
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise AssertionError("ultron dev did not stop within 60 s of SIGINT\n" + log_tail())
        finally:
            log.close()
    # Everything it started has stopped, the database and the API included.
    deadline = time.time() + 15
    while True:
        leftovers = subprocess.run(["pgrep", "-af", str(home)], capture_output=True, text=True).stdout
        api_left = subprocess.run(["pgrep", "-af", f"ultron.api --host 127.0.0.1 --port {api_port}"],
                                  capture_output=True, text=True).stdout
        if not (leftovers or api_left) or time.time() > deadline:
            break
        time.sleep(0.5)
    assert leftovers == "" and api_left == "", leftovers + api_left
