"""Editing agents' configuration files without disturbing what Ultron did not write.

Every edit reads the file, changes only Ultron's own entries (recognised by the
``ultron … hook <agent>`` command, or by the ``ultron`` server name) and writes it back
atomically. A file that cannot be parsed is never overwritten: the user would lose it.
TOML goes through ``tomlkit``, which keeps comments, order and formatting, so a Codex
``config.toml`` differs from the user's only by the lines Ultron adds.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Callable

import tomlkit

from ultron.integrations.agents import HookEvent
from ultron.integrations.atomic import replace_file

SERVER_NAME = "ultron"
_OURS = re.compile(r"ultron['\"]?\s+hook\s+(claude-code|codex)\b")


class ConfigError(ValueError):
    """An agent's configuration file that Ultron will not touch, with the reason."""


def is_ours(handler: Any) -> bool:
    return isinstance(handler, dict) and isinstance(handler.get("command"), str) and bool(
        _OURS.search(handler["command"]))


def read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def load_json(path: Path, raw: bytes | None) -> dict[str, Any]:
    if raw is None or not raw.strip():
        return {}
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        where = f" (line {exc.lineno}, column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
        raise ConfigError(f"{path}: not valid JSON{where}; fix or move it, Ultron leaves it as it is") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: expected a JSON object at the top level; Ultron leaves it as it is")
    return doc


def dump_json(doc: dict[str, Any]) -> bytes:
    return (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def load_toml(path: Path, raw: bytes | None) -> tomlkit.TOMLDocument:
    if raw is None:
        return tomlkit.document()
    try:
        return tomlkit.parse(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomlkit.exceptions.TOMLKitError) as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc}); fix or move it, Ultron leaves it as it is") from None


def write_atomic(path: Path, data: bytes) -> None:
    """Replace the file in one rename, keeping its mode: an agent starting at that moment
    reads the old file or the new one, never half of one."""
    replace_file(path, lambda out: out.write(data))


# -- hooks (the same shape in Claude Code's settings.json and Codex's hooks.json) ------------


def with_hooks(doc: dict[str, Any], events: tuple[HookEvent, ...], command: Callable[[HookEvent], str]
               ) -> dict[str, Any]:
    """``doc`` with one Ultron handler per event; other handlers, and Ultron's own when
    already current, stay where they are, so connecting twice changes nothing."""
    hooks = doc.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise ConfigError("'hooks' is not an object; Ultron leaves the file as it is")
    for event in events:
        groups = hooks.setdefault(event.agent_event, [])
        if not isinstance(groups, list):
            raise ConfigError(f"hooks.{event.agent_event} is not a list; Ultron leaves the file as it is")
        wanted = {"type": "command", "command": command(event), "timeout": event.timeout}
        group = {"hooks": [wanted]} if event.matcher is None else {"matcher": event.matcher, "hooks": [wanted]}
        current = [g for g in groups if isinstance(g, dict) and any(is_ours(h) for h in g.get("hooks") or [])]
        if current == [group]:
            continue
        _drop_ours(groups)
        groups.append(group)
    return doc


def without_hooks(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with every Ultron handler gone, and any group or event left empty by that."""
    hooks = doc.get("hooks")
    if not isinstance(hooks, dict):
        return doc
    for name in list(hooks):
        groups = hooks[name]
        if isinstance(groups, list) and _drop_ours(groups) and not groups:
            del hooks[name]
    if not hooks:
        del doc["hooks"]
    return doc


def _drop_ours(groups: list[Any]) -> bool:
    """Remove Ultron's handlers in place; True if any was removed."""
    removed = False
    for group in list(groups):
        if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
            continue
        kept = [h for h in group["hooks"] if not is_ours(h)]
        if len(kept) != len(group["hooks"]):
            removed = True
            if kept:
                group["hooks"] = kept
            else:
                groups.remove(group)
    return removed


# -- MCP servers ------------------------------------------------------------------------------


def with_json_server(doc: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    servers = doc.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise ConfigError("'mcpServers' is not an object; Ultron leaves the file as it is")
    if servers.get(SERVER_NAME) != spec:
        servers[SERVER_NAME] = spec
    return doc


def without_json_server(doc: dict[str, Any]) -> dict[str, Any]:
    servers = doc.get("mcpServers")
    if isinstance(servers, dict) and SERVER_NAME in servers:
        del servers[SERVER_NAME]
        if not servers:
            del doc["mcpServers"]
    return doc


def with_toml_server(doc: tomlkit.TOMLDocument, spec: dict[str, Any], *, hooks_flag: bool) -> tomlkit.TOMLDocument:
    """Codex's ``[mcp_servers.ultron]`` table, and ``[features] codex_hooks = true`` (hooks
    are behind that flag)."""
    servers = doc.get("mcp_servers")
    if servers is None:
        servers = tomlkit.table(is_super_table=True)
        doc["mcp_servers"] = servers
    current = servers.get(SERVER_NAME)
    if current is None or current.unwrap() != spec:
        table = tomlkit.table()
        for key, value in spec.items():
            table[key] = value
        servers[SERVER_NAME] = table
    if hooks_flag:
        features = doc.get("features")
        if features is None:
            features = tomlkit.table()
            doc["features"] = features
        if features.get("codex_hooks") is not True:
            features["codex_hooks"] = True
    return doc


def without_toml_server(doc: tomlkit.TOMLDocument) -> tomlkit.TOMLDocument:
    """Removes the server table. The hooks flag stays: other hooks may need it, and it
    does nothing without them."""
    servers = doc.get("mcp_servers")
    if servers is not None and SERVER_NAME in servers:
        del servers[SERVER_NAME]
        if not servers:
            del doc["mcp_servers"]
    return doc
