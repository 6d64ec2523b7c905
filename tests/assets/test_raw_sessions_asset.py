"""Materialising raw_sessions partitions with dg.materialize on a Postgres-backed instance."""

import dagster as dg
import sqlalchemy as sa

from resources.database import UltronResource
from resources.llm import LLMResource
from tests.conftest import TEST_HOME, write_jsonl
from ultron.sessions.discovery import partition_key
from ultron_assets.partitions import session_partitions
from ultron_assets.trajectory import raw_sessions


def materialize(instance, key):
    instance.add_dynamic_partitions(session_partitions.name, [key])
    return dg.materialize(
        [raw_sessions], partition_key=key, instance=instance,
        resources={"ultron": UltronResource(home=str(TEST_HOME)), "llm": LLMResource()},
    )


def test_materialising_a_partition_ingests_the_file_with_metadata(client, dagster_instance, tmp_path):
    f = write_jsonl(tmp_path / "chat.jsonl", [
        {"role": "user", "content": "How do I read a CSV?"},
        b"{oops\n",
        {"role": "assistant", "content": "pandas.read_csv"},
    ])
    key = partition_key("asset-agent", f)
    result = materialize(dagster_instance, key)
    assert result.success
    [mat] = result.asset_materializations_for_node("raw_sessions")
    md = mat.metadata
    assert md["status"].value == "new"
    assert md["messages"].value == 2
    assert md["messages_by_role"].value == {"user": 1, "assistant": 1}
    assert md["problem_count"].value == 1
    assert [r.data for r in md["problems"].value.records] == [{"line": 2, "error": md["problems"].value.records[0].data["error"]}]
    assert "not valid JSON" in md["problems"].value.records[0].data["error"]
    assert [r.data["role"] for r in md["preview"].value.records] == ["user", "assistant"]
    [check] = result.get_asset_check_evaluations()
    assert check.check_name == "parsed_cleanly" and not check.passed
    assert check.severity == dg.AssetCheckSeverity.WARN
    with client.db.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT partition_key FROM trajectory_records")).scalar_one() == key
    # Re-materialising is idempotent.
    again = materialize(dagster_instance, key)
    assert again.asset_materializations_for_node("raw_sessions")[0].metadata["status"].value == "unchanged"


def test_a_broken_file_never_crashes_the_run(client, dagster_instance, tmp_path):
    f = tmp_path / "broken.jsonl"
    f.write_bytes(b"\x00\x01 binary")
    result = materialize(dagster_instance, partition_key("asset-agent", f))
    assert result.success
    md = result.asset_materializations_for_node("raw_sessions")[0].metadata
    assert md["status"].value == "failed"
    assert "binary file" in md["problems"].value.records[0].data["error"]
    [check] = result.get_asset_check_evaluations()
    assert not check.passed and check.severity == dg.AssetCheckSeverity.ERROR


def test_a_vanished_file_is_a_failed_partition_not_a_crash(client, dagster_instance, tmp_path):
    result = materialize(dagster_instance, partition_key("asset-agent", tmp_path / "gone.jsonl"))
    assert result.success
    md = result.asset_materializations_for_node("raw_sessions")[0].metadata
    assert md["status"].value == "failed"
    assert md["problems"].value.records[0].data["error"] == "path does not exist"
