"""The MCP server as an agent meets it: the official `mcp` client, over stdio against a real
`ultron mcp` subprocess and over streamable HTTP against a live API server's /mcp, on the
test database. One subprocess and one server per module; each test empties the store."""

from __future__ import annotations

import json
import signal
import sys
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from anyio.from_thread import BlockingPortal, start_blocking_portal

from tests.conftest import TEST_HOME, database_env
from tests.e2e.test_api import TOKEN, start_server
from tests.storage.test_skill_storage import KUBE

mcp = pytest.importorskip("mcp")
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared._httpx_utils import create_mcp_http_client  # noqa: E402

TOOLS = {"search_memories", "get_memory_details", "upload_memory", "search_skills", "get_skill",
         "context_bundle", "feedback"}


@dataclass
class Session:
    """A connected MCP client living in a portal's event loop, driven from sync tests."""

    portal: BlockingPortal
    client: Client

    def call(self, tool: str, args: dict[str, Any]):
        return self.portal.call(lambda: self.client.call_tool(tool, args))

    def ok(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        result = self.call(tool, args)
        assert not result.is_error, result.content[0].text
        assert result.structured_content is not None
        return result.structured_content

    def error(self, tool: str, args: dict[str, Any]) -> str:
        result = self.call(tool, args)
        assert result.is_error, result
        return result.content[0].text

    def tools(self):
        return self.portal.call(self.client.list_tools).tools

    def resources(self):
        return self.portal.call(self.client.list_resources).resources

    def read(self, uri: str) -> str:
        return self.portal.call(lambda: self.client.read_resource(uri)).contents[0].text


@pytest.fixture(scope="module")
def portal():
    with start_blocking_portal() as p:
        yield p


@pytest.fixture(scope="module")
def stdio_session(db, portal):
    params = StdioServerParameters(command=sys.executable, args=["-m", "ultron.cli", "mcp"],
                                   env={"ULTRON_HOME": str(TEST_HOME), "ULTRON_EMBEDDING_PROVIDER": "hash",
                                        "ULTRON_LLM_PROVIDER": "rules", **database_env()})
    with portal.wrap_async_context_manager(Client(params, read_timeout_seconds=60)) as client:
        yield Session(portal, client)


@pytest.fixture(scope="module")
def http_server(db, tmp_path_factory):
    live = start_server(tmp_path_factory.mktemp("mcp_log") / "server.log")
    yield live
    assert live.stop(signal.SIGTERM) == 0, live.output()[-3000:]


def _http_client(url: str, token: str | None) -> Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return Client(streamable_http_client(url, http_client=create_mcp_http_client(headers=headers)),
                  read_timeout_seconds=60)


@pytest.fixture(scope="module")
def http_session(http_server, portal):
    with portal.wrap_async_context_manager(_http_client(http_server.url + "/mcp", TOKEN)) as client:
        yield Session(portal, client)


@pytest.fixture(params=["stdio", "http"])
def session(request, client) -> Session:
    """Each transport, on an emptied store (`client` truncates it)."""
    return request.getfixturevalue(f"{request.param}_session")


@pytest.fixture
def skills_emptied(client):
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("TRUNCATE knowledge_clusters, skills CASCADE"))
    yield client
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("TRUNCATE knowledge_clusters, skills CASCADE"))


def publish_kube_skill(client) -> str:
    """Five kubernetes memories in one cluster, crystallised into a skill; returns its name."""
    ids = [client.memory.upload_memory(c, ctx, res, ["kubernetes"]).record.id for c, ctx, res in KUBE]
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO knowledge_clusters (id, topic, size) VALUES ('mcp-test', :t, :n)"),
                     {"t": "kubernetes pod crashloop", "n": len(ids)})
        conn.execute(sa.text("UPDATE memory_records SET cluster_id = 'mcp-test' WHERE id = ANY(:ids)"), {"ids": ids})
    report = client.skills.run_skill_evolution()
    assert len(report.published) == 1, report
    return client.list_skills()[0]["slug"]


# -- discovery --------------------------------------------------------------------------------------


def test_every_tool_is_listed_with_a_typed_schema(session):
    tools = {t.name: t for t in session.tools()}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.description and len(tool.description) < 400
        assert tool.input_schema["type"] == "object" and tool.input_schema["properties"]
    search = tools["search_memories"].input_schema["properties"]
    assert set(search) == {"query", "limit", "detail_level", "tags", "agent_id", "repo_root"}
    assert search["detail_level"]["enum"] == ["l0", "l1"]
    assert search["limit"]["minimum"] == 1 and search["limit"]["maximum"] == 50
    assert tools["search_memories"].input_schema["required"] == ["query"]
    assert tools["feedback"].input_schema["required"] == ["helpful"]
    assert set(tools["feedback"].input_schema["properties"]) >= {"memory_id", "skill", "helpful", "note"}
    assert set(tools["upload_memory"].input_schema["properties"]) >= {"content", "context", "resolution", "tags",
                                                                     "agent_id"}


# -- every tool -------------------------------------------------------------------------------------


def test_memories_are_stored_found_and_read(session):
    stored = session.ok("upload_memory", {
        "content": "pytest fails with ModuleNotFoundError: No module named ultron",
        "context": "running the test suite from a fresh checkout", "resolution": "pip install -e .",
        "tags": ["python", "pytest"], "agent_id": "mcp-agent"})
    memory_id = stored["id"]
    assert stored["content"].startswith("pytest fails")

    found = session.ok("search_memories", {"query": "ModuleNotFoundError ultron pytest", "limit": 5,
                                           "detail_level": "l0"})
    assert found["count"] >= 1 and found["results"][0]["id"] == memory_id
    assert "summary_l0" in found["results"][0] and "overview_l1" not in found["results"][0]
    scoped = session.ok("search_memories", {"query": "ModuleNotFoundError", "agent_id": "mcp-agent",
                                            "tags": ["pytest"]})
    assert [r["id"] for r in scoped["results"]] == [memory_id]
    assert session.ok("search_memories", {"query": "ModuleNotFoundError", "agent_id": "someone-else"})["count"] == 0

    details = session.ok("get_memory_details", {"ids": [memory_id, "no-such-id"]})
    assert [m["id"] for m in details["memories"]] == [memory_id] and details["missing"] == ["no-such-id"]
    assert details["memories"][0]["resolution"] == "pip install -e ."


def test_skills_are_found_read_and_listed_as_resources(session, skills_emptied):
    assert session.ok("search_skills", {"query": "pod crashloop"})["count"] == 0
    name = publish_kube_skill(skills_emptied)

    found = session.ok("search_skills", {"query": "kubernetes pod CrashLoopBackOff kubectl rollout restart",
                                         "limit": 3})
    assert found["count"] >= 1 and found["results"][0]["name"] == name
    skill = session.ok("get_skill", {"name": name})
    assert skill["name"] == name and skill["skill_md"].startswith("---") and "kubectl" in skill["skill_md"]

    uris = {str(r.uri): r for r in session.resources()}
    assert f"skill://{name}" in uris and "ultron://stats" in uris
    assert uris[f"skill://{name}"].mime_type == "text/markdown"
    assert session.read(f"skill://{name}") == skill["skill_md"]
    stats = json.loads(session.read("ultron://stats"))
    assert {"sessions", "memories", "skills"} <= set(stats) and stats["skills"]["current"] == 1


def test_context_bundle_and_feedback(session, skills_emptied):
    name = publish_kube_skill(skills_emptied)
    bundle = session.ok("context_bundle", {"task": "the api pod is in CrashLoopBackOff after a deploy",
                                           "token_budget": 400})
    assert bundle["tokens"] <= 400 and bundle["items"] and bundle["text"]
    assert {i["kind"] for i in bundle["items"]} <= {"skill", "memory"}

    memory_id = session.ok("search_memories", {"query": "CrashLoopBackOff"})["results"][0]["id"]
    memory = session.ok("feedback", {"memory_id": memory_id, "helpful": True, "note": "fixed it"})
    assert memory["target_kind"] == "memory" and memory["target_id"] == memory_id and memory["helpful_count"] == 1
    skill = session.ok("feedback", {"skill": name, "helpful": False})
    assert skill["target_kind"] == "skill" and skill["unhelpful_count"] == 1


# -- errors -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("tool, args, says", [
    ("search_memories", {"query": "x", "limit": 0}, "limit"),
    ("search_memories", {"query": "x", "limit": 51}, "limit"),
    ("search_memories", {"query": "x", "detail_level": "l2"}, "detail_level"),
    ("search_memories", {"query": ""}, "query"),
    ("search_memories", {}, "query"),
    ("search_memories", {"query": "x", "agent_id": "not an id!"}, "agent id"),
    ("search_memories", {"query": "nul \x00 byte"}, "NUL"),
    ("get_memory_details", {"ids": []}, "ids"),
    ("upload_memory", {"content": ""}, "content"),
    ("search_skills", {"query": "x", "limit": 100}, "limit"),
    ("get_skill", {"name": "Not A Name"}, "name"),
    ("get_skill", {"name": "no-such-skill"}, "no skill named 'no-such-skill'"),
    ("context_bundle", {"task": "x", "token_budget": 10}, "token_budget"),
    ("feedback", {"helpful": True}, "exactly one of memory_id or skill"),
    ("feedback", {"helpful": True, "memory_id": "a", "skill": "b"}, "exactly one of memory_id or skill"),
    ("feedback", {"memory_id": "a"}, "helpful"),
    ("feedback", {"helpful": False, "memory_id": "no-such-memory"}, "no-such-memory"),
    ("no_such_tool", {}, "no_such_tool"),
])
def test_bad_arguments_are_tool_errors_not_crashes(session, tool, args, says):
    assert says in session.error(tool, args)
    assert len(session.tools()) == len(TOOLS)  # the server still answers


# -- HTTP auth ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("token", [None, "wrong-token-0123456789"])
def test_http_mcp_needs_the_bearer_token(http_server, portal, token):
    raw = httpx.post(http_server.url + "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                     headers={"Authorization": f"Bearer {token}"} if token else {})
    assert raw.status_code == 401 and raw.headers["www-authenticate"].startswith("Bearer")
    assert "bearer token" in raw.json()["detail"]
    refusals = http_server.output().count('"POST /mcp HTTP/1.1" 401')
    with pytest.raises(Exception):  # the SDK client reports the 401 as a failed handshake
        with portal.wrap_async_context_manager(_http_client(http_server.url + "/mcp", token)):
            pass
    assert http_server.output().count('"POST /mcp HTTP/1.1" 401') > refusals


def test_http_mcp_works_with_the_token(http_session, client):
    assert {t.name for t in http_session.tools()} == TOOLS
    assert http_session.ok("search_memories", {"query": "anything"}) == {"results": [], "count": 0}
