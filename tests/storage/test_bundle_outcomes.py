"""Outcomes that teach the store, on the real database: bundles served with an agent's
session id are recorded; when that session is ingested and scored, its outcome moves the
utility of every memory and skill it was given, once; explicit feedback weighs more; search
ranks by it, modestly; forget takes it back."""

from __future__ import annotations

import json
import uuid

import pytest
import sqlalchemy as sa

from tests.storage.test_context_bundle import TASK, stocked  # noqa: F401
from tests.storage.test_skill_storage import KUBE, PANDAS, PANDAS_MORE, hub, make_cluster  # noqa: F401
from ultron.db import outcomes
from ultron.trajectory.outcome import session_outcome

SSL = ("pip install fails with an SSL certificate error behind the corporate proxy",
       "corporate network with a TLS-inspecting proxy", "set REQUESTS_CA_BUNDLE to the proxy CA bundle")
CERT = ("npm install fails with an SSL certificate error behind the corporate proxy",
        "node project on the office network", "set NODE_EXTRA_CA_CERTS to the proxy CA bundle")
QUERY = "install fails with an SSL certificate error behind the corporate proxy"


def attribute(client, session_id, outcome, weight=0.5):
    with client.db.engine.begin() as conn:
        return outcomes.attribute(conn, session_id, outcome, weight)


def utility_of(client, memory_id):
    return client.get_memory(memory_id)["utility"]


def claude_code_transcript(path, session_id, last_user_turn):
    """A Claude Code transcript (``sessionId`` on every line) of one docker fix, ending with
    the user's verdict."""
    turns = [
        ("user", "The report container fails with ModuleNotFoundError: No module named pandas. Fix the docker image."),
        ("assistant", "I will add pandas to requirements.txt and rebuild the image with docker build."),
        ("user", last_user_turn),
        ("assistant", "Understood."),
    ]
    lines = []
    for n, (kind, text) in enumerate(turns):
        message = {"role": kind, "content": text}
        if kind == "assistant":
            message = {"id": f"msg_{n}", "role": "assistant", "model": "claude-test",
                       "content": [{"type": "text", "text": text}]}
        lines.append({"type": kind, "message": message, "uuid": str(uuid.uuid4()), "isSidechain": False,
                      "sessionId": session_id, "cwd": "/workspace/project",
                      "timestamp": f"2026-11-28T10:00:0{n}.000Z"})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def score_sessions(client):
    assert all(r.status == "segmented" for r in client.segment_pending_sessions(100))
    return client.label_pending_segments(100)


# -- the posterior -----------------------------------------------------------------------------


def test_outcomes_update_the_posterior_once(client):
    a = client.upload_memory(*SSL).id
    b = client.upload_memory(*CERT).id
    assert utility_of(client, a) == 0.5  # the Beta(1, 1) prior
    session = str(uuid.uuid4())
    assert client.record_serve(session, "agent-1", [("memory", a), ("memory", b)]) == 2

    counted = attribute(client, session, "not_helped")
    assert counted == {"serves": 2, "memories": 2, "skills": 0}
    for memory_id in (a, b):
        memory = client.get_memory(memory_id)
        assert (memory["outcome_helped"], memory["outcome_unhelped"]) == (0.0, 0.5)
        assert memory["utility"] == pytest.approx(1 / 2.5, abs=1e-4)
    # re-running (a second labeller, a re-run of maintenance) counts nothing again
    assert attribute(client, session, "not_helped") == {"serves": 0, "memories": 0, "skills": 0}
    assert attribute(client, session, "helped") == {"serves": 0, "memories": 0, "skills": 0}
    assert client.get_memory(a)["outcome_unhelped"] == 0.5
    # a later bundle of the same session is counted when the session is scored again
    client.record_serve(session, "agent-1", [("memory", a)])
    assert attribute(client, session, "helped")["serves"] == 1
    assert (client.get_memory(a)["outcome_helped"], client.get_memory(b)["outcome_helped"]) == (0.5, 0.0)
    # a neutral outcome marks its serves and moves nothing
    client.record_serve(session, None, [("memory", b)])
    assert attribute(client, session, "neutral") == {"serves": 1, "memories": 0, "skills": 0}
    assert client.get_memory(b)["utility"] == pytest.approx(1 / 2.5, abs=1e-4)
    with client.db.engine.connect() as conn:
        rows = outcomes.serves_of(conn, session)
    assert [(r["item_id"], r["outcome"], r["weight"]) for r in rows] == [
        (a, "not_helped", 0.5), (b, "not_helped", 0.5), (a, "helped", 0.5), (b, "neutral", 0.0)]
    with pytest.raises(ValueError, match="session_id"):
        client.record_serve("", None, [("memory", a)])


def test_explicit_feedback_weighs_more_than_an_outcome(client):
    a = client.upload_memory(*SSL).id
    b = client.upload_memory(*CERT).id
    client.record_serve("s-helped", None, [("memory", a)])
    attribute(client, "s-helped", "helped")
    out = client.feedback(memory_id=b, helpful=True)
    assert 0.5 < utility_of(client, a) < out["utility"] == utility_of(client, b)
    # one verdict against outweighs one outcome for
    client.feedback(memory_id=a, helpful=False)
    assert utility_of(client, a) < 0.5
    assert outcomes.utility(0, 1, 0.5, 0) == pytest.approx(1.5 / 4.5)


def test_session_outcome_rule():
    def seg(score, cues=None):
        entry = {"value": cues, "score": None if cues is None else 0.5}
        return {"summary": {"overall_score": score}, "metrics": {"outcome_cues": entry}}

    assert session_outcome([seg(0.9), seg(0.9, -2)], 0.7).reason == "explicit_failure"
    assert session_outcome([seg(0.3, 2), seg(0.5)], 0.7).to_dict() == {
        "outcome": "helped", "reason": "confirmed_fix", "mean_score": 0.4}
    assert session_outcome([json.dumps(seg(0.8)), seg(0.7)], 0.7).reason == "high_score"
    assert session_outcome([seg(0.2)], 0.7).outcome == "not_helped"
    assert session_outcome([seg(0.55)], 0.7).outcome == "neutral"
    assert session_outcome([None], 0.7).reason == "no_segments"


# -- ranking -----------------------------------------------------------------------------------


def test_failed_sessions_rank_a_memory_below_its_equal_within_the_bound(client):
    a = client.upload_memory(*SSL).id
    b = client.upload_memory(*CERT).id
    before = {r.record.id: r.score for r in client.search_memories(QUERY)}
    top, other = sorted((a, b), key=lambda i: -before[i])
    for n in range(6):
        client.record_serve(f"failed-{n}", None, [("memory", top)])
        attribute(client, f"failed-{n}", "not_helped")
    after = {r.record.id: r.score for r in client.search_memories(QUERY)}
    assert after[top] < after[other]
    factor = after[top] / before[top]
    # 2u = 2 * 1/5 = 0.4 after three units of failure (w = 1): relevance times how likely it helps
    assert factor == pytest.approx(0.4, rel=2e-2) and factor > 0
    assert after[other] == pytest.approx(before[other], rel=2e-2)


# -- end to end ----------------------------------------------------------------------------------


def test_a_served_session_ingested_with_a_failure_lowers_what_it_was_given(stocked, tmp_path):
    client = stocked
    session = str(uuid.uuid4())
    bundle = client.context_bundle(TASK, token_budget=1500, agent_id="builder", session_id=session)
    served = [(i["kind"], i["id"]) for i in bundle["items"]]
    memories = [i for k, i in served if k == "memory"]
    skills = [i for k, i in served if k == "skill"]
    assert memories and skills
    with client.db.engine.connect() as conn:
        rows = outcomes.serves_of(conn, session)
    assert [(r["item_kind"], r["item_id"], r["agent_id"], r["attributed_at"]) for r in rows] == [
        (k, i, "builder", None) for k, i in served]

    # The transcript's own sessionId names the session, whatever the file is called.
    path = claude_code_transcript(tmp_path / "claude" / "transcript.jsonl", session,
                                  "It still doesn't work, same ModuleNotFoundError. I give up.")
    report = client.ingest([path], agent_id="claude")
    assert report.totals["new"] == 1
    with client.db.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT agent_session_id FROM trajectory_records")).scalar_one() == session
    labels = score_sessions(client)
    [done] = [lb.attribution for lb in labels if lb.attribution]
    assert done["session_id"] == session and done["outcome"] == "not_helped" and done["reason"] == "explicit_failure"
    assert done["serves"] == len(served) and done["memories"] == len(memories) and done["skills"] == len(skills)

    for memory_id in memories:
        memory = client.get_memory(memory_id)
        assert memory["outcome_unhelped"] == 0.5 and memory["utility"] < 0.5
    listed = {s["slug"]: s for s in client.list_skills()}
    for slug in skills:
        assert listed[slug]["outcome_unhelped"] == 0.5 and listed[slug]["utility"] < 0.5
    # maintenance re-running over the scored session counts nothing twice
    client.run_maintenance()
    assert all(client.get_memory(m)["outcome_unhelped"] == 0.5 for m in memories)

    # A session that ends with the fix confirmed raises the utility of what it was given;
    # this one is a Codex-style file name, its id found in the name.
    success = str(uuid.uuid4())
    client.context_bundle(TASK, token_budget=1500, agent_id="builder", session_id=success)
    path = claude_code_transcript(tmp_path / "codex" / f"rollout-2026-11-28T10-00-00-{success}.jsonl", "",
                                  "That works now, the report runs. Thanks!")
    client.ingest([path], agent_id="codex")
    [done] = [lb.attribution for lb in score_sessions(client) if lb.attribution]
    assert done["session_id"] == success and done["outcome"] == "helped" and done["reason"] == "confirmed_fix"
    for memory_id in memories:
        memory = client.get_memory(memory_id)
        assert memory["outcome_helped"] == 0.5 and memory["utility"] == pytest.approx(0.5)

    # Forget: the failed session's outcome leaves the sums; a forgotten memory's serves go.
    report = client.forget(session_file=str(tmp_path / "claude" / "transcript.jsonl"))
    assert report["tables"]["bundle_serves"]["deleted"] == len(served)
    assert all(client.get_memory(m)["outcome_unhelped"] == 0 for m in memories)
    assert all(client.get_memory(m)["utility"] > 0.5 for m in memories)
    client.forget(memory_ids=[memories[0]])
    with client.db.engine.connect() as conn:
        left = conn.execute(sa.text("SELECT count(*) FROM bundle_serves WHERE item_id = :i"),
                            {"i": memories[0]}).scalar_one()
    assert left == 0


def test_the_session_id_of_a_bundle_is_checked(client):
    with pytest.raises(ValueError, match="session_id"):
        client.context_bundle("deploy the api", session_id="  ")
    with pytest.raises(ValueError, match="session_id"):
        client.context_bundle("deploy the api", session_id="x" * 201)
    out = client.context_bundle("deploy the api", session_id="empty-store")
    assert out["items"] == []
