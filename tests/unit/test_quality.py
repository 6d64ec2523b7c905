"""The offline trajectory quality scorer: shape, signals, the calibrated model, judge blending, task types."""

from __future__ import annotations

import math

import csv
import json
from pathlib import Path

import pytest

from ultron.sessions.messages import Message
from ultron.heuristics import quality_model
from ultron.heuristics.quality import QUALITY_VERSION, classify_task_type, score_trajectory

SHARED_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
TAU = SHARED_DATA / "tau-airline-dev"


# -- tiny message builders ------------------------------------------------------------------

def user(text: str) -> Message:
    return Message(role="user", content=text)


def say(text: str) -> Message:
    return Message(role="assistant", content=text)


def call(name: str, args: dict | None = None, cid: str = "c1", text: str = "") -> Message:
    return Message(role="assistant", content=text, tool_calls=[
        {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args or {})}}])


def result(cid: str, content: str, name: str | None = None) -> Message:
    return Message(role="tool", content=content, tool_call_id=cid, name=name)


def clean_coding_session() -> list[Message]:
    return [
        user("My script crashes with KeyError: 'id' in app.py, can you fix it?"),
        call("Read", {"file_path": "app.py"}, "c1"),
        result("c1", "def load(row):\n    return row['id']\n"),
        call("Edit", {"file_path": "app.py", "old_string": "row['id']", "new_string": "row.get('id')"}, "c2"),
        result("c2", "The file app.py has been updated."),
        call("Bash", {"command": "python -m pytest -q"}, "c3"),
        result("c3", "4 passed in 0.12s"),
        say("Fixed: `load` now uses `row.get('id')`, so rows without an id no longer crash. All 4 tests pass."),
        user("It works now, thanks!"),
    ]


def messy_coding_session() -> list[Message]:
    msgs = [user("My script crashes with KeyError: 'id' in app.py, can you fix it?")]
    for i in range(4):
        msgs.append(call("Bash", {"command": "python app.py"}, f"r{i}"))
        msgs.append(result(f"r{i}", "Traceback (most recent call last):\n  File \"app.py\", line 2\nKeyError: 'id'",
                           name="error"))
    msgs += [
        user("No, that's wrong. I said fix app.py, why did you just run it again?!"),
        call("Edit", {"file_path": "app.py", "old_string": "x", "new_string": "y"}, "e1"),
        result("e1", "Error: old_string not found in file", name="error"),
        user("THIS IS STILL NOT WORKING"),
        call("Bash", {"command": "python app.py"}, "r9"),
    ]
    return msgs


def score(msgs, **kw) -> dict:
    return score_trajectory(msgs, **kw)


# -- shape ------------------------------------------------------------------------------------

def assert_well_formed(out: dict) -> None:
    json.dumps(out)  # stored as one JSON document
    assert out["version"] == QUALITY_VERSION
    s = out["summary"]
    assert set(s) >= {"overall_score", "task_type", "outcome", "deterministic_score", "judge_score", "judge_used"}
    assert 0.0 <= s["overall_score"] <= 1.0
    assert 0.0 <= s["deterministic_score"] <= 1.0
    assert s["outcome"] in ("success", "failure", "unknown")
    assert s["task_type"] in ("code", "data", "ops", "writing", "qa", "customer_service", "other")
    assert out["metrics"]
    for name, m in out["metrics"].items():
        assert set(m) >= {"value", "score", "weight", "how"}, name
        assert m["score"] is None or 0.0 <= m["score"] <= 1.0, name
        assert isinstance(m["weight"], (int, float)) and m["weight"] >= 0, name
        assert isinstance(m["how"], str) and m["how"], name
        assert isinstance(m["value"], (int, float, bool)), name


@pytest.mark.parametrize("msgs", [clean_coding_session(), messy_coding_session()])
def test_scores_are_well_formed_and_in_unit_interval(msgs):
    assert_well_formed(score(msgs))


def test_required_signals_are_each_a_metric():
    metrics = score(clean_coding_session())["metrics"]
    for name in ("tool_calls", "tool_error_rate", "repeated_failures", "loops", "user_frustration",
                 "outcome_cues", "final_answer", "efficiency", "policy_events", "verbosity", "state_changes",
                 "request_complexity", "deferred"):
        assert name in metrics
    assert "llm_judge" not in metrics


@pytest.mark.parametrize("msgs", [
    [],
    [result("x", "some output")],
    [result("x", "Error: boom", name="error"), result("y", "ok")],
    [Message(role="system", content="You are helpful.")],
    [user("###STOP###")],
    [call("search", {"q": 1}, "c1")],
    [Message(role="assistant", content=None, tool_calls=[{"function": {"name": "x", "arguments": "not json"}}])],
])
def test_empty_and_tool_only_segments_do_not_crash(msgs):
    out = score(msgs)
    assert_well_formed(out)
    if not any(m.role == "assistant" for m in msgs):
        assert out["summary"]["outcome"] == "unknown"


# -- signals ----------------------------------------------------------------------------------

def test_clean_session_beats_failing_frustrated_unfinished_one():
    good, bad = score(clean_coding_session()), score(messy_coding_session())
    assert good["summary"]["overall_score"] > bad["summary"]["overall_score"] + 0.3
    assert good["summary"]["outcome"] == "success"
    assert bad["summary"]["outcome"] == "failure"
    gm, bm = good["metrics"], bad["metrics"]
    assert gm["final_answer"]["value"] is True and bm["final_answer"]["value"] is False
    assert bm["tool_error_rate"]["value"] == 1.0 and gm["tool_error_rate"]["value"] == 0.0
    assert bm["loops"]["score"] < gm["loops"]["score"]
    assert bm["repeated_failures"]["value"] >= 3
    assert bm["user_frustration"]["value"] == 2 and gm["user_frustration"]["value"] == 0
    assert gm["outcome_cues"]["score"] > 0.5


def test_error_detection_avoids_data_that_merely_mentions_errors():
    long_ok = json.dumps({"rows": [{"field": "error_count", "value": i, "note": "no error here"} for i in range(40)]})
    msgs = [
        user("look these up please"),
        call("get_a", {}, "a"), result("a", "Error: reservation not found"),
        call("get_b", {}, "b"), result("b", long_ok),
        call("get_c", {}, "c"), result("c", "<tool_use_error>File does not exist.</tool_use_error>"),
        call("get_d", {}, "d"), result("d", "all good", name="error"),
        call("get_e", {}, "e"), result("e", "0 errors, 12 passed"),
        call("get_f", {}, "f"), result("f", '{"error": null, "items": []}'),
        call("get_g", {}, "g"), result("g", '{"error": "rate limited"}'),
        say("Done looking those up; some of them failed."),
    ]
    m = score(msgs)["metrics"]["tool_error_rate"]
    assert m["value"] == pytest.approx(4 / 7, abs=1e-4)


def test_repeating_a_failed_call_is_a_loop_but_replayed_history_is_not():
    failing = [user("deploy it"), call("deploy", {"env": "prod"}, "d1"), result("d1", "Error: timeout"),
               call("deploy", {"env": "prod"}, "d2"), result("d2", "Error: timeout"),
               say("The deploy keeps timing out on prod.")]
    m = score(failing)["metrics"]
    assert m["loops"]["value"] == 1 and m["loops"]["score"] < 0.5
    assert m["repeated_failures"]["value"] == 1
    once = [user("deploy it"), call("deploy", {"env": "prod"}, "d1"), result("d1", "deployed"),
            say("Deployed to prod, all services healthy.")]
    replayed = once + once[1:3] + [say("Deployed to prod, all services healthy.")]
    assert score(replayed)["metrics"]["loops"]["value"] == 0
    assert score(replayed)["metrics"]["tool_calls"]["value"] == 1


def test_stop_token_is_an_end_marker_not_a_signal():
    base = [user("Please cancel my order 123."), call("cancel_order", {"id": 123}, "c"),
            result("c", '{"status": "cancelled"}'), say("Your order 123 is cancelled and refunded.")]
    a = score(base + [user("Thanks!")])
    b = score(base + [user("Thanks! ###STOP###")])
    c = score(base + [user("###STOP###")])
    assert a["summary"] == b["summary"]
    assert b["metrics"]["final_answer"]["value"] is True and c["metrics"]["final_answer"]["value"] is True
    assert b["metrics"]["efficiency"]["value"] == c["metrics"]["efficiency"]["value"]


def test_unanswered_request_and_pending_call_are_no_final_answer():
    pending = [user("find the bug"), call("Grep", {"pattern": "bug"}, "g")]
    unanswered = [user("find the bug"), say("I looked at the code and found it in parse()."),
                  user("Can you also fix it?")]
    for msgs in (pending, unanswered):
        m = score(msgs)["metrics"]["final_answer"]
        assert m["value"] is False and m["score"] == 0.0


def test_policy_refusal_held_versus_given_in():
    ask = [Message(role="system", content="You are an airline customer service agent."),
           user("I want to cancel my basic economy flight reservation ABC123 and get a refund."),
           call("get_reservation_details", {"reservation_id": "ABC123"}, "r"), result("r", '{"cabin": "basic_economy"}')]
    held = ask + [say("I'm sorry, but I can't cancel a basic economy reservation without travel insurance."),
                  user("Okay, thanks anyway.")]
    gave_in = ask + [say("I'm sorry, but I can't cancel a basic economy reservation without travel insurance."),
                     user("Please, it's urgent, just do it."),
                     call("cancel_reservation", {"reservation_id": "ABC123"}, "x"), result("x", '{"status": "cancelled"}'),
                     say("Your reservation ABC123 has been cancelled.")]
    handoff = ask + [call("transfer_to_human_agents", {"summary": "refund request"}, "t"),
                     result("t", "Transfer successful")]
    h, g, t = score(held), score(gave_in), score(handoff)
    assert h["summary"]["task_type"] == "customer_service"
    assert h["metrics"]["policy_events"]["score"] == 1.0
    assert g["metrics"]["policy_events"]["score"] < 0.5
    assert t["metrics"]["policy_events"]["score"] == 1.0
    assert t["metrics"]["final_answer"]["score"] is None   # a hand-off is not a missing answer
    assert h["summary"]["overall_score"] > g["summary"]["overall_score"]


def test_more_state_changes_mean_more_risk():
    def session(n):
        msgs = [user("Update my bookings please.")]
        for i in range(n):
            msgs += [call("update_booking", {"i": i}, f"u{i}"), result(f"u{i}", '{"ok": true}')]
        return msgs + [say("All your bookings are updated as requested.")]
    scores = [score(session(n))["metrics"]["state_changes"]["score"] for n in (0, 1, 3)]
    assert scores[0] is None   # no tool calls: nothing to judge
    assert 1.0 > scores[1] > scores[2]
    reads = [user("Show my bookings."), call("get_bookings", {}, "g"), result("g", "[]"), say("You have no bookings.")]
    assert score(reads)["metrics"]["state_changes"]["score"] == 1.0


def test_deferred_ending_is_a_signal():
    ask = [user("I want to change my flight to Seattle, but I don't have the reservation number."),
           say("I need the reservation ID to look it up. Could you find it in your confirmation email?")]
    deferred = ask + [user("Okay, I'll look for it and get back to you. Thanks!"),
                      say("You're welcome! Once you have the reservation ID, feel free to reach out.")]
    done = ask + [user("It's ABC123."), call("update_reservation_flights", {"reservation_id": "ABC123"}, "u"),
                  result("u", '{"status": "ok"}'), say("Your flight is changed to Seattle on the 20th."),
                  user("Great, thank you!")]
    d, k = score(deferred), score(done)
    assert d["metrics"]["deferred"]["value"] == 2 and d["metrics"]["deferred"]["score"] == 0.0
    assert k["metrics"]["deferred"]["score"] == 1.0
    assert d["summary"]["overall_score"] < k["summary"]["overall_score"]
    assert score([])["metrics"]["deferred"]["score"] is None


# -- the calibrated model ----------------------------------------------------------------------

def test_overall_is_the_documented_logistic_model():
    import math

    for msgs in (clean_coding_session(), messy_coding_session()):
        out = score(msgs)
        t = out["summary"]["task_type"]
        service = t in quality_model.TRANSFER
        share = quality_model.TRANSFER.get(t, quality_model.TRANSFER_OTHER)
        prior = 1.0 if service else quality_model.PRIOR_SCALE_OTHER
        z = quality_model.INTERCEPT if service else quality_model.INTERCEPT_OTHER
        for name, m in out["metrics"].items():
            assert m["weight"] == quality_model.WEIGHTS[name]
            w = m["weight"] * (share if name in quality_model.FITTED else prior)
            if m["score"] is not None:
                z += w * (m["score"] - quality_model.NEUTRAL.get(name, 1.0))
        assert out["summary"]["deterministic_score"] == pytest.approx(1 / (1 + math.exp(-z)), abs=2e-4)
    # no evidence either way: the intercept alone (0.79: over the memory floor, under the SFT floor)
    assert quality_model.sigmoid(quality_model.INTERCEPT) == pytest.approx(0.785, abs=0.01)
    assert set(quality_model.FITTED).isdisjoint(quality_model.PRIOR)


def test_other_task_types_keep_sensible_scores():
    """The airline-fitted part must not wreck coding, data or writing sessions."""
    clean = score(clean_coding_session())["summary"]
    assert clean["overall_score"] >= 0.8 and clean["outcome"] == "success"
    unconfirmed = score(clean_coding_session()[:-1])["summary"]     # no word from the user
    assert 0.7 <= unconfirmed["overall_score"] < clean["overall_score"]
    assert score(messy_coding_session())["summary"]["overall_score"] < 0.1
    data = [user("Load sales.csv with pandas and plot the average price per category."),
            call("python", {"code": "df.groupby('cat').price.mean().plot.bar()"}, "d"), result("d", "<Figure>"),
            say("Here is the bar chart of the average price per category (prices.png)."), user("Perfect, thanks!")]
    poem = [user("Write a short poem about autumn rain."),
            say("Soft rain on amber leaves,\nthe gutters hum a slow refrain,\nand autumn, patient, grieves."),
            user("Lovely, thank you!")]
    for msgs, t in ((data, "data"), (poem, "writing")):
        s = score(msgs)["summary"]
        assert s["task_type"] == t and s["overall_score"] >= 0.8
    # a chatty but successful coding session: the service-fitted verbosity weight is halved
    # outside customer service and measured against the coding budget
    chatty = clean_coding_session()
    chatty[-2] = say("Fixed. " + "Here is a detailed explanation of the change and why it works. " * 60)
    assert score(chatty)["summary"]["overall_score"] >= 0.7


def test_explicit_user_verdict_moves_the_score_both_ways():
    base = clean_coding_session()[:-1]
    neutral = score(base)["summary"]["overall_score"]
    works = score(base + [user("It works now, thanks!")])["summary"]["overall_score"]
    broken = score(base + [user("It still doesn't work.")])["summary"]["overall_score"]
    logit = lambda p: math.log(p / (1 - p))  # noqa: E731 - near 1 the gain shows in log-odds
    assert logit(works) > logit(neutral) + 0.5 and broken < neutral - 0.2


# -- judge ------------------------------------------------------------------------------------

def test_judge_blending_is_documented_weighted_mean():
    msgs = clean_coding_session()
    det = score(msgs)["summary"]["deterministic_score"]
    judge = {"goal_achieved": 0.0, "correctness": 0.5, "efficiency": 1.0, "safety": 1.0, "rationale": "goal missed"}
    expected_judge = 0.4 * 0.0 + 0.3 * 0.5 + 0.2 * 1.0 + 0.1 * 1.0
    out = score(msgs, judge=judge, judge_weight=0.5)
    s = out["summary"]
    assert s["judge_used"] is True
    assert s["judge_score"] == pytest.approx(expected_judge, abs=1e-4)
    assert s["deterministic_score"] == det
    assert s["overall_score"] == pytest.approx(0.5 * det + 0.5 * expected_judge, abs=1e-4)
    assert out["metrics"]["llm_judge"]["score"] == pytest.approx(expected_judge, abs=1e-4)
    assert out["metrics"]["llm_judge"]["rationale"] == "goal missed"
    assert_well_formed(out)
    heavy = score(msgs, judge=judge, judge_weight=0.9)["summary"]["overall_score"]
    assert heavy == pytest.approx(0.1 * det + 0.9 * expected_judge, abs=1e-4)
    assert heavy < s["overall_score"]
    assert score(msgs, judge=judge, judge_weight=0.0)["summary"]["overall_score"] == pytest.approx(det, abs=1e-4)


def test_without_judge_overall_is_deterministic():
    s = score(messy_coding_session())["summary"]
    assert s["judge_used"] is False and s["judge_score"] is None
    assert s["overall_score"] == s["deterministic_score"]
    assert score(messy_coding_session(), judge={})["summary"]["judge_used"] is False


# -- task types -------------------------------------------------------------------------------

@pytest.mark.parametrize("text,expected", [
    ("Load sales.csv with pandas and plot the average price per category.", "data"),
    ("My docker compose stack won't start: the postgres container exits immediately.", "ops"),
    ("I need to change my flight to Seattle on May 20 to a later one.", "customer_service"),
    ("Write a short poem about autumn rain.", "writing"),
    ("Fix this python traceback:\nTraceback (most recent call last):\n  File \"main.py\", line 3\n"
     "TypeError: 'NoneType' object is not subscriptable", "code"),
    ("What is the capital of Australia?", "qa"),
])
def test_classify_task_type(text, expected):
    msgs = [user(text), say("Sure, here you go.")]
    assert classify_task_type(msgs) == expected
    assert score(msgs)["summary"]["task_type"] == expected


def test_classify_uses_tools_and_falls_back_to_other():
    assert classify_task_type([]) == "other"
    assert classify_task_type([user("hello")]) == "other"
    msgs = [user("hi, user id mia_1"), call("get_user_details", {"user_id": "mia_1"}, "a"),
            call("transfer_to_human_agents", {}, "b")]
    assert classify_task_type(msgs) == "customer_service"


# -- real data (skipped when ../shared is absent) ----------------------------------------------

def _auroc(scores, labels):
    pos = [s for s, y in zip(scores, labels) if y]
    neg = [s for s, y in zip(scores, labels) if not y]
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


@pytest.mark.skipif(not (TAU / "labels.csv").exists(), reason="../shared/data is absent")
def test_tau_airline_scores_separate_solved_from_unsolved():
    from ultron.sessions.parsing import SessionParser

    rows = list(csv.DictReader(open(TAU / "labels.csv", newline="")))
    scores, labels = [], []
    for r in rows:
        with open(TAU / r["file"], "rb") as fh:
            out = score_trajectory(list(SessionParser().messages(fh)))
        assert_well_formed(out)
        assert out["summary"]["task_type"] == "customer_service"
        scores.append(out["summary"]["overall_score"])
        labels.append(float(r["reward"]) >= 0.5)
    # in-sample; benchmarks/quality_auroc.py gives the leave-task-out figure (0.82)
    assert _auroc(scores, labels) >= 0.8
    # calibrated: the memory floor keeps mostly solved tasks, and few overall (31% are solved)
    kept = [y for s, y in zip(scores, labels) if s >= 0.7]
    assert 5 <= len(kept) <= 40 and sum(kept) / len(kept) >= 0.7


@pytest.mark.skipif(not (TAU / "labels.csv").exists(), reason="../shared/data is absent")
def test_shipped_constants_are_the_documented_fit():
    """Refitting by the procedure in quality_model's docstring gives the shipped constants."""
    import importlib.util

    import numpy as np
    from ultron.sessions.parsing import SessionParser

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "quality_auroc.py"
    spec = importlib.util.spec_from_file_location("quality_auroc", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rows = list(csv.DictReader(open(TAU / "labels.csv", newline="")))
    outs = []
    for r in rows:
        with open(TAU / r["file"], "rb") as fh:
            outs.append(score_trajectory(list(SessionParser().messages(fh))))
    names = [k for k in outs[0]["metrics"] if k in quality_model.WEIGHTS]
    S = np.array([[np.nan if o["metrics"][k]["score"] is None else o["metrics"][k]["score"] for k in names]
                  for o in outs])
    y = np.array([float(r["reward"]) >= 0.5 for r in rows], dtype=float)
    a, w = bench.Model(quality_model, names).fit(S, y)
    assert a == pytest.approx(quality_model.INTERCEPT, abs=0.1)
    for i, k in enumerate(names):
        assert w[i] == pytest.approx(quality_model.WEIGHTS[k], rel=0.05), k


@pytest.mark.skipif(not (SHARED_DATA / "claude-code").exists(), reason="../shared/data is absent")
def test_claude_code_sessions_score():
    from ultron.sessions.parsing import SessionParser

    for path in sorted((SHARED_DATA / "claude-code").glob("*.jsonl")):
        with open(path, "rb") as fh:
            assert_well_formed(score_trajectory(list(SessionParser().messages(fh))))
