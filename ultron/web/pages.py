"""The memory browser's routes under ``/ui``: sign in, memories (search, filters, detail,
edit, feedback, forget), skills (versions, diff) and the overview.

Every page but the sign-in form needs the session cookie (:mod:`ultron.web.session`);
every form that changes something also needs its CSRF token. Reads go through
``client.browser``; writes through the SDK (``edit``, ``feedback``, ``forget``), exactly
the calls the HTTP API makes.
"""

from __future__ import annotations

import logging
from importlib.resources import files
from typing import Any
from urllib.parse import quote, urlsplit

from fastapi import APIRouter, FastAPI, Form, HTTPException, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from ultron.access import LOCAL_ADMIN, PAGE_ACTIONS, Refused, acting, authorize
from ultron.browse import PAGE_SIZE, BrowseFilters
from ultron.web import render, session

log = logging.getLogger("ultron.web")

PREFIX = "/ui"
TIERS = ("HOT", "WARM", "COLD")
RECENT = {"day": "last 24 hours", "week": "last 7 days", "month": "last 30 days"}
MAX_FIELD_CHARS = 20_000
SECTIONS = {"memories": "memories", "memory": "memories", "edit": "memories", "forget": "memories",
            "skills": "skills", "skill": "skills", "overview": "overview"}
MAX_TAGS = 32

_templates = Jinja2Templates(directory=str(files("ultron.web").joinpath("templates")))
_templates.env.globals.update(render=render, tiers=TIERS, recent_choices=RECENT, prefix=PREFIX)


class SignInRequired(Exception):
    def __init__(self, next_url: str) -> None:
        self.next_url = next_url


def _key(request: Request) -> bytes:
    return request.app.state.token_bytes


async def _session(request: Request, action: str) -> session.BrowserSession:
    """The signed-in session, its principal allowed ``action`` (``ultron.access.PAGE_ACTIONS``)
    by the one authorization function; no session: to the sign-in form."""
    found = session.verify(_key(request), request.cookies.get(session.COOKIE))
    principal = None
    if found is not None:
        principal = (LOCAL_ADMIN if found.token_id == session.LOCAL else
                     await run_in_threadpool(_client(request).tokens.principal_of, found.token_id))
    if found is None or principal is None:  # no cookie, a forged or expired one, a revoked token
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        raise SignInRequired(target)
    try:
        authorize(principal, PAGE_ACTIONS[action])
    except Refused as exc:
        raise HTTPException(exc.status, exc.message) from None
    acting(principal)
    request.state.principal = principal
    return found


def _check_csrf(request: Request, sess: session.BrowserSession, sent: str | None) -> None:
    if not session.csrf_ok(sess, sent):
        raise HTTPException(403, "this form is stale or came from another site: reload the page and try again")


def _safe_next(target: str | None) -> str:
    """Only a path under /ui: a sign-in link can never send the browser elsewhere."""
    if not target:
        return f"{PREFIX}/memories"
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not parts.path.startswith(PREFIX) or target.startswith("//"):
        return f"{PREFIX}/memories"
    return target


def _page(request: Request, template: str, sess: session.BrowserSession | None, status: int = 200,
          **context: Any) -> HTMLResponse:
    section = SECTIONS.get(template.split(".")[0])
    principal = getattr(request.state, "principal", None)
    can = {action: principal is not None and principal.may(needed) for action, needed in PAGE_ACTIONS.items()}
    return _templates.TemplateResponse(request, template, {"session": sess, "section": section, "can": can,
                                                           "principal": principal, **context},
                                       status_code=status)


def _client(request: Request):
    return request.app.state.client


def _dagster_url(request: Request) -> str:
    settings = request.app.state.settings
    host = settings.dagster_host
    if host in ("0.0.0.0", "::", ""):
        host = request.url.hostname or "127.0.0.1"
    return f"http://{host}:{settings.dagster_port}"


def _tags(text: str) -> list[str]:
    tags = [t.strip() for t in text.replace("\n", ",").split(",") if t.strip()]
    if len(tags) > MAX_TAGS:
        raise HTTPException(400, f"at most {MAX_TAGS} tags")
    return tags


def _field(value: str, name: str) -> str:
    if len(value) > MAX_FIELD_CHARS or "\x00" in value:
        raise HTTPException(400, f"{name} must be text of at most {MAX_FIELD_CHARS} characters")
    return value


def build_router() -> APIRouter:
    router = APIRouter(prefix=PREFIX, include_in_schema=False)

    @router.get("", response_class=RedirectResponse)
    @router.get("/", response_class=RedirectResponse)
    def home() -> RedirectResponse:
        return RedirectResponse(f"{PREFIX}/memories", 303)

    # -- signing in ------------------------------------------------------------------------------

    @router.get("/signin", response_class=HTMLResponse)
    def signin_form(request: Request, next: str | None = None) -> HTMLResponse:
        return _page(request, "signin.html", None, next=_safe_next(next), error=None)

    @router.post("/signin")
    async def signin(request: Request, token: str = Form(""), next: str = Form("")) -> Response:
        principal, why = await run_in_threadpool(_client(request).tokens.resolve, token.strip(), _key(request))
        if principal is None:
            return _page(request, "signin.html", None, status=401, next=_safe_next(next),
                         error=f"That token does not open this server ({why}).")
        value, _ = session.issue(_key(request), principal.token_id or session.LOCAL)
        response = RedirectResponse(_safe_next(next), 303)
        response.set_cookie(session.COOKIE, value, max_age=session.LIFETIME_SECONDS, path=PREFIX, httponly=True,
                            samesite="strict", secure=request.url.scheme == "https")
        return response

    @router.post("/signout")
    async def signout(request: Request, csrf: str = Form("")) -> Response:
        sess = await _session(request, "view")
        _check_csrf(request, sess, csrf)
        response = RedirectResponse(f"{PREFIX}/signin", 303)
        response.delete_cookie(session.COOKIE, path=PREFIX)
        return response

    # -- memories ----------------------------------------------------------------------------------

    @router.get("/memories", response_class=HTMLResponse)
    async def memories(request: Request, q: str = Query("", max_length=2000), type: str = "", tier: str = "",
                       agent: str = "", tag: str = "", skill: str = "", recent: str = "",
                       repo: str = Query("", max_length=4096), cursor: str = "",
                       offset: int = Query(0, ge=0, le=10_000), forgot: str = "") -> HTMLResponse:
        sess = await _session(request, "view")
        browser = _client(request).browser
        filters = BrowseFilters(memory_type=type or None, tier=tier.upper() if tier.upper() in TIERS else None,
                                agent_id=agent or None, tag=tag or None, recent=recent if recent in RECENT else None)
        found = await run_in_threadpool(browser.memories, query=q, filters=filters, skill=skill or None,
                                        stale_repo=repo or None, cursor=cursor or None, offset=offset)
        choices = await run_in_threadpool(browser.choices)
        params = {"q": q, "type": type, "tier": tier, "agent": agent, "tag": tag, "skill": skill, "recent": recent,
                  "repo": repo}
        return _page(request, "memories.html", sess, page=found, params=params, choices=choices,
                     page_size=PAGE_SIZE, forgot=forgot, filtered=any(params.values()))

    def _memory_or_404(request: Request, memory_id: str) -> dict[str, Any]:
        detail = _client(request).browser.memory_detail(memory_id)
        if detail is None:
            raise HTTPException(404, f"no memory with id {memory_id!r}: it may have been forgotten")
        return detail

    @router.get("/memories/{memory_id}", response_class=HTMLResponse)
    async def memory(request: Request, memory_id: str, saved: str = "", voted: str = "") -> HTMLResponse:
        sess = await _session(request, "view")
        detail = await run_in_threadpool(_memory_or_404, request, memory_id)
        return _page(request, "memory.html", sess, detail=detail, m=detail["record"], saved=saved, voted=voted,
                     dagster=_dagster_url(request))

    @router.get("/memories/{memory_id}/edit", response_class=HTMLResponse)
    async def edit_form(request: Request, memory_id: str) -> HTMLResponse:
        sess = await _session(request, "edit")
        detail = await run_in_threadpool(_memory_or_404, request, memory_id)
        if detail["record"].status != "active":
            raise HTTPException(409, "an archived memory cannot be edited")
        return _page(request, "edit.html", sess, m=detail["record"], error=None)

    @router.post("/memories/{memory_id}/edit")
    async def edit(request: Request, memory_id: str, csrf: str = Form(""), content: str = Form(""),
                   context: str = Form(""), resolution: str = Form(""), tags: str = Form("")) -> Response:
        sess = await _session(request, "edit")
        _check_csrf(request, sess, csrf)
        browser = _client(request).browser
        if not content.strip():
            detail = await run_in_threadpool(_memory_or_404, request, memory_id)
            return _page(request, "edit.html", sess, status=400, m=detail["record"],
                         error="The content cannot be empty: forget the memory instead.")
        record = await run_in_threadpool(
            browser.edit, memory_id, content=_field(content, "content"), context=_field(context, "context"),
            resolution=_field(resolution, "resolution"), tags=_tags(tags), edited_by="browser")
        if record is None:
            raise HTTPException(404, f"no active memory with id {memory_id!r}")
        return RedirectResponse(f"{PREFIX}/memories/{quote(memory_id)}?saved=1", 303)

    @router.post("/memories/{memory_id}/feedback")
    async def feedback(request: Request, memory_id: str, csrf: str = Form(""), helpful: str = Form(...)) -> Response:
        sess = await _session(request, "feedback")
        _check_csrf(request, sess, csrf)
        if helpful not in ("yes", "no"):
            raise HTTPException(400, "helpful must be yes or no")
        try:
            await run_in_threadpool(_client(request).feedback, memory_id=memory_id, helpful=helpful == "yes",
                                    note="from the memory browser")
        except KeyError:
            raise HTTPException(404, f"no memory with id {memory_id!r}") from None
        return RedirectResponse(f"{PREFIX}/memories/{quote(memory_id)}?voted={helpful}", 303)

    @router.get("/memories/{memory_id}/forget", response_class=HTMLResponse)
    async def forget_confirm(request: Request, memory_id: str) -> HTMLResponse:
        sess = await _session(request, "forget")
        detail = await run_in_threadpool(_memory_or_404, request, memory_id)
        preview = await run_in_threadpool(_client(request).browser.forget_preview, [memory_id])
        return _page(request, "forget.html", sess, m=detail["record"], preview=preview)

    @router.post("/memories/{memory_id}/forget")
    async def forget(request: Request, memory_id: str, csrf: str = Form("")) -> Response:
        sess = await _session(request, "forget")
        _check_csrf(request, sess, csrf)
        # purged: the memory leaves the database server's files too (tables, statistics, WAL)
        report = await run_in_threadpool(_client(request).forget, memory_ids=[memory_id], purge=True)
        if not report.get("memories_deleted"):
            raise HTTPException(404, f"no memory with id {memory_id!r}")
        log.info("memory browser: forgot memory %s (%s)", memory_id,
                 ", ".join(f"{k}={v}" for k, v in report.items() if isinstance(v, int) and v))
        return RedirectResponse(f"{PREFIX}/memories?forgot={quote(memory_id)}", 303)

    # -- skills ----------------------------------------------------------------------------------------

    @router.get("/skills", response_class=HTMLResponse)
    async def skills(request: Request, offset: int = Query(0, ge=0, le=1_000_000)) -> HTMLResponse:
        sess = await _session(request, "view")
        rows, total = await run_in_threadpool(_client(request).browser.skills_page, offset)
        return _page(request, "skills.html", sess, skills=rows, total=total, offset=offset, page_size=PAGE_SIZE)

    @router.get("/skills/{slug}", response_class=HTMLResponse)
    async def skill(request: Request, slug: str, version: str = Query("", max_length=32),
                    diff: str = Query("", max_length=32)) -> HTMLResponse:
        sess = await _session(request, "view")
        detail = await run_in_threadpool(_client(request).browser.skill_detail, slug, version or None)
        if detail is None:
            raise HTTPException(404, f"no skill {slug!r}" + (f" version {version!r}" if version else ""))
        shown = detail["skill"]
        versions = detail["versions"]
        older = [v for v in versions if v["version"] != shown["version"]]
        base = next((v for v in versions if v["version"] == diff), None) if diff else None
        changes = render.diff_lines(base["skill_md"], shown["skill_md"]) if base else None
        return _page(request, "skill.html", sess, s=shown, versions=versions, older=older, base=base,
                     changes=changes, members=detail["members"])

    # -- overview --------------------------------------------------------------------------------------

    @router.get("/overview", response_class=HTMLResponse)
    async def overview(request: Request) -> HTMLResponse:
        sess = await _session(request, "view")
        data = await run_in_threadpool(_client(request).browser.overview)
        return _page(request, "overview.html", sess, o=data, dagster=_dagster_url(request))

    return router


def mount_browser(app: FastAPI) -> None:
    """``/ui`` and its static files; a page asked for without a session goes to the sign-in
    form, and an error on a page is shown as a page (the API's JSON errors stay for the API)."""
    app.mount(f"{PREFIX}/static", StaticFiles(directory=str(files("ultron.web").joinpath("static"))),
              name="ui-static")
    app.include_router(build_router())

    @app.exception_handler(SignInRequired)
    async def sign_in_first(request: Request, exc: SignInRequired) -> Response:
        return RedirectResponse(f"{PREFIX}/signin?next={quote(exc.next_url, safe='')}", 303)


def is_page(request: Request) -> bool:
    """A request for a browser page (errors answered as HTML, not JSON)."""
    path = request.url.path
    return path == PREFIX or path.startswith(PREFIX + "/")


def error_page(request: Request, status: int, message: str) -> HTMLResponse:
    sess = session.verify(_key(request), request.cookies.get(session.COOKIE))
    return _page(request, "error.html", sess, status=status, status_code=status, message=message)
