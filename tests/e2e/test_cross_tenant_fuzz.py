"""Cross-tenant fuzz for agent-bound tokens: a seeded random store (four agents, memories with
a unique marker word each, some shared, some of no agent; skills built from one agent, from
several, from shared memories only) probed through every door (REST, MCP over HTTP, the
memory browser, the skills export) by tokens bound to one or two agents with each scope,
an unbound token and the server's own. Any answer that carries a marker, a memory id or a
skill the token may not see is a leak; the test counts them (expected: none) and also checks
the probes are not vacuous: every token finds what it may see. Reproducible: one SEED."""

from __future__ import annotations

import contextvars
import json
import random
import re
import string
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from html import unescape
from pathlib import Path

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from ultron.api.app import create_app

SEED = 20261129
ROUNDS = 2                  # passes of random probes per token and door (each pass draws anew)
SERVER_TOKEN = "xtfuzz-server-token-0123456789"
TOKEN_PREFIX = "xtfuzz-"
AGENTS = ("xt-ana", "xt-bo", "xt-cy", "xt-dee")
GHOST = "xt-ghost"          # an agent with no memories at all: its token sees the shared ones only
STORE_TABLES = ("trajectory_records, raw_user_uploads, task_segments, memory_records, memory_contributions, "
                "embedding_profile, knowledge_clusters, skills, feedback_events, memory_lexemes, memory_corpus, "
                "bundle_serves")

# -- realistic, varied memory text ----------------------------------------------------------------

SERVICES = ("billing", "checkout", "ledger", "notifier", "search-api", "auth-gateway", "reports", "ingest-worker",
            "scheduler", "media-proxy", "inventory", "payouts")
REPOS = ("storefront", "data-platform", "mobile-app", "infra-live", "ml-pipelines", "docs-site")
PACKAGES = ("pydantic", "psycopg", "numpy", "grpcio", "cryptography", "orjson", "lxml", "pyarrow")
TOOLS = ("ruff", "black", "uvicorn", "gunicorn", "node", "java", "envoy", "redis-server")
NAMESPACES = ("staging", "prod-eu", "prod-us", "sandbox", "qa")
TEMPLATES = (
    ("{svc} refuses to start because port {port} is already in use by a stale {tool} process {m}.",
     "starting {svc} locally for an integration test",
     "kill the stale {tool} process holding port {port}, then start {svc} again"),
    ("pytest in {repo} fails with ModuleNotFoundError for {pkg} after the lockfile changed {m}.",
     "running the {repo} test suite in a fresh virtualenv",
     "reinstall with pip install -e .[test] so {pkg} is pulled in again"),
    ("The {svc} pod loops in CrashLoopBackOff because the database secret is missing in namespace {ns} {m}.",
     "deploying {svc} to the {ns} cluster",
     "create the secret in {ns} and run kubectl rollout restart deployment/{svc}"),
    ("Alembic migration of the {svc} schema hangs on a lock held by an idle transaction for {secs} seconds {m}.",
     "upgrading the {svc} database during a release",
     "find the blocking pid in pg_stat_activity and terminate it before rerunning the migration"),
    ("npm ci in {repo} fails with EINTEGRITY for a tarball after the registry mirror switched {m}.",
     "the CI job that builds the {repo} frontend",
     "drop the stale integrity hashes, run npm install once and commit package-lock.json"),
    ("The {svc} container is OOM killed with exit code 137 under load; its limit is {mem} MiB {m}.",
     "load testing {svc} before the sale",
     "raise the memory limit of {svc} above {mem} MiB and cap the worker pool"),
    ("Terraform plan for {ns} shows drift on the {svc} load balancer after a manual console edit {m}.",
     "reviewing the infra-live pull request",
     "import the manual change or revert it in the console, then plan again"),
    ("Celery workers of {svc} stop consuming after Redis restarts because broker retries are off {m}.",
     "the nightly Redis upgrade",
     "set broker_connection_retry_on_startup and restart the {svc} workers"),
    ("go build of {svc} fails with a missing go.sum entry for a transitive module {m}.",
     "building {svc} in a clean container",
     "run go mod tidy and commit go.sum"),
    ("The user prefers {tool} with line length {small} for formatting code in {repo} {m}.",
     "code style discussions in {repo}",
     "format with {tool} at line length {small} before committing"),
    ("Nginx answers 502 for {svc} because the upstream keepalive timeout is shorter than the app's {m}.",
     "putting {svc} behind the shared ingress",
     "set keepalive_timeout above {secs} seconds in the upstream block"),
    ("TLS handshakes to {svc} fail after its certificate expired in {ns} {m}.",
     "a Monday incident on {svc}",
     "renew the certificate with cert-manager and reload {svc}"),
    ("The GitHub Actions cache for {repo} never hits because the cache key contains the run number {m}.",
     "slow CI on {repo}",
     "key the cache on the hash of the lockfile only"),
    ("Cargo build of {svc} fails because the linker cc is missing from the slim base image {m}.",
     "building the {svc} image for arm64",
     "install build-essential in the builder stage of the {svc} Dockerfile"),
    ("The Dagster sensor for {svc} skips ticks when the daemon heartbeat is older than {secs} seconds {m}.",
     "scheduling the {svc} backfills",
     "restart the dagster-daemon and raise its heartbeat tolerance"),
    ("The Kafka consumer group of {svc} lags because max.poll.interval.ms is below the batch time {m}.",
     "processing the {svc} event stream",
     "raise max.poll.interval.ms above {secs}000 or shrink max.poll.records"),
    ("S3 uploads from {svc} fail with SignatureDoesNotMatch when the host clock drifts {m}.",
     "running {svc} on a new VM pool in {ns}",
     "enable chrony on the hosts so the clock stays within a second"),
    ("Autovacuum on the {svc} database falls behind on its events table and queries slow down {m}.",
     "the weekly performance review of {svc}",
     "lower autovacuum_vacuum_scale_factor for the events table to 0.02"),
)


def _letters(rng: random.Random, n: int = 10) -> str:
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(n))


@dataclass
class Mem:
    marker: str            # the unique word in its content (a twin group shares one)
    owner: str | None
    shared: bool
    content: str
    context: str
    resolution: str
    id: str = ""
    present: bool = True   # its marker is in the stored text (a merge into an older memory of
                           # the same owner keeps that memory's words)

    @property
    def words(self) -> list[str]:
        return [w for w in re.findall(r"[a-z]{4,}", self.content.lower()) if not w.startswith("zq")]


@dataclass
class SkillSeed:
    slug: str
    word: str              # the skill's own unique word (its description and body)
    members: list[Mem]
    description: str

    @property
    def memory_ids(self) -> list[str]:
        return [m.id for m in self.members]


@dataclass
class Who:
    name: str
    scope: str
    agents: tuple[str, ...] | None       # None: sees everything (unbound, the server's token)
    token: str = ""
    forbidden: frozenset[str] = frozenset()

    def sees(self, owner: str | None, shared: bool) -> bool:
        return self.agents is None or shared or owner in self.agents

    def sees_memory(self, m: Mem) -> bool:
        return self.sees(m.owner, m.shared)

    def sees_skill(self, s: SkillSeed) -> bool:
        return all(self.sees_memory(m) for m in s.members)

    @property
    def writes(self) -> bool:
        return self.scope in ("write", "admin")


@dataclass
class Ledger:
    probes: Counter = field(default_factory=Counter)
    leaks: list = field(default_factory=list)
    wrong: list = field(default_factory=list)       # a status or a miss that breaks the rule (not a leak)

    def check(self, door: str, who: Who, text: str, sent: str, probe: str) -> list[str]:
        """Count one probe; record what it showed that ``who`` may not see (an item the probe
        itself sent, e.g. an id echoed in a 404 message, is not a leak)."""
        self.probes[door] += 1
        found = sorted(f for f in who.forbidden if f in text and f not in sent)
        if found:
            self.leaks.append((door, who.name, probe, found[:4]))
        return found

    def expect(self, ok: bool, door: str, who: Who, probe: str, got: str) -> None:
        if not ok:
            self.wrong.append((door, who.name, probe, got[:200]))

    def summary(self) -> str:
        doors = ", ".join(f"{d}={n}" for d, n in sorted(self.probes.items()))
        return (f"cross-tenant fuzz (seed {SEED}): {sum(self.probes.values())} probes [{doors}]; "
                f"leaks: {len(self.leaks)}; wrong answers: {len(self.wrong)}")

    def report(self, limit: int = 25) -> str:
        by_door = Counter(d for d, *_ in self.leaks)
        lines = [self.summary(), f"leaks by door: {dict(by_door)}"]
        lines += [f"LEAK {d} as {w}: {p} -> {f}" for d, w, p, f in self.leaks[:limit]]
        lines += [f"WRONG {d} as {w}: {p} -> {g}" for d, w, p, g in self.wrong[:limit]]
        return "\n".join(lines)


@dataclass
class World:
    svc: object
    http: TestClient
    memories: list[Mem]
    skills: list[SkillSeed]
    who: dict[str, Who]
    rng: random.Random
    ledger: Ledger
    tmp: Path

    def visible(self, who: Who) -> list[Mem]:
        return [m for m in self.memories if who.sees_memory(m)]

    def invisible(self, who: Who) -> list[Mem]:
        return [m for m in self.memories if not who.sees_memory(m)]


# -- the store ------------------------------------------------------------------------------------


def _owner_slots(rng: random.Random) -> list[tuple[str | None, bool]]:
    """~52 (owner, shared) pairs: every agent with enough private memories, a few of no
    agent, about a quarter shared (of an agent or of none)."""
    slots = [(a, False) for a in AGENTS for _ in range(8)]          # 32 private, 8 per agent
    slots += [(None, False)] * 5                                     # only unbound tokens see these
    slots += [(a, True) for a in AGENTS for _ in range(3)] + [(None, True)] * 3   # 15 shared
    rng.shuffle(slots)
    return slots


def _seed_memories(svc, rng: random.Random) -> list[Mem]:
    combos = [(t, s) for t in range(len(TEMPLATES)) for s in SERVICES]
    rng.shuffle(combos)
    mems: list[Mem] = []
    for (owner, shared), (t, svc_name) in zip(_owner_slots(rng), combos):
        fill = {"svc": svc_name, "repo": rng.choice(REPOS), "pkg": rng.choice(PACKAGES), "tool": rng.choice(TOOLS),
                "ns": rng.choice(NAMESPACES), "port": rng.randint(8000, 8999), "secs": rng.randint(20, 900),
                "mem": rng.choice((256, 384, 512, 768, 1024)), "small": rng.choice((88, 100, 110, 120))}
        m = "zqmark" + _letters(rng)
        content, context, resolution = (part.format(m=m, **fill) for part in TEMPLATES[t])
        mems.append(Mem(m, owner, shared, content, context, resolution))
    # twins: the very same text under different owners (or the same agent, shared and not):
    # deduplication must keep them apart, so a twin marker is seen by whoever sees one copy
    twin_texts = (
        ("Rotate the webhook signing secret of the payments service every quarter and keep the previous one "
         "valid for a day {m}.", "security review", "use the secrets manager"),
        ("Docker Desktop on macOS runs out of disk when old build cache layers pile up {m}.",
         "local builds getting slower", "run docker builder prune weekly"),
        ("The flaky login end-to-end test passes once the browser viewport is at least 1280 wide {m}.",
         "stabilising the playwright suite", "set the viewport in the shared fixture"),
    )
    for owners, text in zip((((AGENTS[0], False), (AGENTS[1], False)), ((AGENTS[2], False), (None, True)),
                             ((AGENTS[1], False), (AGENTS[1], True))), twin_texts):
        m = "zqtwin" + _letters(rng)
        mems += [Mem(m, o, s, *(part.format(m=m) for part in text)) for o, s in owners]
    for mem in mems:
        record = svc.upload_memory(mem.content, mem.context, mem.resolution, ["xtfuzz"], agent_id=mem.owner,
                                   shared=mem.shared)
        assert (record.agent_id, bool(record.shared)) == (mem.owner, mem.shared), \
            f"an upload of {mem.owner}/{mem.shared} was stored as {record.agent_id}/{record.shared}"
        mem.id = record.id
    for mem in mems:
        stored = svc.get_memory(mem.id)
        mem.present = mem.marker in " ".join(stored[k] or "" for k in ("content", "context", "resolution"))
    by_id = defaultdict(list)
    for mem in mems:
        by_id[mem.id].append(mem)
    for group in by_id.values():          # a merge may only ever join the same owner and flag
        assert len({(g.owner, g.shared) for g in group}) == 1, f"merged across owners: {group}"
    twins = [m for m in mems if m.marker.startswith("zqtwin")]
    assert len({m.id for m in twins}) == len(twins), f"deduplication merged twins of different owners: {twins}"
    assert len(by_id) >= 45, f"only {len(by_id)} distinct memories: the texts deduplicated"
    return mems


def _skill_md(slug: str, word: str, title: str, description: str, members: list[Mem]) -> str:
    lines = ["---", f"name: {slug}", f"description: {description}", "metadata:", "  version: 1.0.0",
             f"  memory_count: {len(members)}", "  generator: xtfuzz", "---", "", f"# {title}", "",
             "## When to use", ""]
    lines += [f"- {m.context} ({word}, {m.marker})" for m in members]
    lines += ["", "## Steps", ""]
    lines += [f"{i}. {m.resolution} ({m.marker}) [{m.id}]" for i, m in enumerate(members, 1)]
    lines += ["", "## Pitfalls", "", f"- {members[0].content}", "", "## Evidence", "",
              f"Distilled from {len(members)} memories:", ""]
    lines += [f"- `{m.id}` {m.content}" for m in members]
    return "\n".join(lines) + "\n"


def _seed_skills(svc, mems: list[Mem], rng: random.Random, tmp: Path) -> list[SkillSeed]:
    from ultron.db import skills as skill_store

    pool = {m.id: m for m in mems}     # one Mem per stored memory
    singles = list(pool.values())

    def pick(pred, n: int) -> list[Mem]:
        found = [m for m in singles if pred(m)]
        assert len(found) >= n, f"not enough memories for a skill: {len(found)} < {n}"
        return rng.sample(found, n)

    def private(agent):
        return lambda m: m.owner == agent and not m.shared

    a, b, c, d = AGENTS
    plans = [
        pick(private(a), 3), pick(private(b), 3), pick(private(c), 2), pick(private(d), 2),     # one agent
        pick(private(a), 2) + pick(lambda m: m.shared, 1),                                       # one agent + shared
        pick(private(a), 2) + pick(private(b), 2),                                               # two agents
        pick(private(b), 1) + pick(private(c), 1) + pick(private(d), 1),                         # three agents
        pick(lambda m: m.shared, 3), pick(lambda m: m.shared and m.owner is None, 1)
        + pick(lambda m: m.shared and m.owner is not None, 2),                                   # shared only
        pick(lambda m: m.owner is None and not m.shared, 1) + pick(lambda m: m.shared, 1),       # unbound only
    ]
    seeds = []
    with svc.db.engine.begin() as conn:
        for members in plans:
            slug, word = "zqskill-" + _letters(rng, 8), "zqskw" + _letters(rng)
            title = f"Handle {members[0].context}"
            description = f"What to do about {members[0].context} ({word}; {', '.join(m.marker for m in members)})"
            md = _skill_md(slug, word, title, description, members)
            embedding = svc.context.embedder.embed_one(description)
            skill_store.insert_skill(conn, slug=slug, version="1.0.0", parent_version=None, cluster_id=None,
                                     name=title, description=description, skill_md=md,
                                     meta={"generator": "xtfuzz"}, memory_ids=[m.id for m in members], score=0.8,
                                     superseded_slugs=[], path=str(tmp / "no-such-dir" / slug), embedding=embedding)
            seeds.append(SkillSeed(slug, word, members, description))
    return seeds


def _forbidden(who: Who, mems: list[Mem], skills: list[SkillSeed]) -> frozenset[str]:
    by_marker = defaultdict(list)
    for m in mems:
        by_marker[m.marker].append(m)
    out = {m.id for m in mems if not who.sees_memory(m)}
    out |= {marker for marker, group in by_marker.items() if not any(who.sees_memory(m) for m in group)}
    for s in skills:
        if not who.sees_skill(s):
            out |= {s.slug, s.word}
    return frozenset(out)


TOKENS = (  # name, scope, agents
    ("ana-read", "read", (AGENTS[0],)),
    ("bo-write", "write", (AGENTS[1],)),
    ("cy-admin", "admin", (AGENTS[2],)),
    ("ana-bo-read", "read", (AGENTS[0], AGENTS[1])),
    ("bo-cy-write", "write", (AGENTS[1], AGENTS[2])),
    ("ana-dee-admin", "admin", (AGENTS[0], AGENTS[3])),
    ("ghost-read", "read", (GHOST,)),
    ("unbound-read", "read", None),
)


def _empty_store(db) -> None:
    with db.engine.begin() as conn:
        conn.execute(sa.text(f"TRUNCATE {STORE_TABLES} CASCADE"))
        conn.execute(sa.text("DELETE FROM api_tokens WHERE name LIKE :p"), {"p": TOKEN_PREFIX + "%"})


@pytest.fixture(scope="module")
def world(db, tmp_path_factory):
    from ultron.sdk import Ultron
    from ultron.settings import Settings

    tmp = tmp_path_factory.mktemp("xtfuzz")
    _empty_store(db)
    svc = Ultron(Settings.from_env(home=tmp / "home", llm_provider="rules"), db=db)
    rng = random.Random(SEED)
    started = time.monotonic()
    mems = _seed_memories(svc, rng)
    skills = _seed_skills(svc, mems, rng, tmp)
    who: dict[str, Who] = {}
    for name, scope, agents in TOKENS:
        token, row = svc.tokens.create(TOKEN_PREFIX + name, scope, agents=list(agents) if agents else None)
        assert (tuple(row.get("agents") or ()) or None) == agents, row
        who[name] = Who(name, scope, agents, token)
    who["server"] = Who("server", "admin", None, SERVER_TOKEN)
    for w in who.values():
        w.forbidden = _forbidden(w, mems, skills)
    app = create_app(svc.settings, client=svc, token=SERVER_TOKEN)
    with TestClient(app, base_url="http://127.0.0.1") as http:
        yield World(svc, http, mems, skills, who, rng, Ledger(), tmp)
    print(f"xtfuzz module took {time.monotonic() - started:.1f}s")
    _empty_store(db)


# -- doors ----------------------------------------------------------------------------------------


def _auth(who: Who) -> dict[str, str]:
    return {"Authorization": f"Bearer {who.token}"}


def rest(w: World, who: Who, door: str, method: str, url: str, *, body=None, params=None, probe: str = ""):
    answer = w.http.request(method, url, headers=_auth(who), json=body, params=params)
    sent = url + json.dumps(body) + json.dumps(params)
    w.ledger.check(door, who, answer.text, sent, probe or f"{method} {url} {sent[len(url):][:160]}")
    return answer


def mcp(w: World, who: Who, method: str, params: dict, door: str, probe: str) -> dict:
    headers = {**_auth(who), "Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    answer = w.http.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": method,
                                                          "params": params})
    w.ledger.check(door, who, answer.text, json.dumps(params), probe)
    w.ledger.expect(answer.status_code == 200, door, who, probe, f"HTTP {answer.status_code}: {answer.text}")
    try:
        return answer.json()
    except ValueError:
        return {}


def tool(w: World, who: Who, name: str, args: dict) -> tuple[bool, dict]:
    """(is_error, structured content) of one MCP tool call."""
    body = mcp(w, who, "tools/call", {"name": name, "arguments": args}, f"mcp:{name}", f"{name}({args})")
    result = body.get("result") or {}
    return bool(result.get("isError")), result.get("structuredContent") or {}


def sign_in(w: World, who: Who) -> None:
    w.http.cookies.clear()
    page = w.http.post("/ui/signin", data={"token": who.token, "next": "/ui/memories"}, follow_redirects=False)
    assert page.status_code == 303, (who.name, page.status_code, page.text[:300])


def page(w: World, who: Who, door: str, url: str, params=None, probe: str = ""):
    answer = w.http.get(url, params=params)
    sent = url + json.dumps(params)
    w.ledger.check(door, who, answer.text, sent, probe or f"GET {url} {params or ''}")
    return answer


def _verdict(who: Who, helpful: bool) -> dict:
    """A feedback body; a token of several agents says which of its agents gives it."""
    return {"helpful": helpful, **({"agent_id": who.agents[0]} if who.agents else {})}


# -- probe generation -------------------------------------------------------------------------------


def _query(w: World, who: Who) -> tuple[str, Mem | None]:
    """A random query and, when it names exactly one marker, the memory it names."""
    rng = w.rng
    kind = rng.random()
    target_pool = w.invisible(who) if (who.agents is not None and rng.random() < 0.6) else w.memories
    if not target_pool:
        target_pool = w.memories
    m = rng.choice(target_pool)
    if kind < 0.45:
        return m.marker, m
    if kind < 0.65:
        other = rng.choice(w.memories)
        return f"{m.marker} {other.marker}", None
    if kind < 0.85:
        words = m.words
        return " ".join(rng.sample(words, min(4, len(words)))), None
    return f"{m.context} {m.marker}", m


def _must_find(w: World, who: Who, target: Mem | None) -> str | None:
    """The id a search naming ``target``'s marker must return for ``who`` (None: no demand)."""
    if target is None:
        return None
    # a twin marker names several memories: one ``who`` sees must come back
    return next((m.id for m in w.memories if m.marker == target.marker and m.present and who.sees_memory(m)), None)


def _random_ids(w: World, who: Who, n: int) -> list[str]:
    pool = [m.id for m in w.invisible(who)] or [m.id for m in w.memories]
    out = [w.rng.choice(pool) for _ in range(n)]
    out += [w.rng.choice(w.memories).id, str(uuid.UUID(int=w.rng.getrandbits(128)))]
    return list(dict.fromkeys(out))


def _slugs(w: World, who: Who, n: int) -> list[SkillSeed]:
    hidden = [s for s in w.skills if not who.sees_skill(s)]
    pool = hidden + hidden + w.skills
    return list({s.slug: s for s in (w.rng.choice(pool) for _ in range(n))}.values())


# -- the probes, door by door -----------------------------------------------------------------------


def probe_rest(w: World, who: Who) -> None:
    L = w.ledger
    for _ in range(10):
        query, target = _query(w, who)
        agent = w.rng.choice([None, None, None, *AGENTS])
        body = {"query": query, "limit": 10, "detail_level": w.rng.choice(["l0", "l1"])}
        if agent:
            body["agent_id"] = agent
        answer = rest(w, who, "rest:search", "POST", "/memories/search", body=body)
        must = _must_find(w, who, target) if not agent else None
        if must:
            L.expect(must in answer.text, "rest:search", who, f"own marker {query}", answer.text)
    for _ in range(3):
        queries = [_query(w, who) for _ in range(w.rng.randint(2, 5))]
        answer = rest(w, who, "rest:batch", "POST", "/memories/search/batch",
                      body={"queries": [q for q, _ in queries], "limit": 10})
        if answer.status_code == 200:
            for (q, target), found in zip(queries, answer.json()["searches"]):
                must = _must_find(w, who, target)
                if must:
                    L.expect(must in {r["id"] for r in found["results"]}, "rest:batch", who, f"own marker {q}",
                             json.dumps(found)[:200])
    for _ in range(4):
        ids = _random_ids(w, who, 4)
        answer = rest(w, who, "rest:details", "POST", "/memories/details", body={"ids": ids})
        if answer.status_code == 200:
            got = answer.json()
            shown = {m["id"] for m in got["memories"]}
            for i in ids:
                mem = next((m for m in w.memories if m.id == i), None)
                should = mem is not None and who.sees_memory(mem)
                L.expect((i in shown) == should and (i in got["missing"]) != should, "rest:details", who,
                         f"details {i} (visible={should})", json.dumps(got)[:200])
    for i in _random_ids(w, who, 4):
        answer = rest(w, who, "rest:get", "GET", f"/memories/{i}")
        mem = next((m for m in w.memories if m.id == i), None)
        want = 200 if mem is not None and who.sees_memory(mem) else 404
        L.expect(answer.status_code == want, "rest:get", who, f"GET /memories/{i}", f"{answer.status_code}")
    listed = rest(w, who, "rest:list", "GET", "/memories", params={"limit": 500})
    if listed.status_code == 200:
        ids = {m["id"] for m in listed.json()["memories"]}
        want = {m.id for m in w.visible(who)}
        L.expect(want <= ids, "rest:list", who, "GET /memories lists every visible memory",
                 f"missing {sorted(want - ids)[:3]}")
    for agent in w.rng.sample(AGENTS, 2):
        rest(w, who, "rest:list", "GET", "/memories", params={"limit": 100, "agent_id": agent})
    for _ in range(3):
        query, _ = _query(w, who)
        rest(w, who, "rest:context", "POST", "/context",
             body={"task": f"fix it: {query}", "token_budget": w.rng.choice([400, 1500, 4000])})
    for s in _slugs(w, who, 4):
        answer = rest(w, who, "rest:skill-search", "POST", "/skills/search", body={"query": s.description,
                                                                                   "limit": 10})
        if who.sees_skill(s):
            L.expect(s.slug in answer.text, "rest:skill-search", who, f"search own skill {s.slug}", answer.text)
        rest(w, who, "rest:skill-search", "POST", "/skills/search",
             body={"query": " ".join(m.marker for m in s.members), "limit": 10})
    listed = rest(w, who, "rest:skills", "GET", "/skills", params={"limit": 500})
    for s in w.skills:
        if who.sees_skill(s):
            L.expect(s.slug in listed.text, "rest:skills", who, f"GET /skills lists {s.slug}", listed.text)
    for s in _slugs(w, who, 5):
        want = 200 if who.sees_skill(s) else 404
        for params in ({}, {"format": "markdown"}, {"version": "1.0.0"}):
            answer = rest(w, who, "rest:skill", "GET", f"/skills/{s.slug}", params=params or None)
            L.expect(answer.status_code == want, "rest:skill", who, f"GET /skills/{s.slug} {params}",
                     f"{answer.status_code}")
    for i in _random_ids(w, who, 2):
        mem = next((m for m in w.memories if m.id == i), None)
        if mem is not None and who.sees_memory(mem):
            continue
        answer = rest(w, who, "rest:feedback", "POST", f"/memories/{i}/feedback", body=_verdict(who, True))
        L.expect(answer.status_code == (404 if who.writes else 403), "rest:feedback", who,
                 f"feedback on invisible {i}", f"{answer.status_code} {answer.text}")
    for s in _slugs(w, who, 2):
        if who.sees_skill(s):
            continue
        answer = rest(w, who, "rest:feedback", "POST", f"/skills/{s.slug}/feedback", body=_verdict(who, True))
        L.expect(answer.status_code in (403, 404), "rest:feedback", who, f"feedback on invisible skill {s.slug}",
                 f"{answer.status_code} {answer.text}")
    rest(w, who, "rest:stats", "GET", "/stats")


def probe_mcp(w: World, who: Who) -> None:
    L = w.ledger
    for _ in range(6):
        query, target = _query(w, who)
        failed, got = tool(w, who, "search_memories", {"query": query, "limit": 10})
        must = _must_find(w, who, target)
        if must:
            L.expect(not failed and must in {r["id"] for r in got.get("results", [])}, "mcp:search_memories", who,
                     f"own marker {query}", json.dumps(got)[:200])
    for _ in range(3):
        ids = _random_ids(w, who, 4)
        failed, got = tool(w, who, "get_memory_details", {"ids": ids})
        shown = {m["id"] for m in got.get("memories", [])}
        for i in ids:
            mem = next((m for m in w.memories if m.id == i), None)
            should = mem is not None and who.sees_memory(mem)
            L.expect((i in shown) == should, "mcp:get_memory_details", who, f"details {i} (visible={should})",
                     json.dumps(got)[:200])
    for _ in range(2):
        query, _ = _query(w, who)
        tool(w, who, "context_bundle", {"task": f"how to fix {query}", "token_budget": 3000})
    for s in _slugs(w, who, 3):
        failed, got = tool(w, who, "search_skills", {"query": s.description, "limit": 10})
        if who.sees_skill(s):
            L.expect(s.slug in json.dumps(got), "mcp:search_skills", who, f"search own skill {s.slug}",
                     json.dumps(got)[:200])
        failed, got = tool(w, who, "get_skill", {"name": s.slug})
        L.expect(failed != who.sees_skill(s), "mcp:get_skill", who, f"get_skill {s.slug}", json.dumps(got)[:200])
    for i in _random_ids(w, who, 1):
        mem = next((m for m in w.memories if m.id == i), None)
        if mem is None or not who.sees_memory(mem):
            failed, _ = tool(w, who, "feedback", {"memory_id": i, **_verdict(who, True)})
            L.expect(failed, "mcp:feedback", who, f"feedback on invisible {i}", "accepted")
    # the skill resources: skill://<slug> list and read
    listed = mcp(w, who, "resources/list", {}, "mcp:resources", "resources/list")
    for s in _slugs(w, who, 2):
        mcp(w, who, "resources/read", {"uri": f"skill://{s.slug}"}, "mcp:resources", f"read skill://{s.slug}")
    for s in w.skills:
        if who.sees_skill(s):
            L.expect(s.slug in json.dumps(listed), "mcp:resources", who, f"resources/list names {s.slug}",
                     json.dumps(listed)[:200])


def probe_browser(w: World, who: Who) -> None:
    L = w.ledger
    sign_in(w, who)
    url = "/ui/memories"
    for _ in range(3):                    # the newest-first list, page after page
        answer = page(w, who, "ui:list", url)
        nxt = re.search(r'href="(/ui/memories\?[^"]*cursor=[^"]*)"', answer.text)
        if not nxt:
            break
        url = unescape(nxt.group(1))
    for _ in range(5):
        query, target = _query(w, who)
        answer = page(w, who, "ui:search", "/ui/memories", params={"q": query})
        must = _must_find(w, who, target)
        if must:
            L.expect(must in answer.text, "ui:search", who, f"own marker {query}", answer.text[-200:])
    page(w, who, "ui:list", "/ui/memories", params={"agent": w.rng.choice(AGENTS)})
    for s in _slugs(w, who, 3):
        answer = page(w, who, "ui:list", "/ui/memories", params={"skill": s.slug})
        if who.sees_skill(s):
            L.expect(all(i in answer.text for i in s.memory_ids), "ui:list", who, f"?skill={s.slug}",
                     answer.text[-200:])
    # detail pages: random ids, and visible members of skills this token may not see (their
    # page lists the skills a memory is in)
    ids = _random_ids(w, who, 3)
    ids += [m.id for s in w.skills if not who.sees_skill(s) for m in s.members if who.sees_memory(m)][:4]
    for i in dict.fromkeys(ids):
        answer = page(w, who, "ui:memory", f"/ui/memories/{i}")
        mem = next((m for m in w.memories if m.id == i), None)
        want = 200 if mem is not None and who.sees_memory(mem) else 404
        L.expect(answer.status_code == want, "ui:memory", who, f"/ui/memories/{i}", f"{answer.status_code}")
    answer = page(w, who, "ui:skills", "/ui/skills")
    for s in w.skills:
        if who.sees_skill(s):
            L.expect(s.slug in answer.text, "ui:skills", who, f"/ui/skills lists {s.slug}", answer.text[-200:])
    for s in _slugs(w, who, 4):
        answer = page(w, who, "ui:skill", f"/ui/skills/{s.slug}")
        L.expect(answer.status_code == (200 if who.sees_skill(s) else 404), "ui:skill", who, f"/ui/skills/{s.slug}",
                 f"{answer.status_code}")
    page(w, who, "ui:overview", "/ui/overview")
    w.http.cookies.clear()


def export_as(w: World, who: Who | None, dest: Path) -> dict | None:
    """``svc.export_skills`` acting as ``who``'s principal (None: the local admin), in a copied
    context so the principal does not outlive the call."""
    from ultron.access import Refused, acting

    def run():
        if who is not None:
            principal, why = w.svc.tokens.resolve(who.token, SERVER_TOKEN.encode())
            assert principal is not None, why
            acting(principal)
        return w.svc.export_skills(dest)

    try:
        return contextvars.copy_context().run(run)
    except Refused:
        return None


def probe_export(w: World, who: Who) -> None:
    dest = w.tmp / f"export-{who.name}"
    result = export_as(w, who, dest)
    text = "\n".join(p.read_text(errors="replace") for p in sorted(dest.rglob("*")) if p.is_file()) \
        if dest.exists() else ""
    w.ledger.check("export", who, text, "", f"export_skills as {who.name}")
    if result is not None:
        for s in w.skills:
            if who.sees_skill(s):
                w.ledger.expect(s.slug in text, "export", who, f"export has {s.slug}", str(result)[:200])


# -- the tests --------------------------------------------------------------------------------------


def test_no_door_shows_a_token_what_it_may_not_see(world, capsys):
    w = world
    for _ in range(ROUNDS):
        for who in w.who.values():
            probe_rest(w, who)
            probe_mcp(w, who)
            probe_browser(w, who)
    for who in w.who.values():
        probe_export(w, who)
    with capsys.disabled():
        print("\n" + w.ledger.summary())
    assert not w.ledger.leaks and not w.ledger.wrong, w.ledger.report()


def test_the_fuzz_is_not_vacuous(world):
    """Each token finds its own agents' memories and the shared ones by marker, is served its
    visible skills, and the unbound and server tokens see everything."""
    w, wrong = world, []
    for who in w.who.values():
        visible = w.visible(who)
        assert visible, who.name
        if who.agents is None:
            assert len(visible) == len(w.memories)
            assert all(who.sees_skill(s) for s in w.skills)
        mine = [m for m in visible if m.owner in (who.agents or ()) and not m.shared and m.present]
        shared = [m for m in visible if m.shared and m.present]
        sample = w.rng.sample(mine, min(3, len(mine))) + w.rng.sample(shared, 3)
        for m in sample:
            answer = w.http.post("/memories/search", headers=_auth(who), json={"query": m.marker, "limit": 10})
            if m.id not in {r["id"] for r in answer.json().get("results", [])}:
                wrong.append((who.name, "search own marker", m.marker, answer.text[:200]))
            if w.http.get(f"/memories/{m.id}", headers=_auth(who)).status_code != 200:
                wrong.append((who.name, "GET own memory", m.id))
        listed = w.http.get("/memories", headers=_auth(who), params={"limit": 500}).json()
        ids = {m["id"] for m in listed["memories"]}
        if ids != {m.id for m in visible}:
            wrong.append((who.name, "GET /memories is exactly the visible set",
                          f"extra {len(ids - {m.id for m in visible})}, missing {len({m.id for m in visible} - ids)}"))
        skills = [s for s in w.skills if who.sees_skill(s)]
        assert skills, f"{who.name} sees no skill: the seeded skills do not cover it"
        for s in skills:
            got = w.http.get(f"/skills/{s.slug}", headers=_auth(who))
            if got.status_code != 200 or got.json()["memory_ids"] != s.memory_ids:
                wrong.append((who.name, "GET visible skill", s.slug, got.status_code))
        if who.writes:
            m = w.rng.choice(visible)
            fb = w.http.post(f"/memories/{m.id}/feedback", headers=_auth(who), json=_verdict(who, True))
            if fb.status_code != 200:
                wrong.append((who.name, "feedback on a visible memory", m.id, fb.status_code, fb.text[:200]))
    # the shapes of the seeded world: every kind of skill is there
    ghost = w.who["ghost-read"]
    assert [s.slug for s in w.skills if ghost.sees_skill(s)], "no skill of shared memories only"
    assert any(len({m.owner for m in s.members}) > 1 and not any(m.shared for m in s.members) for s in w.skills)
    assert any(not w.who["ana-bo-read"].sees_skill(s) and w.who["server"].sees_skill(s) for s in w.skills)
    assert not wrong, wrong


SHARED_LESSONS = (
    "Cache the {repo} wheels between CI jobs to cut the install step {m}.",
    "Run the {repo} database migrations before the app containers start in compose {m}.",
    "Pin the {repo} Node version in .nvmrc so local and CI builds agree {m}.",
    "Split the {repo} end-to-end suite across four runners by timing data {m}.",
)


def _upload(w: World, who: Who, **body):
    return w.http.post("/memories/upload", headers=_auth(who), json=body)


def test_writes_stay_within_the_tokens_agents(world):
    w, wrong = world, []
    server = w.who["server"]
    rng = w.rng

    def stored(marker: str) -> list[dict]:
        hits = w.http.post("/memories/search", headers=_auth(server), json={"query": marker, "limit": 10}).json()
        return [r for r in hits["results"] if marker in json.dumps(r)] if "results" in hits else []

    bound_writers = [x for x in w.who.values() if x.writes and x.agents is not None]
    assert bound_writers
    for who in bound_writers:
        own, foreign = who.agents[0], next(a for a in AGENTS if a not in who.agents)
        # 1. upload as another agent: 403, nothing stored (REST and MCP)
        marker = "zqwrite" + _letters(rng)
        answer = _upload(w, who, content=f"Pin the base image digest of {rng.choice(SERVICES)} {marker}.",
                         agent_id=foreign)
        if answer.status_code != 403:
            wrong.append((who.name, "upload as another agent", answer.status_code, answer.text[:200]))
        failed, _ = tool(w, who, "upload_memory", {"content": f"Pin the worker image {marker}x.", "agent_id": foreign})
        if not failed:
            wrong.append((who.name, "MCP upload as another agent was accepted"))
        if stored(marker):
            wrong.append((who.name, "an upload as another agent was stored", marker))
        # 2. ingest as another agent: 403 (plain text and uploaded session files)
        ingest = w.http.post("/ingest/text", headers=_auth(who), json={"text": f"Use retries {marker}.",
                                                                         "agent_id": foreign})
        if ingest.status_code != 403:
            wrong.append((who.name, "ingest/text as another agent", ingest.status_code, ingest.text[:200]))
        line = json.dumps({"type": "user", "message": {"role": "user", "content": f"hello {marker}"}}) + "\n"
        files = w.http.post("/ingest", headers=_auth(who), data={"agent_id": foreign},
                            files={"files": ("s.jsonl", line.encode(), "application/x-ndjson")})
        if files.status_code != 403:
            wrong.append((who.name, "ingest upload as another agent", files.status_code, files.text[:200]))
        # 3. its own agent, shared: stored as its own and seen by another agent's token
        marker = "zqwrite" + _letters(rng)
        lesson = SHARED_LESSONS[bound_writers.index(who) % len(SHARED_LESSONS)]
        answer = _upload(w, who, content=lesson.format(repo=rng.choice(REPOS), m=marker), agent_id=own, shared=True)
        got = answer.json() if answer.status_code == 200 else {}
        ghost = w.who["ghost-read"]
        if (got.get("agent_id"), got.get("shared")) != (own, True):
            wrong.append((who.name, "shared upload of its own agent", answer.status_code, answer.text[:200]))
        elif w.http.get(f"/memories/{got['id']}", headers=_auth(ghost)).status_code != 200 or (
                got["action"] == "inserted" and got["id"] not in w.http.post(
                    "/memories/search", headers=_auth(ghost), json={"query": marker}).text):
            wrong.append((who.name, "a shared upload is not seen by another agent's token", marker))
        # 4. no agent_id: a single-agent token's agent is used
        if len(who.agents) == 1:
            marker = "zqwrite" + _letters(rng)
            answer = _upload(w, who, content=f"Set PYTHONHASHSEED=0 in the {rng.choice(REPOS)} tests {marker}.")
            if answer.status_code != 200 or answer.json().get("agent_id") != own:
                wrong.append((who.name, "upload without agent_id", answer.status_code, answer.text[:200]))
        # 5. deduplication: the very text of another agent's memory stays a memory of its own
        victim = rng.choice([m for m in w.memories if not who.sees_memory(m) and m.owner is not None and m.present])
        before = w.svc.get_memory(victim.id)
        answer = _upload(w, who, content=victim.content, context=victim.context, resolution=victim.resolution,
                         agent_id=own)
        got = answer.json() if answer.status_code == 200 else {}
        if got.get("id") == victim.id or got.get("agent_id") != own or victim.id in answer.text:
            wrong.append((who.name, "an upload merged into another agent's memory", answer.text[:200]))
        same = w.svc.get_memory(victim.id)
        if same is None or (same["agent_id"], same["content"]) != (before["agent_id"], before["content"]):
            wrong.append((who.name, "another agent's memory changed by a duplicate upload", victim.id))
        # 6. feedback on an invisible memory: 404 (REST, MCP)
        fb = w.http.post(f"/memories/{victim.id}/feedback", headers=_auth(who), json=_verdict(who, False))
        if fb.status_code != 404:
            wrong.append((who.name, "feedback on an invisible memory", fb.status_code, fb.text[:200]))
        failed, _ = tool(w, who, "feedback", {"memory_id": victim.id, **_verdict(who, False)})
        if not failed:
            wrong.append((who.name, "MCP feedback on an invisible memory was accepted"))

    # 7. an admin bound to agents cannot forget or edit another agent's memory (REST, browser)
    for who in (x for x in bound_writers if x.scope == "admin"):
        foreign = next(a for a in AGENTS if a not in who.agents)
        victim = w.svc.upload_memory(f"Vacuum the {foreign} staging database weekly zqvictim{_letters(rng)}.",
                                     agent_id=foreign)
        gone = w.http.delete(f"/memories/{victim.id}", headers=_auth(who))
        if gone.status_code not in (403, 404):
            wrong.append((who.name, "DELETE another agent's memory", gone.status_code, gone.text[:200]))
        sign_in(w, who)
        own_page = w.http.get("/ui/memories")
        csrf = re.search(r'name="csrf" value="([^"]+)"', own_page.text)
        csrf = csrf.group(1) if csrf else ""
        for method, url, data in (("GET", f"/ui/memories/{victim.id}/forget", None),
                                  ("POST", f"/ui/memories/{victim.id}/forget", {"csrf": csrf}),
                                  ("GET", f"/ui/memories/{victim.id}/edit", None),
                                  ("POST", f"/ui/memories/{victim.id}/edit",
                                   {"csrf": csrf, "content": "overwritten zqedited", "tags": "x"}),
                                  ("POST", f"/ui/memories/{victim.id}/feedback", {"csrf": csrf, "helpful": "no"})):
            answer = w.http.request(method, url, data=data, follow_redirects=False)
            # (400: the browser's feedback form cannot say which agent of a token of several gives it)
            if answer.status_code not in (403, 404) and not (answer.status_code == 400 and "feedback" in url):
                wrong.append((who.name, f"browser {method} {url}", answer.status_code, answer.text[:200]))
        w.http.cookies.clear()
        after = w.svc.get_memory(victim.id)
        if after is None or after["content"] != victim.content or after["agent_id"] != foreign:
            wrong.append((who.name, "another agent's memory was forgotten or edited", victim.id, after))
    # 8. last (it would wipe a tenant): forgetting another agent wholesale
    for who in (x for x in bound_writers if x.scope == "admin"):
        foreign = next(a for a in AGENTS if a not in who.agents)
        owned = len({m.id for m in w.memories if m.owner == foreign})
        gone = w.http.delete(f"/agents/{foreign}", headers=_auth(who))
        if gone.status_code not in (403, 404):
            wrong.append((who.name, f"DELETE /agents/{foreign}", gone.status_code, gone.text[:200]))
        left = w.svc.list_memories(limit=500, agent_id=foreign)["total"]
        if left < owned:
            wrong.append((who.name, f"{foreign}'s memories were forgotten by another agent's admin", owned, left))
    assert not wrong, "\n".join(map(str, wrong))
