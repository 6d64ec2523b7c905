"""The FastAPI application: every route is a thin call into the SDK facade.

Nothing here knows how memories are stored or searched; the routes validate the
request, call :class:`ultron.sdk.Ultron` and shape the answer, so the HTTP API, the
CLI and Python agents cannot drift apart. Errors map onto status codes a client
can act on: 400 for a request the domain refuses, 401 without a valid token, 403
for a path outside the ingest roots, 404 for an unknown id, 413 for an oversized
body, 422 for a body that does not match its schema, 503 while the database,
embedder or LLM is unusable. Anything unexpected is logged and answered with a
JSON 500 that carries no traceback.
"""

from __future__ import annotations

import json
import logging
from contextlib import asynccontextmanager
from typing import Annotated, Any, Iterable, Literal

import sqlalchemy as sa
from fastapi import APIRouter, Depends, FastAPI, HTTPException, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import AfterValidator, ValidationError
from starlette.datastructures import Headers, UploadFile
from starlette.exceptions import HTTPException as StarletteHTTPException

from ultron.api import ingest_paths
from ultron.api.docs import install_docs
from ultron.access import Refused, check_agent
from ultron.api.auth import api_token, require_access
from ultron.api.mcp_mount import mount_mcp
from ultron.web.pages import error_page, is_page, mount_browser
from ultron.api.models import (
    MAX_PATH_CHARS, BatchSearchResponse, DetailsResponse, ErrorBody, ForgetResponse, Health, IngestPathsRequest, IngestResponse,
    IngestTextRequest, IngestTextResponse, MemoryBatchSearchRequest, MemoryDetailsRequest,
    MemorySearchRequest, MemoryUploadRequest,
    SearchResponse, Skill, SkillSearchRequest, SkillSearchResponse, Stats, StoredMemory, ValidationErrorBody,
)
from ultron.api.models import (
    MAX_PAGE, ContextRequest, ContextResponse, FeedbackRequest, FeedbackResponse, MemoryFull, MemoryList, SkillList,
    Tier,
)
from ultron.db.database import DatabaseError
from ultron.llm.errors import LLMError
from ultron.context import EmbeddingProfileMismatch
from ultron.arguments import optional_agent_id, storable
from ultron.sessions.discovery import validate_agent_id
from ultron.settings import Settings

log = logging.getLogger("ultron.api")

MAX_JSON_BYTES = 8 * 1024 * 1024
MAX_UPLOAD_FILES = 100
_FORM_OVERHEAD_BYTES = 1024 * 1024


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("ultron")
    except Exception:  # noqa: BLE001 - running from a checkout without metadata
        return "0.0.0"


class SafeJSONResponse(JSONResponse):
    """ASCII-escaped JSON: an error message quoting odd client input (lone surrogates)
    still encodes, so an error response can never itself fail with a 500."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, separators=(",", ":")).encode("ascii")


class BodyTooLarge(HTTPException):
    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body is larger than {limit // (1024 * 1024)} MB")


class BodySizeLimit:
    """Caps request bodies before anything buffers them: Content-Length is checked up
    front, and a chunked body is counted as it streams in."""

    def __init__(self, app, json_limit: int = MAX_JSON_BYTES,
                 upload_limit: int = ingest_paths.MAX_UPLOAD_BYTES + _FORM_OVERHEAD_BYTES) -> None:
        self.app = app
        self.json_limit = json_limit
        self.upload_limit = upload_limit

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        multipart = headers.get("content-type", "").lower().startswith("multipart/")
        limit = self.upload_limit if multipart else self.json_limit
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            response = SafeJSONResponse({"detail": BodyTooLarge(limit).detail}, 413)
            await response(scope, receive, send)
            return
        seen = 0

        async def limited_receive():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise BodyTooLarge(limit)
            return message

        await self.app(scope, limited_receive, send)


# -- error handling -----------------------------------------------------------------------------


def _field_errors(errors: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for e in errors:
        loc = [p if isinstance(p, int) else str(p) for p in e.get("loc", ())]
        out.append({"loc": loc, "msg": str(e.get("msg", "invalid")), "type": str(e.get("type", "value_error"))})
    return out


def _validation_response(errors: list[dict[str, Any]]) -> SafeJSONResponse:
    summary = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'request'}: {e['msg']}" for e in errors)
    return SafeJSONResponse({"detail": summary or "invalid request", "errors": errors}, 422)


def _allowed_methods(request: Request) -> str:
    """Every method some route serves on this path (GET and DELETE on /memories/{id})."""
    from starlette.routing import Match

    methods: set[str] = set()
    for route in request.app.router.routes:
        if getattr(route, "methods", None) and route.matches(request.scope)[0] != Match.NONE:
            methods |= set(route.methods)
    return ", ".join(sorted(methods))


def _error(request: Request, body: dict[str, Any], status: int, headers: dict[str, str] | None = None):
    """The API's JSON error, or for a memory browser page the same message as a page."""
    if is_page(request):
        return error_page(request, status, str(body.get("detail", "")))
    return SafeJSONResponse(body, status, headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError):
        if is_page(request):
            return error_page(request, 422, "; ".join(f"{'.'.join(str(p) for p in e['loc'][1:])}: {e['msg']}"
                                                      for e in _field_errors(exc.errors())))
        return _validation_response(_field_errors(exc.errors()))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        headers = exc.headers
        if exc.status_code == 405:  # Starlette names the first matching route's methods only
            headers = {**(headers or {}), "Allow": _allowed_methods(request)}
        return _error(request, {"detail": str(exc.detail)}, exc.status_code, headers=headers)

    @app.exception_handler(Refused)
    async def access_refused(request: Request, exc: Refused):  # an agent-bound token's limits, met inside
        headers = {"WWW-Authenticate": 'Bearer realm="ultron"'} if exc.status == 401 else None
        return _error(request, {"detail": exc.message}, exc.status, headers)

    @app.exception_handler(ValueError)
    async def refused(request: Request, exc: ValueError):
        return _error(request, {"detail": str(exc) or "invalid request"}, 400)

    @app.exception_handler(EmbeddingProfileMismatch)
    @app.exception_handler(DatabaseError)
    async def misconfigured(request: Request, exc: Exception):
        log.error("%s", exc)
        return _error(request, {"detail": str(exc)}, 503)

    @app.exception_handler(sa.exc.OperationalError)
    @app.exception_handler(sa.exc.InterfaceError)
    @app.exception_handler(sa.exc.TimeoutError)
    async def database_down(request: Request, exc: Exception):
        log.error("database unavailable: %s", exc)
        return _error(request, {"detail": "the database is unavailable; try again shortly"}, 503)

    @app.exception_handler(LLMError)
    async def llm_down(request: Request, exc: LLMError):
        log.error("LLM unavailable: %s", exc)
        return _error(request, {"detail": f"the LLM is unavailable: {exc}"}, 503)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception):
        # Starlette logs the traceback after this response is sent; the client gets none.
        log.error("unexpected error on %s %s: %r", request.method, request.url.path, exc)
        return _error(request, {"detail": "internal error; the server log has the details"}, 500)


# -- dependencies ---------------------------------------------------------------------------------


def _storable_or_none(value: str | None) -> str | None:
    return None if value is None else storable(value)



def get_client(request: Request):
    return request.app.state.client


Client = Annotated[Any, Depends(get_client)]
MemoryId = Annotated[str, Path(min_length=1, max_length=128), AfterValidator(storable)]
Slug = Annotated[str, Path(min_length=1, max_length=200), AfterValidator(storable)]
SkillVersion = Annotated[str | None, Query(max_length=32, description="a published version, e.g. 1.0.0"),
                         AfterValidator(_storable_or_none)]
SessionFile = Annotated[str, Query(min_length=1, max_length=MAX_PATH_CHARS, pattern="^/",
                                    description="the session file's absolute path, as ingested (the ingest "
                                                "report's path)"),
                        AfterValidator(storable)]
QueryAgentId = Annotated[str | None, Query(max_length=128, description="only this agent's copy of the file"),
                         AfterValidator(_storable_or_none), AfterValidator(optional_agent_id)]
MemoryAgentId = Annotated[str | None, Query(max_length=128, description="only this agent's memories"),
                          AfterValidator(_storable_or_none), AfterValidator(optional_agent_id)]
PageLimit = Annotated[int, Query(ge=1, le=MAX_PAGE, description=f"at most this many (1-{MAX_PAGE})")]
PageOffset = Annotated[int, Query(ge=0, le=10_000_000, description="skip this many first")]
PathAgentId = Annotated[str, Path(min_length=1, max_length=128), AfterValidator(storable),
                        AfterValidator(validate_agent_id)]
Purge = Annotated[bool, Query(description="also purge the deleted rows from the database server's files: VACUUM "
                                          "FULL of the changed tables and their statistics, checkpoints and WAL "
                                          "switches (locks each table while it is rewritten; takes seconds)")]


def _forgot_anything(report: dict[str, Any]) -> bool:
    from ultron.forget import anything_forgotten

    return anything_forgotten(report)

COMMON = {400: {"model": ErrorBody, "description": "a body that is not UTF-8 JSON, or a request the domain "
                                                 "refuses (the message says why)"},
          401: {"model": ErrorBody, "description": "missing or wrong bearer token"},
          422: {"model": ValidationErrorBody, "description": "the request does not match its schema"},
          413: {"model": ErrorBody, "description": "request body over 8 MB (100 MB for uploads)"},
          503: {"model": ErrorBody, "description": "database, embedder or LLM unavailable"}}
NOT_FOUND = {404: {"model": ErrorBody, "description": "unknown id or slug"}}


# -- routes -----------------------------------------------------------------------------------------


def _ingest_openapi() -> dict[str, Any]:
    paths_schema = IngestPathsRequest.model_json_schema()
    upload_schema = {
        "type": "object", "required": ["agent_id", "files"],
        "properties": {
            "agent_id": paths_schema["properties"]["agent_id"],
            "files": {"type": "array", "minItems": 1, "maxItems": MAX_UPLOAD_FILES,
                      "items": {"type": "string", "format": "binary"},
                      "description": ".jsonl session files (100 MB per request in all)"},
        },
    }
    return {"requestBody": {"required": True, "content": {
        "application/json": {"schema": paths_schema},
        "multipart/form-data": {"schema": upload_schema},
    }}}


def build_routes(router: APIRouter, settings: Settings) -> None:
    @router.post("/ingest", tags=["ingest"], response_model=IngestResponse, openapi_extra=_ingest_openapi(),
                 responses={**COMMON, 403: {"model": ErrorBody, "description": "path outside the ingest roots"},
                            404: {"model": ErrorBody, "description": "path does not exist"},
                            415: {"model": ErrorBody, "description": "neither JSON nor multipart"}})
    async def ingest(request: Request, client: Client) -> Any:
        """Ingest session .jsonl files: server paths inside ULTRON_INGEST_ROOTS (JSON), or files
        uploaded as multipart (stored under $ULTRON_HOME/uploads/{agent_id}/). Returns the
        per-file report; bad lines are reported with their line numbers, not refused."""
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind == "multipart/form-data":
            paths, agent_id = await _receive_uploads(request, settings)
        elif kind == "application/json" or kind.endswith("+json"):
            paths, agent_id = _confined_paths(await request.body(), settings)
        else:
            raise HTTPException(415, "send application/json {\"paths\": [...], \"agent_id\": ...} or "
                                     "multipart/form-data with .jsonl files and an agent_id field")
        report = await run_in_threadpool(client.ingest, paths, agent_id)
        result = report.to_dict()
        if kind != "multipart/form-data":  # the server read files of its own: who asked, and which
            from ultron.access import digest

            await run_in_threadpool(client.audit, "ingest", f"agent:{digest(agent_id)}",
                                    paths=[digest(str(p)) for p in paths][:100],
                                    **{k: v for k, v in result.get("totals", {}).items() if isinstance(v, int)})
        return result

    @router.post("/ingest/text", tags=["ingest"], response_model=IngestTextResponse, responses=COMMON)
    def ingest_text(body: IngestTextRequest, client: Client) -> Any:
        """Extract memories from plain text (LLM, or rules offline) and store them directly."""
        return client.ingest_text(body.text, body.agent_id)

    @router.post("/memories/upload", tags=["memories"], response_model=StoredMemory, responses=COMMON)
    def upload_memory(body: MemoryUploadRequest, client: Client) -> Any:
        """Store one memory; the server decides its type, redacts it, and merges it into a near
        duplicate of the same type when there is one (action: merged). ``agent_id`` records
        the agent it comes from."""
        from ultron.memory.service import Provenance

        result = client.memory.upload_memory(body.content, body.context, body.resolution, body.tags,
                                             provenance=Provenance(agent_id=body.agent_id), shared=body.shared)
        return {**result.record.to_dict("full"), "action": result.action}

    @router.get("/memories", tags=["memories"], response_model=MemoryList, responses=COMMON)
    def list_memories(client: Client, limit: PageLimit = 50, offset: PageOffset = 0,
                      tier: Annotated[Tier | None, Query(description="only this tier")] = None,
                      agent_id: MemoryAgentId = None) -> Any:
        """Active memories, newest first, one page at a time (L1 detail; no hits counted)."""
        return client.list_memories(limit, offset, tier, agent_id)

    @router.get("/memories/{memory_id}", tags=["memories"], response_model=MemoryFull,
                responses={**COMMON, **NOT_FOUND})
    def get_memory(memory_id: MemoryId, client: Client) -> Any:
        """One memory in full, any status, with its feedback counts (a read: no hit counted)."""
        memory = client.get_memory(memory_id)
        if memory is None:
            raise HTTPException(404, f"no memory with id {memory_id!r}")
        return memory

    @router.post("/memories/{memory_id}/feedback", tags=["feedback"], response_model=FeedbackResponse,
                 response_model_exclude_none=True, responses={**COMMON, **NOT_FOUND})
    def memory_feedback(memory_id: MemoryId, body: FeedbackRequest, client: Client) -> Any:
        """Say whether a memory helped. Helpful: more hits, fresh recency. Not helpful: a lower
        rank; after ULTRON_FEEDBACK_DEMOTE_AFTER net negatives the memory goes COLD (and the
        cold TTL archives it)."""
        try:
            return client.feedback(memory_id=memory_id, helpful=body.helpful, note=body.note, agent_id=body.agent_id)
        except KeyError:
            raise HTTPException(404, f"no memory with id {memory_id!r}") from None

    @router.post("/skills/{name}/feedback", tags=["feedback"], response_model=FeedbackResponse,
                 response_model_exclude_none=True, responses={**COMMON, **NOT_FOUND})
    def skill_feedback(name: Slug, body: FeedbackRequest, client: Client) -> Any:
        """Say whether a skill helped: its reliability and lifecycle move (probationary → active →
        retired; a retired skill is no longer served)."""
        try:
            return client.feedback(skill=name, helpful=body.helpful, note=body.note, agent_id=body.agent_id)
        except KeyError as exc:
            raise HTTPException(404, str(exc.args[0]) if exc.args else f"no skill named {name!r}") from None

    @router.post("/context", tags=["context"], response_model=ContextResponse, responses=COMMON)
    def context_bundle(body: ContextRequest, client: Client) -> Any:
        """One prompt-ready block for a task, within token_budget tokens: the most relevant
        skills (when to use, steps), then memories (L1, or L0 when space is short), each
        labelled with its id for feedback."""
        return client.context_bundle(body.task, body.token_budget, body.agent_id, repo_root=body.repo_root,
                                     session_id=body.session_id)

    @router.post("/memories/search", tags=["memories"], response_model=SearchResponse,
                 response_model_exclude_unset=True, responses=COMMON)
    def search_memories(body: MemorySearchRequest, client: Client) -> Any:
        """Hybrid search (vector + full text, tier boost, time decay); each hit counts as one use."""
        results = client.search_memories(body.query, body.detail_level, body.limit, body.tier, body.tags,
                                         body.agent_id, repo_root=body.repo_root)
        return {"results": [r.to_dict(body.detail_level) for r in results], "count": len(results)}

    @router.post("/memories/search/batch", tags=["memories"], response_model=BatchSearchResponse,
                 response_model_exclude_unset=True, responses=COMMON)
    def search_memories_batch(body: MemoryBatchSearchRequest, client: Client) -> Any:
        """Several searches in one call (up to 32 queries, same filters): the queries are embedded
        together, so this costs less than as many calls to /memories/search."""
        found = client.search_memories_batch(body.queries, body.detail_level, body.limit, body.tier, body.tags,
                                             body.agent_id)
        return {"searches": [{"results": [r.to_dict(body.detail_level) for r in results], "count": len(results)}
                             for results in found]}

    @router.post("/memories/details", tags=["memories"], response_model=DetailsResponse, responses=COMMON)
    def memory_details(body: MemoryDetailsRequest, client: Client) -> Any:
        """Full records, in the order asked; ids not in the store are listed under missing."""
        ids = list(dict.fromkeys(body.ids))
        records = client.get_memory_details(ids)
        found = {r.id for r in records}
        return {"memories": [r.to_dict("full") for r in records], "missing": [i for i in ids if i not in found]}

    @router.delete("/memories/{memory_id}", tags=["memories"], response_model=ForgetResponse,
                   responses={**COMMON, **NOT_FOUND})
    def forget_memory(memory_id: MemoryId, client: Client, purge: Purge = False) -> Any:
        """Delete a memory and its contributions."""
        counts = client.forget(memory_ids=[memory_id], purge=purge)
        if not counts.get("memories_deleted"):
            raise HTTPException(404, f"no memory with id {memory_id!r}")
        return counts

    @router.delete("/sessions", tags=["forget"], response_model=ForgetResponse,
                   responses={**COMMON, 404: {"model": ErrorBody, "description": "nothing of that session file"}})
    def forget_session(client: Client, session_file: SessionFile,
                       agent_id: QueryAgentId = None, purge: Purge = False) -> Any:
        """Forget a session file everywhere: its session rows, messages, segments, raw upload and
        memories (merged memories rebuilt from their other sources), the clusters, skills and
        SFT exports built from them, and the uploaded copy under ULTRON_HOME. ``agent_id``
        limits it to that agent's copy of the file. Returns the report; ``partitions`` lists the
        Dagster partitions to remove."""
        report = client.forget(session_file=session_file, agent_id=agent_id, purge=purge)
        if not _forgot_anything(report):
            raise HTTPException(404, f"nothing was ingested from {session_file!r}"
                                     + (f" for agent {agent_id!r}" if agent_id else ""))
        return report

    @router.delete("/agents/{agent_id}", tags=["forget"], response_model=ForgetResponse,
                   responses={**COMMON, 404: {"model": ErrorBody, "description": "nothing of that agent"}})
    def forget_agent(agent_id: PathAgentId, client: Client, purge: Purge = False) -> Any:
        """Forget an agent everywhere: every session, segment, raw upload and memory of it, and
        the clusters, skills and SFT exports built from them. Returns the report."""
        report = client.forget(agent_id=agent_id, purge=purge)
        if not _forgot_anything(report):
            raise HTTPException(404, f"nothing is stored for agent {agent_id!r}")
        return report

    @router.post("/skills/search", tags=["skills"], response_model=SkillSearchResponse, responses=COMMON)
    def search_skills(body: SkillSearchRequest, client: Client) -> Any:
        """Current skill versions closest to the query; superseded versions never appear."""
        results = client.search_skills(body.query, body.limit)
        return {"results": results, "count": len(results)}

    @router.get("/skills", tags=["skills"], response_model=SkillList, responses=COMMON)
    def list_skills(client: Client, limit: PageLimit = 50, offset: PageOffset = 0) -> Any:
        """Current skills by name, one page at a time; retired skills are never listed."""
        return {"skills": client.list_skills(limit, offset), "limit": limit, "offset": offset,
                "total": client.skills.count_skills()}

    @router.get("/skills/{slug}", tags=["skills"], response_model=Skill,
                responses={**COMMON, **NOT_FOUND,
                           200: {"description": "the skill (JSON), or its SKILL.md with format=markdown",
                                 "content": {"text/markdown": {"schema": {"type": "string"}}}}})
    def get_skill(slug: Slug, client: Client,
                  format: Literal["json", "markdown"] = Query("json", description="markdown: SKILL.md as text"),
                  version: SkillVersion = None) -> Any:
        """The current version of a skill (or the given one, superseded versions included)
        with its SKILL.md and metadata."""
        skill = client.skills.get_skill(slug, version)
        if skill is None:
            raise HTTPException(404, f"no skill with slug {slug!r}" + (f" and version {version!r}" if version else ""))
        if format == "markdown":
            return PlainTextResponse(skill["skill_md"], media_type="text/markdown; charset=utf-8")
        return skill

    @router.get("/stats", tags=["status"], response_model=Stats, responses=COMMON)
    def stats(client: Client) -> Any:
        """Sessions, segments, memories by tier and type, clusters, skills."""
        return client.stats()


def _confined_paths(raw: bytes, settings: Settings) -> tuple[list[str], str]:
    try:
        body = IngestPathsRequest.model_validate_json(raw)
    except ValidationError as exc:
        raise RequestValidationError([{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]) from None
    check_agent(body.agent_id)  # an agent-bound token ingests only as its agents
    roots = settings.ingest_roots
    confined = []
    for raw_path in body.paths:
        try:
            confined.append(str(ingest_paths.confine(raw_path, roots)))
        except ingest_paths.PathNotAllowed as exc:
            raise HTTPException(403, str(exc)) from None
        except ingest_paths.PathNotFound as exc:
            raise HTTPException(404, str(exc)) from None
        except ingest_paths.PathNotAbsolute as exc:
            raise RequestValidationError([{"loc": ("body", "paths"), "msg": str(exc), "type": "value_error"}]) \
                from None
    return confined, body.agent_id


async def _receive_uploads(request: Request, settings: Settings) -> tuple[list[str], str]:
    form = await request.form(max_files=MAX_UPLOAD_FILES, max_fields=20)
    try:
        agent_id = form.get("agent_id")
        if not isinstance(agent_id, str):
            raise RequestValidationError([{"loc": ("body", "agent_id"), "msg": "Field required",
                                           "type": "missing"}])
        try:
            ingest_paths.validate_agent_id(agent_id)
        except ValueError as exc:
            raise RequestValidationError([{"loc": ("body", "agent_id"), "msg": str(exc), "type": "value_error"}]) \
                from None
        check_agent(agent_id)  # before anything is written under that agent's uploads
        files = [v for _k, v in form.multi_items() if isinstance(v, UploadFile)]
        if not files:
            raise RequestValidationError([{"loc": ("body", "files"), "msg": "attach at least one .jsonl file",
                                           "type": "missing"}])
        for f in files:  # refuse a bad name before writing anything
            try:
                ingest_paths.upload_name(f.filename)
            except ValueError as exc:
                raise RequestValidationError([{"loc": ("body", "files"), "msg": str(exc),
                                               "type": "value_error"}]) from None
        if sum(f.size or 0 for f in files) > ingest_paths.MAX_UPLOAD_BYTES:
            raise HTTPException(413, f"uploads are limited to {ingest_paths.MAX_UPLOAD_BYTES // (1024 * 1024)} MB "
                                     "per request")
        saved: list[str] = []
        budget = ingest_paths.MAX_UPLOAD_BYTES
        for f in files:
            try:
                path, written = await run_in_threadpool(ingest_paths.save_upload, settings.home, agent_id,
                                                        f.filename, f.file, budget)
            except ingest_paths.UploadTooLarge as exc:
                raise HTTPException(413, str(exc)) from None
            budget -= written
            saved.append(str(path))
        return list(dict.fromkeys(saved)), agent_id
    finally:
        await form.close()


def create_app(settings: Settings | None = None, *, client=None, token: str | None = None) -> FastAPI:
    """The API bound to one Ultron client (created at startup when not given).

    ``token`` defaults to :func:`ultron.api.auth.api_token` for the settings' host."""
    settings = settings or Settings.from_env()
    token = token if token is not None else api_token(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        if app.state.client is None:
            from ultron.sdk import Ultron

            app.state.client = await run_in_threadpool(Ultron, settings)
        async with app.state.mcp_sessions.run():  # the /mcp transport's task group
            yield

    app = FastAPI(
        title="Ultron", version=_version(), lifespan=lifespan, docs_url=None, redoc_url=None,
        description="Memory for LLM agents: ingest sessions and text, search and manage memories, "
                    "read crystallised skills. Every route except /health (and these docs) needs "
                    "`Authorization: Bearer <token>`.",
        openapi_tags=[
            {"name": "ingest", "description": "session files and plain text in"},
            {"name": "memories", "description": "upload, search, details, forget"},
            {"name": "skills", "description": "skills crystallised from memory clusters"},
            {"name": "feedback", "description": "agents say whether a memory or a skill helped"},
            {"name": "context", "description": "one prompt-ready block of skills and memories for a task"},
            {"name": "forget", "description": "forget a session file or an agent everywhere"},
            {"name": "status", "description": "health and counts"},
        ],
    )
    app.state.client = client
    app.state.settings = settings
    app.state.token_bytes = token.encode("utf-8")
    app.add_middleware(BodySizeLimit)
    install_error_handlers(app)
    install_docs(app)  # /docs and /redoc with their scripts served here: they work offline
    mount_browser(app)  # the memory browser at /ui: its own sign-in, then a session cookie

    # GET and HEAD as two routes, each with its own operation id: one route with both methods
    # gives both the same id, and FastAPI warns "Duplicate Operation ID" on the first /openapi.json.
    @app.head("/health", tags=["status"], operation_id="health_head", response_model=Health,
              responses={503: {"model": Health, "description": "the database does not answer"}})
    @app.get("/health", tags=["status"], operation_id="health", response_model=Health,
             responses={503: {"model": Health, "description": "the database does not answer"}})
    def health() -> Any:
        """Liveness and database reachability; needs no token and reveals nothing else."""
        ok = True
        try:
            app.state.client.db.ping()
        except Exception as exc:  # noqa: BLE001 - health reports, it does not fail
            log.warning("health check: database unavailable: %s", exc)
            ok = False
        body = {"status": "ok" if ok else "unavailable", "database": "ok" if ok else "unavailable",
                "version": app.version}
        return body if ok else SafeJSONResponse(body, 503)

    router = APIRouter(dependencies=[Depends(require_access)])
    build_routes(router, settings)
    app.include_router(router)
    app.state.mcp_sessions = mount_mcp(app)
    return app
