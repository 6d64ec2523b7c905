"""A found lesson worded as guidance: the cause is the lesson, the fix an instruction, a step
carries its substance and a look-up is not a step."""

import json

import pytest

from ultron.heuristics.phrasing import (as_instruction, common_form, file_names, is_lookup, reports_change,
                                        step_of_call, without_opener)


@pytest.mark.parametrize("report, instruction", [
    ("Moved COPY requirements.txt before RUN pip install and rebuilt the image, so the container now starts.",
     "Move COPY requirements.txt before RUN pip install and rebuild the image."),
    ("I added flask==3.0.3 to requirements.txt.", "Add flask==3.0.3 to requirements.txt."),
    ("Found it: copied the wheels into the final stage", "Copy the wheels into the final stage."),
])
def test_a_report_of_a_change_becomes_the_instruction_to_make_it(report, instruction):
    assert reports_change(report)
    assert as_instruction(report) == instruction


def test_other_sentences_only_lose_their_opener():
    assert without_opener("Found it: requirements.txt lists gunicorn only.") == "requirements.txt lists gunicorn only."
    assert as_instruction("The venv is not on PATH.") == "The venv is not on PATH."
    assert not reports_change("The build installs into /opt/venv.")


def test_look_ups_are_told_from_changes():
    assert is_lookup("read_file", "read_file path=Dockerfile")
    assert is_lookup("Bash", "cat requirements.txt")
    assert is_lookup("Grep")
    assert not is_lookup("write_file", "write_file path=Dockerfile")
    assert not is_lookup("Bash", "docker build -t api .")
    assert not is_lookup("Bash", "cat > requirements.txt")


def test_an_edit_step_says_which_file_and_what_changes():
    edit = json.dumps({"file_path": "src/dates.py", "old_string": "strptime(s, FMT)", "new_string": "fromisoformat(s)"})
    assert step_of_call("Edit", edit, "Edit ...") == "In src/dates.py: replace `strptime(s, FMT)` with `fromisoformat(s)`"
    write = json.dumps({"path": "requirements.txt", "content": "flask==3.0.3\ngunicorn==22.0.0\n"})
    assert step_of_call("write_file", write, "write_file ...") == "Write requirements.txt: `flask==3.0.3 gunicorn==22.0.0`"
    long = step_of_call("write_file", json.dumps({"path": "a.txt", "content": "x " * 400}), "g", limit=60)
    assert len(long) <= 61 and long.endswith("…`")       # clipped, the code span still closed


def test_what_several_wordings_share_shows_the_differences_as_an_ellipsis():
    assert common_form(["docker build -t api .", "docker build -t etl .", "docker build -t web ."]) \
        == "docker build -t … ."
    assert common_form(["No module named 'redis'", "No module named 'flask'"]) == "No module named '…'"
    assert file_names("Dockerfile.worker copies requirements.txt after pip install") == ["Dockerfile", "requirements.txt"]


def test_a_dry_run_only_looks():
    assert is_lookup("Bash", "bq query --dry_run 'INSERT INTO t SELECT 1'")
    assert is_lookup("Bash", "cd ~/repo && kubectl apply --dry-run=client -f deploy.yaml")
    assert not is_lookup("Bash", "kubectl apply -f deploy.yaml")
