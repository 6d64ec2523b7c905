"""The Skill Hub on the real database: crystallisation into SKILL.md directories, the
quality gate, waiting clusters, versions, merged skills, search, and the LLM path
against the fake OpenAI server."""

import json
import shutil
import threading
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
import yaml

from ultron.providers import OpenAIProvider
from ultron.context import ServiceContext
from ultron.memory.service import MemoryService
from ultron.skills.render import parse_skill_md
from ultron.skills.service import SkillService
from ultron.testing.fake_openai import FakeOpenAI, Reply

PANDAS = [
    ("ModuleNotFoundError: No module named 'pandas' in the report container",
     "Running the nightly report script in the app Docker container",
     "Add pandas to requirements.txt. Rebuild the image with `docker build -t app .`"),
    ("ImportError: pandas is missing when the CI tests start",
     "CI job running the unit tests inside Docker",
     "pip install pandas inside the Dockerfile, then rebuild the image."),
    ("The worker service crashed: no module named pandas",
     "docker compose worker service for the ETL jobs",
     "Added pandas to requirements.txt and rebuilt the container."),
    ("Airflow task failed with ModuleNotFoundError for pandas",
     "Airflow task executed in a Docker operator",
     "Rebuild the image with `docker build --no-cache -t app .` after adding pandas to requirements.txt"),
    ("Installed pandas on the host instead of inside the image",
     "Local Docker development setup with a virtualenv on the laptop",
     "User: install it in the image, not on the host. Then: Bash `docker compose build worker`"),
]
PANDAS_MORE = [
    ("Jupyter kernel in the data container reports No module named pandas",
     "Notebook server container for the analysts",
     "Add pandas to requirements.txt. Rebuild the image with `docker build -t notebook .`"),
    ("Streamlit dashboard image fails at import pandas",
     "Dashboard deployed as a Docker image on the staging host",
     "pip install pandas inside the Dockerfile, then rebuild the image."),
    ("Scheduled export job lost pandas after the base image upgrade",
     "Cron export job container after switching to python:3.12-slim",
     "Added pandas to requirements.txt and rebuilt the container."),
]
KUBE = [
    ("Pod stuck in CrashLoopBackOff after the deploy", "kubernetes deployment of the api service",
     "Run `kubectl logs deploy/api --previous` to read the crash. Fix the missing DATABASE_URL env var in the "
     "deployment manifest."),
    ("CrashLoopBackOff: the container exits with code 1 on start", "kubernetes staging cluster, payments pod",
     "Run `kubectl describe pod payments` to see the last state. Set the missing env var in the ConfigMap."),
    ("api pod restarts forever, liveness probe failing", "kubernetes production namespace",
     "Raise initialDelaySeconds of the liveness probe. Run `kubectl rollout restart deploy/api`."),
    ("Worker pod OOMKilled then CrashLoopBackOff", "kubernetes batch workers",
     "Increase the memory limit in the deployment manifest. Run `kubectl rollout restart deploy/worker`."),
    ("Pod keeps crashing because a secret is not mounted", "kubernetes cluster for the web frontend",
     "Create the missing secret with `kubectl create secret generic web-env`. Run `kubectl rollout restart "
     "deploy/web`."),
]


@pytest.fixture
def hub(client):
    """An emptied Skill Hub (clusters, skills, skill directories) on top of `client`."""
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("TRUNCATE knowledge_clusters, skills CASCADE"))
    shutil.rmtree(client.settings.skills_dir, ignore_errors=True)
    return SkillService(client.context)


def upload(client, memories, tags=("docker",)):
    ids = [client.upload_memory(content, context, resolution, list(tags)).id
           for content, context, resolution in memories]
    assert len(set(ids)) == len(ids), "test memories must not merge with each other"
    return ids


def make_cluster(client, memories, topic, cluster_id=None):
    """Upload memories and put them in a new active cluster, as the clustering step would."""
    cluster_id = cluster_id or str(uuid.uuid4())
    ids = upload(client, memories)
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO knowledge_clusters (id, topic, size) VALUES (:id, :t, :n)"),
                     {"id": cluster_id, "t": topic, "n": len(ids)})
    join(client, cluster_id, ids)
    return cluster_id, ids


def join(client, cluster_id, ids):
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("UPDATE memory_records SET cluster_id = :c WHERE id = ANY(:ids)"),
                     {"c": cluster_id, "ids": list(ids)})


def cluster_row(client, cluster_id):
    with client.db.engine.connect() as conn:
        return conn.execute(sa.text("SELECT * FROM knowledge_clusters WHERE id = :id"), {"id": cluster_id}).one()


def skill_rows(client):
    with client.db.engine.connect() as conn:
        return conn.execute(sa.text(
            "SELECT slug, version, status, parent_version, superseded_slugs, embedding IS NULL AS no_vector, path "
            "FROM skills ORDER BY slug, created_at")).all()


def front_matter(md):
    return yaml.safe_load(md.split("---\n")[1])


def test_five_memories_crystallise_into_a_grounded_skill(client, hub):
    cluster_id, ids = make_cluster(client, PANDAS, "pandas missing in docker images")
    report = hub.run_skill_evolution()
    assert report.ready == 1 and len(report.published) == 1 and not report.failed
    skill_dir = client.settings.skills_dir / "pandas-missing-in-docker-images-1.0.0"
    assert report.published[0]["path"] == str(skill_dir)
    md = (skill_dir / "SKILL.md").read_text()
    front = front_matter(md)
    assert front["name"] == "pandas-missing-in-docker-images" and front["description"].strip()
    assert front["metadata"]["version"] == "1.0.0" and front["metadata"]["cluster_id"] == cluster_id
    assert front["metadata"]["memory_count"] == 5 and 0 < front["metadata"]["score"] <= 1
    parsed = parse_skill_md(md)
    assert set(parsed.sections) >= {"When to use", "Steps", "Pitfalls", "Decision branches", "Evidence"}
    # Steps come from the resolutions and cite the memories they came from.
    steps = parsed.sections["Steps"].splitlines()
    add = next(s for s in steps if "Add pandas to requirements.txt" in s)
    assert ids[0] in add and ids[2] in add
    assert any("docker build -t app ." in s and ids[0] in s for s in steps)
    cited = {i for s in steps for i in ids if i in s}
    assert cited and all(s.count("`") >= 2 for s in steps if s.strip())  # every step carries evidence
    assert all(i in parsed.sections["Evidence"] for i in ids)
    assert "ModuleNotFoundError" in parsed.sections["Pitfalls"]
    assert "If " in parsed.sections["Decision branches"]
    meta = json.loads((skill_dir / "_meta.json").read_text())
    assert meta["version"] == "1.0.0" and meta["parent_version"] is None and meta["cluster_id"] == cluster_id
    assert meta["memory_ids"] == ids and meta["superseded_slugs"] == []
    assert set(meta["scores"]) >= {"score", "grounding", "coverage", "corroboration", "structure"}
    assert meta["gate"]["passed"] is True and meta["created_at"]
    row = cluster_row(client, cluster_id)
    assert row.skill_slug == "pandas-missing-in-docker-images" and row.attempt_status == "published"
    assert sorted(row.attempt_member_ids) == sorted(ids)
    skill = hub.get_skill("pandas-missing-in-docker-images")
    assert skill["skill_md"] == md and skill["status"] == "current" and skill["version"] == "1.0.0"
    assert skill["memory_ids"] == ids and skill["path"] == str(skill_dir) and skill["meta"]["gate"]["passed"]
    # Nothing changed: nothing to do.
    again = hub.run_skill_evolution()
    assert again.ready == 0 and again.published == [] and again.llm_calls == 0
    assert len(skill_rows(client)) == 1


def test_fewer_memories_than_the_threshold_are_not_enough(client, hub):
    below = client.settings.crystallization_threshold - 1
    make_cluster(client, PANDAS[:below], "pandas missing in docker images")
    report = hub.run_skill_evolution()
    assert report.ready == 0 and report.published == []
    assert skill_rows(client) == [] and not client.settings.skills_dir.exists()
    assert hub.stats()["clusters_ready"] == 0 and hub.search_skills("pandas docker") == []


def test_archived_members_do_not_count(client, hub):
    cluster_id, ids = make_cluster(client, PANDAS[:client.settings.crystallization_threshold],
                                   "pandas missing in docker images")
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("UPDATE memory_records SET status = 'archived' WHERE id = :id"), {"id": ids[0]})
    assert hub.run_skill_evolution().ready == 0


def test_recrystallisation_publishes_the_next_minor_only_when_better(client, hub):
    cluster_id, ids = make_cluster(client, PANDAS, "pandas missing in docker images")
    first = hub.run_skill_evolution().published[0]
    more = upload(client, PANDAS_MORE)
    join(client, cluster_id, more[:2])
    assert hub.run_skill_evolution().ready == 0, "two new members are below the delta of three"
    join(client, cluster_id, more[2:])
    report = hub.run_skill_evolution()
    [pub] = report.published
    assert pub["version"] == "1.1.0" and pub["parent_version"] == "1.0.0" and pub["score"] > first["score"]
    assert report.superseded == [{"slug": "pandas-missing-in-docker-images", "version": "1.0.0"}]
    rows = skill_rows(client)
    assert [(r.version, r.status, r.no_vector) for r in rows] == [("1.0.0", "superseded", True),
                                                                 ("1.1.0", "current", False)]
    assert rows[1].parent_version == "1.0.0"
    assert Path(rows[0].path, "SKILL.md").is_file() and Path(rows[1].path, "SKILL.md").is_file()
    meta = json.loads(Path(rows[1].path, "_meta.json").read_text())
    assert meta["parent_version"] == "1.0.0" and len(meta["memory_ids"]) == 8
    # Search and get_skill serve the current version only; history stays readable by version.
    found = hub.search_skills("pandas module missing in the docker image", limit=10)
    assert [(f["slug"], f["version"]) for f in found] == [("pandas-missing-in-docker-images", "1.1.0")]
    assert hub.get_skill("pandas-missing-in-docker-images")["version"] == "1.1.0"
    assert hub.get_skill("pandas-missing-in-docker-images", "1.0.0")["status"] == "superseded"
    [listed] = hub.list_skills()
    assert listed["version"] == "1.1.0" and listed["memory_count"] == len(listed["memory_ids"]) == 8
    assert len(hub.list_skills(include_superseded=True)) == 2

    # Three more members that teach nothing (no resolution): the re-synthesis is not better.
    idle = upload(client, [("Team notes mention the pandas docker image", "weekly sync", ""),
                           ("The analytics image is rebuilt every Monday", "platform calendar", ""),
                           ("Dashboards live in the data docker stack", "architecture overview page", "")])
    join(client, cluster_id, idle)
    report = hub.run_skill_evolution()
    assert report.published == [] and len(report.not_better) == 1
    assert report.not_better[0]["current_version"] == "1.1.0"
    row = cluster_row(client, cluster_id)
    assert row.attempt_status == "not_better" and "does not beat 1.1.0" in row.attempt_reason
    assert len(row.attempt_member_ids) == 11
    assert hub.get_skill("pandas-missing-in-docker-images")["version"] == "1.1.0"
    assert not (client.settings.skills_dir / "pandas-missing-in-docker-images-1.2.0").exists()
    assert hub.run_skill_evolution().ready == 0


def test_search_finds_the_right_skill(client, hub):
    make_cluster(client, PANDAS, "pandas missing in docker images")
    make_cluster(client, KUBE, "kubernetes pod crashloop")
    assert len(hub.run_skill_evolution().published) == 2
    [top, *_] = hub.search_skills("pod in CrashLoopBackOff on kubernetes", limit=2)
    assert top["slug"] == "kubernetes-pod-crashloop" and top["version"] == "1.0.0"
    assert set(top) >= {"slug", "version", "name", "description", "score", "similarity", "cluster_id", "path"}
    [top, *_] = hub.search_skills("No module named pandas in my docker image", limit=2)
    assert top["slug"] == "pandas-missing-in-docker-images"
    assert len(hub.search_skills("docker", limit=1)) <= 1
    assert hub.search_skills("   ") == [] and hub.search_skills("pandas", limit=0) == []
    md = hub.get_skill("kubernetes-pod-crashloop")["skill_md"]
    assert "kubectl" in md and md.startswith("---\nname: kubernetes-pod-crashloop\n")
    assert hub.get_skill("no-such-skill") is None and hub.get_skill("") is None


def test_skill_search_walks_the_hnsw_index(client, hub):
    from ultron.db.skills import use_vector_index
    from ultron.db.memories import vec

    make_cluster(client, PANDAS, "pandas missing in docker images")
    hub.run_skill_evolution()
    q = client.memory.embedder.embed_one("pandas")
    with client.db.engine.begin() as conn:
        use_vector_index(conn, 40)
        plan = "\n".join(conn.execute(sa.text(
            "EXPLAIN SELECT slug FROM skills WHERE embedding IS NOT NULL "
            "ORDER BY embedding <=> CAST(:q AS vector) LIMIT 5"), {"q": vec(q)}).scalars())
    assert "Index Scan using ix_skills_embedding" in plan


def test_slugs_stay_unique_across_clusters(client, hub):
    make_cluster(client, PANDAS, "pandas missing in docker images")
    other, _ = make_cluster(client, PANDAS_MORE + KUBE[:2], "Pandas missing in Docker images!")
    report = hub.run_skill_evolution()
    assert sorted(p["slug"] for p in report.published) == ["pandas-missing-in-docker-images",
                                                          "pandas-missing-in-docker-images-2"]
    assert cluster_row(client, other).skill_slug in {p["slug"] for p in report.published}


def test_merged_clusters_fill_superseded_slugs(client, hub):
    a, ids_a = make_cluster(client, PANDAS, "pandas missing in docker images")
    b, ids_b = make_cluster(client, PANDAS_MORE + [KUBE[0], KUBE[1]], "pandas in data containers")
    first = hub.run_skill_evolution()
    assert sorted(p["slug"] for p in first.published) == ["pandas-in-data-containers",
                                                         "pandas-missing-in-docker-images"]
    # The clustering step merged B into A: A holds every member and lists B's skill as superseded.
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("UPDATE knowledge_clusters SET status = 'dissolved', centroid = NULL WHERE id = :b"),
                     {"b": b})
        conn.execute(sa.text("UPDATE knowledge_clusters SET superseded_slugs = ARRAY['pandas-in-data-containers'] "
                             "WHERE id = :a"), {"a": a})
    join(client, a, ids_b[:3])
    report = hub.run_skill_evolution()
    [pub] = report.published
    assert pub["slug"] == "pandas-missing-in-docker-images" and pub["version"] == "1.1.0"
    assert {"slug": "pandas-in-data-containers", "version": "1.0.0"} in report.superseded
    current = hub.get_skill("pandas-missing-in-docker-images")
    assert current["superseded_slugs"] == ["pandas-in-data-containers"]
    assert current["meta"]["superseded_slugs"] == ["pandas-in-data-containers"]
    assert front_matter(current["skill_md"])["metadata"]["superseded_slugs"] == ["pandas-in-data-containers"]
    assert hub.get_skill("pandas-in-data-containers") is None
    assert hub.get_skill("pandas-in-data-containers", "1.0.0")["status"] == "superseded"
    assert all(s["slug"] != "pandas-in-data-containers" for s in hub.search_skills("pandas container", limit=10))


def test_concurrent_runs_publish_once(client, hub):
    make_cluster(client, PANDAS, "pandas missing in docker images")
    client.memory.check_embedding_profile()
    reports, errors = [], []

    def run():
        try:
            reports.append(SkillService(client.context).run_skill_evolution())
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(len(r.published) for r in reports) == [0, 1]
    assert len(skill_rows(client)) == 1


def test_stats_count_versions_and_waiting_clusters(client, hub):
    make_cluster(client, PANDAS, "pandas missing in docker images")
    waiting, _ = make_cluster(client, [(f"Note {i} about lunch plans", f"chat {i}", "") for i in range(5)], "lunch")
    assert hub.stats()["clusters_ready"] == 2
    report = hub.run_skill_evolution()
    assert len(report.published) == 1 and report.failed[0]["cluster_id"] == waiting
    assert "no steps" in report.failed[0]["reason"]
    stats = hub.stats()
    assert stats["current"] == 1 and stats["superseded"] == 0
    assert stats["clusters_waiting"] == 1 and stats["clusters_ready"] == 0 and stats["clusters_with_skill"] == 1


# -- the LLM path (fake OpenAI server) -----------------------------------------------------------------


@pytest.fixture
def server():
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def llm_hub(client, hub, server):
    settings = client.settings.__class__.from_env(
        {"ULTRON_HOME": str(client.settings.home)}, llm_provider="openai", llm_base_url=server.url,
        llm_api_key="k", llm_model="fake-model", llm_retry_base_seconds=0.01, embedding_provider="hash")
    memory = MemoryService(ServiceContext(client.db, settings, provider=OpenAIProvider(settings), embedder=client.memory.embedder,
                           redactor=client.memory.redactor))
    return SkillService(memory.ctx)


GOOD = {
    "name": "Get pandas into the Docker image",
    "description": "Fix ModuleNotFoundError for pandas in containers by baking it into the image.",
    "when_to_use": ["A containerised Python job cannot import pandas"],
    "steps": [{"text": "Add pandas to requirements.txt", "evidence": ["m1", "m3"]},
              {"text": "Rebuild the image with docker build", "evidence": ["m1", "m4"]}],
    "pitfalls": [{"text": "Installing pandas on the host instead of the image", "evidence": ["m5"]}],
    "decision_branches": [{"if": "CI job running tests inside Docker", "then": "pip install pandas in the Dockerfile",
                           "evidence": ["m2"]}],
}


def test_an_llm_skill_cites_memories_by_reference(client, llm_hub, server):
    cluster_id, ids = make_cluster(client, PANDAS, "pandas missing in docker images")
    server.script(Reply.json(GOOD))
    report = llm_hub.run_skill_evolution()
    [pub] = report.published
    assert pub["generator"] == "openai" and report.llm_calls == 1 and report.llm_fallbacks == 0
    prompt = server.requests[0]["messages"][1]["content"]
    assert "[m1]" in prompt and PANDAS[0][2] in prompt and "pandas missing in docker images" in prompt
    # a new skill is named after its title, not the cluster's topic
    assert pub["slug"] == "get-pandas-into-the-docker-image"
    md = llm_hub.get_skill(pub["slug"])["skill_md"]
    steps = parse_skill_md(md).sections["Steps"]
    assert "1. Add pandas to requirements.txt" in steps and ids[0] in steps and ids[2] in steps
    assert "# Get pandas into the Docker image" in md and "generator: openai" in md
    # Nothing new: no model call at all.
    assert llm_hub.run_skill_evolution().llm_calls == 0 and server.calls == 1


@pytest.mark.parametrize("bad_step", [
    {"text": "Add pandas to requirements.txt", "evidence": ["m9"]},                   # not a member
    {"text": "Add pandas to requirements.txt", "evidence": [str(uuid.uuid4())]},      # made-up id
    {"text": "Reboot the Kubernetes control plane nodes", "evidence": ["m1"]},        # no support
    {"text": "Add pandas to requirements.txt", "evidence": []},                        # no citation
])
def test_a_skill_failing_the_gate_waits_for_a_new_member(client, llm_hub, server, bad_step):
    cluster_id, ids = make_cluster(client, PANDAS, "pandas missing in docker images")
    server.script(Reply.json({**GOOD, "steps": [GOOD["steps"][0], bad_step]}))
    report = llm_hub.run_skill_evolution()
    assert report.published == [] and len(report.failed) == 1
    assert "quality gate" in report.failed[0]["reason"] and "step 2" in report.failed[0]["reason"]
    row = cluster_row(client, cluster_id)
    assert row.attempt_status == "failed" and "step 2" in row.attempt_reason and row.skill_slug is None
    assert skill_rows(client) == [] and not any(client.settings.skills_dir.glob("*/SKILL.md"))
    # Not retried while nothing changes ...
    assert llm_hub.run_skill_evolution().ready == 0 and server.calls == 1
    assert llm_hub.stats()["clusters_waiting"] == 1
    # ... but a new member brings it back.
    join(client, cluster_id, upload(client, PANDAS_MORE[:1]))
    server.script(Reply.json(GOOD))
    report = llm_hub.run_skill_evolution()
    assert len(report.published) == 1 and server.calls == 2
    assert cluster_row(client, cluster_id).attempt_status == "published"


def test_llm_garbage_falls_back_to_the_rules(client, llm_hub, server):
    make_cluster(client, PANDAS, "pandas missing in docker images")
    server.script(Reply.text("I am not able to help with that."), Reply.json({"steps": "all of them"}))
    report = llm_hub.run_skill_evolution()
    assert report.llm_fallbacks == 1 and report.llm_calls == 2
    [pub] = report.published
    assert pub["generator"] == "rules"
    assert "Add pandas to requirements.txt" in llm_hub.get_skill(pub["slug"])["skill_md"]


def test_an_unreachable_llm_falls_back_to_the_rules(client, llm_hub, server):
    make_cluster(client, PANDAS, "pandas missing in docker images")
    server.script(*[Reply.http(500)] * 4)
    report = llm_hub.run_skill_evolution()
    assert report.llm_fallbacks == 1 and report.published[0]["generator"] == "rules"


def test_skill_text_is_redacted(client, llm_hub, server):
    make_cluster(client, PANDAS, "pandas missing in docker images")
    secret = "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0" * 2
    server.script(Reply.json({**GOOD, "description": f"Use the registry token {secret} to pull the base image."}))
    [pub] = llm_hub.run_skill_evolution().published
    skill = llm_hub.get_skill(pub["slug"])
    files = "".join(p.read_text() for p in Path(skill["path"]).iterdir())
    for text in (skill["skill_md"], skill["description"], files):
        assert secret not in text and "<LLM_API_KEY>" in text
