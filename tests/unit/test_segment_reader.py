"""The shared segment reader: one pass that the quality scorer and the memory extractors both build on."""

from __future__ import annotations

import time

from tests.messages import call, say, user
from tests.messages import result as tool_result
from ultron.heuristics import episodes, quality_metrics
from ultron.heuristics.extract import extract_memories
from ultron.heuristics.quality import score_trajectory
from ultron.heuristics.reader import ARGS_CAP, TEXT_CAP, is_error_result, read_arguments, read_segment, tool_kind
from ultron.sessions.messages import Message


def result(text: str, cid: str = "c1", name: str | None = None) -> Message:
    return tool_result(cid, text, name)


# -- pairing ---------------------------------------------------------------------------------

def test_results_pair_with_the_oldest_waiting_call_of_their_id():
    # some producers reuse one id for every call: results go to the calls in order
    seg = read_segment([
        user("look both up"),
        Message(role="assistant", content="", tool_calls=[
            {"id": "x", "function": {"name": "get_a", "arguments": "{}"}},
            {"id": "x", "function": {"name": "get_b", "arguments": "{}"}}]),
        result("Error: no such record", "x"),
        result('{"b": 1}', "x"),
    ])
    a, b = seg.calls
    assert (a.name, a.error, seg.entries[a.result].content) == ("get_a", True, "Error: no such record")
    assert (b.name, b.error, seg.entries[b.result].content) == ("get_b", False, '{"b": 1}')
    assert [e.call for e in seg.entries] == [None, None, 0, 1]


def test_a_result_without_a_call_is_an_orphan():
    seg = read_segment([result("Traceback (most recent call last):\nValueError: bad", "t9", name="Bash"),
                        call("Read", {"file_path": "a.py"}, "r1")])
    orphan = seg.entries[0]
    assert orphan.call is None and orphan.error is True
    assert [c.name for c in seg.calls] == ["Read"] and seg.calls[0].result == -1 and seg.calls[0].error is None


def test_orphans_are_calls_to_the_extractors_but_not_to_the_scorer():
    msgs = [result("Error: permission denied", "t1", name="Bash"), say("The command failed for lack of rights.")]
    seg = read_segment(msgs)
    assert quality_metrics.Digest(seg).calls == [] and len(quality_metrics.Digest(seg).results) == 1
    view = episodes.Digest(seg)
    assert [(c.name, c.error) for c in view.calls] == [("Bash", True)]
    assert any(m["content"].startswith("Bash failed") for m in extract_memories(msgs))


# -- replayed history and sub-agents -----------------------------------------------------------

def test_history_replayed_by_a_resumed_session_is_marked_and_not_counted_twice():
    first = [user("Run the tests please"), call("Bash", {"command": "pytest"}, "b1"), result("FAILED test_x", "b1"),
             say("One test fails; let me look at it.")]
    resumed = first + [call("Bash", {"command": "pytest"}, "b1"), result("FAILED test_x", "b1"),
                       say("One test fails; let me look at it."), user("Run the tests please")]
    seg = read_segment(resumed)
    assert len(seg.calls) == 1
    assert [e.replayed for e in seg.entries] == [False] * 4 + [True, True, False, False]
    assert [e.repeats_text for e in seg.entries] == [False] * 6 + [True, True]
    once, twice = score_trajectory(first), score_trajectory(resumed)
    for name in ("tool_calls", "tool_error_rate", "loops", "efficiency"):
        assert once["metrics"][name] == twice["metrics"][name], name
    assert extract_memories(first) == extract_memories(resumed[:6])


def test_a_new_call_with_a_reused_id_is_not_replay():
    seg = read_segment([call("Bash", {"command": "ls"}, "b1"), result("a.py", "b1"),
                        call("Bash", {"command": "ls -la"}, "b1"), result("total 1", "b1")])
    assert [c.key for c in seg.calls] == ['{"command": "ls"}', '{"command": "ls -la"}']
    assert not any(e.replayed for e in seg.entries)


def test_sub_agent_messages_are_dropped_when_the_main_thread_has_any():
    side = Message(role="assistant", content="sub-agent chatter", is_sidechain=True)
    seg = read_segment([user("hi"), side, "not a message", say("hello")])
    assert [m.content for m in seg.messages] == ["hi", "hello"]
    only_side = read_segment([side])
    assert [m.content for m in only_side.messages] == ["sub-agent chatter"]


# -- judging -----------------------------------------------------------------------------------

def test_error_results_are_judged_once_by_one_rule():
    assert is_error_result(Message(role="tool", content="done", name="error"))
    assert is_error_result(Message(role="tool", content="<tool_use_error>File not found</tool_use_error>"))
    assert is_error_result(Message(role="tool", content='{"error": "reservation not found"}'))
    assert not is_error_result(Message(role="tool", content='{"error": null, "status": "ok"}'))
    assert not is_error_result(Message(role="tool", content="0 errors, 12 passed"))
    # a long result that merely mentions "error" is data, a traceback in it is not
    data = "id,message\n" + "1,no error here\n" * 100
    assert not is_error_result(Message(role="tool", content=data))
    assert is_error_result(Message(role="tool", content=data + "Traceback (most recent call last):\n"))


def test_tool_kind_and_arguments_are_read_once():
    key, args, text = read_arguments('  {"command": "ls -la", "b": [1, 2]}  ')
    assert args == {"command": "ls -la", "b": [1, 2]} and key == text == '{"b": [1, 2], "command": "ls -la"}'
    assert read_arguments({"b": 1, "a": 2})[0] == '{"a": 2, "b": 1}'
    assert read_arguments("not json")[1] is None and read_arguments(None) == ("null", None, "")
    assert tool_kind("get_reservation_details", "{}") == "read"
    assert tool_kind("Bash", '{"command": "git status"}') == "read"
    assert tool_kind("Bash", '{"command": "rm -rf build"}') == "write"
    assert tool_kind("transfer_to_human_agents", "{}") == "handoff"
    seg = read_segment([call("Bash", {"command": "cat setup.cfg"}, "b1")])
    assert seg.calls[0].kind == "read"


def test_huge_texts_are_capped_and_cheap():
    huge = "x" * 5_000_000 + "\nError: at the very end"
    heredoc = {"command": "cat > big.txt << 'EOF'\n" + "line\n" * 2000 + "EOF"}
    msgs = [user("dump it " + "y" * 100_000), call("Bash", heredoc, "b1"), result(huge, "b1"), say("Done.")]
    t0 = time.perf_counter()
    seg = read_segment(msgs)
    elapsed = time.perf_counter() - t0
    assert len(seg.entries[0].text) == TEXT_CAP and len(seg.entries[2].text) == TEXT_CAP
    assert seg.entries[2].content is huge            # the whole text stays available, unread
    c = seg.calls[0]
    assert c.clipped and len(c.text) == ARGS_CAP and c.args == heredoc
    assert seg.entries[2].error is False             # the error is past what is read
    assert elapsed < 0.5
    extract_memories([user("Always use uv."), say("Noted, I will use uv from now on.")])   # redactor warm-up
    t0 = time.perf_counter()
    score_trajectory(msgs)
    extract_memories(msgs)
    assert time.perf_counter() - t0 < 1.0


# -- one digest, two consumers -----------------------------------------------------------------

def test_the_scorer_and_the_extractors_agree_on_which_calls_failed():
    msgs = [
        user("Book the cheapest flight from SFO to JFK on May 5 for user mia_li_3668"),
        call("search_direct_flight", {"origin": "SFO", "destination": "JFK", "date": "2024-05-05"}, "s1"),
        result('[{"flight_number": "HAT023", "price": 120}]', "s1"),
        call("book_reservation", {"flight": "HAT023", "user_id": "mia_li"}, "k1"),
        result("Error: user not found", "k1"),
        call("book_reservation", {"flight": "HAT023", "user_id": "mia_li_3668"}, "k1"),
        result('{"reservation_id": "ABC123", "status": "booked"}', "k1"),
        Message(role="assistant", content="Let me check the baggage rules.", tool_calls=[
            {"id": "g1", "function": {"name": "get_user_details", "arguments": '{"user_id": "mia_li_3668"}'}},
            {"id": "g2", "function": {"name": "calculate", "arguments": '{"expression": "1/0"}'}}]),
        result('{"membership": "gold"}', "g1"),
        result("Error: division by zero", "g2"),
        say("Your flight HAT023 is booked (reservation ABC123)."),
    ]
    seg = read_segment(msgs)
    scorer = quality_metrics.Digest(seg)
    extractors = episodes.Digest(seg)
    failed_by_scorer = [(c.id, c.name) for c in scorer.calls if c.error]
    failed_by_extractors = [(c.cid, c.name) for c in extractors.calls if c.error]
    assert failed_by_scorer == failed_by_extractors == [("k1", "book_reservation"), ("g2", "calculate")]
    assert [c.id for c in seg.failed_calls()] == ["k1", "g2"]
    # and so do their public answers
    q = score_trajectory(msgs)
    assert q["metrics"]["tool_error_rate"]["value"] == round(2 / 5, 4)
    errors = [m for m in extract_memories(msgs) if m["type_hint"] == "error"]
    assert sorted(m["content"].split(" failed")[0] for m in errors) == ["book_reservation", "calculate"]
