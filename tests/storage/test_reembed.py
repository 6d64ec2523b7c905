"""Switching embedders with reembed(): every vector rewritten, search works with the new
embedder, the profile follows, and a refused or interrupted run leaves the store usable."""

import numpy as np
import pytest
import sqlalchemy as sa

from ultron.db import memories as store
from ultron.embeddings import HashingEmbedder
from ultron.reembed import UNFINISHED, ReembedError, reembed
from ultron.context import ServiceContext
from ultron.context import EmbeddingProfileMismatch
from ultron.memory.service import MemoryService, embedding_text
from ultron.skills.draft import SkillDraft
from ultron.skills.render import SkillHeader, render_skill_md

MEMORIES = [
    ("ModuleNotFoundError: No module named 'pandas'", "running the analysis in Docker", "pip install pandas"),
    ("pytest fixtures leak state between tests", "shared database in the suite", "truncate tables per test"),
    ("git push rejected: non-fast-forward", "pushing a rebased branch", "git push --force-with-lease"),
    ("The user prefers tabs over spaces in Makefiles", "editing build files", "keep tabs"),
    ("Postgres refuses connections after upgrade", "local dev server", "run pg_upgrade then restart"),
]


class SaltedHash:
    """Another 384-d vector space: the hash embedder's features, salted."""

    name = "salted-hash:384"
    dim = 384

    def __init__(self, fail_after: int | None = None) -> None:
        self._inner = HashingEmbedder(384)
        self.calls = 0
        self.fail_after = fail_after

    def embed(self, texts):
        self.calls += 1
        if self.fail_after is not None and self.calls > self.fail_after:
            raise ConnectionError("embedding endpoint went away")
        return self._inner.embed(["salt " + t for t in texts])

    def embed_one(self, text):
        return self.embed([text])[0]


SKILL = SkillDraft(name="Fix Python imports", description="Install missing modules in the image",
                   when_to_use=("a script fails with ModuleNotFoundError", "inside a Docker container"))
SKILL_MD = render_skill_md(SKILL, SkillHeader(slug="fix-python-imports", version="1.1.0", cluster_id="c1",
                                              topic="python"), [])


class Narrow(HashingEmbedder):
    def __init__(self):
        super().__init__(128)


def rows(client, sql, **p):
    with client.db.engine.connect() as conn:
        return conn.execute(sa.text(sql), p).all()


def stored_vector(client, table, row_id, column="embedding"):
    [(raw,)] = rows(client, f"SELECT CAST({column} AS text) FROM {table} WHERE id = :i", i=row_id)
    return None if raw is None else np.array([float(x) for x in raw.strip("[]").split(",")])


@pytest.fixture
def filled(client):
    """Five memories, one cluster of three, a current and a superseded skill, all in the hash space."""
    old = client.memory
    ids = [old.upload_memory(*m).record.id for m in MEMORIES]
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO knowledge_clusters (id, topic, size, centroid) "
                             "VALUES ('c1', 'python', 3, CAST(:v AS vector)), ('c2', 'empty', 0, CAST(:v AS vector))"),
                     {"v": store.vec(old.embedder.embed_one("old centroid"))})
        conn.execute(sa.text("UPDATE memory_records SET cluster_id = 'c1' WHERE id = ANY(:ids)"), {"ids": ids[:3]})
        for sid, version, status in (("s1", "1.1.0", "current"), ("s0", "1.0.0", "superseded")):
            conn.execute(sa.text(
                "INSERT INTO skills (id, slug, version, name, description, skill_md, score, status, embedding) "
                "VALUES (:i, 'fix-python-imports', :v, :n, :d, :md, 0.9, :s, "
                "CASE WHEN :s = 'current' THEN CAST(:e AS vector) END)"),
                {"i": sid, "v": version, "s": status, "e": store.vec(old.embedder.embed_one("old skill")),
                 "n": SKILL.name, "d": SKILL.description, "md": SKILL_MD})
    return ids


def test_reembed_switches_the_store_to_the_new_embedder(client, filled):
    new = MemoryService(ServiceContext(client.db, client.settings, embedder=SaltedHash()))
    with pytest.raises(EmbeddingProfileMismatch, match="hash:384"):
        new.search_memories("pandas")

    seen = []
    out = reembed(new, progress=lambda done, total, what: seen.append((done, total, what)), batch_size=2)

    assert out["memories"] == 5 and out["clusters"] == 2 and out["clusters_emptied"] == 1 and out["skills"] == 1
    assert out["embedder"] == "salted-hash:384" and out["previous_embedder"] == "hash:384"
    assert rows(client, "SELECT name, dim FROM embedding_profile") == [("salted-hash:384", 384)]
    # batch-wise: one call per batch of two memories, then clusters and skills
    assert [s[0] for s in seen] == [2, 4, 5, 7, 8] and seen[-1][1] == 8
    assert [s[2] for s in seen] == ["memories"] * 3 + ["clusters", "skills"]

    emb = SaltedHash()
    for memory_id, (content, context, resolution) in zip(filled, MEMORIES):
        expected = emb.embed_one(embedding_text({"content": content, "context": context, "resolution": resolution}))
        assert np.allclose(stored_vector(client, "memory_records", memory_id), expected, atol=1e-6)
    members = np.array([stored_vector(client, "memory_records", i) for i in filled[:3]]).mean(axis=0)
    assert np.allclose(stored_vector(client, "knowledge_clusters", "c1", "centroid"),
                       members / np.linalg.norm(members), atol=1e-5)
    assert stored_vector(client, "knowledge_clusters", "c2", "centroid") is None  # no member left to stand for
    # the same text the Skill Hub embeds when it publishes: name, description, when to use
    assert np.allclose(stored_vector(client, "skills", "s1"), emb.embed_one(SKILL.embedding_text()), atol=1e-6)
    assert stored_vector(client, "skills", "s0") is None  # superseded: never searchable

    hits = new.search_memories(MEMORIES[2][0] + "\n" + MEMORIES[2][1] + "\n" + MEMORIES[2][2], limit=3)
    assert hits[0].record.id == filled[2] and "vector" in hits[0].matched and hits[0].similarity_score > 0.99
    from ultron.skills.service import SkillService

    found = SkillService(new.ctx).search_skills("python script fails with ModuleNotFoundError in Docker")
    assert [(f["slug"], f["version"]) for f in found] == [("fix-python-imports", "1.1.0")]
    # the old embedder is now the one refused
    with pytest.raises(EmbeddingProfileMismatch, match="salted-hash:384"):
        MemoryService(ServiceContext(client.db, client.settings, embedder=HashingEmbedder(384))).search_memories("pandas")
    # uploads with the new embedder dedup against the re-embedded rows
    assert new.upload_memory(*MEMORIES[0]).action == "merged"


def test_a_different_dimension_is_refused_and_nothing_changes(client, filled):
    before = stored_vector(client, "memory_records", filled[0])
    with pytest.raises(ReembedError, match=r"128-d.*384-d.*ULTRON_EMBEDDING_DIM=384"):
        reembed(ServiceContext(client.db, client.settings, embedder=Narrow()))
    assert rows(client, "SELECT name FROM embedding_profile") == [("hash:384",)]
    assert np.array_equal(stored_vector(client, "memory_records", filled[0]), before)
    assert client.memory.search_memories("pandas")


def test_an_interrupted_run_blocks_the_store_until_it_is_run_again(client, filled):
    broken = MemoryService(ServiceContext(client.db, client.settings, embedder=SaltedHash(fail_after=2)))  # probe + 1 batch
    with pytest.raises(ConnectionError):
        reembed(broken, batch_size=2)
    [(name,)] = rows(client, "SELECT name FROM embedding_profile")
    assert name == "salted-hash:384" + UNFINISHED
    # half the rows are in each space: neither embedder may search or write now
    for emb in (HashingEmbedder(384), SaltedHash()):
        with pytest.raises(EmbeddingProfileMismatch, match="ultron reembed"):
            MemoryService(ServiceContext(client.db, client.settings, embedder=emb)).upload_memory("anything new")

    fixed = MemoryService(ServiceContext(client.db, client.settings, embedder=SaltedHash()))
    out = reembed(fixed, batch_size=2)
    assert out["memories"] == 5 and out["previous_unfinished"] is True
    assert out["previous_embedder"] == "salted-hash:384"
    assert fixed.search_memories(MEMORIES[1][0])[0].record.id == filled[1]


def test_a_second_concurrent_run_is_refused(client, filled):
    with client.db.engine.connect() as conn:
        conn.execute(sa.text("SELECT pg_advisory_lock(hashtextextended('ultron-reembed', 0))"))
        try:
            with pytest.raises(ReembedError, match="another re-embed is running"):
                reembed(ServiceContext(client.db, client.settings, embedder=SaltedHash()))
        finally:
            conn.execute(sa.text("SELECT pg_advisory_unlock(hashtextextended('ultron-reembed', 0))"))
    assert rows(client, "SELECT name FROM embedding_profile") == [("hash:384",)]


def test_reembed_of_an_empty_store_just_records_the_profile(client):
    out = reembed(ServiceContext(client.db, client.settings, embedder=SaltedHash()))
    assert (out["memories"], out["clusters"], out["skills"]) == (0, 0, 0)
    assert out["previous_embedder"] is None
    assert rows(client, "SELECT name, dim FROM embedding_profile") == [("salted-hash:384", 384)]
