"""Who may come in and what they may do: the one place every door (REST routes, the /mcp
mount and its tools, the memory browser) asks. Doors never compare tokens or scopes
themselves: they resolve the presented token to a :class:`Principal` (``ultron.tokens``)
and call :func:`authorize` with the action their table below names.

Scopes nest: ``read`` (search, details, bundles, skills, the browser's pages), ``write``
(also uploads, ingest and feedback), ``admin`` (also forget, edits, tokens, exports). The
server's own token (ULTRON_API_TOKEN, or the loopback token file) is the local admin, so
one person on a laptop notices nothing.

A token may be bound to agents: it sees their memories plus the shared ones, skills built
only from memories it sees, and writes or forgets only as them. The services ask
:func:`visible_agents`, :func:`sees`, :func:`writing_agent` and :func:`check_agent` about
whoever a door said is acting (:func:`acting`), so no route filters on its own.

Stdlib only: the HTTP app, the MCP server, the browser and the CLI all import it.
"""

from __future__ import annotations

import contextvars
import getpass
import hmac
import logging
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("ultron.access")

SCOPES = ("read", "write", "admin")
_RANK = {s: i for i, s in enumerate(SCOPES)}


@dataclass(frozen=True)
class Principal:
    """Whoever a request acts as: a named token with a scope (``token_id`` None for the
    server's own admin token and for the local CLI)."""

    name: str
    scope: str
    token_id: str | None = None
    #: the agents a bound token acts for (sees their memories plus the shared ones, writes
    #: only as them); None: every agent
    agents: tuple[str, ...] | None = None

    def may(self, action: str) -> bool:
        """``action`` is the scope it needs: read, write or admin."""
        return _RANK[self.scope] >= _RANK[action]

    def sees(self, agent_id: str | None, shared: bool) -> bool:
        """Whether a memory of ``agent_id`` (``shared`` or not) exists for this principal."""
        return self.agents is None or bool(shared) or (agent_id is not None and agent_id in self.agents)


LOCAL_ADMIN = Principal("local-admin", "admin")

#: Every door maps its routes, tools or pages onto the scope each needs (its "action"):
#: read (search, details, lists, bundles, skills, stats, the browser's pages), write (upload,
#: ingest, feedback), admin (forget, edits, tokens, exports, the audit log).
#: The HTTP API: (method, route path) -> action. A route missing here is refused with 500
#: (and the authorization matrix test fails), so no new route is ever open by accident.
ROUTE_ACTIONS: dict[tuple[str, str], str] = {
    ("POST", "/ingest"): "write",
    ("POST", "/ingest/text"): "write",
    ("POST", "/memories/upload"): "write",
    ("GET", "/memories"): "read",
    ("GET", "/memories/{memory_id}"): "read",
    ("POST", "/memories/{memory_id}/feedback"): "write",
    ("POST", "/skills/{name}/feedback"): "write",
    ("POST", "/context"): "read",
    ("POST", "/memories/search"): "read",
    ("POST", "/memories/search/batch"): "read",
    ("POST", "/memories/details"): "read",
    ("DELETE", "/memories/{memory_id}"): "admin",
    ("DELETE", "/sessions"): "admin",
    ("DELETE", "/agents/{agent_id}"): "admin",
    ("POST", "/skills/search"): "read",
    ("GET", "/skills"): "read",
    ("GET", "/skills/{slug}"): "read",
    ("GET", "/stats"): "read",
}

#: The MCP server's tools -> action.
TOOL_ACTIONS: dict[str, str] = {
    "search_memories": "read",
    "get_memory_details": "read",
    "upload_memory": "write",
    "search_skills": "read",
    "get_skill": "read",
    "context_bundle": "read",
    "feedback": "write",
}

#: The memory browser: page or form -> action.
PAGE_ACTIONS: dict[str, str] = {
    "view": "read",
    "feedback": "write",
    "edit": "admin",
    "forget": "admin",
}


class Refused(Exception):
    """A request the access rules refuse: ``status`` 401 (who are you?) or 403 (not allowed)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def authorize(principal: Principal | None, action: str, refusal: str | None = None) -> Principal:
    """The one decision: the principal when it may do ``action``, else :class:`Refused`.
    ``refusal`` says why no principal could be resolved (missing, invalid, revoked, expired)."""
    if action not in _RANK:
        raise Refused(500, f"no access rule for action {action!r}")
    if principal is None:
        raise Refused(401, refusal or "missing bearer token: send 'Authorization: Bearer <token>'")
    if not principal.may(action):
        raise Refused(403, f"token {principal.name!r} has scope {principal.scope}; this needs "
                           f"{action}")
    return principal


def token_refusal(token: str | None, expected: bytes) -> str | None:
    """Why a token is not the server's own admin token (None when it is), in constant time."""
    if not token:
        return "missing bearer token: send 'Authorization: Bearer <token>'"
    # Starlette decodes headers as latin-1; encoding back gives the bytes the client sent.
    if not hmac.compare_digest(token.encode("latin-1", "replace"), expected):
        return "invalid bearer token"
    return None


# -- agent visibility: what a bound token may see and write as ----------------------------------
#
# Every read of memories and skills asks :func:`visible_agents` (the SQL filters and the
# per-record checks take its answer), every write as an agent asks :func:`writing_agent`,
# every forget or ingest naming an agent asks :func:`check_agent`. Outside a door (the CLI,
# Dagster runs, the SDK in a script) no principal is acting and everything is visible.


def visible_agents() -> tuple[str, ...] | None:
    """The agents whose private memories the acting principal sees (plus every shared
    memory); None: all memories (an unbound token, the server's token, no door)."""
    principal = _principal.get()
    return None if principal is None else principal.agents


def sees(agent_id: str | None, shared: bool) -> bool:
    """Whether the acting principal may see a memory owned by ``agent_id``."""
    principal = _principal.get()
    return principal is None or principal.sees(agent_id, shared)


def sees_all(owners: "list[tuple[str | None, bool]]") -> bool:
    """A skill (or anything built from several memories) is visible only when each of them
    is: its steps and citations carry their text."""
    principal = _principal.get()
    return principal is None or all(principal.sees(a, s) for a, s in owners)


def writing_agent(agent_id: str | None, *, required: bool = True) -> str | None:
    """The agent an upload, ingest or feedback by the acting principal is recorded as: the
    one it names when the principal acts for it, the principal's only agent when it names
    none; :class:`Refused` (403) for another agent's, (400) when a token of several agents
    names none and one is ``required`` (a feedback verdict may then record none)."""
    principal = _principal.get()
    if principal is None or principal.agents is None:
        return agent_id
    if agent_id is None:
        if len(principal.agents) == 1:
            return principal.agents[0]
        if not required:  # a verdict need not say which of the token's agents gave it
            return None
        raise Refused(400, f"token {principal.name!r} acts for {len(principal.agents)} agents: say which "
                           "one with agent_id")
    check_agent(agent_id)
    return agent_id


def check_agent(agent_id: str | None) -> None:
    """:class:`Refused` (403) unless the acting principal acts for ``agent_id`` (a forget or
    ingest of a whole agent's or session's data); an agent-bound token must name one."""
    principal = _principal.get()
    if principal is None or principal.agents is None:
        return
    if agent_id is None or agent_id not in principal.agents:
        raise Refused(403, f"token {principal.name!r} acts only for agent(s) {', '.join(principal.agents)}"
                      + (f", not {agent_id!r}" if agent_id else "; say which with agent_id"))


# -- who is acting, for the audit log --------------------------------------------------------------

_actor: contextvars.ContextVar[str | None] = contextvars.ContextVar("ultron_actor", default=None)
_principal: contextvars.ContextVar[Principal | None] = contextvars.ContextVar("ultron_principal", default=None)


def acting_as(name: str) -> contextvars.Token:
    """Set who the current request or command acts as (a door calls this once it knows)."""
    return _actor.set(name)


def acting(principal: Principal) -> None:
    """A door that resolved its caller: checks made further in (the MCP tools) and the audit
    log see this principal for the rest of the request."""
    _principal.set(principal)
    _actor.set(principal.name)


def digest(identifier: str) -> str:
    """How the audit log names an agent or a session file: a digest, not the name, so
    forgetting them leaves the name nowhere, while ``ultron audit --target NAME`` still
    finds what was done to them."""
    import hashlib

    return "sha256:" + hashlib.sha256(identifier.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def current_principal() -> Principal | None:
    """Who the current request acts as; None when no door said (every check then refuses)."""
    return _principal.get()


def actor() -> str:
    """Who the audit log names for what happens now: the door's principal, else the local
    user running the CLI or the SDK."""
    found = _actor.get()
    if found:
        return found
    try:
        return f"local:{getpass.getuser()}"
    except Exception:  # noqa: BLE001 - no passwd entry in a container
        return f"local:uid{os.getuid()}"


# -- secrets kept in files ----------------------------------------------------------------------------


def load_or_create_secret(path: Path) -> str:
    """Reuse the secret in ``path``, or write a new one there (0600) atomically.

    Two processes starting at once agree on one secret: the file is published with a
    hard link, which fails if the other process got there first.
    """
    existing = _read_secret(path)
    if existing:
        return existing
    path.parent.mkdir(parents=True, exist_ok=True)
    value = secrets.token_urlsafe(32)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(value + "\n")
        try:
            os.link(tmp, path)
        except FileExistsError:
            existing = _read_secret(path)
            if existing:
                return existing
            os.replace(tmp, path)  # an empty or broken file: take its place
            return value
    finally:
        tmp.unlink(missing_ok=True)
    return value


def _read_secret(path: Path) -> str | None:
    try:
        st = path.stat()
        value = path.read_text().strip()
    except FileNotFoundError:
        return None
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        os.chmod(path, 0o600)  # a secret others can read is not a secret
        log.warning("%s was readable by other users; set its mode to 0600", path)
    return value or None
