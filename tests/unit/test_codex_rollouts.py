"""Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``) through the parser.

The lines are built from the shapes Codex itself declares: ``RolloutLine`` /
``RolloutItem`` / ``SessionMetaLine`` in ``codex-rs/protocol/src/protocol.rs`` and
``ResponseItem`` / ``ContentItem`` / ``FunctionCallOutputPayload`` in
``codex-rs/protocol/src/models.rs`` (https://github.com/openai/codex, read at commit
001cb8e233f250c7086c791c51390286c087faea). Real lines written by codex 0.46.0 (session_meta,
an ``<environment_context>`` user item, the request, its ``event_msg`` duplicate, turn_context)
are shown in
https://github.com/jnarowski/agentcmd/blob/d008622490fc9acbb0b19aa4101cd54bef3e2c26/.agent/research/codex/format-comparison.md
"""

import io
import json

from ultron.heuristics.reader import is_error_result
from ultron.sessions.parsing import SessionParser

TS = "2026-03-01T10:00:00.000Z"
INSTRUCTIONS = "You are Codex, a coding agent based on GPT-5."
ENV = "<environment_context>\n  <cwd>/home/dev/shop</cwd>\n  <approval_policy>on-request</approval_policy>\n</environment_context>"
AGENTS = "# AGENTS.md instructions for /home/dev/shop\n\n<INSTRUCTIONS>\nRun pytest before committing.\n</INSTRUCTIONS>"
ASK = "The checkout test fails on a missing column; please fix it."
PATCH = "*** Begin Patch\n*** Update File: shop/models.py\n@@\n-    total = Column(Integer)\n+    total = Column(Numeric)\n*** End Patch\n"


def line(kind, payload):
    return {"timestamp": TS, "type": kind, "payload": payload}


def item(payload):
    return line("response_item", payload)


def message(role, *texts):
    block = "output_text" if role == "assistant" else "input_text"
    return item({"type": "message", "role": role, "content": [{"type": block, "text": t} for t in texts]})


def shell_output(call_id, text, exit_code):
    return item({"type": "function_call_output", "call_id": call_id,
                 "output": json.dumps({"output": text, "metadata": {"exit_code": exit_code, "duration_seconds": 0.4}})})


def session():
    """A whole turn: ask, reasoning, a failing then a passing shell call, a patch, the answer."""
    return [
        line("session_meta", {"id": "019c9d89-ae90-75e2-9555-7855bac35c45", "timestamp": TS, "cwd": "/home/dev/shop",
                              "originator": "codex_cli_rs", "cli_version": "0.111.0", "instructions": INSTRUCTIONS,
                              "git": {"commit_hash": "abc1234", "branch": "main",
                                      "repository_url": "git@github.com:dev/shop.git"}}),
        item({"type": "message", "role": "developer", "content": [
            {"type": "input_text", "text": "<permissions instructions>Sandbox: workspace-write</permissions instructions>"}]}),
        message("user", AGENTS, ENV),
        line("turn_context", {"cwd": "/home/dev/shop", "approval_policy": "on-request",
                              "sandbox_policy": {"type": "workspace-write"}, "model": "gpt-5-codex", "summary": "auto"}),
        message("user", ASK),
        line("event_msg", {"type": "user_message", "message": ASK, "images": []}),
        item({"type": "reasoning", "summary": [{"type": "summary_text", "text": "**Running the test**"}],
              "encrypted_content": "gAAAAB..."}),
        line("event_msg", {"type": "agent_reasoning", "text": "**Running the test**"}),
        message("assistant", "Running the failing test first."),
        item({"type": "function_call", "name": "shell", "call_id": "call_1",
              "arguments": json.dumps({"command": ["bash", "-lc", "pytest tests/test_checkout.py"], "workdir": "/home/dev/shop"})}),
        shell_output("call_1", "E   sqlalchemy.exc.OperationalError: no such column: orders.total", 1),
        line("event_msg", {"type": "exec_command_end", "call_id": "call_1", "exit_code": 1, "stdout": "", "stderr": "E ..."}),
        item({"type": "custom_tool_call", "status": "completed", "call_id": "call_2", "name": "apply_patch", "input": PATCH}),
        item({"type": "custom_tool_call_output", "call_id": "call_2",
              "output": json.dumps({"output": "Success. Updated the following files:\nM shop/models.py\n",
                                    "metadata": {"exit_code": 0, "duration_seconds": 0.0}})}),
        item({"type": "function_call", "name": "shell", "call_id": "call_3",
              "arguments": json.dumps({"command": ["bash", "-lc", "pytest tests/test_checkout.py"]})}),
        shell_output("call_3", "1 passed in 0.12s", 0),
        message("assistant", "Fixed: orders.total is a Numeric column now and the test passes."),
        line("event_msg", {"type": "agent_message", "message": "Fixed: orders.total is a Numeric column now."}),
        line("event_msg", {"type": "token_count", "info": {"total_token_usage": {"input_tokens": 1200}}}),
    ]


def parse(rows):
    data = b"".join(r if isinstance(r, bytes) else json.dumps(r).encode() + b"\n" for r in rows)
    parser = SessionParser()
    return list(parser.messages(io.BufferedReader(io.BytesIO(data)))), parser


def test_a_rollout_becomes_openai_shaped_messages():
    msgs, parser = parse(session())
    assert parser.stats.format == "codex" and parser.problems == []
    assert [(m.role, m.line) for m in msgs] == [
        ("system", 1), ("system", 2), ("system", 3), ("user", 5), ("assistant", 9), ("tool", 11),
        ("assistant", 13), ("tool", 14), ("assistant", 15), ("tool", 16), ("assistant", 17)]
    assert msgs[0].content == INSTRUCTIONS
    assert msgs[3].content == ASK
    # the assistant's words and the call that follows them are one message, as in the OpenAI shape
    first = msgs[4]
    assert first.content == "Running the failing test first."
    assert [c["id"] for c in first.tool_calls] == ["call_1"]
    assert json.loads(first.tool_calls[0]["function"]["arguments"])["command"][-1] == "pytest tests/test_checkout.py"
    assert msgs[-1].content.startswith("Fixed: orders.total")
    assert all(m.reasoning_content is None for m in msgs)


def test_failed_and_passing_tool_outputs_are_linked_by_call_id():
    msgs, _ = parse(session())
    results = {m.tool_call_id: m for m in msgs if m.role == "tool"}
    assert set(results) == {"call_1", "call_2", "call_3"}
    failed, patched, passed = results["call_1"], results["call_2"], results["call_3"]
    assert failed.content == "E   sqlalchemy.exc.OperationalError: no such column: orders.total"
    assert failed.name == "error" and is_error_result(failed)
    assert passed.content == "1 passed in 0.12s" and passed.name is None and not is_error_result(passed)
    assert patched.content.startswith("Success. Updated") and patched.name is None


def test_apply_patch_is_a_tool_call_with_its_input_kept():
    msgs, _ = parse(session())
    [patch_call] = [c for m in msgs for c in (m.tool_calls or []) if c["id"] == "call_2"]
    assert patch_call["function"]["name"] == "apply_patch"
    assert json.loads(patch_call["function"]["arguments"]) == {"input": PATCH}


def test_harness_context_is_never_the_users_words():
    msgs, parser = parse(session())
    users = [m.content for m in msgs if m.role == "user"]
    assert users == [ASK]
    assert parser.stats.roles["user"] == 1
    system = "\n".join(m.content for m in msgs if m.role == "system")
    assert "Sandbox: workspace-write" in system and "Run pytest before committing" in system
    assert "<cwd>/home/dev/shop</cwd>" in system


def test_harness_block_in_the_same_message_as_the_request_is_split_off():
    msgs, _ = parse([message("user", ENV, ASK), item({"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "<turn_aborted>\nThe user interrupted the turn.\n</turn_aborted>"}]})])
    assert [(m.role, m.content) for m in msgs] == [
        ("system", ENV), ("user", ASK), ("system", "<turn_aborted>\nThe user interrupted the turn.\n</turn_aborted>")]


def test_event_msg_duplicates_are_not_doubled():
    msgs, parser = parse(session())
    assert sum(ASK in m.content for m in msgs) == 1
    assert sum(m.content.startswith("Fixed: orders.total") for m in msgs) == 1
    assert sum(len(m.tool_calls or []) for m in msgs) == 3
    assert parser.stats.roles == {"system": 3, "user": 1, "assistant": 4, "tool": 3}


def test_base_instructions_object_and_other_output_shapes():
    msgs, parser = parse([
        line("session_meta", {"id": "s", "timestamp": TS, "cwd": "/x", "base_instructions": {"text": INSTRUCTIONS}}),
        item({"type": "local_shell_call", "call_id": "c1", "status": "completed",
              "action": {"type": "exec", "command": ["ls"], "working_directory": "/x"}}),
        item({"type": "function_call_output", "call_id": "c1",
              "output": "Exit code: 2\nWall time: 0.1 seconds\nOutput:\nls: cannot access 'nope'"}),
        item({"type": "function_call", "name": "mcp__docs__search", "call_id": "c2", "arguments": "{\"q\": \"sqlalchemy\"}"}),
        item({"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "Numeric type"}]}),
        item({"type": "function_call", "name": "shell", "call_id": "c3", "arguments": "{}"}),
        item({"type": "function_call_output", "call_id": "c3", "output": {"content": "sandbox denied", "success": False}}),
        item({"type": "web_search_call", "status": "completed", "action": {"type": "search", "query": "sqlalchemy numeric"}}),
    ])
    assert parser.problems == []
    assert msgs[0].role == "system" and msgs[0].content == INSTRUCTIONS
    assert msgs[1].tool_calls[0]["function"]["name"] == "local_shell"
    assert json.loads(msgs[1].tool_calls[0]["function"]["arguments"])["command"] == ["ls"]
    tools = [m for m in msgs if m.role == "tool"]
    assert [(t.tool_call_id, t.name) for t in tools] == [("c1", "error"), ("c2", None), ("c3", "error")]
    assert tools[1].content == "Numeric type" and tools[2].content == "sandbox denied"
    assert msgs[-1].tool_calls[0]["function"]["name"] == "web_search"


def test_malformed_and_unknown_lines_are_located_and_good_lines_kept():
    msgs, parser = parse([
        message("user", ASK),
        b'{"timestamp": "t", "type": "response_item", "payload": {"type": "message"\n',
        line("response_item", ["not", "an", "object"]),
        item({"type": "message", "role": "narrator", "content": [{"type": "input_text", "text": "x"}]}),
        item({"type": "message", "content": [{"type": "input_text", "text": "x"}]}),
        item({"type": "hologram_call", "call_id": "h"}),
        item({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}, 7]}),
        line("session_meta", "garbage"),
        line("world_state", {"anything": 1}),
        item({"type": "ghost_snapshot", "ghost_commit": {"id": "g"}}),
        line("compacted", {"message": "summary of the earlier turns"}),
    ])
    assert [(m.role, m.content, m.line) for m in msgs] == [("user", ASK, 1), ("assistant", "Done.", 7)]
    located = [(p.line, p.error) for p in parser.problems]
    assert [n for n, _ in located] == [2, 3, 4, 5, 6, 7, 8]
    assert located[0][1].startswith("not valid JSON")
    assert "'payload' is an array, expected an object" in located[1][1]
    assert "unknown role 'narrator'" in located[2][1]
    assert "missing 'role'" in located[3][1]
    assert "unknown Codex response item type 'hologram_call'" in located[4][1]
    assert "1 content item(s) of unknown shape ignored" in located[5][1]
    assert "'payload' is a string" in located[6][1]


def test_detected_by_content_whatever_the_file_is_called(tmp_path):
    path = tmp_path / "notes from tuesday.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in session()), encoding="utf-8")
    parser = SessionParser()
    with open(path, "rb") as fh:
        msgs = list(parser.messages(fh))
    assert parser.stats.format == "codex" and len(msgs) == 11


def test_2025_rollouts_without_the_envelope():
    msgs, parser = parse([
        {"id": "02f3baa6-e4d8-46ad-9590-6cd34fdd8ac1", "timestamp": "2025-08-11T16:38:04.973Z",
         "instructions": INSTRUCTIONS, "git": {"commit_hash": "abc123", "branch": "main"}},
        {"record_type": "state"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": ENV}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": ASK}]},
        {"record_type": "state"},
        {"type": "reasoning", "summary": []},
        {"type": "function_call", "name": "shell", "arguments": "{\"command\": [\"pytest\"]}", "call_id": "call_a"},
        {"type": "function_call_output", "call_id": "call_a",
         "output": json.dumps({"output": "1 failed", "metadata": {"exit_code": 1}})},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "It still fails."}]},
    ])
    assert parser.stats.format == "codex" and parser.problems == []
    assert [(m.role, m.line) for m in msgs] == [
        ("system", 1), ("system", 3), ("user", 4), ("assistant", 7), ("tool", 8), ("assistant", 9)]
    assert msgs[3].tool_calls[0]["id"] == "call_a"
    assert (msgs[4].content, msgs[4].name) == ("1 failed", "error")
