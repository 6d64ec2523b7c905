"""ultron.client against a live `python -m ultron.api` process: every call of the sync and
async clients, the token defaults, and how refusals surface."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest

from tests.e2e.test_api import TOKEN, crystallise, start_server
from tests.storage.test_skill_storage import KUBE
from ultron.client import (
    AsyncUltronClient, AuthError, InvalidRequest, NotFound, UltronAPIError, UltronClient,
)
from ultron.settings import Settings

PIP = {"content": "pip install fails with an SSL error behind the corporate proxy",
       "context": "corporate network", "resolution": "set REQUESTS_CA_BUNDLE to the proxy CA", "tags": ["pip"]}


@pytest.fixture(scope="module")
def server(db, tmp_path_factory):
    live = start_server(tmp_path_factory.mktemp("client_log") / "server.log")
    yield live
    assert live.stop(signal.SIGTERM) == 0, live.output()[-3000:]


@pytest.fixture
def remote(server, client):
    """A client of the live server on an emptied database (``client`` is the SDK that empties it)."""
    with UltronClient(server.url, token=TOKEN, timeout=60) as http:
        yield http


def test_memories_round_trip(remote, server):
    health = remote.health()
    assert health["status"] == "ok" and health["database"] == "ok"

    stored = remote.upload_memory(PIP["content"], PIP["context"], PIP["resolution"], tags=PIP["tags"],
                                  agent_id="alice")
    assert stored["action"] == "inserted" and stored["content"] == PIP["content"]
    assert stored["tags"] == ["pip"] and stored["agent_id"] == "alice"

    hits = remote.search_memories("pip SSL error proxy", limit=5)
    assert [h["id"] for h in hits] == [stored["id"]] and "REQUESTS_CA_BUNDLE" in hits[0]["overview_l1"]
    l0 = remote.search_memories("pip SSL error proxy", detail_level="l0", tier="warm", tags=["pip"])
    assert l0[0]["id"] == stored["id"] and "overview_l1" not in l0[0]
    assert remote.search_memories("pip SSL error proxy", agent_id="alice")[0]["id"] == stored["id"]
    assert remote.search_memories("pip SSL error proxy", agent_id="bob") == []
    batch = remote.search_memories_batch(["pip SSL error proxy", "kubernetes pod evicted"], limit=5, tags=["pip"])
    assert [[h["id"] for h in hits] for hits in batch] == [[stored["id"]], []]

    details = remote.get_memory_details([stored["id"], "no-such-id"])
    assert [m["id"] for m in details] == [stored["id"]] and details[0]["resolution"] == PIP["resolution"]
    assert remote.get_memory_details([]) == []

    one = remote.get_memory(stored["id"])
    assert one["id"] == stored["id"] and one["content"] == PIP["content"]
    assert remote.get_memory("no-such-id") is None
    assert remote.get_memory("a/b?c") is None  # quoted into one path segment

    stats = remote.stats()
    assert stats["memories"]["total"] == 1


def test_feedback_and_context_bundle(remote):
    stored = remote.upload_memory(PIP["content"], PIP["context"], PIP["resolution"], tags=PIP["tags"])
    vote = remote.feedback(memory_id=stored["id"], helpful=True, note="worked", agent_id="alice")
    assert vote["target_kind"] == "memory" and vote["target_id"] == stored["id"]
    assert vote["helpful"] is True and vote["helpful_count"] == 1 and vote["unhelpful_count"] == 0
    assert remote.feedback(memory_id=stored["id"], helpful=False)["unhelpful_count"] == 1
    with pytest.raises(NotFound) as missing:
        remote.feedback(memory_id="no-such-id", helpful=True)
    assert missing.value.status == 404
    with pytest.raises(ValueError):
        remote.feedback(helpful=True)
    with pytest.raises(ValueError):
        remote.feedback(memory_id=stored["id"], skill="x", helpful=True)

    bundle = remote.context_bundle("pip SSL error behind a proxy", token_budget=300)
    assert bundle["task"] == "pip SSL error behind a proxy" and bundle["token_budget"] == 300
    assert bundle["tokens"] <= 300 and isinstance(bundle["text"], str)
    assert any(i["kind"] == "memory" and i["id"] == stored["id"] for i in bundle["items"])


@pytest.fixture
def skill_hub(client):
    import sqlalchemy as sa

    with client.db.engine.begin() as conn:
        conn.execute(sa.text("TRUNCATE knowledge_clusters, skills CASCADE"))
    yield client
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("TRUNCATE knowledge_clusters, skills CASCADE"))


def test_skills(remote, skill_hub):
    assert remote.search_skills("pod crashloop") == [] and remote.list_skills() == []
    published = crystallise(skill_hub, KUBE, "kubernetes pod crashloop")
    slug = published.get("slug") or Path(published["path"]).name.rsplit("-", 1)[0]

    found = remote.search_skills("kubernetes pod CrashLoopBackOff kubectl rollout restart", limit=3)
    assert found[0]["slug"] == slug and found[0]["similarity"] > 0
    skill = remote.get_skill(slug)
    assert skill["slug"] == slug and "kubectl" in skill["skill_md"]
    assert remote.get_skill("no-such-skill") is None
    assert [s["slug"] for s in remote.list_skills()] == [slug]
    assert remote.list_skills(limit=1, offset=1) == []

    vote = remote.feedback(skill=slug, helpful=True)
    assert vote["target_kind"] == "skill" and vote["target_id"] == slug and vote["helpful_count"] == 1
    with pytest.raises(NotFound):
        remote.feedback(skill="no-such-skill", helpful=False)


def test_async_client_makes_every_call(server, skill_hub):
    published = crystallise(skill_hub, KUBE, "kubernetes pod crashloop")
    slug = published.get("slug") or Path(published["path"]).name.rsplit("-", 1)[0]

    async def drive() -> None:
        async with AsyncUltronClient(server.url, token=TOKEN, timeout=60) as remote:
            assert (await remote.health())["status"] == "ok"
            stored = await remote.upload_memory(PIP["content"], PIP["context"], PIP["resolution"],
                                                tags=PIP["tags"], agent_id="alice")
            hits, one, details = await asyncio.gather(
                remote.search_memories("pip SSL error proxy", agent_id="alice"),
                remote.get_memory(stored["id"]), remote.get_memory_details([stored["id"]]))
            assert hits[0]["id"] == one["id"] == details[0]["id"] == stored["id"]
            assert await remote.get_memory("no-such-id") is None
            assert (await remote.search_skills("kubernetes pod CrashLoopBackOff"))[0]["slug"] == slug
            assert (await remote.get_skill(slug))["slug"] == slug
            assert await remote.get_skill("no-such-skill") is None
            assert [s["slug"] for s in await remote.list_skills(limit=10)] == [slug]
            bundle = await remote.context_bundle("kubernetes pod CrashLoopBackOff", token_budget=400)
            assert bundle["tokens"] <= 400 and bundle["items"]
            assert (await remote.feedback(memory_id=stored["id"], helpful=True))["helpful_count"] == 1
            assert (await remote.feedback(skill=slug, helpful=True))["helpful_count"] == 1
            assert (await remote.stats())["memories"]["total"] == len(KUBE) + 1
            with pytest.raises(AuthError):
                await AsyncUltronClient(server.url, token="wrong-token-000000").stats()

    asyncio.run(drive())


def test_a_wrong_token_is_an_auth_error(server, client):
    with UltronClient(server.url, token="wrong-token-0123456789") as remote:
        assert remote.health()["status"] == "ok"  # needs no token
        with pytest.raises(AuthError) as refused:
            remote.search_memories("anything")
        assert refused.value.status == 401 and refused.value.message == "invalid bearer token"
        with pytest.raises(AuthError):
            remote.get_memory("some-id")  # a 401 is never mistaken for "not found"
    with UltronClient(server.url, token="") as anonymous, pytest.raises(AuthError) as missing:
        anonymous.stats()
    assert "missing bearer token" in missing.value.message


def test_refusals_carry_the_servers_message(remote):
    with pytest.raises(InvalidRequest) as empty:
        remote.search_memories("")
    assert empty.value.status == 422 and empty.value.message.startswith("body.query")
    assert empty.value.errors and empty.value.errors[0]["loc"] == ["body", "query"]
    assert "POST /memories/search: 422 body.query" in str(empty.value)
    with pytest.raises(UltronAPIError) as too_many:
        remote.search_memories("pip", limit=1000)
    assert too_many.value.status == 422 and "limit" in too_many.value.message
    with pytest.raises(InvalidRequest) as bad_budget:
        remote.context_bundle("pip", token_budget=1)
    assert "token_budget" in bad_budget.value.message


def test_the_token_defaults_to_the_file_a_local_server_writes(server, client, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "api_token").write_text(TOKEN + "\n")
    settings = Settings.from_env({"ULTRON_HOME": str(home), "ULTRON_API_URL": server.url})
    with UltronClient(settings=settings) as remote:
        assert remote.base_url == server.url and remote.token == TOKEN
        assert remote.stats()["memories"]["total"] == 0


def test_the_readme_example_runs(server, client, monkeypatch, capsys):
    """The example under "### Python client" in docs/http-api.md (moved there from README)."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "http-api.md").read_text()
    section = page.split("### Python client", 1)[1]
    example = section.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.setenv("ULTRON_API_URL", server.url)
    monkeypatch.setenv("ULTRON_API_TOKEN", TOKEN)
    exec(compile(example, "docs/http-api.md", "exec"), {})
    assert "REQUESTS_CA_BUNDLE" in capsys.readouterr().out
    assert client.stats()["memories"]["total"] == 1
