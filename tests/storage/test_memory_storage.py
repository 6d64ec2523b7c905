"""The Memory Service on the real database: upload order, dedup and merge, concurrency,
hybrid search, hits, tiers, profiles, forget, extraction and ingest_text."""

import json
import threading

import pytest
import sqlalchemy as sa

from tests.conftest import write_jsonl
from ultron.context import ServiceContext
from ultron.memory.service import EmbeddingProfileMismatch, MemoryService, Provenance

PANDAS = ("ModuleNotFoundError: No module named 'pandas'", "running the analysis script in a Docker container",
          "pip install pandas in the image")


def scalar(client, sql, **p):
    with client.db.engine.connect() as conn:
        return conn.execute(sa.text(sql), p).scalar_one()


@pytest.fixture
def memory(client):
    return client.memory


def test_upload_inserts_a_typed_redacted_summarised_memory(memory, client):
    result = memory.upload_memory(*PANDAS, tags=["Python", "docker"])
    rec = result.record
    assert result.action == "inserted" and rec.tier == "WARM" and rec.status == "active"
    assert rec.memory_type == "error" and rec.tags == ["docker", "python"]
    from ultron.llm.tokens import count_tokens

    assert 0 < count_tokens(rec.summary_l0) <= 64 and count_tokens(rec.overview_l1) <= 256
    assert scalar(client, "SELECT vector_dims(embedding) FROM memory_records") == 384
    assert scalar(client, "SELECT count(*) FROM memory_contributions") == 1
    assert scalar(client, "SELECT name FROM embedding_profile") == "hash:384"


def test_an_identical_upload_merges_instead_of_inserting(memory, client):
    first = memory.upload_memory(*PANDAS, tags=["python"]).record
    second = memory.upload_memory(*PANDAS, tags=["docker"])
    assert second.action == "merged" and second.record.id == first.id and second.similarity > 0.99
    assert second.record.hit_count == 1 and second.record.tags == ["docker", "python"]
    assert scalar(client, "SELECT count(*) FROM memory_records") == 1
    assert scalar(client, "SELECT count(*) FROM memory_contributions") == 2


def test_concurrent_uploads_of_the_same_memory_make_one_row(memory, client):
    memory.check_embedding_profile()
    barrier = threading.Barrier(4)
    errors = []

    def upload():
        try:
            barrier.wait()
            MemoryService(ServiceContext(client.db, client.settings, provider=memory.provider, embedder=memory.embedder,
                          redactor=memory.redactor)).upload_memory(*PANDAS)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=upload) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert scalar(client, "SELECT count(*) FROM memory_records") == 1
    assert scalar(client, "SELECT hit_count FROM memory_records") == 3


def test_fixes_that_name_different_flags_stay_apart_however_alike_their_words(memory, client):
    """Templated lessons embed as near-identical (cosine 0.87 here, above the dedup threshold);
    merging them would lose a fix and splice two sessions into one text."""
    a = memory.upload_memory("Start the celery worker with --concurrency 2 when it dies with BrokenPipe on start.")
    b = memory.upload_memory("Start the celery worker with --pool solo when it dies with BrokenPipe on start.")
    c = memory.upload_memory("Start the celery worker with --concurrency 2 when it dies with BrokenPipe on start!")
    assert (a.action, b.action, c.action) == ("inserted", "inserted", "merged") and c.record.id == a.record.id
    assert scalar(client, "SELECT count(*) FROM memory_records") == 2
    assert "--pool" not in c.record.content and "--concurrency" not in b.record.content


def test_different_types_never_merge(memory, client):
    memory.upload_memory("I prefer tabs over spaces in Python code", "", "")
    memory.upload_memory(*PANDAS)
    assert scalar(client, "SELECT count(DISTINCT memory_type) FROM memory_records") == 2


def test_search_is_hybrid_floors_irrelevant_rows_and_counts_hits(memory, client):
    a = memory.upload_memory(*PANDAS).record
    b = memory.upload_memory("docker compose fails: port 5432 is already allocated", "starting postgres with compose",
                             "stop the local postgres service or map another host port").record
    results = memory.search_memories("No module named pandas", detail_level="l1", limit=5)
    assert results and results[0].record.id == a.id
    assert "vector" in results[0].matched and "text" in results[0].matched
    d = results[0].to_dict("l1")
    assert "overview_l1" in d and "content" not in d
    assert "overview_l1" not in memory.search_memories("pandas module", detail_level="l0")[0].to_dict("l0")
    assert memory.search_memories("zebra migration patterns in the serengeti") == []
    memory.flush_hits()  # hits are written behind the search (ultron.db.hits)
    with client.db.engine.connect() as conn:
        hits = dict(conn.execute(sa.text("SELECT id, hit_count FROM memory_records")).all())
    assert hits[a.id] == 2 and hits[b.id] == 0  # found twice, never returned
    with pytest.raises(ValueError):
        memory.search_memories("x", detail_level="full")


def test_search_filters_and_archived_rows(memory, client):
    a = memory.upload_memory(*PANDAS, tags=["python"], provenance=Provenance(agent_id="alice")).record
    assert [r.record.id for r in memory.search_memories("pandas", tags=["python"])] == [a.id]
    assert memory.search_memories("pandas", tags=["rust"]) == []
    assert memory.search_memories("pandas", agent_id="bob") == []
    assert memory.search_memories("pandas", tier="HOT") == []
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("UPDATE memory_records SET status = 'archived'"))
    assert memory.search_memories("pandas") == []


def test_details_add_two_hits(memory):
    rec = memory.upload_memory(*PANDAS).record
    [full] = memory.get_memory_details([rec.id])
    assert full.content == PANDAS[0] and full.hit_count == 2


def test_tier_rebalance_by_hits_and_cold_ttl(memory, client):
    ids = [memory.upload_memory(f"error number {i}: widget {i} failed with code E{i}00", f"context {i}",
                                f"restart widget {i}").record.id for i in range(10)]
    with client.db.engine.begin() as conn:
        for rank, mid in enumerate(ids):
            conn.execute(sa.text("UPDATE memory_records SET hit_count = :h, last_hit_at = now() WHERE id = :id"),
                         {"h": 100 - rank, "id": mid})
        conn.execute(sa.text("UPDATE memory_records SET last_hit_at = now() - interval '40 days', "
                             "created_at = now() - interval '40 days' WHERE id = :id"), {"id": ids[-1]})
    counts = memory.run_tier_rebalance()
    assert counts == {"HOT": 1, "WARM": 4, "COLD": 4, "ARCHIVED": 1, "archived_now": 1}
    with client.db.engine.connect() as conn:
        tiers = dict(conn.execute(sa.text("SELECT id, tier FROM memory_records")).all())
    assert tiers[ids[0]] == "HOT" and tiers[ids[1]] == "WARM" and tiers[ids[5]] == "COLD"


def test_a_different_embedder_is_refused(memory, client):
    memory.upload_memory(*PANDAS)
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("UPDATE embedding_profile SET name = 'local:all-MiniLM-L6-v2'"))
    other = MemoryService(ServiceContext(client.db, client.settings, provider=memory.provider, redactor=memory.redactor))
    with pytest.raises(EmbeddingProfileMismatch, match="never mixed"):
        other.upload_memory("anything at all", "", "")


def test_consolidation_merges_existing_near_duplicates(memory, client):
    a = memory.upload_memory(*PANDAS).record
    b = memory.upload_memory("ModuleNotFoundError: No module named 'numpy'", PANDAS[1], "pip install numpy").record
    with client.db.engine.begin() as conn:  # plant an exact duplicate past the upload path
        conn.execute(sa.text(
            "INSERT INTO memory_records (id, memory_type, content, context, resolution, embedding, hit_count) "
            "SELECT 'dup', memory_type, content, context, resolution, embedding, 5 FROM memory_records WHERE id = :id"),
            {"id": a.id})
    out = memory.consolidate(max_merges=10)
    assert out["merged"] == 1
    with client.db.engine.connect() as conn:
        ids = set(conn.execute(sa.text("SELECT id FROM memory_records")).scalars())
    assert ids == {a.id, b.id}
    # the absorbed row's 5 hits move over, plus the merge's own +1
    assert scalar(client, "SELECT hit_count FROM memory_records WHERE id = :id", id=a.id) == 6


SECRET = "sk-proj-ZXCVBNMasdfghjkl1234567890QWERTYUIOP"


def test_forget_a_session_leaves_nothing_of_it_anywhere(client, tmp_path):
    planted = "flux capacitor overheats at 88 mph"
    f = write_jsonl(tmp_path / "forget.jsonl", [
        {"role": "user", "content": f"My {planted}. Fix the cooling script."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "run", "arguments": json.dumps({"cmd": "cool.sh"})}}]},
        {"role": "tool", "tool_call_id": "c1", "content": f"Error: {planted}"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c2", "type": "function", "function": {"name": "run", "arguments": json.dumps({"cmd": "cool.sh --fan"})}}]},
        {"role": "tool", "tool_call_id": "c2", "content": "ok: temperature normal"},
        {"role": "assistant", "content": f"Fixed: the {planted} issue is solved by running cool.sh with --fan."},
        {"role": "user", "content": "Thanks, that worked!"},
    ])
    client.ingest([f], "forget-agent")
    svc = client
    svc.segment_pending_sessions()
    svc.label_pending_segments()
    svc.extract_memories_from_segments()
    client.upload_memory("Unrelated: use --fan for any cooling script", "", "")
    assert _occurrences(client, "capacitor") > 0
    counts = client.forget(session_file=str(f), agent_id="forget-agent")
    assert counts["sessions"] == 1
    assert _occurrences(client, "capacitor") == 0
    assert scalar(client, "SELECT count(*) FROM memory_records") >= 1  # the unrelated memory stays


def _occurrences(client, needle: str) -> int:
    """Rows of any table whose text form contains the needle."""
    with client.db.engine.connect() as conn:
        tables = conn.execute(sa.text(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' "
            "AND table_type = 'BASE TABLE'")).scalars().all()
        total = 0
        for t in tables:
            total += conn.execute(sa.text(
                f"SELECT count(*) FROM \"{t}\" x WHERE position(lower(:n) in lower(x::text)) > 0"
                + (" OR position(lower(:n) in lower(convert_from(content, 'UTF8'))) > 0" if t == "raw_user_uploads"
                   else "")), {"n": needle}).scalar_one()
        return total


def test_ingest_text_uploads_memories_and_archives_once(client):
    text = ("Investigation:\n1. pip install failed inside Docker\n2. Error: Could not find a version that "
            "satisfies the requirement\n3. Cause: the container has no outbound network\n"
            "4. Fix: configure a proxy or use --network host")
    out = client.ingest_text(text)
    assert out["total_memories"] >= 1
    client.ingest_text(text)
    assert scalar(client, "SELECT count(*) FROM raw_user_uploads WHERE kind = 'ingest_text'") == 1
    assert scalar(client, "SELECT count(*) FROM trajectory_records") == 0


def _good_session(tmp_path, name="good.jsonl"):
    return write_jsonl(tmp_path / name, [
        {"role": "user", "content": "The deploy script fails, please fix it. I prefer bash over python for scripts."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "Bash", "arguments": json.dumps({"command": "./deploy.sh"})}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "error",
         "content": "Error: permission denied: ./deploy.sh"},
        {"role": "assistant", "content": "The script is not executable; I will add the execute bit.", "tool_calls": [
            {"id": "c2", "type": "function", "function": {"name": "Bash", "arguments": json.dumps({"command": "chmod +x deploy.sh"})}}]},
        {"role": "tool", "tool_call_id": "c2", "content": ""},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c3", "type": "function", "function": {"name": "Bash", "arguments": json.dumps({"command": "./deploy.sh"})}}]},
        {"role": "tool", "tool_call_id": "c3", "content": "deployed successfully"},
        {"role": "assistant", "content": "Fixed: deploy.sh lacked the execute permission; after chmod +x it deploys."},
        {"role": "user", "content": "Thanks, it works now! One thing for the future: our scripts are bash, never "
                                    "python, and you always run shellcheck on them before you commit."},
        {"role": "assistant", "content": "Understood: bash for scripts, and shellcheck before every commit."},
    ])


def _extractable(client, f):
    client.ingest([f], "agent")
    svc = client
    svc.segment_pending_sessions()
    svc.label_pending_segments()
    with client.db.engine.begin() as conn:  # make the scorer's verdict irrelevant to this test
        conn.execute(sa.text("UPDATE task_segments SET quality_metrics = jsonb_set(CAST(quality_metrics AS jsonb), "
                             "'{summary,overall_score}', '0.95')::text"))
    return svc


def test_extraction_is_tagged_once_only_and_all_or_nothing(client, tmp_path):
    svc = _extractable(client, _good_session(tmp_path))
    # A constraint that fails the second memory of the segment simulates a crash mid-segment.
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("CREATE FUNCTION fail_second() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                             "IF (SELECT count(*) FROM memory_records) >= 1 THEN RAISE EXCEPTION 'crash'; END IF; "
                             "RETURN NEW; END $$; CREATE TRIGGER fail_second BEFORE INSERT ON memory_records "
                             "FOR EACH ROW EXECUTE FUNCTION fail_second();"))
    try:
        with pytest.raises(Exception, match="crash"):
            svc.extract_memories_from_segments()
    finally:
        with client.db.engine.begin() as conn:
            conn.execute(sa.text("DROP TRIGGER fail_second ON memory_records; DROP FUNCTION fail_second();"))
    assert scalar(client, "SELECT count(*) FROM memory_records") == 0
    assert scalar(client, "SELECT memory_extracted FROM task_segments") == 0
    [done] = svc.extract_memories_from_segments()
    assert done.status == "extracted" and done.inserted >= 2
    assert svc.extract_memories_from_segments() == []  # processed once
    seg_id = scalar(client, "SELECT id FROM task_segments")
    with client.db.engine.connect() as conn:
        tags = conn.execute(sa.text("SELECT tags FROM memory_records")).scalars().all()
        kinds = conn.execute(sa.text("SELECT memory_type FROM memory_records")).scalars().all()
    for t in tags:
        assert {"trajectory", f"segment:{seg_id[:8]}", "agent:agent"} <= set(t)
        assert any(x.startswith("type:") for x in t)
    assert {"error", "security"} & set(kinds) and "preference" in kinds  # permission errors read as security


def test_planted_secrets_never_reach_the_database_outside_the_raw_archive(client, tmp_path):
    from ultron.testing.planted import PLANTED, session_rows

    f = write_jsonl(tmp_path / "secrets.jsonl", session_rows())
    svc = _extractable(client, f)
    svc.extract_memories_from_segments()
    client.ingest_text(f"Note: the staging key {PLANTED['openai_key']} must be rotated; contact {PLANTED['email']}.")
    assert scalar(client, "SELECT count(*) FROM memory_records") >= 1
    for kind, secret in PLANTED.items():
        with client.db.engine.connect() as conn:
            raw = conn.execute(sa.text("SELECT count(*) FROM raw_user_uploads WHERE position(:s in "
                                       "convert_from(content, 'UTF8')) > 0"), {"s": secret}).scalar_one()
        assert raw >= 1, kind  # the raw archive keeps the original bytes, as the seed says
        assert _occurrences_outside_raw(client, secret) == 0, kind


def _occurrences_outside_raw(client, needle: str) -> int:
    with client.db.engine.connect() as conn:
        tables = conn.execute(sa.text(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' "
            "AND table_type = 'BASE TABLE' AND table_name <> 'raw_user_uploads'")).scalars().all()
        return sum(conn.execute(sa.text(f"SELECT count(*) FROM \"{t}\" x WHERE position(:n in x::text) > 0"),
                                {"n": needle}).scalar_one() for t in tables)


def test_a_merge_waits_for_the_llm_and_is_retried_on_the_next_duplicate(client):
    from ultron.providers import OpenAIProvider
    from ultron.testing.fake_openai import FakeOpenAI, Reply

    state = {"merge_down": True}

    def respond(body):
        system = body["messages"][0]["content"]
        if "Classify" in system:
            return Reply.json({"memory_type": "error"})
        if "Summarise" in system:
            return Reply.json({"l0": "pandas missing in the image", "l1": "Install pandas in the Docker image."})
        if "Merge two versions" in system:
            if state["merge_down"]:
                return Reply.http(503, "merge model overloaded")
            return Reply.json({"content": PANDAS[0], "context": PANDAS[1],
                               "resolution": "pip install pandas in the image; or add it to requirements.txt"})
        return Reply.json({"same": True})

    with FakeOpenAI(respond) as server:
        settings = client.settings.__class__.from_env(
            home=client.settings.home, llm_provider="openai", llm_base_url=server.url, llm_api_key="k",
            llm_max_retries=0, llm_retry_base_seconds=0.01)
        svc = MemoryService(ServiceContext(client.db, settings, provider=OpenAIProvider(settings)))
        first = svc.upload_memory(*PANDAS).record
        down = svc.upload_memory(PANDAS[0], PANDAS[1], "add pandas to requirements.txt")
        assert down.action == "merged" and down.merge_pending
        assert down.record.resolution == PANDAS[2]  # unchanged while the LLM is down
        state["merge_down"] = False
        up = svc.upload_memory(PANDAS[0], PANDAS[1], "add pandas to requirements.txt")
        assert up.action == "merged" and not up.merge_pending and up.record.id == first.id
        assert "requirements.txt" in up.record.resolution and up.record.summary_l0 == "pandas missing in the image"
    assert scalar(client, "SELECT count(*) FROM memory_contributions") == 3


def test_raw_archive_switch_and_retention(client, tmp_path):
    from ultron.db import sessions as session_store
    from ultron.sdk import Ultron

    off = Ultron(client.settings.__class__.from_env(home=client.settings.home, raw_archive=False), db=client.db)
    off.ingest([write_jsonl(tmp_path / "off.jsonl", [{"role": "user", "content": "hi"}])], "a")
    assert scalar(client, "SELECT count(*) FROM raw_user_uploads") == 0
    client.ingest([write_jsonl(tmp_path / "on.jsonl", [{"role": "user", "content": "hi"}])], "a")
    with client.db.engine.begin() as conn:
        assert session_store.purge_raw_archive(conn, 30) == 0
        conn.execute(sa.text("UPDATE raw_user_uploads SET created_at = now() - interval '31 days'"))
        assert session_store.purge_raw_archive(conn, 30) == 1


def test_a_running_service_notices_when_the_store_switches_embedders(client, monkeypatch):
    """A long-running server (ultron dev / serve) must not keep writing old vectors after
    `ultron reembed` moved the store to another embedder in another process."""
    import ultron.context as service_module

    client.upload_memory("ModuleNotFoundError: No module named 'pandas'", "docker", "pip install pandas")
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("UPDATE embedding_profile SET name = 'another-model'"))
    client.upload_memory("redis connection refused on start", "compose", "start redis first")  # still cached
    monkeypatch.setattr(service_module, "PROFILE_RECHECK_SECONDS", 0.0)
    with pytest.raises(EmbeddingProfileMismatch, match="another-model"):
        client.upload_memory("flask is missing from the image", "docker", "add flask to requirements.txt")


def test_a_low_scoring_segment_that_teaches_a_confirmed_lesson_is_extracted(client, tmp_path):
    """The memory gate: the trajectory scored below the memory floor (a failed call, a fix done
    by the user), but the user confirmed the fix, so its lesson is kept; the SFT floor is not
    touched and a failed session that taught nothing gives no memory."""
    lesson = write_jsonl(tmp_path / "prose-fix.jsonl", [
        {"role": "user", "content": "psycopg2 won't install on the build box"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "run", "arguments": json.dumps(
                {"cmd": "pip install psycopg2"})}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "Error: pg_config executable not found."},
        {"role": "assistant", "content": "pg_config comes with the PostgreSQL client headers, and psycopg2 builds "
                                         "from source against them. Install them with `sudo apt-get install "
                                         "libpq-dev`, then run pip install again; on images where you cannot, "
                                         "psycopg2-binary ships prebuilt wheels."},
        {"role": "user", "content": "installed libpq-dev and pip works now, thanks"},
    ])
    failed = write_jsonl(tmp_path / "failed.jsonl", [
        {"role": "user", "content": "psycopg2 won't install on the build box"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "run", "arguments": json.dumps(
                {"cmd": "pip install psycopg2"})}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "Error: pg_config executable not found."},
        {"role": "assistant", "content": "Let me look into it."},
        {"role": "user", "content": "forget it, I'll do it myself"},
    ])
    client.ingest([lesson, failed], "agent")
    client.segment_pending_sessions()
    client.label_pending_segments()
    with client.db.engine.connect() as conn:
        rows = conn.execute(sa.text(
            "SELECT session_file, CAST(quality_metrics AS jsonb) -> 'summary' FROM task_segments")).all()
    summaries = {f.rsplit("/", 1)[-1]: s for f, s in rows}
    assert summaries["prose-fix.jsonl"]["teaches_lesson"] is True
    with client.db.engine.begin() as conn:  # whatever the scorer said, both segments are below the floor
        conn.execute(sa.text("UPDATE task_segments SET quality_metrics = jsonb_set(CAST(quality_metrics AS jsonb), "
                             "'{summary,overall_score}', '0.3')::text"))
    assert summaries["failed.jsonl"]["teaches_lesson"] is False
    done = client.extract_memories_from_segments()
    assert sorted(r.status for r in done) == ["extracted"]
    with client.db.engine.connect() as conn:
        [(memory_type, content, resolution)] = conn.execute(sa.text(
            "SELECT memory_type, content, resolution FROM memory_records")).all()
    assert memory_type == "error" and "libpq-dev" in content + resolution


HARNESS = ("You are an autonomous programmer working in a sandboxed repository. Always start by trying to "
           "reproduce the bug that the issue discusses. You should always wait for feedback after every "
           "command. Never forget the people's champ.")
HARNESS_TASKS = [
    ("the CSV exporter drops the header row", "csv.writer(fh).writerow(header)", "exporter.py"),
    ("dates before 1970 crash the parser", "datetime(1970, 1, 1) + timedelta(seconds=ts)", "dates.py"),
    ("the retry helper never gives up", "for attempt in range(max_tries):", "retry.py"),
    ("unicode file names break the uploader", "path.encode('utf-8', 'surrogateescape')", "upload.py"),
]


def test_a_harness_text_repeated_in_every_session_is_never_stored(client, tmp_path):
    """Text a harness pastes into every run is context: counted per session (hashes only),
    taken out before extraction, never a memory, and forgotten with its session."""
    files = []
    for i, (issue, fix, path) in enumerate(HARNESS_TASKS):
        files.append(write_jsonl(tmp_path / f"run{i}.jsonl", [
            {"role": "system", "content": HARNESS},
            {"role": "user", "content": f"{HARNESS}\nIssue: {issue}. Please fix it."},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
                "name": "run", "arguments": json.dumps({"cmd": f"python -m pytest tests/test_{path}"})}}]},
            {"role": "tool", "tool_call_id": "c1", "content": f"FAILED tests/test_{path} - AssertionError"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c2", "type": "function", "function": {
                "name": "edit", "arguments": json.dumps({"path": path, "new": fix})}}]},
            {"role": "tool", "tool_call_id": "c2", "content": "ok"},
            {"role": "assistant", "content": f"Fixed {path}: {fix}. The tests pass now."},
        ]))
    client.ingest(files, "swe-agent")
    client.segment_pending_sessions()
    client.label_pending_segments()
    client.extract_memories_from_segments()
    with client.db.engine.connect() as conn:
        texts = [" ".join(r) for r in conn.execute(sa.text(
            "SELECT content, context, resolution FROM memory_records")).all()]
        counts = conn.execute(sa.text(
            "SELECT count(*) FROM opening_sentences GROUP BY key_hash ORDER BY 1 DESC")).scalars().all()
    blob = " ".join(texts).lower()
    assert "reproduce the bug" not in blob and "wait for feedback" not in blob and "people's champ" not in blob
    assert counts[0] == len(HARNESS_TASKS)                 # each harness sentence: one count per session
    client.forget(session_file=str(files[0]), agent_id="swe-agent")
    assert scalar(client, "SELECT max(n) FROM (SELECT count(*) AS n FROM opening_sentences GROUP BY key_hash) t") \
        == len(HARNESS_TASKS) - 1


def test_the_same_sentence_met_again_merges_whatever_its_context_says(memory, client):
    """Exact repeats (up to case and spacing) are one memory, never stored side by side, even
    when each session gave them a different context and resolution."""
    first = memory.upload_memory("Always run the linter before you push a branch.",
                                 "Task: fix the flaky login test in the auth service",
                                 "make lint && git push").record
    again = memory.upload_memory("always run the linter  before you push a branch.",
                                 "Task: migrate the billing tables to the new schema with alembic",
                                 "ruff check . before git push")
    assert again.action == "merged" and again.record.id == first.id
    assert scalar(client, "SELECT count(*) FROM memory_records") == 1
