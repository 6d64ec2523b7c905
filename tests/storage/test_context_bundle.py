"""The context bundle on the real database: one block per task, never over its token
budget (cl100k, the project's tokenizer), skills first, then memories, every item
labelled with its id, degrading to fewer items and L0 summaries as the budget shrinks."""

from __future__ import annotations

import pytest

from tests.storage.test_skill_storage import KUBE, PANDAS, PANDAS_MORE, hub, make_cluster  # noqa: F401
from ultron.llm.tokens import count_tokens

TASK = "the report container fails with ModuleNotFoundError: No module named pandas in docker"
EXTRA = [
    ("Docker build cache keeps an old requirements layer so pandas never gets installed",
     "CI pipeline building the analytics image", "Run `docker build --no-cache` after editing requirements.txt"),
    ("pandas wheels fail to build on the alpine base image", "slim docker images for the data jobs",
     "Use python:3.12-slim instead of alpine so pandas installs from a wheel"),
    ("The container runs an old image without pandas after the fix", "docker compose stack on the laptop",
     "Run `docker compose up --build` so the rebuilt image is used"),
    ("numpy version conflict breaks the pandas import in the container", "pinned requirements for the ETL jobs",
     "Pin numpy<2 together with pandas in requirements.txt"),
]


@pytest.fixture
def stocked(client, hub):
    """Two published skills and a few dozen memories, as a store looks after some use."""
    make_cluster(client, PANDAS, "pandas missing in docker images")
    make_cluster(client, KUBE, "kubernetes pod crashloop")
    assert len(hub.run_skill_evolution().published) == 2
    for content, context, resolution in PANDAS_MORE + EXTRA:
        client.upload_memory(content, context, resolution, ["docker"], agent_id="builder")
    return client


@pytest.mark.parametrize("budget", [200, 500, 1500, 4000, 8000])
def test_the_bundle_never_exceeds_its_budget(stocked, budget):
    out = stocked.context_bundle(TASK, token_budget=budget)
    assert out["token_budget"] == budget and out["task"] == TASK
    assert out["tokens"] == count_tokens(out["text"]) <= budget
    assert out["items"], "something relevant fits even in 200 tokens"
    kinds = [i["kind"] for i in out["items"]]
    assert kinds == sorted(kinds, key=lambda k: k != "skill"), "skills come first"
    for item in out["items"]:
        label = f"[{item['kind']}:{item['id']}]"
        assert label in out["text"] and item["tokens"] > 0
        assert item["detail"] in (("full", "l1", "l0") if item["kind"] == "skill" else ("l1", "l0"))
    if budget >= 1500:
        skill = next(i for i in out["items"] if i["kind"] == "skill")
        assert skill["id"] == "pandas-missing-in-docker-images" and skill["detail"] == "full"
        assert "When to use:" in out["text"] and "Steps:" in out["text"] and "1. " in out["text"]
        assert any(i["kind"] == "memory" and i["detail"] == "l1" for i in out["items"])


def test_a_smaller_budget_degrades_gracefully(stocked):
    sizes = {b: stocked.context_bundle(TASK, token_budget=b) for b in (200, 500, 1500, 8000)}
    counts = [len(sizes[b]["items"]) for b in sorted(sizes)]
    assert counts == sorted(counts) and counts[0] < counts[-1], counts
    small = sizes[200]["items"]
    assert any(i["detail"] in ("l0", "l1") for i in small) or len(small) < len(sizes[8000]["items"])
    full_memories = [i for i in sizes[8000]["items"] if i["kind"] == "memory"]
    assert all(i["detail"] == "l1" for i in full_memories)


def test_a_tiny_budget_still_gives_a_valid_block(stocked):
    out = stocked.context_bundle(TASK, token_budget=50)
    assert 0 < out["tokens"] <= 50 and out["text"].startswith("# Context from Ultron")


def test_an_empty_store_gives_a_small_valid_block(client):
    out = client.context_bundle("deploy the api to kubernetes", token_budget=1500)
    assert out["items"] == [] and out["tokens"] == count_tokens(out["text"]) < 100
    assert "deploy the api to kubernetes" in out["text"] and "No stored skill or memory" in out["text"]


def test_agent_scope_and_arguments(stocked):
    other = stocked.context_bundle(TASK, token_budget=1500, agent_id="someone-else")
    assert [i for i in other["items"] if i["kind"] == "memory"] == []
    mine = stocked.context_bundle(TASK, token_budget=4000, agent_id="builder")
    ids = {i["id"] for i in mine["items"] if i["kind"] == "memory"}
    assert ids and all(stocked.get_memory(i)["agent_id"] == "builder" for i in ids)
    for bad in (49, 100_001, 1500.0, True, "1500"):
        with pytest.raises(ValueError, match="token_budget"):
            stocked.context_bundle(TASK, token_budget=bad)
    with pytest.raises(ValueError, match="task"):
        stocked.context_bundle("  ", token_budget=500)
    with pytest.raises(ValueError, match="agent id"):
        stocked.context_bundle(TASK, agent_id="not valid")


def test_a_bundle_for_a_repository_leads_with_what_was_learned_there(client, tmp_path):
    """A session starting in a checkout has no task words yet: the memories learned in that
    repository come first, marked as such, and one whose file changed since goes last."""
    import subprocess

    from ultron.memory.files import bytes_hash
    from ultron.memory.repos import LocatedFile, repo_at

    repo = tmp_path / "billing"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "remote", "add", "origin", "git@example.com:acme/billing.git"], check=True)
    (repo / "tax.py").write_text("RATE = 0.2\n")
    (repo / "old.py").write_text("x = 1\n")
    remote = repo_at(repo).remote
    here = client.upload_memory("Tax rates live in tax.py and need a migration when changed",
                                "changing VAT in the billing service", "Edit RATE in tax.py, then run make migrate")
    moved = client.upload_memory("old.py holds the legacy invoice numbering", "invoice numbers jump",
                                 "Reset the sequence in old.py")
    elsewhere = client.upload_memory("Use ruff instead of flake8 for linting", "linting python", "ruff check .")
    with client.db.engine.begin() as conn:
        client.memory.record_files(conn, here.id, [LocatedFile(remote, "tax.py", bytes_hash(b"RATE = 0.2\n"), True)])
        client.memory.record_files(conn, moved.id, [LocatedFile(remote, "old.py", bytes_hash(b"x = 1\n"), True)])
    (repo / "old.py").write_text("x = 2\n")  # changed since the session

    bundle = client.context_bundle("Working in the billing project (Python)", token_budget=1500, repo_root=str(repo))
    ids = [i["id"] for i in bundle["items"] if i["kind"] == "memory"]
    assert ids[0] == here.id
    first = bundle["text"].split("## Memories\n", 1)[1].splitlines()[0]
    assert first.startswith(f"- [memory:{here.id}]") and "(learned in this repository)" in first
    assert moved.id in ids and ids.index(moved.id) == len(ids) - 1
    assert "possibly stale: old.py changed" in bundle["text"]
    assert elsewhere.id not in ids[:1]
