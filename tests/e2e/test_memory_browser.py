"""The memory browser at /ui, driven over HTTP as a person's browser would (forms, cookies,
redirects): sign in, search with filters, a memory's provenance, edit, feedback, forget with
its cascade, skills with a diff, the overview. The real-browser run is test_browser_chromium."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from tests.e2e.test_forget_everywhere import SERVICES, failing_session, ingest, marker, pipeline
from ultron.api.app import create_app
from ultron.memory.service import Provenance

TOKEN = "browser-test-token-0123456789"


@pytest.fixture
def svc(client, tmp_path):
    from ultron.sdk import Ultron
    from ultron.settings import Settings

    return Ultron(Settings.from_env(home=tmp_path / "home", llm_provider="rules"), db=client.db)


@pytest.fixture
def web(svc):
    with TestClient(create_app(svc.settings, client=svc, token=TOKEN), base_url="http://127.0.0.1") as http:
        yield http


def sign_in(web: TestClient) -> None:
    page = web.post("/ui/signin", data={"token": TOKEN, "next": "/ui/memories"}, follow_redirects=False)
    assert page.status_code == 303 and page.headers["location"] == "/ui/memories"
    cookie = page.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/ui" in cookie


def csrf(html: str) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', html).group(1)


def test_pages_need_a_session_and_the_right_token(web):
    page = web.get("/ui/memories?q=docker", follow_redirects=False)
    assert page.status_code == 303
    assert page.headers["location"] == "/ui/signin?next=%2Fui%2Fmemories%3Fq%3Ddocker"
    form = web.get(page.headers["location"])
    assert form.status_code == 200 and 'type="password"' in form.text
    wrong = web.post("/ui/signin", data={"token": "not-it", "next": "/ui/memories"}, follow_redirects=False)
    assert wrong.status_code == 401 and "does not open this server" in wrong.text and "set-cookie" not in wrong.headers
    # a sign-in link cannot send the browser to another site
    away = web.post("/ui/signin", data={"token": TOKEN, "next": "https://evil.example/"}, follow_redirects=False)
    assert away.headers["location"] == "/ui/memories"
    web.cookies.set("ultron_session", "9999999999.abc.def", domain="127.0.0.1", path="/ui")
    assert web.get("/ui/memories", follow_redirects=False).status_code == 303   # a forged cookie


def test_search_detail_edit_feedback_and_forget(web, svc):
    theme, word = marker("theme"), marker("fix")
    paths = ingest(svc, {f"{s[0]}.jsonl": failing_session(theme, *s, extra=word if i == 0 else marker("x"))
                         for i, s in enumerate(SERVICES[:6])}, "agent-web")
    pipeline(svc)
    published = svc.run_skill_evolution()["published"]
    assert len(published) == 1
    slug = published[0]["slug"]
    upload = svc.memory.upload_memory("Run the linter with --fix before committing zqlintermark.",
                                      tags=["lint"], provenance=Provenance(agent_id="agent-other")).record
    sign_in(web)

    listing = web.get("/ui/memories")
    assert listing.status_code == 200 and "memories, newest first" in listing.text
    found = web.get("/ui/memories", params={"q": word})
    assert found.status_code == 200 and "result" in found.text
    memory_id = re.search(r'href="/ui/memories/([0-9a-f-]{36})"', found.text).group(1)
    # filters narrow: the other agent's upload is not among agent-web's memories, and is under its tag
    assert upload.id not in web.get("/ui/memories", params={"agent": "agent-web"}).text
    assert upload.id in web.get("/ui/memories", params={"tag": "lint"}).text
    assert upload.id not in web.get("/ui/memories", params={"skill": slug}).text
    assert memory_id in web.get("/ui/memories", params={"skill": slug}).text

    detail = web.get(f"/ui/memories/{memory_id}")
    assert detail.status_code == 200
    assert paths["billing.jsonl"] in detail.text and "trajectory score" in detail.text
    assert f"{word} raised by billing on port 8081" in detail.text    # the session's own lines
    assert f"/ui/skills/{slug}" in detail.text and "Dagster partition" in detail.text

    # edit: the new text is searchable, the old one kept in the history
    secret = "ghp_" + "x7Qm2Lr9Tb4Kd8Wn3Vc6Zp1Hs5Jf0Ga2Ye7U"
    new_text = f"Start the billing service with --port 8091 when it fails with {word}; zqeditedmark. {secret}"
    form = web.get(f"/ui/memories/{memory_id}/edit")
    saved = web.post(f"/ui/memories/{memory_id}/edit", data={
        "csrf": csrf(form.text), "content": new_text, "context": "billing start", "resolution": "pass --port 8091",
        "tags": "billing, startup"}, follow_redirects=False)
    assert saved.status_code == 303
    after = web.get(saved.headers["location"])
    assert "zqeditedmark" in after.text and "Before the edit of" in after.text and "Saved." in after.text
    assert memory_id in web.get("/ui/memories", params={"q": "zqeditedmark"}).text
    assert secret not in after.text and secret not in svc.memory.get_memory(memory_id).content  # redacted
    # a form without its CSRF token is refused
    refused = web.post(f"/ui/memories/{memory_id}/edit", data={"content": "x"}, follow_redirects=False)
    assert refused.status_code == 403 and "<html" in refused.text

    voted = web.post(f"/ui/memories/{memory_id}/feedback", data={"csrf": csrf(after.text), "helpful": "yes"})
    assert "recorded as helpful" in voted.text and "1 helped" in voted.text

    confirm = web.get(f"/ui/memories/{memory_id}/forget")
    assert confirm.status_code == 200 and f"/ui/skills/{slug}" in confirm.text and "deleted" in confirm.text
    gone = web.post(f"/ui/memories/{memory_id}/forget", data={"csrf": csrf(confirm.text)})
    assert gone.status_code == 200 and "was forgotten" in gone.text
    assert memory_id not in web.get("/ui/memories", params={"q": "zqeditedmark"}).text
    assert web.get(f"/ui/memories/{memory_id}").status_code == 404
    skill = web.get(f"/ui/skills/{slug}")
    assert skill.status_code == 200 and memory_id not in skill.text and "zqeditedmark" not in skill.text
    with svc.db.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM memory_revisions WHERE memory_id = :m"),
                            {"m": memory_id}).scalar_one() == 0


def test_skill_versions_diff_and_overview(web, svc):
    theme = marker("theme")
    ingest(svc, {f"{s[0]}.jsonl": failing_session(theme, *s, extra=marker("s")) for s in SERVICES[:5]}, "agent-sk")
    pipeline(svc)
    slug = svc.run_skill_evolution()["published"][0]["slug"]
    with svc.db.engine.begin() as conn:
        conn.execute(sa.text("UPDATE skills SET score = 0.01"))
    ingest(svc, {f"{s[0]}.jsonl": failing_session(theme, *s, extra=marker("s")) for s in SERVICES[5:9]}, "agent-sk")
    pipeline(svc)
    assert [p["version"] for p in svc.run_skill_evolution()["published"]] == ["1.1.0"]
    sign_in(web)

    listing = web.get("/ui/skills")
    assert listing.status_code == 200 and f"/ui/skills/{slug}" in listing.text
    page = web.get(f"/ui/skills/{slug}")
    assert "1.1.0" in page.text and "1.0.0" in page.text and "<h2" in page.text
    assert 'href="/ui/memories/' in page.text            # evidence ids link to their memories
    diff = web.get(f"/ui/skills/{slug}", params={"diff": "1.0.0"})
    assert 'class="add"' in diff.text and 'class="del"' in diff.text and "Changes from 1.0.0 to 1.1.0" in diff.text

    overview = web.get("/ui/overview")
    assert overview.status_code == 200 and "Tiers" in overview.text and "New memories by week" in overview.text
    assert "rules" in overview.text


def test_everything_the_pages_load_comes_from_the_server(web):
    sign_in(web)
    for path in ("/ui/memories", "/ui/skills", "/ui/overview", "/ui/signin"):
        html = web.get(path).text
        for url in re.findall(r'(?:src|href)="([^"]+)"', html):
            assert not re.match(r"^(https?:)?//", url) or url.startswith("http://127.0.0.1"), (path, url)
    assert web.get("/ui/static/ultron.css").status_code == 200
    assert web.get("/ui/static/ultron.js").status_code == 200
