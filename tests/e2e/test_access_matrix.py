"""Who may do what, door by door: every REST route, every MCP tool and the memory browser's
pages and forms, each with no token, a read, write and admin token, the server's own token,
a revoked and an expired one. The route list comes from the app itself, so a new route
without an access rule fails here."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from ultron.access import PAGE_ACTIONS, ROUTE_ACTIONS, SCOPES, TOOL_ACTIONS
from ultron.api.app import create_app

SERVER_TOKEN = "matrix-server-token-0123456789"
OPEN = {("GET", "/health"), ("HEAD", "/health"), ("GET", "/docs"), ("GET", "/redoc"), ("GET", "/openapi.json"),
        ("HEAD", "/openapi.json"), ("HEAD", "/docs"), ("HEAD", "/redoc")}
#: A body each route accepts far enough to pass authorization (it may then be 404/422: fine).
ANY_ID = "00000000-0000-0000-0000-000000000000"


@pytest.fixture(scope="module")
def setup(db, tmp_path_factory):
    from ultron.sdk import Ultron
    from ultron.settings import Settings

    svc = Ultron(Settings.from_env(home=tmp_path_factory.mktemp("matrix") / "home", llm_provider="rules"), db=db)
    tokens = {scope: svc.tokens.create(f"matrix-{scope}", scope)[0] for scope in SCOPES}
    tokens["revoked"] = svc.tokens.create("matrix-revoked", "admin")[0]
    svc.tokens.revoke("matrix-revoked")
    tokens["expired"], row = svc.tokens.create("matrix-expired", "admin", 1)
    with db.engine.begin() as conn:
        conn.execute(sa.text("UPDATE api_tokens SET expires_at = now() - interval '1 minute' WHERE id = :i"),
                     {"i": row["id"]})
    tokens["server"] = SERVER_TOKEN
    tokens["none"] = None
    app = create_app(svc.settings, client=svc, token=SERVER_TOKEN)
    with TestClient(app, base_url="http://127.0.0.1") as http:
        yield app, http, tokens, svc
    with db.engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM api_tokens WHERE name LIKE 'matrix-%'"))


def expected(who: str, needs: str) -> set[int] | None:
    """The statuses a caller may get: a set of refusals, or None for 'allowed' (anything else)."""
    if who in ("none", "revoked", "expired"):
        return {401}
    scope = "admin" if who == "server" else who
    return None if SCOPES.index(scope) >= SCOPES.index(needs) else {403}


def _flat(routes) -> list:
    """Routes, with those of included routers (FastAPI keeps them behind a wrapper) spelled out."""
    out = []
    for route in routes:
        inner = getattr(route, "original_router", None)
        out += _flat(inner.routes) if inner is not None else [route]
    return out


def api_routes(app) -> list[tuple[str, str]]:
    out = []
    for route in _flat(app.routes):
        for method in sorted(getattr(route, "methods", None) or ()):
            path = route.path
            if (method, path) in OPEN or path.startswith(("/ui", "/docs/", "/mcp")) or not hasattr(route, "endpoint"):
                continue
            out.append((method, path))
    return out


def test_every_api_route_has_an_access_rule(setup):
    app = setup[0]
    missing = [r for r in api_routes(app) if r not in ROUTE_ACTIONS]
    assert not missing, f"routes without a row in ultron.access.ROUTE_ACTIONS: {missing}"
    assert {r for r in api_routes(app)} == set(ROUTE_ACTIONS), "ROUTE_ACTIONS names a route that is gone"


@pytest.mark.parametrize("who", ["none", "read", "write", "admin", "server", "revoked", "expired"])
def test_rest_routes(setup, who):
    app, http, tokens, _ = setup
    wrong = []
    for method, path in api_routes(app):
        url = re.sub(r"\{[^}]+\}", "zz-matrix", path.replace("{memory_id}", ANY_ID))
        headers = {"Authorization": f"Bearer {tokens[who]}"} if tokens[who] else {}
        params = {"session_file": "/nowhere/zz-matrix.jsonl"} if path == "/sessions" else None
        answer = http.request(method, url, headers=headers, params=params, json={} if method == "POST" else None)
        want = expected(who, ROUTE_ACTIONS[(method, path)])
        if (want is None and answer.status_code in (401, 403)) or (want is not None and answer.status_code not in want):
            wrong.append((method, path, answer.status_code, answer.text[:120]))
    assert not wrong, wrong


def mcp_call(http, token, tool: str) -> tuple[int, dict]:
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    args = {"search_memories": {"query": "zz"}, "get_memory_details": {"ids": [ANY_ID]},
            "upload_memory": {"content": "Run the matrix linter before pushing zz-matrix."},
            "search_skills": {"query": "zz"}, "get_skill": {"name": "zz-matrix"},
            "context_bundle": {"task": "zz"}, "feedback": {"memory_id": ANY_ID, "helpful": True}}[tool]
    answer = http.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                                      "params": {"name": tool, "arguments": args}})
    return answer.status_code, (answer.json() if answer.headers.get("content-type", "").startswith(
        "application/json") else {})


@pytest.mark.parametrize("who", ["none", "read", "write", "admin", "server", "revoked", "expired"])
def test_mcp_tools(setup, who):
    _, http, tokens, _ = setup
    wrong = []
    for tool, needs in TOOL_ACTIONS.items():
        status, body = mcp_call(http, tokens[who], tool)
        want = expected(who, needs)
        result = body.get("result") or {}
        refused_by_scope = result.get("isError") and "scope" in str(result.get("content"))
        if want == {401}:
            ok = status == 401
        elif want == {403}:
            ok = status == 200 and refused_by_scope
        else:
            ok = status == 200 and "result" in body and not refused_by_scope
        if not ok:
            wrong.append((tool, status, str(body)[:200]))
    assert not wrong, wrong


@pytest.mark.parametrize("who", ["read", "write", "admin", "server"])
def test_browser_pages_follow_the_same_rules(setup, who):
    _, http, tokens, svc = setup
    memory = svc.memory.upload_memory(f"Pin the matrix runner image tag zzmatrix{who}.").record
    http.cookies.clear()
    signed = http.post("/ui/signin", data={"token": tokens[who], "next": "/ui/memories"}, follow_redirects=False)
    assert signed.status_code == 303, signed.text
    page = http.get(f"/ui/memories/{memory.id}")
    assert page.status_code == 200
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
    may = {action: expected(who, needs) is None for action, needs in PAGE_ACTIONS.items()}
    assert ('id="edit-link"' in page.text) == may["edit"] and ('id="helped"' in page.text) == may["feedback"]
    assert http.get(f"/ui/memories/{memory.id}/edit").status_code == (200 if may["edit"] else 403)
    voted = http.post(f"/ui/memories/{memory.id}/feedback", data={"csrf": csrf, "helpful": "yes"},
                      follow_redirects=False)
    assert voted.status_code == (303 if may["feedback"] else 403)
    gone = http.post(f"/ui/memories/{memory.id}/forget", data={"csrf": csrf}, follow_redirects=False)
    assert gone.status_code == (303 if may["forget"] else 403)


@pytest.mark.parametrize("who", ["none", "revoked", "expired"])
def test_the_browser_refuses_tokens_that_open_nothing(setup, who):
    _, http, tokens, _ = setup
    http.cookies.clear()
    refused = http.post("/ui/signin", data={"token": tokens[who] or "", "next": "/ui/memories"},
                        follow_redirects=False)
    assert refused.status_code == 401 and "set-cookie" not in refused.headers


def test_a_revoked_token_ends_its_browser_session_and_uses_are_recorded(setup):
    _, http, tokens, svc = setup
    token, _ = svc.tokens.create("matrix-shortlived", "read")
    http.cookies.clear()
    assert http.post("/ui/signin", data={"token": token}, follow_redirects=False).status_code == 303
    assert http.get("/ui/memories").status_code == 200
    listed = {t["name"]: t for t in svc.tokens.listing()}
    assert listed["matrix-shortlived"]["last_used_at"] is not None and "token_hash" not in listed["matrix-shortlived"]
    svc.tokens.revoke("matrix-shortlived")
    assert http.get("/ui/memories", follow_redirects=False).status_code == 303   # back to the sign-in form
    with svc.db.engine.connect() as conn:
        stored = conn.execute(sa.text("SELECT token_hash FROM api_tokens WHERE name = 'matrix-shortlived'")).scalar()
    assert stored and token not in stored and len(stored) == 64      # an HMAC, never the token


def test_forget_is_audited_by_token_name_without_text(setup):
    _, http, tokens, svc = setup
    memory = svc.memory.upload_memory("Rotate the zzauditmark signing key every quarter.").record
    answer = http.delete(f"/memories/{memory.id}", headers={"Authorization": f"Bearer {tokens['admin']}"})
    assert answer.status_code == 200
    entries = svc.audit_log(20, action="forget")
    mine = [e for e in entries if memory.id in e["target"]]
    assert mine and mine[0]["actor"] == "matrix-admin"
    assert all("zzauditmark" not in str(e) for e in svc.audit_log(200))


def test_a_browser_edit_is_audited_with_the_fields_not_the_text(setup):
    _, http, tokens, svc = setup
    memory = svc.memory.upload_memory("Cache the matrix wheels between CI jobs.").record
    http.cookies.clear()
    http.post("/ui/signin", data={"token": tokens["admin"]}, follow_redirects=False)
    form = http.get(f"/ui/memories/{memory.id}/edit").text
    csrf = re.search(r'name="csrf" value="([^"]+)"', form).group(1)
    saved = http.post(f"/ui/memories/{memory.id}/edit", data={"csrf": csrf, "content": "Cache zzeditaudit wheels.",
                                                              "tags": "ci"}, follow_redirects=False)
    assert saved.status_code == 303
    [entry] = [e for e in svc.audit_log(20, action="edit") if e["target"] == memory.id]
    assert entry["actor"] == "matrix-admin" and "content" in entry["detail"]["fields"]
    assert "zzeditaudit" not in str(entry)
    assert svc.memory.get_memory(memory.id).content.startswith("Cache zzeditaudit")


# -- another agent's token: every route against an agent-bound admin token of another agent -----------

OWNER, OTHER = "matrix-owner", "matrix-other"


@pytest.fixture(scope="module")
def owned(setup, tmp_path_factory):
    """A private memory of OWNER, a skill built only from it, and an admin token bound to OTHER."""
    import numpy as np

    from ultron.db import skills as skill_store

    _, _, _, svc = setup
    memory = svc.upload_memory("Restart the zzowner queue worker after rotating its broker password.",
                               agent_id=OWNER)
    with svc.db.engine.begin() as conn:
        skill_store.insert_skill(conn, slug="zz-owner-skill", version="1.0.0", parent_version=None, cluster_id=None,
                                 name="zz owner skill", description="restart the zzowner worker",
                                 skill_md=f"# zz owner\nRestart the zzowner worker ({memory.id}).", meta={},
                                 memory_ids=[memory.id], score=0.9, superseded_slugs=[], path="",
                                 embedding=np.ones(384, dtype=np.float32) / np.sqrt(384))
    token = svc.tokens.create("matrix-other-admin", "admin", agents=[OTHER])[0]
    session = tmp_path_factory.mktemp("matrix-ingest") / "s.jsonl"
    session.write_text('{"role": "user", "content": "hi"}\n')
    yield memory, token, str(session)
    with svc.db.engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM skills WHERE slug = 'zz-owner-skill'"))


def another_agents_requests(memory_id: str, session: str) -> dict[tuple[str, str], tuple[dict, set[int], str]]:
    """Route -> (request, the statuses allowed, text the answer must not hold)."""
    mid = memory_id
    return {
        ("POST", "/ingest"): ({"json": {"paths": [session], "agent_id": OWNER}}, {403}, ""),
        ("POST", "/ingest/text"): ({"json": {"text": "Always pin zzowner images.", "agent_id": OWNER}}, {403}, ""),
        ("POST", "/memories/upload"): ({"json": {"content": "zz other upload", "agent_id": OWNER}}, {403}, ""),
        ("GET", "/memories"): ({}, {200}, mid),
        ("GET", "/memories/{memory_id}"): ({}, {404}, "zzowner"),
        ("POST", "/memories/{memory_id}/feedback"): ({"json": {"helpful": True}}, {404}, "zzowner"),
        ("POST", "/skills/{name}/feedback"): ({"json": {"helpful": True}}, {404}, "zzowner"),
        ("POST", "/context"): ({"json": {"task": "restart the zzowner queue worker"}}, {200}, mid),
        ("POST", "/memories/search"): ({"json": {"query": "zzowner queue worker"}}, {200}, mid),
        ("POST", "/memories/search/batch"): ({"json": {"queries": ["zzowner queue worker"]}}, {200}, mid),
        ("POST", "/memories/details"): ({"json": {"ids": [mid]}}, {200}, "zzowner"),
        ("DELETE", "/memories/{memory_id}"): ({}, {404}, "zzowner"),
        ("DELETE", "/sessions"): ({"params": {"session_file": session, "agent_id": OWNER}}, {403}, ""),
        ("DELETE", "/agents/{agent_id}"): ({}, {403}, ""),
        ("POST", "/skills/search"): ({"json": {"query": "restart the zzowner worker"}}, {200}, "zz-owner-skill"),
        ("GET", "/skills"): ({}, {200}, "zz-owner-skill"),
        ("GET", "/skills/{slug}"): ({}, {404}, "zzowner"),
        ("GET", "/stats"): ({}, {200}, "zzowner"),
    }


def test_another_agents_token_meets_nothing_of_that_agent(setup, owned):
    app, http, _, svc = setup
    memory, token, session = owned
    table = another_agents_requests(memory.id, session)
    assert set(table) == set(ROUTE_ACTIONS), "every route needs a row for another agent's token"
    wrong = []
    for (method, path), (request, allowed, secret) in table.items():
        url = (path.replace("{memory_id}", memory.id).replace("{name}", "zz-owner-skill")
               .replace("{slug}", "zz-owner-skill").replace("{agent_id}", OWNER))
        answer = http.request(method, url, headers={"Authorization": f"Bearer {token}"}, **request)
        if answer.status_code not in allowed or (secret and secret in answer.text):
            wrong.append((method, path, answer.status_code, answer.text[:160]))
    assert not wrong, wrong
    assert svc.get_memory(memory.id) is not None, "the owner's memory is still there"
    # the same routes as the owner's own token find it
    mine = svc.tokens.create("matrix-owner-read", "read", agents=[OWNER])[0]
    found = http.post("/memories/search", headers={"Authorization": f"Bearer {mine}"},
                      json={"query": "zzowner queue worker"}).json()
    assert memory.id in [r["id"] for r in found["results"]]
    assert http.get("/skills/zz-owner-skill", headers={"Authorization": f"Bearer {mine}"}).status_code == 200


def test_another_agents_token_over_mcp(setup, owned):
    _, http, _, _ = setup
    memory, token, _ = owned
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "Authorization": f"Bearer {token}"}
    calls = {"search_memories": {"query": "zzowner queue worker"}, "get_memory_details": {"ids": [memory.id]},
             "upload_memory": {"content": "zz other upload over mcp", "agent_id": OWNER},
             "search_skills": {"query": "restart the zzowner worker"}, "get_skill": {"name": "zz-owner-skill"},
             "context_bundle": {"task": "restart the zzowner queue worker"},
             "feedback": {"memory_id": memory.id, "helpful": True}}
    assert set(calls) == set(TOOL_ACTIONS)
    leaks = []
    for tool, args in calls.items():
        answer = http.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                                          "params": {"name": tool, "arguments": args}})
        assert answer.status_code == 200
        asked_by_id = tool in ("get_memory_details", "feedback")  # the id the caller sent may come back
        if "broker password" in answer.text or (memory.id in answer.text and not asked_by_id):
            leaks.append((tool, answer.text[:200]))
        if tool in ("upload_memory", "feedback", "get_skill"):
            assert answer.json()["result"].get("isError"), (tool, answer.text[:200])
    assert not leaks, leaks
