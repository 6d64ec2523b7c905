"""The offline task segmenter: boundaries, covers, topics, the embedding hook."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from ultron.heuristics import segmenter
from ultron.heuristics.segmenter import segment_window, topic_for
from ultron.sessions.messages import Message

SHARED_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
TAU = SHARED_DATA / "tau-airline-dev"
CLAUDE_CODE = SHARED_DATA / "claude-code"


def user(text: str, **kw) -> Message:
    return Message(role="user", content=text, **kw)


def assistant(text: str = "", calls: list[str] | None = None, **kw) -> Message:
    tool_calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": "{}"}}
        for i, name in enumerate(calls or [])
    ] or None
    return Message(role="assistant", content=text, tool_calls=tool_calls, **kw)


def tool(text: str, **kw) -> Message:
    return Message(role="tool", content=text, tool_call_id="c0", **kw)


def assert_cover(tasks: list[tuple[int, int, str]], n: int) -> None:
    assert tasks, "a non-empty window needs at least one task"
    assert tasks[0][0] == 1 and tasks[-1][1] == n
    for (s, e, topic), nxt in zip(tasks, tasks[1:] + [None]):
        assert isinstance(s, int) and isinstance(e, int) and 1 <= s <= e <= n
        assert isinstance(topic, str) and topic.strip() and len(topic) <= 80
        if nxt is not None:
            assert nxt[0] == e + 1


def starts(tasks) -> list[int]:
    return [s for s, _, _ in tasks]


CSV_DOCKER = [
    user("How do I read a CSV in Python?"),
    assistant("You can use pandas.read_csv()..."),
    user("Write me a Docker compose file"),
    assistant("version: '3'\nservices:\n  ..."),
]


# -- boundaries ------------------------------------------------------------------------------


def test_spec_example_splits_in_two():
    tasks = segment_window(CSV_DOCKER)
    assert [(s, e) for s, e, _ in tasks] == [(1, 2), (3, 4)]
    assert "CSV" in tasks[0][2]
    assert "Docker" in tasks[1][2]


@pytest.mark.parametrize(
    "follow_up",
    [
        "It fails with UnicodeDecodeError",
        "Still getting UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff",
        "Traceback (most recent call last):\n  File \"x.py\", line 1\nUnicodeDecodeError: bad byte",
        "ok",
        "that worked, but the dates come out as strings",
    ],
)
def test_follow_up_on_the_same_problem_stays_one_task(follow_up):
    window = [
        user("How do I read a CSV in Python?"),
        assistant("You can use pandas.read_csv('data.csv'), which returns a DataFrame."),
        user(follow_up),
        assistant("Pass encoding='latin-1' to read_csv."),
    ]
    assert starts(segment_window(window)) == [1]


def test_answers_to_the_assistants_questions_stay_one_task():
    window = [
        user("Hi! I'd like to book a flight from New York to Seattle on May 20th."),
        assistant("I can help with that. Could you please provide your user ID?"),
        user("Sure, my user ID is mia_li_3668."),
        assistant("", calls=["get_user_details"]),
        tool('{"name": {"first_name": "Mia", "last_name": "Li"}}'),
        assistant("Thanks, Mia. Would you like economy or business?"),
        user("yes"),
        assistant("Which of the two, economy or business?"),
        user("Economy, please. And I'll pay with my certificate."),
        assistant("Booked: flight HAT136, economy, paid with certificate 7504069."),
        user("Thank you so much for your help!"),
    ]
    assert starts(segment_window(window)) == [1]


def test_closed_request_then_a_new_one_splits():
    window = [
        user("How do I reverse a list in Python?"),
        assistant("Use reversed(xs) or xs[::-1]."),
        user("Thanks, that worked!"),
        assistant("You're welcome!"),
        user("How do I set up a virtualenv on Windows?"),
        assistant("Run python -m venv .venv, then .venv\\Scripts\\activate."),
    ]
    assert starts(segment_window(window)) == [1, 5]


def test_a_thank_you_and_a_new_request_in_one_message_split_there():
    """The example of docs/benchmarks.md (examples/openai-csv-then-docker.jsonl): the CSV
    answer is confirmed and the compose file asked for in one message. That message opens the
    second task (its topic is the new request), and its closing sentence goes with the first
    task as that task's confirmation."""
    window = [
        user("How do I read a CSV in Python?"),
        assistant("Use pandas: pd.read_csv('data.csv')."),
        user("It fails with UnicodeDecodeError: 'utf-8' codec can't decode byte 0xe9"),
        assistant("Pass the real encoding: pd.read_csv('data.csv', encoding='latin-1')."),
        user("Thanks, that worked. Now write me a Docker compose file for Postgres and a web app."),
        assistant("services:\n  db:\n    image: postgres:16"),
    ]
    tasks = segment_window(window)
    assert starts(tasks) == [1, 5]
    assert tasks[1][2].startswith("Now write me a Docker compose file")
    first = segmenter.with_closing(window[:4], window[4])
    assert [m.content for m in first[4:]] == ["Thanks, that worked."]
    # a follow-up in the same task after a thank-you is not a new one, and closes nothing
    follow = user("Thanks, that worked. Can you also make it skip bad lines?")
    assert starts(segment_window(window[:4] + [follow, assistant("Add on_bad_lines='skip'.")])) == [1]
    assert segmenter.with_closing(window[:4], follow) == window[:4]


def test_goodbye_token_and_greeting_split_two_conversations():
    window = [
        user("Hi! I need to cancel my flights from MCO to CLT."),
        assistant("Could you please provide your user ID and the reservation ID?"),
        user("My user ID is amelia_sanchez_4739 and the reservation is SI5UKW."),
        assistant("", calls=["cancel_reservation"]),
        tool('{"reservation_id": "SI5UKW", "status": "cancelled"}'),
        assistant("Your reservation SI5UKW is cancelled; the refund goes to your original payment method."),
        user("Thank you! ###STOP###"),
        user("Hello! I'd like to know the total balance of my gift cards."),
        assistant("Sure, what is your user ID?"),
        user("It's omar_rossi_1241."),
    ]
    assert starts(segment_window(window)) == [1, 8]


def test_system_message_opens_a_task_and_keeps_its_request():
    window = [
        user("How do I read a CSV in Python?"),
        assistant("Use pandas.read_csv('data.csv')."),
        Message(role="system", content="You are a helpful airline agent."),
        user("Hi, I need to change my flight."),
        assistant("Sure, what is your reservation ID?"),
    ]
    tasks = segment_window(window)
    assert starts(tasks) == [1, 3]
    assert tasks[1][2] == "I need to change my flight."


def test_harness_notes_and_sidechain_never_start_a_task():
    window = [
        user("Spawn a sub-agent to write a poem about curry."),
        assistant("Launching the agent.", calls=["Task"]),
        user("Write a poem about Thai red curry.", is_sidechain=True),
        assistant("Crimson river in a bowl of clay...", is_sidechain=True),
        tool("Agent finished."),
        user("[Request interrupted by user]"),
        user("<command-name>/plugin</command-name>\n<command-args></command-args>"),
        assistant("Here is the poem: Crimson river in a bowl of clay..."),
    ]
    assert starts(segment_window(window)) == [1]


# -- always a valid cover --------------------------------------------------------------------


WEIRD_WINDOWS = {
    "one user": [user("hello")],
    "one assistant": [assistant("done")],
    "one tool": [tool("")],
    "one system": [Message(role="system", content="policy")],
    "one empty user": [user("")],
    "starts with tool": [tool("result"), assistant("So the answer is 4."), user("Now write me a haiku about rain")],
    "starts with assistant": [assistant("", calls=["Bash"]), tool("ok"), user("Hi! How do I install numpy?")],
    "all empty": [user(""), assistant(""), tool(""), user(""), assistant("")],
    "only users": [user("Hi"), user("Hello!"), user("Can you help me?"), user("###STOP###"), user("Hi there")],
    "only systems": [Message(role="system", content="a"), Message(role="system", content="b")],
    "sidechain only": [user("sub task", is_sidechain=True), assistant("sub answer", is_sidechain=True)],
    "odd tool calls": [
        Message(role="assistant", content="", tool_calls=[{"function": None}, {"x": 1}, {"function": {"name": 3}}]),
        user("what now?"),
    ],
    "markup only": [user("<a>b</a>"), assistant("ok"), user("<x/>"), user("   ")],
}


@pytest.mark.parametrize("name", sorted(WEIRD_WINDOWS))
def test_cover_is_valid_for_odd_windows(name):
    window = WEIRD_WINDOWS[name]
    assert_cover(segment_window(window), len(window))


def test_empty_window_has_no_tasks():
    assert segment_window([]) == []


def test_window_starting_mid_task_keeps_index_one_as_a_start():
    window = [tool("42 rows"), assistant("The table has 42 rows."), *CSV_DOCKER]
    tasks = segment_window(window)
    assert_cover(tasks, len(window))
    assert starts(tasks)[0] == 1
    assert 5 in starts(tasks)  # the Docker request still opens its own task


def test_random_windows_are_valid_covers_and_deterministic():
    rng = random.Random(0)
    says = ["yes", "How do I sort a dict?", "Hi! Write me a README", "", "It still fails", "thanks!"]
    answers = ["", "Done.", "Which file?", "Use sorted(d.items())."]
    pool = [
        lambda: user(rng.choice(says)),
        lambda: assistant(rng.choice(answers), calls=rng.choice([None, ["Read"]])),
        lambda: tool(rng.choice(["", "ok", "Error: not found"])),
        lambda: Message(role="system", content="policy"),
        lambda: user("sub", is_sidechain=True),
    ]
    for _ in range(200):
        window = [rng.choice(pool)() for _ in range(rng.randint(1, 30))]
        tasks = segment_window(window)
        assert_cover(tasks, len(window))
        assert segment_window(window) == tasks


def test_deterministic_across_processes():
    code = (
        "from ultron.heuristics.segmenter import segment_window\n"
        "from ultron.sessions.messages import Message as M\n"
        "w=[M('user','How do I read a CSV in Python?'),M('assistant','Use pandas.read_csv().'),"
        "M('user','Now write me a Docker compose file for postgres'),M('assistant','services: db: image: postgres')]\n"
        "from ultron.heuristics import segmenter as r\n"
        "print(segment_window(w), [round(c.score, 9) for c in r._decide(w)])\n"
    )
    outs = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        outs.add(res.stdout)
    assert len(outs) == 1


# -- the embedding hook ----------------------------------------------------------------------


def test_embed_hook_replaces_the_builtin_vectors():
    calls: list[list[str]] = []

    def same(texts: list[str]) -> np.ndarray:
        calls.append(texts)
        return np.ones((len(texts), 8))

    def orthogonal(texts: list[str]) -> np.ndarray:
        return np.eye(len(texts), 16)

    segment_window(CSV_DOCKER, embed=same)
    assert len(calls) == 1 and len(calls[0]) == 2  # one call per window, one text per turn
    assert all(isinstance(t, str) for t in calls[0]) and "CSV" in calls[0][0] and "Docker" in calls[0][1]

    # an embedding that calls every turn identical removes the topic-shift evidence ...
    same_feats = segmenter._decide(CSV_DOCKER, embed=same)[0].features
    other_feats = segmenter._decide(CSV_DOCKER, embed=orthogonal)[0].features
    assert same_feats["embedding_shift"] == 0.0 and other_feats["embedding_shift"] == 1.0
    # ... and so changes the decision on this short example
    assert starts(segment_window(CSV_DOCKER, embed=same)) == [1]
    assert starts(segment_window(CSV_DOCKER, embed=orthogonal)) == [1, 3]


def test_embed_hook_not_called_without_candidates_and_checked_for_shape():
    def boom(texts):
        raise AssertionError("no candidate, no embedding needed")

    assert starts(segment_window([user("hi"), assistant("hello")], embed=boom)) == [1]
    with pytest.raises(ValueError):
        segment_window(CSV_DOCKER, embed=lambda texts: np.zeros((1, 4)))


# -- topics ----------------------------------------------------------------------------------


def test_topics_are_short_first_requests():
    long_request = "Hi there! " + "Please refactor the ingestion module so that every parser error is kept " * 3
    assert topic_for([user(long_request)]).startswith("Please refactor the ingestion module")
    assert len(topic_for([user(long_request)])) <= 80
    booking = "I'm looking to book a flight to Seattle."
    assert topic_for([user("Hi! " + booking)]) == booking
    assert topic_for([user("<ide_opened_file>plan.md</ide_opened_file>\nread plan.md and fix the typos")]) == (
        "read plan.md and fix the typos"
    )
    assert topic_for([assistant("Continuing the migration."), user("[Request interrupted by user]")]) == (
        "Continuing the migration."
    )
    assert topic_for([assistant("", calls=["Bash", "Read", "Bash"]), tool("")]) == "tool calls: Bash, Read"
    assert topic_for([tool("")]) == "(no text)"
    assert topic_for([user("x" * 500)]).endswith("…") and len(topic_for([user("x" * 500)])) <= 80


# -- real sessions ---------------------------------------------------------------------------


def load(path: Path) -> list[Message]:
    from ultron.sessions.parsing import SessionParser

    with open(path, "rb") as fh:
        return [m for m in SessionParser().messages(fh) if m.role != "system"]


needs_shared = pytest.mark.skipif(not TAU.is_dir(), reason="shared data (../shared/data) not present")


@needs_shared
@pytest.mark.parametrize(
    "first, second",
    [
        ("task00-trial0.jsonl", "task05-trial1.jsonl"),
        ("task12-trial2.jsonl", "task08-trial2.jsonl"),
        ("task03-trial1.jsonl", "task03-trial2.jsonl"),  # same task id: same topic, different trial
    ],
)
def test_two_concatenated_tau_sessions_split_where_they_meet(first, second):
    a, b = load(TAU / first), load(TAU / second)
    tasks = segment_window(a + b)
    assert_cover(tasks, len(a) + len(b))
    assert starts(tasks) == [1, len(a) + 1]


@needs_shared
def test_tau_then_claude_code_split_where_they_meet():
    if not (CLAUDE_CODE / "representative-messages.jsonl").is_file():
        pytest.skip("claude-code samples not present")
    a, b = load(TAU / "task01-trial0.jsonl"), load(CLAUDE_CODE / "representative-messages.jsonl")
    tasks = segment_window(a + b)
    assert_cover(tasks, len(a) + len(b))
    assert starts(tasks)[:2] == [1, len(a) + 1]


@needs_shared
def test_every_shared_session_is_a_valid_cover_in_sliding_windows():
    paths = sorted(TAU.glob("*.jsonl"))[:20] + sorted(CLAUDE_CODE.glob("*.jsonl"))
    for path in paths:
        msgs = load(path)
        for begin in range(0, len(msgs), 7):
            window = msgs[begin:begin + 25]
            assert_cover(segment_window(window), len(window))


def test_speed_of_a_thousand_windows():
    turn = [
        user("Hi! I need to change my flight from IAH to SEA to May 24, please."),
        assistant("Sure. Could you please provide your user ID and reservation ID?"),
        user("My user ID is liam_khan_2521 and the reservation is 4NQLHD."),
        assistant("", calls=["get_reservation_details"]),
        tool('{"reservation_id": "4NQLHD", "origin": "IAH", "destination": "SEA", "cabin": "economy"}' * 5),
    ]
    windows = [(turn * 5)[k % 5:k % 5 + 25] for k in range(1000)]
    t0 = time.perf_counter()
    for w in windows:
        segment_window(w)
    assert time.perf_counter() - t0 < 20
