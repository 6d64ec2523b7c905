"""The memory browser at 100k (and 1M) memories: page times over HTTP, against the JSON API's
offset pages in the same run.

Each size gets a store of its own, built the way benchmarks/search.py builds one (its vectors,
texts and index handling, imported from there): secondary indexes dropped, rows COPYed,
indexes rebuilt, then ``VACUUM ANALYZE``. The memories are spread like a real store's: 50
agents (a few busy, most quiet), six types, three tiers, 3 % archived, 200 tags (1-4 per
memory, a few common, most rare), ``created_at`` over the last 90 days, 15 % in one of 500
clusters, 60 skills (1-3 versions) citing their cluster's memories, 70 % with a session as
their source (a few hundred sessions with their parsed messages, segments with trajectory
scores, arrival days), 1 % marked with rules fallbacks, a few edit histories and files with
parse problems, and 30 days of LLM usage.

The real app (``create_app``: API and browser) is served by uvicorn in a thread on
127.0.0.1; one keep-alive ``httpx.Client`` signs in once (``POST /ui/signin``) and times
whole requests (routing, SQL, rendering, HTTP). Every page is warmed up first, then
requested ``--requests`` times, cycling its parameter where it has one (agents, types,
tags, queries, memories) so no row is one cached page; every timed answer must be a 200
holding what the page should show (25 rows of the filtered kind, the memory's session
lines, ...), so an error page is never timed. The baseline, in the same run: the JSON
API's ``GET /memories?limit=25&offset=`` (offset pagination with an exact count), at page
one, at the depth of the keyset's page ``--deep-pages`` and at 90 % of the store.

    python benchmarks/browser.py [--sizes 100000 1000000] [--requests 60] [--keep-home DIR]

With ``--keep-home DIR`` the stores live in ``DIR/n<size>`` and a later run reuses them.
``q=`` searches embed their query with MiniLM (loaded once, warmed up before timing); the
store's vectors are search.py's synthetic clustered ones.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import socket
import statistics
import sys
import threading
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _support import machine_line, private_home  # noqa: E402
from search import (AGENTS, centres, load_texts, log, maintenance, percentile, reused_build,  # noqa: E402
                    secondary_indexes, store_vectors)

TOKEN = "benchmark-browser-token-0123456789"
TARGET_MS = 300.0
PAGE = 25
TYPES = ("error", "pattern", "correction", "preference", "life", "security")
TYPE_WEIGHTS = (0.35, 0.25, 0.12, 0.10, 0.10, 0.08)
TIERS = ("HOT", "WARM", "COLD")
TIER_WEIGHTS = (0.10, 0.60, 0.30)
TAG_WORDS = ("docker pandas csv python pytest git postgres nginx ssh npm kubectl terraform redis cache proxy "
             "deploy build auth oauth ssl dns timeout memory index query schema migration network cron "
             "logging metrics api cli json yaml unicode encoding locale refund booking flight").split()
TAG_SUFFIXES = ("", "-ci", "-prod", "-dev", "-api")
TAGS = [w + s for s in TAG_SUFFIXES for w in TAG_WORDS][:200]
N_CLUSTERS = 500
N_SKILLS = 60
SKILL_MEMBERS = 40
LINES_PER_SESSION = 240
SEGMENT_LINES = 30
DAYS = 90
FALLBACKS = ("summarise", "classify", "extract")
#: The COPY's column types (binary COPY needs them), in the order of ``fill``'s columns.
MEMORY_TYPES = ["text", "text", "text", "text", "text", "text[]", "text", "text", "text", "text[]", "float8", "text",
                "text", "int4", "timestamptz", "text", "text", "text", "int4", "int4", "timestamptz", "timestamptz",
                "vector", "text", "int4", "int4", "text[]"]


def agent_name(a: int) -> str:
    return f"agent-{a:02d}"


def session_file(s: int) -> str:
    return f"/home/dev/.claude/projects/-work-proj-{s % 37:02d}/{uuid.UUID(int=s + 7_000_000)}.jsonl"


# -- building the store ----------------------------------------------------------------------------


class Spread:
    """Every memory's attributes, drawn once with fixed seeds (row i is the same in every run)."""

    def __init__(self, size: int, sessions: int) -> None:
        rng = np.random.default_rng([21, size])
        self.size, self.sessions = size, sessions
        weights = 1 / np.arange(1, AGENTS + 1) ** 0.8  # a few busy agents, a long quiet tail
        self.agent = rng.choice(AGENTS, size, p=weights / weights.sum())
        self.type = rng.choice(len(TYPES), size, p=TYPE_WEIGHTS)
        self.tier = rng.choice(len(TIERS), size, p=TIER_WEIGHTS)
        self.archived = rng.random(size) < 0.03
        tag_p = 1 / np.arange(1, len(TAGS) + 1) ** 0.9
        self.tag_p = tag_p / tag_p.sum()
        self.n_tags = rng.integers(1, 5, size)
        self.tag_draws = rng.choice(len(TAGS), (size, 4), p=self.tag_p)
        # appended in time order, like a store that grows: the heap follows created_at
        self.age_s = np.sort(rng.uniform(0, DAYS * 86400, size))[::-1]
        self.hits = rng.geometric(0.15, size) - 1
        self.cluster = np.where(rng.random(size) < 0.15, rng.integers(0, N_CLUSTERS, size), -1)
        self.from_session = rng.random(size) < 0.70
        per_agent = [np.arange(a, sessions, AGENTS) for a in range(AGENTS)]
        self.session = np.array([per_agent[a][rng.integers(0, len(per_agent[a]))] if len(per_agent[a]) else -1
                                 for a in self.agent])
        self.from_session &= self.session >= 0
        self.start = rng.integers(1, LINES_PER_SESSION - 25, size)
        self.span = rng.integers(3, 20, size)
        self.second_source = rng.random(size) < 0.10
        self.fallback = rng.random(size) < 0.01
        self.helpful = rng.poisson(0.3, size)
        self.unhelpful = rng.poisson(0.1, size)
        self.ids = [str(uuid.UUID(bytes=bytes(b), version=4)) for b in rng.integers(0, 256, (size, 16), dtype=np.uint8)]

    def tags(self, i: int) -> list[str]:
        return list(dict.fromkeys(TAGS[t] for t in self.tag_draws[i, :self.n_tags[i]]))

    def segment(self, i: int) -> str:
        return f"seg-{self.session[i]:05d}-{(self.start[i] - 1) // SEGMENT_LINES}"


def fill(conn, spread: Spread, vectors: np.ndarray, texts: list[tuple[str, str]] | None, now: datetime) -> dict:
    """COPY the memories, their contributions, sessions (messages, segments, arrivals),
    clusters, skills and the overview's odds and ends."""
    from pgvector.psycopg import register_vector

    raw = conn.connection.driver_connection
    register_vector(raw)
    rng = np.random.default_rng(5)
    words = np.array("error timeout docker pandas csv import module permission deploy flight booking refund "
                     "cache memory index query token network proxy build test commit branch merge".split())
    counts: dict[str, int] = {}
    t0 = time.perf_counter()
    cols = ("id, memory_type, content, context, resolution, tags, summary_l0, overview_l1, kind, tools_used, "
            "confidence, tier, status, hit_count, last_hit_at, agent_id, segment_id, session_file, start_line, "
            "end_line, created_at, updated_at, embedding, cluster_id, helpful_count, unhelpful_count, fallback_tasks")
    contributions = []
    with raw.cursor() as cur:
        fill_clusters(cur, spread, now)
        # binary: the vectors go as their bytes (formatting 384 floats as text costs more than
        # the rest of the row)
        with cur.copy(f"COPY memory_records ({cols}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(MEMORY_TYPES)
            for i in range(spread.size):
                if texts:
                    content, context = texts[i % len(texts)]
                    resolution = "" if i % 3 else "Fixed by " + texts[(i * 7 + 3) % len(texts)][0][:200]
                else:
                    w = " ".join(rng.choice(words, 8))
                    content, context, resolution = f"memory {i}: {w}", "bench", "resolution " + w
                created = now - timedelta(seconds=float(spread.age_s[i]))
                agent = agent_name(int(spread.agent[i]))
                seg = sf = sl = el = None
                if spread.from_session[i]:
                    s = int(spread.session[i])
                    seg, sf = spread.segment(i), session_file(s)
                    sl, el = int(spread.start[i]), int(spread.start[i] + spread.span[i])
                cluster = f"cluster-{spread.cluster[i]:04d}" if spread.cluster[i] >= 0 else None
                copy.write_row((
                    spread.ids[i], TYPES[spread.type[i]], content, context, resolution, spread.tags(i),
                    content[:100], content[:400], "procedural" if i % 4 == 0 else None,
                    ["Bash"] if i % 5 == 0 else [], 0.5 + (i % 50) / 100, TIERS[spread.tier[i]],
                    "archived" if spread.archived[i] else "active", int(spread.hits[i]),
                    min(now, created + timedelta(days=1)) if spread.hits[i] else None, agent, seg, sf, sl, el, created,
                    created, vectors[i], cluster, int(spread.helpful[i]), int(spread.unhelpful[i]),
                    [FALLBACKS[i % 3]] if spread.fallback[i] else []))
                for k in range(2 if spread.second_source[i] else 1):
                    if spread.from_session[i]:
                        contributions.append((spread.ids[i], content, context, resolution, 0.9 if k else None,
                                              agent, seg, sf, created, spread.tags(i), [], sl + 2 * k, el + 2 * k))
                    else:
                        contributions.append((spread.ids[i], content, context, resolution, 0.9 if k else None,
                                              agent, None, None, created, spread.tags(i), [], None, None))
        counts["memories"] = spread.size
        log(f"  memories COPYed in {time.perf_counter() - t0:.0f} s")
        with cur.copy("COPY memory_contributions (memory_id, content, context, resolution, similarity, agent_id, "
                      "segment_id, session_file, created_at, tags, tools_used, start_line, end_line) "
                      "FROM STDIN") as copy:
            for row in contributions:
                copy.write_row(row)
        counts["contributions"] = len(contributions)
        counts.update(fill_sessions(cur, spread, texts, now))
        counts.update(fill_skills(cur, spread, now))
        counts.update(fill_rest(cur, spread, now))
    return counts


def fill_sessions(cur, spread: Spread, texts, now: datetime) -> dict[str, int]:
    """Sessions with their parsed messages, segments (scored) and arrival days."""
    roles = ("user", "assistant", "tool")
    n_msgs = 0
    with cur.copy("COPY trajectory_records (id, agent_id, session_file, partition_key, pair_index, segmented, "
                  "session_format, content_hash, size_bytes, line_count, message_count, problem_count, role_counts, "
                  "created_at, updated_at) FROM STDIN") as copy:
        for s in range(spread.sessions):
            agent, sf = agent_name(s % AGENTS), session_file(s)
            day = now - timedelta(days=(s * 7919) % DAYS)
            copy.write_row((f"traj-{s:05d}", agent, sf, f"{agent}:{sf}", -1, 1, "claude-code", f"{s:064x}",
                            LINES_PER_SESSION * 900, LINES_PER_SESSION, LINES_PER_SESSION,
                            3 if s % 97 == 0 else 0,
                            json.dumps({"user": 80, "assistant": 80, "tool": 80}), day, day))
    with cur.copy("COPY session_messages (record_id, seq, line, role, content, tool_calls, tool_call_id, name) "
                  "FROM STDIN") as copy:
        for s in range(spread.sessions):
            for n in range(LINES_PER_SESSION):
                role = roles[n % 3]
                text = texts[(s * LINES_PER_SESSION + n) % len(texts)][0] if texts else f"message {n} of {s}"
                calls = (json.dumps([{"id": f"c{n}", "function": {"name": "Bash",
                                                                   "arguments": json.dumps({"command": "pytest -x"})}}])
                         if role == "assistant" and n % 2 else None)
                copy.write_row((f"traj-{s:05d}", n, n + 1, role, text * (1 + n % 4), calls,
                                f"c{n - 1}" if role == "tool" else None, "Bash" if role == "tool" else None))
                n_msgs += 1
    segs = LINES_PER_SESSION // SEGMENT_LINES
    with cur.copy("COPY task_segments (id, agent_id, session_file, segment_index, start_line, end_line, fingerprint, "
                  "topic, quality_metrics, labeled, memory_extracted) FROM STDIN") as copy:
        for s in range(spread.sessions):
            for k in range(segs):
                score = 0.3 + ((s * 31 + k * 17) % 70) / 100
                copy.write_row((f"seg-{s:05d}-{k}", agent_name(s % AGENTS), session_file(s), k,
                                k * SEGMENT_LINES + 1, (k + 1) * SEGMENT_LINES, f"fp-{s}-{k}",
                                f"{TAG_WORDS[(s + k) % len(TAG_WORDS)]} task {k}",
                                json.dumps({"summary": {"overall_score": score}}), 1, 1))
    with cur.copy("COPY session_arrivals (file_key, agent_id, day) FROM STDIN") as copy:
        for s in range(spread.sessions):
            agent, sf = agent_name(s % AGENTS), session_file(s)
            copy.write_row((f"{agent}:{sf}", agent, (now - timedelta(days=(s * 7919) % DAYS)).date()))
    with cur.copy("COPY parse_problems (record_id, seq, line, error) FROM STDIN") as copy:
        for s in range(0, spread.sessions, 97):
            for k in range(3):
                copy.write_row((f"traj-{s:05d}", k, 10 + k, "JSONDecodeError: Expecting value: line 1 column 1"))
    return {"sessions": spread.sessions, "session_messages": n_msgs, "segments": spread.sessions * segs}


def cluster_members(spread: Spread) -> dict[int, list[str]]:
    members: dict[int, list[str]] = {}
    for i in np.flatnonzero((spread.cluster >= 0) & ~spread.archived):
        members.setdefault(int(spread.cluster[i]), []).append(spread.ids[i])
    return members


def fill_clusters(cur, spread: Spread, now: datetime) -> None:
    members = cluster_members(spread)
    with cur.copy("COPY knowledge_clusters (id, topic, status, size, skill_slug, created_at, updated_at) "
                  "FROM STDIN") as copy:
        for c in range(N_CLUSTERS):
            copy.write_row((f"cluster-{c:04d}", f"{TAGS[c % len(TAGS)]} problems", "active",
                            len(members.get(c, [])), f"skill-{c:03d}" if c < N_SKILLS else None, now, now))


def fill_skills(cur, spread: Spread, now: datetime) -> dict[str, int]:
    """500 clusters; the first 60 crystallised into skills citing up to 40 of their memories,
    a third of them with older (superseded) versions."""
    members = cluster_members(spread)
    md = "\n".join(f"## Step {k}\n\nRun `pytest -x` and read the first failure; {TAG_WORDS[k % 40]} "
                   "settings matter here. " * 3 for k in range(12))
    versions = 0
    with cur.copy("COPY skills (id, slug, version, parent_version, cluster_id, name, description, skill_md, "
                  "memory_ids, score, status, lifecycle, helpful_count, unhelpful_count, created_at, updated_at) "
                  "FROM STDIN") as copy:
        for c in range(N_SKILLS):
            ids = members.get(c, [])[:SKILL_MEMBERS]
            n = 1 + (c % 3 == 0) + (c % 6 == 0)
            for v in range(n):
                current = v == n - 1
                when = now - timedelta(days=10 * (n - v))
                copy.write_row((f"skill-{c:03d}-{v}", f"skill-{c:03d}", f"1.{v}.0", f"1.{v - 1}.0" if v else None,
                                f"cluster-{c:04d}", f"Handle {TAGS[c]} problems",
                                f"What to do when {TAGS[c]} fails", md + f"\n\nversion {v}\n",
                                ids[: max(3, len(ids) - 5 * (n - 1 - v))], 0.6 + (c % 40) / 100,
                                "current" if current else "superseded",
                                ("active", "probationary", "active", "retired")[c % 4] if current else "probationary",
                                c % 7, c % 3, when, when))
                versions += 1
    return {"clusters": N_CLUSTERS, "skills": N_SKILLS, "skill_versions": versions}


def fill_rest(cur, spread: Spread, now: datetime) -> dict[str, int]:
    """Edit histories of a few memories and 30 days of LLM usage."""
    with cur.copy("COPY memory_revisions (memory_id, content, context, resolution, tags, summary_l0, overview_l1, "
                  "edited_by, edited_at) FROM STDIN") as copy:
        for i in range(0, spread.size, 500):
            copy.write_row((spread.ids[i], "an earlier text", "", "", ["old"], "earlier", "earlier", "browser",
                            now - timedelta(days=1)))
    with cur.copy("COPY llm_usage (day, provider, model, task, calls, prompt_tokens, completion_tokens, failures, "
                  "retries, fallbacks) FROM STDIN") as copy:
        for d in range(30):
            for task in ("extract", "summarise", "crystallise"):
                copy.write_row(((now - timedelta(days=d)).date(), "openai", "gpt-4o-mini", task, 100 + d, 50_000 + d,
                                9_000, d % 3, d % 4, d % 2))
    return {"revisions": len(range(0, spread.size, 500))}


def build(db, home: Path, size: int, args: argparse.Namespace) -> dict[str, Any]:
    """Bulk-load a store of ``size`` memories (or reuse it): figures in ``home/browser-build.json``."""
    import sqlalchemy as sa

    record = home / "browser-build.json"
    reused = reused_build(db, home, size, record)
    if reused is not None:
        return reused
    log(f"building {size:,} memories in {home}")
    t_all = time.perf_counter()
    texts, _ = load_texts(args.text)
    vectors = store_vectors(size, centres())
    spread = Spread(size, args.sessions)
    now = datetime.now(timezone.utc)
    gen_s = time.perf_counter() - t_all
    t0 = time.perf_counter()
    with db.engine.begin() as conn:
        indexes = secondary_indexes(conn)
        for name, _ in indexes:
            conn.execute(sa.text(f"DROP INDEX {name}"))
        conn.execute(sa.text("ALTER TABLE memory_records DISABLE TRIGGER memory_records_lexicon"))
        counts = fill(conn, spread, vectors, texts, now)
        conn.execute(sa.text("ALTER TABLE memory_records ENABLE TRIGGER memory_records_lexicon"))
        conn.execute(sa.text("SELECT ultron_lexicon_rebuild()"))
    out: dict[str, Any] = {"size": size, "generate_s": gen_s, "load_s": time.perf_counter() - t0, "index_s": {},
                           "counts": counts, "built_at": now.isoformat(timespec="seconds")}
    log(f"loaded in {out['load_s']:.0f} s; indexing")
    with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        maintenance(conn, args)
        for name, ddl in indexes:
            t = time.perf_counter()
            conn.exec_driver_sql(ddl)
            out["index_s"][name] = time.perf_counter() - t
        log(f"  indexes in {sum(out['index_s'].values()):.0f} s")
        t = time.perf_counter()
        conn.exec_driver_sql("VACUUM (ANALYZE)")
        out["analyze_s"] = time.perf_counter() - t
    out["total_s"] = time.perf_counter() - t_all
    record.write_text(json.dumps(out, indent=1))
    return out


# -- serving and timing ------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    """The real app on 127.0.0.1, served by uvicorn in a thread of this process."""

    def __init__(self, client, settings) -> None:
        import uvicorn

        from ultron.api.app import create_app

        self.port = free_port()
        app = create_app(settings, client=client, token=TOKEN)
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning",
                                                    access_log=False))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise SystemExit("the app did not start")
            time.sleep(0.05)
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(30)


ROW_LINK = re.compile(r'<a class="title" href="/ui/memories/([^"]+)"')
NEXT = re.compile(r'<a rel="next" href="(/ui/memories\?[^"]*)">Older')


def rows_of(body: str) -> list[str]:
    return ROW_LINK.findall(body)


class Checked(SystemExit):
    pass


def expect(cond: bool, what: str) -> None:
    if not cond:
        raise Checked(what)


def list_check(rows: int | Callable[[str], int] = PAGE,
               marker: Callable[[str], str] | None = None) -> Callable[[Any, str], None]:
    """A list page: ``rows`` memories rendered (0: at least one; a function: of the URL), each
    (when ``marker``, a regular expression made from the URL) showing the filter's value."""
    def check(resp, url: str) -> None:
        body = resp.text
        expect('<table class="list">' in body, "no memory table")
        n = len(rows_of(body))
        want = rows(url) if callable(rows) else rows
        expect(n == want if want else n >= 1, f"{n} rows rendered, wanted {want or 'some'}")
        if marker is not None:
            m = marker(url)
            found = len(re.findall(m, body))
            expect(found >= n, f"not every row shows {m!r} ({found} of {n})")
    return check


def unquoted(url: str, key: str) -> str:
    from urllib.parse import parse_qsl, urlsplit

    return dict(parse_qsl(urlsplit(url).query))[key]


def param(url: str, key: str) -> str:
    return re.escape(unquoted(url, key))


def timed(http, name: str, urls: list[str], n: int, check, warm: int = 3,
          headers: dict[str, str] | None = None, budget_s: float | None = 120,
          before: Callable[[], None] | None = None) -> tuple[str, list[float]]:
    """``n`` timed GETs cycling over ``urls`` (after ``warm`` untimed ones), each checked;
    fewer (at least 10) when they take longer than ``budget_s`` in all (the 1M store's
    offset pages and overview take seconds each). ``before``: called (untimed) before each."""
    times: list[float] = []
    start = time.perf_counter()
    for k in range(warm + n):
        if budget_s is not None and len(times) >= 10 and time.perf_counter() - start > budget_s:
            break
        url = urls[k % len(urls)]
        if before is not None:
            before()
        t = time.perf_counter()
        resp = http.get(url, headers=headers)
        body_len = len(resp.content)  # the whole body read inside the timing
        dt = time.perf_counter() - t
        if resp.status_code != 200:
            raise SystemExit(f"{name}: GET {url} answered {resp.status_code}: {resp.text[:300]}")
        try:
            check(resp, url)
        except Checked as exc:
            raise SystemExit(f"{name}: GET {url}: {exc} ({body_len} bytes)") from None
        if k >= warm:
            times.append(dt)
    return name, times


def searched(http, name: str, urls: list[str], n: int, warm: int) -> tuple[str, list[float]]:
    """Search pages: ranked rows with their scores, or (a query may match nothing among one
    agent's memories) the empty answer, for at most a quarter of the queries."""
    empty = 0

    def check(resp, url: str) -> None:
        nonlocal empty
        body = resp.text
        expect('id="result-count"' in body, "no result count")
        if 'class="empty"' in body and "Nothing matches" in body:
            empty += 1
            return
        list_check(rows=0)(resp, url)
        expect('<th scope="col" class="num">Score</th>' in body, "no scores")

    row = timed(http, name, urls, n, check, warm=warm)
    if empty > max(1, (warm + n) // 4):
        raise SystemExit(f"{name}: {empty} of {warm + n} searches found nothing")
    return (f"{name} ({empty} empty)" if empty else name), row[1]


def choose(db) -> dict[str, Any]:
    """The filter values, memories and skills the pages are asked for, read from the store."""
    import sqlalchemy as sa

    with db.engine.connect() as conn:
        q = lambda sql, **p: conn.execute(sa.text(sql), p).all()  # noqa: E731
        by_tag = q("SELECT t, count(*) FROM memory_records, unnest(tags) t WHERE status = 'active' "
                   "GROUP BY t ORDER BY 2 DESC, 1")
        tags, tag_n = [r[0] for r in by_tag], {r[0]: r[1] for r in by_tag}
        detail = [r[0] for r in q(
            "SELECT DISTINCT m.id FROM skills s, unnest(s.memory_ids) i JOIN memory_records m ON m.id = i "
            "WHERE m.session_file IS NOT NULL AND m.status = 'active' ORDER BY 1 LIMIT 60")]
        skills = dict(q("SELECT slug, cardinality(memory_ids) FROM skills WHERE status = 'current' "
                        "AND lifecycle <> 'retired' AND cardinality(memory_ids) > 0 ORDER BY slug"))
        active = q("SELECT count(*) FROM memory_records WHERE status = 'active'")[0][0]
        deep_offset = (int(active * 0.9) // PAGE) * PAGE
        row = q("SELECT created_at, id FROM memory_records WHERE status = 'active' "
                "ORDER BY created_at DESC, id DESC OFFSET :o LIMIT 1", o=deep_offset - 1)[0]
        agents = [r[0] for r in q("SELECT agent_id, count(*) FROM memory_records WHERE status = 'active' "
                                  "GROUP BY 1 ORDER BY 2 DESC, 1")]
        # agent and type together: ten pairs from the commonest to the rarest
        pairs = q("SELECT agent_id, memory_type, count(*) FROM memory_records WHERE status = 'active' "
                  "GROUP BY 1, 2 ORDER BY 3 DESC, 1, 2")
        pairs = [pairs[round(k * (len(pairs) - 1) / 9)] for k in range(10)]
    from ultron.browse import encode_cursor

    cursor = encode_cursor(type("R", (), {"created_at": row[0], "id": row[1]})())
    n = len(tags)
    return {"tags_common": tags[:10], "tags_mid": tags[n // 2 - 5:n // 2 + 5], "tags_rare": tags[-10:],
            "tag_n": tag_n, "detail": detail, "skills": skills, "active": active, "deep_offset": deep_offset,
            "deep_cursor": cursor, "agents": agents, "pairs": {(a, t): n for a, t, n in pairs}}


def run_pages(base: str, client, args: argparse.Namespace,
              questions: list[str]) -> list[tuple[str, list[float]]]:
    import httpx
    from urllib.parse import urlencode

    pick = choose(client.db)
    n = args.requests
    results: list[tuple[str, list[float]]] = []
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    ui = lambda **p: "/ui/memories" + (f"?{urlencode(p)}" if p else "")  # noqa: E731
    with httpx.Client(base_url=base, timeout=120, follow_redirects=False) as http:
        resp = http.post("/ui/signin", data={"token": TOKEN, "next": "/ui/memories"})
        expect(resp.status_code == 303 and len(http.cookies) > 0, f"sign-in answered {resp.status_code}")
        expect(http.get("/ui/memories").status_code == 200, "not signed in")

        results.append(timed(http, "list, page 1", [ui()], n, list_check()))
        # following "Older →" from page 1 to page --deep-pages, timing each step
        url, walk = ui(), []
        for _ in range(args.deep_pages - 1):
            t = time.perf_counter()
            resp = http.get(url)
            dt = time.perf_counter() - t
            expect(resp.status_code == 200 and len(rows_of(resp.text)) == PAGE, f"walk: {url} -> {resp.status_code}")
            found = NEXT.search(resp.text)
            expect(found is not None, f"no Older link on {url}")
            url = html.unescape(found.group(1))
            walk.append(dt)
        deep_url = url
        results.append((f"list, walk pages 1-{args.deep_pages - 1} (Older →)", walk))
        results.append(timed(http, f"list, page {args.deep_pages} (cursor)", [deep_url], n, list_check()))
        results.append(timed(http, f"list, at 90% ({pick['deep_offset']:,} deep, cursor)",
                             [ui(cursor=pick["deep_cursor"])], n, list_check()))
        results.append(timed(http, "type", [ui(type=t) for t in TYPES], n,
                             list_check(marker=lambda u: f"<td>{param(u, 'type')}</td>")))
        results.append(timed(http, "agent (busiest to quietest)", [ui(agent=a) for a in pick["agents"]], n,
                             list_check(marker=lambda u: f"<td>{param(u, 'agent')}</td>")))
        for label, tags in (("common", pick["tags_common"]), ("mid", pick["tags_mid"]), ("rare", pick["tags_rare"])):
            lo, hi = min(pick["tag_n"][t] for t in tags), max(pick["tag_n"][t] for t in tags)
            results.append(timed(http, f"tag, {label} ({lo:,}-{hi:,} memories)", [ui(tag=t) for t in tags], n,
                                 list_check(rows=lambda u: min(PAGE, pick["tag_n"][unquoted(u, "tag")]),
                                            marker=lambda u: f'class="tag" href="[^"]*">{param(u, "tag")}</a>')))
        results.append(timed(http, "tier", [ui(tier=t) for t in TIERS], n,
                             list_check(marker=lambda u: f'class="tier [a-z]+">{param(u, "tier")}</span>')))
        results.append(timed(http, "recent=week", [ui(recent="week")], n, list_check()))
        lo, hi = min(pick["pairs"].values()), max(pick["pairs"].values())
        results.append(timed(http, f"agent + type ({lo:,}-{hi:,} memories)",
                             [ui(agent=a, type=t) for a, t in pick["pairs"]], n,
                             list_check(rows=lambda u: min(PAGE, pick["pairs"][unquoted(u, "agent"),
                                                                               unquoted(u, "type")]),
                                        marker=lambda u: f"<td>{param(u, 'type')}</td>")))
        qs = [questions[k % len(questions)] if questions else f"deploy error timeout {k}" for k in range(args.warm + n)]
        results.append(searched(http, "search q= (MiniLM + hybrid)", [ui(q=x) for x in qs], n, args.warm))
        qs2 = [ui(q=questions[(k + 500) % len(questions)] if questions else f"cache proxy {k}",
                  agent=pick["agents"][k % 10]) for k in range(args.warm + n)]
        results.append(searched(http, "search q= + agent", qs2, n, args.warm))

        def detail_check(resp, url) -> None:
            body = resp.text
            expect('id="memory-title"' in body, "no memory title")
            expect('<ol class="session"' in body, "no session lines rendered")
            expect("skills-used" in body, "no skills listed")

        results.append(timed(http, "memory detail (provenance)", [f"/ui/memories/{i}" for i in pick["detail"]], n,
                             detail_check))
        results.append(timed(http, "skills list", ["/ui/skills"], n,
                             lambda r, u: expect(r.text.count('href="/ui/skills/') >= PAGE, "skills not listed")))

        def skill_check(resp, url) -> None:
            expect("<h1>Handle " in resp.text, "no skill name")
            listed = resp.text.count('<li><a href="/ui/memories/')
            want = pick["skills"][url.rsplit("/", 1)[1]]
            expect(listed == want and "no longer stored" not in resp.text, f"{listed} of its {want} memories listed")

        results.append(timed(http, "skill detail", [f"/ui/skills/{s}" for s in pick["skills"]], n, skill_check))
        def overview_check(resp, url) -> None:
            expect("<h1>Overview</h1>" in resp.text and "Week of" in resp.text, "no overview")

        # the server may keep the overview's counts for a while (Browser.overview's cache):
        # then one row as a visitor gets it and one recounted on every request
        drop = getattr(client.browser, "forget_cached", None)
        results.append(timed(http, "overview" + (" (as served, cached)" if drop else ""), ["/ui/overview"], n,
                             overview_check))
        if drop is not None:
            results.append(timed(http, "overview, recounted (cache dropped first)", ["/ui/overview"], n,
                                 overview_check, before=drop))

        def api_check(offset: int):
            def check(resp, url) -> None:
                body = resp.json()
                expect(len(body["memories"]) == PAGE and body["total"] == pick["active"] and body["offset"] == offset,
                       f"API page: {len(body['memories'])} rows, total {body['total']}")
            return check

        deep_keyset = (args.deep_pages - 1) * PAGE
        for label, off in (("page 1", 0), (f"page {args.deep_pages}", deep_keyset),
                           (f"at 90% ({pick['deep_offset']:,} deep)", pick["deep_offset"])):
            results.append(timed(http, f"baseline API offset, {label}", [f"/memories?limit={PAGE}&offset={off}"], n,
                                 api_check(off), headers=bearer))
    return results


def report(size: int, info: dict[str, Any], results: list[tuple[str, list[float]]], sizes: dict[str, int],
           args: argparse.Namespace) -> None:
    mb = 1024 * 1024
    reused = f" (recorded {info['built_at']}, reused)" if info.get("reused") else ""
    c = info["counts"]
    print(f"== {size:,} memories ==")
    print(f"store: {c['memories']:,} memories ({sizes['active']:,} active), {c['contributions']:,} contributions, "
          f"{c['sessions']} sessions with {c['session_messages']:,} messages, {c['segments']:,} segments, "
          f"{c['clusters']} clusters, {c['skills']} skills ({c['skill_versions']} versions), "
          f"{c['revisions']} edit histories")
    print(f"build: {info['total_s']:.0f} s = generate {info['generate_s']:.0f} s + COPY {info['load_s']:.0f} s "
          f"+ indexes {sum(info['index_s'].values()):.0f} s (HNSW "
          f"{info['index_s'].get('ix_memory_records_embedding', 0):.0f} s) + VACUUM ANALYZE "
          f"{info['analyze_s']:.0f} s{reused}")
    print(f"size: memory_records {sizes['total'] / mb:,.0f} MB (heap {sizes['heap'] / mb:,.0f} MB); "
          f"database {sizes['db'] / mb:,.0f} MB; shared_buffers {sizes['shared_buffers']}")
    print(f"{args.requests} timed requests per row after warm-up, one keep-alive client; "
          f"load average {os.getloadavg()[0]:.2f} at the end\n")
    print(f"| page | n | p50 ms | p95 ms | max ms | p50 / API page 1 | target ≤{TARGET_MS:.0f} p95 |")
    print("|---|---:|---:|---:|---:|---:|:---:|")
    p = {name: (statistics.median(times) * 1e3, percentile(times, 95) * 1e3) for name, times in results}
    api_1 = p["baseline API offset, page 1"][0]
    for name, times in results:
        ok = "✓" if p[name][1] <= TARGET_MS else "✗"
        print(f"| {name} | {len(times)} | {p[name][0]:.1f} | {p[name][1]:.1f} | {max(times) * 1e3:.1f} | "
              f"{p[name][0] / api_1:.2f}x | {ok} |")
    print()
    deep = next(k for k in p if k.startswith(f"list, page {args.deep_pages}"))
    far = next(k for k in p if k.startswith("list, at 90%"))
    base_deep = next(k for k in p if k.startswith(f"baseline API offset, page {args.deep_pages}"))
    base_far = next(k for k in p if k.startswith("baseline API offset, at 90%"))
    base_1 = "baseline API offset, page 1"
    print("deep pages, keyset (the browser's Older → cursors) against offset (the JSON API):")
    for a, b in ((deep, base_deep), (far, base_far), (deep, base_far), (base_far, base_1), (far, "list, page 1")):
        print(f"{a} / {b}: p50 {ratio(p[a][0], p[b][0])}, p95 {ratio(p[a][1], p[b][1])}")
    print()


def ratio(a: float, b: float) -> str:
    r = a / b
    return f"{r:.2f}x" if r >= 0.1 else f"{r:.4f}x (1/{1 / r:.0f})"


def run_size(args: argparse.Namespace, home: Path, size: int) -> None:
    import sqlalchemy as sa

    from ultron.sdk import Ultron
    from ultron.settings import Settings

    settings = Settings.from_env()
    client = Ultron(settings)
    info = build(client.db, home, size, args)
    _, questions = load_texts(args.text)
    client.memory.embedder.embed_one("warm up the model")
    with client.db.engine.connect() as conn:
        sizes = dict(conn.execute(sa.text(
            "SELECT pg_total_relation_size('memory_records') AS total, pg_relation_size('memory_records') AS heap, "
            "pg_database_size(current_database()) AS db, "
            "(SELECT count(*) FROM memory_records WHERE status = 'active') AS active")).one()._mapping)
        sizes["shared_buffers"] = conn.exec_driver_sql("SHOW shared_buffers").scalar_one()
    with Served(client, settings) as base:
        results = run_pages(base, client, args, questions)
    report(size, info, results, sizes, args)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    ap.add_argument("--requests", type=int, default=60, help="timed requests per page")
    ap.add_argument("--warm", type=int, default=5, help="untimed requests before the search rows")
    ap.add_argument("--deep-pages", type=int, default=200, help="follow Older → this many pages deep")
    ap.add_argument("--sessions", type=int, default=400, help="sessions (with their messages) cited by memories")
    ap.add_argument("--keep-home", type=Path, help="keep (and reuse) the stores in DIR/n<size>, outside the repo")
    ap.add_argument("--maintenance-mem", default="2GB", help="maintenance_work_mem of the index builds")
    ap.add_argument("--parallel-workers", type=int, default=1, help="max_parallel_maintenance_workers")
    ap.add_argument("--text", choices=("words", "locomo"), default="locomo",
                    help="memory texts: LoCoMo dev turns cycled (default, when ../shared is there) or 8 random words")
    args = ap.parse_args()
    print(machine_line())
    print(f"load average at start: {os.getloadavg()[0]:.2f}\n")
    for size in sorted(args.sizes):
        if args.keep_home:
            home = args.keep_home.resolve() / f"n{size}"
            home.mkdir(parents=True, exist_ok=True)
            for key in [k for k in os.environ if k.startswith("ULTRON_")]:
                del os.environ[key]
            os.environ["ULTRON_HOME"] = str(home)
            os.environ["ULTRON_LLM_PROVIDER"] = "rules"
            run_size(args, home, size)
        else:
            with private_home("ultron-bench-browser-") as home:
                os.environ["ULTRON_LLM_PROVIDER"] = "rules"
                run_size(args, home, size)
    print(f"target: p95 <= {TARGET_MS:.0f} ms per page at 100k memories (issue: server-side pagination)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
