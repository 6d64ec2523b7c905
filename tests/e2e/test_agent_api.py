"""The agent-facing routes and commands, as a client meets them: feedback, the context
bundle, GET /memories/{id}, paginated lists, HEAD /health and agent_id on upload, over a
live `python -m ultron.api` process; and `ultron upload / context / feedback` in-process."""

from __future__ import annotations

import json
import signal

import httpx
import pytest
import sqlalchemy as sa

from tests.e2e.test_api import TOKEN, post, start_server
from tests.storage.test_skill_storage import KUBE, PANDAS, hub, make_cluster  # noqa: F401
from ultron.cli import main
from ultron.llm.tokens import count_tokens

SSL = {"content": "pip install fails with an SSL certificate error behind the corporate proxy",
       "context": "corporate network", "resolution": "set REQUESTS_CA_BUNDLE to the proxy CA bundle"}
NEW_ROUTES = [("GET", "/memories", None), ("GET", "/memories/x", None),
              ("POST", "/memories/x/feedback", {"helpful": True}), ("POST", "/skills/x/feedback", {"helpful": True}),
              ("GET", "/skills", None), ("POST", "/context", {"task": "x"})]


@pytest.fixture(scope="module")
def server(db, tmp_path_factory):
    live = start_server(tmp_path_factory.mktemp("agent_api_log") / "server.log")
    yield live
    assert live.stop(signal.SIGTERM) == 0, live.output()[-3000:]


@pytest.fixture
def api(server, client):
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as http:
        yield http


@pytest.fixture
def skill(client, hub):
    make_cluster(client, KUBE, "kubernetes pod crashloop")
    [published] = hub.run_skill_evolution().published
    return published["slug"]


# -- auth, health, docs ------------------------------------------------------------------------------


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong-token"}], ids=["none", "wrong"])
def test_every_new_route_needs_the_token(server, headers):
    for method, path, body in NEW_ROUTES:
        r = httpx.request(method, server.url + path, json=body, headers=headers)
        assert r.status_code == 401, (method, path, r.status_code, r.text)


def test_head_health_answers_without_a_body_or_token(server):
    r = httpx.head(server.url + "/health")
    assert r.status_code == 200 and r.content == b""
    assert httpx.get(server.url + "/health").json()["status"] == "ok"


def test_new_routes_are_documented(server):
    spec = httpx.get(server.url + "/openapi.json").json()
    for path, method in [("/memories", "get"), ("/memories/{memory_id}", "get"),
                         ("/memories/{memory_id}/feedback", "post"), ("/skills/{name}/feedback", "post"),
                         ("/skills", "get"), ("/context", "post")]:
        op = spec["paths"][path][method]
        assert op["security"] == [{"bearer": []}] and "401" in op["responses"] and "422" in op["responses"], path
    assert "head" in spec["paths"]["/health"]


# -- memories ----------------------------------------------------------------------------------------


def test_upload_with_agent_id_then_get_list_and_search_by_it(api):
    stored = post(api, "/memories/upload", {**SSL, "agent_id": "claude-code"})
    assert stored.status_code == 200, stored.text
    memory = stored.json()
    assert memory["agent_id"] == "claude-code"
    got = api.get(f"/memories/{memory['id']}")
    assert got.status_code == 200 and got.json()["content"] == SSL["content"]
    assert got.json()["helpful_count"] == 0 and got.json()["hit_count"] == 0, "a read counts no hit"
    missing = api.get("/memories/no-such-id")
    assert missing.status_code == 404 and "no-such-id" in missing.json()["detail"]
    hits = post(api, "/memories/search", {"query": "pip SSL proxy", "agent_id": "claude-code"}).json()
    assert [h["id"] for h in hits["results"]] == [memory["id"]]
    assert post(api, "/memories/search", {"query": "pip SSL proxy", "agent_id": "other"}).json()["count"] == 0
    assert post(api, "/memories/upload", {**SSL, "agent_id": "bad agent"}).status_code == 422

    post(api, "/memories/upload", {"content": "I prefer tabs over spaces in Python code"})
    page = api.get("/memories", params={"limit": 1}).json()
    assert page["total"] == 2 and page["limit"] == 1 and page["offset"] == 0 and len(page["memories"]) == 1
    rest = api.get("/memories", params={"limit": 1, "offset": 1}).json()["memories"]
    assert len(rest) == 1 and rest[0]["id"] == memory["id"] != page["memories"][0]["id"], "newest first"
    mine = api.get("/memories", params={"agent_id": "claude-code"}).json()
    assert mine["total"] == 1 and mine["memories"][0]["id"] == memory["id"]
    for params in ({"limit": 0}, {"limit": 501}, {"offset": -1}, {"tier": "LUKEWARM"}):
        r = api.get("/memories", params=params)
        assert r.status_code == 422, (params, r.text)


def test_memory_feedback_over_http(api):
    memory_id = post(api, "/memories/upload", SSL).json()["id"]
    r = post(api, f"/memories/{memory_id}/feedback", {"helpful": True, "note": "fixed it", "agent_id": "claude"})
    assert r.status_code == 200, r.text
    assert r.json() == {"target_kind": "memory", "target_id": memory_id, "helpful": True, "helpful_count": 1,
                        "unhelpful_count": 0, "hit_count": 3, "tier": "WARM", "status": "active",
                        "utility": 0.75}  # Beta(1, 1) and one verdict of weight 2: 3 / 4
    for _ in range(3):
        last = post(api, f"/memories/{memory_id}/feedback", {"helpful": False}).json()
    assert last["unhelpful_count"] == 3 and last["tier"] == "WARM", "net 2: not yet"
    assert post(api, f"/memories/{memory_id}/feedback", {"helpful": False}).json()["tier"] == "COLD"
    assert api.get(f"/memories/{memory_id}").json()["unhelpful_count"] == 4
    assert post(api, "/memories/nope/feedback", {"helpful": True}).status_code == 404


@pytest.mark.parametrize("body, field", [({}, "helpful"), ({"helpful": "yes"}, "helpful"),
                                         ({"helpful": 1}, "helpful"), ({"helpful": True, "note": "x" * 2001}, "note"),
                                         ({"helpful": True, "agent_id": "a b"}, "agent_id"),
                                         ({"helpful": True, "extra": 1}, "extra")])
def test_bad_feedback_bodies_get_a_located_422(api, body, field):
    memory_id = post(api, "/memories/upload", SSL).json()["id"]
    for path in (f"/memories/{memory_id}/feedback", "/skills/some-skill/feedback"):
        r = post(api, path, body)
        assert r.status_code == 422, (path, r.text)
        assert field in r.json()["detail"]


# -- skills ------------------------------------------------------------------------------------------


def test_skill_list_feedback_and_retirement_over_http(api, skill):
    listed = api.get("/skills").json()
    assert listed["total"] == 1 and listed["limit"] == 50 and listed["offset"] == 0
    assert [s["slug"] for s in listed["skills"]] == [skill] and listed["skills"][0]["lifecycle"] == "probationary"
    assert api.get("/skills", params={"offset": 1}).json()["skills"] == []
    assert api.get("/skills", params={"limit": 0}).status_code == 422
    outs = [post(api, f"/skills/{skill}/feedback", {"helpful": False, "note": "outdated"}).json()
            for _ in range(3)]
    assert [o["lifecycle"] for o in outs] == ["probationary", "probationary", "retired"]
    assert outs[-1]["reliability"] == pytest.approx(0.2) and "tier" not in outs[-1]
    assert api.get(f"/skills/{skill}").status_code == 404
    assert api.get("/skills").json() == {"skills": [], "limit": 50, "offset": 0, "total": 0}
    assert post(api, "/skills/search", {"query": "kubernetes pod CrashLoopBackOff"}).json()["count"] == 0
    gone = post(api, f"/skills/{skill}/feedback", {"helpful": True})
    assert gone.status_code == 404 and "retired" in gone.json()["detail"]
    assert post(api, "/skills/no-such-skill/feedback", {"helpful": True}).status_code == 404


# -- context -----------------------------------------------------------------------------------------


def test_context_bundle_over_http(api, skill):
    for content, context, resolution in PANDAS:
        post(api, "/memories/upload", {"content": content, "context": context, "resolution": resolution})
    for budget in (200, 1500):
        r = post(api, "/context", {"task": "kubernetes pod in CrashLoopBackOff after deploy", "token_budget": budget})
        assert r.status_code == 200, r.text
        out = r.json()
        assert out["tokens"] == count_tokens(out["text"]) <= budget and out["token_budget"] == budget
        assert out["items"][0] == {**out["items"][0], "kind": "skill", "id": skill}
    default = post(api, "/context", {"task": "pandas import error in docker"}).json()
    assert default["token_budget"] == 1500 and any(i["kind"] == "memory" for i in default["items"])
    for body in ({"task": ""}, {"task": "x", "token_budget": 49}, {"task": "x", "token_budget": "big"},
                 {"task": "x", "agent_id": "a b"}, {}):
        r = post(api, "/context", body)
        assert r.status_code == 422, (body, r.text)


def test_a_bundle_served_to_a_session_over_http_is_recorded(api, client, skill):
    post(api, "/memories/upload", {"content": PANDAS[0][0], "context": PANDAS[0][1], "resolution": PANDAS[0][2],
                                   "agent_id": "claude"})
    out = post(api, "/context", {"task": "pandas import error in docker", "session_id": "cc-session-1",
                                 "agent_id": "claude"}).json()
    with client.db.engine.connect() as conn:
        served = conn.execute(sa.text("SELECT item_kind, item_id, agent_id FROM bundle_serves "
                                      "WHERE session_id = 'cc-session-1' ORDER BY id")).all()
    assert [tuple(r) for r in served] == [(i["kind"], i["id"], "claude") for i in out["items"]] and served
    memory_id = next(i["id"] for i in out["items"] if i["kind"] == "memory")
    assert api.get(f"/memories/{memory_id}").json()["utility"] == 0.5
    assert post(api, "/context", {"task": "x", "session_id": ""}).status_code == 422
    assert post(api, "/context", {"task": "x", "session_id": "s" * 201}).status_code == 422


# -- CLI ---------------------------------------------------------------------------------------------


def cli(capsys, *args):
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_upload_context_and_feedback(client, capsys, skill):
    code, out, _ = cli(capsys, "upload", SSL["content"], "--context", SSL["context"], "--resolution",
                       SSL["resolution"], "--tag", "pip", "--agent-id", "cli-agent", "--json")
    assert code == 0
    record = json.loads(out)
    assert record["agent_id"] == "cli-agent" and record["tags"] == ["pip"]

    code, out, err = cli(capsys, "context", "pip SSL error behind the proxy", "--budget", "300")
    assert code == 0 and f"[memory:{record['id']}]" in out and "of 300 tokens" in err
    assert count_tokens(out.rstrip("\n")) <= 300
    code, out, _ = cli(capsys, "context", "pip SSL error behind the proxy", "--budget", "300", "--json")
    assert json.loads(out)["tokens"] <= 300

    code, out, _ = cli(capsys, "feedback", "--memory", record["id"][:8], "--helpful", "--note", "worked")
    assert code == 0 and "helpful recorded (1 helpful, 0 not)" in out and "tier WARM" in out
    code, out, _ = cli(capsys, "feedback", "--skill", skill, "--not-helpful", "--json")
    assert code == 0 and json.loads(out)["lifecycle"] == "probationary"
    with client.db.engine.connect() as conn:
        kinds = conn.execute(sa.text("SELECT target_kind, helpful FROM feedback_events ORDER BY id")).all()
    assert [tuple(k) for k in kinds] == [("memory", True), ("skill", False)]

    code, _, err = cli(capsys, "feedback", "--skill", "no-such-skill", "--helpful")
    assert code == 1 and "no skill named 'no-such-skill'" in err
    code, _, err = cli(capsys, "feedback", "--memory", "abcdef12", "--helpful")
    assert code == 1 and "no memory" in err
    for bad in (["feedback", "--skill", skill], ["feedback", "--helpful"],
                ["feedback", "--skill", skill, "--helpful", "--not-helpful"], ["context", "x", "--budget", "10"]):
        with pytest.raises(SystemExit) as exited:  # argparse: usage and exit code 2
            main(bad)
        assert exited.value.code == 2, bad
    code, _, err = cli(capsys, "upload", "x", "--agent-id", "bad agent")
    assert code == 2 and "invalid agent id" in err
