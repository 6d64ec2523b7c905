"""Which agent session a file holds: the id inside it (Claude Code's sessionId, a Codex
session_meta) wins, else a UUID at the end of the file name, else the stem."""

from __future__ import annotations

import io
import json

from ultron.sessions.identity import agent_session_id
from ultron.sessions.parsing import SessionParser

SID = "0ccf1a04-9b2e-4c1d-8f3a-5e6d7c8b9a01"


def parsed_session_id(lines):
    parser = SessionParser()
    list(parser.messages(io.BytesIO("".join(json.dumps(x) + "\n" for x in lines).encode())))
    return parser.stats.session_id


def test_the_id_in_the_content_wins():
    claude = [{"type": "summary", "summary": "x"},
              {"type": "user", "message": {"role": "user", "content": "hi"}, "uuid": "u1", "sessionId": SID}]
    assert parsed_session_id(claude) == SID
    codex = [{"timestamp": "2026-11-28T10:00:00Z", "type": "session_meta", "payload": {"id": SID, "cwd": "/w"}}]
    assert parsed_session_id(codex) == SID
    assert parsed_session_id([{"role": "user", "content": "hi"}]) is None
    assert agent_session_id(SID, "/x/other-name.jsonl") == SID


def test_else_the_file_name():
    assert agent_session_id(None, f"/home/me/.claude/projects/p/{SID}.jsonl") == SID
    assert agent_session_id(None, f"/s/2026/11/28/rollout-2026-11-28T10-00-00-{SID}.jsonl") == SID
    assert agent_session_id(None, "/inbox/claude/run-7.jsonl") == "run-7"
