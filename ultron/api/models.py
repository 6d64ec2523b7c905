"""Request and response bodies of the HTTP API.

Every string and list in a request has a size cap, so a client (or a fuzzer) cannot
make one request cost unbounded memory, embedding time or database work. Strings
must also be storable: PostgreSQL text cannot hold NUL, and a lone surrogate from a
``\\ud800`` JSON escape cannot be encoded, so both are refused up front with a
located 422 rather than failing deep inside a transaction.

Response models allow extra keys: the SDK's dicts are the source of truth, and a
field it gains later passes through instead of being silently dropped.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StrictBool

from ultron.arguments import optional_agent_id, storable
from ultron.sessions.discovery import _AGENT_ID, validate_agent_id

MAX_QUERY_CHARS = 10_000
MAX_FIELD_CHARS = 50_000
MAX_TEXT_CHARS = 200_000
MAX_TAGS = 100
MAX_TAG_CHARS = 200
MAX_IDS = 1000
MAX_BATCH_QUERIES = 32
MAX_ID_CHARS = 128
MAX_PATHS = 1000
MAX_PATH_CHARS = 4096
MAX_NOTE_CHARS = 2000
MIN_BUDGET, MAX_BUDGET = 50, 100_000
MAX_PAGE = 500


#: what ``repo_root`` means in a request
REPO_ROOT = ("a git checkout on the server's machine: memories whose recorded files changed or vanished there are "
             "marked possibly_stale (with stale_reason) and ranked lower")


def _upper(value: Any) -> Any:
    return value.upper() if isinstance(value, str) else value


def Text(max_length: int, min_length: int = 0) -> Any:  # noqa: N802 - reads like a type in signatures
    """A storable string of bounded length."""
    return Annotated[str, Field(min_length=min_length, max_length=max_length), AfterValidator(storable)]


AgentId = Annotated[str, Field(max_length=128, json_schema_extra={"pattern": _AGENT_ID.pattern},
                               description="1-128 letters, digits, '.', '_', '-' or '@', starting with a letter "
                                           "or digit"),
                    AfterValidator(storable), AfterValidator(optional_agent_id)]
ServerPath = Annotated[str, Field(min_length=1, max_length=MAX_PATH_CHARS, json_schema_extra={"pattern": "^/"}),
                       AfterValidator(storable)]
Tags = Annotated[list[Text(MAX_TAG_CHARS)], Field(max_length=MAX_TAGS)]
Tier = Annotated[Literal["HOT", "WARM", "COLD"], BeforeValidator(_upper)]


class Request(BaseModel):
    """Unknown fields are refused: a typo such as ``detail`` for ``detail_level`` is an error, not a default."""

    model_config = ConfigDict(extra="forbid")


class Response(BaseModel):
    model_config = ConfigDict(extra="allow")


# -- requests ----------------------------------------------------------------------------------


class IngestPathsRequest(Request):
    paths: list[ServerPath] = Field(
        min_length=1, max_length=MAX_PATHS,
        description="absolute server paths (files or directories) inside one of ULTRON_INGEST_ROOTS")
    agent_id: AgentId


class IngestTextRequest(Request):
    text: Text(MAX_TEXT_CHARS, 1)
    agent_id: AgentId | None = None


class MemoryUploadRequest(Request):
    content: Text(MAX_FIELD_CHARS, 1)
    context: Text(MAX_FIELD_CHARS) = ""
    resolution: Text(MAX_FIELD_CHARS) = ""
    tags: Tags = []
    agent_id: AgentId | None = Field(None, description="the agent it comes from and that owns it (search can "
                                                       "scope by it; an agent-bound token may name only its own)")
    shared: StrictBool = Field(False, description="tokens bound to other agents see it too")


class FeedbackRequest(Request):
    helpful: StrictBool = Field(description="true: it helped; false: it did not")
    note: Text(MAX_NOTE_CHARS) = Field("", description="why, in a sentence (optional; redacted before storing)")
    agent_id: AgentId | None = Field(None, description="the agent giving the verdict")


class ContextRequest(Request):
    task: Text(MAX_QUERY_CHARS, 1) = Field(description="what the agent is about to do, in plain words")
    token_budget: int = Field(1500, ge=MIN_BUDGET, le=MAX_BUDGET,
                              description="the block never exceeds this many tokens (cl100k)")
    agent_id: AgentId | None = Field(None, description="only this agent's memories")
    repo_root: ServerPath | None = Field(None, description=REPO_ROOT)
    session_id: Text(200, 1) | None = Field(
        None, description="the agent's own session id (Claude Code's session id, a Codex rollout's id): what is "
                          "served is recorded, and the session's outcome, once ingested and scored, moves each "
                          "item's utility")


class MemorySearchRequest(Request):
    query: Text(MAX_QUERY_CHARS, 1)
    detail_level: Literal["l0", "l1"] = Field(
        "l1", description="l0: one-line summaries; l1: overviews. Full text: POST /memories/details")
    limit: int = Field(10, ge=1, le=100)
    tier: Tier | None = None
    tags: Tags | None = Field(None, description="only memories carrying all of these tags")
    agent_id: AgentId | None = None
    repo_root: ServerPath | None = Field(None, description=REPO_ROOT)


class MemoryBatchSearchRequest(Request):
    queries: list[Text(MAX_QUERY_CHARS, 1)] = Field(min_length=1, max_length=MAX_BATCH_QUERIES)
    detail_level: Literal["l0", "l1"] = "l1"
    limit: int = Field(10, ge=1, le=100)
    tier: Tier | None = None
    tags: Tags | None = Field(None, description="only memories carrying all of these tags")
    agent_id: AgentId | None = None


class MemoryDetailsRequest(Request):
    ids: list[Text(MAX_ID_CHARS, 1)] = Field(min_length=1, max_length=MAX_IDS)


class SkillSearchRequest(Request):
    query: Text(MAX_QUERY_CHARS, 1)
    limit: int = Field(5, ge=1, le=50)


# -- responses ---------------------------------------------------------------------------------


class MemoryL0(Response):
    id: str
    memory_type: str
    tier: str
    status: str
    tags: list[str]
    hit_count: int
    summary_l0: str


class MemoryL1(MemoryL0):
    overview_l1: str


class MemoryFull(MemoryL1):
    content: str
    context: str
    resolution: str
    kind: str | None = None
    tools_used: list[str] = []
    confidence: float | None = None
    agent_id: str | None = None
    shared: bool = False
    segment_id: str | None = None
    session_file: str | None = None
    start_line: int | None = None
    end_line: int | None = None
    last_hit_at: str | None = None
    created_at: str | None = None
    helpful_count: int = 0
    unhelpful_count: int = 0


class StoredMemory(MemoryFull):
    action: Literal["inserted", "merged"] = Field(
        description="merged: a near duplicate of the same type absorbed the upload")


class SearchHit(MemoryL0):
    overview_l1: str | None = Field(None, description="present when detail_level is l1")
    similarity_score: float
    score: float
    matched: list[str] = Field(description="which retrievers found it: vector, text")
    possibly_stale: bool | None = Field(None, description="with repo_root: a file it was learned from changed or "
                                                          "vanished in that checkout")
    stale_reason: str | None = Field(None, description="which files, e.g. 'src/app.py changed since 2026-11-28'")
    stale_files: list[dict[str, Any]] | None = Field(None, description="{path, status, seen_at} per file")


class SearchResponse(Response):
    results: list[SearchHit]
    count: int


class BatchSearchResponse(Response):
    searches: list[SearchResponse] = Field(description="one result list per query, in the order asked")


class DetailsResponse(Response):
    memories: list[MemoryFull]
    missing: list[str] = Field(description="requested ids that are not in the store")


class TableCounts(Response):
    deleted: int
    updated: int


class ForgetResponse(Response):
    """What forget removed, everywhere (``Ultron.forget``'s report)."""

    memories_deleted: int
    memories_rebuilt: int = 0
    contributions: int = 0
    segments: int = 0
    sessions: int = 0
    raw_uploads: int = 0
    tables: dict[str, TableCounts] = Field({}, description="rows deleted / rewritten, per table")
    clusters: dict[str, int] = Field({}, description="updated (members, centroid, topic), dissolved, "
                                                     "topics_cleared")
    skills: dict[str, int] = Field({}, description="resynthesized, retired, versions_deleted")
    files: dict[str, int] = Field({}, description="files deleted or rewritten under ULTRON_HOME: skill_md, "
                                                  "meta_json, sft_export, session_file")
    sft: dict[str, int] = Field({}, description="exports_rewritten, exports_deleted, examples_removed")
    partitions: list[str] = Field([], description="Dagster partition keys of the forgotten sessions")
    kept_on_disk: list[str] = Field([], description="forgotten session files outside ULTRON_HOME, left alone")


class FileProblem(Response):
    line: int | None = Field(None, description="1-based; null for the whole file")
    error: str


class FileReport(Response):
    path: str
    status: str
    agent_id: str | None = None
    messages: int = 0
    problems: list[FileProblem] = []


class IngestResponse(Response):
    files: list[FileReport]
    totals: dict[str, int]
    total_files: int
    total_memories: int


class IngestTextResponse(Response):
    memories: list[StoredMemory]
    total_memories: int
    dropped_low_confidence: int = 0


class SkillSummary(Response):
    slug: str
    name: str | None = None
    description: str | None = None
    version: str | None = None
    parent_version: str | None = None
    cluster_id: str | None = None
    score: float | None = None
    status: str | None = None
    superseded_slugs: list[str] = []
    path: str | None = Field(None, description="the published {slug}-{version}/ directory")
    created_at: str | None = None
    lifecycle: str | None = Field(None, description="probationary or active (retired skills are never served)")
    reliability: float | None = Field(None, description="(helpful + 1) / (helpful + unhelpful + 2)")
    helpful_count: int | None = None
    unhelpful_count: int | None = None


class SkillHit(SkillSummary):
    memory_count: int | None = None
    similarity: float = Field(description="cosine similarity to the query")


class Skill(SkillSummary):
    """A skill version with its SKILL.md and _meta.json content."""

    skill_md: str = Field(description="the SKILL.md file, front matter included")
    meta: dict[str, Any] | None = None
    memory_ids: list[str] = Field([], description="the member memories it was crystallised from")
    updated_at: str | None = None


class SkillSearchResponse(Response):
    results: list[SkillHit]
    count: int


class SkillListItem(SkillSummary):
    memory_count: int | None = None


class SkillList(Response):
    skills: list[SkillListItem]
    limit: int
    offset: int
    total: int = Field(description="current, non-retired skills in all")


class MemoryList(Response):
    memories: list[MemoryL1]
    limit: int
    offset: int
    total: int = Field(description="memories matching the filters in all")


class FeedbackResponse(Response):
    target_kind: Literal["memory", "skill"]
    target_id: str
    helpful: bool
    helpful_count: int
    unhelpful_count: int
    tier: str | None = Field(None, description="memories: the tier after the verdict (COLD when demoted)")
    status: str | None = Field(None, description="memories: active or archived")
    hit_count: int | None = None
    reliability: float | None = Field(None, description="skills: (helpful + 1) / (helpful + unhelpful + 2)")
    lifecycle: str | None = Field(None, description="skills: probationary, active or retired")


class ContextItem(Response):
    kind: Literal["skill", "memory"]
    id: str = Field(description="the skill's name or the memory's id, for feedback")
    detail: Literal["full", "l1", "l0"]
    tokens: int


class ContextResponse(Response):
    task: str
    token_budget: int
    tokens: int = Field(description="tokens of text (cl100k); never above token_budget")
    text: str = Field(description="the prompt-ready block")
    items: list[ContextItem]


class MemoryCounts(Response):
    total: int
    active: int
    by_type: dict[str, int]
    by_tier: dict[str, int]


class Stats(Response):
    sessions: Any = None
    segments: Any = None
    memories: MemoryCounts | None = None
    clusters: Any = None
    skills: Any = None


class Health(Response):
    status: Literal["ok", "unavailable"]
    database: Literal["ok", "unavailable"]
    version: str


class ErrorBody(Response):
    detail: str


class FieldError(Response):
    loc: list[str | int]
    msg: str
    type: str


class ValidationErrorBody(Response):
    detail: str = Field(description="every problem on one line: 'body.limit: ...; body.query: ...'")
    errors: list[FieldError]
