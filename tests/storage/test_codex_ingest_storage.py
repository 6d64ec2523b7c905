"""A Codex CLI rollout through Ultron.ingest and segmentation, on the real embedded PostgreSQL.

The line shapes are Codex's own (``RolloutLine`` in codex-rs/protocol/src/protocol.rs,
``ResponseItem`` in codex-rs/protocol/src/models.rs); tests/unit/test_codex_rollouts.py
covers them one by one.
"""

import json

import sqlalchemy as sa

from tests.conftest import write_jsonl

TS = "2026-03-01T10:00:00.000Z"
ASK = "Add a --dry-run flag to the deploy script."


def line(kind, payload):
    return {"timestamp": TS, "type": kind, "payload": payload}


def text(role, body):
    block = "output_text" if role == "assistant" else "input_text"
    return line("response_item", {"type": "message", "role": role, "content": [{"type": block, "text": body}]})


def shell(call_id, command, output, exit_code):
    return [
        line("response_item", {"type": "function_call", "name": "shell", "call_id": call_id,
                               "arguments": json.dumps({"command": ["bash", "-lc", command]})}),
        line("response_item", {"type": "function_call_output", "call_id": call_id,
                               "output": json.dumps({"output": output, "metadata": {"exit_code": exit_code}})}),
        line("event_msg", {"type": "exec_command_end", "call_id": call_id, "exit_code": exit_code}),
    ]


ROLLOUT = [
    line("session_meta", {"id": "019c9d89", "timestamp": TS, "cwd": "/srv/deploy", "originator": "codex_cli_rs",
                          "cli_version": "0.111.0", "instructions": "You are Codex.", "git": {"branch": "main"}}),
    text("user", "<environment_context>\n  <cwd>/srv/deploy</cwd>\n</environment_context>"),
    line("turn_context", {"cwd": "/srv/deploy", "approval_policy": "on-request", "model": "gpt-5-codex"}),
    text("user", ASK),
    line("event_msg", {"type": "user_message", "message": ASK}),
    line("response_item", {"type": "reasoning", "summary": [], "encrypted_content": "gAAA"}),
    *shell("call_1", "./deploy.sh --dry-run", "unknown option: --dry-run", 2),
    line("response_item", {"type": "custom_tool_call", "call_id": "call_2", "name": "apply_patch",
                           "input": "*** Begin Patch\n*** Update File: deploy.sh\n@@\n+DRY_RUN=0\n*** End Patch\n"}),
    line("response_item", {"type": "custom_tool_call_output", "call_id": "call_2", "output": "Success."}),
    *shell("call_3", "./deploy.sh --dry-run", "would deploy 3 services", 0),
    text("assistant", "deploy.sh now takes --dry-run and prints what it would deploy."),
    line("event_msg", {"type": "agent_message", "message": "deploy.sh now takes --dry-run."}),
]


def test_a_codex_rollout_is_ingested_and_segmented(client, tmp_path):
    path = write_jsonl(tmp_path / "2026" / "03" / "01" / "rollout-2026-03-01T10-00-00-019c9d89.jsonl", ROLLOUT)
    [report] = client.ingest([path], "codex").files
    assert (report.status, report.session_format, report.problems) == ("new", "codex", [])
    assert report.roles == {"system": 2, "user": 1, "assistant": 4, "tool": 3}
    with client.db.engine.connect() as conn:
        rows = conn.execute(sa.text(
            "SELECT m.line, m.role, m.content, m.tool_calls, m.tool_call_id, m.name FROM session_messages m "
            "JOIN trajectory_records r ON r.id = m.record_id WHERE r.agent_id = 'codex' ORDER BY m.seq")).all()
    assert [(r.line, r.role) for r in rows] == [
        (1, "system"), (2, "system"), (4, "user"), (7, "assistant"), (8, "tool"), (10, "assistant"), (11, "tool"),
        (12, "assistant"), (13, "tool"), (15, "assistant")]
    assert [r.content for r in rows if r.role == "user"] == [ASK]
    assert [(r.tool_call_id, r.name) for r in rows if r.role == "tool"] == [
        ("call_1", "error"), ("call_2", None), ("call_3", None)]
    assert rows[5].tool_calls[0]["function"]["name"] == "apply_patch"

    [segmented] = client.segment_pending_sessions()
    assert segmented.status == "segmented" and segmented.segments
    with client.db.engine.connect() as conn:
        spans = conn.execute(sa.text(
            "SELECT start_line, end_line FROM task_segments WHERE agent_id = 'codex' ORDER BY segment_index")).all()
    assert spans and spans[0].start_line >= 1 and spans[-1].end_line == 15
