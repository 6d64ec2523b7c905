"""Rules answers given during an LLM outage are marked and redone once the LLM is back.

Before issue 14 a memory typed and summarised by the rules fallback (``Answer.fell_back``)
kept that type and those summaries forever, even after the LLM recovered."""

from __future__ import annotations

import json
import re

import sqlalchemy as sa

from tests.conftest import write_jsonl
from ultron.memory.redo import redo_fallbacks
from ultron.sdk import Ultron
from ultron.testing.fake_openai import FakeOpenAI, Reply
from ultron.testing.live_workers import live_workers
from ultron.vocabulary import MEMORY_TYPES

LESSON = "deploy.sh failed with permission denied; chmod +x deploy.sh made it executable"


def session(tmp_path):
    return write_jsonl(tmp_path / "deploy.jsonl", [
        {"role": "user", "content": "The deploy script fails, please fix it."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "Bash", "arguments": json.dumps(
                {"command": "./deploy.sh"})}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "error", "content": "Error: permission denied: ./deploy.sh"},
        {"role": "assistant", "content": "Fixed: deploy.sh lacked the execute bit; chmod +x deploy.sh."},
        {"role": "user", "content": "Thanks, it works now!"},
    ])


class Endpoint:
    """Segmentation, judge and extraction always answer; classification and summaries only when up.
    The extractor gives no type, so every memory is classified."""

    def __init__(self) -> None:
        self.up = False
        self.llm_type = "preference"

    def __call__(self, body) -> Reply:
        system = body["messages"][0]["content"]
        if "split an AI agent" in system:
            n = int(re.search(r"numbered 1\.\.(\d+)", system).group(1))
            return Reply.json({"tasks": [{"start": 1, "end": n, "topic": "deploy"}]})
        if "You grade how well" in system:
            return Reply.json({"goal_achieved": 1, "correctness": 1, "efficiency": 1, "safety": 1})
        if "You read one task" in system:
            return Reply.json({"memories": [{"content": LESSON, "context": "deploying", "resolution": "chmod +x",
                                             "tags": ["bash"], "kind": "procedural", "confidence": 0.9,
                                             "confirmed": True}]})
        if not self.up:
            return Reply.html()  # the outage: a proxy's error page
        if system.startswith("Classify one memory"):
            return Reply.json({"memory_type": self.llm_type})
        if "Summarise one memory" in system:
            return Reply.json({"l0": "LLM gist of the deploy fix", "l1": "LLM overview of the deploy fix"})
        return Reply.json({})


def memories(client):
    with client.db.engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(sa.text(
            "SELECT id, memory_type, summary_l0, fallback_tasks FROM memory_records ORDER BY id"))]


def test_rules_fallback_during_an_outage_is_marked_and_redone_when_the_llm_is_back(client, tmp_path, monkeypatch):
    endpoint = Endpoint()
    with FakeOpenAI(endpoint) as server:
        for key, value in {"ULTRON_LLM_PROVIDER": "openai", "ULTRON_LLM_BASE_URL": server.url,
                           "ULTRON_LLM_MAX_RETRIES": "0", "ULTRON_LLM_RETRY_BASE_SECONDS": "0.01"}.items():
            monkeypatch.setenv(key, value)
        Ultron(db=client.db).ingest([session(tmp_path)], "marks-agent")

        first = Ultron(db=client.db).run_maintenance()  # classification and summaries fall back
        [rec] = memories(client)
        assert first["extracted"] == 1
        assert sorted(rec["fallback_tasks"]) == ["classify_memory", "summarize"]
        assert first["fallbacks_redone"] == {"redone": 0, "retyped": 0, "still_marked": 1}  # still down: kept
        rules_type, rules_l0 = rec["memory_type"], rec["summary_l0"]

        second = Ultron(db=client.db).run_maintenance()  # still down: the marks stay
        assert second["fallbacks_redone"]["still_marked"] == 1 and memories(client) == [rec]

        endpoint.up = True
        endpoint.llm_type = next(t for t in MEMORY_TYPES if t != rules_type)
        third = Ultron(db=client.db).run_maintenance()
        assert third["fallbacks_redone"] == {"redone": 1, "retyped": 1, "still_marked": 0}
        [after] = memories(client)
        assert after["id"] == rec["id"] and after["fallback_tasks"] == []
        assert after["memory_type"] == endpoint.llm_type != rules_type
        assert after["summary_l0"] == "LLM gist of the deploy fix" != rules_l0

        calls = server.calls
        assert Ultron(db=client.db).run_maintenance()["fallbacks_redone"]["redone"] == 0  # nothing left to redo
        assert not any(r["messages"][0]["content"].startswith("Classify") for r in server.requests[calls:])


def test_with_the_rules_provider_nothing_is_marked_and_nothing_is_redone(client):
    assert client.context.provider.name == "rules"
    client.upload_memory("deploy.sh failed with permission denied", "deploying", "chmod +x deploy.sh")
    assert [r["fallback_tasks"] for r in memories(client)] == [[]]
    assert redo_fallbacks(client.memory) == []


def test_a_merge_rebuilt_by_the_rules_after_forget_is_marked_and_re_merged(client, monkeypatch):
    """forget() rebuilds a memory from its remaining contributions; when the LLM merge fails
    the rules merge it, and the next redo merges it again with the LLM."""
    from ultron.memory.service import MemoryService, Provenance
    from ultron.context import ServiceContext
    from ultron.providers import OpenAIProvider

    mem = ("ModuleNotFoundError: No module named 'pandas'", "docker image", "pip install pandas")
    state = {"up": True, "merged": mem[0]}

    def respond(body):
        system = body["messages"][0]["content"]
        if not state["up"] and ("Merge two versions" in system or "Summarise" in system):
            return Reply.http(503)
        if "Classify" in system:
            return Reply.json({"memory_type": "error"})
        if "Summarise" in system:
            return Reply.json({"l0": "pandas missing", "l1": "install pandas"})
        if "Merge two versions" in system:
            return Reply.json({"content": state["merged"], "context": mem[1], "resolution": mem[2]})
        return Reply.json({"same": True})

    with FakeOpenAI(respond) as server:
        settings = client.settings.__class__.from_env(
            home=client.settings.home, llm_provider="openai", llm_base_url=server.url, llm_api_key="k",
            llm_max_retries=0, llm_retry_base_seconds=0.01)
        svc = MemoryService(ServiceContext(client.db, settings, provider=OpenAIProvider(settings)))
        first = svc.upload_memory(*mem, provenance=Provenance("a", None, "/s/0.jsonl")).record
        for n in (1, 2):  # the same agent's other sessions (uploads merge only within one owner)
            assert svc.upload_memory(*mem, provenance=Provenance("a", None, f"/s/{n}.jsonl")).record.id == first.id
        state["up"] = False
        svc.forget(session_file="/s/0.jsonl", agent_id="a")
        [rec] = memories(client)
        assert sorted(rec["fallback_tasks"]) == ["merge_memories", "summarize"]
        state.update(up=True, merged="LLM merged: pandas missing in the image")
        [redo] = redo_fallbacks(svc)
        assert redo.status == "redone" and redo.redone == ["merge_memories", "summarize"]
        [after] = svc.get_memory_details([first.id])
        assert after.content == "LLM merged: pandas missing in the image" and after.summary_l0 == "pandas missing"
        assert memories(client)[0]["fallback_tasks"] == []


def test_a_second_worker_does_not_redo_the_marks_another_worker_is_redoing(client, monkeypatch):
    """Two maintenance workers would both ask the LLM again for the same marked memories."""
    import sqlalchemy as sa

    rec = client.upload_memory("deploy.sh failed with permission denied", "deploying", "chmod +x deploy.sh")
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("UPDATE memory_records SET fallback_tasks = '{summarize}' WHERE id = :id"),
                     {"id": rec.id})
        conn.execute(sa.text("INSERT INTO work_leases (name, holder, expires_at) VALUES "
                             "('redo_fallbacks', 'other:1', now() + interval '1 hour')"))
    with FakeOpenAI(Endpoint()) as server:
        monkeypatch.setenv("ULTRON_LLM_PROVIDER", "openai")
        monkeypatch.setenv("ULTRON_LLM_BASE_URL", server.url)
        monkeypatch.setenv("ULTRON_LLM_MAX_RETRIES", "0")
        worker = Ultron(db=client.db)
        try:
            with live_workers(client.db.engine, "other:1"):
                assert redo_fallbacks(worker.memory) == [] and server.calls == 0     # left to the live holder
                with client.db.engine.begin() as conn:
                    conn.execute(sa.text("UPDATE work_leases SET expires_at = now() - interval '1 second'"))
                assert [r.memory_id for r in redo_fallbacks(worker.memory)] == [rec.id] and server.calls > 0
        finally:
            with client.db.engine.begin() as conn:
                conn.execute(sa.text("DELETE FROM work_leases"))
