"""Which files a segment read or edited, and the text it saw in them (ultron.memory.files),
and placing them in a git repository (ultron.memory.repos)."""

from __future__ import annotations

import json
import subprocess

import pytest

from ultron.memory.files import FileRef, bytes_hash, file_refs, patch_paths, shell_reads, text_hash
from ultron.memory.repos import locate, normalise_remote, repo_at, session_cwd
from ultron.sessions.messages import Message


def call(cid: str, name: str, **args) -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def assistant(*calls: dict) -> Message:
    return Message("assistant", "", tool_calls=list(calls))


def result(cid: str, content: str, error: bool = False) -> Message:
    return Message("tool", content, tool_call_id=cid, name="error" if error else None)


LISTING = "     1\tdef parse(s):\n     2\t    return strptime(s)\n\n<system-reminder>\nbe nice\n</system-reminder>"


def test_a_full_read_gives_the_text_and_an_edit_is_replayed_on_it():
    refs = file_refs([
        assistant(call("a", "Read", file_path="/r/src/dates.py")), result("a", LISTING),
        assistant(call("b", "Edit", file_path="/r/src/dates.py", old_string="strptime(s)",
                       new_string="fromisoformat(s)")), result("b", "The file /r/src/dates.py has been updated."),
    ])
    assert refs == [FileRef("/r/src/dates.py", edited=True, text="def parse(s):\n    return fromisoformat(s)")]
    assert text_hash(refs[0].text) == bytes_hash(b"def parse(s):\r\n    return fromisoformat(s)\n\n")


def test_partial_reads_failed_calls_and_unreplayable_edits_leave_the_text_unknown():
    refs = file_refs([
        assistant(call("a", "Read", file_path="/r/a.py", offset=10, limit=5)), result("a", "    10\tx"),
        assistant(call("b", "Read", file_path="/r/b.py")), result("b", "     3\tnot from the start"),
        assistant(call("c", "Read", file_path="/r/c.py")), result("c", LISTING),
        assistant(call("d", "Edit", file_path="/r/c.py", old_string="absent", new_string="x")),
        result("d", "<tool_use_error>String to replace not found</tool_use_error>", error=True),
        assistant(call("e", "Edit", file_path="/r/c.py", old_string="s", new_string="t")),  # s occurs twice
        result("e", "updated"),
    ])
    by_path = {r.path: r for r in refs}
    assert by_path["/r/a.py"].text is None and by_path["/r/b.py"].text is None
    assert by_path["/r/c.py"].edited and by_path["/r/c.py"].text is None
    assert refs[0].path == "/r/c.py", "edited files come first"


def test_writes_multiedits_patches_and_shell_reads():
    patch = ("*** Begin Patch\n*** Update File: src/app.py\n@@\n-a\n+b\n*** Add File: docs/new.md\n+hi\n"
             "*** Delete File: old.txt\n*** End Patch")
    refs = file_refs([
        assistant(call("a", "Write", file_path="/r/new.py", content="x = 1\n")), result("a", "File created"),
        assistant(call("b", "MultiEdit", file_path="/r/new.py",
                       edits=[{"old_string": "x", "new_string": "y"}, {"old_string": "1", "new_string": "2"}])),
        result("b", "ok"),
        assistant(call("c", "apply_patch", input=patch)), result("c", "Done"),
        assistant(call("d", "Bash", command="sed -n '1,20p' src/cli.py && cat -n README.md | head -5 > out.txt")),
        result("d", "..."),
    ])
    by_path = {r.path: r for r in refs}
    assert by_path["/r/new.py"].text == "y = 2\n"
    assert {"src/app.py", "docs/new.md", "old.txt"} <= {p for p, r in by_path.items() if r.edited}
    assert not by_path["src/cli.py"].edited and "README.md" in by_path and "out.txt" not in by_path
    assert len(file_refs([assistant(call(str(i), "Read", file_path=f"/r/{i}.py")) for i in range(30)])) == 20


def test_patch_and_shell_parsing_edges():
    assert patch_paths("*** Update File: a.py\n*** Move to: b.py\n") == ["a.py", "b.py"]
    assert shell_reads(["bash", "-lc", "head -n 40 src/x.py"]) == ["src/x.py"]
    assert shell_reads("grep -r foo src | tail -3") == []
    assert shell_reads("cat *.py $HOME/x 'unterminated") == []


def test_remotes_are_normalised_across_spellings():
    want = "github.com/o/r"
    for url in ("git@github.com:o/r.git", "https://github.com/o/r", "https://user@GitHub.com/o/r.git/",
                "ssh://git@github.com:22/o/r.git"):
        assert normalise_remote(url) == want
    assert normalise_remote("/srv/git/r.git") == "/srv/git/r"


def test_session_cwd_is_the_last_one_reported_up_to_the_segment_end():
    lines = [json.dumps({"type": "user", "cwd": "/a"}).encode(), b"not json with \"cwd\"",
             json.dumps({"type": "session_meta", "payload": {"cwd": "/b"}}).encode(),
             json.dumps({"type": "user", "cwd": "/c"}).encode()]
    assert session_cwd(lines, 3) == "/b"
    assert session_cwd(lines, 10) == "/c"
    assert session_cwd([b"{}"], 1) is None


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "remote", "add", "origin", "git@example.com:team/app.git"], check=True)
    (root / "src" / "a.py").write_text("print('a')\n")
    return root


def test_locate_places_paths_in_the_repository_and_hashes_what_is_known(repo, tmp_path):
    assert repo_at(repo / "src").remote == "example.com/team/app"
    assert repo_at(tmp_path / "nowhere") is None
    found = locate([FileRef(str(repo / "src" / "a.py"), edited=True, text="seen\n"),
                    FileRef("src/a.py"),  # the same file, relative: recorded once
                    FileRef("src/gone.py"),  # neither seen whole nor here: nothing to compare, ever
                    FileRef("src/written.py", edited=True, text="x"), FileRef("/elsewhere/x.py")],
                   cwd=str(repo))
    assert [(f.remote, f.path, f.edited) for f in found] == [
        ("example.com/team/app", "src/a.py", True), ("example.com/team/app", "src/written.py", True)]
    assert found[0].sha256 == text_hash("seen") and found[1].sha256 == text_hash("x")
    disk = locate([FileRef("src/a.py")], cwd=str(repo))
    assert disk[0].sha256 == bytes_hash(b"print('a')\n"), "unknown text: the working tree at ingest time"
    assert locate([FileRef("a.py")], cwd=None) == []
