"""Where each supported agent keeps what Ultron touches, for a user or a project scope.

The paths follow the agents' own documentation: Claude Code reads hooks from
``settings.json`` (``~/.claude`` or ``<project>/.claude``), user MCP servers from
``~/.claude.json`` and project ones from ``<project>/.mcp.json``, skills from
``.claude/skills``, and writes transcripts under ``~/.claude/projects``. Codex reads hooks
from ``hooks.json`` beside its ``config.toml`` (``~/.codex`` or ``<project>/.codex``), which
also holds MCP servers and the ``codex_hooks`` feature flag; it follows the Agent Skills
standard's ``.agents/skills`` and writes rollouts under ``~/.codex/sessions``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SCOPES = ("user", "project")


@dataclass(frozen=True)
class HookEvent:
    """One lifecycle event Ultron listens to: the agent's name for it, the matcher (None
    matches every occurrence) and the name ``ultron hook`` is called with."""

    agent_event: str
    ultron_event: str
    matcher: str | None = None
    #: The agent's own kill timeout, seconds: a backstop above Ultron's own hard timeout.
    timeout: int = 10


@dataclass(frozen=True)
class AgentFiles:
    """The files and directories of one agent for one scope."""

    hooks: Path
    mcp: Path
    skills: Path
    #: Codex only: config.toml, where the hooks feature flag lives (None for Claude Code).
    feature_flags: Path | None = None


@dataclass(frozen=True)
class Agent:
    name: str
    #: the Ultron agent id its sessions are stored under
    agent_id: str
    events: tuple[HookEvent, ...]
    #: the directory under the user's home where the agent writes its session logs
    sessions_dir: str

    def files(self, scope: str, home: Path, project: Path) -> AgentFiles:
        if scope not in SCOPES:
            raise ValueError(f"unknown scope {scope!r}: use user or project")
        if self.name == "claude-code":
            if scope == "user":
                return AgentFiles(hooks=home / ".claude" / "settings.json", mcp=home / ".claude.json",
                                  skills=home / ".claude" / "skills")
            return AgentFiles(hooks=project / ".claude" / "settings.json", mcp=project / ".mcp.json",
                              skills=project / ".claude" / "skills")
        base = home if scope == "user" else project
        return AgentFiles(hooks=base / ".codex" / "hooks.json", mcp=base / ".codex" / "config.toml",
                          skills=base / ".agents" / "skills", feature_flags=base / ".codex" / "config.toml")


#: Session start answers with context; the rest hand the transcript over. Claude Code's
#: SessionStart sources are startup, resume, clear and compact; Codex has no SessionEnd, so
#: its Stop (the end of every turn) carries the transcript as it grows.
AGENTS: dict[str, Agent] = {
    "claude-code": Agent(
        name="claude-code", agent_id="claude-code", sessions_dir=".claude/projects",
        events=(
            HookEvent("SessionStart", "session-start", "startup|resume|clear|compact", timeout=5),
            HookEvent("Stop", "stop"),
            HookEvent("PreCompact", "pre-compact"),
            HookEvent("SessionEnd", "session-end"),
        )),
    "codex": Agent(
        name="codex", agent_id="codex", sessions_dir=".codex/sessions",
        events=(
            HookEvent("SessionStart", "session-start", "startup|resume|clear", timeout=5),
            HookEvent("Stop", "stop"),
            HookEvent("PreCompact", "pre-compact"),
        )),
}

#: Events ``ultron hook`` accepts, agent-neutral.
HOOK_EVENTS = ("session-start", "stop", "pre-compact", "session-end")


def agent(name: str) -> Agent:
    try:
        return AGENTS[name]
    except KeyError:
        raise ValueError(f"unknown agent {name!r}: use {' or '.join(AGENTS)}") from None
