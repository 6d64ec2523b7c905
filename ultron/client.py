"""A Python client of the HTTP API, for agents on machines without the database.

``UltronClient`` and ``AsyncUltronClient`` mirror the SDK's memory, skill, context
and feedback calls (same names, same arguments, same return shapes: a search gives a
list of hits, an unknown memory or skill gives None), so code written against
:class:`ultron.sdk.Ultron` can talk to a remote server by swapping the object. The
dicts are the JSON the server sends.

This module imports nothing but httpx and the settings (an import-linter contract
keeps it so): installing the package and pointing ULTRON_API_URL at a server is all an
agent needs. Errors are typed (:class:`AuthError`, :class:`NotFound`,
:class:`InvalidRequest`, :class:`ServerUnavailable`, all :class:`UltronAPIError`) and
carry the server's message. Idempotent GETs are retried on connection errors; writes
never are, so an upload or a vote is never sent twice.
"""

from __future__ import annotations

import asyncio
import ipaddress
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable
from urllib.parse import quote, urlsplit

import httpx

from ultron.settings import Settings

__all__ = ["AsyncUltronClient", "AuthError", "InvalidRequest", "NotFound", "ServerUnavailable",
           "UltronAPIError", "UltronClient", "UltronConnectionError", "default_base_url", "default_token"]

DEFAULT_TIMEOUT = 30.0
DEFAULT_RETRIES = 3
#: The file the server writes its generated loopback token to (ultron.api.auth.TOKEN_FILE;
#: repeated here because this module must not import the server).
TOKEN_FILE = "api_token"


# -- errors -------------------------------------------------------------------------------------


class UltronAPIError(Exception):
    """The server refused or failed a request; ``status`` is its HTTP status, ``message``
    its ``detail``, ``errors`` the located field errors of a 422."""

    def __init__(self, status: int | None, message: str, *, method: str = "", path: str = "",
                 errors: list[dict[str, Any]] | None = None) -> None:
        self.status = status
        self.message = message
        self.method = method
        self.path = path
        self.errors = errors or []
        where = f"{method} {path}: " if method else ""
        super().__init__(f"{where}{status} {message}" if status is not None else f"{where}{message}")


class AuthError(UltronAPIError):
    """401/403: no token, a wrong token (see ULTRON_API_TOKEN), or a forbidden path."""


class NotFound(UltronAPIError):
    """404: unknown memory id or skill name."""


class InvalidRequest(UltronAPIError):
    """400/422: arguments the server refuses; the message names the field and why."""


class ServerUnavailable(UltronAPIError):
    """503: the server's database, embedder or LLM is unusable right now."""


class UltronConnectionError(UltronAPIError):
    """The server could not be reached (after retries, for reads); ``status`` is None."""


def _error_for(response: httpx.Response) -> UltronAPIError:
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and "detail" in body:
        detail = body["detail"]
        message = detail if isinstance(detail, str) else str(detail)
        errors = body.get("errors") if isinstance(body.get("errors"), list) else None
    else:
        message, errors = (response.text[:500] or response.reason_phrase), None
    status = response.status_code
    kind = {401: AuthError, 403: AuthError, 404: NotFound, 400: InvalidRequest, 422: InvalidRequest,
            503: ServerUnavailable}.get(status, UltronAPIError)
    return kind(status, message, method=response.request.method, path=response.request.url.path, errors=errors)


# -- defaults ------------------------------------------------------------------------------------


def default_base_url(settings: Settings | None = None) -> str:
    """ULTRON_API_URL, else the address ``ultron serve`` listens on by default."""
    settings = settings or Settings.from_env()
    if settings.api_url:
        return settings.api_url.rstrip("/")
    host = settings.api_host
    if host in ("0.0.0.0", "::", ""):  # listening everywhere: this machine is reachable on loopback
        host = "127.0.0.1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{settings.api_port}"


def _is_loopback(base_url: str) -> bool:
    host = (urlsplit(base_url).hostname or "").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def default_token(base_url: str, settings: Settings | None = None) -> str | None:
    """ULTRON_API_TOKEN, else (for a server on this machine only) the token a loopback
    server generated into ``$ULTRON_HOME/api_token``. A remote server never gets the
    local token: it is a secret of this machine's server."""
    settings = settings or Settings.from_env()
    if settings.api_token and settings.api_token.strip():
        return settings.api_token.strip()
    return settings.local_api_token() if _is_loopback(base_url) else None


# -- requests, shared by both clients ---------------------------------------------------------------


@dataclass
class _Call:
    """One API call: what to send and how to turn the answer into the SDK's shape."""

    method: str
    path: str
    json: Any = None
    params: dict[str, Any] | None = None
    unwrap: Callable[[Any], Any] = lambda body: body
    none_on_404: bool = False
    auth: bool = True
    accept_status: tuple[int, ...] = field(default_factory=tuple)

    @property
    def retryable(self) -> bool:
        return self.method in ("GET", "HEAD")


def _segment(value: str) -> str:
    return quote(str(value), safe="")


def _without_none(**values: Any) -> dict[str, Any]:
    """Optional fields the caller left out are not sent: the server's defaults apply."""
    return {k: v for k, v in values.items() if v is not None}


def _feedback_call(memory_id: str | None, skill: str | None, helpful: bool, note: str,
                   agent_id: str | None) -> _Call:
    if (memory_id is None) == (skill is None):
        raise ValueError("give exactly one of memory_id or skill")
    if not isinstance(helpful, bool):
        raise ValueError("helpful must be True or False")
    body = _without_none(helpful=helpful, note=note, agent_id=agent_id)
    path = f"/memories/{_segment(memory_id)}/feedback" if memory_id is not None else \
        f"/skills/{_segment(skill)}/feedback"
    return _Call("POST", path, body)


class _Calls:
    """The request of every method; the two clients only differ in how they send it."""

    @staticmethod
    def upload_memory(content, context, resolution, tags, agent_id, shared=False) -> _Call:
        body = {"content": content, "context": context, "resolution": resolution,
                **_without_none(tags=None if tags is None else list(tags), agent_id=agent_id),
                **({"shared": True} if shared else {})}
        return _Call("POST", "/memories/upload", body)

    @staticmethod
    def search_memories(query, detail_level, limit, tier, tags, agent_id, repo_root=None) -> _Call:
        body = {"query": query, "detail_level": detail_level, "limit": limit,
                **_without_none(tier=tier, tags=None if tags is None else list(tags), agent_id=agent_id,
                                repo_root=repo_root)}
        return _Call("POST", "/memories/search", body, unwrap=lambda b: b["results"])

    @staticmethod
    def search_memories_batch(queries, detail_level, limit, tier, tags, agent_id) -> _Call:
        body = {"queries": list(queries), "detail_level": detail_level, "limit": limit,
                **_without_none(tier=tier, tags=None if tags is None else list(tags), agent_id=agent_id)}
        return _Call("POST", "/memories/search/batch", body,
                     unwrap=lambda b: [s["results"] for s in b["searches"]])

    @staticmethod
    def get_memory_details(ids: list[str]) -> _Call:
        return _Call("POST", "/memories/details", {"ids": ids}, unwrap=lambda b: b["memories"])

    @staticmethod
    def get_memory(memory_id) -> _Call:
        return _Call("GET", f"/memories/{_segment(memory_id)}", none_on_404=True)

    @staticmethod
    def search_skills(query, limit) -> _Call:
        return _Call("POST", "/skills/search", {"query": query, "limit": limit}, unwrap=lambda b: b["results"])

    @staticmethod
    def get_skill(name) -> _Call:
        return _Call("GET", f"/skills/{_segment(name)}", none_on_404=True)

    @staticmethod
    def list_skills(limit, offset) -> _Call:
        return _Call("GET", "/skills", params={"limit": limit, "offset": offset}, unwrap=lambda b: b["skills"])

    @staticmethod
    def context_bundle(task, token_budget, agent_id, repo_root=None, session_id=None) -> _Call:
        return _Call("POST", "/context", {"task": task, "token_budget": token_budget,
                                          **_without_none(agent_id=agent_id, repo_root=repo_root,
                                                          session_id=session_id)})

    @staticmethod
    def stats() -> _Call:
        return _Call("GET", "/stats")

    @staticmethod
    def health() -> _Call:
        # 503 carries the same body ("database": "unavailable"): health reports, it does not raise.
        return _Call("GET", "/health", auth=False, accept_status=(503,))


class _Base:
    def __init__(self, base_url: str | None, token: str | None, timeout: float, retries: int,
                 settings: Settings | None) -> None:
        if base_url is None or token is None:
            settings = settings or Settings.from_env()
        self.base_url = (base_url or default_base_url(settings)).rstrip("/")
        self.token = token if token is not None else default_token(self.base_url, settings)
        self.timeout = timeout
        self.retries = max(1, retries)
        self._headers = {"Accept": "application/json", "User-Agent": "ultron-client"}

    def _request_kwargs(self, call: _Call) -> dict[str, Any]:
        headers = {}
        if call.auth and self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        kwargs: dict[str, Any] = {"headers": headers}
        if call.json is not None:
            kwargs["json"] = call.json
        if call.params:
            kwargs["params"] = call.params
        return kwargs

    def _attempts(self, call: _Call) -> int:
        return self.retries if call.retryable else 1

    @staticmethod
    def _backoff(attempt: int) -> float:
        return 0.2 * 2 ** attempt

    @staticmethod
    def _unreachable(call: _Call, exc: httpx.TransportError, base_url: str) -> UltronConnectionError:
        return UltronConnectionError(None, f"cannot reach the Ultron API at {base_url}: {exc!r}",
                                     method=call.method, path=call.path)

    @staticmethod
    def _result(call: _Call, response: httpx.Response) -> Any:
        if response.is_success or response.status_code in call.accept_status:
            return call.unwrap(response.json()) if response.content else None
        if call.none_on_404 and response.status_code == 404:
            return None
        raise _error_for(response)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base_url!r})"


# -- the synchronous client ------------------------------------------------------------------------


class UltronClient(_Base):
    """Blocking client. ``base_url`` defaults to ULTRON_API_URL (else
    http://127.0.0.1:8765); ``token`` to ULTRON_API_TOKEN, else the token a local server
    wrote to ``$ULTRON_HOME/api_token``. Use it as a context manager, or call close()."""

    def __init__(self, base_url: str | None = None, token: str | None = None, timeout: float = DEFAULT_TIMEOUT,
                 *, retries: int = DEFAULT_RETRIES, settings: Settings | None = None) -> None:
        super().__init__(base_url, token, timeout, retries, settings)
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout, headers=self._headers)

    def __enter__(self) -> "UltronClient":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _run(self, call: _Call) -> Any:
        attempts = self._attempts(call)
        for attempt in range(attempts):
            try:
                response = self._http.request(call.method, call.path, **self._request_kwargs(call))
                break
            except httpx.TransportError as exc:
                if attempt + 1 >= attempts:
                    raise self._unreachable(call, exc, self.base_url) from exc
                time.sleep(self._backoff(attempt))
        return self._result(call, response)

    # memories

    def upload_memory(self, content: str, context: str = "", resolution: str = "",
                      tags: Iterable[str] | None = None, agent_id: str | None = None,
                      shared: bool = False) -> dict[str, Any]:
        """Store a memory; returns the record as stored or merged (``action``). ``shared``:
        tokens bound to other agents see it too."""
        return self._run(_Calls.upload_memory(content, context, resolution, tags, agent_id, shared))

    def search_memories(self, query: str, detail_level: str = "l1", limit: int = 10, tier: str | None = None,
                        tags: Iterable[str] | None = None, agent_id: str | None = None,
                        repo_root: str | None = None) -> list[dict[str, Any]]:
        """Hits, best first (``overview_l1`` with detail_level l1). ``repo_root``: a checkout on
        the server's machine; hits whose files changed there carry ``possibly_stale``."""
        return self._run(_Calls.search_memories(query, detail_level, limit, tier, tags, agent_id, repo_root))

    def search_memories_batch(self, queries: Iterable[str], detail_level: str = "l1", limit: int = 10,
                              tier: str | None = None, tags: Iterable[str] | None = None,
                              agent_id: str | None = None) -> list[list[dict[str, Any]]]:
        """One hit list per query (at most 32), embedded together on the server."""
        return self._run(_Calls.search_memories_batch(queries, detail_level, limit, tier, tags, agent_id))

    def get_memory_details(self, ids: Iterable[str]) -> list[dict[str, Any]]:
        """Full records of the ids that exist (unknown ids are left out)."""
        ids = list(ids)
        return self._run(_Calls.get_memory_details(ids)) if ids else []

    def get_memory(self, memory_id: str) -> dict[str, Any] | None:
        """One full record, or None when the id is unknown."""
        return self._run(_Calls.get_memory(memory_id))

    # skills

    def search_skills(self, query: str, limit: int = 5) -> list[dict[str, Any]]:
        return self._run(_Calls.search_skills(query, limit))

    def get_skill(self, name: str) -> dict[str, Any] | None:
        """The current version with its SKILL.md, or None when unknown."""
        return self._run(_Calls.get_skill(name))

    def list_skills(self, limit: int = 50, offset: int = 0) -> list[dict[str, Any]]:
        return self._run(_Calls.list_skills(limit, offset))

    # context and feedback

    def context_bundle(self, task: str, token_budget: int = 1500, agent_id: str | None = None, *,
                       repo_root: str | None = None, session_id: str | None = None) -> dict[str, Any]:
        """Skills and memories for ``task`` packed into at most ``token_budget`` tokens;
        ``session_id`` (the agent's own) credits what is served with how that session ends."""
        return self._run(_Calls.context_bundle(task, token_budget, agent_id, repo_root, session_id))

    def feedback(self, *, memory_id: str | None = None, skill: str | None = None, helpful: bool,
                 note: str = "", agent_id: str | None = None) -> dict[str, Any]:
        """Vote on exactly one memory or skill; returns its new counts."""
        return self._run(_feedback_call(memory_id, skill, helpful, note, agent_id))

    # status

    def stats(self) -> dict[str, Any]:
        return self._run(_Calls.stats())

    def health(self) -> dict[str, Any]:
        """``{"status", "database", "version"}``; needs no token."""
        return self._run(_Calls.health())


# -- the asynchronous client -----------------------------------------------------------------------


class AsyncUltronClient(_Base):
    """The same calls as :class:`UltronClient`, awaitable. Use ``async with``, or
    ``await client.close()``."""

    def __init__(self, base_url: str | None = None, token: str | None = None, timeout: float = DEFAULT_TIMEOUT,
                 *, retries: int = DEFAULT_RETRIES, settings: Settings | None = None) -> None:
        super().__init__(base_url, token, timeout, retries, settings)
        self._http = httpx.AsyncClient(base_url=self.base_url, timeout=timeout, headers=self._headers)

    async def __aenter__(self) -> "AsyncUltronClient":
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._http.aclose()

    async def _run(self, call: _Call) -> Any:
        attempts = self._attempts(call)
        for attempt in range(attempts):
            try:
                response = await self._http.request(call.method, call.path, **self._request_kwargs(call))
                break
            except httpx.TransportError as exc:
                if attempt + 1 >= attempts:
                    raise self._unreachable(call, exc, self.base_url) from exc
                await asyncio.sleep(self._backoff(attempt))
        return self._result(call, response)

    async def upload_memory(self, content: str, context: str = "", resolution: str = "",
                            tags: Iterable[str] | None = None, agent_id: str | None = None,
                            shared: bool = False) -> dict[str, Any]:
        return await self._run(_Calls.upload_memory(content, context, resolution, tags, agent_id, shared))

    async def search_memories(self, query: str, detail_level: str = "l1", limit: int = 10,
                              tier: str | None = None, tags: Iterable[str] | None = None,
                              agent_id: str | None = None, repo_root: str | None = None) -> list[dict[str, Any]]:
        return await self._run(_Calls.search_memories(query, detail_level, limit, tier, tags, agent_id, repo_root))

    async def search_memories_batch(self, queries: Iterable[str], detail_level: str = "l1", limit: int = 10,
                                    tier: str | None = None, tags: Iterable[str] | None = None,
                                    agent_id: str | None = None) -> list[list[dict[str, Any]]]:
        return await self._run(_Calls.search_memories_batch(queries, detail_level, limit, tier, tags, agent_id))

    async def get_memory_details(self, ids: Iterable[str]) -> list[dict[str, Any]]:
        ids = list(ids)
        return await self._run(_Calls.get_memory_details(ids)) if ids else []

    async def get_memory(self, memory_id: str) -> dict[str, Any] | None:
        return await self._run(_Calls.get_memory(memory_id))

    async def search_skills(self, query: str, limit: int = 5) -> list[dict[str, Any]]:
        return await self._run(_Calls.search_skills(query, limit))

    async def get_skill(self, name: str) -> dict[str, Any] | None:
        return await self._run(_Calls.get_skill(name))

    async def list_skills(self, limit: int = 50, offset: int = 0) -> list[dict[str, Any]]:
        return await self._run(_Calls.list_skills(limit, offset))

    async def context_bundle(self, task: str, token_budget: int = 1500,
                             agent_id: str | None = None, *, repo_root: str | None = None,
                             session_id: str | None = None) -> dict[str, Any]:
        return await self._run(_Calls.context_bundle(task, token_budget, agent_id, repo_root, session_id))

    async def feedback(self, *, memory_id: str | None = None, skill: str | None = None, helpful: bool,
                       note: str = "", agent_id: str | None = None) -> dict[str, Any]:
        return await self._run(_feedback_call(memory_id, skill, helpful, note, agent_id))

    async def stats(self) -> dict[str, Any]:
        return await self._run(_Calls.stats())

    async def health(self) -> dict[str, Any]:
        return await self._run(_Calls.health())
