"""`ultron connect` / `ultron disconnect` on a fake agent home: what a user finds in the
agent's files afterwards, and that nothing of theirs is lost."""

from __future__ import annotations

import json
import os
import subprocess
import shutil
import sys
import tomllib
import urllib.request
from pathlib import Path

import pytest

from ultron.integrations.config_files import ConfigError
from ultron.integrations.connect import connect, disconnect, skills_dirs

EXE = ["/opt/ultron/bin/ultron"]

#: SchemaStore's published schemas. Read from SCHEMASTORE_SCHEMA_DIR (a checkout of
#: SchemaStore's src/schemas/json) or fetched; the test skips when neither is reachable.
SCHEMAS = {"claude-code-settings": "https://json.schemastore.org/claude-code-settings.json",
           "codex-hooks": "https://json.schemastore.org/codex-hooks.json"}


def _schema(name: str) -> dict:
    local = os.environ.get("SCHEMASTORE_SCHEMA_DIR")
    if local and (Path(local) / f"{name}.json").is_file():
        return json.loads((Path(local) / f"{name}.json").read_text())
    try:
        with urllib.request.urlopen(SCHEMAS[name], timeout=10) as response:
            return json.loads(response.read())
    except OSError as exc:
        pytest.skip(f"SchemaStore's {name} schema is not reachable ({exc}); set SCHEMASTORE_SCHEMA_DIR")


def _validate(doc: dict, name: str) -> None:
    import jsonschema

    schema = _schema(name)
    cls = jsonschema.validators.validator_for(schema)
    errors = sorted(cls(schema).iter_errors(doc), key=lambda e: list(e.path))
    assert not errors, [f"{list(e.path)}: {e.message}" for e in errors]


def _run(fn, agent: str, tmp_path: Path, scope: str = "user", **kw):
    return fn(agent, scope, home=tmp_path / "home", project=tmp_path / "project", ultron_home=tmp_path / "ultron",
              **kw)


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


USER_SETTINGS = {"model": "opus", "permissions": {"allow": ["Bash(ls:*)"]},
                 "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
                           "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit"}]}]}}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    claude = tmp_path / "home" / ".claude"
    claude.mkdir(parents=True)
    (claude / "settings.json").write_text(json.dumps(USER_SETTINGS, indent=4))  # the user's own formatting
    (tmp_path / "home" / ".claude.json").write_text(json.dumps({"numStartups": 3, "mcpServers": {
        "github": {"type": "stdio", "command": "gh-mcp", "args": []}}}))
    codex = tmp_path / "home" / ".codex"
    codex.mkdir()
    (codex / "config.toml").write_text('# my codex settings\nmodel = "gpt-5"  # the fast one\n\n'
                                       '[mcp_servers.docs]\ncommand = "docs-mcp"\n')
    return tmp_path / "home"


def test_claude_code_gets_hooks_mcp_and_skills_and_keeps_the_users_own(home, tmp_path):
    changes = _run(connect, "claude-code", tmp_path, exe=EXE)
    assert {c.action for c in changes if c.path.name in ("settings.json", ".claude.json")} == {"updated"}
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    assert settings["model"] == "opus" and settings["permissions"] == USER_SETTINGS["permissions"]
    commands = {event: [h["command"] for g in groups for h in g["hooks"]] for event, groups in settings["hooks"].items()}
    assert "notify-send done" in commands["Stop"] and commands["PreToolUse"] == ["audit"]
    for event, name in (("SessionStart", "session-start"), ("Stop", "stop"), ("PreCompact", "pre-compact"),
                        ("SessionEnd", "session-end")):
        ours = [c for c in commands[event] if "hook claude-code" in c]
        assert len(ours) == 1 and ours[0].endswith(f"/opt/ultron/bin/ultron hook claude-code {name}")
        assert f"ULTRON_HOME={tmp_path / 'ultron'}" in ours[0]
    start = next(g for g in settings["hooks"]["SessionStart"])
    assert start["matcher"] == "startup|resume|clear|compact"
    servers = json.loads((home / ".claude.json").read_text())["mcpServers"]
    assert servers["github"]["command"] == "gh-mcp"
    assert servers["ultron"] == {"type": "stdio", "command": EXE[0], "args": ["mcp"],
                                 "env": {"ULTRON_HOME": str(tmp_path / "ultron")}}
    assert skills_dirs(tmp_path / "ultron") == [home / ".claude" / "skills"]


def test_connecting_twice_changes_nothing_and_disconnect_gives_back_the_original_bytes(home, tmp_path):
    before = _snapshot(home)
    _run(connect, "claude-code", tmp_path, exe=EXE)
    _run(connect, "codex", tmp_path, exe=EXE)
    once = _snapshot(home)
    again = _run(connect, "claude-code", tmp_path, exe=EXE) + _run(connect, "codex", tmp_path, exe=EXE)
    assert {c.action for c in again} <= {"unchanged", "recorded"}
    assert _snapshot(home) == once
    _run(disconnect, "claude-code", tmp_path)
    _run(disconnect, "codex", tmp_path)
    assert _snapshot(home) == before
    assert skills_dirs(tmp_path / "ultron") == []


def test_files_ultron_created_are_deleted_on_disconnect(tmp_path):
    (tmp_path / "home").mkdir()
    _run(connect, "codex", tmp_path, exe=EXE)
    assert (tmp_path / "home" / ".codex" / "hooks.json").is_file()
    _run(disconnect, "codex", tmp_path)
    assert not [p for p in (tmp_path / "home").rglob("*") if p.is_file()]


def test_a_file_the_user_changed_after_connect_loses_only_ultrons_entries(home, tmp_path):
    _run(connect, "claude-code", tmp_path, exe=EXE)
    path = home / ".claude" / "settings.json"
    doc = json.loads(path.read_text())
    doc["theme"] = "dark"
    doc["hooks"]["SessionStart"].append({"hooks": [{"type": "command", "command": "echo hello"}]})
    path.write_text(json.dumps(doc))
    changes = _run(disconnect, "claude-code", tmp_path)
    assert any(c.action == "cleaned" and c.path == path for c in changes)
    after = json.loads(path.read_text())
    assert after["theme"] == "dark" and after["model"] == "opus"
    assert after["hooks"]["SessionStart"] == [{"hooks": [{"type": "command", "command": "echo hello"}]}]
    assert "ultron" not in json.dumps(after)
    assert "SessionEnd" not in after["hooks"] and after["hooks"]["Stop"] == USER_SETTINGS["hooks"]["Stop"]


def test_codex_gets_hooks_json_an_mcp_table_and_the_hooks_flag_keeping_comments(home, tmp_path):
    _run(connect, "codex", tmp_path, exe=EXE)
    text = (home / ".codex" / "config.toml").read_text()
    assert text.startswith('# my codex settings\nmodel = "gpt-5"  # the fast one\n')
    config = tomllib.loads(text)
    assert config["mcp_servers"]["docs"] == {"command": "docs-mcp"}
    assert config["mcp_servers"]["ultron"] == {"command": EXE[0], "args": ["mcp"],
                                               "env": {"ULTRON_HOME": str(tmp_path / "ultron")}}
    assert config["features"]["codex_hooks"] is True
    hooks = json.loads((home / ".codex" / "hooks.json").read_text())["hooks"]
    assert set(hooks) == {"SessionStart", "Stop", "PreCompact"}
    assert hooks["SessionStart"][0]["matcher"] == "startup|resume|clear"
    assert skills_dirs(tmp_path / "ultron") == [home / ".agents" / "skills"]


def test_project_scope_writes_into_the_project(tmp_path):
    (tmp_path / "project").mkdir()
    _run(connect, "claude-code", tmp_path, scope="project", exe=EXE)
    assert (tmp_path / "project" / ".claude" / "settings.json").is_file()
    assert "ultron" in json.loads((tmp_path / "project" / ".mcp.json").read_text())["mcpServers"]
    assert not (tmp_path / "home").exists()


def test_an_unparseable_settings_file_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "home" / ".claude" / "settings.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"model": "opus",,}')
    with pytest.raises(ConfigError, match=r"settings.json: not valid JSON \(line 1"):
        _run(connect, "claude-code", tmp_path, exe=EXE)
    assert path.read_text() == '{"model": "opus",,}'
    assert not (tmp_path / "home" / ".claude.json").exists()  # nothing half-done either


def test_written_files_validate_against_the_agents_published_schemas(home, tmp_path):
    _run(connect, "claude-code", tmp_path, exe=EXE)
    _run(connect, "codex", tmp_path, exe=EXE)
    _validate(json.loads((home / ".claude" / "settings.json").read_text()), "claude-code-settings")
    _validate(json.loads((home / ".codex" / "hooks.json").read_text()), "codex-hooks")


def test_the_cli_prints_what_it_changed(tmp_path):
    env = {**os.environ, "ULTRON_HOME": str(tmp_path / "ultron")}
    args = [sys.executable, "-m", "ultron.cli", "connect", "claude-code", "--home", str(tmp_path / "home")]
    first = subprocess.run(args, capture_output=True, text=True, env=env, timeout=60)
    assert first.returncode == 0, first.stderr
    assert "created" in first.stdout and "settings.json" in first.stdout and "2 file(s) changed" in first.stdout
    second = subprocess.run(args, capture_output=True, text=True, env=env, timeout=60)
    assert "already connected, nothing changed" in second.stdout
    bad = subprocess.run(args[:4] + ["cursor"], capture_output=True, text=True, env=env, timeout=60)
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


@pytest.mark.skipif(shutil.which("codex") is None, reason="Codex CLI not installed (npm install -g @openai/codex)")
def test_a_real_codex_reads_the_mcp_server_connect_wrote(tmp_path):
    """The real agent parses the config.toml connect edited (no API key needed to list servers)."""
    home = tmp_path / "home"
    home.mkdir()
    _run(connect, "codex", tmp_path, exe=EXE)
    env = {**os.environ, "HOME": str(home), "CODEX_HOME": str(home / ".codex")}
    listed = subprocess.run(["codex", "mcp", "get", "ultron"], capture_output=True, text=True, env=env, cwd=home,
                            timeout=120)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert "enabled: true" in listed.stdout and "transport: stdio" in listed.stdout
    assert f"command: {EXE[0]}" in listed.stdout and "args: mcp" in listed.stdout
