"""Search ranking on the real database: BM25 from the statistics the trigger keeps, the
memory's context in the lexical arm, score fusion, and dedup that looks at the contents."""

import json
import math
import time
from collections import Counter
from pathlib import Path

import pytest
import sqlalchemy as sa

from ultron.db import search_arms as arms
from ultron.memory.ranking import arm_settings, field_weights

LOCOMO = Path(__file__).resolve().parents[3] / "shared" / "data" / "locomo-dev" / "locomo-dev.json"


def _stats(client) -> tuple[dict[str, int], dict[str, float]]:
    with client.db.engine.connect() as conn:
        df = dict(conn.execute(sa.text(
            "SELECT lexeme, sum(df)::int FROM memory_lexemes GROUP BY lexeme HAVING sum(df) <> 0")).all())
        corpus = conn.execute(sa.text("SELECT coalesce(sum(docs), 0), coalesce(sum(len_a), 0), "
                                      "coalesce(sum(len_b), 0), coalesce(sum(len_c), 0) FROM memory_corpus")).one()
    return df, dict(zip(("docs", "a", "b", "c"), map(float, corpus)))


def _rebuilt(client) -> tuple[dict[str, int], dict[str, float]]:
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("SELECT ultron_lexicon_rebuild()"))
    return _stats(client)


def test_statistics_follow_every_write_path(client):
    """Insert, merge (a new body), archive, forget: what the trigger kept equals a rebuild."""
    mem = client.memory
    a = mem.upload_memory("Docker build fails: no space left on device", "CI runner, nightly job",
                          "prune the builder cache with docker builder prune").record
    merged = mem.upload_memory("Docker build fails: no space left on device", "CI runner, nightly job",
                               "prune the builder cache with docker builder prune; docker system df shows usage")
    assert merged.action == "merged"
    b = mem.upload_memory("pytest collects nothing after renaming the tests folder", "monorepo",
                          "add the folder to testpaths in pyproject.toml").record
    mem.upload_memory("psql cannot connect: peer authentication failed for user postgres", "", "")
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("UPDATE memory_records SET status = 'archived' WHERE id = :id"), {"id": b.id})
    kept = _stats(client)
    assert kept[0]["docker"] == 1 and "pytest" not in kept[0] and kept[1]["docs"] == 2
    client.forget([a.id])
    kept = _stats(client)
    assert "docker" not in kept[0]
    assert kept == _rebuilt(client)


def test_hit_counting_does_not_touch_the_statistics(client):
    client.upload_memory("Gradle daemon dies with OutOfMemoryError", "android build", "raise org.gradle.jvmargs")
    before = _stats(client)
    for _ in range(3):
        assert client.search_memories("gradle daemon out of memory")
    assert _stats(client) == before


def bm25_idf(docs: float, df: float) -> float:
    """Okapi idf with the +1 inside the log, so it never goes negative for common words."""
    return math.log(1.0 + (max(docs, df) - df + 0.5) / (df + 0.5))


def _reference_bm25(client, docs: list[dict[str, str]], query: str) -> list[float]:
    """BM25F written out in Python over the lexemes Postgres gives each field."""
    with client.db.engine.connect() as conn:
        def lex(text: str) -> Counter:
            rows = conn.execute(sa.text("SELECT lexeme, coalesce(array_length(positions, 1), 1) "
                                        "FROM unnest(to_tsvector('english', :t))"), {"t": text}).all()
            return Counter(dict(rows))
        fields = [{f: lex(d[f]) for f in ("content", "context", "resolution")} for d in docs]
        q = lex(query)
    w = field_weights(client.settings)
    weight = {"content": w["A"], "resolution": w["B"], "context": w["C"]}
    tf = [Counter() for _ in docs]
    length = []
    for i, f in enumerate(fields):
        for name, counts in f.items():
            for t, n in counts.items():
                tf[i][t] += weight[name] * n
        length.append(sum(weight[name] * sum(c.values()) for name, c in f.items()))
    avgdl = sum(length) / len(length)
    k1, b = client.settings.search_bm25_k1, client.settings.search_bm25_b
    df = Counter(t for f in fields for t in set().union(*f.values()))
    out = []
    for i in range(len(docs)):
        s = 0.0
        for t, n in q.items():
            x = tf[i][t]
            if x:
                s += n * bm25_idf(len(docs), df[t]) * x * (k1 + 1) / (x + k1 * (1 - b + b * length[i] / avgdl))
        out.append(s)
    return out


def test_the_lexical_arm_scores_exactly_bm25(client):
    docs = [
        {"content": "The deploy failed because the Redis password was rotated", "context": "staging cluster",
         "resolution": "update the secret and restart the worker"},
        {"content": "Worker container cannot import redis", "context": "deploy of the worker image",
         "resolution": "add redis to requirements.txt and rebuild"},
        {"content": "Redis connection refused on port 6379 during deploy deploy deploy",
         "context": "", "resolution": "start redis before the app"},
        {"content": "Flaky test in the payments module", "context": "nightly CI run on the worker pool",
         "resolution": "mock the clock"},
    ]
    ids = [client.memory.upload_memory(d["content"], d["context"], d["resolution"]).record.id for d in docs]
    assert len(set(ids)) == 4
    query = "redis worker deploy fails"
    expected = dict(zip(ids, _reference_bm25(client, docs, query)))
    with client.db.search_engine.connect() as conn:
        q = client.memory.embedder.embed_one(query)
        rows = arms.candidates(conn, query, q, k=10, plan=arm_settings(client.settings),
                               tier=None, tags=None, agent_id=None)
    got = {r["id"]: r["bm25"] for r in rows}
    for memory_id, score in expected.items():
        assert got.get(memory_id, 0.0) == pytest.approx(score, rel=1e-6)
    # a query word only in the context (weight 0.5) counts least
    assert got[ids[3]] < min(got[i] for i in ids[:3])


def test_the_pool_is_seeded_by_the_rarest_words_and_scores_every_word(client):
    """MaxScore's rule: the rarest query words whose documents fit in the pool find the
    candidates; a more common word only adds to their scores; a word no memory holds drops out."""
    topics = ["ferry timetable changed", "invoice export broke", "wifi drops at noon", "printer jams on A3",
              "calendar sync lost events", "backup job overran", "badge reader offline", "laptop fan is loud"]
    for i, topic in enumerate(topics):
        words = ["kestrel"] + (["heron"] if i < 3 else []) + (["osprey"] if i == 0 else [])
        assert client.memory.upload_memory(f"{topic}, filed under " + " ".join(words), "", "").action == "inserted"
    plan = {**arm_settings(client.settings), "pool": 4}
    with client.db.search_engine.connect() as conn:
        terms = arms.query_terms(conn, "kestrel heron osprey heron albatross", plan)
        only_common = arms.query_terms(conn, "kestrel", plan)
        rows = arms.candidates(conn, "kestrel heron osprey", client.memory.embedder.embed_one("x"), k=10,
                               plan=plan, tags=None, tier=None, agent_id=None)
    assert [(t["lexeme"], t["df"], t["qtf"], t["essential"]) for t in terms] == [
        ("osprey", 1, 1, True), ("heron", 3, 2, True), ("kestrel", 8, 1, False)]   # 1 + 3 <= 4 < 1 + 3 + 8
    assert terms[0]["idf"] > terms[1]["idf"] > terms[2]["idf"] > 0
    assert [t["essential"] for t in only_common] == [True]      # the rarest word always seeds the pool
    lexical_hits = sorted(r["bm25"] for r in rows if r["lex_rank"] is not None)
    assert len(lexical_hits) == 3                               # the memories holding osprey or heron
    assert all(score > 0 for score in lexical_hits)


def test_context_is_searchable_but_weighs_less_than_content(client):
    in_context = client.memory.upload_memory("Use the staging profile for smoke tests", "terraform workspace switch",
                                      "").record
    in_content = client.memory.upload_memory("terraform workspace switch loses the lock", "smoke tests", "").record
    hits = client.search_memories("terraform workspace switch")
    assert [h.record.id for h in hits][:2] == [in_content.id, in_context.id]


def test_shared_context_does_not_merge_different_contents(client):
    context = "2:14 pm on 3 May, 2023\nCaroline: I went to a support group yesterday.\nMelanie: How was it?"
    first = client.memory.upload_memory("Caroline: It was powerful, people shared their stories.", context,
                                 tags=["dia:d1:3"])
    second = client.memory.upload_memory("Melanie: I've been painting a sunset with my kids.", context,
                                  tags=["dia:d1:4"])
    assert first.action == second.action == "inserted"
    again = client.memory.upload_memory("Caroline: It was powerful, people shared their stories.",
                                        context.rsplit("\n", 1)[0], tags=["dia:d9:1"])
    assert again.action == "merged" and again.record.id == first.record.id


def test_a_query_of_stop_words_only_still_searches_by_meaning(client):
    client.upload_memory("Always pin the base image digest in Dockerfiles", "", "")
    hits = client.search_memories("what is it")
    assert len(hits) <= 1   # no crash, no lexical arm; the cosine floor decides


@pytest.mark.skipif(not LOCOMO.is_file(), reason="needs ../shared/data/locomo-dev")
def test_hybrid_search_beats_plain_bm25_on_a_locomo_conversation(client):
    """The benchmark's protocol on one dev conversation (hash embedder: the lexical arm and the
    fusion carry it). The issue's figures come from benchmarks/retrieval.py with MiniLM."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import retrieval

    sample = json.loads(LOCOMO.read_text(encoding="utf-8"))[0]
    turns = retrieval.turns_of(sample["conversation"])
    for t in turns:
        client.upload_memory(t["content"], t["context"], tags=[f"dia:0:{t['dia_id']}", "conv:0"])
    questions = retrieval.questions_of(sample, {t["dia_id"] for t in turns})[:60]
    bm25 = retrieval.BM25([t["content"] + "\n" + t["context"] for t in turns])
    ours, ref = [], []
    for q in questions:
        hits = client.search_memories(q["question"], limit=10, tags=["conv:0"])
        found = {tag.split(":", 2)[2] for h in hits for tag in h.record.tags if tag.startswith("dia:0:")}
        evidence = [e.lower() for e in q["evidence"]]
        ours.append(retrieval.recall(evidence, found))
        ref.append(retrieval.recall(evidence, {turns[i]["dia_id"].lower()
                                               for i in retrieval.top(bm25.scores(q["question"]), 10)}))
    assert sum(ours) / len(ours) >= sum(ref) / len(ref) + 0.03


def test_queries_with_tsquery_syntax_and_quotes_are_plain_words(client):
    client.upload_memory("Windows path C:\\Users\\o'brien\\app fails with 'access denied' | retry", "", "")
    for query in ("o'brien's app", "C:\\Users\\o'brien", "access & denied | !retry", "'':* <-> (", "\\\\'"):
        client.search_memories(query)   # never a tsquery syntax error
    assert client.search_memories("o'brien access denied")


def test_a_batch_of_queries_finds_what_each_search_finds_and_counts_each_hit(client):
    redis = client.upload_memory("Worker container cannot import redis", "deploy of the worker image",
                                 "add redis to requirements.txt and rebuild")
    flaky = client.upload_memory("Flaky test in the payments module", "nightly CI run", "mock the clock")
    queries = ["redis import fails in the worker", "", "payments test is flaky"]
    batch = client.search_memories_batch(queries, limit=1)
    assert [[h.record.id for h in hits] for hits in batch] == [[redis.id], [], [flaky.id]]
    assert [h.record.hit_count for hits in batch for h in hits] == [1, 1]
    single = client.search_memories("payments test is flaky", limit=1)
    assert single[0].record.id == flaky.id and single[0].score == pytest.approx(batch[2][0].score, rel=1e-6)
    assert client.get_memory(flaky.id)["hit_count"] == 2


def test_search_hits_are_written_behind_and_read_back_by_this_process(client):
    """A search queues its hits and returns; they land at once, and every read through the
    services waits for this process's queued hits first."""
    rec = client.memory.upload_memory("Gradle daemon dies with OutOfMemoryError", "android build",
                                      "raise org.gradle.jvmargs").record
    shown = [client.search_memories("gradle daemon out of memory")[0].record.hit_count for _ in range(5)]
    assert shown[-1] >= 1 and shown == sorted(shown)      # each result counts its own hit
    assert client.get_memory(rec.id)["hit_count"] == 5   # get_memory flushes the queue first
    assert client.memory.db.hits.flush(timeout=5.0)
    with client.db.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT hit_count FROM memory_records WHERE id = :id"),
                            {"id": rec.id}).scalar_one() == 5


def test_a_forked_child_counts_its_own_hits(client):
    """The writer thread does not survive a fork: the child starts its own (Celery and the
    multiprocess executor fork their workers)."""
    import multiprocessing

    rec = client.memory.upload_memory("Flaky test: the clock is not mocked", "payments", "freeze time").record
    client.search_memories("flaky clock test")          # the parent's writer thread is running
    ctx = multiprocessing.get_context("fork")
    child = ctx.Process(target=_search_and_flush, args=(client.memory,))
    child.start()
    child.join(60)
    assert child.exitcode == 0
    assert client.get_memory(rec.id)["hit_count"] == 2


def _search_and_flush(memory) -> None:
    memory.db.search_engine.dispose(close=False)  # a forked child must not reuse the parent's sockets
    memory.db.engine.dispose(close=False)
    assert memory.search_memories("flaky clock test")
    assert memory.db.hits.flush(timeout=30.0)


def test_the_hit_writer_never_waits_on_a_locked_memory(client):
    """A memory locked by a long transaction (an upload merging into it, a forget) does not
    stall the hit writer, nor deadlock with it: its hits are retried, then dropped; the other
    memories' hits are counted."""
    locked = client.memory.upload_memory("Terraform state lock is stuck", "shared backend", "force-unlock").record
    free = client.memory.upload_memory("Terraform plan shows drift on tags", "aws provider", "ignore_changes").record
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("SELECT 1 FROM memory_records WHERE id = :id FOR UPDATE"), {"id": locked.id})
        client.memory.db.hits.add([locked.id, free.id])
        started = time.monotonic()
        assert client.memory.db.hits.flush(timeout=20.0)
        assert time.monotonic() - started < 5.0
    with client.db.engine.connect() as conn:
        counts = dict(conn.execute(sa.text("SELECT id, hit_count FROM memory_records")).all())
    assert counts[free.id] == 1 and counts[locked.id] == 0


def test_a_selective_filter_makes_the_dense_arm_exact_and_a_broad_one_walks_the_graph(client):
    """Tags or agent keeping fewer than ULTRON_SEARCH_EXACT_MAX memories: every kept memory is
    compared with the query (the exact top k); at or above it, the HNSW graph is walked."""
    import numpy as np

    mem = client.memory
    topics = ["ferry timetable", "invoice export", "wifi drops", "printer jams", "calendar sync", "backup job",
              "badge reader", "laptop fan", "vpn login", "disk quota", "email bounce", "build cache"]
    for i, topic in enumerate(topics):
        mem.upload_memory(f"{topic} problem number {i}", "", "", tags=["team:a" if i % 3 else "team:b"])
    query = "the printer and the wifi"
    q = mem.embedder.embed_one(query)
    with client.db.engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT id, embedding::text AS e FROM memory_records "
                                    "WHERE tags @> ARRAY['team:a']")).all()
    vectors = {r.id: np.array(json.loads(r.e), dtype=np.float32) for r in rows}
    exact = sorted(vectors, key=lambda i: (-float(vectors[i] @ q), i))
    for exact_max, branch in ((5000, "exact"), (1, "graph")):
        plan = {**arm_settings(client.settings), "exact_max": exact_max}
        with client.db.search_engine.connect() as conn:
            got = arms.candidates(conn, query, q, k=5, plan=plan, tier=None, tags=["team:a"], agent_id=None)
        ann = sorted((r for r in got if r["ann_rank"] is not None), key=lambda r: r["ann_rank"])
        assert [r["id"] for r in ann] == exact[:5], branch


def test_a_search_whose_connection_dies_fails_as_database_unavailable_and_the_next_one_works(client):
    """The candidates statement runs on psycopg directly; a dropped connection must still
    surface as SQLAlchemy's OperationalError (the API's and MCP's "database unavailable")
    and leave no broken connection in the pool."""
    mem = client.memory
    mem.upload_memory("kafka consumer lag grows after a rebalance", "", "raise max.poll.interval.ms")
    q = mem.embedder.embed_one("kafka consumer lag")
    with client.db.search_engine.connect() as conn:
        victim = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
        with client.db.engine.begin() as admin:
            admin.execute(sa.text("SELECT pg_terminate_backend(:p)"), {"p": victim})
        with pytest.raises(sa.exc.OperationalError):
            arms.candidates(conn, "kafka consumer lag", q, k=5, plan=arm_settings(client.settings),
                            tier=None, tags=None, agent_id=None)
    found = mem.search_memories("kafka consumer lag", limit=3)
    assert found and found[0].record.content == "kafka consumer lag grows after a rebalance"
