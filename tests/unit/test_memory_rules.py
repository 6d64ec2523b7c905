"""The offline ("rules") Memory Hub tasks: extraction heuristics, types, summaries, duplicates, merging."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ultron.heuristics import candidates, merge, summarize
from ultron.heuristics.classify import classify_memory_type
from ultron.heuristics.extract import extract_from_text, extract_memories
from ultron.heuristics.merge import is_same_memory, merge_bodies
from ultron.heuristics.summarize import overview_l1, summarize_l0
from ultron.llm.tokens import count_tokens
from tests.messages import call, result, say, user
from ultron.sessions.messages import Message
from ultron.vocabulary import MEMORY_TYPES

SHARED_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
KEYS = {"content", "context", "resolution", "tags", "kind", "tools_used", "confidence", "type_hint", "confirmed"}


# -- tiny message builders ------------------------------------------------------------------

def check_shape(memories: list[dict]) -> None:
    for m in memories:
        assert set(m) == KEYS
        assert isinstance(m["content"], str) and m["content"].strip()
        assert isinstance(m["context"], str) and isinstance(m["resolution"], str)
        assert len(m["content"]) <= candidates.CONTENT_CHARS
        assert len(m["context"]) <= candidates.CONTEXT_CHARS
        assert len(m["resolution"]) <= candidates.RESOLUTION_CHARS
        assert 0.0 <= m["confidence"] <= 1.0
        assert m["kind"] in ("procedural", "episodic")
        assert m["type_hint"] in MEMORY_TYPES
        assert all(isinstance(t, str) and t == t.lower() for t in m["tags"])
        assert all(isinstance(t, str) for t in m["tools_used"])


def of_type(memories: list[dict], type_hint: str) -> list[dict]:
    return [m for m in memories if m["type_hint"] == type_hint]


# -- segments -----------------------------------------------------------------------------

TRACEBACK = ("Traceback (most recent call last):\n  File \"report.py\", line 3, in <module>\n"
             "    import pandas as pd\nModuleNotFoundError: No module named 'pandas'\n")


def missing_module_segment() -> list[Message]:
    return [
        user("Run the monthly report script and show me the summary"),
        call("Bash", {"command": "python report.py --month 2024-05"}, "c1", "I'll run the report."),
        result("c1", TRACEBACK + "debug noise " * 800, name="error"),
        call("Bash", {"command": "pip install pandas"}, "c2",
             "The pandas package is missing from the environment, so I need to install it first."),
        result("c2", "Successfully installed pandas-2.2.2 numpy-1.26.4"),
        call("Bash", {"command": "python report.py --month 2024-05"}, "c3"),
        result("c3", "Report for 2024-05: 1,234 orders, revenue $56,789"),
        say("The report ran successfully: 1,234 orders and $56,789 revenue in May 2024."),
    ]


def correction_segment() -> list[Message]:
    return [
        user("Install the project dependencies"),
        call("Bash", {"command": "pip install -r requirements.txt"}, "c1", "Installing with pip."),
        result("c1", "Successfully installed 12 packages"),
        say("Done: the dependencies are installed with pip."),
        user("No, don't use pip here. Use uv instead, this project is managed by uv."),
        call("Bash", {"command": "uv sync"}, "c2", "You're right, sorry about that. Let me use uv."),
        result("c2", "Resolved 12 packages in 120ms"),
        say("Dependencies are now installed with uv sync."),
    ]


def pattern_segment() -> list[Message]:
    return [
        user("Add a /health endpoint to the Flask app in app.py and make sure the tests pass"),
        call("Read", {"file_path": "/repo/app.py"}, "c1"),
        result("c1", "from flask import Flask\napp = Flask(__name__)\n"),
        call("Edit", {"file_path": "/repo/app.py", "old_string": "app = Flask(__name__)",
                      "new_string": "app = Flask(__name__)\n@app.get('/health')\ndef health():\n    return 'ok'"}, "c2"),
        result("c2", "The file /repo/app.py has been updated successfully."),
        call("Write", {"file_path": "/repo/tests/test_health.py", "content": "def test_health(client): ..."}, "c3"),
        result("c3", "File created successfully at: /repo/tests/test_health.py"),
        call("Bash", {"command": "pytest -q tests/test_health.py"}, "c4"),
        result("c4", "1 passed in 0.12s"),
        say("Added the /health endpoint to app.py and a test for it; the test passes."),
        user("Perfect, thanks!"),
    ]


# -- heuristic 1: error -> resolution --------------------------------------------------------

def test_error_followed_by_fix_gives_error_memory():
    mems = extract_memories(missing_module_segment(), task_type="code")
    check_shape(mems)
    [err] = of_type(mems, "error")
    # the error, then the lesson in the agent's words
    assert err["content"].startswith("Bash failed: ModuleNotFoundError: No module named 'pandas' — ")
    assert "pandas package is missing" in err["content"]
    assert "debug noise" not in err["content"] + err["context"] + err["resolution"]
    assert "monthly report" in err["context"] and "report.py" in err["context"]
    assert "pip install pandas" in err["resolution"]
    assert "re-ran" in err["resolution"] and "1,234 orders" in err["resolution"]
    assert err["kind"] == "procedural" and err["tools_used"] == ["Bash"]
    assert err["confidence"] >= 0.8
    assert {"python", "pandas", "code"} <= set(err["tags"])


def test_retry_with_changed_arguments_shows_what_changed():
    segment = [
        user("Book flight HAT136 for me, pay with my certificate and the rest on my card"),
        call("book_reservation", {"user_id": "mia_1", "flights": ["HAT136"],
                                  "payment_methods": [{"payment_id": "certificate_1", "amount": 255}]}, "c1"),
        result("c1", "Error: payment amount does not add up, total price is 305, but paid 255",
               name="book_reservation"),
        call("book_reservation", {"user_id": "mia_1", "flights": ["HAT136"],
                                  "payment_methods": [{"payment_id": "certificate_1", "amount": 250},
                                                      {"payment_id": "credit_card_2", "amount": 55}]}, "c2",
             "The total is actually $305, so the card covers the remaining $55."),
        result("c2", '{"reservation_id": "ABC123", "status": "booked"}', name="book_reservation"),
        say("Your reservation ABC123 has been successfully booked."),
    ]
    [err] = of_type(extract_memories(segment, task_type="customer_service"), "error")
    assert err["content"].startswith("book_reservation failed: payment amount does not add up")
    assert "payment_methods" in err["resolution"] and "credit_card_2" in err["resolution"]
    assert "user_id" not in err["resolution"]          # only the changed argument is shown
    assert err["confidence"] >= 0.8


def test_other_tool_can_be_the_fix_but_a_lookup_is_not():
    segment = [
        user("commit!"),
        call("Skill", {"skill": "commit"}, "c1"),
        result("c1", "<tool_use_error>Unknown skill: commit</tool_use_error>", name="error"),
        call("Bash", {"command": "git status"}, "c2"),
        result("c2", "On branch main\nChanges to be committed: ..."),
        call("Bash", {"command": "git commit -m 'Add plugin'"}, "c3"),
        result("c3", "[main f0bf20a] Add plugin\n 7 files changed"),
        say("Committed: f0bf20a - Add plugin"),
    ]
    [err] = of_type(extract_memories(segment), "error")
    assert err["content"] == "Skill failed: Unknown skill: commit"
    assert "Worked: Bash `git commit -m 'Add plugin'`" in err["resolution"]
    assert err["tools_used"] == ["Skill", "Bash"]


def test_unresolved_error_is_emitted_with_low_confidence():
    segment = [
        user("Publish the session"),
        call("Bash", {"command": "python3 publish_session.py"}, "c1"),
        result("c1", "Exit code 1\nError: Session info not available. Was the plugin installed correctly?",
               name="error"),
        say("The SessionStart hook didn't run because the plugin was not loaded when the session started."),
    ]
    [err] = of_type(extract_memories(segment), "error")
    assert err["content"] == "Bash failed: Session info not available. Was the plugin installed correctly?"
    assert err["resolution"].startswith("Unresolved.") and "SessionStart" in err["resolution"]
    assert err["confidence"] < 0.5


def test_repeated_identical_errors_are_one_memory():
    segment = [user("Change my flight to HAT030 on May 13")]
    for n in range(3):
        segment += [call("update_reservation_flights", {"flights": ["HAT030"], "n": n}, f"e{n}"),
                    result(f"e{n}", "Error: flight HAT030 not available on date 2024-05-13",
                           name="update_reservation_flights")]
    segment += [call("update_reservation_flights", {"flights": ["HAT052"]}, "ok"),
                result("ok", '{"reservation_id": "XEWRD9"}', name="update_reservation_flights"),
                say("Your flight has been changed to HAT052.")]
    errors = of_type(extract_memories(segment), "error")
    assert len(errors) == 1
    assert "(failed 3 times)" in errors[0]["context"]
    # the fix, with the one-off flight number generalised
    assert "update_reservation_flights with flights=[<flight>]" in errors[0]["resolution"]
    assert "HAT052" not in json.dumps(errors)


def test_permission_errors_are_errors_and_credential_fixes_are_security():
    segment = [
        user("Add my host entry"),
        call("Bash", {"command": "echo '10.0.0.2 db' >> /etc/hosts"}, "c1"),
        result("c1", "bash: /etc/hosts: Permission denied", name="error"),
        call("Bash", {"command": "echo '10.0.0.2 db' | sudo tee -a /etc/hosts"}, "c2"),
        result("c2", "10.0.0.2 db"),
        say("Added the entry with sudo tee."),
    ]
    # a permission error is an error to fix, not a security lesson
    [err] = of_type(extract_memories(segment), "error")
    assert "Permission denied" in err["content"] and "sudo tee" in err["resolution"]
    leaked = [
        user("Deploy the api"),
        call("Bash", {"command": "./deploy.sh"}, "c1"),
        result("c1", "error: 401 Unauthorized: the token has been revoked", name="error"),
        say("The old token was revoked after it leaked, so I will rotate it: create a new token in the vault."),
        call("Bash", {"command": "vault kv put secret/deploy token=@new_token && ./deploy.sh"}, "c2"),
        result("c2", "deployed"),
        say("Rotated the token in the vault and the deploy succeeded."),
    ]
    assert of_type(extract_memories(leaked), "security")


# -- heuristic 2: corrections --------------------------------------------------------------

def test_user_correction_gives_correction_memory():
    mems = extract_memories(correction_segment(), task_type="code")
    check_shape(mems)
    [corr] = of_type(mems, "correction")
    # content is the lesson as the user put it; what the agent did is its context
    assert corr["content"] == "Don't use pip here."
    assert "pip install -r requirements.txt" in corr["context"]
    assert corr["confirmed"] is True
    assert "Use uv instead" in corr["resolution"] and "uv sync" in corr["resolution"]
    assert corr["kind"] == "procedural"          # phrased as a rule ("don't use pip ...")
    assert corr["confidence"] >= 0.7             # strong cue + the agent acknowledged it
    assert "install the project dependencies" in corr["context"].lower()


def test_correction_of_an_assumption_picks_the_sentence_it_is_about():
    segment = [
        user("I need to change my flight from ATL to a nonstop to LAS."),
        call("search_direct_flight", {"origin": "LAX", "destination": "LAS", "date": "2024-05-13"}, "c1"),
        result("c1", "[]", name="search_direct_flight"),
        say("It appears there are no direct flights available from LAX to LAS on May 13, 2024. "
            "Would you like me to look for one-stop flights?"),
        user("Actually, I was looking to change my flight from ATL to a nonstop to LAS, not LAX."),
        say("I apologize for the confusion. Let me search from ATL."),
    ]
    [corr] = of_type(extract_memories(segment), "correction")
    assert "not LAX" in corr["content"] and "LAX" in corr["context"]
    assert "not LAX" in corr["resolution"]
    # about this one booking: kept, but below a correction phrased as a rule
    assert corr["kind"] == "episodic" and 0.6 <= corr["confidence"] < 0.7


def test_rejected_tool_call_followed_by_instructions_is_a_correction_not_an_error():
    segment = [
        user("Clean the build output"),
        call("Bash", {"command": "rm -rf build dist"}, "c1"),
        result("c1", "The user doesn't want to proceed with this tool use. The tool use was rejected.", name="error"),
        user("[Request interrupted by user for tool use]"),
        user("Only delete the build folder, keep dist."),
        call("Bash", {"command": "rm -rf build"}, "c2"),
        result("c2", ""),
        say("Removed the build folder and kept dist."),
    ]
    mems = extract_memories(segment)
    assert not of_type(mems, "error")
    [corr] = of_type(mems, "correction")
    assert corr["content"] == "Only delete the build folder, keep dist."
    assert "rm -rf build dist" in corr["context"] and "rejected" in corr["context"]
    assert "keep dist" in corr["resolution"]
    assert corr["confidence"] >= 0.5


@pytest.mark.parametrize("reply", [
    "No, I do not want travel insurance.",           # an answer to the agent's question
    "I don't have the reservation ID with me right now.",
    "No, that's all for now. Thanks!",
    "That should be all for now.",
])
def test_answers_and_closings_are_not_corrections(reply):
    segment = [
        user("Book the 9am flight to Seattle for me"),
        say("I found the 9am flight HAT136. Would you like to add travel insurance for $30?"),
        user(reply),
        say("Alright, noted."),
    ]
    assert of_type(extract_memories(segment), "correction") == []


# -- heuristic 3: preferences --------------------------------------------------------------

def test_stated_preferences():
    segment = [
        user("Set up the project for me."),
        say("Sure, what package manager do you use?"),
        user("From now on, always run the tests with pytest -q before committing. I prefer short commit messages. "
             "I'd prefer a window seat on this trip."),
        say("Understood."),
    ]
    prefs = of_type(extract_memories(segment), "preference")
    by_text = {m["content"]: m for m in prefs}
    standing = by_text["From now on, always run the tests with pytest -q before committing."]
    assert standing["kind"] == "procedural" and standing["confidence"] >= 0.7
    general = by_text["I prefer short commit messages."]
    assert general["resolution"].startswith("Prefer short commit messages")
    situational = by_text["I'd prefer a window seat on this trip."]
    assert situational["kind"] == "episodic"
    assert situational["confidence"] < standing["confidence"]


def test_preference_applied_later_raises_confidence():
    base = [user("Book me a flight from New York to Seattle on May 20."), say("Which cabin would you like?"),
            user("I prefer economy class.")]
    honoured = base + [call("book_reservation", {"cabin": "economy", "origin": "JFK"}, "c1"),
                       result("c1", '{"reservation_id": "X1"}'), say("Booked in economy.")]
    plain = base + [say("Noted.")]
    [p1] = of_type(extract_memories(honoured), "preference")
    [p2] = of_type(extract_memories(plain), "preference")
    assert "Applied: book_reservation with cabin=economy" in p1["resolution"]
    assert p1["confidence"] > p2["confidence"]


# -- heuristic 4: patterns -----------------------------------------------------------------

def test_successful_multi_step_sequence_gives_pattern():
    mems = extract_memories(pattern_segment(), task_type="code")
    check_shape(mems)
    [pat] = of_type(mems, "pattern")
    assert pat["content"].startswith("Add a /health endpoint")
    assert pat["tools_used"] == ["Read", "Edit", "Write", "Bash"]
    steps = pat["resolution"].split("\n")
    assert steps[0] == "1. Read: app.py" and steps[-1] == "4. Bash: `pytest -q tests/test_health.py`"
    assert "Outcome: Added the /health endpoint" in pat["context"]
    assert pat["kind"] == "procedural" and pat["confidence"] >= 0.6


def test_no_pattern_when_the_last_result_failed_or_there_is_no_answer():
    failing = pattern_segment()[:8] + [result("c4", "FAILED tests/test_health.py::test_health - AssertionError",
                                              name="error"), say("The test fails, I could not fix it.")]
    assert of_type(extract_memories(failing), "pattern") == []
    pending = pattern_segment()[:8]          # ends on a tool call with no answer
    assert of_type(extract_memories(pending), "pattern") == []
    short = pattern_segment()[:5] + [say("Added the endpoint.")]       # only two successful calls
    assert of_type(extract_memories(short), "pattern") == []


def test_same_tool_runs_are_collapsed_but_commands_are_not():
    segment = [user("Read the three config files and summarise the settings")]
    for n, name in enumerate(("a.toml", "b.toml", "c.toml")):
        segment += [call("Read", {"file_path": f"/cfg/{name}"}, f"r{n}"), result(f"r{n}", "x = 1")]
    segment += [call("Bash", {"command": "ls /cfg"}, "b1"), result("b1", "a.toml b.toml c.toml"),
                call("Bash", {"command": "wc -l /cfg/a.toml"}, "b2"), result("b2", "1 /cfg/a.toml"),
                say("All three files set x = 1; nothing else is configured.")]
    [pat] = of_type(extract_memories(segment), "pattern")
    assert pat["resolution"].split("\n") == [
        "1. Read x3: a.toml, b.toml, c.toml", "2. Bash: `ls /cfg`", "3. Bash: `wc -l /cfg/a.toml`"]


# -- security, life, chit-chat, robustness --------------------------------------------------

def test_leaked_credential_is_a_security_memory_and_is_redacted():
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    segment = [
        user("Check the deploy environment"),
        call("Bash", {"command": "env | grep TOKEN"}, "c1"),
        result("c1", f"GITHUB_TOKEN={token}"),
        say("The GITHUB_TOKEN is printed in plain text; you should rotate that token."),
    ]
    mems = extract_memories(segment)
    [sec] = of_type(mems, "security")
    # the lesson is what to do about it; where the token was seen is its context
    assert "rotate that token" in sec["content"]
    assert "GitHub token appeared in plain text" in sec["context"] and "env | grep TOKEN" in sec["context"]
    assert "rotate" in sec["resolution"]
    assert all(token not in json.dumps(m) for m in mems)


def test_customer_service_rules_grounded_in_the_policy_are_pattern_memories():
    policy = ("# Airline Agent Policy\n\n- Change flights: Basic economy flights cannot be modified. Other reservations "
              "can be modified without changing the origin, destination, and trip type.\n"
              "- Payment: each reservation can use at most one travel certificate, at most one credit card, and at "
              "most three gift cards.\n" + "- Flights, bookings, baggage and refunds are handled by the agent.\n" * 3)
    segment = [
        Message(role="system", content=policy),
        user("Can I change my basic economy flight to tomorrow?"),
        say("I'm sorry, but basic economy flights cannot be modified. Is there anything else I can help with?"),
    ]
    # a business policy learned in a session is a general rule (pattern), not a fact of a person's life
    assert not of_type(extract_memories(segment, task_type="customer_service"), "life")
    [life] = of_type(extract_memories(segment, task_type="customer_service"), "pattern")
    assert life["content"] == "Basic economy flights cannot be modified."
    assert life["resolution"].startswith("Policy: Change flights: Basic economy flights cannot be modified.")
    assert life["confidence"] >= 0.5


def test_chit_chat_gives_no_memory():
    segment = [user("Hi there!"), say("Hello! How can I help you today?"),
               user("Just saying hello, have a nice day."), say("You too!")]
    assert extract_memories(segment) == []
    assert extract_memories(segment, task_type="other") == []


def test_degenerate_segments_do_not_crash():
    huge = "line of output\n" * 100_000
    odd_calls = Message(role="assistant", content=None, tool_calls=[  # type: ignore[arg-type]
        {"id": "a", "function": {"name": "Bash", "arguments": "not json {"}},
        {"id": "b", "function": {"name": "Edit", "arguments": {"file_path": "x.py"}}},
        {"id": "c"}, "garbage", None])
    cases = [
        [],
        [result("t1", "Error: boom", name="error"), result("t2", "ok")],
        [result("t1", "ok")] * 5,
        [user("hi"), odd_calls, result("a", huge), result("b", "Error: " + huge, name="error"), result("c", "")],
        [Message(role="user", content="Do it", is_sidechain=True),
         call("Bash", {"command": "ls"}, "s1"), result("s1", "Traceback (most recent call last):\nKeyError: 'x'")],
        [Message(role="developer", content="weird role"), Message(role="user", content="")],
        [say("Only an answer.")],
    ]
    for segment in cases:
        mems = extract_memories(segment)
        check_shape(mems)
        assert all("line of output\nline of output" not in m["resolution"] for m in mems)


def test_sidechain_messages_are_left_out_when_the_main_thread_has_content():
    segment = correction_segment() + [
        Message(role="user", content="No, that's wrong, use conda instead.", is_sidechain=True)]
    corrections = of_type(extract_memories(segment), "correction")
    assert len(corrections) == 1 and "conda" not in corrections[0]["resolution"]


def test_extraction_is_deterministic_and_deduplicated():
    segment = missing_module_segment() + missing_module_segment()
    a, b = extract_memories(segment), extract_memories(segment)
    assert a == b
    keys = [(m["type_hint"], m["content"]) for m in a]
    assert len(keys) == len(set(keys))


def test_extract_from_text():
    steps = extract_from_text("How to release:\n1. Bump the version\n2. Tag the commit\n3. Push the tag")
    assert steps[0]["type_hint"] == "pattern" and "2. Tag the commit" in steps[0]["resolution"]
    fix = extract_from_text("ImportError: cannot import name 'x' from 'y'. The fix was to upgrade y to 2.0.")
    assert fix[0]["type_hint"] == "error" and "upgrade y" in fix[0]["resolution"]
    check_shape(steps + fix + extract_from_text("I always use tabs.") + extract_from_text(""))


# -- real data (skipped when ../shared is absent) -------------------------------------------

@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="../shared/data is absent")
def test_every_shared_session_extracts_without_crashing():
    from ultron.sessions.parsing import SessionParser

    by_source: dict[str, list[dict]] = {}
    files = sorted(SHARED_DATA.glob("*/*.jsonl"))
    assert files
    for path in files:
        with open(path, "rb") as fh:
            messages = list(SessionParser().messages(fh))
        task_type = "customer_service" if "tau" in path.parent.name else None
        mems = extract_memories(messages, task_type=task_type)
        check_shape(mems)
        by_source.setdefault(path.parent.name, []).extend(mems)
    code = by_source.get("claude-code", [])
    fixed = [m for m in of_type(code, "error") if m["confidence"] >= 0.5 and "Worked:" in m["resolution"]]
    assert fixed, "expected error -> resolution memories from the Claude Code sessions"
    assert any("--permission-mode bypassPermissions" in m["resolution"] for m in fixed)
    everything = [m for mems in by_source.values() for m in mems]
    assert len([m for m in of_type(everything, "pattern") if m["confidence"] >= 0.5]) >= 5
    assert of_type(by_source.get("tau-airline-dev", []), "error")


# -- classification -------------------------------------------------------------------------

@pytest.mark.parametrize(("content", "resolution", "tags", "expected"), [
    ("ModuleNotFoundError: No module named 'pandas'", "pip install pandas", None, "error"),
    ("The build failed with exit code 2", "", None, "error"),
    ("An API key was committed to the repository and exposed in the CI logs", "Rotate the key", None, "security"),
    ("Permission denied when writing /etc/hosts", "run with sudo", None, "security"),
    ("The agent used pip; the user said to use uv instead", "Use uv instead of pip", None, "correction"),
    ("I prefer short commit messages", "", None, "preference"),
    ("Always run black before committing", "", None, "preference"),
    ("How to deploy the app", "1. Build the image\n2. Push it\n3. Run kubectl apply", None, "pattern"),
    ("Basic economy flights cannot be changed; travel insurance allows a full refund", "", None, "life"),
    ("Something happened", "", ["security"], "security"),
    ("", "", None, "pattern"),
    ("Nothing in particular", "", None, "pattern"),
])
def test_classify_memory_type(content, resolution, tags, expected):
    assert classify_memory_type(content, "", resolution, tags) == expected


def test_classification_is_deterministic_on_ties():
    # one error cue and one correction cue of the same weight: priority order decides
    text = "wrong"
    assert classify_memory_type(text) == classify_memory_type(text) == "correction"
    assert classify_memory_type("error instead") in MEMORY_TYPES


# -- summaries --------------------------------------------------------------------------------

LONG_TRACEBACK = ("Traceback (most recent call last):\n" + '  File "x.py", line 1, in <module>\n' * 300
                  + "ValueError: invalid literal for int() with base 10: 'abc'\n" + "More text here. " * 400)


def test_summaries_stay_within_token_limits():
    resolution = "Cast the value with int(x.strip()) after validating it. " * 60
    context = "While parsing the uploaded CSV in the nightly import job. " * 80
    l0 = summarize_l0(LONG_TRACEBACK, context, resolution)
    l1 = overview_l1(LONG_TRACEBACK, context, resolution)
    assert count_tokens(l0) <= summarize.L0_TOKENS and "\n" not in l0
    assert l0.startswith("ValueError: invalid literal for int()")
    assert "Cast the value" in l0
    assert count_tokens(l1) <= summarize.L1_TOKENS
    assert "ValueError" in l1 and "Context:" in l1 and "Resolution:" in l1
    for text in ("x" * 20000, "word " * 20000, "中文" * 5000):
        assert count_tokens(summarize_l0(text, text, text)) <= summarize.L0_TOKENS
        assert count_tokens(overview_l1(text, text, text)) <= summarize.L1_TOKENS


def test_l0_prefers_the_fix_step_of_the_resolution():
    l0 = summarize_l0("Bash failed: unknown option '--yes'", "",
                      "First: Bash `claude --help`. Worked: Bash `claude -p x --permission-mode bypassPermissions`")
    assert l0 == "Bash failed: unknown option '--yes' -> Bash `claude -p x --permission-mode bypassPermissions`"
    assert summarize_l0("", "", "") == ""


# -- duplicates and merging -------------------------------------------------------------------

SSL_A = {"content": "pip install fails with SSL: CERTIFICATE_VERIFY_FAILED error behind the corporate proxy",
         "context": "installing requests",
         "resolution": "Fixed by passing --trusted-host pypi.org --trusted-host files.pythonhosted.org to pip install"}
SSL_B = {"content": "SSL CERTIFICATE_VERIFY_FAILED error when running pip install behind a proxy", "context": "",
         "resolution": "Resolved by adding --trusted-host pypi.org and --trusted-host files.pythonhosted.org "
                       "to the pip command"}


def test_paraphrases_of_the_same_fix_are_the_same_memory():
    assert is_same_memory(SSL_A, SSL_B) and is_same_memory(SSL_B, SSL_A)
    assert is_same_memory(SSL_A, dict(SSL_A))


def test_different_errors_are_not_the_same_memory():
    other = {"content": "pip install fails with ModuleNotFoundError: No module named 'setuptools'",
             "context": "", "resolution": "Install setuptools first"}
    assert not is_same_memory(SSL_A, other)
    a = {"content": "KeyError: 'user_id' in handlers.py", "resolution": "Use .get('user_id')"}
    b = {"content": "KeyError: 'order_id' in handlers.py", "resolution": "Use .get('order_id')"}
    assert not is_same_memory(a, b)                       # same words, different quoted key
    c = {"content": "TypeError in handlers.py", "resolution": "cast to str"}
    d = {"content": "ValueError in handlers.py", "resolution": "cast to str"}
    assert not is_same_memory(c, d)                       # different exception classes
    e = {"content": "Fixed: the worker fails on start; it works when started with --concurrency 2."}
    f = {"content": "Fixed: the worker fails on start; it works when started with --pool solo."}
    assert not is_same_memory(e, f)                       # different flags
    assert not is_same_memory({"content": ""}, {"content": ""})


def test_merge_keeps_both_resolutions_without_repeating():
    merged = merge_bodies(
        {"content": "pip install fails with SSL errors", "context": "corporate proxy",
         "resolution": "Use --trusted-host pypi.org."},
        {"content": "pip install fails with SSL errors.", "context": "corporate proxy on Windows",
         "resolution": "Alternatively, upgrade certifi with pip install -U certifi."})
    assert merged["content"] == "pip install fails with SSL errors"
    assert "--trusted-host pypi.org" in merged["resolution"] and "certifi" in merged["resolution"]
    assert "Windows" in merged["context"]
    paraphrase = merge_bodies(SSL_A, SSL_B)
    assert paraphrase["resolution"] == SSL_A["resolution"]            # a paraphrase adds nothing
    assert merge_bodies(SSL_A, SSL_A) == SSL_A


def test_merge_respects_size_limits_and_keeps_new_names():
    existing = {"content": "c" * 590, "context": "", "resolution": "Step one. " * 110}
    incoming = {"content": "A completely different sentence about docker.", "context": "x",
                "resolution": "Use --trusted-host files.pythonhosted.org as well."}
    merged = merge_bodies(existing, incoming)
    for key, limit in merge.MERGED_LIMITS.items():
        assert len(merged[key]) <= limit
    steps = merge_bodies({"content": "x", "resolution": "1. Read app.py\n2. Edit app.py"},
                         {"content": "x", "resolution": "1. Read app.py\n2. Run pytest"})
    assert steps["resolution"] == "1. Read app.py\n2. Edit app.py\n2. Run pytest"
    hosts = merge_bodies({"content": "x", "resolution": "Use --trusted-host pypi.org"},
                         {"content": "x", "resolution": "Use --trusted-host files.pythonhosted.org"})
    assert "files.pythonhosted.org" in hosts["resolution"]           # a new name is never a duplicate
