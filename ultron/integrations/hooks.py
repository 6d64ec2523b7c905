"""``ultron hook <agent> <event>``: what runs inside the agent's lifecycle.

A hook must never hurt the agent. Whatever happens (a malformed payload, a missing
transcript, a stopped server, a slow disk) the process exits 0 within the hard timeout,
prints nothing it was not sure of, and logs the reason under ``$ULTRON_HOME/logs``.

* **session-start** asks the running server for the context bundle of the project the
  session starts in, and prints it as the agent's ``additionalContext``. Without a server
  it prints nothing: loading the embedding model here would blow the agent's start-up.
* **stop, pre-compact, session-end** hand the transcript to Ultron. A transcript under a
  directory Ultron watches (``ULTRON_WATCH``) is left where it is; any other is copied into
  the inbox under the agent's id, so the sensor ingests it, and a transcript that grew since
  is picked up as an appended file. When a server runs, it is also asked to ingest the file
  at once.

Start-up time is most of a hook's cost, so it imports little. It speaks HTTP/1.1 to the
local server over a plain socket: importing httpx costs ~0.3 s and even the standard
``http.client`` ~45 ms (it pulls in ``ssl`` and the ``email`` parser), a sixth of the
start-up budget, for one POST to a server on this machine. Log lines are appended to the
file directly (the logging package and its handlers cost ~20 ms).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ultron.integrations.agents import HOOK_EVENTS, Agent, agent as find_agent
from ultron.integrations.atomic import replace_file
from ultron.integrations.project import find_project
from ultron.settings import Settings

LOG_FILE = "hooks.log"
#: The log is rotated to hooks.log.1 past this size, so it never grows without bound.
LOG_MAX_BYTES = 1 << 20
#: Largest payload read from stdin; agents send a few hundred bytes.
MAX_PAYLOAD_BYTES = 1 << 20
BUNDLE_TOKENS = 1200


@dataclass
class HookResult:
    output: str = ""
    #: what happened, for the log and for tests
    outcome: str = ""


class ServerRefused(Exception):
    """The server answered with an error status."""

    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


def write_log(settings: Settings, level: str, message: str) -> None:
    """One line in ``$ULTRON_HOME/logs/hooks.log``; a log that cannot be written is skipped."""
    try:
        path = settings.home / "logs" / LOG_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            if path.stat().st_size > LOG_MAX_BYTES:
                os.replace(path, path.with_name(LOG_FILE + ".1"))
        except FileNotFoundError:
            pass
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(f"{stamp} {level} {message}\n")
    except OSError:
        pass


def parse_payload(raw: bytes) -> dict[str, Any]:
    """The agent's JSON object; anything else is an error with a reason."""
    if len(raw) > MAX_PAYLOAD_BYTES:
        raise ValueError(f"payload of {len(raw)} bytes is larger than {MAX_PAYLOAD_BYTES}")
    try:
        payload = json.loads(raw.decode("utf-8", errors="replace") or "{}")
    except json.JSONDecodeError as exc:
        raise ValueError(f"payload is not JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}") from None
    if not isinstance(payload, dict):
        raise ValueError(f"payload is a JSON {type(payload).__name__}, not an object")
    return payload


# -- the server ---------------------------------------------------------------------------------


def _post(settings: Settings, route: str, body: dict[str, Any], timeout: float) -> dict[str, Any]:
    """POST JSON, read the JSON answer (Content-Length or chunked), one connection."""
    host = settings.api_host if settings.api_host not in ("0.0.0.0", "::") else "127.0.0.1"
    data = json.dumps(body).encode("utf-8")
    token = settings.local_api_token()
    head = (f"POST {route} HTTP/1.1\r\nHost: {host}:{settings.api_port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\nConnection: close\r\n"
            + (f"Authorization: Bearer {token}\r\n" if token else "") + "\r\n")
    with socket.create_connection((host, settings.api_port), timeout=max(0.05, timeout)) as conn:
        conn.sendall(head.encode("latin-1") + data)
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    status, headers, payload = _response(b"".join(chunks))
    if status >= 300:
        raise ServerRefused(status)
    return json.loads(payload or b"{}")


def _response(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    head, sep, payload = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if not sep or len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise ValueError(f"not an HTTP response: {lines[0][:80]!r}")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    if headers.get("transfer-encoding", "").lower() == "chunked":
        payload = _unchunk(payload)
    elif "content-length" in headers:
        payload = payload[: int(headers["content-length"])]
    return int(parts[1]), headers, payload


def _unchunk(data: bytes) -> bytes:
    out, at = [], 0
    while True:
        end = data.index(b"\r\n", at)
        size = int(data[at:end].split(b";")[0], 16)
        if size == 0:
            return b"".join(out)
        out.append(data[end + 2: end + 2 + size])
        at = end + 2 + size + 2


# -- session start ------------------------------------------------------------------------------


def session_start(agent: Agent, payload: dict[str, Any], settings: Settings, deadline: float) -> HookResult:
    project = find_project(payload.get("cwd"))
    body: dict[str, Any] = {"task": project.task(), "token_budget": BUNDLE_TOKENS}
    session_id = payload.get("session_id")
    if isinstance(session_id, str) and session_id:
        body["session_id"] = session_id
    if project.root is not None:
        body["repo_root"] = str(project.root)
    try:
        bundle = _post(settings, "/context", body, deadline - time.monotonic())
    except ServerRefused as exc:
        return HookResult(outcome=f"no context: the server refused ({exc})")
    except (OSError, ValueError) as exc:
        return HookResult(outcome=f"no context: server not reachable ({exc})")
    items = bundle.get("items") or []
    if not items:
        return HookResult(outcome=f"no context: nothing stored matches {project.task()!r}")
    output = {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": bundle["text"]}}
    return HookResult(json.dumps(output), f"context of {len(items)} items for {project.task()!r}")


# -- transcripts --------------------------------------------------------------------------------


def _watched(path: Path, agent: Agent, settings: Settings) -> bool:
    for agent_id, root in settings.watch:
        if agent_id == agent.agent_id:
            try:
                path.relative_to(root)
                return True
            except ValueError:
                continue
    return False


def inbox_copy(path: Path, agent: Agent, settings: Settings) -> Path:
    """Where the transcript lives in the inbox: under the agent's id, keeping the path below
    the agent's own sessions directory (so two projects' sessions never collide)."""
    sessions = Path.home() / agent.sessions_dir
    try:
        rel = path.relative_to(sessions)
    except ValueError:
        rel = Path(path.parent.name) / path.name if path.parent.name else Path(path.name)
    rel = Path(*[part.lstrip(".") or "_" for part in rel.parts])  # hidden segments are skipped
    return settings.inbox[0] / agent.agent_id / rel


def copy_transcript(source: Path, target: Path) -> bool:
    """Copy if the source is new or changed; True when copied. Written through a hidden
    temporary file and a rename, so the sensor never reads half a transcript."""
    st = source.stat()
    try:
        tt = target.stat()
        if tt.st_size == st.st_size and tt.st_mtime_ns == st.st_mtime_ns:
            return False
    except FileNotFoundError:
        pass
    with open(source, "rb") as src:
        replace_file(target, lambda out: shutil.copyfileobj(src, out, 1 << 20), mode=0o600,
                     times_ns=(st.st_atime_ns, st.st_mtime_ns))
    return True


def hand_over(agent: Agent, payload: dict[str, Any], settings: Settings, deadline: float) -> HookResult:
    raw = payload.get("transcript_path")
    if not isinstance(raw, str) or not raw.strip():
        return HookResult(outcome="no transcript_path in the payload")
    source = Path(raw).expanduser()
    if not source.is_file():
        return HookResult(outcome=f"transcript {source} does not exist")
    if _watched(source, agent, settings):
        target, note = source, "watched in place"
    else:
        target = inbox_copy(source, agent, settings)
        note = "copied to the inbox" if copy_transcript(source, target) else "unchanged in the inbox"
    try:
        _post(settings, "/ingest", {"paths": [str(target)], "agent_id": agent.agent_id},
              deadline - time.monotonic())
        note += "; the server ingested it"
    except ServerRefused as exc:
        note += f"; the server refused it ({exc}), the sensor will take it"
    except (OSError, ValueError):
        note += "; no server, the sensor will take it"
    return HookResult(outcome=f"{source}: {note}")


# -- entry point --------------------------------------------------------------------------------


def run(agent_name: str, event: str, raw: bytes, settings: Settings, *, timeout: float | None = None
        ) -> HookResult:
    """Run one hook; raises on failure (``main`` turns every failure into a silent exit 0)."""
    agent = find_agent(agent_name)
    if event not in HOOK_EVENTS:
        raise ValueError(f"unknown hook event {event!r}: use {', '.join(HOOK_EVENTS)}")
    deadline = time.monotonic() + (settings.hook_timeout_seconds if timeout is None else timeout) * 0.8
    payload = parse_payload(raw)
    if event == "session-start":
        return session_start(agent, payload, settings, deadline)
    return hand_over(agent, payload, settings, deadline)


def main(agent_name: str, event: str, stdin: Any, stdout: Any, settings: Settings) -> int:
    """The CLI's hook command: always 0, within the hard timeout, output only on success."""
    timeout = settings.hook_timeout_seconds
    # The hard stop: whatever is still running when time is up (a hung DNS lookup, a disk
    # that does not answer), the process leaves with 0 and nothing on stdout.
    timer = threading.Timer(timeout, os._exit, args=(0,))
    timer.daemon = True
    timer.start()
    started = time.monotonic()
    try:
        raw = stdin.buffer.read(MAX_PAYLOAD_BYTES + 1) if hasattr(stdin, "buffer") else stdin.read().encode()
        result = run(agent_name, event, raw, settings, timeout=timeout)
        if result.output:
            stdout.write(result.output)
            stdout.flush()
        write_log(settings, "INFO", f"{agent_name} {event}: {result.outcome} "
                                    f"({(time.monotonic() - started) * 1000:.0f} ms)")
    except Exception as exc:  # noqa: BLE001 - a hook reports to its log, never to the agent
        write_log(settings, "WARNING", f"{agent_name} {event} failed: {type(exc).__name__}: {exc}")
    finally:
        timer.cancel()
    return 0
