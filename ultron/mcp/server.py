"""The MCP server: one tool per agent-facing SDK call, skills and stats as resources.

Every tool is a thin call into :class:`ultron.sdk.Ultron`, so MCP, the HTTP API, the CLI
and Python agents cannot drift apart. Arguments are typed and bounded in the function
signatures (the SDK turns them into the tools' JSON schemas and validates calls against
them); anything the SDK refuses, or any failure behind it, comes back as a tool error
(``isError``) whose message a model can act on, never as a crash of the server.
"""

import contextlib
import functools
import json
import logging
import threading
from typing import Annotated, Any, Callable, Iterator, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.server.mcpserver.resources import FunctionResource
from mcp_types import Resource as MCPResource
from pydantic import AfterValidator, Field

from ultron.access import LOCAL_ADMIN, TOOL_ACTIONS, Refused, acting, authorize, current_principal
from ultron.arguments import optional_agent_id, storable
from ultron.sessions.discovery import validate_agent_id
from ultron.settings import Settings

log = logging.getLogger("ultron.mcp")

INSTRUCTIONS = (
    "Ultron is a shared memory of past agent sessions: errors and their fixes, user preferences, "
    "patterns, and skills crystallised from them. Before a non-trivial task call context_bundle (or "
    "search_memories / search_skills); read a skill with get_skill. When something you used helped or "
    "misled you, call feedback with its id. Store a new lesson with upload_memory."
)
#: how many current skills resources/list enumerates (a client wanting more searches).
MAX_LISTED_SKILLS = 500


# -- argument types --------------------------------------------------------------------------


def _text(max_length: int, min_length: int = 0, description: str | None = None) -> Any:
    return Annotated[str, Field(min_length=min_length, max_length=max_length, description=description),
                     AfterValidator(storable)]


Query = _text(10_000, 1, "what you are looking for, in plain words")
MemoryId = _text(128, 1)
Tag = _text(200, 1)
Tags = Annotated[list[Tag] | None, Field(max_length=100, description="only memories carrying all of these tags")]
AgentId = Annotated[str | None, Field(max_length=128, description="an agent id: 1-128 letters, digits, '.', '_', "
                                                                    "'-' or '@'"),
                    AfterValidator(optional_agent_id)]
RepoRoot = Annotated[str | None, Field(max_length=4096, description=(
    "absolute path of the git checkout you work in (on the server's machine): memories whose files changed or "
    "vanished there are marked possibly_stale and ranked lower"))]
SkillName = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9-]*$",
                                 description="the skill's name (lowercase letters, digits, hyphens)")]


# -- the SDK, built on first use --------------------------------------------------------------


class LazyUltron:
    """Holds the SDK client, creating it on first use from ``factory``.

    Creating it connects (starting the embedded database if needed) and migrates, which
    can take seconds; doing it lazily lets the MCP handshake answer at once. ``warm``
    starts the creation in the background so the first tool call rarely waits.
    """

    def __init__(self, factory: Callable[[], Any]) -> None:
        self._factory = factory
        self._client: Any = None
        self._lock = threading.Lock()

    def get(self) -> Any:
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._client = self._factory()
        return self._client

    def warm(self) -> None:
        """Connect, then load the embedder (search) and the redactor (uploads, ~3 s) in a
        background thread; a call arriving first waits on their build locks."""

        def build() -> None:
            try:
                memory = self.get().memory
                memory.embedder  # noqa: B018
                memory.redactor  # noqa: B018
            except Exception as exc:  # noqa: BLE001 - the first tool call reports it
                log.warning("Ultron is not ready yet: %s", exc)

        threading.Thread(target=build, name="ultron-mcp-warm-up", daemon=True).start()


# -- error mapping ---------------------------------------------------------------------------


def _message(exc: BaseException) -> str:
    """What a model can act on; internal details stay in the server log."""
    import sqlalchemy as sa

    from ultron.context import EmbeddingProfileMismatch
    from ultron.db.database import DatabaseError
    from ultron.llm.errors import LLMError

    if isinstance(exc, KeyError):
        return str(exc.args[0]) if exc.args else "not found"
    if isinstance(exc, (ValueError, DatabaseError, EmbeddingProfileMismatch)):
        return str(exc) or type(exc).__name__
    if isinstance(exc, (sa.exc.OperationalError, sa.exc.InterfaceError, sa.exc.TimeoutError)):
        return "the database is unavailable; try again shortly"
    if isinstance(exc, LLMError):
        return f"the LLM is unavailable: {exc}"
    return f"internal error ({type(exc).__name__}); the server log has the details"


@contextlib.contextmanager
def tool_errors(tool: str) -> Iterator[None]:
    """Any failure of the call becomes a ToolError (an ``isError`` result), never a crash."""
    try:
        yield
    except ToolError:
        raise
    except Refused as exc:  # an agent-bound token's limits
        raise ToolError(exc.message) from None
    except (KeyError, ValueError) as exc:
        raise ToolError(_message(exc)) from None
    except Exception as exc:  # noqa: BLE001 - reported to the caller, logged here
        message = _message(exc)
        if message.startswith("internal error"):
            log.exception("MCP tool %s failed", tool)
        else:
            log.warning("MCP tool %s failed: %s", tool, exc)
        raise ToolError(message) from None


def _record(value: Any, detail: str = "full") -> dict[str, Any]:
    """SDK records are objects with ``to_dict`` or already dicts."""
    return value.to_dict(detail) if hasattr(value, "to_dict") else dict(value)


def _named(skill: dict[str, Any]) -> dict[str, Any]:
    """Agents know a skill by its slug (the Agent Skills ``name``); the stored display name
    stays as ``title``."""
    return {**skill, "title": skill.get("name"), "name": skill.get("slug") or skill.get("name")}


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("ultron")
    except Exception:  # noqa: BLE001 - running from a checkout without metadata
        return "0.0.0"


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


# -- the server ------------------------------------------------------------------------------


class UltronMCPServer(MCPServer):
    """MCPServer whose resources/list also names each current skill as ``skill://<name>``
    (the ``skill://{name}`` template serves them; a fixed list would go stale)."""

    def __init__(self, ultron: LazyUltron, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.ultron = ultron

    async def list_resources(self) -> list[MCPResource]:
        import anyio.to_thread

        static = await super().list_resources()
        try:
            skills = await anyio.to_thread.run_sync(self._current_skills)
        except Exception as exc:  # noqa: BLE001 - listing degrades to the static resources
            log.warning("cannot list skills: %s", exc)
            skills = []
        return static + [
            MCPResource(uri=f"skill://{s['slug']}", name=s["slug"], title=s.get("name") or s["slug"],
                        description=(s.get("description") or "")[:1024] or None, mime_type="text/markdown")
            for s in skills
        ]

    def _current_skills(self) -> list[dict[str, Any]]:
        client = self.ultron.get()
        out: list[dict[str, Any]] = []
        while len(out) < MAX_LISTED_SKILLS:
            page = client.list_skills(limit=min(100, MAX_LISTED_SKILLS - len(out)), offset=len(out))
            out.extend(page)
            if len(page) < 100:
                break
        return out


def _tool(server: MCPServer, title: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``fn`` as a tool whose description is its docstring on one line (a model reads it)."""

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        action = TOOL_ACTIONS[fn.__name__]  # a tool without an access rule fails at startup

        @functools.wraps(fn)
        def checked(*args: Any, **kwargs: Any) -> Any:
            try:
                authorize(current_principal(), action)
                return fn(*args, **kwargs)
            except Refused as exc:  # no scope, or an agent-bound token's limits met inside
                raise ToolError(exc.message) from None

        server.add_tool(checked, title=title, description=" ".join((fn.__doc__ or "").split()))
        return checked

    return register


def build_server(factory: Callable[[], Any] | LazyUltron, *, name: str = "ultron") -> UltronMCPServer:
    """The MCP server over the SDK client ``factory`` returns (called on the first call)."""
    ultron = factory if isinstance(factory, LazyUltron) else LazyUltron(factory)
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    server = UltronMCPServer(ultron, name=name, title="Ultron memory", version=_version(),
                             instructions=INSTRUCTIONS, log_level="WARNING")
    root.handlers[:], root.level = handlers, level  # the SDK's logging.basicConfig is not ours to keep

    @_tool(server, "Search memories")
    def search_memories(query: Query,
                        limit: Annotated[int, Field(ge=1, le=50, description="at most this many results")] = 10,
                        detail_level: Annotated[Literal["l0", "l1"], Field(
                            description="l0: one-line summaries; l1: short overviews")] = "l1",
                        tags: Tags = None, agent_id: AgentId = None, repo_root: RepoRoot = None) -> dict[str, Any]:
        """Search the shared memory of past agent sessions (errors and their fixes, preferences,
        patterns) by meaning and keywords. Returns ranked memories with their ids; get the full
        text with get_memory_details, and say whether one helped with feedback."""
        with tool_errors("search_memories"):
            results = ultron.get().search_memories(query, detail_level=detail_level, limit=limit, tags=tags,
                                                   agent_id=agent_id, repo_root=repo_root)
            return {"results": [_record(r, detail_level) for r in results], "count": len(results)}

    @_tool(server, "Memory details")
    def get_memory_details(ids: Annotated[list[MemoryId], Field(min_length=1, max_length=50, description=(
            "memory ids from search_memories or context_bundle"))]) -> dict[str, Any]:
        """The full text of memories (content, context, resolution, tags, provenance) by id.
        Ids not in the store are listed under `missing`."""
        with tool_errors("get_memory_details"):
            ids = list(dict.fromkeys(ids))
            records = [_record(r) for r in ultron.get().get_memory_details(ids)]
            found = {r["id"] for r in records}
            return {"memories": records, "missing": [i for i in ids if i not in found]}

    @_tool(server, "Store a memory")
    def upload_memory(content: _text(50_000, 1, "the lesson, error or fact, stated so another agent can use it"),
                      context: _text(50_000, 0, "when it applies: task, tools, environment") = "",
                      resolution: _text(50_000, 0, "what fixed it or what to do") = "",
                      tags: Annotated[list[Tag] | None, Field(max_length=100, description="short labels")] = None,
                      agent_id: AgentId = None,
                      shared: Annotated[bool, Field(description="every agent's token may read it, not only this "
                                                                "agent's")] = False) -> dict[str, Any]:
        """Store one memory for later sessions and other agents. The server classifies it,
        redacts secrets, and merges it into a near duplicate when there is one."""
        with tool_errors("upload_memory"):
            record = ultron.get().upload_memory(content, context, resolution, tags, agent_id=agent_id, shared=shared)
            return _jsonable(_record(record))

    @_tool(server, "Search skills")
    def search_skills(query: Query,
                      limit: Annotated[int, Field(ge=1, le=20, description="at most this many skills")] = 5
                      ) -> dict[str, Any]:
        """Find reusable skills (procedures crystallised from many sessions) for a task.
        Read one with get_skill(name)."""
        with tool_errors("search_skills"):
            results = ultron.get().search_skills(query, limit)
            return _jsonable({"results": [_named(r) for r in results], "count": len(results)})

    @_tool(server, "Read a skill")
    def get_skill(name: SkillName) -> dict[str, Any]:
        """A skill's SKILL.md (when to use it, steps, pitfalls) and metadata, by name."""
        with tool_errors("get_skill"):
            skill = ultron.get().get_skill(name)
            if skill is None:
                raise ToolError(f"no skill named {name!r}; search_skills lists the available ones")
            return _jsonable(_named({k: v for k, v in skill.items() if k not in ("embedding", "memory_ids")}))

    @_tool(server, "Context for a task")
    def context_bundle(task: _text(10_000, 1, "the task you are about to do, in plain words"),
                       token_budget: Annotated[int, Field(ge=50, le=32_000, description=(
                           "the most tokens the returned text may take"))] = 1500,
                       repo_root: RepoRoot = None,
                       session_id: Annotated[str | None, Field(max_length=200, description=(
                           "your own session id, if you know it: what is served is then credited with how "
                           "the session ends"))] = None) -> dict[str, Any]:
        """One prompt-ready block for a task, within a token budget: the most relevant skills
        (when to use, steps), then memories. Each item carries its id for feedback."""
        with tool_errors("context_bundle"):
            return _jsonable(ultron.get().context_bundle(task, token_budget=token_budget, repo_root=repo_root,
                                                         session_id=session_id))

    @_tool(server, "Give feedback")
    def feedback(helpful: Annotated[bool, Field(description="true if it helped, false if it was wrong or useless")],
                 memory_id: Annotated[MemoryId | None, Field(description="the memory's id (or give skill)")] = None,
                 skill: Annotated[str | None, Field(max_length=64, description="the skill's name (or give "
                                                                                 "memory_id)")] = None,
                 note: _text(2_000, 0, "optional: why") = "",
                 agent_id: AgentId = None) -> dict[str, Any]:
        """Say whether a memory or a skill helped. Helpful ones rank higher; repeatedly unhelpful
        memories are demoted and unreliable skills retired. Give exactly one of memory_id, skill."""
        if (memory_id is None) == (skill is None):
            raise ToolError("give exactly one of memory_id or skill")
        with tool_errors("feedback"):
            result = ultron.get().feedback(memory_id=memory_id, skill=skill, helpful=helpful, note=note,
                                           agent_id=agent_id)
            return _jsonable(result)

    @server.resource("skill://{name}", name="skill", title="Skill", mime_type="text/markdown",
                     description="A current skill's SKILL.md, by name")
    def skill_resource(name: str) -> str:
        try:
            skill = ultron.get().get_skill(name)
        except Exception as exc:  # noqa: BLE001
            raise ResourceError(_message(exc)) from None
        if skill is None:
            raise ResourceError(f"no skill named {name!r}")
        return skill["skill_md"]

    def stats() -> str:
        try:
            return json.dumps(ultron.get().stats(), default=str, indent=2)
        except Exception as exc:  # noqa: BLE001
            raise ResourceError(_message(exc)) from None

    server.add_resource(FunctionResource.from_function(
        stats, uri="ultron://stats", name="stats", title="Ultron stats", mime_type="application/json",
        description="Sessions, segments, memories by tier and type, clusters and skills"))
    return server


def run_stdio(settings: Settings) -> None:
    """Serve over stdin/stdout until the client closes them (``ultron mcp``).

    The SDK's stdio transport points fd 1 at stderr while it serves, so nothing but
    protocol messages reaches stdout; our logs go to stderr too.
    """
    import anyio

    def create() -> Any:
        from ultron.sdk import Ultron

        return Ultron(settings)

    ultron = LazyUltron(create)
    server = build_server(ultron)
    ultron.warm()
    acting(LOCAL_ADMIN)  # stdio: the local user's own process, as the CLI is
    anyio.run(server.run_stdio_async)
