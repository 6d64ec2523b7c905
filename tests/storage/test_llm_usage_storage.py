"""LLM usage kept in the store (``llm_usage``, revision 0014): deltas add up per day,
provider, model and task; a pipeline step run with an LLM leaves its calls, tokens, failures
and rules fallbacks there; the rules provider leaves nothing; a store that cannot take the
counts fails no step and loses no count; the migration goes down and up again."""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
import uuid
from contextlib import contextmanager

import pytest
import sqlalchemy as sa

from tests.conftest import write_jsonl
from ultron.context import ServiceContext
from ultron.db import llm_usage
from ultron.db.database import MIGRATIONS_DIR, VERSION_TABLE, Database
from ultron.providers import OpenAIProvider
from ultron.sdk import Ultron
from ultron.testing.fake_openai import FakeOpenAI, Reply

MODEL = "usage-model"
LESSON = "deploy.sh failed with permission denied; chmod +x deploy.sh made it executable"
ZERO = dict.fromkeys(llm_usage.COUNTS, 0)


def empty(client) -> None:
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("TRUNCATE llm_usage"))


def stored(client) -> dict[tuple[str, str, str], dict[str, int]]:
    with client.db.engine.connect() as conn:
        rows = conn.execute(sa.text(f"SELECT provider, model, task, {', '.join(llm_usage.COUNTS)} FROM llm_usage "
                                    "WHERE day = (now() AT TIME ZONE 'UTC')::date"))
        return {(r.provider, r.model, r.task): {c: getattr(r, c) for c in llm_usage.COUNTS} for r in rows}


def today(conn) -> dt.date:
    return conn.execute(sa.text(f"SELECT {llm_usage.TODAY}")).scalar_one()


# -- the store ----------------------------------------------------------------------------------


def test_two_batches_add_up_in_one_row_per_day_provider_model_and_task(client):
    empty(client)
    with client.db.engine.begin() as conn:
        assert llm_usage.add_usage(conn, [
            {"provider": "openai", "model": MODEL, "task": "summarize", "calls": 2, "prompt_tokens": 100,
             "completion_tokens": 10},
            {"provider": "openai", "model": MODEL, "task": "classify_memory", "fallbacks": 1, "failures": 1},
        ]) == 2
        first = conn.execute(sa.text("SELECT updated_at FROM llm_usage WHERE task = 'summarize'")).scalar_one()
    with client.db.engine.begin() as conn:
        assert llm_usage.add_usage(conn, [
            {"provider": "openai", "model": MODEL, "task": "summarize", "calls": 3, "prompt_tokens": 50,
             "completion_tokens": 5, "failures": 1, "retries": 2},
            {"provider": "openai", "model": MODEL, "task": "judge", **ZERO},            # nothing in it: skipped
        ]) == 1
        later = conn.execute(sa.text("SELECT updated_at FROM llm_usage WHERE task = 'summarize'")).scalar_one()
    assert stored(client) == {
        ("openai", MODEL, "summarize"): {**ZERO, "calls": 5, "prompt_tokens": 150, "completion_tokens": 15,
                                         "failures": 1, "retries": 2},
        ("openai", MODEL, "classify_memory"): {**ZERO, "failures": 1, "fallbacks": 1},
    }
    assert later > first


def test_usage_by_day_groups_by_day_and_totals_sum_the_window(client):
    empty(client)
    with client.db.engine.begin() as conn:
        day = today(conn)
        llm_usage.add_usage(conn, [
            {"provider": "openai", "model": MODEL, "task": "segment", "calls": 2, "prompt_tokens": 20},
            {"provider": "openai", "model": "judge-model", "task": "judge", "calls": 3, "completion_tokens": 9},
            {"day": day - dt.timedelta(days=2), "provider": "openai", "model": MODEL, "task": "segment",
             "calls": 7, "failures": 1, "fallbacks": 0},
            {"day": day - dt.timedelta(days=2), "provider": "openai", "model": MODEL, "task": "summarize",
             "failures": 2, "fallbacks": 2},
            {"day": day - dt.timedelta(days=10), "provider": "openai", "model": MODEL, "task": "segment",
             "calls": 100},
        ])
    with client.db.engine.connect() as conn:
        by_day = llm_usage.usage_by_day(conn, 3)
        totals = llm_usage.usage_totals(conn, 3)
        month = llm_usage.usage_totals(conn, 30)
        assert len(llm_usage.usage_by_day(conn, 30)) == 30
        with pytest.raises(ValueError):
            llm_usage.usage_by_day(conn, 0)
    assert by_day == [
        {"day": day - dt.timedelta(days=2), **ZERO, "calls": 7, "failures": 3, "fallbacks": 2},
        {"day": day - dt.timedelta(days=1), **ZERO},                               # a quiet day is there, at zero
        {"day": day, **ZERO, "calls": 5, "prompt_tokens": 20, "completion_tokens": 9},
    ]
    assert (totals["since"], totals["until"]) == (day - dt.timedelta(days=2), day)
    assert {k: totals[k] for k in llm_usage.COUNTS} == {**ZERO, "calls": 12, "prompt_tokens": 20,
                                                          "completion_tokens": 9, "failures": 3, "fallbacks": 2}
    assert totals["by_task"] == [
        {"provider": "openai", "model": MODEL, "task": "segment", **ZERO, "calls": 9, "prompt_tokens": 20,
         "failures": 1},
        {"provider": "openai", "model": "judge-model", "task": "judge", **ZERO, "calls": 3, "completion_tokens": 9},
        {"provider": "openai", "model": MODEL, "task": "summarize", **ZERO, "failures": 2, "fallbacks": 2},
    ]
    assert month["calls"] == 112 and month["by_task"][0]["calls"] == 109


def test_negative_counts_are_refused(client):
    with client.db.engine.begin() as conn, pytest.raises(ValueError):
        llm_usage.add_usage(conn, [{"provider": "openai", "model": MODEL, "task": "segment", "calls": -1}])


# -- recording from the pipeline --------------------------------------------------------------------


def session(tmp_path):
    return write_jsonl(tmp_path / f"deploy-{uuid.uuid4().hex[:6]}.jsonl", [
        {"role": "user", "content": "The deploy script fails, please fix it."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "Bash", "arguments": json.dumps(
                {"command": "./deploy.sh"})}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "error", "content": "Error: permission denied: ./deploy.sh"},
        {"role": "assistant", "content": "Fixed: deploy.sh lacked the execute bit; chmod +x deploy.sh."},
        {"role": "user", "content": "Thanks, it works now!"},
    ])


class Endpoint:
    """Every task answered; memory type and summaries only while ``up``. Keeps what it
    answered, to count the tokens the fake server reported for each request."""

    def __init__(self) -> None:
        self.up = True
        self.answers: list[str] = []

    def __call__(self, body) -> Reply:
        reply = self._reply(body["messages"][0]["content"])
        self.answers.append(reply.content or "")
        return reply

    def _reply(self, system: str) -> Reply:
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
            return Reply.html()  # an outage: a proxy's error page
        if system.startswith("Classify one memory"):
            return Reply.json({"memory_type": "error"})
        if "Summarise one memory" in system:
            return Reply.json({"l0": "chmod +x fixes deploy.sh", "l1": "deploy.sh needed the execute bit"})
        return Reply.json({})


@contextmanager
def llm_configured(monkeypatch, endpoint: Endpoint):
    with FakeOpenAI(endpoint) as server:
        for key, value in {"ULTRON_LLM_PROVIDER": "openai", "ULTRON_LLM_BASE_URL": server.url,
                           "ULTRON_LLM_MODEL": MODEL, "ULTRON_LLM_MAX_RETRIES": "0",
                           "ULTRON_LLM_RETRY_BASE_SECONDS": "0.01"}.items():
            monkeypatch.setenv(key, value)
        yield server


def fake_tokens(server, endpoint: Endpoint) -> tuple[int, int]:
    """The prompt and completion tokens the fake server reported, request by request."""
    prompt = sum(sum(len(str(m.get("content", ""))) for m in body["messages"]) // 4 for body in server.requests)
    return prompt, sum(len(a) // 4 for a in endpoint.answers)


def test_pipeline_steps_with_the_llm_leave_their_calls_and_tokens_in_the_store(client, tmp_path, monkeypatch):
    empty(client)
    endpoint = Endpoint()
    with llm_configured(monkeypatch, endpoint) as server:
        worker = Ultron(db=client.db)
        worker.ingest([session(tmp_path)], "usage-agent")
        assert worker.segment_pending_sessions()[0].status == "segmented"
        assert stored(client) == {("openai", MODEL, "segment"): {**ZERO, "calls": server.calls,
                                                                 "prompt_tokens": fake_tokens(server, endpoint)[0],
                                                                 "completion_tokens": fake_tokens(server, endpoint)[1]}}
        assert worker.label_pending_segments()[0].status == "labeled"
        assert worker.extract_memories_from_segments()[0].inserted == 1
    rows = stored(client)
    assert set(rows) == {("openai", MODEL, task) for task in
                         ("segment", "judge", "extract_memories", "classify_memory", "summarize")}
    assert sum(r["calls"] for r in rows.values()) == server.calls == worker.context.provider.usage.calls
    prompt, completion = fake_tokens(server, endpoint)
    assert sum(r["prompt_tokens"] for r in rows.values()) == prompt > 0
    assert sum(r["completion_tokens"] for r in rows.values()) == completion > 0
    assert not any(r["failures"] or r["fallbacks"] or r["retries"] for r in rows.values())
    with client.db.engine.connect() as conn:
        assert llm_usage.usage_totals(conn, 1)["calls"] == server.calls
    assert worker.context.record_llm_usage() == 0          # every count was stored once


def test_an_outage_is_stored_as_failures_and_rules_fallbacks(client, tmp_path, monkeypatch):
    empty(client)
    endpoint = Endpoint()
    endpoint.up = False
    with llm_configured(monkeypatch, endpoint):
        worker = Ultron(db=client.db)
        worker.ingest([session(tmp_path)], "outage-agent")
        report = worker.run_maintenance()  # the rules type and summarise; the redo fails again
        assert report["extracted"] == 1 and report["fallbacks_redone"]["still_marked"] == 1
    rows = stored(client)
    classify, summarize = rows[("openai", MODEL, "classify_memory")], rows[("openai", MODEL, "summarize")]
    # extraction: one failure and one fallback each; the redo: one more failure, the rules not asked
    assert (classify["calls"], classify["failures"], classify["fallbacks"]) == (0, 2, 1)
    assert summarize["fallbacks"] == 1 and summarize["failures"] >= 1
    assert rows[("openai", MODEL, "extract_memories")]["calls"] == 1


def test_the_rules_provider_stores_nothing(client, tmp_path):
    empty(client)
    assert client.context.provider.name == "rules"
    client.ingest([session(tmp_path)], "rules-agent")
    client.run_maintenance()
    client.upload_memory("deploy.sh failed with permission denied", "deploying", "chmod +x deploy.sh")
    assert stored(client) == {}


# -- a store at another revision; the migration ------------------------------------------------------


@pytest.fixture
def scratch_db(db):
    """A new, empty database on the test server; its URL."""
    name = f"ultron_usage_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(sa.make_url(db.urls.ultron), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    url = sa.make_url(db.urls.ultron).set(database=name)
    engine = sa.create_engine(url)
    yield engine
    engine.dispose()
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def alembic(engine: sa.Engine, action: str, revision: str) -> str:
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE EXTENSION IF NOT EXISTS vector"))
        cfg.attributes["connection"] = conn
        getattr(command, action)(cfg, revision)
        return conn.execute(sa.text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar_one_or_none() or "base"


def has_table(engine: sa.Engine) -> bool:
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT to_regclass('llm_usage')")).scalar_one() is not None


def test_the_migration_goes_down_and_up_again(scratch_db):
    """Every revision from 0013 on (later ones included) goes down and up again cleanly."""
    head = alembic(scratch_db, "upgrade", "head")
    assert head >= "0014" and has_table(scratch_db)
    with scratch_db.begin() as conn:
        llm_usage.add_usage(conn, [{"provider": "openai", "model": MODEL, "task": "segment", "calls": 1}])
    assert alembic(scratch_db, "downgrade", "0013") == "0013" and not has_table(scratch_db)
    assert alembic(scratch_db, "upgrade", "head") == head and has_table(scratch_db)
    assert alembic(scratch_db, "downgrade", "base") == "base" and not has_table(scratch_db)
    assert alembic(scratch_db, "upgrade", "head") == head
    with scratch_db.connect() as conn:
        assert llm_usage.usage_by_day(conn, 1) == [{"day": today(conn), **ZERO}]


def test_a_store_that_cannot_take_the_counts_fails_no_step_and_keeps_them(client, scratch_db, caplog):
    assert alembic(scratch_db, "upgrade", "0013") == "0013"          # no llm_usage table yet
    endpoint = Endpoint()
    with FakeOpenAI(endpoint) as server:
        settings = client.settings.__class__.from_env(
            home=client.settings.home, llm_provider="openai", llm_base_url=server.url, llm_api_key="k",
            llm_model=MODEL, llm_max_retries=0)
        ctx = ServiceContext(Database(scratch_db, client.db.urls, "0013"), settings, provider=OpenAIProvider(settings))
        with caplog.at_level(logging.WARNING, logger="ultron.context"), ctx.llm_batch():
            ctx.provider.summarize("deploy.sh failed", "deploying", "chmod +x deploy.sh")
        assert any("LLM usage not recorded" in r.getMessage() for r in caplog.records)

        with pytest.raises(RuntimeError, match="the step's own failure"), ctx.llm_batch():
            ctx.provider.classify_memory("deploy.sh failed", "deploying", "chmod +x deploy.sh", [])
            raise RuntimeError("the step's own failure")                # is the one that propagates
    alembic(scratch_db, "upgrade", "head")
    assert ctx.record_llm_usage() == 2                                   # nothing was lost meanwhile
    with scratch_db.connect() as conn:
        rows = llm_usage.usage_totals(conn, 1)["by_task"]
    assert {(r["task"], r["calls"]) for r in rows} == {("summarize", 1), ("classify_memory", 1)}
    assert sum(r["prompt_tokens"] for r in rows) == fake_tokens(server, endpoint)[0]
