"""The whole pipeline on ../shared/data, offline, with the real all-MiniLM-L6-v2 embedder:
sessions → segments → scores → memories → tiers → search (skipped when ../shared is absent)."""

import pytest

from tests.conftest import SHARED_DATA
from ultron.sdk import Ultron

pytestmark = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="../shared/data is not present")


def test_shared_sessions_become_searchable_memories(client):
    from ultron.embeddings import LocalMiniLMEmbedder

    settings = client.settings.__class__.from_env(home=client.settings.home, embedding_provider="local")
    svc = Ultron(settings, db=client.db, embedder=LocalMiniLMEmbedder())
    assert client.ingest([SHARED_DATA], "shared").totals["failed"] == 0
    segmented = svc.segment_pending_sessions(batch_size=1000)
    assert all(r.status == "segmented" for r in segmented)
    labels = svc.label_pending_segments(batch_size=1000)
    assert all(lb.status == "labeled" for lb in labels)
    extracted = svc.extract_memories_from_segments(batch_size=1000)
    assert extracted and all(r.status in ("extracted", "skipped") for r in extracted)
    stats = svc.memory.stats()
    # the worth check keeps what reads as a lesson, not every retold line of these sessions, and
    # an airline agent reciting its own policy to a customer is context, not a lesson
    assert stats["active"] >= 3 and "error" in stats["by_type"]
    recited = svc.memory.search_memories("basic economy flights cannot be modified or cancelled", limit=10)
    assert not [r for r in recited if "tau-airline" in (r.record.session_file or "")]
    assert svc.memory.run_tier_rebalance()["WARM"] > 0
    results = svc.memory.search_memories("run the claude CLI with a plugin directory to test a slash command",
                                         limit=5)
    assert results and results[0].similarity_score > 0.3
    assert all(r.record.status == "active" for r in results)
    assert svc.get_trajectory_stats()["segments"]["memory_extracted"] == sum(
        1 for r in extracted if r.status == "extracted")
