"""Directory rules, inbox layout and partition keys."""

from pathlib import Path

import pytest

from ultron.sessions.discovery import (
    agent_id_from_dirname,
    expand_paths,
    inbox_agent_id,
    parse_partition_key,
    partition_key,
    validate_agent_id,
)


def touch(path: Path, text: str = '{"role": "user", "content": "x"}\n') -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def outcome(paths):
    return {(str(f.path), f.status, f.reason) for f in expand_paths(paths)}


def test_directories_recurse_collect_jsonl_only_and_skip_hidden_and_symlinks(tmp_path):
    root = tmp_path / "sessions"
    a = touch(root / "a.jsonl")
    b = touch(root / "deep" / "er" / "b.jsonl")
    touch(root / "notes.txt")
    touch(root / "c.json")
    touch(root / ".hidden.jsonl")
    touch(root / ".git" / "d.jsonl")
    touch(root / "sub" / ".cache" / "e.jsonl")
    (root / "link.jsonl").symlink_to(a)
    (root / "linkdir").symlink_to(root / "deep")
    found = [f for f in expand_paths([root]) if f.status == "ok"]
    assert [f.path for f in found] == [a, b]
    skipped = {f.path.name: f.reason for f in expand_paths([root]) if f.status == "skipped"}
    assert skipped == {"link.jsonl": "symlink inside a directory; not followed",
                       "linkdir": "symlink inside a directory; not followed"}


def test_state_dir_under_a_hidden_parent_is_still_scanned(tmp_path):
    # ULTRON_HOME defaults to ./.ultron: only segments *below* the given directory count as hidden.
    f = touch(tmp_path / ".ultron" / "inbox" / "agent" / "s.jsonl")
    assert [x.path for x in expand_paths([tmp_path / ".ultron" / "inbox"]) if x.status == "ok"] == [f]


def test_explicit_paths(tmp_path):
    f = touch(tmp_path / "one.jsonl")
    link = tmp_path / "named-link.jsonl"
    link.symlink_to(f)
    loop = tmp_path / "loop.jsonl"
    loop.symlink_to(loop)
    dangling = tmp_path / "dangling.jsonl"
    dangling.symlink_to(tmp_path / "gone.jsonl")
    other = touch(tmp_path / "readme.md")
    dirlike = tmp_path / "x.jsonl"
    inner = touch(dirlike / "inner.jsonl")
    got = outcome([f, link, loop, dangling, tmp_path / "missing.jsonl", other, dirlike])
    assert (str(f), "ok", None) in got
    assert (str(link), "ok", None) in got  # a symlink the caller names explicitly is followed
    assert (str(loop), "failed", "symlink loop") in got
    assert (str(dangling), "failed", "broken symlink: its target does not exist") in got
    assert (str(tmp_path / "missing.jsonl"), "failed", "path does not exist") in got
    assert (str(other), "skipped", "not a .jsonl file") in got
    assert (str(dirlike), "skipped", "is a directory named like a session file; scanned its contents instead") in got
    assert (str(inner), "ok", None) in got


def test_partition_keys_are_readable_and_round_trip(tmp_path):
    inbox = tmp_path / "inbox"
    inside = inbox / "claude" / "proj" / "s1.jsonl"
    outside = tmp_path / "elsewhere" / "s2.jsonl"
    key_in = partition_key("claude", inside, [inbox])
    key_out = partition_key("me", outside, [inbox])
    assert key_in == "claude:claude/proj/s1.jsonl"
    assert key_out == f"me:{outside}"
    assert parse_partition_key(key_in, [inbox]) == ("claude", inside)
    assert parse_partition_key(key_out, [inbox]) == ("me", outside)
    with pytest.raises(ValueError, match="control characters"):
        partition_key("me", tmp_path / "bad...name.jsonl")
    with pytest.raises(ValueError):
        parse_partition_key("no-separator")


def test_agent_ids(tmp_path):
    inbox = tmp_path / "inbox"
    assert inbox_agent_id(inbox / "alice" / "x" / "s.jsonl", inbox, "default") == "alice"
    assert inbox_agent_id(inbox / "s.jsonl", inbox, "default") == "default"
    assert agent_id_from_dirname("team a/b", "d") == "team_a_b"
    assert validate_agent_id("my-agent_1") == "my-agent_1"
    for bad in ("", "has space", "a:b", "x" * 200):
        with pytest.raises(ValueError, match="invalid agent id"):
            validate_agent_id(bad)
