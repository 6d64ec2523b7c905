"""Memories that know when they are stale, end to end in a temporary git repository: a
Claude Code session reads, breaks and fixes a file; the memory extracted from it (offline
rules provider) records the file; searches and bundles from the checkout mark it possibly
stale once the file changes or vanishes, and `ultron stale` lists it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.conftest import write_jsonl
from tests.e2e.test_cli_e2e import run
from ultron.memory.files import text_hash

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "claude-code-transcript.jsonl"
ORIGINAL = "from datetime import datetime\n\n\ndef parse(s):\n    return datetime.strptime(s, '%Y-%m-%d %H:%M:%S')\n"
FIXED = ORIGINAL.replace("datetime.strptime(s, '%Y-%m-%d %H:%M:%S')",
                         "datetime.fromisoformat(s.replace('Z', '+00:00'))")
QUERY = "ValueError time data does not match format strptime ISO 8601 dates fromisoformat"


def git(root, *args):
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def listing(text: str) -> str:
    """Claude Code's Read result: ``cat -n`` numbering, then a reminder."""
    body = "\n".join(f"{i:>6}\t{line}" for i, line in enumerate(text.rstrip("\n").split("\n"), 1))
    return body + "\n\n<system-reminder>\nWhenever you read a file, consider whether it is malware.\n</system-reminder>"


def session(repo) -> list[dict]:
    """The shipped Claude Code example (a failing test, an Edit by relative path, the test
    passing), worked in ``repo``, plus a Read of the fixed file by absolute path before the
    last test run: the memory's file is found through the session's cwd, and its hash is
    that of the text the session read."""
    lines = [json.loads(line) for line in EXAMPLE.read_text().splitlines() if line.strip()]
    for line in lines:
        if "cwd" in line:
            line["cwd"] = str(repo)
    last_test = max(i for i, line in enumerate(lines) if "toolu_d" in json.dumps(line.get("message")))
    base = lines[last_test]
    read = {**base, "uuid": "read-1", "message": {"id": "msg_read", "role": "assistant", "model": "claude-test",
                                                 "content": [{"type": "tool_use", "id": "toolu_r", "name": "Read",
                                                              "input": {"file_path": str(repo / "src" / "dates.py")}}]}}
    result = {**lines[last_test + 1], "uuid": "read-2", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_r", "content": listing(FIXED)}]}}
    return lines[:last_test] + [read, result] + lines[last_test:]


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "checkout"
    (root / "src").mkdir(parents=True)
    git(tmp_path, "init", "-q", str(root))
    git(root, "remote", "add", "origin", "https://github.com/example/dates.git")
    (root / "src" / "dates.py").write_text(FIXED)  # the session's fix, committed
    (root / "README.md").write_text("dates\n")
    git(root, "add", ".")
    git(root, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "-m", "fix dates")
    return root


def test_a_memory_goes_possibly_stale_when_its_file_changes_or_vanishes(client, repo, tmp_path):
    f = write_jsonl(tmp_path / "sessions" / "s.jsonl", session(repo))
    assert client.ingest([f], "claude").totals["new"] == 1
    client.segment_pending_sessions()
    client.label_pending_segments()
    extracted = client.extract_memories_from_segments()
    assert sum(r.inserted for r in extracted) >= 1, extracted
    with client.db.engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT memory_id, repo_remote, path, sha256, edited FROM memory_files")).all()
    assert rows and {(r.repo_remote, r.path, r.edited) for r in rows} == {("github.com/example/dates", "src/dates.py",
                                                                          True)}
    assert {r.sha256 for r in rows} == {text_hash(FIXED)}, "the text the session read"
    linked = {r.memory_id for r in rows}
    for _ in range(3):  # unrelated memories for the ranking to move past
        client.upload_memory("ISO 8601 dates with a Z suffix need fromisoformat after replacing Z with +00:00",
                             "parsing timestamps from the API", "use datetime.fromisoformat(s.replace('Z', '+00:00'))")

    # an unchanged checkout: nothing stale, and the marks are there to say so
    fresh = client.search_memories(QUERY, limit=10, repo_root=repo)
    mine = [r for r in fresh if r.record.id in linked]
    assert mine and all(r.stale == [] and not r.possibly_stale for r in mine)
    assert all(r.to_dict()["possibly_stale"] is False for r in fresh)
    assert "possibly_stale" not in client.search_memories(QUERY, limit=10)[0].to_dict(), "no repo: no claim"
    assert client.stale_memories(repo)["stale"] == []
    score_before = {r.record.id: r.score for r in mine}

    # the file changed: marked, explained, ranked lower
    (repo / "src" / "dates.py").write_text(FIXED + "\n\ndef parse_date(s):\n    return parse(s).date()\n")
    changed = client.search_memories(QUERY, limit=10, repo_root=str(repo / "src"))
    stale = [r for r in changed if r.record.id in linked]
    assert stale and all(r.possibly_stale for r in stale)
    assert all(r.stale_reason.startswith("src/dates.py changed since ") for r in stale)
    for r in stale:
        assert r.score == pytest.approx(score_before[r.record.id] * client.settings.stale_score_factor, rel=0.05)
    assert [r.score for r in changed] == sorted((r.score for r in changed), reverse=True)
    hit = stale[0].to_dict()
    assert hit["possibly_stale"] is True and hit["stale_files"][0]["status"] == "changed"

    bundle = client.context_bundle(QUERY, token_budget=2000, repo_root=repo)
    items = [i for i in bundle["items"] if i["kind"] == "memory" and i["id"] in linked]
    assert items and all(i["possibly_stale"] for i in items)
    assert "(possibly stale: src/dates.py changed since" in bundle["text"]
    assert "possibly stale" not in client.context_bundle(QUERY, token_budget=2000)["text"]

    # the file is gone: vanished
    (repo / "src" / "dates.py").unlink()
    gone = [r for r in client.search_memories(QUERY, limit=10, repo_root=repo) if r.record.id in linked]
    assert gone and all(r.stale_reason == "src/dates.py vanished" for r in gone)
    report = client.stale_memories(repo)
    assert {s["memory"]["id"] for s in report["stale"]} == linked
    assert report["remote"] == "github.com/example/dates" and report["checked"] == len(linked)

    out = run("stale", "--repo", str(repo), "--json")
    assert out.returncode == 0, out.stderr
    listed = json.loads(out.stdout)
    assert {s["memory"]["id"] for s in listed["stale"]} == linked
    assert listed["stale"][0]["reason"] == "src/dates.py vanished"
    human = run("stale", "--repo", str(repo))
    assert human.returncode == 0 and "src/dates.py vanished" in human.stdout and "possibly stale" in human.stdout
    searched = run("search", QUERY, "--repo", str(repo))
    assert searched.returncode == 0 and "possibly stale: src/dates.py vanished" in searched.stdout
    not_a_repo = run("stale", "--repo", str(tmp_path / "sessions"))
    assert not_a_repo.returncode == 2 and "not inside a git repository" in not_a_repo.stderr

    # over HTTP: repo_root names a checkout on the server's machine
    from fastapi.testclient import TestClient

    from ultron.api.app import create_app

    with TestClient(create_app(client.settings, client=client, token="t"),
                    headers={"Authorization": "Bearer t"}) as http:
        hits = http.post("/memories/search", json={"query": QUERY, "repo_root": str(repo)}).json()["results"]
        assert {h["id"] for h in hits if h["possibly_stale"]} == linked
        assert {h["stale_reason"] for h in hits if h["id"] in linked} == {"src/dates.py vanished"}
        block = http.post("/context", json={"task": QUERY, "repo_root": str(repo)}).json()
        assert "(possibly stale: src/dates.py vanished)" in block["text"]
        missing = http.post("/memories/search", json={"query": QUERY, "repo_root": str(tmp_path / "no-such-dir")})
        assert missing.status_code == 400 and "is not a directory" in missing.text
        elsewhere = http.post("/memories/search", json={"query": QUERY, "repo_root": str(tmp_path)}).json()
        assert all("possibly_stale" not in h for h in elsewhere["results"]), "not a repository: nothing claimed"

    # forget takes the file rows with the memory
    client.forget(memory_ids=sorted(linked))
    with client.db.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM memory_files")).scalar_one() == 0
