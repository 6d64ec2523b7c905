"""task_segments and quality_metrics, materialised per session partition."""

import dagster as dg
import sqlalchemy as sa

from jobs.maintenance import maintenance_job as maintenance
from resources.database import UltronResource
from resources.llm import LLMResource
from tests.conftest import TEST_HOME, write_jsonl
from ultron.sessions.discovery import partition_key
from ultron.testing.fake_openai import FakeOpenAI, Reply
from ultron_assets.partitions import session_partitions
from ultron_assets.trajectory import quality_metrics, raw_sessions, task_segments

SEED_EXAMPLE = [
    {"role": "user", "content": "How do I read a CSV in Python?"},
    {"role": "assistant", "content": "You can use pandas.read_csv('data.csv')."},
    {"role": "user", "content": "Write me a Docker compose file"},
    {"role": "assistant", "content": "version: '3'\nservices:\n  web:\n    image: nginx"},
]


def materialize(instance, key, assets=(raw_sessions, task_segments, quality_metrics)):
    instance.add_dynamic_partitions(session_partitions.name, [key])
    return dg.materialize(list(assets), partition_key=key, instance=instance,
                          resources={"ultron": UltronResource(home=str(TEST_HOME)), "llm": LLMResource()})


def mat(result, asset):
    [m] = result.asset_materializations_for_node(asset)
    return m.metadata


def checks(result):
    return {c.check_name: c for c in result.get_asset_check_evaluations()}


def test_a_session_flows_to_segments_and_scores(client, dagster_instance, tmp_path):
    f = write_jsonl(tmp_path / "seed.jsonl", SEED_EXAMPLE)
    key = partition_key("flow-agent", f)
    result = materialize(dagster_instance, key)
    assert result.success
    seg = mat(result, "task_segments")
    assert seg["status"].value == "segmented" and seg["segments"].value == 2
    assert [r.data["lines"] for r in seg["segment_table"].value.records] == ["1-2", "3-4"]
    assert seg["llm_provider"].value == "rules" and seg["llm_calls"].value == 0
    q = mat(result, "quality_metrics")
    assert q["labeled_now"].value == 2 and q["still_pending"].value == 0
    assert "| score | segments |" in q["score_histogram"].value
    c = checks(result)
    assert c["segments_cover_session"].passed and c["scores_in_range"].passed
    with client.db.engine.connect() as conn:
        stored = conn.execute(sa.text("SELECT quality_metrics FROM task_segments ORDER BY segment_index")).scalars().all()
    import json

    for doc in map(json.loads, stored):
        assert 0 <= doc["summary"]["overall_score"] <= 1 and doc["summary"]["task_type"]
        assert all({"value", "score", "weight", "how"} <= set(m) for m in doc["metrics"].values())

    # A backfill over the same partition re-runs cleanly: nothing new, no duplicates.
    again = materialize(dagster_instance, key)
    assert mat(again, "task_segments")["status"].value == "unchanged"
    assert mat(again, "quality_metrics")["labeled_now"].value == 0
    with client.db.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM task_segments")).scalar_one() == 2
    assert client.trajectory_service.get_trajectory_stats()["segments"]["labeled"] == 2


def test_an_llm_outage_leaves_work_pending_for_maintenance(client, dagster_instance, tmp_path, monkeypatch):
    f = write_jsonl(tmp_path / "outage.jsonl", SEED_EXAMPLE)
    key = partition_key("outage-agent", f)
    with FakeOpenAI() as server:
        monkeypatch.setenv("ULTRON_LLM_PROVIDER", "openai")
        monkeypatch.setenv("ULTRON_LLM_BASE_URL", server.url)
        monkeypatch.setenv("ULTRON_LLM_MAX_RETRIES", "1")
        monkeypatch.setenv("ULTRON_LLM_RETRY_BASE_SECONDS", "0.01")
        server.script(Reply.http(503), Reply.http(503))
        result = materialize(dagster_instance, key)
        assert result.success
        seg = mat(result, "task_segments")
        assert seg["status"].value == "pending" and "unavailable" in seg["pending_reason"].value
        assert seg["llm_failures"].value == 1 and seg["llm_retries"].value == 1
        cover = checks(result)["segments_cover_session"]
        assert not cover.passed and cover.severity == dg.AssetCheckSeverity.WARN

        # The endpoint recovers; the scheduled maintenance job picks the session up.
        server.responder = lambda body: (
            Reply.json({"goal_achieved": 1, "correctness": 1, "efficiency": 0.9, "safety": 1})
            if "grade" in body["messages"][0]["content"]
            else Reply.json({"tasks": [{"start": 1, "end": 2, "topic": "csv"}, {"start": 3, "end": 4, "topic": "docker"}]}))
        run = maintenance.execute_in_process(instance=dagster_instance,
                                             resources={"ultron": UltronResource(home=str(TEST_HOME)), "llm": LLMResource()})
        assert run.success
    events = [(e.event_specific_data.materialization.asset_key.path[-1], e.event_specific_data.materialization.partition)
              for e in run.all_events if e.event_type_value == "ASSET_MATERIALIZATION"]
    assert ("task_segments", key) in events and ("quality_metrics", key) in events
    with client.db.engine.connect() as conn:
        topics = conn.execute(sa.text("SELECT topic FROM task_segments ORDER BY segment_index")).scalars().all()
        judged = conn.execute(sa.text("SELECT quality_metrics FROM task_segments")).scalars().all()
    assert topics == ["csv", "docker"]
    assert all('"judge_used": true' in j for j in judged)


def test_memories_and_tiers_assets(client, dagster_instance, tmp_path):
    from tests.storage.test_memory_storage import _good_session
    from ultron_assets.memory import memories, tiers

    f = _good_session(tmp_path, "asset-good.jsonl")
    key = partition_key("mem-agent", f)
    first = materialize(dagster_instance, key, assets=(raw_sessions, task_segments, quality_metrics))
    assert first.success
    with client.db.engine.begin() as conn:  # this test is about extraction, not about the score
        conn.execute(sa.text("UPDATE task_segments SET quality_metrics = jsonb_set(CAST(quality_metrics AS jsonb), "
                             "'{summary,overall_score}', '0.95')::text"))
    result = materialize(dagster_instance, key, assets=(memories,))
    assert result.success
    md = mat(result, "memories")
    assert md["segments_extracted"].value == 1 and md["inserted"].value >= 2
    assert md["memories_from_this_session"].value == md["inserted"].value
    assert checks(result)["memories_redacted"].passed
    again = materialize(dagster_instance, key, assets=(memories,))
    assert mat(again, "memories")["inserted"].value == 0  # extracted once
    t = dg.materialize([tiers], instance=dagster_instance,
                       resources={"ultron": UltronResource(home=str(TEST_HOME)), "llm": LLMResource()})
    tmd = t.asset_materializations_for_node("tiers")[0].metadata
    assert tmd["warm"].value + tmd["hot"].value + tmd["cold"].value == md["inserted"].value
    assert "| HOT |" in tmd["distribution"].value
