"""``ultron connect <agent>`` / ``ultron disconnect <agent>``: install Ultron into an agent.

Connecting writes the agent's hooks (session start asks for context; stop, pre-compact
and session end hand the transcript over), registers the MCP server, and records the
agent's skills directory so skill exports land there. It is idempotent: a second run
finds every entry current and writes nothing.

The first connect keeps each file's original bytes in ``$ULTRON_HOME/connections.json``.
Disconnecting restores those bytes when the file is still exactly what Ultron wrote;
when someone changed it since, only Ultron's own entries are taken out, so their change
survives.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ultron.integrations import config_files as cf
from ultron.integrations.agents import Agent, AgentFiles, HookEvent, agent as find_agent

REGISTRY = "connections.json"
#: Settings the hook and the MCP server need to find this store, carried into the agent's
#: configuration when set. The API token is not: it would sit in clear in the agent's files.
CARRIED_ENV = ("ULTRON_API_HOST", "ULTRON_API_PORT", "ULTRON_DATABASE_URL", "ULTRON_EMBEDDED_PORT")


@dataclass(frozen=True)
class Change:
    path: Path
    action: str  # created | updated | unchanged | restored | cleaned | deleted | recorded
    what: str

    def line(self) -> str:
        return f"{self.action:9}  {self.path}  ({self.what})"


def ultron_command() -> list[str]:
    """How the agent starts this installation's ``ultron``: the script beside this Python
    (a venv's bin), else the one on PATH, else ``python -m ultron.cli``."""
    beside = Path(sys.executable).with_name("ultron")
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside)]
    found = shutil.which("ultron")
    if found:
        return [os.path.abspath(found)]
    return [sys.executable, "-m", "ultron.cli"]


def carried_env(home: Path, environ: dict[str, str] | None = None) -> dict[str, str]:
    environ = dict(os.environ if environ is None else environ)
    env = {"ULTRON_HOME": str(home.resolve())}
    env.update({k: environ[k] for k in CARRIED_ENV if environ.get(k)})
    return env


def hook_command(agent: Agent, event: HookEvent, env: dict[str, str], exe: list[str]) -> str:
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    return f"{prefix} {shlex.join(exe)} hook {agent.name} {event.ultron_event}"


def _server_spec(agent: Agent, env: dict[str, str], exe: list[str]) -> dict[str, Any]:
    spec: dict[str, Any] = {"command": exe[0], "args": [*exe[1:], "mcp"], "env": dict(env)}
    return {"type": "stdio", **spec} if agent.name == "claude-code" else spec


# -- the registry of connections -----------------------------------------------------------------


def _registry_path(ultron_home: Path) -> Path:
    return ultron_home / REGISTRY


def load_registry(ultron_home: Path) -> dict[str, Any]:
    try:
        data = json.loads(_registry_path(ultron_home).read_text("utf-8"))
    except (FileNotFoundError, ValueError):
        return {"connections": {}}
    return data if isinstance(data.get("connections"), dict) else {"connections": {}}


def _save_registry(ultron_home: Path, data: dict[str, Any]) -> None:
    cf.write_atomic(_registry_path(ultron_home), cf.dump_json(data))


def skills_dirs(ultron_home: Path) -> list[Path]:
    """The skills directories of every connected agent (the skills export writes there too)."""
    conns = load_registry(ultron_home)["connections"].values()
    return sorted({Path(c["skills"]) for c in conns if isinstance(c, dict) and c.get("skills")})


def _key(agent: Agent, scope: str, files: AgentFiles) -> str:
    return f"{agent.name}:{scope}:{files.hooks}"


def _sha(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


# -- connect / disconnect -------------------------------------------------------------------------


def _edits(agent: Agent, files: AgentFiles, env: dict[str, str], exe: list[str], add: bool
           ) -> list[tuple[Path, str, Any]]:
    """(path, what, edit(path, raw bytes) -> new bytes) for every file of the agent. An edit
    that changes nothing returns ``raw`` itself, so a file's formatting is never touched
    for nothing."""
    def json_edit(change: Any) -> Any:
        def edit(path: Path, raw: bytes | None) -> bytes | None:
            before = cf.load_json(path, raw)
            after = change(json.loads(json.dumps(before)))
            return raw if after == before else cf.dump_json(after)
        return edit

    def hooks(doc: dict[str, Any]) -> dict[str, Any]:
        return (cf.with_hooks(doc, agent.events, lambda e: hook_command(agent, e, env, exe)) if add
                else cf.without_hooks(doc))

    spec = _server_spec(agent, env, exe)

    def json_server(doc: dict[str, Any]) -> dict[str, Any]:
        return cf.with_json_server(doc, spec) if add else cf.without_json_server(doc)

    def toml_server_edit(path: Path, raw: bytes | None) -> bytes | None:
        doc = cf.load_toml(path, raw)
        doc = (cf.with_toml_server(doc, spec, hooks_flag=True) if add else cf.without_toml_server(doc))
        new = tomlkit_dumps(doc)
        return raw if raw is not None and new == raw else new

    hooks_what = "hooks: " + ", ".join(e.agent_event for e in agent.events)
    if agent.name == "claude-code":
        return [(files.hooks, hooks_what, json_edit(hooks)), (files.mcp, "MCP server 'ultron'", json_edit(json_server))]
    return [(files.hooks, hooks_what, json_edit(hooks)),
            (files.mcp, "MCP server 'ultron', features.codex_hooks", toml_server_edit)]


def tomlkit_dumps(doc: Any) -> bytes:
    import tomlkit

    return tomlkit.dumps(doc).encode("utf-8")


def connect(agent_name: str, scope: str, *, home: Path, project: Path, ultron_home: Path,
            environ: dict[str, str] | None = None, exe: list[str] | None = None) -> list[Change]:
    agent = find_agent(agent_name)
    files = agent.files(scope, home, project)
    env = carried_env(ultron_home, environ)
    exe = exe or ultron_command()
    registry = load_registry(ultron_home)
    record = registry["connections"].setdefault(_key(agent, scope, files), {
        "agent": agent.name, "scope": scope, "files": {}})
    record["skills"] = str(files.skills)
    removals = {str(p): edit for p, _, edit in _edits(agent, files, env, exe, add=False)}
    planned = []
    for path, what, edit in _edits(agent, files, env, exe, add=True):
        raw = cf.read_bytes(path)
        planned.append((path, what, raw, edit(path, raw)))  # every file parses before any is written
    changes = []
    for path, what, raw, new in planned:
        kept = record["files"].get(str(path))
        if kept is None or kept.get("written") != _sha(raw):
            # first connect, or someone changed the file since: what to restore is the file
            # as it is now, less any Ultron entries left in it
            base = None if raw is None else removals[str(path)](path, raw)
            kept = {"original": None if base is None else base64.b64encode(base).decode("ascii")}
        if new == raw:
            changes.append(Change(path, "unchanged", what))
        else:
            cf.write_atomic(path, new)
            changes.append(Change(path, "created" if raw is None else "updated", what))
        kept["written"] = _sha(new)
        record["files"][str(path)] = kept
    _save_registry(ultron_home, registry)
    changes.append(Change(files.skills, "recorded", "skills export directory"))
    return changes


def disconnect(agent_name: str, scope: str, *, home: Path, project: Path, ultron_home: Path) -> list[Change]:
    agent = find_agent(agent_name)
    files = agent.files(scope, home, project)
    registry = load_registry(ultron_home)
    record = registry["connections"].pop(_key(agent, scope, files), None) or {"files": {}}
    changes = []
    for path, what, edit in _edits(agent, files, {}, ["ultron"], add=False):
        raw = cf.read_bytes(path)
        kept = record["files"].get(str(path))
        if kept is not None and raw is not None and kept.get("written") == _sha(raw):
            original = kept.get("original")
            if original is None:
                path.unlink()
                changes.append(Change(path, "deleted", f"{what}; Ultron had created it"))
            else:
                cf.write_atomic(path, base64.b64decode(original))
                changes.append(Change(path, "restored", "the bytes it had before ultron connect"))
            continue
        if raw is None:
            continue
        new = edit(path, raw)
        if new != raw:
            cf.write_atomic(path, new)
            changes.append(Change(path, "cleaned", f"removed Ultron's entries ({what}); the rest kept"))
        else:
            changes.append(Change(path, "unchanged", "no Ultron entries"))
    _save_registry(ultron_home, registry)
    return changes
