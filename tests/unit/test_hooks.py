"""`ultron hook` as an agent runs it: a subprocess fed the agent's JSON on stdin. Whatever
the payload or the state of the server, the agent gets exit 0 within the timeout, and
output only when there is context to give."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.conftest import write_jsonl


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def hook(tmp_path: Path, agent: str, event: str, payload: bytes | str | dict, *, port: int | None = None,
         extra_env: dict[str, str] | None = None, timeout: float = 30) -> tuple[subprocess.CompletedProcess, float]:
    env = {**os.environ, "ULTRON_HOME": str(tmp_path / "ultron"), "ULTRON_API_PORT": str(port or _closed_port()),
           "ULTRON_API_TOKEN": "hook-test-token", **(extra_env or {})}
    data = json.dumps(payload).encode() if isinstance(payload, dict) else (
        payload.encode() if isinstance(payload, str) else payload)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "ultron.cli", "hook", agent, event], input=data,
                          capture_output=True, env=env, timeout=timeout)
    return done, time.monotonic() - started


def log_text(tmp_path: Path) -> str:
    path = tmp_path / "ultron" / "logs" / "hooks.log"
    return path.read_text() if path.exists() else ""


def transcript(path: Path, turns: int = 2) -> Path:
    rows = []
    for i in range(turns):
        rows.append({"type": "user", "sessionId": "s-1", "cwd": "/tmp", "uuid": f"u{i}",
                     "message": {"role": "user", "content": f"question {i}"}})
        rows.append({"type": "assistant", "sessionId": "s-1", "cwd": "/tmp", "uuid": f"a{i}",
                     "message": {"role": "assistant", "content": [{"type": "text", "text": f"answer {i}"}]}})
    return write_jsonl(path, rows)


# -- documented payloads, no server -----------------------------------------------------------------

CLAUDE_START = {"session_id": "abc-123", "transcript_path": "/nonexistent/abc-123.jsonl", "cwd": "/tmp",
                "hook_event_name": "SessionStart", "source": "startup"}
CODEX_START = {"session_id": "0199a213-81c0", "transcript_path": None, "cwd": "/tmp", "hook_event_name": "SessionStart",
               "model": "gpt-5-codex", "permission_mode": "default", "source": "resume"}


@pytest.mark.parametrize("agent,payload", [("claude-code", CLAUDE_START), ("codex", CODEX_START)])
def test_session_start_without_a_server_is_silent_and_quick(tmp_path, agent, payload):
    done, took = hook(tmp_path, agent, "session-start", payload)
    assert (done.returncode, done.stdout) == (0, b"")
    assert took < 2.5
    assert "server not reachable" in log_text(tmp_path)


@pytest.mark.parametrize("payload,logged", [
    (b"not json at all", "payload is not JSON (line 1, column 1)"),
    (b"[1, 2, 3]", "payload is a JSON list, not an object"),
    (b"\xff\xfe\x00garbage", "payload is not JSON"),
    (b"", "server not reachable"),  # no payload at all: run for the working directory
    (b"{" + b" " * (2 << 20) + b"}", "larger than"),
])
def test_malformed_payloads_exit_0_with_no_output_and_a_located_log_line(tmp_path, payload, logged):
    done, _ = hook(tmp_path, "claude-code", "session-start", payload)
    assert (done.returncode, done.stdout) == (0, b"")
    assert logged in log_text(tmp_path)


@pytest.mark.parametrize("args,env", [
    (("cursor", "session-start"), {}),
    (("claude-code", "teleport"), {}),
    (("claude-code", "session-start"), {"ULTRON_HOOK_TIMEOUT_SECONDS": "soon"}),
    (("claude-code", "session-start"), {"ULTRON_EMBEDDING_DIM": "-4"}),
])
def test_wrong_names_and_broken_settings_still_exit_0(tmp_path, args, env):
    done, _ = hook(tmp_path, *args, CLAUDE_START, extra_env=env)
    assert (done.returncode, done.stdout) == (0, b"")


def test_a_missing_argument_still_exits_0(tmp_path):
    done = subprocess.run([sys.executable, "-m", "ultron.cli", "hook"], input=b"{}", capture_output=True,
                          env={**os.environ, "ULTRON_HOME": str(tmp_path / "ultron")}, timeout=30)
    assert (done.returncode, done.stdout) == (0, b"")


@pytest.mark.parametrize("event", ["stop", "pre-compact", "session-end"])
def test_a_missing_transcript_is_logged_not_raised(tmp_path, event):
    done, _ = hook(tmp_path, "claude-code", event, {"session_id": "x", "transcript_path": str(tmp_path / "gone.jsonl"),
                                                    "cwd": "/tmp", "hook_event_name": "Stop"})
    assert (done.returncode, done.stdout) == (0, b"")
    assert "does not exist" in log_text(tmp_path)
    done, _ = hook(tmp_path, "claude-code", event, {"session_id": "x", "hook_event_name": "Stop"})
    assert done.returncode == 0 and "no transcript_path" in log_text(tmp_path)


def test_a_server_that_never_answers_cannot_hold_the_agent(tmp_path):
    with socket.socket() as listener:  # accepts connections (the backlog), never replies
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        done, took = hook(tmp_path, "claude-code", "session-start", CLAUDE_START, port=port,
                          extra_env={"ULTRON_HOOK_TIMEOUT_SECONDS": "1"})
    assert (done.returncode, done.stdout) == (0, b"")
    assert took < 1.0 + 1.5  # the timeout plus the interpreter's start-up


# -- transcripts into the inbox -------------------------------------------------------------------


def test_stop_copies_the_transcript_into_the_inbox_and_picks_up_what_it_grew(tmp_path):
    source = transcript(tmp_path / "agent" / "projects" / "-work-shop" / "s-1.jsonl")
    payload = {"session_id": "s-1", "transcript_path": str(source), "cwd": "/work/shop", "hook_event_name": "Stop"}
    done, _ = hook(tmp_path, "claude-code", "stop", payload)
    assert (done.returncode, done.stdout) == (0, b"")
    copied = tmp_path / "ultron" / "inbox" / "claude-code" / "-work-shop" / "s-1.jsonl"
    assert copied.read_bytes() == source.read_bytes()
    assert "copied to the inbox; no server" in log_text(tmp_path)
    first = copied.read_bytes()

    transcript(source, turns=4)  # the session went on: the file grew
    hook(tmp_path, "claude-code", "session-end", {**payload, "hook_event_name": "SessionEnd", "reason": "exit"})
    assert copied.read_bytes() == source.read_bytes() and copied.read_bytes().startswith(first)
    hook(tmp_path, "claude-code", "pre-compact", {**payload, "hook_event_name": "PreCompact", "trigger": "auto"})
    assert "unchanged in the inbox" in log_text(tmp_path)
    assert not [p for p in copied.parent.iterdir() if p.name.startswith(".")]  # no temporary file left


def test_a_transcript_under_a_watched_directory_is_not_copied(tmp_path):
    watched = tmp_path / "agent" / "sessions"
    source = transcript(watched / "2026" / "11" / "28" / "rollout-2026-11-28T10-00-00-abc.jsonl")
    done, _ = hook(tmp_path, "codex", "stop", {"session_id": "abc", "transcript_path": str(source), "cwd": "/tmp",
                                               "hook_event_name": "Stop"},
                   extra_env={"ULTRON_WATCH": f"codex:{watched}"})
    assert done.returncode == 0
    assert not (tmp_path / "ultron" / "inbox").exists()
    assert "watched in place" in log_text(tmp_path)


# -- session start with a server -----------------------------------------------------------------


class _FakeServer(BaseHTTPRequestHandler):
    seen: list[dict] = []

    def do_POST(self) -> None:  # noqa: N802 - the http.server protocol
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
        answer = {"text": "# Context from Ultron\n- [memory:m1] (error) pin numpy<2 for the old wheels",
                  "items": [{"kind": "memory", "id": "m1"}], "tokens": 20}
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def test_session_start_answers_with_the_projects_bundle_as_additional_context(tmp_path):
    repo = tmp_path / "shop"
    (repo / "src").mkdir(parents=True)
    (repo / "pyproject.toml").write_text("[project]\nname = 'shop'\n")
    subprocess.run(["git", "init", "-q", "-b", "feature/cart", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "remote", "add", "origin", "https://bot:s3cret@example.com/acme/shop.git"],
                   check=True)
    _FakeServer.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        done, _ = hook(tmp_path, "claude-code", "session-start", {**CLAUDE_START, "cwd": str(repo / "src")},
                       port=server.server_address[1])
    finally:
        server.shutdown()
    assert done.returncode == 0
    out = json.loads(done.stdout)
    assert out["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert "pin numpy<2" in out["hookSpecificOutput"]["additionalContext"]
    [request] = _FakeServer.seen
    assert request["path"] == "/context" and request["auth"] == "Bearer hook-test-token"
    body = request["body"]
    assert body["session_id"] == "abc-123" and body["repo_root"] == str(repo)
    assert "shop" in body["task"] and "Python" in body["task"] and "feature/cart" in body["task"]
    assert "s3cret" not in json.dumps(body)


def test_the_hooks_http_reader_takes_sized_and_chunked_answers_and_refuses_garbage():
    from ultron.integrations.hooks import _response

    sized = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{"items":1}trailing'
    assert _response(sized)[0] == 200 and _response(sized)[2] == b'{"items":1}'
    chunked = b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{"ite\r\n6;x=1\r\nms":1}\r\n0\r\n\r\n'
    assert _response(chunked)[2] == b'{"items":1}'
    assert _response(b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n")[0] == 401
    with pytest.raises(ValueError, match="not an HTTP response"):
        _response(b"SSH-2.0-OpenSSH_9.6\r\n")
