"""What a person curating the store reads: pages of memories under filters, a memory with
everything around it, skills by reliability with their versions, and the overview.

It spans the memory and skill stages and forget, so it sits beside the SDK (like
``ultron.forget``); the browser view (``ultron.web``) calls it and never touches SQL.
Searching as a person never counts hits: tiers follow agents' use, not curation.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import Any, Sequence

from ultron import access
from ultron.context import ServiceContext
from ultron.db import browse as store
from ultron.db import llm_usage as llm_usage_store
from ultron.db import memories as memory_store
from ultron.db.browse import RECENT_DAYS, BrowseFilters
from ultron.db.memories import MemoryRecord

#: A session message longer than this is cut on the page (the full text stays in the store).
MESSAGE_CHARS = 2000
#: A query's results are ranked once, this many at most, then paged.
SEARCH_POOL = 200
PAGE_SIZE = 25
#: The overview is counted at most this often (per server process).
OVERVIEW_SECONDS = 60.0


@dataclass
class MemoryPage:
    records: list[MemoryRecord]
    total: int
    more_than_total: bool
    next_cursor: str | None
    scores: dict[str, float] = field(default_factory=dict)  # search only
    stale: dict[str, str] = field(default_factory=dict)  # id -> reason, with a repository filter
    offset: int = 0  # search pages go by offset into the ranked pool


def encode_cursor(record: MemoryRecord) -> str:
    raw = f"{record.created_at.isoformat()}|{record.id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> tuple[datetime, str] | None:
    """The (created_at, id) a cursor names; None for none or a damaged one (page one)."""
    if not cursor:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        stamp, memory_id = raw.split("|", 1)
        return datetime.fromisoformat(stamp), memory_id
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return None


class Browser:
    def __init__(self, ctx: ServiceContext, memory, skills) -> None:
        self.ctx = ctx
        self.db = ctx.db
        self.settings = ctx.settings
        self.memory = memory
        self.skills = skills
        #: per view (None: everything; else an agent-bound viewer's agents)
        self._overview: dict[tuple[str, ...] | None, tuple[float, dict[str, Any]]] = {}
        self._overview_lock = threading.Lock()

    # -- the memory list ---------------------------------------------------------------------

    def memories(self, *, query: str = "", filters: BrowseFilters = BrowseFilters(), skill: str | None = None,
                 stale_repo: str | None = None, cursor: str | None = None, offset: int = 0,
                 limit: int = PAGE_SIZE) -> MemoryPage:
        """One page. Without a query: newest first, keyset-paged by ``cursor``. With one: the
        hybrid search's ranking (its filters applied in the search where it can, the rest
        after), paged by ``offset``. ``skill``: only the memories behind that skill's current
        version; ``stale_repo``: only memories whose files changed in that checkout."""
        self.memory.flush_hits()
        filters = replace(filters, visible=access.visible_agents())
        stale: dict[str, str] = {}
        if skill:
            found = self.skills.get_skill(skill)
            filters = replace(filters, memory_ids=tuple(found["memory_ids"]) if found else ())
        if stale_repo:
            report = self.memory.stale_memories(stale_repo) or {"stale": []}
            stale = {s["memory"]["id"]: s["reason"] for s in report["stale"]}
            ids = set(stale) if filters.memory_ids is None else set(stale) & set(filters.memory_ids)
            filters = replace(filters, memory_ids=tuple(sorted(ids)))
        if query.strip():
            return self._search(query, filters, offset, limit, stale)
        with self.db.engine.connect() as conn:
            records = store.page(conn, filters, limit + 1, decode_cursor(cursor))
            total, more = store.count(conn, filters)
        next_cursor = encode_cursor(records[limit - 1]) if len(records) > limit else None
        return MemoryPage(records[:limit], total, more, next_cursor, stale=stale)

    def _search(self, query: str, filters: BrowseFilters, offset: int, limit: int,
                stale: dict[str, str]) -> MemoryPage:
        results = self.memory.search_memories(query, "l1", SEARCH_POOL, filters.tier,
                                              [filters.tag] if filters.tag else None, filters.agent_id,
                                              count_hits=False)
        cutoff = None
        if filters.recent in RECENT_DAYS:
            cutoff = datetime.now(timezone.utc) - timedelta(days=RECENT_DAYS[filters.recent])
        wanted = set(filters.memory_ids) if filters.memory_ids is not None else None
        kept = [r for r in results
                if (not filters.memory_type or r.record.memory_type == filters.memory_type)
                and (wanted is None or r.record.id in wanted)
                and (cutoff is None or (r.record.created_at is not None and r.record.created_at >= cutoff))]
        offset = max(0, min(offset, max(0, len(kept) - 1)))
        window = kept[offset:offset + limit]
        return MemoryPage([r.record for r in window], len(kept), False, None,
                          scores={r.record.id: r.score for r in window}, stale=stale, offset=offset)

    def choices(self) -> dict[str, list[str]]:
        """The filter drop-downs' values: types, agents, common tags, skills."""
        mine = access.visible_agents()
        with self.db.engine.connect() as conn:
            agents = store.agents(conn)
            return {"types": store.memory_types(conn),
                    "agents": agents if mine is None else [a for a in agents if a in mine],
                    "tags": store.top_tags(conn, visible=mine),
                    "skills": [s["slug"] for s in store.skills_by_reliability(conn, 500, visible=mine)]}

    # -- one memory ------------------------------------------------------------------------------

    def memory_detail(self, memory_id: str) -> dict[str, Any] | None:
        """The memory in full with its provenance (each source's session lines and its
        segment's score), history, cluster, skills and Dagster partition."""
        record = self.memory.get_memory(memory_id)
        if record is None:
            return None
        mine = access.visible_agents()
        with self.db.engine.connect() as conn:
            sources = memory_store.contribution_rows(conn, memory_id)
            if mine is not None:  # another agent's session lines are not an agent-bound viewer's to read
                sources = [s for s in sources if s["agent_id"] in mine]
            segment_rows = store.segments(conn, sorted({s["segment_id"] for s in sources if s["segment_id"]}
                                                       | ({record.segment_id} if record.segment_id else set())))
            files = sorted({(s["agent_id"], s["session_file"]) for s in sources
                            if s["agent_id"] and s["session_file"]})
            partitions = store.partition_keys(conn, files)
            for s in sources:
                segment = segment_rows.get(s["segment_id"]) if s["segment_id"] else None
                start = s["start_line"] if s["start_line"] is not None else (segment or {}).get("start_line")
                end = s["end_line"] if s["end_line"] is not None else (segment or {}).get("end_line")
                s["segment"] = segment
                s["lines"] = (store.session_lines(conn, s["agent_id"], s["session_file"], start, end)
                              if s["agent_id"] and s["session_file"] and start is not None and end is not None
                              else [])
                for line in s["lines"]:  # raw session text: secrets in it are masked as in memories
                    line["text"] = self.ctx.redactor.redact(message_text(line))
                s["first_line"], s["last_line"] = start, end
                s["partition"] = partitions.get((s["agent_id"], s["session_file"]))
            # a cluster's topic is drawn from every member's text: not for an agent-bound viewer
            cluster = store.cluster_of(conn, memory_id) if mine is None else None
            return {"record": record, "sources": sources, "revisions": store.revisions(conn, memory_id),
                    "cluster": cluster, "skills": store.skills_using(conn, memory_id, visible=mine),
                    "partitioning": self.settings.partitioning}

    def edit(self, memory_id: str, *, content: str, context: str, resolution: str, tags: Sequence[str],
             edited_by: str) -> MemoryRecord | None:
        from ultron.access import actor
        from ultron.db import audit
        from ultron.memory.edits import edit_memory

        who = actor()
        before = self.memory.get_memory(memory_id)
        mine = access.visible_agents()
        if before is None or (mine is not None and before.agent_id not in mine):
            return None  # an agent-bound admin edits only its agents' memories
        record = edit_memory(self.memory, memory_id, content=content, context=context, resolution=resolution,
                             tags=tags, edited_by=who if edited_by == "browser" else edited_by)
        if record is not None and before is not None and record.updated_at != before.updated_at:
            changed = [f for f in ("content", "context", "resolution", "tags")
                       if getattr(before, f) != getattr(record, f)]
            with self.db.engine.begin() as conn:  # which fields, never their text
                audit.record(conn, actor=who, action="edit", target=memory_id, detail={"fields": changed})
        return record

    def forget_preview(self, memory_ids: Sequence[str]) -> dict[str, Any]:
        """What forgetting these memories takes with it, and what becomes of each skill: its
        current version is re-synthesised from what remains, or retired below the
        crystallisation threshold."""
        with self.db.engine.connect() as conn:
            preview = store.forget_preview(conn, memory_ids, visible=access.visible_agents())
        threshold = self.settings.crystallization_threshold
        for skill in preview["skills"]:
            left = skill.get("remaining")
            skill["after"] = ("" if not skill["current"] else
                              "rebuilt from the cluster's other memories" if left is not None and left >= threshold
                              else "withdrawn: too few memories left to crystallise")
        return preview

    # -- skills ------------------------------------------------------------------------------------

    def skills_page(self, offset: int = 0, limit: int = PAGE_SIZE) -> tuple[list[dict[str, Any]], int]:
        mine = access.visible_agents()
        with self.db.engine.connect() as conn:
            return (store.skills_by_reliability(conn, limit, offset, visible=mine),
                    store.count_current_skills(conn, visible=mine))

    def skill_detail(self, slug: str, version: str | None = None) -> dict[str, Any] | None:
        """A skill version with every version of its slug (for the diff) and the memories
        behind it, by id."""
        skill = self.skills.get_skill(slug, version)
        if skill is None:
            return None
        with self.db.engine.connect() as conn:
            versions = store.skill_versions(conn, slug, visible=access.visible_agents())
            members = {r.id: r for r in memory_store.get_records(conn, list(skill["memory_ids"]))
                       if access.sees(r.agent_id, r.shared)}
        return {"skill": skill, "versions": versions, "members": members}

    # -- overview ------------------------------------------------------------------------------------

    def overview(self, max_age: float = OVERVIEW_SECONDS) -> dict[str, Any]:
        """The store at a glance. It counts every memory, so it is computed at most once per
        ``max_age`` seconds per process and shown with its time (a dashboard a minute old is
        still true enough; recounting a million rows on every visit is not cheap enough)."""
        now = time.monotonic()
        view = access.visible_agents()
        with self._overview_lock:
            cached = self._overview.get(view)
            if cached is not None and now - cached[0] < max_age:
                return cached[1]
            data = self._count_overview(view)
            if len(self._overview) > 100:
                self._overview.clear()
            self._overview[view] = (time.monotonic(), data)
            return data

    def forget_cached(self) -> None:
        """Drop the cached overview (a forget must not leave its names on a page for a minute)."""
        with self._overview_lock:
            self._overview.clear()

    def _count_overview(self, view: tuple[str, ...] | None) -> dict[str, Any]:
        """``view``: an agent-bound viewer's agents; its counts, weeks, files and skills are theirs."""
        with self.db.engine.connect() as conn:
            counts = memory_store.memory_counts(conn, visible=view)
            weeks = store.created_by_week(conn, visible=view)
            problem_files, problems = store.ingestion_problems(conn, visible=view)
            fallbacks = store.fallback_counts(conn)
            top_skills = store.skills_by_reliability(conn, 10, include_retired=False, visible=view)
            usage = _llm_usage(conn)
        return {"as_of": datetime.now(timezone.utc), "counts": counts, "weeks": weeks,
                "problem_files": problem_files, "problems": problems,
                "fallbacks": fallbacks, "top_skills": top_skills, "llm_usage": usage,
                "llm": {"provider": self.settings.resolved_llm_provider,
                        "model": self.settings.llm_model if self.settings.resolved_llm_provider == "openai" else None}}


def _llm_usage(conn) -> list[dict[str, Any]]:
    """The last 30 days' LLM work, days with any only, newest first."""
    days = llm_usage_store.usage_by_day(conn, 30)
    return [d for d in reversed(days) if any(d[k] for k in llm_usage_store.COUNTS)]


def message_text(message: dict[str, Any]) -> str:
    """What a session message said, tool calls included, cut to MESSAGE_CHARS."""
    text = message.get("content") or ""
    calls = message.get("tool_calls")
    if calls:
        if isinstance(calls, str):
            try:
                calls = json.loads(calls)
            except ValueError:
                calls = []
        for call in calls if isinstance(calls, list) else []:
            fn = call.get("function", call) if isinstance(call, dict) else {}
            name = fn.get("name") or "tool"
            args = fn.get("arguments")
            args = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
            text += f"\n→ {name}({args or ''})"
    text = text.strip()
    return text if len(text) <= MESSAGE_CHARS else text[:MESSAGE_CHARS] + f" … ({len(text) - MESSAGE_CHARS} more characters)"
