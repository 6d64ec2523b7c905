"""The exported Agent Skills tree from real skills in the store: every directory passes the
spec check, only current non-retired versions are there, skills that went (superseded under
another name, retired by feedback, forgotten) leave it, a user's own skills beside them are
never touched, a repeated export writes nothing, and ULTRON_SKILLS_EXPORT_DIR keeps the
directory in sync after skill evolution and forget."""

import dataclasses
import json

import pytest
import sqlalchemy as sa

from tests.storage.test_skill_storage import KUBE, PANDAS, PANDAS_MORE, hub, join, make_cluster  # noqa: F401
from ultron.sdk import Ultron
from ultron.skills.export import MANIFEST, MAX_BODY_LINES, split_front, validate_skill_dir, validate_tree

PANDAS_SLUG = "pandas-missing-in-docker-images"
KUBE_SLUG = "kubernetes-pod-crashloop"


def tree(root):
    """{name: SKILL.md text} of the skill directories in ``root`` (hidden entries aside)."""
    return {p.name: (p / "SKILL.md").read_text() for p in sorted(root.iterdir())
            if p.is_dir() and not p.name.startswith(".")}


@pytest.fixture
def synced(client, tmp_path):
    """A client whose settings set ULTRON_SKILLS_EXPORT_DIR (same database)."""
    out = tmp_path / "agent-skills"
    return Ultron(dataclasses.replace(client.settings, skills_export_dir=out), db=client.db), out


def test_exported_tree_passes_the_spec_check(client, hub, tmp_path):
    make_cluster(client, PANDAS, "pandas missing in docker images")
    make_cluster(client, KUBE, "kubernetes pod crashloop")
    assert len(hub.run_skill_evolution().published) == 2
    out = tmp_path / "skills"
    report = client.export_skills(out)
    assert sorted(report["written"]) == [KUBE_SLUG, PANDAS_SLUG] and report["removed"] == []
    assert validate_tree(out) == {}
    for name, text in tree(out).items():
        assert validate_skill_dir(out / name) == []
        front, body, problems = split_front(text)
        assert problems == [] and set(front) == {"name", "description", "metadata"} and front["name"] == name
        assert "Use when:" in front["description"] and len(front["description"]) <= 1024
        meta = front["metadata"]
        assert all(isinstance(v, str) for v in meta.values())
        stored = hub.get_skill(name)
        assert meta["version"] == stored["version"] == "1.0.0" and meta["ultron-id"] == stored["id"]
        assert meta["cluster-id"] == stored["cluster_id"] and meta["lifecycle"] == "probationary"
        assert "## Steps" in body and "## Evidence" in body and len(body.splitlines()) <= MAX_BODY_LINES
        # Only SKILL.md: Ultron's _meta.json (gate scores, history) stays in ULTRON_HOME.
        assert sorted(p.name for p in (out / name).iterdir()) == ["SKILL.md"]
    manifest = json.loads((out / MANIFEST).read_text())
    assert set(manifest["skills"]) == {KUBE_SLUG, PANDAS_SLUG}


def test_a_new_version_replaces_the_old_and_a_merged_skill_leaves(client, hub, tmp_path):
    a, _ = make_cluster(client, PANDAS, "pandas missing in docker images")
    b, ids_b = make_cluster(client, PANDAS_MORE + [KUBE[0], KUBE[1]], "pandas in data containers")
    hub.run_skill_evolution()
    out = tmp_path / "skills"
    assert sorted(client.export_skills(out)["written"]) == ["pandas-in-data-containers", PANDAS_SLUG]
    # Clustering merged B into A; A is re-crystallised as 1.1.0 and supersedes B's skill.
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("UPDATE knowledge_clusters SET status = 'dissolved', centroid = NULL WHERE id = :b"),
                     {"b": b})
        conn.execute(sa.text("UPDATE knowledge_clusters SET superseded_slugs = ARRAY['pandas-in-data-containers'] "
                             "WHERE id = :a"), {"a": a})
    join(client, a, ids_b[:3])
    assert hub.run_skill_evolution().published[0]["version"] == "1.1.0"
    report = client.export_skills(out)
    assert report["written"] == [PANDAS_SLUG] and report["removed"] == ["pandas-in-data-containers"]
    assert list(tree(out)) == [PANDAS_SLUG]
    front, _, _ = split_front(tree(out)[PANDAS_SLUG])
    assert front["metadata"]["version"] == "1.1.0"
    # Superseded versions are nowhere in the tree; ULTRON_HOME/skills keeps them as history.
    assert not any("1.0.0" in p.name for p in out.iterdir())
    assert (client.settings.skills_dir / f"{PANDAS_SLUG}-1.0.0" / "SKILL.md").is_file()
    assert validate_tree(out) == {}


def test_foreign_skills_are_never_touched_and_reexport_is_idempotent(client, hub, tmp_path):
    make_cluster(client, PANDAS, "pandas missing in docker images")
    make_cluster(client, KUBE, "kubernetes pod crashloop")
    hub.run_skill_evolution()
    out = tmp_path / "claude-skills"
    mine = out / "my-own-skill"
    mine.mkdir(parents=True)
    (mine / "SKILL.md").write_text("---\nname: my-own-skill\ndescription: mine\n---\n\nHands off.\n")
    (mine / "notes.txt").write_text("keep")
    # A user's skill that happens to have a skill's name is not overwritten either.
    clash = out / KUBE_SLUG
    clash.mkdir()
    (clash / "SKILL.md").write_text("---\nname: kubernetes-pod-crashloop\ndescription: my own\n---\n\nMine.\n")
    (out / "README.txt").write_text("a loose file")

    first = client.export_skills(out)
    assert first["written"] == [PANDAS_SLUG] and first["skipped"][0]["name"] == KUBE_SLUG
    assert (clash / "SKILL.md").read_text().endswith("Mine.\n")
    stamp = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    again = client.export_skills(out)
    assert again["written"] == [] and again["removed"] == [] and again["unchanged"] == [PANDAS_SLUG]
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*")} == stamp, "a repeated export changed files"

    # Everything exported goes (the store is emptied): the user's directories and files stay.
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("TRUNCATE skills CASCADE"))
    gone = client.export_skills(out)
    assert gone["removed"] == [PANDAS_SLUG] and not (out / PANDAS_SLUG).exists()
    assert (mine / "notes.txt").read_text() == "keep" and (out / "README.txt").is_file() and clash.is_dir()
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == sorted([
        KUBE_SLUG, "README.txt", "my-own-skill"])
    assert not any(p.name.startswith(".ultron-tmp-") or p.name.startswith(".ultron-old-") for p in out.iterdir())


def test_a_replaced_export_directory_counts_as_the_users(client, hub, tmp_path):
    make_cluster(client, PANDAS, "pandas missing in docker images")
    hub.run_skill_evolution()
    out = tmp_path / "skills"
    client.export_skills(out)
    (out / PANDAS_SLUG / "SKILL.md").write_text("---\nname: pandas-missing-in-docker-images\n"
                                                "description: rewritten by hand\n---\n\nMine now.\n")
    report = client.export_skills(out)
    assert report["written"] == [] and report["skipped"][0]["name"] == PANDAS_SLUG
    assert (out / PANDAS_SLUG / "SKILL.md").read_text().endswith("Mine now.\n")


def test_sync_follows_evolution_retirement_and_forget(client, hub, synced):
    agent, out = synced
    make_cluster(client, PANDAS, "pandas missing in docker images")
    _, kube_ids = make_cluster(client, KUBE, "kubernetes pod crashloop")
    report = agent.run_skill_evolution()
    assert sorted(report["exported"]["written"]) == [KUBE_SLUG, PANDAS_SLUG]
    assert sorted(tree(out)) == [KUBE_SLUG, PANDAS_SLUG] and validate_tree(out) == {}

    # Retired by feedback: not exported (the lifecycle is read in SQL; the next sync removes it).
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("UPDATE skills SET lifecycle = 'retired' WHERE slug = :s"), {"s": PANDAS_SLUG})
    assert agent.run_skill_evolution()["exported"]["removed"] == [PANDAS_SLUG]
    assert sorted(tree(out)) == [KUBE_SLUG]

    # Forgotten: the skill's memories go, so does its directory, in the same call.
    forgot = agent.forget(memory_ids=kube_ids)
    assert forgot["skills_export"]["removed"] == [KUBE_SLUG]
    assert tree(out) == {}


def test_a_connected_agents_skills_directory_follows_every_skill_run(client, hub, tmp_path):
    """`ultron connect` records the agent's skills directory; skill runs then keep it in sync
    beside (or without) ULTRON_SKILLS_EXPORT_DIR, and disconnect stops it."""
    from ultron.integrations.connect import connect, disconnect

    home, ultron_home = tmp_path / "home", tmp_path / "ultron"
    home.mkdir()
    connect("claude-code", "user", home=home, project=tmp_path, ultron_home=ultron_home, exe=["/x/ultron"])
    connected = Ultron(dataclasses.replace(client.settings, home=ultron_home, skills_export_dir=None), db=client.db)
    make_cluster(connected, PANDAS, "pandas missing in docker images")
    assert len(connected.skills.run_skill_evolution().published) == 1
    assert list(tree(home / ".claude" / "skills")) == [PANDAS_SLUG]
    disconnect("claude-code", "user", home=home, project=tmp_path, ultron_home=ultron_home)
    make_cluster(connected, KUBE, "kubernetes pod crashloop")
    connected.skills.run_skill_evolution()
    assert list(tree(home / ".claude" / "skills")) == [PANDAS_SLUG]  # no longer followed


def test_the_agents_skills_directory_holds_only_skills_and_one_hidden_manifest(client, hub, tmp_path):
    """No lock file or other bookkeeping left among the agent's skills (an earlier version's
    lock file is cleared too)."""
    make_cluster(client, PANDAS, "pandas missing in docker images")
    hub.run_skill_evolution()
    out = tmp_path / "skills"
    out.mkdir()
    (out / ".ultron-export.lock").write_text("")  # what an earlier version left
    client.export_skills(out)
    client.export_skills(out)
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST, PANDAS_SLUG]
