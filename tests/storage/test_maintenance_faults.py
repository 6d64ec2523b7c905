"""Maintenance survives an LLM endpoint that answers 200 with garbage.

Before issue 14 a proxy's HTML error page (200, text/html) raised AttributeError and a body
cut off mid-JSON raised JSONDecodeError out of ``run_maintenance``: one bad reply aborted
the run after a dozen requests and left most sessions unsegmented."""

from __future__ import annotations

import json
import re

import sqlalchemy as sa

from tests.conftest import write_jsonl
from ultron.sdk import Ultron
from ultron.testing.fake_openai import FakeOpenAI, Reply

#: session name -> (its lesson, the fault its requests meet in the first run)
SESSIONS = {
    "alpha": ("The Docker image lacks pandas; add pandas to requirements.txt", "segment-html"),
    "bravo": ("Redis refuses connections until its container reports healthy", "segment-cut"),
    "charlie": ("Git push is rejected because branch protection wants signed commits", "extract-html"),
    "delta": ("The Node build runs out of heap; raise max-old-space-size", "judge-cut"),
    "echo": ("A Postgres migration stalls on a locked table; set lock_timeout first", None),
}


def session_file(tmp_path, name):
    lesson = SESSIONS[name][0]
    return write_jsonl(tmp_path / f"{name}.jsonl", [
        {"role": "user", "content": f"Task {name}: {lesson.split(';')[0]}. Please fix it."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "Bash", "arguments": json.dumps(
                {"command": f"./run-{name}.sh"})}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "error", "content": f"Error: {name} failed"},
        {"role": "assistant", "content": f"Fixed for {name}: {lesson}."},
        {"role": "user", "content": "Thanks, it works now!"},
    ])


def which(body) -> str | None:
    user = body["messages"][1]["content"]
    return next((name for name in SESSIONS if f"Task {name}:" in user or f"for {name}:" in user), None)


def healthy(body) -> Reply:
    system = body["messages"][0]["content"]
    name = which(body)
    if "split an AI agent" in system:
        n = int(re.search(r"numbered 1\.\.(\d+)", system).group(1))
        return Reply.json({"tasks": [{"start": 1, "end": n, "topic": f"fix {name}"}]})
    if "You grade how well" in system:
        return Reply.json({"goal_achieved": 1, "correctness": 1, "efficiency": 0.9, "safety": 1, "rationale": "ok"})
    if "You read one task" in system:
        lesson = SESSIONS[name][0] if name else "nothing"
        return Reply.json({"memories": [{"type": "error", "content": lesson, "context": f"session {name}",
                                         "resolution": lesson.split(";")[-1].strip(), "tags": [name],
                                         "kind": "procedural", "confirmed": True, "confidence": 0.9}]})
    if "Summarise one memory" in system:
        return Reply.json({"l0": "a lesson", "l1": "a lesson, longer"})
    if "near-duplicates" in system:
        return Reply.json({"same": False})
    if "You name a cluster" in system:
        return Reply.json({"topic": "build and deploy fixes"})
    return Reply.json({})  # anything else: invalid, so the rules answer


def faulty(body) -> Reply:
    system = body["messages"][0]["content"]
    fault = SESSIONS.get(which(body) or "", (None, None))[1]
    task = ("segment" if "split an AI agent" in system else "judge" if "You grade how well" in system
            else "extract" if "You read one task" in system else None)
    if fault == f"{task}-html":
        return Reply.html()
    if fault == f"{task}-cut":
        return Reply.cut({"tasks": [{"start": 1, "end": 5}]}, 0.4)
    return healthy(body)


def counts(client) -> dict[str, int]:
    with client.db.engine.connect() as conn:
        q = lambda sql: conn.execute(sa.text(sql)).scalar_one()  # noqa: E731
        return {
            "unsegmented": q("SELECT count(*) FROM trajectory_records WHERE segmented = 0"),
            "segments": q("SELECT count(*) FROM task_segments"),
            "distinct_segments": q("SELECT count(DISTINCT (session_file, segment_index)) FROM task_segments"),
            "unlabeled": q("SELECT count(*) FROM task_segments WHERE labeled = 0"),
            "unextracted": q("SELECT count(*) FROM task_segments WHERE labeled = 1 AND memory_extracted = 0"),
            "memories": q("SELECT count(*) FROM memory_records"),
            "distinct_memories": q("SELECT count(DISTINCT content) FROM memory_records"),
            "contributions": q("SELECT count(*) FROM memory_contributions"),
        }


def test_html_and_truncated_json_replies_do_not_abort_maintenance_and_leave_work_pending(
        client, tmp_path, monkeypatch):
    with FakeOpenAI(faulty) as server:
        monkeypatch.setenv("ULTRON_LLM_PROVIDER", "openai")
        monkeypatch.setenv("ULTRON_LLM_BASE_URL", server.url)
        monkeypatch.setenv("ULTRON_LLM_MAX_RETRIES", "1")
        monkeypatch.setenv("ULTRON_LLM_RETRY_BASE_SECONDS", "0.01")
        ultron = Ultron(db=client.db)
        ultron.ingest([session_file(tmp_path, name) for name in SESSIONS], "fault-agent")

        first = ultron.run_maintenance()  # before issue 14: AttributeError / JSONDecodeError
        after_first = counts(client)
        assert first["segmented"] == 3
        assert after_first["unsegmented"] == 2          # alpha (HTML), bravo (cut JSON)
        assert after_first["unlabeled"] == 1            # delta's judge got cut JSON
        assert after_first["unextracted"] == 1          # charlie's extraction got HTML
        assert after_first["memories"] == 1             # echo only
        assert ultron.context.provider.usage.failures >= 4

        server.responder = healthy
        second = Ultron(db=client.db).run_maintenance()
        assert second["segmented"] == 2 and second["labeled"] == 3 and second["extracted"] == 4
        done = counts(client)
        assert done["unsegmented"] == done["unlabeled"] == done["unextracted"] == 0
        assert done["segments"] == done["distinct_segments"] == len(SESSIONS)
        assert done["memories"] == done["distinct_memories"] == done["contributions"] == len(SESSIONS)

        Ultron(db=client.db).run_maintenance()  # nothing left: a third run changes nothing
        assert counts(client) == done
