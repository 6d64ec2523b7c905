"""The words and shapes the lesson rules read, checked on phrasings none of the corpora use."""

from __future__ import annotations

import pytest

from ultron.heuristics.cues import is_security_lesson, user_confirms
from ultron.heuristics.gists import arg_gist
from ultron.heuristics.reader import is_error_result
from ultron.sessions.messages import Message


@pytest.mark.parametrize("output", [
    "Uploading stub...\nChanging baud rate to 921600\n\nA fatal error occurred: No serial data received.\n",
    "gcc -c main.c\nmain.c:12:5: error: implicit declaration of function 'foo'\nmake: *** [Makefile:4: main.o] Error 1",
    "src/app.ts(3,5): error TS2345: Argument of type 'string' is not assignable",
    "> Task :app:compileDebugKotlin\n\nFAILURE: Build failed with an exception.\n",
    "goroutine 1 [running]:\npanic: runtime error: index out of range [3] with length 3",
    "Tests:       2 failed, 14 passed, 16 total",
    "x" * 3000 + "\n*** [upload] Error 2\n========== [FAILED] Took 14.83 seconds ==========",
])
def test_build_and_runtime_failures_are_errors(output):
    assert is_error_result(Message(role="tool", content=output))


@pytest.mark.parametrize("output", [
    '{"_index":"products-000042","result":"created","_shards":{"total":2,"successful":2,"failed":0}}',
    "Tests:       16 passed, 16 total",
    "collected 12 items\n\n12 passed in 0.31s",
    "level=info msg=\"error budget remaining\" slo=checkout\n" * 40,
])
def test_successful_output_is_not_an_error(output):
    assert not is_error_result(Message(role="tool", content=output))


@pytest.mark.parametrize("reply", [
    "rebuilt with --platform linux/amd64, pushed, service is stable now. thank you",
    "ok we're back",
    "yep that was it",
    "no more 502s since the restart",
    "deploy went out fine, cheers",
    "bumped the pool size and redeployed, thanks!",
])
def test_the_user_confirming_a_fix_in_many_words(reply):
    assert user_confirms(reply)


@pytest.mark.parametrize("reply", [
    "thanks, I'll try that tomorrow",
    "still failing with the same error",
    "thanks! what about the other cluster?",
])
def test_thanks_without_having_done_it_is_no_confirmation(reply):
    assert not user_confirms(reply)


def test_an_edit_shows_what_it_changed_not_just_the_file():
    gist = arg_gist({"file_path": "/srv/app/platformio.ini", "old_string": "upload_speed = 921600",
                     "new_string": "upload_speed = 115200"}, "", 100)
    assert "platformio.ini" in gist and "921600" in gist and "115200" in gist


def test_a_patch_shows_its_changed_lines():
    patch = "--- a/platformio.ini\n+++ b/platformio.ini\n@@\n monitor_speed = 115200\n-upload_speed = 921600\n" \
            "+upload_speed = 115200\n"
    gist = arg_gist({"patch": patch}, "", 100)
    assert gist.startswith("platformio.ini:") and "upload_speed = 115200" in gist


def test_plain_text_as_a_format_is_not_a_security_topic():
    assert not is_security_lesson("plain text please for the help desk, never paste markdown")
    assert is_security_lesson("the passwords are stored in plain text; rotate them and use the vault")


@pytest.mark.parametrize("reply", [
    "👍 renewal done. write those steps down somewhere for next june",
    "live, ty. that's the release checklist from now on, same order",
    "uploading. keep these steps handy for the next release",
])
def test_the_user_keeping_the_steps_endorses_a_procedure(reply):
    from ultron.heuristics.cues import KEEP_STEPS

    assert KEEP_STEPS.search(reply)


def test_quoted_and_remote_commands_split_at_their_own_separators():
    from ultron.heuristics.episodes import Call
    from ultron.heuristics.patterns import _chain_parts

    def parts(cmd: str) -> list[str]:
        return _chain_parts(Call(0, 0, "", "Bash", cmd, {"command": cmd}, "", "write"))

    assert parts("ssh db-1 'cd /tmp && sudo pg_upgrade --check'") == ["cd /tmp", "sudo pg_upgrade --check"]
    assert parts("psql -c 'select 1; select 2' && echo ok") == ["psql -c 'select 1; select 2'", "echo ok"]


@pytest.mark.parametrize("line, policy", [
    ('{"error": "PLAN_CHANGE_REJECTED", "message": "Downgrades are not permitted within 30 days of the last change"}',
     True),
    ("Claims with incident_date more than 60 days before filing require an adjuster", True),
    ("ModuleNotFoundError: No module named 'flask'", False),
    ("npm ERR! code E404", False),
])
def test_a_service_refusing_by_its_rules_is_a_policy_not_a_fault(line, policy):
    from ultron.heuristics.errors import POLICY_REJECTION

    assert bool(POLICY_REJECTION.search(line)) is policy


def test_the_error_line_is_the_one_that_names_the_problem():
    from ultron.heuristics.errors import error_line

    gradle = ("FAILURE: Build failed with an exception.\n\n* What went wrong:\n"
              "Android Gradle plugin requires Java 17 to run. You are currently using Java 11.\n\n* Try:\n"
              "> Run with --stacktrace option.\n\nBUILD FAILED in 4s")
    assert error_line(gradle).startswith("Android Gradle plugin requires Java 17")
    make = "cc -c x.c\nx.c:3:1: error: unknown type name 'uint'\nmake: *** [Makefile:2: x.o] Error 1"
    assert "unknown type name" in error_line(make)
