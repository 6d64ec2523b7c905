"""The `ultron` command line as a user runs it."""

import json
import os
import subprocess
import sys

from tests.conftest import EXTERNAL, TEST_HOME, write_jsonl

ULTRON = [sys.executable, "-m", "ultron.cli"]


def run(*args, **kw):
    env = {**os.environ, "ULTRON_HOME": str(TEST_HOME), **kw.pop("env", {})}
    return subprocess.run([*ULTRON, *args], capture_output=True, text=True, env=env, timeout=120, **kw)


def test_ingest_and_status(client, tmp_path):
    good = write_jsonl(tmp_path / "s" / "a.jsonl", [{"role": "user", "content": "hi"}, b"{bad\n"])
    out = run("ingest", str(tmp_path / "s"), "--agent-id", "cli-agent")
    assert out.returncode == 0, out.stderr
    assert f"new            1 msgs  {good}" in out.stdout
    assert "line 2: not valid JSON" in out.stdout
    assert "totals: files=1, new=1" in out.stdout

    report = json.loads(run("ingest", str(good), "--agent-id", "cli-agent", "--json").stdout)
    assert report["files"][0]["status"] == "unchanged"
    assert report["files"][0]["problems"][0]["line"] == 2

    status = json.loads(run("status", "--json").stdout)
    assert status["tables"]["trajectory_records"] == 1
    assert status["tables"]["session_messages"] == 1
    assert status["pending"]["sessions_pending_segmentation"] == 1
    assert ("embedded_server" not in status) if EXTERNAL else status["embedded_server"]["running"] is True
    human = run("status").stdout
    assert "trajectory_records" in human and "sessions_pending_segmentation" in human


def test_failures_set_the_exit_code_and_bad_arguments_are_explained(client, tmp_path):
    out = run("ingest", str(tmp_path / "missing.jsonl"), "--agent-id", "cli-agent")
    assert out.returncode == 1 and "path does not exist" in out.stdout
    bad = run("ingest", str(tmp_path), "--agent-id", "not valid")
    assert bad.returncode == 2 and "invalid agent id" in bad.stderr
