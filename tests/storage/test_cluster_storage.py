"""Knowledge clusters on the real database: batch runs, stable ids, topics (rules and an
LLM on the fake OpenAI server), assignment between runs, archived members, stats.

The suite's hash embedder only sees shared words, so each topic is a fixed sentence
pattern plus a dozen made-up words of its own per memory: members of a topic come out
at cosine ~0.65-0.73 to each other (below the dedup thresholds, so every upload is a
new memory) and ~0.3 to other topics.
"""

from __future__ import annotations

import random

import pytest
import sqlalchemy as sa

from ultron.clusters import ClusterService
from ultron.db import clusters as cluster_store
from ultron.providers import OpenAIProvider
from ultron.context import ServiceContext
from ultron.memory.service import MemoryService
from ultron.testing.fake_openai import FakeOpenAI, Reply

TOPICS = {
    "docker": ("ModuleNotFoundError no module named {x} inside the docker container", "docker image build",
               "add {x} to requirements and rebuild the docker image"),
    "postgres": ("postgres connection refused on port 5432 from the {x} service", "postgres database server",
                 "start postgres and check the port in the {x} settings"),
    "git": ("git merge conflict in {x} after rebase of the feature branch", "git feature branch",
            "resolve the conflict in {x} then git rebase continue"),
}
NAMES = ["pandas", "numpy", "scipy", "requests", "flask", "yaml", "torch", "boto3", "celery", "redis"]
SYLLABLES = ["ka", "lo", "mi", "ne", "su", "ta", "ri", "vo", "pe", "zu", "ba", "do", "fi", "gu", "ha", "jo"]


def body(topic: str, i: int) -> tuple[str, str, str]:
    """Memory i of a topic: the topic's pattern, its own package name and twelve made-up words."""
    rnd = random.Random(f"{topic}-{i}")
    words = " ".join("".join(rnd.choice(SYLLABLES) for _ in range(4)) for _ in range(12))
    content, context, resolution = TOPICS[topic]
    name = NAMES[i % len(NAMES)]
    return content.format(x=name), f"{context} {words}", resolution.format(x=name)


@pytest.fixture
def ultron(client):
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("TRUNCATE knowledge_clusters, skills CASCADE"))
    return client


@pytest.fixture
def clusters(ultron):
    return ClusterService(ultron.context)


def upload(ultron, topic: str, i: int) -> str:
    result = ultron.memory.upload_memory(*body(topic, i))
    assert result.action == "inserted", "test data must not be near-duplicates"
    return result.record.id


def seed(ultron, per_topic: int = 6) -> dict[str, list[str]]:
    return {t: [upload(ultron, t, i) for i in range(per_topic)] for t in TOPICS}


def cluster_of(ultron, memory_id: str) -> str | None:
    with ultron.db.engine.connect() as conn:
        return conn.execute(sa.text("SELECT cluster_id FROM memory_records WHERE id = :id"),
                            {"id": memory_id}).scalar_one()


def by_topic_word(clusters: ClusterService) -> dict[str, dict]:
    """Active clusters keyed by the topic word their label contains."""
    out = {}
    for c in clusters.list_clusters():
        [word] = [t for t in TOPICS if t in c["topic"]]
        out[word] = c
    return out


def test_three_topics_form_three_clusters_with_readable_topics(ultron, clusters):
    members = seed(ultron)
    report = clusters.run_clustering()
    assert (report.clusters, report.new, report.kept, report.noise, report.memories_clustered) == (3, 3, 0, 0, 18)
    assert report.topics_rules == 3 and report.topics_llm == 0 and report.llm_failures == 0
    assert report.pipeline.startswith("exact") and report.seconds > 0
    found = by_topic_word(clusters)
    assert set(found) == set(TOPICS)
    for topic, ids in members.items():
        cluster = found[topic]
        assert cluster["size"] == 6 and cluster["status"] == "active" and " · " in cluster["topic"]
        assert {m.id for m in clusters.get_cluster_memories(cluster["id"])} == set(ids)
        assert {cluster_of(ultron, m) for m in ids} == {cluster["id"]}
    assert found["docker"]["topic"].startswith("docker")
    assert {s["size"] for s in report.to_dict()["sizes"]} == {6}
    assert clusters.get_cluster(found["git"]["id"])["topic"] == found["git"]["topic"]
    assert clusters.get_cluster("no-such-cluster") is None
    stats = clusters.stats()
    assert stats["active_clusters"] == 3 and stats["clustered_memories"] == 18
    assert stats["unclustered_memories"] == 0 and stats["largest_cluster"] == 6
    assert stats["size_histogram"]["5-9"] == 3


def test_a_second_run_keeps_ids_and_topics(ultron, clusters):
    seed(ultron)
    clusters.run_clustering()
    before = by_topic_word(clusters)
    again = clusters.run_clustering()  # nothing changed: nothing relabelled
    assert (again.kept, again.new, again.dissolved, again.topics_rules) == (3, 0, 0, 0)
    for i in (6, 7):
        upload(ultron, "docker", i)
    upload(ultron, "git", 6)
    report = clusters.run_clustering()
    assert (report.clusters, report.kept, report.new, report.dissolved) == (3, 3, 0, 0)
    after = by_topic_word(clusters)
    assert {t: c["id"] for t, c in after.items()} == {t: c["id"] for t, c in before.items()}
    assert {t: c["topic"] for t, c in after.items()} == {t: c["topic"] for t, c in before.items()}
    assert (after["docker"]["size"], after["git"]["size"], after["postgres"]["size"]) == (8, 7, 6)


def test_an_upload_between_runs_joins_a_close_cluster_and_moves_its_centroid(ultron, clusters):
    seed(ultron)
    clusters.run_clustering()
    docker = by_topic_word(clusters)["docker"]
    with ultron.db.engine.connect() as conn:
        centroid_before = conn.execute(sa.text("SELECT centroid::text FROM knowledge_clusters WHERE id = :id"),
                                       {"id": docker["id"]}).scalar_one()
    new_id = upload(ultron, "docker", 7)
    assert cluster_of(ultron, new_id) == docker["id"]
    assert new_id in {m.id for m in clusters.get_cluster_memories(docker["id"])}
    assert clusters.get_cluster(docker["id"])["size"] == 7
    with ultron.db.engine.connect() as conn:
        row = conn.execute(sa.text("SELECT size, centroid::text AS c, abs(1 - vector_norm(centroid)) AS off "
                                   "FROM knowledge_clusters WHERE id = :id"), {"id": docker["id"]}).one()
    assert row.size == 7 and row.c != centroid_before and row.off < 1e-4

    far = ultron.memory.upload_memory("my favourite coffee is a flat white with oat milk",
                                      "ordering at the cafe", "ask for oat milk").record
    assert cluster_of(ultron, far.id) is None
    assert clusters.stats()["unclustered_memories"] == 1
    assert clusters.run_clustering().noise == 1  # still alone after the batch


def test_assignment_never_waits_for_a_batch_that_is_writing(ultron, clusters):
    seed(ultron)
    clusters.run_clustering()
    memory_id = upload(ultron, "docker", 6)  # joined normally
    assert cluster_of(ultron, memory_id) is not None
    embedding = ultron.memory.embedder.embed_one("\n".join(body("docker", 7)))
    with ultron.db.engine.connect() as batch, ultron.db.engine.connect() as upload_conn:
        with batch.begin():
            cluster_store.lock_for_batch_write(batch)
            with upload_conn.begin():
                assert clusters.assign_memory_to_cluster(upload_conn, memory_id, embedding) is None


def test_archived_members_leave_their_cluster(ultron, clusters):
    members = seed(ultron)
    clusters.run_clustering()
    docker = by_topic_word(clusters)["docker"]
    gone = members["docker"][0]
    with ultron.db.engine.begin() as conn:
        conn.execute(sa.text("UPDATE memory_records SET status = 'archived' WHERE id = :id"), {"id": gone})
    assert cluster_of(ultron, gone) is None
    assert gone not in {m.id for m in clusters.get_cluster_memories(docker["id"])}
    assert clusters.get_cluster(docker["id"])["size"] == 5
    assert by_topic_word(clusters)["docker"]["size"] == 5
    report = clusters.run_clustering()
    assert report.memories == 17 and report.kept == 3
    assert clusters.get_cluster(docker["id"])["size"] == 5

    # the tier rebalance archives a stale COLD memory: it leaves its cluster the same way
    stale = members["git"][0]
    with ultron.db.engine.begin() as conn:
        conn.execute(sa.text("UPDATE memory_records SET created_at = now() - interval '90 days' WHERE id = :id"),
                     {"id": stale})
    assert ultron.memory.run_tier_rebalance()["archived_now"] == 1
    git = by_topic_word(clusters)["git"]
    assert git["size"] == 5 and stale not in {m.id for m in clusters.get_cluster_memories(git["id"])}


def test_a_cluster_whose_members_are_gone_dissolves(ultron, clusters):
    members = seed(ultron)
    clusters.run_clustering()
    git = by_topic_word(clusters)["git"]
    with ultron.db.engine.begin() as conn:
        conn.execute(sa.text("UPDATE memory_records SET status = 'archived' WHERE id = ANY(:ids)"),
                     {"ids": members["git"]})
    report = clusters.run_clustering()
    assert (report.clusters, report.kept, report.dissolved, report.merged) == (2, 2, 1, 0)
    assert git["id"] not in {c["id"] for c in clusters.list_clusters()}
    old = clusters.get_cluster(git["id"])
    assert old["status"] == "dissolved" and old["size"] == 0
    assert git["id"] in {c["id"] for c in clusters.list_clusters(include_dissolved=True)}
    with ultron.db.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT centroid IS NULL FROM knowledge_clusters WHERE id = :id"),
                            {"id": git["id"]}).scalar_one()
    # a dissolved cluster is never offered to an upload
    assert cluster_of(ultron, upload(ultron, "git", 7)) is None


@pytest.mark.parametrize("count", [0, 1, 2])
def test_tiny_stores_run_without_clusters(ultron, clusters, count):
    for i in range(count):
        upload(ultron, "docker", i)
    report = clusters.run_clustering()
    assert (report.clusters, report.new, report.memories, report.noise) == (0, 0, count, count)
    assert clusters.list_clusters() == [] and clusters.stats()["active_clusters"] == 0


def test_a_store_about_one_topic_is_one_cluster(ultron, clusters):
    seed_ids = [upload(ultron, "postgres", i) for i in range(5)]
    report = clusters.run_clustering()
    assert report.clusters == 1
    [only] = clusters.list_clusters()
    assert "postgres" in only["topic"] and only["size"] == 5
    assert {m.id for m in clusters.get_cluster_memories(only["id"])} == set(seed_ids)


def test_skill_state_survives_a_rerun(ultron, clusters):
    seed(ultron)
    clusters.run_clustering()
    docker = by_topic_word(clusters)["docker"]
    with ultron.db.engine.begin() as conn:
        conn.execute(sa.text("UPDATE knowledge_clusters SET skill_slug = 'docker-deps', attempt_status = 'published' "
                             "WHERE id = :id"), {"id": docker["id"]})
    upload(ultron, "docker", 6)
    clusters.run_clustering()
    kept = clusters.get_cluster(docker["id"])
    assert kept["skill_slug"] == "docker-deps" and kept["attempt_status"] == "published" and kept["size"] == 7


def llm_service(ultron, settings, fake) -> ClusterService:
    llm_settings = settings.__class__.from_env(llm_provider="openai", llm_base_url=fake.url, llm_api_key="k",
                                               llm_max_retries=1, llm_retry_base_seconds=0.01,
                                               llm_timeout_seconds=5)
    memory = MemoryService(ServiceContext(ultron.db, llm_settings, provider=OpenAIProvider(llm_settings),
                           embedder=ultron.memory.embedder, redactor=ultron.memory.redactor))
    return ClusterService(memory.ctx)


def test_topics_come_from_the_llm_when_one_is_configured(ultron, settings):
    seed(ultron)

    def answer(request):
        listing = request["messages"][1]["content"]
        word = next(t for t in TOPICS if t in listing)
        return Reply.json({"topic": f"  {word.title()} problems and fixes. "})

    with FakeOpenAI(answer) as fake:
        report = llm_service(ultron, settings, fake).run_clustering()
        assert fake.calls == 3
        listing = fake.requests[0]["messages"][1]["content"]
    assert report.topics_llm == 3 and report.topics_rules == 0 and report.llm_failures == 0
    assert listing.count("\n- ") >= 5  # the members' summaries were shown
    assert sorted(c["topic"] for c in ClusterService(ultron.context).list_clusters()) == [
        "Docker problems and fixes", "Git problems and fixes", "Postgres problems and fixes"]


def test_llm_garbage_or_outage_falls_back_to_rules_and_is_counted(ultron, settings):
    seed(ultron)
    with FakeOpenAI() as fake:
        # first cluster: two unusable answers (asked twice); then the server fails (500s) for good
        fake.script(Reply.text("I would call it stuff"), Reply.json({"label": 3}))
        report = llm_service(ultron, settings, fake).run_clustering()
    assert report.clusters == 3 and report.topics_llm == 0 and report.topics_rules == 3
    assert report.llm_failures == 2  # one invalid answer, one outage; after that no more waiting on it
    assert all(" · " in c["topic"] for c in ClusterService(ultron.context).list_clusters())


@pytest.mark.parametrize("survivor_slug", [None, "docker-deps"])
def test_a_merge_keeps_the_larger_cluster_and_its_skills(ultron, clusters, survivor_slug):
    """Two previous clusters whose members now form one: the one with more of them keeps
    its id; the other dissolves, and its skill carries on or is superseded."""
    members = seed(ultron)
    clusters.run_clustering()
    docker = by_topic_word(clusters)["docker"]
    with ultron.db.engine.begin() as conn:
        # as if an earlier run had split the docker memories: 2 of 6 in a cluster of their own
        conn.execute(sa.text("INSERT INTO knowledge_clusters (id, topic, size, skill_slug, attempt_member_ids, "
                             "attempt_status, centroid) SELECT 'split-off', 'pip', 2, 'pip-in-docker', :ami, "
                             "'published', centroid FROM knowledge_clusters WHERE id = :d"),
                     {"d": docker["id"], "ami": members["docker"][:2]})
        conn.execute(sa.text("UPDATE memory_records SET cluster_id = 'split-off' WHERE id = ANY(:ids)"),
                     {"ids": members["docker"][:2]})
        conn.execute(sa.text("UPDATE knowledge_clusters SET skill_slug = :s WHERE id = :d"),
                     {"s": survivor_slug, "d": docker["id"]})
    report = clusters.run_clustering()
    assert (report.clusters, report.kept, report.new, report.merged, report.dissolved) == (3, 3, 0, 1, 1)
    assert report.topics_rules == 1  # only the merged cluster is relabelled
    survivor = clusters.get_cluster(docker["id"])
    assert survivor["size"] == 6 and survivor["status"] == "active"
    if survivor_slug is None:  # the only skill in the merge carries on, with its crystallisation record
        assert survivor["skill_slug"] == "pip-in-docker" and survivor["superseded_slugs"] == []
        assert survivor["attempt_member_ids"] == members["docker"][:2] and survivor["attempt_status"] == "published"
    else:
        assert survivor["skill_slug"] == "docker-deps" and survivor["superseded_slugs"] == ["pip-in-docker"]
    gone = clusters.get_cluster("split-off")
    assert gone["status"] == "dissolved" and gone["size"] == 0
