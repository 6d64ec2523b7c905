"""OpenAI and ShareGPT shapes, inferred tool schemas, redaction of every field, the split."""

import json

from ultron.redaction import get_redactor
from ultron.sft.formats import infer_tools, openai_record, redact_messages, sharegpt_record
from ultron.sft.split import split_of


def call(cid, name, args):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


CONVERSATION = [
    {"role": "system", "content": "You are an airline agent."},
    {"role": "user", "content": "Book me on HAT001, user mia_li."},
    {"role": "assistant", "content": None, "tool_calls": [call("c1", "get_user", {"user_id": "mia_li"})]},
    {"role": "tool", "tool_call_id": "c1", "name": "get_user", "content": '{"name": "Mia"}'},
    {"role": "assistant", "content": "Checking both flights.", "tool_calls": [
        call("c2", "search", {"flight": "HAT001", "nonstop": True}),
        call("c3", "search", {"flight": "HAT002", "max_price": 120.5, "date": None})]},
    {"role": "tool", "tool_call_id": "c2", "name": "search", "content": "seat 12A"},
    {"role": "tool", "tool_call_id": "c3", "name": "search", "content": "full"},
    {"role": "assistant", "content": "HAT001 has seat 12A."},
]


def test_tool_schemas_are_inferred_from_the_calls():
    tools = infer_tools(CONVERSATION)
    assert [t["function"]["name"] for t in tools] == ["get_user", "search"]
    assert tools[0] == {"type": "function", "function": {"name": "get_user", "parameters": {
        "type": "object", "properties": {"user_id": {"type": "string"}}, "required": ["user_id"]}}}
    search = tools[1]["function"]["parameters"]
    assert search["properties"] == {"date": {"type": "null"}, "flight": {"type": "string"},
                                    "max_price": {"type": "number"}, "nonstop": {"type": "boolean"}}
    assert search["required"] == ["flight"]  # the only key both calls pass


def test_openai_record_keeps_calls_and_results():
    record = openai_record(CONVERSATION, infer_tools(CONVERSATION))
    assert set(record) == {"messages", "tools"}
    m = record["messages"]
    assert m[2] == {"role": "assistant", "content": None, "tool_calls": [call("c1", "get_user", {"user_id": "mia_li"})]}
    assert m[3] == {"role": "tool", "tool_call_id": "c1", "name": "get_user", "content": '{"name": "Mia"}'}
    assert isinstance(m[4]["tool_calls"][0]["function"]["arguments"], str)
    assert "tools" not in openai_record([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}], [])


def test_sharegpt_record_alternates_like_llama_factory_expects():
    record, dropped = sharegpt_record(CONVERSATION, infer_tools(CONVERSATION))
    assert record["system"] == "You are an airline agent."
    assert [t["from"] for t in record["conversations"]] == [
        "human", "function_call", "observation", "function_call", "observation", "gpt"]
    c = record["conversations"]
    assert json.loads(c[1]["value"]) == {"name": "get_user", "arguments": {"user_id": "mia_li"}}
    assert [x["name"] for x in json.loads(c[3]["value"])] == ["search", "search"]  # parallel calls: a list
    assert json.loads(c[4]["value"]) == ["seat 12A", "full"]  # and their results, in call order
    assert [t["name"] for t in json.loads(record["tools"])] == ["get_user", "search"]
    assert dropped == 1  # "Checking both flights." has no place next to a function_call


def test_redaction_reaches_content_arguments_results_and_keeps_arguments_json():
    secret, mail = "sk-proj-Q1w2E3r4T5y6U7i8O9p0AaSsDdFfGgHhJj", "mia.li@example.org"
    messages = [
        {"role": "user", "content": f"my key {secret}"},
        {"role": "assistant", "content": None, "tool_calls": [call("c1", "send", {"to": mail, "password": "hunter2"})]},
        {"role": "tool", "tool_call_id": "c1", "name": "send", "content": f"sent to {mail}"},
        {"role": "assistant", "content": f"Sent to {mail}."},
    ]
    out = redact_messages(messages, get_redactor().redact)
    text = json.dumps(out)
    assert secret not in text and mail not in text and "hunter2" not in text
    args = json.loads(out[1]["tool_calls"][0]["function"]["arguments"])
    assert args == {"to": "<EMAIL_ADDRESS>", "password": "<REDACTED_CREDENTIAL>"}
    assert messages[0]["content"].endswith(secret)  # the input is not modified


def test_split_is_a_stable_function_of_the_fingerprint():
    fps = [f"fp-{i}" for i in range(4000)]
    first = [split_of(fp, 0.1) for fp in fps]
    assert first == [split_of(fp, 0.1) for fp in fps]
    assert [split_of(fp, 0.1) for fp in reversed(fps)] == list(reversed(first))
    share = first.count("validation") / len(fps)
    assert 0.085 < share < 0.115
    assert all(split_of(fp, 0.0) == "train" for fp in fps[:100])
    # Growing the fraction only moves examples into validation, never out of it.
    assert all(split_of(fp, 0.2) == "validation" for fp, s in zip(fps, first) if s == "validation")
