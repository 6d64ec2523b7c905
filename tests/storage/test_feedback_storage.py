"""Agents' feedback on the real database: how a verdict moves a memory's rank, hits and tier,
a skill's reliability and lifecycle, and what forget removes of it."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from tests.storage.test_skill_storage import KUBE, PANDAS, PANDAS_MORE, hub, join, make_cluster  # noqa: F401

SSL = ("pip install fails with an SSL certificate error behind the corporate proxy",
       "corporate network with a TLS-inspecting proxy", "set REQUESTS_CA_BUNDLE to the proxy CA bundle")
CERT = ("npm install fails with an SSL certificate error behind the corporate proxy",
        "node project on the office network", "set NODE_EXTRA_CA_CERTS to the proxy CA bundle")
QUERY = "install fails with an SSL certificate error behind the corporate proxy"


def rows(client, sql, **p):
    with client.db.engine.connect() as conn:
        return conn.execute(sa.text(sql), p).all()


def one(client, sql, **p):
    with client.db.engine.connect() as conn:
        return conn.execute(sa.text(sql), p).one()


def execute(client, sql, **p):
    with client.db.engine.begin() as conn:
        conn.execute(sa.text(sql), p)


def ranked(client, query=QUERY):
    return [(r.record.id, r.score) for r in client.search_memories(query, limit=10)]


# -- memories ------------------------------------------------------------------------------------


def test_not_helpful_ranks_a_memory_below_an_otherwise_equal_one(client):
    a = client.upload_memory(*SSL).id
    b = client.upload_memory(*CERT).id
    assert a != b
    before = dict(ranked(client))
    top, other = sorted((a, b), key=lambda i: -before[i])
    out = client.feedback(memory_id=top, helpful=False, note="wrong package manager", agent_id="critic")
    assert out == {**out, "target_kind": "memory", "target_id": top, "helpful": False, "helpful_count": 0,
                   "unhelpful_count": 1, "tier": "WARM", "status": "active"}
    after = ranked(client)
    assert [i for i, _ in after][:2] == [other, top], "one 'not helpful' puts it below its equal"
    # the documented factor: min(1, 2 * (h + 1) / (h + u + 2)) = 2/3 after one negative (the
    # tolerance covers the two memories trading places on full-text ties)
    assert dict(after)[top] / before[top] == pytest.approx(2 / 3, rel=2e-2)
    assert dict(after)[other] == pytest.approx(before[other], rel=2e-2)
    event = one(client, "SELECT target_kind, target_id, helpful, note, agent_id FROM feedback_events")
    assert tuple(event) == ("memory", top, False, "wrong package manager", "critic")
    # helpful votes that catch up bring the factor back to 1, never above
    client.feedback(memory_id=top, helpful=True)
    assert dict(ranked(client))[top] == pytest.approx(before[top], rel=1e-2)


def test_helpful_adds_hits_and_recency(client):
    memory_id = client.upload_memory(*SSL, agent_id="writer").id
    execute(client, "UPDATE memory_records SET last_hit_at = now() - interval '40 days', hit_count = 1")
    out = client.feedback(memory_id=memory_id, helpful=True, note="worked first time")
    assert out["helpful_count"] == 1 and out["unhelpful_count"] == 0 and out["hit_count"] == 4
    row = one(client, "SELECT hit_count, helpful_count, now() - last_hit_at < interval '1 minute' AS fresh, "
                      "agent_id FROM memory_records")
    assert row.hit_count == 4 and row.helpful_count == 1 and row.fresh and row.agent_id == "writer"
    memory = client.get_memory(memory_id)
    assert memory["helpful_count"] == 1 and memory["agent_id"] == "writer" and memory["hit_count"] == 4
    assert client.get_memory("no-such-id") is None


def test_repeated_negatives_demote_to_cold_and_the_ttl_archives_it(client):
    bad = client.upload_memory(*SSL).id
    others = [client.upload_memory(c, x, r).id for c, x, r in PANDAS[:4]]
    for _ in range(5):  # the most used memory of all: the rebalance would make it HOT
        client.get_memory_details([bad])
    assert client.run_tier_rebalance()["HOT"] >= 1
    assert client.get_memory(bad)["tier"] == "HOT"
    for n in (1, 2):
        assert client.feedback(memory_id=bad, helpful=False)["tier"] == "HOT", f"{n} negatives do not demote"
    third = client.feedback(memory_id=bad, helpful=False)
    assert third["tier"] == "COLD" and third["unhelpful_count"] == 3
    tiers = client.run_tier_rebalance()
    assert client.get_memory(bad)["tier"] == "COLD", "the rebalance must not promote it back"
    assert tiers["HOT"] == 1 and [client.get_memory(i)["tier"] for i in others].count("HOT") == 1, \
        "another memory takes its place"
    # Searches keep touching it, but a demoted memory's TTL counts from its last feedback.
    execute(client, "UPDATE memory_records SET last_hit_at = now() - interval '40 days', "
                    "created_at = now() - interval '40 days' WHERE id = :id", id=bad)
    client.run_tier_rebalance()
    assert client.get_memory(bad)["status"] == "active", "feedback 0 days ago: not yet"
    execute(client, "UPDATE feedback_events SET created_at = now() - interval '31 days'")
    client.search_memories(QUERY)  # a fresh hit does not keep a demoted memory alive
    assert client.get_memory(bad)["hit_count"] > 6
    client.run_tier_rebalance()
    assert client.get_memory(bad)["status"] == "archived"
    assert bad not in [r.record.id for r in client.search_memories(QUERY)]


def test_feedback_arguments_are_checked(client):
    memory_id = client.upload_memory(*SSL).id
    for kwargs in ({}, {"memory_id": memory_id, "skill": "x"}):
        with pytest.raises(ValueError, match="exactly one"):
            client.feedback(helpful=True, **kwargs)
    with pytest.raises(ValueError, match="true or false"):
        client.feedback(memory_id=memory_id, helpful="yes")
    with pytest.raises(ValueError, match="agent id"):
        client.feedback(memory_id=memory_id, helpful=True, agent_id="bad agent")
    with pytest.raises(ValueError, match="note"):
        client.feedback(memory_id=memory_id, helpful=True, note="x" * 2001)
    with pytest.raises(KeyError):
        client.feedback(memory_id="no-such-id", helpful=True)
    with pytest.raises(KeyError):
        client.feedback(skill="no-such-skill", helpful=True)
    assert rows(client, "SELECT * FROM feedback_events") == []


def test_feedback_notes_are_redacted(client):
    memory_id = client.upload_memory(*SSL).id
    client.feedback(memory_id=memory_id, helpful=False, note="did not work, mail me at jane.doe@example.com")
    note = one(client, "SELECT note FROM feedback_events").note
    assert "jane.doe@example.com" not in note and note.startswith("did not work")


def test_forget_removes_the_feedback_of_forgotten_memories_and_agents(client):
    gone = client.upload_memory(*SSL).id
    kept = client.upload_memory(*CERT).id
    client.feedback(memory_id=gone, helpful=False, agent_id="critic")
    client.feedback(memory_id=kept, helpful=False, agent_id="critic")
    client.feedback(memory_id=kept, helpful=True, agent_id="fan")
    report = client.forget(memory_ids=[gone])
    assert report["tables"]["feedback_events"] == {"deleted": 1, "updated": 0}
    assert rows(client, "SELECT target_id FROM feedback_events WHERE target_id = :g", g=gone) == []
    report = client.forget(agent_id="critic")
    assert report["tables"]["feedback_events"]["deleted"] == 1
    assert [tuple(r) for r in rows(client, "SELECT agent_id, helpful FROM feedback_events")] == [("fan", True)]
    memory = client.get_memory(kept)
    assert (memory["helpful_count"], memory["unhelpful_count"]) == (1, 0), "the critic's vote left the counters"


# -- skills ---------------------------------------------------------------------------------------


def publish(client, hub, memories, topic):
    make_cluster(client, memories, topic)
    [published] = hub.run_skill_evolution().published
    return published["slug"]


def test_helpful_feedback_makes_a_skill_active(client, hub):
    slug = publish(client, hub, KUBE, "kubernetes pod crashloop")
    assert client.get_skill(slug)["lifecycle"] == "probationary"
    outs = [client.feedback(skill=slug, helpful=True, agent_id="claude") for _ in range(3)]
    assert [o["lifecycle"] for o in outs] == ["probationary", "probationary", "active"]
    assert outs[-1]["reliability"] == pytest.approx(4 / 5) and outs[-1]["helpful_count"] == 3
    skill = client.get_skill(slug)
    assert skill["lifecycle"] == "active" and skill["reliability"] == pytest.approx(0.8)
    assert [s["slug"] for s in client.list_skills()] == [slug]
    assert client.skills.stats()["active"] == 1


def test_an_unreliable_skill_is_retired_hidden_and_stays_retired_in_new_versions(client, hub):
    slug = publish(client, hub, PANDAS, "pandas missing in docker images")
    kube = publish(client, hub, KUBE, "kubernetes pod crashloop")
    query = "pandas module missing in the docker image"
    assert slug in [s["slug"] for s in client.search_skills(query, limit=5)]
    client.feedback(skill=slug, helpful=True)
    outs = [client.feedback(skill=slug, helpful=False, note="steps were wrong") for _ in range(4)]
    # reliability (h + 1) / (h + u + 2): 2/4, 2/5, 2/6 stay above 0.3; 2/7 retires it
    assert [o["lifecycle"] for o in outs] == ["probationary", "probationary", "probationary", "retired"]
    assert outs[-1]["reliability"] == pytest.approx(2 / 7, abs=1e-4)
    assert client.get_skill(slug) is None and client.skills.get_skill(slug, "1.0.0") is None
    assert slug not in [s["slug"] for s in client.search_skills(query, limit=5)]
    assert [s["slug"] for s in client.list_skills()] == [kube]
    from ultron.db import skills as skill_store

    with client.db.engine.connect() as conn:
        assert skill_store.retired_slugs(conn) == {slug}
    assert client.skills.stats()["retired"] == 1 and client.skills.count_skills() == 1
    with pytest.raises(KeyError, match="retired"):
        client.feedback(skill=slug, helpful=True)
    # the cluster grows and its skill is re-synthesised: the new version is retired too
    cluster = one(client, "SELECT cluster_id FROM skills WHERE slug = :s", s=slug).cluster_id
    join(client, cluster, [client.upload_memory(c, x, r, ["docker"]).id for c, x, r in PANDAS_MORE])
    [again] = hub.run_skill_evolution().published
    assert again["slug"] == slug and again["version"] == "1.1.0"
    row = one(client, "SELECT lifecycle, helpful_count, unhelpful_count FROM skills WHERE slug = :s "
                      "AND status = 'current'", s=slug)
    assert tuple(row) == ("retired", 1, 4)
    assert client.get_skill(slug) is None and slug not in [s["slug"] for s in client.search_skills(query)]


def test_list_skills_pages(client, hub):
    slugs = sorted([publish(client, hub, KUBE, "kubernetes pod crashloop"),
                    publish(client, hub, PANDAS, "pandas missing in docker images")])
    assert [s["slug"] for s in client.list_skills(limit=1)] == slugs[:1]
    assert [s["slug"] for s in client.list_skills(limit=1, offset=1)] == slugs[1:]
    assert client.list_skills(limit=5, offset=2) == []
    with pytest.raises(ValueError):
        client.list_skills(limit=0)
