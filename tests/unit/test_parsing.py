"""The session parser: formats, normalisation and every kind of bad line."""

import io
import json

import pytest

from ultron.sessions.parsing import FileRejected, SessionParser


def parse(lines, **kw):
    data = b"".join(l if isinstance(l, bytes) else json.dumps(l).encode() + b"\n" for l in lines)
    parser = SessionParser(**kw)
    messages = list(parser.messages(io.BufferedReader(io.BytesIO(data))))
    return messages, parser


def errors(parser):
    return [(p.line, p.error) for p in parser.problems]


# -- formats ---------------------------------------------------------------------------


def test_openai_chat_keeps_every_field_and_line_numbers():
    msgs, parser = parse([
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "reasoning_content": "look it up",
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\": 1}"}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "lookup", "content": "42"},
        {"role": "assistant", "content": "It is 42."},
    ])
    assert parser.stats.format == "openai"
    assert [m.role for m in msgs] == ["system", "user", "assistant", "tool", "assistant"]
    assert [m.line for m in msgs] == [1, 2, 3, 4, 5]
    call = msgs[2]
    assert call.reasoning_content == "look it up"
    assert call.tool_calls[0]["function"] == {"name": "lookup", "arguments": "{\"q\": 1}"}
    assert (msgs[3].tool_call_id, msgs[3].name, msgs[3].content) == ("c1", "lookup", "42")
    assert parser.problems == []


def test_anthropic_blocks_map_to_fields_and_split_tool_results_in_order():
    msgs, parser = parse([
        {"role": "user", "content": [{"type": "text", "text": "fix it"}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "read first"},
            {"type": "text", "text": "Reading."},
            {"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "a.py"}},
            {"type": "tool_use", "id": "t2", "name": "read", "input": {"path": "b.py"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "A"},
            {"type": "tool_result", "tool_use_id": "t2", "content": [{"type": "text", "text": "B"}]},
            {"type": "text", "text": "and hurry"}]},
    ])
    assert parser.stats.format == "anthropic"
    assert [(m.role, m.line) for m in msgs] == [("user", 1), ("assistant", 2), ("tool", 3), ("tool", 3), ("user", 3)]
    asst = msgs[1]
    assert asst.content == "Reading." and asst.reasoning_content == "read first"
    assert [tc["id"] for tc in asst.tool_calls] == ["t1", "t2"]
    assert json.loads(asst.tool_calls[0]["function"]["arguments"]) == {"path": "a.py"}
    assert [(m.tool_call_id, m.content) for m in msgs[2:4]] == [("t1", "A"), ("t2", "B")]
    assert msgs[4].content == "and hurry"


def test_claude_code_transcript_skips_bookkeeping_merges_fragments_and_marks_sidechains():
    def cc(t, message, uuid, side=False):
        return {"type": t, "message": message, "uuid": uuid, "isSidechain": side, "sessionId": "s"}

    msgs, parser = parse([
        {"type": "file-history-snapshot", "messageId": "x", "snapshot": {}},
        cc("user", {"role": "user", "content": "run the tests"}, "u1"),
        cc("assistant", {"id": "m1", "role": "assistant", "content": [{"type": "thinking", "thinking": "ok"}]}, "a1"),
        cc("assistant", {"id": "m1", "role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "Bash", "input": {"command": "pytest"}}]}, "a2"),
        {"type": "queue-operation", "operation": "enqueue", "content": "later"},
        cc("user", {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "1 failed"}]}, "u2"),
        cc("user", {"role": "user", "content": "sub-agent prompt"}, "s1", side=True),
        {"type": "summary", "summary": "tests", "leafUuid": "a3"},
        {"type": "progress", "data": {"type": "bash_progress"}},
        cc("assistant", {"id": "m2", "role": "assistant", "content": [{"type": "text", "text": "One test fails."}]}, "a3"),
    ])
    assert parser.stats.format == "claude_code"
    assert [m.role for m in msgs] == ["user", "assistant", "tool", "user", "assistant"]
    merged = msgs[1]
    assert merged.reasoning_content == "ok" and merged.tool_calls[0]["function"]["name"] == "Bash"
    assert merged.line == 3 and merged.source_id == "a1"
    assert msgs[2].tool_call_id == "t" and msgs[2].content == "1 failed"
    assert [m.is_sidechain for m in msgs] == [False, False, False, True, False]
    assert parser.problems == []


def test_metadata_rows_are_skipped_and_empty_messages_dropped_but_empty_tool_rows_kept():
    msgs, parser = parse([
        {"_type": "metadata", "session": "x"},
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": ""},
        {"role": "tool", "content": ""},
        {"role": "assistant", "content": "a"},
    ])
    assert [(m.role, m.line) for m in msgs] == [("user", 2), ("tool", 4), ("assistant", 5)]
    assert parser.problems == []


def test_role_aliases_are_normalised():
    msgs, _ = parse([{"role": "developer", "content": "rules"}, {"role": "User", "content": "hi"}])
    assert [m.role for m in msgs] == ["system", "user"]


# -- bad input ---------------------------------------------------------------------------

GOOD = {"role": "user", "content": "good"}


@pytest.mark.parametrize(
    "bad_line, expected",
    [
        (b"{not json\n", "not valid JSON"),
        (b"[1, 2, 3]\n", "expected a JSON object, got an array"),
        (b"\"just a string\"\n", "expected a JSON object, got a string"),
        (b"42\n", "expected a JSON object, got a number"),
        (json.dumps({"role": "robot", "content": "beep"}).encode() + b"\n", "unknown role 'robot'"),
        (json.dumps({"content": "no role"}).encode() + b"\n", "missing 'role'"),
        (b"[" * 100000 + b"]" * 100000 + b"\n", "nested too deeply"),
        (json.dumps({"type": "user", "message": "oops", "uuid": "u"}).encode() + b"\n", "'message' is a string"),
    ],
)
def test_a_bad_line_is_located_and_skipped_while_good_lines_stay(bad_line, expected):
    msgs, parser = parse([GOOD, bad_line, GOOD])
    assert [m.line for m in msgs] == [1, 3]
    assert len(parser.problems) == 1
    assert parser.problems[0].line == 2 and expected in parser.problems[0].error


def test_content_of_the_wrong_type_is_converted_and_reported():
    msgs, parser = parse([{"role": "user", "content": {"text": "hi"}}, {"role": "user", "content": 7}])
    assert [m.content for m in msgs] == ['{"text": "hi"}', "7"]
    assert [p.line for p in parser.problems] == [1, 2]
    assert all("expected a string or an array" in p.error for p in parser.problems)


def test_invalid_utf8_is_replaced_and_the_line_kept():
    msgs, parser = parse([GOOD, b'{"role": "user", "content": "caf\xe9"}\n'])
    assert msgs[1].content == "caf\ufffd"
    assert errors(parser) == [(2, "invalid UTF-8 at byte 32; replaced with U+FFFD, line kept")]


def test_bom_is_removed_and_reported():
    msgs, parser = parse([b"\xef\xbb\xbf" + json.dumps(GOOD).encode() + b"\n", GOOD])
    assert len(msgs) == 2
    assert errors(parser) == [(1, "UTF-8 byte-order mark removed; line kept")]


def test_nul_characters_and_lone_surrogates_are_cleaned_and_reported():
    msgs, parser = parse([
        b'{"role": "user", "content": "a\\u0000b"}\n',
        b'{"role": "assistant", "content": "x\\ud800y", "tool_calls": [{"id": "c\\u0000", "function": {"name": "f", "arguments": "\\udfff"}}]}\n',
    ])
    assert msgs[0].content == "ab"
    assert msgs[1].content == "x\ufffdy"
    assert msgs[1].tool_calls[0]["id"] == "c"
    assert msgs[1].tool_calls[0]["function"]["arguments"] == "\ufffd"
    assert (1, "NUL characters removed (PostgreSQL text cannot store them); line kept") in errors(parser)
    assert any(line == 2 and "surrogate" in err for line, err in errors(parser))


def test_a_multi_megabyte_line_is_skipped_without_losing_its_neighbours():
    huge = json.dumps({"role": "user", "content": "x" * (9 * 1024 * 1024)}).encode() + b"\n"
    msgs, parser = parse([GOOD, huge, GOOD])  # default limit: 8 MiB
    assert [m.line for m in msgs] == [1, 3]
    assert parser.problems[0].line == 2 and "over the 8388608-byte limit" in parser.problems[0].error
    assert parser.stats.bytes_read == sum(len(json.dumps(GOOD)) + 1 for _ in range(2)) + len(huge)


def test_a_line_limit_applies_to_the_last_line_without_newline():
    msgs, parser = parse([GOOD, b'{"role": "user", "content": "' + b"y" * 5000 + b'"}'], max_line_bytes=1024)
    assert len(msgs) == 1 and parser.problems[0].line == 2


def test_binary_file_is_rejected_whole():
    with pytest.raises(FileRejected, match="binary"):
        parse([b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"])


def test_problem_list_is_capped_with_a_count_of_the_rest():
    _, parser = parse([b"nope\n"] * 30, max_problems=10)
    final = parser.finish_problems()
    assert len(final) == 11
    assert final[-1].line is None and final[-1].error == "20 more problems not recorded"


def test_blank_lines_are_ignored_silently():
    msgs, parser = parse([GOOD, b"\n", b"   \n", GOOD])
    assert [m.line for m in msgs] == [1, 4] and parser.problems == []
