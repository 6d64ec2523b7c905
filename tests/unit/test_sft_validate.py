"""The SFT file check (the blocking asset check): each defect is reported on its own line."""

import json

from ultron.sft.validate import validate_export, validate_sft_file

U = {"role": "user", "content": "hi"}
A = {"role": "assistant", "content": "hello"}


def C(*ids):
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in ids]}


def T(i):
    return {"role": "tool", "tool_call_id": i, "name": "f", "content": "ok"}


def line(*messages, **extra):
    return json.dumps({"messages": list(messages), **extra})


def write(tmp_path, name, lines):
    path = tmp_path / name
    path.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    return path


def test_openai_hand_broken_file_reports_each_defect_at_its_line(tmp_path):
    good = line({"role": "system", "content": "s"}, U, C("a", "b"), T("b"), T("a"), A)
    lines = [
        good,                                                        # 1
        '{"messages": [{"role": "user", "content": "hi"}',           # 2 truncated JSON
        line(U, C("a"), A),                                          # 3 call without result
        line(U, {"role": "assistant", "content": ""}),               # 4 empty assistant turn
        line(U, {"role": "system", "content": "late"}, A),           # 5 system not first
        line(U, T("a"), A),                                          # 6 tool without a call
        line(A, U, A),                                               # 7 starts with the assistant
        good,                                                        # 8
        line(U, C("a"), T("a"), U, A),                               # 9 tool results answered by the user
        line(U, C("a"), T("x"), A),                                  # 10 result for an unknown id
        line(U, A, A),                                               # 11 two answers in a row
        line(U, A, U),                                               # 12 ends with the user
        "[1, 2]",                                                    # 13 not an object
        "",                                                          # 14 blank line
        line(U, {"role": "robot", "content": "x"}),                  # 15 unknown role
        line(U, C("a"), T("a"), A, tools=[{"name": "f"}]),           # 16 malformed tools
    ]
    result = validate_sft_file(write(tmp_path, "train.openai.jsonl", lines), "openai")
    assert not result.passed and result.lines == 16 and result.valid_lines == 2
    errors = {e["line"]: e["error"] for e in result.errors}
    assert sorted(errors) == [2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15, 16]
    assert "not valid JSON" in errors[2]
    assert "message 3" in errors[3] and "'a' have no tool result" in errors[3]
    assert "message 2" in errors[4] and "empty assistant turn" in errors[4]
    assert "system message may only come first" in errors[5]
    assert "must follow an assistant tool call" in errors[6]
    assert "must start with a user message" in errors[7]
    assert "followed by an assistant turn, not the user" in errors[9]
    assert "'x' answers no call" in errors[10]
    assert "two assistant answers" in errors[11]
    assert "must end with an assistant answer" in errors[12]
    assert "JSON object" in errors[13] and errors[14] == "empty line" and "unknown role" in errors[15]
    assert "tool 1" in errors[16]


def test_sharegpt_hand_broken_file_reports_each_defect_at_its_line(tmp_path):
    def conv(*turns, **extra):
        return json.dumps({"conversations": [{"from": f, "value": v} for f, v in turns], **extra})

    fc = json.dumps({"name": "f", "arguments": {}})
    two = json.dumps([{"name": "f", "arguments": {}}, {"name": "g", "arguments": {"x": 1}}])
    lines = [
        conv(("human", "q"), ("function_call", fc), ("observation", "r"), ("gpt", "a"), system="s",
             tools=json.dumps([{"name": "f"}])),                                     # 1 ok
        conv(("human", "q"), ("function_call", fc), ("gpt", "a")),                   # 2 call without observation
        conv(("human", "q"), ("gpt", " ")),                                          # 3 empty gpt
        conv(("human", "q"), ("human", "again"), ("gpt", "a")),                      # 4 out of order
        conv(("human", "q"), ("function_call", two), ("observation", "only one"), ("gpt", "a")),  # 5 results count
        conv(("human", "q"), ("function_call", fc), ("observation", "r")),           # 6 ends without gpt
        conv(("human", "q"), ("function_call", "not json"), ("observation", "r"), ("gpt", "a")),  # 7
        conv(("human", "q"), ("gpt", "a"), tools="{not json"),                       # 8 tools not JSON
        conv(("system", "s"), ("human", "q"), ("function_call", two), ("observation", '["1", "2"]'),
             ("gpt", "a")),                                                          # 9 ok (system turn first)
    ]
    result = validate_sft_file(write(tmp_path, "validation.sharegpt.jsonl", lines), "sharegpt")
    errors = {e["line"]: e["error"] for e in result.errors}
    assert sorted(errors) == [2, 3, 4, 5, 6, 7, 8]
    assert "turn 3 (gpt)" in errors[2] and "no observation" in errors[2]
    assert "empty assistant turn" in errors[3]
    assert "turn 2 (human)" in errors[4] and "out of order" in errors[4]
    assert "2 parallel calls" in errors[5]
    assert "must end with a gpt answer" in errors[6]
    assert "not valid JSON" in errors[7] and "'tools'" in errors[8]


def test_unreadable_inputs_are_located_errors_not_crashes(tmp_path):
    missing = validate_sft_file(tmp_path / "nope.jsonl", "openai")
    assert not missing.passed and missing.errors[0]["line"] == 0
    assert "unknown format" in validate_sft_file(tmp_path / "x", "alpaca").errors[0]["error"]
    bad = tmp_path / "bad.openai.jsonl"
    bad.write_bytes(b"\xff\xfe\n")
    assert "not UTF-8" in validate_sft_file(bad, "openai").errors[0]["error"]


def test_validate_export_checks_every_file_of_a_directory(tmp_path):
    write(tmp_path, "train.openai.jsonl", [line(U, A)])
    write(tmp_path, "train.sharegpt.jsonl", ['{"conversations": []}'])
    (tmp_path / "manifest.json").write_text("{}")
    results = validate_export(tmp_path)
    assert set(results) == {"train.openai.jsonl", "train.sharegpt.jsonl"}
    assert results["train.openai.jsonl"].passed and not results["train.sharegpt.jsonl"].passed
