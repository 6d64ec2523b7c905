"""The HTTP API as a client meets it: a live `python -m ultron.api` process on the test
database, spoken to over TCP with a bearer token."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from tests.storage.test_skill_storage import KUBE

from tests.conftest import TEST_HOME, write_jsonl

TOKEN = "test-token-0123456789abcdef"
SESSION = [{"role": "user", "content": "how do I list files?"}, {"role": "assistant", "content": "use ls -la"}]


# -- a live server ----------------------------------------------------------------------------------


@dataclass
class LiveServer:
    proc: subprocess.Popen
    url: str
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"server did not stop on signal {sig}:\n{self.output()[-3000:]}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(log: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    full_env = {**os.environ, "ULTRON_HOME": str(TEST_HOME), "ULTRON_LLM_PROVIDER": "rules", **(env or {})}
    full_env = {k: v for k, v in full_env.items() if v is not None}
    out = open(log, "ab")
    return subprocess.Popen([sys.executable, "-m", "ultron.api", *args], env=full_env, stdout=out,
                            stderr=subprocess.STDOUT, start_new_session=True)


def start_server(log: Path, *, token: str | None = TOKEN, env: dict[str, str] | None = None,
                 timeout: float = 90) -> LiveServer:
    """Start the server on a free loopback port and wait until /health answers."""
    port = free_port()
    env = {"ULTRON_API_TOKEN": token, **(env or {})}
    if token is None:
        env.pop("ULTRON_API_TOKEN")
    proc = launch(log, "--port", str(port), env=env)  # conftest cleared ULTRON_* from this process
    server = LiveServer(proc, f"http://127.0.0.1:{port}", log)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited with {proc.returncode}:\n{server.output()[-3000:]}")
        try:
            if httpx.get(server.url + "/health", timeout=2).status_code == 200:
                return server
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    server.stop()
    raise AssertionError(f"server did not answer /health within {timeout}s:\n{server.output()[-3000:]}")


@pytest.fixture(scope="module")
def roots(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("ingest_root")


@pytest.fixture(scope="module")
def server(db, roots, tmp_path_factory):
    live = start_server(tmp_path_factory.mktemp("api_log") / "server.log",
                        env={"ULTRON_INGEST_ROOTS": str(roots)})
    yield live
    assert live.stop(signal.SIGTERM) == 0, live.output()[-3000:]


@pytest.fixture
def api(server, client):
    """An authenticated HTTP client on an emptied database."""
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as http:
        yield http


def post(api: httpx.Client, path: str, body) -> httpx.Response:
    return api.post(path, json=body)


# -- auth ---------------------------------------------------------------------------------------------


def test_health_answers_without_a_token_and_reveals_nothing(server):
    r = httpx.get(server.url + "/health")
    assert r.status_code == 200
    body = r.json()
    assert body["status"] == "ok" and body["database"] == "ok"
    assert TOKEN not in r.text and str(TEST_HOME) not in r.text and "postgres" not in r.text.lower()


ROUTES = [("POST", "/ingest", {"paths": ["/tmp"], "agent_id": "a"}), ("POST", "/ingest/text", {"text": "x"}),
          ("POST", "/memories/upload", {"content": "x"}), ("POST", "/memories/search", {"query": "x"}),
          ("POST", "/memories/details", {"ids": ["x"]}), ("DELETE", "/memories/x", None),
          ("POST", "/skills/search", {"query": "x"}), ("GET", "/skills/x", None), ("GET", "/stats", None)]


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong-token"},
                                     {"Authorization": f"Bearer {TOKEN}x"}, {"Authorization": f"Basic {TOKEN}"},
                                     {"Authorization": "Bearer"}, {"Authorization": "Bearer t\u00e9st".encode()}],
                         ids=["none", "wrong", "longer", "basic", "empty", "latin1"])
def test_every_route_but_health_needs_the_token(server, headers):
    for method, path, body in ROUTES:
        r = httpx.request(method, server.url + path, json=body, headers=headers)
        assert r.status_code == 401, (method, path, r.status_code, r.text)
        assert r.headers["www-authenticate"].startswith("Bearer")
        assert "token" in r.json()["detail"]


def test_docs_describe_every_route_with_the_bearer_scheme(server):
    spec = httpx.get(server.url + "/openapi.json").json()
    assert spec["info"]["title"] == "Ultron" and spec["info"]["version"]
    assert spec["components"]["securitySchemes"]["bearer"] == {
        **spec["components"]["securitySchemes"]["bearer"], "type": "http", "scheme": "bearer"}
    for method, path, _ in ROUTES:
        templated = {"/memories/x": "/memories/{memory_id}", "/skills/x": "/skills/{slug}"}.get(path, path)
        op = spec["paths"][templated][method.lower()]
        assert op["security"] == [{"bearer": []}] and op["tags"], templated
        assert "401" in op["responses"] and "422" in op["responses"]
    assert "security" not in spec["paths"]["/health"]["get"]
    assert set(spec["paths"]["/ingest"]["post"]["requestBody"]["content"]) == {"application/json",
                                                                               "multipart/form-data"}
    assert httpx.get(server.url + "/docs").status_code == 200


# -- memories ------------------------------------------------------------------------------------------


def test_upload_search_details_delete_round_trip(api):
    memory = {"content": "pip install fails with an SSL error behind the corporate proxy",
              "context": "corporate network", "resolution": "set REQUESTS_CA_BUNDLE to the proxy CA",
              "tags": ["pip", "Proxy"]}
    stored = post(api, "/memories/upload", memory)
    assert stored.status_code == 200, stored.text
    first = stored.json()
    assert first["action"] == "inserted" and first["content"] == memory["content"]
    assert first["tags"] == ["pip", "proxy"]
    again = post(api, "/memories/upload", memory).json()
    assert again["action"] == "merged" and again["id"] == first["id"]

    l0 = post(api, "/memories/search", {"query": "pip SSL error proxy", "detail_level": "l0", "limit": 5}).json()
    assert l0["count"] == 1 and l0["results"][0]["id"] == first["id"]
    assert "overview_l1" not in l0["results"][0] and "content" not in l0["results"][0]
    assert l0["results"][0]["matched"] and l0["results"][0]["similarity_score"] > 0
    l1 = post(api, "/memories/search", {"query": "pip SSL error proxy", "tags": ["pip"], "tier": "warm"}).json()
    assert "REQUESTS_CA_BUNDLE" in l1["results"][0]["overview_l1"]
    assert post(api, "/memories/search", {"query": "pip SSL error proxy", "tags": ["docker"]}).json()["count"] == 0

    details = post(api, "/memories/details", {"ids": [first["id"], "no-such-id"]}).json()
    assert [m["id"] for m in details["memories"]] == [first["id"]]
    assert details["memories"][0]["resolution"] == memory["resolution"]
    assert details["missing"] == ["no-such-id"]

    gone = api.delete(f"/memories/{first['id']}")
    assert gone.status_code == 200 and gone.json()["memories_deleted"] == 1
    again = api.delete(f"/memories/{first['id']}")
    assert again.status_code == 404 and first["id"] in again.json()["detail"]
    assert post(api, "/memories/search", {"query": "pip SSL error proxy"}).json()["count"] == 0


def test_ingest_text_stores_the_extracted_memories(api):
    r = post(api, "/ingest/text", {"text": "I prefer tabs over spaces in every Python file.", "agent_id": "writer"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["total_memories"] == len(body["memories"]) >= 1
    assert all(m["agent_id"] == "writer" and m["action"] in ("inserted", "merged") for m in body["memories"])
    blank = post(api, "/ingest/text", {"text": "   "})
    assert blank.status_code == 400 and "empty" in blank.json()["detail"]


# -- ingest: server paths -----------------------------------------------------------------------------


def test_ingest_reads_paths_inside_the_roots(api, roots):
    session = write_jsonl(roots / "agent-a" / "run.jsonl", SESSION)
    r = post(api, "/ingest", {"paths": [str(session)], "agent_id": "agent-a"})
    assert r.status_code == 200, r.text
    report = r.json()
    assert report["totals"]["new"] == 1 and report["files"][0]["messages"] == 2
    again = post(api, "/ingest", {"paths": [str(roots)], "agent_id": "agent-a"}).json()
    assert [f["status"] for f in again["files"]] == ["unchanged"]


def test_ingest_refuses_every_path_outside_the_roots(api, db, roots, tmp_path):
    outside = write_jsonl(tmp_path / "outside" / "secret.jsonl",
                          [{"role": "user", "content": "TOP-SECRET-OUTSIDE"}])
    (roots / "escape.jsonl").unlink(missing_ok=True)
    (roots / "escape.jsonl").symlink_to(outside)
    (roots / "escape-dir").unlink(missing_ok=True)
    (roots / "escape-dir").symlink_to(outside.parent, target_is_directory=True)
    for path in ["/etc/passwd", f"{roots}/../../etc/passwd", f"{roots}/../{roots.name}-sibling/x.jsonl",
                 str(roots / "escape.jsonl"), str(roots / "escape-dir" / "secret.jsonl"), str(outside),
                 "/nonexistent/anywhere.jsonl", "/"]:
        r = post(api, "/ingest", {"paths": [str(roots), path], "agent_id": "agent-a"})
        assert r.status_code == 403, (path, r.status_code, r.text)
        assert path in r.json()["detail"] and str(roots) in r.json()["detail"]
    missing = post(api, "/ingest", {"paths": [str(roots / "nope.jsonl")], "agent_id": "agent-a"})
    assert missing.status_code == 404 and "nope.jsonl" in missing.json()["detail"]
    relative = post(api, "/ingest", {"paths": ["../etc/passwd"], "agent_id": "agent-a"})
    assert relative.status_code == 422 and "absolute" in relative.json()["detail"]
    # A walk of the root passes over the symlinks instead of following them out.
    walked = post(api, "/ingest", {"paths": [str(roots)], "agent_id": "agent-a"}).json()
    assert all(f["status"] == "skipped" for f in walked["files"] if "escape" in f["path"])
    with db.engine.connect() as conn:
        leaked = conn.execute(sa.text("SELECT count(*) FROM session_messages WHERE content LIKE '%TOP-SECRET%'"))
        assert leaked.scalar_one() == 0
    (roots / "escape.jsonl").unlink()
    (roots / "escape-dir").unlink()


# -- ingest: uploads --------------------------------------------------------------------------------


def jsonl_bytes(rows) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in rows)


def test_multipart_upload_is_stored_by_the_server_and_ingested(api):
    files = [("files", ("../../evil name.jsonl", jsonl_bytes(SESSION), "application/jsonl")),
             ("files", ("second.jsonl", jsonl_bytes(SESSION[:1]) + b"{not json\n", "application/octet-stream"))]
    r = api.post("/ingest", data={"agent_id": "web-agent"}, files=files)
    assert r.status_code == 200, r.text
    report = r.json()
    upload_dir = TEST_HOME / "uploads" / "web-agent"
    assert [f["path"] for f in report["files"]] == [str(upload_dir / "evil_name.jsonl"),
                                                    str(upload_dir / "second.jsonl")]
    assert [f["status"] for f in report["files"]] == ["new", "new"]
    assert report["files"][1]["problems"][0]["line"] == 2
    assert not (TEST_HOME / "evil name.jsonl").exists() and not (TEST_HOME.parent / "evil name.jsonl").exists()

    grown = api.post("/ingest", data={"agent_id": "web-agent"},
                     files=[("files", ("second.jsonl", jsonl_bytes(SESSION), "application/jsonl"))]).json()
    assert grown["files"][0]["status"] == "changed" and grown["files"][0]["messages"] == 2


@pytest.mark.parametrize("data, files, where", [
    ({"agent_id": "web"}, [("files", ("notes.txt", b"hello", "text/plain"))], "files"),
    ({}, [("files", ("a.jsonl", b"{}\n", "application/jsonl"))], "agent_id"),
    ({"agent_id": "../etc"}, [("files", ("a.jsonl", b"{}\n", "application/jsonl"))], "agent_id"),
    ({"agent_id": "web"}, None, "files"),
])
def test_bad_uploads_are_refused_with_the_reason(api, data, files, where):
    if files:
        r = api.post("/ingest", data=data, files=files)
    else:  # a form with the agent_id field only
        r = api.post("/ingest", headers={"Content-Type": "multipart/form-data; boundary=x"},
                     content=b'--x\r\nContent-Disposition: form-data; name="agent_id"\r\n\r\nweb\r\n--x--\r\n')
    assert r.status_code == 422, r.text
    assert where in r.json()["detail"]


def test_oversized_bodies_get_413_before_they_are_read(server, api):
    host, port = server.url.removeprefix("http://").split(":")
    for content_type, size in [("multipart/form-data; boundary=x", 500 * 1024 * 1024),
                               ("application/json", 9 * 1024 * 1024)]:
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        conn.putrequest("POST", "/ingest")
        conn.putheader("Authorization", f"Bearer {TOKEN}")
        conn.putheader("Content-Type", content_type)
        conn.putheader("Content-Length", str(size))
        conn.endheaders()  # no body follows: the answer must not wait for it
        response = conn.getresponse()
        assert response.status == 413 and b"MB" in response.read()
        conn.close()

    def chunks():  # no Content-Length: counted while streaming
        for _ in range(10):
            yield b" " * (1024 * 1024)

    r = api.post("/memories/search", content=chunks(), headers={"Content-Type": "application/json"})
    assert r.status_code == 413


# -- validation -------------------------------------------------------------------------------------


BAD_BODIES = [
    ("/memories/search", b"{not json", "body"),
    ("/memories/search", b"", "body"),
    ("/memories/search", {"query": "x", "limit": 0}, "limit"),
    ("/memories/search", {"query": "x", "limit": 101}, "limit"),
    ("/memories/search", {"query": "x", "limit": "ten"}, "limit"),
    ("/memories/search", {"query": "x", "detail_level": "full"}, "detail_level"),
    ("/memories/search", {"query": "x", "tier": "LUKEWARM"}, "tier"),
    ("/memories/search", {"query": "x", "detail": "l0"}, "detail"),
    ("/memories/search", {"query": "x" * 10_001}, "query"),
    ("/memories/search", {"query": "a\x00b"}, "query"),
    ("/memories/search", {"query": ""}, "query"),
    ("/memories/search", {"query": "x", "agent_id": "no spaces allowed"}, "agent_id"),
    ("/memories/search", [1, 2], "body"),
    ("/memories/upload", {"context": "no content"}, "content"),
    ("/memories/upload", {"content": "x", "tags": ["t"] * 101}, "tags"),
    ("/memories/upload", {"content": "x", "tags": "not-a-list"}, "tags"),
    ("/memories/details", {"ids": []}, "ids"),
    ("/memories/details", {"ids": ["x"] * 1001}, "ids"),
    ("/memories/details", {"ids": [None]}, "ids"),
    ("/ingest/text", {"text": None}, "text"),
    ("/ingest", {"paths": [], "agent_id": "a"}, "paths"),
    ("/ingest", {"paths": ["/tmp/x\x00.jsonl"], "agent_id": "a"}, "paths"),
    ("/ingest", {"paths": ["/tmp"]}, "agent_id"),
    ("/ingest", b"[]", "body"),
    ("/skills/search", {"query": "x", "limit": 51}, "limit"),
]


@pytest.mark.parametrize("path, body, field", BAD_BODIES,
                         ids=[f"{p}:{f}:{i}" for i, (p, _, f) in enumerate(BAD_BODIES)])
def test_bad_bodies_get_a_located_422(api, path, body, field):
    r = api.post(path, content=body if isinstance(body, bytes) else json.dumps(body).encode(),
                 headers={"Content-Type": "application/json"})
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert isinstance(detail, str) and field in detail, detail
    assert "Traceback" not in r.text


def test_odd_requests_never_get_a_500(api):
    assert api.post("/memories/search", content=b"query=x",
                    headers={"Content-Type": "text/plain"}).status_code in (415, 422)
    assert api.post("/ingest", content=b"x", headers={"Content-Type": "text/plain"}).status_code == 415
    assert api.delete("/memories/" + "x" * 129).status_code == 422
    assert api.delete("/memories/a%00b").status_code == 422
    assert api.get("/skills/a%00b").status_code == 422
    assert api.put("/memories/search").status_code == 405
    assert api.get("/no/such/route").status_code == 404
    # a lone surrogate escape is valid JSON but cannot be stored
    r = api.post("/memories/upload", content=b'{"content": "a\\ud800b"}', headers={"Content-Type": "application/json"})
    assert r.status_code == 422 and "content" in r.json()["detail"]


# -- skills and stats --------------------------------------------------------------------------------



@pytest.fixture
def skill_hub(client):
    pytest.importorskip("ultron.skills.service")
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("TRUNCATE knowledge_clusters, skills CASCADE"))
    yield client
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("TRUNCATE knowledge_clusters, skills CASCADE"))


def crystallise(client, memories, topic: str) -> dict:
    """Put uploaded memories in one cluster, as clustering would, and run skill evolution."""
    ids = [client.upload_memory(c, ctx, res, ["kubernetes"]).id for c, ctx, res in memories]
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO knowledge_clusters (id, topic, size) VALUES ('api-test', :t, :n)"),
                     {"t": topic, "n": len(ids)})
        conn.execute(sa.text("UPDATE memory_records SET cluster_id = 'api-test' WHERE id = ANY(:ids)"), {"ids": ids})
    report = client.skills.run_skill_evolution()
    assert len(report.published) == 1, report
    return report.published[0]


def test_skills_are_found_and_read_over_http(api, skill_hub):
    assert post(api, "/skills/search", {"query": "pod crashloop"}).json() == {"results": [], "count": 0}
    published = crystallise(skill_hub, KUBE, "kubernetes pod crashloop")
    slug = published.get("slug") or Path(published["path"]).name.rsplit("-", 1)[0]

    found = post(api, "/skills/search", {"query": "kubernetes pod CrashLoopBackOff kubectl rollout restart",
                                         "limit": 3}).json()
    assert found["count"] >= 1 and found["results"][0]["slug"] == slug
    assert "skill_md" not in found["results"][0] and found["results"][0]["similarity"] > 0

    skill = api.get(f"/skills/{slug}")
    assert skill.status_code == 200, skill.text
    body = skill.json()
    assert body["slug"] == slug and body["version"] == "1.0.0" and body["status"] == "current"
    assert body["skill_md"].startswith("---") and "kubectl" in body["skill_md"]
    assert len(body["memory_ids"]) == len(KUBE)
    md = api.get(f"/skills/{slug}", params={"format": "markdown"})
    assert md.headers["content-type"].startswith("text/markdown") and md.text == body["skill_md"]
    assert api.get(f"/skills/{slug}", params={"version": "1.0.0"}).json()["version"] == "1.0.0"
    assert api.get(f"/skills/{slug}", params={"version": "9.9.9"}).status_code == 404
    missing = api.get("/skills/no-such-skill")
    assert missing.status_code == 404 and "no-such-skill" in missing.json()["detail"]


def test_stats_count_what_the_store_holds(api):
    pytest.importorskip("ultron.clusters.service")
    post(api, "/memories/upload", {"content": "docker build fails: no space left on device",
                                   "resolution": "docker system prune"})
    stats = api.get("/stats")
    assert stats.status_code == 200, stats.text
    body = stats.json()
    assert set(body) >= {"sessions", "segments", "memories", "clusters", "skills"}
    assert body["memories"]["total"] == body["memories"]["active"] == 1
    assert body["memories"]["by_tier"] == {"WARM": 1}


# -- forget ---------------------------------------------------------------------------------------------

FORGET_ROUTES = [("DELETE", "/sessions?session_file=/tmp/x.jsonl"), ("DELETE", "/agents/someone")]


def test_forget_routes_need_the_token_and_are_documented(server):
    for method, path in FORGET_ROUTES:
        for headers in ({}, {"Authorization": "Bearer wrong-token"}):
            r = httpx.request(method, server.url + path, headers=headers)
            assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer"), (path, r.text)
    spec = httpx.get(server.url + "/openapi.json").json()
    for templated in ("/sessions", "/agents/{agent_id}"):
        op = spec["paths"][templated]["delete"]
        assert op["security"] == [{"bearer": []}] and op["tags"] == ["forget"]
        assert {"401", "404", "422"} <= set(op["responses"])
    params = {p["name"]: p for p in spec["paths"]["/sessions"]["delete"]["parameters"]}
    assert params["session_file"]["required"] and not params["agent_id"]["required"]


def test_bad_forget_requests_get_a_located_422(api):
    for path, field in [("/sessions", "session_file"), ("/sessions?session_file=relative.jsonl", "session_file"),
                        ("/sessions?session_file=/x.jsonl&agent_id=../etc", "agent_id"),
                        ("/sessions?session_file=/a%00b.jsonl", "session_file"), ("/agents/bad%20agent!", "agent_id"),
                        ("/agents/" + "a" * 129, "agent_id")]:
        r = api.delete(path)
        assert r.status_code == 422 and field in r.json()["detail"], (path, r.status_code, r.text)


def test_a_forgotten_agent_is_found_nowhere_through_the_api(api, client, roots):
    from tests.e2e.test_forget_everywhere import SERVICES, failing_session, marker, pipeline, rows_containing

    word, agent = marker(), "api-forget"
    files = [("files", (f"{name}.jsonl", jsonl_bytes(failing_session(word, name, *rest)), "application/jsonl"))
             for name, *rest in SERVICES[:3]]
    uploaded = api.post("/ingest", data={"agent_id": agent}, files=files)
    assert uploaded.status_code == 200, uploaded.text
    paths = [f["path"] for f in uploaded.json()["files"]]
    assert all(Path(p).is_file() and Path(p).parent == TEST_HOME / "uploads" / agent for p in paths)
    kept = write_jsonl(roots / "api-kept" / "deploy.jsonl", failing_session("kubectl", "frontend", "web app", 80,
                                                                           "--replicas 2"))
    assert post(api, "/ingest", {"paths": [str(kept)], "agent_id": "api-kept"}).status_code == 200
    text = post(api, "/ingest/text", {"text": f"I prefer to restart {word} with systemctl, never by hand.",
                                      "agent_id": agent})
    assert text.status_code == 200 and text.json()["total_memories"] >= 1
    pipeline(client)  # segment, label, extract (in this process, on the same database)

    def found(query: str, **filters) -> int:
        return post(api, "/memories/search", {"query": query, "limit": 50, **filters}).json()["count"]

    assert found(word) >= 3 and found(word, agent_id=agent) >= 3
    assert found("frontend replicas kubectl", agent_id="api-kept") >= 1

    one = api.delete("/sessions", params={"session_file": paths[0], "agent_id": agent})
    assert one.status_code == 200, one.text
    body = one.json()
    assert body["sessions"] == 1 and body["segments"] == 1 and body["memories_deleted"] >= 1
    assert body["partitions"] == [f"{agent}:{paths[0]}"] and body["files"]["session_file"] == 1
    assert body["tables"]["trajectory_records"] == {"deleted": 1, "updated": 0}
    assert not Path(paths[0]).exists() and Path(paths[1]).exists()  # the server's copy of that file went
    again = api.delete("/sessions", params={"session_file": paths[0]})
    assert again.status_code == 404 and paths[0] in again.json()["detail"]

    gone = api.delete(f"/agents/{agent}")
    assert gone.status_code == 200, gone.text
    body = gone.json()
    assert body["sessions"] == 2 and body["memories_deleted"] >= 3 and body["files"]["session_file"] == 2
    assert sorted(body["partitions"]) == sorted(f"{agent}:{p}" for p in paths[1:])
    assert not (TEST_HOME / "uploads" / agent).exists()
    assert api.delete(f"/agents/{agent}").status_code == 404

    # Found nowhere: not by search (with or without the agent filter), not in skills, not in any row.
    assert found(word) == 0 and found(word, agent_id=agent) == 0 and found("systemctl restart") == 0
    assert all(word not in json.dumps(hit) for hit in post(api, "/skills/search", {"query": word}).json()["results"])
    assert rows_containing(client.db, word) == {} and rows_containing(client.db, agent) == {}
    assert found("frontend replicas kubectl", agent_id="api-kept") >= 1  # the other agent stays
    assert api.get("/stats").json()["sessions"]["total"] == 1


# -- starting and stopping -----------------------------------------------------------------------------


def test_refuses_to_listen_publicly_without_a_token(db, tmp_path):
    proc = launch(tmp_path / "log", "--host", "0.0.0.0", "--port", str(free_port()))
    assert proc.wait(60) == 2
    out = (tmp_path / "log").read_text()
    assert "ULTRON_API_TOKEN" in out and "0.0.0.0" in out and "Uvicorn running" not in out


def test_a_taken_port_is_reported(server, tmp_path):
    port = server.url.rsplit(":", 1)[1]
    proc = launch(tmp_path / "log", "--port", port, env={"ULTRON_API_TOKEN": TOKEN})
    assert proc.wait(90) == 2
    assert f"could not start on 127.0.0.1:{port}" in (tmp_path / "log").read_text()


def test_loopback_server_generates_a_private_token_once_and_stops_cleanly(db, tmp_path):
    token_file = TEST_HOME / "api_token"
    token_file.unlink(missing_ok=True)
    try:
        first = start_server(tmp_path / "first.log", token=None)
        try:
            token = token_file.read_text().strip()
            assert len(token) >= 32 and stat.S_IMODE(token_file.stat().st_mode) == 0o600
            assert str(token_file) in first.output() and token not in first.output()
            assert httpx.get(first.url + "/stats").status_code == 401
            ok = httpx.post(first.url + "/memories/search", json={"query": "x"},
                            headers={"Authorization": f"Bearer {token}"})
            assert ok.status_code == 200
        finally:
            assert first.stop(signal.SIGINT) == 0, first.output()[-3000:]
        second = start_server(tmp_path / "second.log", token=None)
        try:
            assert token_file.read_text().strip() == token
            assert httpx.post(second.url + "/memories/search", json={"query": "x"},
                              headers={"Authorization": f"Bearer {token}"}).status_code == 200
        finally:
            assert second.stop(signal.SIGTERM) == 0, second.output()[-3000:]
    finally:
        token_file.unlink(missing_ok=True)


def test_api_token_helper(tmp_path):
    from ultron.api import api_token
    from ultron.api.auth import ApiServerError, is_loopback
    from ultron.settings import Settings

    home = tmp_path / "home"
    settings = Settings(home=home)
    token = api_token(settings)
    assert api_token(settings) == token and api_token(settings, "::1") == token
    assert stat.S_IMODE((home / "api_token").stat().st_mode) == 0o600
    (home / "api_token").chmod(0o644)
    assert api_token(settings) == token and stat.S_IMODE((home / "api_token").stat().st_mode) == 0o600
    assert api_token(Settings(home=home, api_token=" explicit-token-value ")) == "explicit-token-value"
    assert api_token(Settings(home=home, api_token="t" * 20), "0.0.0.0") == "t" * 20
    for host in ("0.0.0.0", "192.168.1.5", "example.com", "::"):
        with pytest.raises(ApiServerError, match="ULTRON_API_TOKEN"):
            api_token(settings, host)
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost", "LOCALHOST"))
