"""The loop with a real agent's hooks, against a live server on the test database: a session
starting in a repository gets what Ultron knows about it, a session that stops is handed to
the server, and a real Claude Code CLI finds Ultron's MCP server after `ultron connect`."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.conftest import TEST_HOME, database_env, write_jsonl
from tests.e2e.test_api import TOKEN, start_server


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("hook_root")


@pytest.fixture(scope="module")
def server(db, root, tmp_path_factory):
    live = start_server(tmp_path_factory.mktemp("hook_log") / "server.log", env={"ULTRON_INGEST_ROOTS": str(root)})
    yield live
    assert live.stop(signal.SIGTERM) == 0, live.output()[-3000:]


def run_hook(server, root: Path, event: str, payload: dict) -> subprocess.CompletedProcess:
    env = {**os.environ, "ULTRON_HOME": str(root / "ultron"), "ULTRON_API_PORT": server.url.rsplit(":", 1)[1],
           "ULTRON_API_TOKEN": TOKEN, "ULTRON_HOOK_TIMEOUT_SECONDS": "10"}
    return subprocess.run([sys.executable, "-m", "ultron.cli", "hook", "claude-code", event],
                          input=json.dumps(payload).encode(), capture_output=True, env=env, timeout=60)


def test_a_session_starting_in_a_project_gets_what_was_learned_there(server, client, root):
    memory = client.upload_memory(
        "The invoice service's Python tests need the Postgres container up: docker compose up -d db first.",
        "pytest in the invoice service fails with connection refused on port 5432",
        "Run `docker compose up -d db`, wait for healthy, then run pytest.", ["python", "docker", "invoice"])
    repo = root / "invoice"
    repo.mkdir()
    (repo / "pyproject.toml").write_text("[project]\nname = 'invoice'\n")
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    done = run_hook(server, root, "session-start", {"session_id": "cc-1", "cwd": str(repo), "source": "startup",
                                                    "hook_event_name": "SessionStart", "transcript_path": None})
    assert done.returncode == 0, done.stderr
    context = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert f"[memory:{memory.id}]" in context and "docker compose up -d db" in context
    with client.db.engine.connect() as conn:  # recorded against the agent's session, for its outcome
        served = conn.execute(sa.text("SELECT item_kind, item_id FROM bundle_serves WHERE session_id = 'cc-1'")).all()
    assert ("memory", memory.id) in {tuple(r) for r in served}


def test_a_stopped_session_is_in_the_inbox_and_ingested_by_the_server(server, client, root):
    transcript = write_jsonl(root / "claude" / "projects" / "-src-invoice" / "cc-2.jsonl", [
        {"type": "user", "sessionId": "cc-2", "uuid": "u1", "message": {"role": "user", "content": "run the tests"}},
        {"type": "assistant", "sessionId": "cc-2", "uuid": "a1",
         "message": {"role": "assistant", "content": [{"type": "text", "text": "All 12 tests pass."}]}},
    ])
    done = run_hook(server, root, "stop", {"session_id": "cc-2", "transcript_path": str(transcript),
                                           "cwd": "/src/invoice", "hook_event_name": "Stop"})
    assert (done.returncode, done.stdout) == (0, b"")
    copied = root / "ultron" / "inbox" / "claude-code" / "-src-invoice" / "cc-2.jsonl"
    assert copied.read_bytes() == transcript.read_bytes()
    log = (root / "ultron" / "logs" / "hooks.log").read_text()
    assert "the server ingested it" in log, log
    keys = client.stored_partition_keys()
    assert any(k.startswith("claude-code:") and k.endswith("cc-2.jsonl") for k in keys), keys


@pytest.mark.skipif(shutil.which("claude") is None,
                    reason="Claude Code CLI not installed (npm install -g @anthropic-ai/claude-code)")
def test_a_real_claude_code_lists_ultron_as_connected(db, tmp_path):
    """The real agent reads what connect wrote and starts Ultron's MCP server (no API key needed)."""
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, **database_env(), "ULTRON_HOME": str(TEST_HOME), "HOME": str(home)}
    cli = [sys.executable, "-m", "ultron.cli"]
    connected = subprocess.run([*cli, "connect", "claude-code", "--home", str(home)], capture_output=True, text=True,
                               env=env, timeout=60)
    assert connected.returncode == 0, connected.stderr
    try:
        listed = subprocess.run(["claude", "mcp", "list"], capture_output=True, text=True, env=env, cwd=home,
                                timeout=180)
        assert "ultron" in listed.stdout and "Connected" in listed.stdout, listed.stdout + listed.stderr
    finally:
        subprocess.run([*cli, "disconnect", "claude-code", "--home", str(home)], env=env, timeout=60, check=True,
                       capture_output=True)


def test_search_and_context_ask_the_running_server_instead_of_loading_the_model(server, client):
    """With `ultron serve` up for this store, the CLI's embedding commands are answered there
    (no model load in the command's process); with a wrong token they quietly run locally."""
    memory = client.upload_memory("Pin numpy<2 for the old pandas wheels", "pandas import fails after an upgrade",
                                  "pip install 'numpy<2'")
    env = {**os.environ, **database_env(), "ULTRON_HOME": str(TEST_HOME),
           "ULTRON_API_PORT": server.url.rsplit(":", 1)[1], "ULTRON_API_TOKEN": TOKEN}
    cli = [sys.executable, "-m", "ultron.cli"]
    found = subprocess.run([*cli, "search", "numpy pandas wheels"], capture_output=True, text=True, env=env,
                           timeout=120)
    assert found.returncode == 0, found.stderr
    assert memory.id[:8] in found.stdout and "answered by the server" in found.stderr
    as_json = subprocess.run([*cli, "search", "numpy pandas wheels", "--json"], capture_output=True, text=True,
                             env=env, timeout=120)
    assert json.loads(as_json.stdout)[0]["id"] == memory.id
    bundle = subprocess.run([*cli, "context", "upgrade pandas"], capture_output=True, text=True, env=env, timeout=120)
    assert f"[memory:{memory.id}]" in bundle.stdout and "answered by the server" in bundle.stderr
    other = subprocess.run([*cli, "search", "numpy pandas wheels"], capture_output=True, text=True, timeout=120,
                           env={**env, "ULTRON_API_TOKEN": "another-stores-token-0000"})
    assert other.returncode == 0 and memory.id[:8] in other.stdout and "answered by the server" not in other.stderr


@pytest.mark.skipif(shutil.which("claude") is None,
                    reason="Claude Code CLI not installed (npm install -g @anthropic-ai/claude-code)")
def test_readmes_claude_code_lines_work_as_written_in_order(db, tmp_path):
    """README's "Connect your agent" lines for Claude Code, run one after the other as a reader
    would (from the checkout, in a fresh HOME): every one succeeds, and Claude Code lists each
    server they add under its own name."""
    repo = Path(__file__).resolve().parents[2]
    section = (repo / "README.md").read_text().split("## Connect your agent", 1)[1].split("\n## ", 1)[0]
    lines = [ln.strip() for ln in section.splitlines()
             if ln.startswith("    ") and ln.strip().startswith((".venv/bin/ultron connect claude-code", "claude "))]
    assert len(lines) >= 2, section
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, **database_env(), "ULTRON_HOME": str(TEST_HOME), "HOME": str(home),
           "ULTRON_API_TOKEN": "readme-token-0123456789",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    if not (repo / ".venv/bin/ultron").exists():
        pytest.skip("README's lines use .venv/bin/ultron, and this checkout has no .venv")
    try:
        for line in lines:
            done = subprocess.run(["bash", "-c", line], cwd=repo, env=env, capture_output=True, text=True,
                                  timeout=180)
            assert done.returncode == 0, f"{line}\n{done.stdout}{done.stderr}"
        listed = subprocess.run(["claude", "mcp", "list"], capture_output=True, text=True, env=env, cwd=repo,
                                timeout=180).stdout
        assert "ultron:" in listed and "ultron-remote:" in listed, listed
    finally:
        subprocess.run([sys.executable, "-m", "ultron.cli", "disconnect", "claude-code"], env=env, timeout=60,
                       capture_output=True, cwd=repo)
