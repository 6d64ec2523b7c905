"""Fault: clustering was not reproducible. Memories were read in random-uuid order and
HDBSCAN's partition depends on row order, so the same memories loaded into two stores
(or re-read in another order) could cluster differently, and a skill be published or not."""

from __future__ import annotations

import numpy as np
import sqlalchemy as sa

from ultron.sdk import Ultron

TOPICS = ["docker compose redis worker port", "pytest fixture postgres database", "git rebase merge conflict branch",
          "kubernetes pod crash loop restart", "python import error module path", "npm install package lock version"]


def _memories() -> list[str]:
    """42 short memories over six overlapping topics: with the hashing embedder they gave
    four different partitions in 40 row orders before clustering was made order-independent."""
    rng = np.random.default_rng(0)
    out = []
    for i in range(42):
        words = TOPICS[i % 6].split()
        rng.shuffle(words)
        out.append(" ".join(words[: rng.integers(2, len(words) + 1)]) + " "
                   + rng.choice(["fix", "error", "setup", "debug", "note"]))
    return out


def _load_and_cluster(client, texts: list[str]) -> tuple[frozenset, list[str]]:
    """A store holding exactly these memories, inserted in this order, clustered once:
    its clusters as sets of member contents, and their topics."""
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("TRUNCATE memory_records, memory_contributions, knowledge_clusters, skills, "
                             "memory_lexemes, memory_corpus, work_leases CASCADE"))
    # near-duplicates stay separate memories, so every store holds the same 42 rows
    settings = client.settings.__class__.from_env(home=client.settings.home, dedup_similarity_threshold=1.0,
                                                  dedup_soft_threshold=1.0)
    svc = Ultron(settings, db=client.db)
    for text in texts:
        svc.memory.upload_memory(text, "", "")
    report = svc.clusters.run_clustering()
    assert report.skipped_run is None
    clusters = svc.clusters.list_clusters()
    partition = frozenset(frozenset(m.content for m in svc.clusters.get_cluster_memories(c["id"])) for c in clusters)
    return partition, sorted(c["topic"] for c in clusters)


def test_same_memories_inserted_in_different_orders_give_the_same_clusters(client):
    texts = _memories()
    first = _load_and_cluster(client, texts)
    assert len(first[0]) >= 2, "the memories should form several clusters"
    for seed in range(1, 8):
        order = np.random.default_rng(seed).permutation(len(texts))
        assert _load_and_cluster(client, [texts[i] for i in order]) == first, f"insertion order {seed}"
