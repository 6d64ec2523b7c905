"""The clean-up that turns a segment's messages into valid training data, repair by repair."""

import json

from ultron.sessions.messages import Message
from ultron.sft.conversation import clean_conversation
from ultron.sft.formats import infer_tools, openai_record, sharegpt_record
from ultron.sft.validate import _check_openai, _check_sharegpt


def call(cid, name="get_order", **args):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def U(text):
    return Message("user", text)


def A(text="", *calls, sidechain=False):
    return Message("assistant", text, tool_calls=list(calls) or None, is_sidechain=sidechain)


def T(cid, text="ok", name=None):
    return Message("tool", text, tool_call_id=cid, name=name)


def roles(messages):
    return [m["role"] + ("+calls" if m.get("tool_calls") else "") for m in messages]


def assert_valid(messages):
    tools = infer_tools(messages)
    _check_openai(openai_record(messages, tools))
    _check_sharegpt(sharegpt_record(messages, tools)[0])


def test_a_clean_tool_conversation_is_kept_as_is():
    msgs = [Message("system", "policy"), U("check order 7"), A("", call("c1", id=7)),
            T("c1", '{"status": "shipped"}', name="get_order"), A("It shipped.")]
    out = clean_conversation(msgs)
    assert out.skipped is None and not out.repairs
    assert out.messages == [
        {"role": "system", "content": "policy"},
        {"role": "user", "content": "check order 7"},
        {"role": "assistant", "content": None, "tool_calls": [call("c1", id=7)]},
        {"role": "tool", "tool_call_id": "c1", "name": "get_order", "content": '{"status": "shipped"}'},
        {"role": "assistant", "content": "It shipped."},
    ]
    assert_valid(out.messages)


def test_tool_name_comes_from_the_call_not_the_stored_error_flag():
    out = clean_conversation([U("run"), A("", call("c1", "Bash", command="ls")), T("c1", "boom", name="error"),
                              A("It failed.")])
    assert out.messages[2]["name"] == "Bash"


def test_sidechain_messages_are_dropped_from_a_main_thread():
    msgs = [U("write poems"), A("", call("c1", "Task", prompt="poem")),
            U("poem please"), A("a poem", sidechain=True),
            T("c1", "the poem"), A("Here it is.")]
    msgs[2].is_sidechain = True
    out = clean_conversation(msgs)
    assert out.repairs["sidechain_messages_dropped"] == 2
    assert roles(out.messages) == ["user", "assistant+calls", "tool", "assistant"]


def test_unmatched_call_and_orphan_result_are_dropped_and_counted():
    msgs = [U("two lookups"), A("Looking.", call("c1", id=1), call("c2", id=2)), T("c2", "two"), T("zz", "stray"),
            A("Only the second worked."), T("c9", "late orphan"), U("ok"), A("Bye.")]
    out = clean_conversation(msgs)
    assert out.repairs["unmatched_tool_calls_dropped"] == 1
    assert out.repairs["orphan_tool_results_dropped"] == 2
    assert [c["id"] for c in out.messages[1]["tool_calls"]] == ["c2"]
    assert roles(out.messages) == ["user", "assistant+calls", "tool", "assistant", "user", "assistant"]
    assert_valid(out.messages)


def test_results_are_put_in_call_order_and_reused_ids_renamed():
    msgs = [U("go"), A("", call("a", x=1), call("a", x=2), call("b", x=3)), T("b", "B"), T("a", "A1"), T("a", "A2"),
            A("done")]
    out = clean_conversation(msgs)
    ids = [c["id"] for c in out.messages[1]["tool_calls"]]
    assert ids == ["a", "a_2", "b"] and out.repairs["duplicate_tool_call_ids_renamed"] == 1
    assert [(m["tool_call_id"], m["content"]) for m in out.messages[2:5]] == [("a", "A1"), ("a_2", "A2"), ("b", "B")]
    assert_valid(out.messages)


def test_empty_assistant_turns_go_and_consecutive_users_merge():
    out = clean_conversation([U("first"), A("   "), U("second"), A("answer")])
    assert out.repairs["empty_assistant_dropped"] == 1 and out.repairs["user_messages_merged"] == 1
    assert out.messages == [{"role": "user", "content": "first\n\nsecond"}, {"role": "assistant", "content": "answer"}]


def test_a_turn_the_user_interrupted_is_dropped_with_its_whole_run_of_calls():
    msgs = [U("refactor"), A("", call("c1", "Read", path="a")), T("c1", "code"), A("", call("c2", "Edit", path="a")),
            T("c2", "[Request interrupted by user for tool use]"), U("no, keep the API"),
            A("", call("c3", "Read", path="a")),
            T("c3", "code"), A("Kept the API; done.")]
    out = clean_conversation(msgs)
    assert out.repairs["interrupted_tool_turns_dropped"] == 2
    assert out.messages[0] == {"role": "user", "content": "refactor\n\nno, keep the API"}
    assert roles(out.messages) == ["user", "assistant+calls", "tool", "assistant"]
    assert_valid(out.messages)


def test_interrupted_turn_keeps_its_text():
    out = clean_conversation([U("q"), A("Let me look.", call("c1", q=1)), T("c1"), U("stop"), A("Stopped.")])
    assert roles(out.messages) == ["user", "assistant", "user", "assistant"]
    assert out.messages[1] == {"role": "assistant", "content": "Let me look."}


def test_segment_edges_are_trimmed_to_start_with_the_user_and_end_with_the_assistant():
    msgs = [T("c0", "result of the previous segment"), A("previous answer"), U("new task"),
            A("", call("c1", id=1)), T("c1"), A("Done."), U("and another thing"), A("", call("c2", id=2)), T("c2")]
    out = clean_conversation(msgs)
    assert roles(out.messages) == ["user", "assistant+calls", "tool", "assistant"]
    assert out.repairs["leading_messages_dropped"] == 1 and out.repairs["orphan_tool_results_dropped"] == 1
    assert out.repairs["trailing_user_dropped"] == 1 and out.repairs["interrupted_tool_turns_dropped"] == 1


def test_system_only_first_and_assistant_fragments_merge():
    msgs = [Message("system", "a"), Message("system", "b"), U("q"), A("thinking aloud"), A("", call("c1", id=1)),
            T("c1"), Message("system", "late reminder"), A("answer")]
    out = clean_conversation(msgs)
    assert out.messages[0] == {"role": "system", "content": "a\n\nb"}
    assert out.messages[2]["content"] == "thinking aloud" and out.messages[2]["tool_calls"]
    assert out.repairs["misplaced_system_dropped"] == 1 and out.repairs["assistant_messages_merged"] == 1
    assert out.repairs["system_messages_merged"] == 1
    assert_valid(out.messages)


def test_bad_arguments_are_wrapped_into_an_object():
    msgs = [U("q"), A("", {"id": "c1", "type": "function", "function": {"name": "Bash", "arguments": "ls -la"}},
                     {"id": "c2", "type": "function", "function": {"name": "f", "arguments": "[1, 2]"}},
                     {"id": "c3", "type": "function", "function": {"name": "", "arguments": "{}"}}),
            T("c1"), T("c2"), T("c3"), A("done")]
    out = clean_conversation(msgs)
    args = [json.loads(c["function"]["arguments"]) for c in out.messages[1]["tool_calls"]]
    assert args == [{"input": "ls -la"}, {"input": [1, 2]}]
    assert out.repairs["tool_arguments_wrapped"] == 2 and out.repairs["invalid_tool_calls_dropped"] == 1
    assert_valid(out.messages)


def test_nothing_trainable_is_skipped_with_a_reason():
    assert clean_conversation([U("hello?")]).skipped == "no_assistant_turn"
    assert clean_conversation([A("", call("c1")), T("c1")]).skipped == "no_assistant_turn"
    assert clean_conversation([]).skipped == "no_messages"
