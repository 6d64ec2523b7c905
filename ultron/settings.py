"""The one place that reads ``ULTRON_*`` environment variables.

Every other module takes a :class:`Settings` instead of touching ``os.environ``,
so tests and the Dagster resources can build one explicitly and nothing picks up
stray state from the process environment halfway through a run.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Callable, Mapping, TypeVar

T = TypeVar("T", int, float)

MB = 1024 * 1024
DASHSCOPE_URL = "https://dashscope.aliyuncs.com/compatible-mode/v1"


def _dashscope_only(env: Mapping[str, str]) -> bool:
    """Only a DashScope key is set: use DashScope's OpenAI-compatible endpoint."""
    return bool(env.get("DASHSCOPE_API_KEY")) and not env.get("ULTRON_LLM_API_KEY")


class SettingsError(ValueError):
    """A ``ULTRON_*`` variable holds a value we cannot use."""


def _number(env: Mapping[str, str], name: str, cast: Callable[[str], T]) -> T | None:
    """The variable as a number, or None when unset or blank (the field default applies)."""
    raw = env.get(name, "").strip()
    if not raw:
        return None
    try:
        return cast(raw)
    except ValueError as exc:
        kind = "an integer" if cast is int else "a number"
        raise SettingsError(f"{name}={raw!r} is not {kind}") from exc


def _flag(env: Mapping[str, str], name: str) -> bool | None:
    """The variable as on/off, or None when unset or blank (the field default applies)."""
    raw = env.get(name, "").strip().lower()
    if not raw:
        return None
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise SettingsError(f"{name}={raw!r} is not on/off")


def _lower(env: Mapping[str, str], name: str) -> str | None:
    """A provider name, stripped and lower-cased, or None when unset or empty."""
    raw = env.get(name)
    return raw.strip().lower() if raw else None


def _paths(env: Mapping[str, str], name: str) -> tuple[Path, ...]:
    """An ``os.pathsep`` separated list of directories, resolved; blank entries are skipped."""
    raw = env.get(name, "").strip()
    return tuple(Path(p).expanduser().resolve() for p in raw.split(os.pathsep) if p.strip())


_AGENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$")


def _watch(env: Mapping[str, str]) -> tuple[tuple[str, Path], ...]:
    """ULTRON_WATCH: ``agent:directory`` pairs separated by commas, e.g.
    ``claude-code:~/.claude/projects,codex:~/.codex/sessions``."""
    out = []
    for entry in env.get("ULTRON_WATCH", "").split(","):
        if not entry.strip():
            continue
        agent_id, sep, raw = entry.strip().partition(":")
        if not sep or not agent_id.strip() or not raw.strip():
            raise SettingsError(f"ULTRON_WATCH entry {entry.strip()!r} is not agent:directory "
                                "(e.g. claude-code:~/.claude/projects)")
        out.append((agent_id.strip(), Path(raw.strip()).expanduser().resolve()))
    return tuple(out)


def _path(env: Mapping[str, str], name: str) -> Path | None:
    """One directory (``~`` expanded, resolved), or None when unset or blank."""
    raw = env.get(name, "").strip()
    return Path(raw).expanduser().resolve() if raw else None


@dataclass(frozen=True)
class Settings:
    """Typed view of the environment. Defaults are the documented ones (docs/configuration.md)."""

    #: ULTRON_HOME: state directory (embedded database, Dagster home, inbox).
    home: Path = field(default_factory=lambda: Path(".ultron").resolve())
    #: ULTRON_DATABASE_URL: external Postgres with pgvector; None = embedded server.
    database_url: str | None = None
    #: ULTRON_DAGSTER_DATABASE_URL: Dagster's own storage; default = same server.
    dagster_database_url: str | None = None
    #: ULTRON_INBOX: directories the sensor watches (os.pathsep separated).
    inbox: tuple[Path, ...] = ()
    #: ULTRON_DEFAULT_AGENT_ID: agent for files lying directly in an inbox.
    default_agent_id: str = "default"
    #: ULTRON_DECAY_INTERVAL_HOURS: maintenance schedule period.
    decay_interval_hours: float = 6.0
    #: ULTRON_ARCHIVE_MAX_BYTES: larger files are ingested but not archived.
    archive_max_bytes: int = 10 * MB
    #: ULTRON_MAX_LINE_BYTES: longer .jsonl lines are reported and skipped.
    max_line_bytes: int = 8 * MB
    #: ULTRON_MAX_PROBLEMS_PER_FILE: problems kept per file; the rest are counted.
    max_problems_per_file: int = 1000
    #: ULTRON_SENSOR_INTERVAL_SECONDS: how often the inbox sensor ticks.
    sensor_interval_seconds: int = 15
    #: ULTRON_SENSOR_MAX_RUNS_PER_TICK: above this many new/changed files in one tick,
    #: the sensor launches one batch run instead of one run per file.
    sensor_max_runs_per_tick: int = 25
    #: ULTRON_PARTITIONING: session (one partition per session file) or daily (one per agent
    #: and arrival day, for inboxes past ~100k files); read when the definitions load.
    partitioning: str = "session"
    #: ULTRON_LLM_PROVIDER: rules | openai | auto (openai when a key or base URL is set).
    llm_provider: str = "auto"
    #: ULTRON_LLM_BASE_URL: any OpenAI-compatible endpoint (DashScope, vLLM, Ollama, OpenAI).
    llm_base_url: str | None = None
    #: ULTRON_LLM_API_KEY, falling back to DASHSCOPE_API_KEY (with DashScope's URL).
    llm_api_key: str | None = None
    #: ULTRON_LLM_MODEL: the main model.
    llm_model: str = "qwen3.6-flash"
    #: ULTRON_QUALITY_LLM_MODEL: the trajectory judge; defaults to the main model.
    quality_llm_model: str | None = None
    #: ULTRON_LLM_TIMEOUT_SECONDS / ULTRON_LLM_MAX_RETRIES / ULTRON_LLM_RETRY_BASE_SECONDS:
    #: per-request timeout, retries on 429/5xx/timeouts, first backoff delay (doubles).
    llm_timeout_seconds: float = 60.0
    llm_max_retries: int = 3
    llm_retry_base_seconds: float = 1.0
    #: ULTRON_LLM_MAX_INPUT_TOKENS / ULTRON_LLM_PROMPT_RESERVE_TOKENS: a segmentation window
    #: packs messages up to (max_input - reserve) tokens of conversation text; the reserve
    #: covers the instructions and the model's answer.
    llm_max_input_tokens: int = 16000
    llm_prompt_reserve_tokens: int = 3000
    #: ULTRON_TRAJECTORY_MEMORY_SCORE_THRESHOLD / ULTRON_TRAJECTORY_SFT_SCORE_THRESHOLD.
    trajectory_memory_score_threshold: float = 0.7
    trajectory_sft_score_threshold: float = 0.8
    #: ULTRON_TRAJECTORY_EXCELLENT_SCORE_THRESHOLD: the "excellent" stats bucket
    #: (usable starts at the memory threshold, weak is below it).
    trajectory_excellent_score_threshold: float = 0.85
    #: ULTRON_QUALITY_JUDGE_WEIGHT: share of the LLM judge in overall_score when one is configured.
    quality_judge_weight: float = 0.5
    #: ULTRON_EMBEDDING_PROVIDER: local (all-MiniLM-L6-v2) | openai | hash (unit tests only).
    embedding_provider: str = "local"
    #: ULTRON_EMBEDDING_MODEL / _BASE_URL / _API_KEY: the OpenAI-compatible embeddings endpoint
    #: (URL and key default to the LLM's).
    embedding_model: str | None = None
    embedding_base_url: str | None = None
    embedding_api_key: str | None = None
    #: ULTRON_EMBEDDING_DIM: vector size; the memory_records column holds 384.
    embedding_dim: int = 384
    #: ULTRON_MEMORY_MIN_CONFIDENCE: extracted memories below it are dropped (and counted).
    memory_min_confidence: float = 0.5
    #: ULTRON_DEDUP_SIMILARITY_THRESHOLD: cosine at or above which an upload merges.
    dedup_similarity_threshold: float = 0.85
    #: ULTRON_DEDUP_SOFT_THRESHOLD: from here up to the threshold the LLM (rules offline) decides.
    dedup_soft_threshold: float = 0.75
    #: ULTRON_DECAY_ALPHA / ULTRON_TIME_DECAY_WEIGHT: search ranking factor
    #: 1 - w + w * exp(-alpha * days since last hit).
    decay_alpha: float = 0.05
    time_decay_weight: float = 0.1
    #: ULTRON_SEARCH_MIN_SCORE: cosine floor: a result below it must hold a query word to be returned.
    search_min_score: float = 0.3
    #: ULTRON_SEARCH_FUSION: how the dense and lexical lists combine: minmax (weighted sum of
    #: normalised scores) or rrf (reciprocal rank, both arms equal).
    search_fusion: str = "minmax"
    #: ULTRON_SEARCH_DENSE_WEIGHT: the dense arm's share of a minmax-fused score (lexical: the rest).
    #: LoCoMo's recall holds at 0.4 and paraphrased task descriptions (the lessons set) need
    #: meaning more than words (ultron.memory.ranking has the figures).
    search_dense_weight: float = 0.4
    #: ULTRON_SEARCH_CONTEXT_WEIGHT / ULTRON_SEARCH_RESOLUTION_WEIGHT: BM25F weight of a word of
    #: the memory's context / resolution, a word of its content weighing 1.
    search_context_weight: float = 0.5
    search_resolution_weight: float = 1.0
    #: ULTRON_SEARCH_LEXICAL_POOL: at most this many memories are BM25-scored per query (rarest
    #: query words first), which bounds the lexical arm's cost whatever the store's size.
    search_lexical_pool: int = 200
    #: ULTRON_SEARCH_BM25_K1 / ULTRON_SEARCH_BM25_B: BM25 term saturation and length
    #: normalisation. Memories are short and their length says little about relevance, so
    #: b is lower than the textbook 0.75 (chosen leave-one-conversation-out on LoCoMo dev).
    search_bm25_k1: float = 0.9
    search_bm25_b: float = 0.3
    #: ULTRON_HNSW_EF_SEARCH: HNSW candidate list size per query (recall vs speed).
    hnsw_ef_search: int = 100
    #: ULTRON_SEARCH_EXACT_MAX: a search filtered by tags or agent that leaves fewer memories
    #: than this, and has no HNSW graph of its own, compares the query with each of them
    #: (exact, through the filter's index) instead of walking the store's graph past all the
    #: memories the filter drops; a filter keeping more has compared this many before it
    #: walks. At 1M memories a compared memory costs 3-4 µs (its row is read from a 3.9 GB
    #: heap) and, with the vectors in the rows (revision 0018), walking the store's graph
    #: for a filter keeping 5,000 took 17 ms: comparing them all was barely faster (15 ms),
    #: while 10,000 compared before a walk cost a filter keeping 20,000 or 50,000 memories
    #: 40 ms more (``benchmarks/filtered_search.py --crossover``; docs/scale.md). Hence 1,000.
    #: An agent or tag that the planner's statistics put on twice this or more skips that
    #: count (``ultron.db.vector_indexes.large_scopes``).
    search_exact_max: int = 1000
    #: ULTRON_OWNER_INDEX_MIN: an agent with at least this many active memories (and the
    #: shared memories, once as many) gets an HNSW index of its own (``ultron.db.vector_indexes``),
    #: built by the maintenance step ``index_owners``; one that falls below half of it loses it.
    owner_index_min: int = 1000
    #: ULTRON_TAG_INDEXES: how many of the commonest tags (at least ULTRON_OWNER_INDEX_MIN
    #: memories each, on at most a fifth of them, ``agent:`` tags aside) get an HNSW graph of
    #: their own too; 0: none. Each memory's vector is copied into the graph of each of its
    #: tags that has one, so every one costs disk (about 2 kB a memory with its graph, 6.2 GB for 271 graphs at
    #: 1M memories) and
    #: upload time. Since the graphs are partitions of their own (revision 0022) they cost
    #: the other searches no planning, so this is no longer held to 16, which left a 0.5% tag
    #: at 1M memories to an exact scan of 5,000 rows spread over the heap.
    tag_indexes: int = 256
    #: ULTRON_PG_SHARED_BUFFERS: the embedded server's shared_buffers (e.g. "2GB"), applied when
    #: it starts; unset: a quarter of the machine's RAM, at most 4 GB (PostgreSQL's 128 MB
    #: default keeps a 1M-memory HNSW graph out of its cache).
    pg_shared_buffers: str | None = None
    #: ULTRON_HOT_PERCENTILE / ULTRON_WARM_PERCENTILE / ULTRON_COLD_TTL_DAYS: tier rebalance.
    hot_percentile: float = 10.0
    warm_percentile: float = 40.0
    cold_ttl_days: float = 30.0
    #: ULTRON_FEEDBACK_DEMOTE_AFTER: net "not helpful" votes (unhelpful - helpful) that demote a
    #: memory to COLD and keep it there, so the cold TTL archives it.
    feedback_demote_after: int = 3
    #: ULTRON_STALE_SCORE_FACTOR: a search given a repository multiplies the score of a memory
    #: whose files changed or vanished there by this (1 = mark only, never demote).
    stale_score_factor: float = 0.5
    #: ULTRON_SKILL_ACTIVATE_AFTER: helpful votes that take a skill from probationary to active.
    skill_activate_after: int = 3
    #: ULTRON_SKILL_RETIRE_BELOW / ULTRON_SKILL_RETIRE_MIN_VOTES: a skill with at least this many
    #: votes whose reliability (helpful + 1) / (votes + 2) falls below the threshold is retired.
    skill_retire_below: float = 0.3
    skill_retire_min_votes: int = 3
    #: ULTRON_UTILITY_OUTCOME_WEIGHT: how much a session's attributed outcome adds to the utility
    #: posterior of each memory and skill served to it (an explicit verdict adds 2.0;
    #: ``ultron.db.outcomes``).
    utility_outcome_weight: float = 0.5
    #: ULTRON_UTILITY_RANK_WEIGHT: search multiplies a memory's score by
    #: ``1 + w * (2 * outcome utility - 1)``, so within 1 - w .. 1 + w (0 = outcomes never rank).
    #: At 1 the factor is ``2u``: relevance times how likely the memory helps, relative to one
    #: never judged (u = 0.5). ``benchmarks/attribution.py``: at 0.5 the factor could not close
    #: the relevance gap of misleading memories (1 topic of 6 separated in 1,200 sessions).
    utility_rank_weight: float = 1.0
    #: ULTRON_CONSOLIDATE_ENABLED: run store-wide near-duplicate consolidation in maintenance.
    consolidate_enabled: bool = False
    #: ULTRON_RAW_ARCHIVE / ULTRON_RAW_ARCHIVE_RETENTION_DAYS: keep raw uploads, and for how long.
    raw_archive: bool = True
    raw_archive_retention_days: float = 30.0
    #: ULTRON_REDACTION_SPACY_MODEL: an installed spaCy model for name/location detection (optional).
    redaction_spacy_model: str | None = None
    #: ULTRON_DAGSTER_HOST / ULTRON_DAGSTER_PORT: where `ultron dev` serves the UI.
    dagster_host: str = "127.0.0.1"
    dagster_port: int = 3000
    #: ULTRON_CLUSTER_SIMILARITY_THRESHOLD: between batch runs, an upload joins the nearest
    #: cluster whose centroid is at least this close (cosine); otherwise it waits for the batch.
    cluster_similarity_threshold: float = 0.75
    #: ULTRON_CLUSTER_MIN_SIZE: HDBSCAN's min_cluster_size (smallest group worth a cluster).
    cluster_min_size: int = 3
    #: ULTRON_CLAIM_LEASE_SECONDS: how long a worker's claim on a pending session or segment
    #: (and its lease on clustering or skill evolution) lasts. Other workers skip claimed work
    #: until then. A dead worker's claims are free at once (``ultron.claims``: its advisory
    #: lock went with it); the lease only frees the work of a live but stuck worker.
    claim_lease_seconds: float = 900.0
    #: ULTRON_CRYSTALLIZATION_THRESHOLD / ULTRON_RECRYSTALLIZATION_DELTA: members needed to
    #: crystallise a skill, and new members needed to crystallise it again. 4, not the 5 it was
    #: while the rules stored most fixes twice (an error and the same steps as a pattern): the
    #: lesson model keeps one memory per lesson, so four members are four lessons.
    crystallization_threshold: int = 4
    recrystallization_delta: int = 3
    #: ULTRON_SFT_VALIDATION_FRACTION: share of exported segments in the validation split.
    sft_validation_fraction: float = 0.1
    #: ULTRON_API_HOST / ULTRON_API_PORT: where `ultron serve` listens.
    api_host: str = "127.0.0.1"
    api_port: int = 8765
    #: ULTRON_API_TOKEN: bearer token of the HTTP API; unset on loopback = a generated token
    #: kept in $ULTRON_HOME/api_token. A non-loopback address requires it.
    api_token: str | None = field(default=None, repr=False)
    #: the key of the HMACs that named API tokens are stored as (``ultron.tokens``); default:
    #: ``$ULTRON_HOME/token_secret``, made on first use. Servers of one store share it.
    token_secret: str | None = field(default=None, repr=False)
    #: ULTRON_API_URL: where `ultron.client` finds the API; unset = http://ULTRON_API_HOST:ULTRON_API_PORT.
    api_url: str | None = None
    #: ULTRON_INGEST_ROOTS: server directories POST /ingest may read (os.pathsep separated);
    #: default the inbox directories and the watched ones.
    ingest_roots: tuple[Path, ...] = ()
    #: ULTRON_WATCH: agents' own session directories the sensor reads in place, as
    #: ``agent:directory`` pairs separated by commas; every file under one belongs to that agent.
    watch: tuple[tuple[str, Path], ...] = ()
    #: ULTRON_HOOK_TIMEOUT_SECONDS: the hard limit of `ultron hook`; past it the agent gets
    #: exit 0 and no output.
    hook_timeout_seconds: float = 2.0
    #: ULTRON_SKILLS_EXPORT_DIR: keep this directory in sync with the current, non-retired skills
    #: in the Agent Skills layout (<name>/SKILL.md) after every skill run, forget and retirement;
    #: ~/.claude/skills is the Claude Code integration. None = export only on request.
    skills_export_dir: Path | None = None
    #: ULTRON_EXECUTOR: how a Dagster run executes its steps: in_process (one process, the
    #: fastest on a small machine), multiprocess (a process per step) or celery (steps go to
    #: Celery workers through the broker; deploy/celery/).
    executor: str = "in_process"
    #: ULTRON_CELERY_BROKER_URL / ULTRON_CELERY_BACKEND_URL: the Celery broker and result backend.
    celery_broker_url: str = "redis://127.0.0.1:6379/0"
    celery_backend_url: str = "redis://127.0.0.1:6379/0"

    def __post_init__(self) -> None:
        if not self.inbox:
            object.__setattr__(self, "inbox", (self.home / "inbox",))
        if not self.ingest_roots:
            object.__setattr__(self, "ingest_roots", self.inbox + tuple(root for _, root in self.watch))
        if self.crystallization_threshold < 2 or self.recrystallization_delta < 1 or self.cluster_min_size < 2:
            raise SettingsError("ULTRON_CRYSTALLIZATION_THRESHOLD and ULTRON_CLUSTER_MIN_SIZE must be at least 2, "
                                "ULTRON_RECRYSTALLIZATION_DELTA at least 1")
        if not 0 <= self.sft_validation_fraction < 1:
            raise SettingsError("ULTRON_SFT_VALIDATION_FRACTION must be in [0, 1)")
        if self.claim_lease_seconds <= 0:
            raise SettingsError("ULTRON_CLAIM_LEASE_SECONDS must be positive")
        if self.decay_interval_hours <= 0:
            raise SettingsError("ULTRON_DECAY_INTERVAL_HOURS must be positive")
        if self.max_line_bytes < 1024:
            raise SettingsError("ULTRON_MAX_LINE_BYTES must be at least 1024")
        if self.executor not in ("in_process", "multiprocess", "celery"):
            raise SettingsError(f"ULTRON_EXECUTOR={self.executor!r}: use in_process, multiprocess or celery")
        if self.partitioning not in ("session", "daily"):
            raise SettingsError(f"ULTRON_PARTITIONING={self.partitioning!r}: use session or daily")
        if self.llm_provider not in ("auto", "rules", "openai"):
            raise SettingsError(f"ULTRON_LLM_PROVIDER={self.llm_provider!r}: use rules, openai or auto")
        if self.segment_budget_tokens < 256:
            raise SettingsError(
                "ULTRON_LLM_MAX_INPUT_TOKENS - ULTRON_LLM_PROMPT_RESERVE_TOKENS must leave at least 256 tokens")
        if self.embedding_provider not in ("local", "openai", "hash"):
            raise SettingsError(f"ULTRON_EMBEDDING_PROVIDER={self.embedding_provider!r}: use local, openai or hash")
        if self.search_fusion not in ("minmax", "rrf"):
            raise SettingsError(f"ULTRON_SEARCH_FUSION={self.search_fusion!r}: use minmax or rrf")
        if self.search_context_weight < 0 or self.search_resolution_weight < 0:
            raise SettingsError("ULTRON_SEARCH_CONTEXT_WEIGHT and ULTRON_SEARCH_RESOLUTION_WEIGHT must be >= 0")
        if self.search_bm25_k1 <= 0 or not 0 <= self.search_bm25_b <= 1:
            raise SettingsError("ULTRON_SEARCH_BM25_K1 must be > 0 and ULTRON_SEARCH_BM25_B within 0..1")
        if self.search_exact_max < 0:
            raise SettingsError("ULTRON_SEARCH_EXACT_MAX must be 0 (always HNSW) or more")
        if self.owner_index_min < 1:
            raise SettingsError("ULTRON_OWNER_INDEX_MIN must be at least 1")
        if self.tag_indexes < 0:
            raise SettingsError("ULTRON_TAG_INDEXES must be 0 or more")
        if self.search_lexical_pool < 1:
            raise SettingsError("ULTRON_SEARCH_LEXICAL_POOL must be at least 1")
        if not 0 <= self.dedup_soft_threshold <= self.dedup_similarity_threshold <= 1:
            raise SettingsError("need 0 <= ULTRON_DEDUP_SOFT_THRESHOLD <= ULTRON_DEDUP_SIMILARITY_THRESHOLD <= 1")
        if not 0 < self.hook_timeout_seconds <= 60:
            raise SettingsError("ULTRON_HOOK_TIMEOUT_SECONDS must be above 0 and at most 60")
        for agent_id, _root in self.watch:
            if not _AGENT_ID.match(agent_id):
                raise SettingsError(f"ULTRON_WATCH: {agent_id!r} is not an agent id (letters, digits, '.', '_', "
                                    "'-' or '@', starting with a letter or digit)")
        if not 0 <= self.utility_outcome_weight <= 10:
            raise SettingsError("ULTRON_UTILITY_OUTCOME_WEIGHT must be between 0 and 10")
        if self.feedback_demote_after < 1 or self.skill_activate_after < 1 or self.skill_retire_min_votes < 1:
            raise SettingsError("ULTRON_FEEDBACK_DEMOTE_AFTER, ULTRON_SKILL_ACTIVATE_AFTER and "
                                "ULTRON_SKILL_RETIRE_MIN_VOTES must be at least 1")
        if self.hot_percentile < 0 or self.warm_percentile < 0 or self.hot_percentile + self.warm_percentile > 100:
            raise SettingsError("ULTRON_HOT_PERCENTILE + ULTRON_WARM_PERCENTILE must be within 0..100")
        for name in ("trajectory_memory_score_threshold", "trajectory_sft_score_threshold",
                     "trajectory_excellent_score_threshold", "quality_judge_weight", "memory_min_confidence",
                     "time_decay_weight", "cluster_similarity_threshold", "skill_retire_below",
                     "search_dense_weight", "stale_score_factor", "utility_rank_weight"):
            if not 0 <= getattr(self, name) <= 1:
                raise SettingsError(f"ULTRON_{name.upper()} must be between 0 and 1")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> "Settings":
        env = os.environ if env is None else env
        # None = unset: the field default applies. Only the values computed from more
        # than one variable (home, inbox, ingest roots, the LLM endpoint and key) are built here.
        values: dict[str, object] = dict(
            home=Path(env.get("ULTRON_HOME") or ".ultron").expanduser().resolve(),
            database_url=env.get("ULTRON_DATABASE_URL") or None,
            dagster_database_url=env.get("ULTRON_DAGSTER_DATABASE_URL") or None,
            inbox=_paths(env, "ULTRON_INBOX"),
            default_agent_id=env.get("ULTRON_DEFAULT_AGENT_ID") or None,
            decay_interval_hours=_number(env, "ULTRON_DECAY_INTERVAL_HOURS", float),
            archive_max_bytes=_number(env, "ULTRON_ARCHIVE_MAX_BYTES", int),
            max_line_bytes=_number(env, "ULTRON_MAX_LINE_BYTES", int),
            max_problems_per_file=_number(env, "ULTRON_MAX_PROBLEMS_PER_FILE", int),
            sensor_interval_seconds=_number(env, "ULTRON_SENSOR_INTERVAL_SECONDS", int),
            sensor_max_runs_per_tick=_number(env, "ULTRON_SENSOR_MAX_RUNS_PER_TICK", int),
            partitioning=_lower(env, "ULTRON_PARTITIONING"),
            llm_provider=_lower(env, "ULTRON_LLM_PROVIDER"),
            llm_base_url=env.get("ULTRON_LLM_BASE_URL") or (DASHSCOPE_URL if _dashscope_only(env) else None),
            llm_api_key=env.get("ULTRON_LLM_API_KEY") or env.get("DASHSCOPE_API_KEY") or None,
            llm_model=env.get("ULTRON_LLM_MODEL") or None,
            quality_llm_model=env.get("ULTRON_QUALITY_LLM_MODEL") or None,
            llm_timeout_seconds=_number(env, "ULTRON_LLM_TIMEOUT_SECONDS", float),
            llm_max_retries=_number(env, "ULTRON_LLM_MAX_RETRIES", int),
            llm_retry_base_seconds=_number(env, "ULTRON_LLM_RETRY_BASE_SECONDS", float),
            llm_max_input_tokens=_number(env, "ULTRON_LLM_MAX_INPUT_TOKENS", int),
            llm_prompt_reserve_tokens=_number(env, "ULTRON_LLM_PROMPT_RESERVE_TOKENS", int),
            trajectory_memory_score_threshold=_number(env, "ULTRON_TRAJECTORY_MEMORY_SCORE_THRESHOLD", float),
            trajectory_sft_score_threshold=_number(env, "ULTRON_TRAJECTORY_SFT_SCORE_THRESHOLD", float),
            trajectory_excellent_score_threshold=_number(env, "ULTRON_TRAJECTORY_EXCELLENT_SCORE_THRESHOLD", float),
            quality_judge_weight=_number(env, "ULTRON_QUALITY_JUDGE_WEIGHT", float),
            embedding_provider=_lower(env, "ULTRON_EMBEDDING_PROVIDER"),
            embedding_model=env.get("ULTRON_EMBEDDING_MODEL") or None,
            embedding_base_url=env.get("ULTRON_EMBEDDING_BASE_URL") or None,
            embedding_api_key=env.get("ULTRON_EMBEDDING_API_KEY") or None,
            embedding_dim=_number(env, "ULTRON_EMBEDDING_DIM", int),
            memory_min_confidence=_number(env, "ULTRON_MEMORY_MIN_CONFIDENCE", float),
            dedup_similarity_threshold=_number(env, "ULTRON_DEDUP_SIMILARITY_THRESHOLD", float),
            dedup_soft_threshold=_number(env, "ULTRON_DEDUP_SOFT_THRESHOLD", float),
            decay_alpha=_number(env, "ULTRON_DECAY_ALPHA", float),
            time_decay_weight=_number(env, "ULTRON_TIME_DECAY_WEIGHT", float),
            search_min_score=_number(env, "ULTRON_SEARCH_MIN_SCORE", float),
            search_fusion=_lower(env, "ULTRON_SEARCH_FUSION"),
            search_dense_weight=_number(env, "ULTRON_SEARCH_DENSE_WEIGHT", float),
            search_context_weight=_number(env, "ULTRON_SEARCH_CONTEXT_WEIGHT", float),
            search_resolution_weight=_number(env, "ULTRON_SEARCH_RESOLUTION_WEIGHT", float),
            search_lexical_pool=_number(env, "ULTRON_SEARCH_LEXICAL_POOL", int),
            search_exact_max=_number(env, "ULTRON_SEARCH_EXACT_MAX", int),
            owner_index_min=_number(env, "ULTRON_OWNER_INDEX_MIN", int),
            tag_indexes=_number(env, "ULTRON_TAG_INDEXES", int),
            search_bm25_k1=_number(env, "ULTRON_SEARCH_BM25_K1", float),
            search_bm25_b=_number(env, "ULTRON_SEARCH_BM25_B", float),
            hnsw_ef_search=_number(env, "ULTRON_HNSW_EF_SEARCH", int),
            pg_shared_buffers=env.get("ULTRON_PG_SHARED_BUFFERS", "").strip() or None,
            hot_percentile=_number(env, "ULTRON_HOT_PERCENTILE", float),
            warm_percentile=_number(env, "ULTRON_WARM_PERCENTILE", float),
            cold_ttl_days=_number(env, "ULTRON_COLD_TTL_DAYS", float),
            feedback_demote_after=_number(env, "ULTRON_FEEDBACK_DEMOTE_AFTER", int),
            stale_score_factor=_number(env, "ULTRON_STALE_SCORE_FACTOR", float),
            skill_activate_after=_number(env, "ULTRON_SKILL_ACTIVATE_AFTER", int),
            skill_retire_below=_number(env, "ULTRON_SKILL_RETIRE_BELOW", float),
            skill_retire_min_votes=_number(env, "ULTRON_SKILL_RETIRE_MIN_VOTES", int),
            utility_outcome_weight=_number(env, "ULTRON_UTILITY_OUTCOME_WEIGHT", float),
            utility_rank_weight=_number(env, "ULTRON_UTILITY_RANK_WEIGHT", float),
            consolidate_enabled=_flag(env, "ULTRON_CONSOLIDATE_ENABLED"),
            raw_archive=_flag(env, "ULTRON_RAW_ARCHIVE"),
            raw_archive_retention_days=_number(env, "ULTRON_RAW_ARCHIVE_RETENTION_DAYS", float),
            redaction_spacy_model=env.get("ULTRON_REDACTION_SPACY_MODEL") or None,
            dagster_host=env.get("ULTRON_DAGSTER_HOST") or None,
            dagster_port=_number(env, "ULTRON_DAGSTER_PORT", int),
            cluster_similarity_threshold=_number(env, "ULTRON_CLUSTER_SIMILARITY_THRESHOLD", float),
            cluster_min_size=_number(env, "ULTRON_CLUSTER_MIN_SIZE", int),
            claim_lease_seconds=_number(env, "ULTRON_CLAIM_LEASE_SECONDS", float),
            crystallization_threshold=_number(env, "ULTRON_CRYSTALLIZATION_THRESHOLD", int),
            recrystallization_delta=_number(env, "ULTRON_RECRYSTALLIZATION_DELTA", int),
            sft_validation_fraction=_number(env, "ULTRON_SFT_VALIDATION_FRACTION", float),
            api_host=env.get("ULTRON_API_HOST") or None,
            api_port=_number(env, "ULTRON_API_PORT", int),
            api_token=env.get("ULTRON_API_TOKEN") or None,
            token_secret=env.get("ULTRON_TOKEN_SECRET") or None,
            api_url=(env.get("ULTRON_API_URL") or "").strip() or None,
            ingest_roots=_paths(env, "ULTRON_INGEST_ROOTS"),
            watch=_watch(env),
            hook_timeout_seconds=_number(env, "ULTRON_HOOK_TIMEOUT_SECONDS", float),
            skills_export_dir=_path(env, "ULTRON_SKILLS_EXPORT_DIR"),
            executor=_lower(env, "ULTRON_EXECUTOR"),
            celery_broker_url=(env.get("ULTRON_CELERY_BROKER_URL") or "").strip() or None,
            celery_backend_url=(env.get("ULTRON_CELERY_BACKEND_URL") or "").strip() or None,
        )
        known = {f.name for f in fields(cls)}
        unknown = set(overrides) - known
        if unknown:
            raise SettingsError(f"unknown settings: {sorted(unknown)}")
        values = {name: value for name, value in values.items() if value is not None}
        values.update(overrides)
        return cls(**values)  # type: ignore[arg-type]

    @property
    def segment_budget_tokens(self) -> int:
        """Tokens of conversation text one segmentation window may hold."""
        return self.llm_max_input_tokens - self.llm_prompt_reserve_tokens

    @property
    def resolved_llm_provider(self) -> str:
        """`auto` means openai when an endpoint or key is configured, else the offline rules."""
        if self.llm_provider != "auto":
            return self.llm_provider
        return "openai" if (self.llm_api_key or self.llm_base_url) else "rules"

    @property
    def judge_model(self) -> str:
        return self.quality_llm_model or self.llm_model

    @property
    def pgdata(self) -> Path:
        return self.home / "pgdata"

    @property
    def skills_dir(self) -> Path:
        """Published skill directories ``{slug}-{version}/`` (SKILL.md, _meta.json)."""
        return self.home / "skills"

    @property
    def sft_dir(self) -> Path:
        """SFT exports: one directory per export, with a manifest."""
        return self.home / "sft"

    @property
    def dagster_home(self) -> Path:
        return self.home / "dagster"

    @property
    def api_token_file(self) -> Path:
        """Where a loopback server keeps the token it generated (``ultron.api.auth``)."""
        return self.home / "api_token"

    def local_api_token(self) -> str | None:
        """The token a server of this store accepts: ULTRON_API_TOKEN, else the one a loopback
        server generated. Every local caller (the CLI, the hooks, the Python client for a
        loopback URL) reads it here, so they cannot disagree."""
        if self.api_token and self.api_token.strip():
            return self.api_token.strip()
        try:
            return self.api_token_file.read_text("utf-8").strip() or None
        except (OSError, UnicodeDecodeError):
            return None

    @property
    def uses_embedded_database(self) -> bool:
        return self.database_url is None
