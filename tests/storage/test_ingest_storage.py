"""ingest() against the real embedded PostgreSQL: statuses, idempotence, change detection,
archiving and per-file rollback."""

import json
import os
import subprocess
import sys

import sqlalchemy as sa

from tests.conftest import embedded_only, write_jsonl

CSV = [{"role": "user", "content": "How do I read a CSV in Python?"},
       {"role": "assistant", "content": "pandas.read_csv()"}]
DOCKER = [{"role": "user", "content": "Write me a Docker compose file"},
          {"role": "assistant", "content": "services: {}"}]


def scalar(client, sql, **params):
    with client.db.engine.connect() as conn:
        return conn.execute(sa.text(sql), params).scalar_one()


def test_schema_is_migrated_with_pgvector(client):
    assert client.db.revision == "0022"
    assert scalar(client, "SELECT extversion FROM pg_extension WHERE extname = 'vector'").startswith("0.8")
    cols = {r for r in client.db.engine.connect().execute(sa.text(
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'task_segments'")).scalars()}
    assert cols == {"id", "agent_id", "session_file", "segment_index", "start_line", "end_line", "fingerprint",
                    "topic", "quality_metrics", "labeled", "memory_extracted", "created_at", "updated_at",
                    "claimed_by", "claim_expires_at"}


def test_new_then_unchanged_is_a_no_op(client, tmp_path):
    f = write_jsonl(tmp_path / "s.jsonl", CSV)
    first = client.ingest([f], "agent")
    assert [(x.status, x.messages) for x in first.files] == [("new", 2)]
    assert first.totals["new"] == 1 and first.totals["messages"] == 2
    before = scalar(client, "SELECT updated_at FROM trajectory_records")
    again = client.ingest([f], "agent")
    assert [(x.status, x.messages) for x in again.files] == [("unchanged", 2)]
    assert scalar(client, "SELECT updated_at FROM trajectory_records") == before
    assert scalar(client, "SELECT count(*) FROM session_messages") == 2
    assert scalar(client, "SELECT count(*) FROM raw_user_uploads") == 1


def test_appended_file_goes_back_to_pending_segmentation(client, tmp_path):
    f = write_jsonl(tmp_path / "s.jsonl", CSV)
    client.ingest([f], "agent")
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("UPDATE trajectory_records SET segmented = 1"))
    with open(f, "a") as fh:
        for row in DOCKER:
            fh.write(json.dumps(row) + "\n")
    report = client.ingest([f], "agent")
    assert [(x.status, x.messages) for x in report.files] == [("changed", 4)]
    assert scalar(client, "SELECT segmented FROM trajectory_records") == 0
    assert scalar(client, "SELECT count(*) FROM trajectory_records") == 1
    assert scalar(client, "SELECT count(*) FROM session_messages") == 4
    # The archive holds the latest version, once.
    assert scalar(client, "SELECT count(*) FROM raw_user_uploads") == 1
    assert scalar(client, "SELECT size_bytes FROM raw_user_uploads") == f.stat().st_size


def test_touch_without_content_change_stays_unchanged(client, tmp_path):
    f = write_jsonl(tmp_path / "s.jsonl", CSV)
    client.ingest([f], "agent")
    os.utime(f, ns=(1, 1))
    assert client.ingest([f], "agent").files[0].status == "unchanged"
    assert scalar(client, "SELECT mtime_ns FROM trajectory_records") == 1


def test_same_file_for_two_agents_is_two_sessions(client, tmp_path):
    f = write_jsonl(tmp_path / "s.jsonl", CSV)
    client.ingest([f], "a")
    assert client.ingest([f], "b").files[0].status == "new"
    assert scalar(client, "SELECT count(*) FROM trajectory_records") == 2


def test_bad_lines_are_stored_as_located_problems_and_good_lines_kept(client, tmp_path):
    f = write_jsonl(tmp_path / "s.jsonl", [CSV[0], b"{broken\n", b'{"role": "user", "content": "nul\\u0000here"}\n', CSV[1]])
    report = client.ingest([f], "agent").files[0]
    assert report.status == "new" and report.messages == 3
    assert [(p.line, p.error.split(":")[0]) for p in report.problems] == [
        (2, "not valid JSON"), (3, "NUL characters removed (PostgreSQL text cannot store them); line kept")]
    assert scalar(client, "SELECT count(*) FROM parse_problems") == 2
    assert scalar(client, "SELECT content FROM session_messages WHERE line = 3") == "nulhere"
    # an unchanged re-ingest reports the stored problems again
    assert len(client.ingest([f], "agent").files[0].problems) == 2


def test_whole_file_failures_are_reported_and_leave_no_rows(client, tmp_path):
    binary = tmp_path / "b.jsonl"
    binary.write_bytes(b"\x00\x01\x02garbage" * 100)
    empty = tmp_path / "e.jsonl"
    empty.write_bytes(b"")
    garbage = write_jsonl(tmp_path / "g.jsonl", [b"nope\n", b"[]\n"])
    good = write_jsonl(tmp_path / "ok.jsonl", CSV)
    report = client.ingest([binary, empty, garbage, good, tmp_path / "missing.jsonl"], "agent")
    by_name = {os.path.basename(f.path): f for f in report.files}
    assert by_name["b.jsonl"].status == "failed" and "binary file" in by_name["b.jsonl"].problems[0].error
    assert by_name["e.jsonl"].status == "skipped" and by_name["e.jsonl"].problems[0].error == "empty file"
    assert by_name["g.jsonl"].status == "failed"
    assert [p.line for p in by_name["g.jsonl"].problems] == [1, 2, None]
    assert by_name["missing.jsonl"].status == "failed"
    assert by_name["ok.jsonl"].status == "new"
    assert report.totals == {"files": 5, "new": 1, "unchanged": 0, "changed": 0, "skipped": 1, "failed": 3,
                             "messages": 2, "problems": 6}
    assert scalar(client, "SELECT count(*) FROM trajectory_records") == 1


def test_a_file_turned_to_garbage_keeps_its_last_good_version(client, tmp_path):
    f = write_jsonl(tmp_path / "s.jsonl", CSV)
    client.ingest([f], "agent")
    f.write_bytes(b"\x00\x00binary now")
    assert client.ingest([f], "agent").files[0].status == "failed"
    assert scalar(client, "SELECT count(*) FROM session_messages") == 2


def test_files_over_10_mb_are_ingested_but_not_archived(client, tmp_path):
    f = tmp_path / "big.jsonl"
    row = json.dumps({"role": "user", "content": "y" * 1000}).encode() + b"\n"
    f.write_bytes(row * (11 * 1024))  # ~11 MB
    report = client.ingest([f], "agent").files[0]
    assert report.status == "new" and report.messages == 11 * 1024
    assert not report.archived
    assert scalar(client, "SELECT count(*) FROM raw_user_uploads") == 0


def test_an_archive_failure_never_blocks_ingestion(client, tmp_path):
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("""
            CREATE FUNCTION refuse_archive() RETURNS trigger LANGUAGE plpgsql AS
            $$ BEGIN RAISE EXCEPTION 'archive disk full'; END $$;
            CREATE TRIGGER refuse_archive BEFORE INSERT ON raw_user_uploads
            FOR EACH ROW EXECUTE FUNCTION refuse_archive();"""))
    try:
        report = client.ingest([write_jsonl(tmp_path / "s.jsonl", CSV)], "agent").files[0]
    finally:
        with client.db.engine.begin() as conn:
            conn.execute(sa.text("DROP TRIGGER refuse_archive ON raw_user_uploads; DROP FUNCTION refuse_archive();"))
    assert report.status == "new" and not report.archived
    assert "archive disk full" in report.archive_error
    assert scalar(client, "SELECT count(*) FROM session_messages") == 2


def test_one_failing_file_rolls_back_only_itself(client, tmp_path):
    # A CHECK constraint added for the test makes one specific file's insert fail inside Postgres.
    bad = write_jsonl(tmp_path / "poison.jsonl", [{"role": "user", "content": "poison"}])
    good = write_jsonl(tmp_path / "fine.jsonl", CSV)
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("ALTER TABLE session_messages ADD CONSTRAINT no_poison CHECK (content <> 'poison')"))
    try:
        report = client.ingest([bad, good], "agent")
    finally:
        with client.db.engine.begin() as conn:
            conn.execute(sa.text("ALTER TABLE session_messages DROP CONSTRAINT no_poison"))
    assert [f.status for f in report.files] == ["failed", "new"]
    assert "no_poison" in report.files[0].problems[-1].error
    assert scalar(client, "SELECT count(*) FROM trajectory_records") == 1


def test_refresh_picks_up_changed_and_never_ingested_inbox_files(client, settings, tmp_path):
    inbox = settings.inbox[0]
    known = write_jsonl(inbox / "refresh-agent" / "known.jsonl", CSV)
    client.ingest([known], "refresh-agent")
    with open(known, "a") as fh:
        fh.write(json.dumps(DOCKER[0]) + "\n")
    fresh = write_jsonl(inbox / "refresh-agent" / "fresh.jsonl", DOCKER)
    try:
        report = client.ingestion.refresh()
        assert sorted((os.path.basename(f.path), f.status, f.agent_id) for f in report.files) == [
            ("fresh.jsonl", "new", "refresh-agent"), ("known.jsonl", "changed", "refresh-agent")]
        assert client.ingestion.refresh().files == []
    finally:
        known.unlink()
        fresh.unlink()


@embedded_only
def test_two_processes_starting_a_fresh_embedded_server_together(tmp_path):
    home = tmp_path / "fresh-home"
    script = ("import sys; from ultron.sdk import Ultron; from ultron.settings import Settings; "
              "u = Ultron(Settings.from_env()); r = u.ingest([sys.argv[1]], 'p'); "
              "print(r.files[0].status, u.status()['tables']['trajectory_records'])")
    env = {**os.environ, "ULTRON_HOME": str(home)}
    files = [write_jsonl(tmp_path / f"p{i}.jsonl", CSV) for i in range(2)]
    procs = [subprocess.Popen([sys.executable, "-c", script, str(f)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for f in files]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert out.startswith("new ")
    check = subprocess.run([sys.executable, "-c", "from ultron.sdk import Ultron; "
                            "print(Ultron().status()['tables']['trajectory_records'])"],
                           env=env, capture_output=True, text=True, timeout=120)
    assert check.stdout.strip() == "2", check.stderr


def test_a_server_without_pgvector_gets_an_error_naming_the_fix(client):
    import pytest

    from ultron.db.database import DatabaseError, check_pgvector

    with client.db.engine.connect() as conn:
        check_pgvector(conn, "postgresql://u:secret@db/x")  # the embedded server has it
        with pytest.raises(DatabaseError) as err:
            check_pgvector(conn, "postgresql://u:secret@db/x", extension="vector_missing_for_test")
    message = str(err.value)
    assert "Install pgvector" in message and "unset ULTRON_DATABASE_URL" in message
    assert "secret" not in message


def test_dagster_storage_uses_psycopg2_on_the_same_server(client, settings):
    from resources.dagster_storage import dagster_postgres_url
    from ultron.db.database import resolve_urls

    urls = resolve_urls(settings)
    assert urls.ultron.startswith("postgresql+psycopg://") and urls.ultron.split("?")[0].endswith("/ultron")
    assert urls.dagster.startswith("postgresql+psycopg2://") and urls.dagster.split("?")[0].endswith("/dagster")
    assert dagster_postgres_url("postgresql+psycopg://u:p@h:5432/d") == "postgresql+psycopg2://u:p@h:5432/d"
    # Only ULTRON_DATABASE_URL set (whatever this run's environment holds): Dagster shares it.
    external = resolve_urls(settings.__class__.from_env(database_url="postgres://u:p@h/ultron",
                                                        dagster_database_url=None))
    assert external.ultron == "postgresql+psycopg://u:p@h/ultron"
    assert external.dagster == "postgresql+psycopg2://u:p@h/ultron"
