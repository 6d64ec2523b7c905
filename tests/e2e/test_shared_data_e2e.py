"""Ingest every real session in ../shared/data (skipped when it is absent)."""

import pytest
import sqlalchemy as sa

from tests.conftest import SHARED_DATA

pytestmark = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="../shared/data is not present")


def test_all_shared_sessions_ingest(client):
    report = client.ingest([SHARED_DATA], "shared")
    totals = report.totals
    assert totals["failed"] == 0 and totals["new"] == totals["files"] >= 105
    by_name = {f.path.rsplit("/", 1)[-1]: f for f in report.files}
    for name in ("subagents-poems.jsonl", "general-tool-calls.jsonl", "edit-tool-variants.jsonl",
                 "representative-messages.jsonl", "edge-cases.jsonl"):
        assert by_name[name].session_format == "claude_code", name
        assert by_name[name].messages > 0
    assert all(f.session_format == "openai" for n, f in by_name.items() if n.startswith("task"))
    # edge-cases.jsonl really holds broken lines; each is located, the rest kept.
    edge = by_name["edge-cases.jsonl"]
    assert {p.line for p in edge.problems} == {11, 13, 14, 15, 16}
    # Claude Code tool results become tool messages tied to their calls.
    general = by_name["general-tool-calls.jsonl"]
    assert general.roles["tool"] > 100
    with client.db.engine.connect() as conn:
        orphan = conn.execute(sa.text("""
            SELECT count(*) FROM session_messages t JOIN trajectory_records r ON r.id = t.record_id
            WHERE r.session_file LIKE '%general-tool-calls.jsonl' AND t.role = 'tool' AND NOT EXISTS (
              SELECT 1 FROM session_messages a, jsonb_array_elements(a.tool_calls) c
              WHERE a.record_id = t.record_id AND a.role = 'assistant' AND c->>'id' = t.tool_call_id)""")).scalar_one()
    assert orphan == 0
    again = client.ingest([SHARED_DATA], "shared").totals
    assert again["unchanged"] == totals["files"]
