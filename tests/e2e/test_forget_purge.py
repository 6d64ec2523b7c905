"""Forget leaves nothing on disk: a word planted in a memory and in a session (ingested,
segmented, labelled, extracted, clustered), searched and analysed, is found in files of the
embedded server's data directory (tables, indexes, TOAST, statistics, WAL) before forget; after
a purging forget it is in no file of the store at all: pgdata/ (base/, global/, pg_wal/, the
server log, everything) and the rest of ULTRON_HOME.

The store is private (its own ULTRON_HOME, its own embedded server, 128 MB of shared buffers),
so the byte scan sees only this test's server and the purge's VACUUM FULL and checkpoints do
not disturb the suite's shared one. The CLI's `ultron forget` and the memory browser's forget
purge by default; the SDK and the HTTP API only when asked (``purge``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from tests.conftest import EXTERNAL
from tests.e2e.test_forget_everywhere import failing_session, ingest, pipeline, rows_containing

pytestmark = pytest.mark.skipif(
    EXTERNAL, reason="byte-scans the embedded server's data directory; the external server in "
                     "ULTRON_TEST_DATABASE_URL keeps its files elsewhere (purge's limits there: docs/concepts.md)")

AGENT = "agent-purged"
TOKEN = "purge-test-token-0123456789"


def purge_marker() -> str:
    """A unique word of letters only (redaction keeps it): zqpurge and 16 random letters."""
    return "zqpurge" + "".join(chr(97 + int(c, 16)) for c in uuid.uuid4().hex[:16])


def needle(word: str) -> bytes:
    """What the scan looks for: the word's first 13 letters, which every form of it starts with
    (the text search stores the stemmed word, which may lose its last letters)."""
    return word[:13].encode()


def files_holding(home: Path, word: str) -> list[str]:
    """Every file under ULTRON_HOME (pgdata/ included: table, index, TOAST, catalog and WAL
    files, the server log) whose bytes hold the word."""
    hits = []
    for dirpath, _dirs, names in os.walk(home):
        for name in names:
            path = Path(dirpath) / name
            try:
                if path.is_file() and not path.is_symlink() and needle(word) in path.read_bytes():  # no sockets
                    hits.append(str(path.relative_to(home)))
            except FileNotFoundError:  # a file the server removed meanwhile
                continue
    return sorted(hits)


def described(svc, files: list[str]) -> list[str]:
    """The files, with the relation each table file of the store's database belongs to."""
    out = []
    with svc.db.engine.connect() as conn:
        for f in files:
            m = re.fullmatch(r"pgdata/base/\d+/(\d+)(?:_\w+)?(?:\.\d+)?", f)
            rel = m and conn.execute(sa.text("SELECT CAST(pg_filenode_relation(0, CAST(:n AS oid)) AS text)"),
                                     {"n": int(m.group(1))}).scalar()
            out.append(f"{f} ({rel})" if rel else f)
    return out


def statistics_quoting(svc, word: str) -> list[str]:
    """Columns (of any relation: tables and indexes) whose planner statistics in pg_statistic
    quote the word: most common values or elements, histograms."""
    values = " || ".join(f"coalesce(CAST(stavalues{i} AS text), '')" for i in range(1, 6))
    with svc.db.engine.connect() as conn:
        return [f"{r.rel}.{r.staattnum}" for r in conn.execute(sa.text(
            "SELECT CAST(starelid AS regclass) AS rel, staattnum FROM pg_statistic "
            f"WHERE position(:w in {values}) > 0"),
            {"w": needle(word).decode()})]


def settle(svc) -> None:
    """What a store does by itself over time: hit counts written, statistics gathered, pages
    flushed to the data files by a checkpoint."""
    svc.stats()  # flushes the queued hit counts
    with svc.db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("ANALYZE")
        conn.exec_driver_sql("CHECKPOINT")


@pytest.fixture(scope="module")
def store():
    """An SDK client on a private embedded server in a temporary ULTRON_HOME (outside
    pytest's tmp_path, which a root run locks away from the server's user)."""
    from ultron.db import embedded
    from ultron.db.database import Database
    from ultron.sdk import Ultron
    from ultron.settings import Settings

    home = Path(tempfile.mkdtemp(prefix="ultron-purge-"))
    os.environ["ULTRON_PG_SHARED_BUFFERS"] = "128MB"  # read when the server's config is written
    try:
        settings = Settings.from_env(home=home, llm_provider="rules")
        db = Database.open(settings)
    finally:
        os.environ.pop("ULTRON_PG_SHARED_BUFFERS", None)
    svc = Ultron(settings, db=db)
    # Memories that stay: the memory tables are not left empty, so their statistics are made
    # anew by ANALYZE from what is left (an emptied table has its statistics cleared instead).
    for tool in ("docker", "pandas", "nginx"):
        svc.upload_memory(f"The {tool} build fails after an upgrade", "ci pipeline", f"Pin the {tool} version.",
                          [tool], agent_id="agent-kept")
    yield svc
    db.dispose()
    embedded.stop_server(settings.pgdata)
    shutil.rmtree(home, ignore_errors=True)


def plant(svc, word: str, *, session: bool = False) -> str:
    """A memory naming the word (and, with ``session``, a session naming it taken through the
    pipeline), searched; returns the memory's id."""
    up = svc.upload_memory(f"The importer crashes with {word} when the feed is empty", "nightly import job",
                           f"Skip empty feeds before parsing: {word} goes away.", ["importer"], agent_id=AGENT)
    if session:
        ingest(svc, {"importer.jsonl": failing_session(word, "importer", "feed importer", 8000, "--skip-empty")},
               AGENT)
        pipeline(svc)
    assert svc.search_memories(f"{word} importer crashes"), "the memory is found by its word"
    settle(svc)
    assert "memory_records" in rows_containing(svc.db, word)
    return up.id


def test_a_purging_forget_leaves_the_word_in_no_file_of_the_server(store):
    word = purge_marker()
    plant(store, word, session=True)
    tables = rows_containing(store.db, needle(word).decode())
    assert {"memory_records", "memory_contributions", "memory_lexemes", "session_messages",
            "raw_user_uploads"} <= set(tables), tables
    before = files_holding(store.settings.home, word)
    assert any(f.startswith("pgdata/base/") for f in before) and any(f.startswith("pgdata/pg_wal/") for f in before), (
        before)
    quoted = statistics_quoting(store, word)
    assert quoted, "the planner statistics quote the word before the forget"

    report = store.forget(agent_id=AGENT, purge=True)

    assert report["sessions"] == 1 and report["memories_deleted"] >= 2
    purged = report["purge"]
    assert purged["problems"] == [] and purged["statistics"] is True, purged
    assert {"memory_records", "memory_contributions", "memory_lexemes", "memory_corpus", "session_messages",
            "raw_user_uploads", "task_segments", "trajectory_records"} <= set(purged["tables"])
    assert report["vacuumed"] == purged["tables"]
    assert purged["wal_switches"] >= 2 and purged["checkpoints"] >= 3 and len(purged["wal_segments"]) == 1
    assert purged["server"]["wal_recycle"] == "off" and purged["server"]["archive_mode"] == "off"
    print(f"purge: {len(before)} files held the word before ({before}), {purged['seconds']:.2f} s")
    assert any("backups" in item for item in report["not_reached"])
    assert any("Dagster" in item for item in report["not_reached"])

    after = files_holding(store.settings.home, word)
    assert after == [], (f"the forgotten word is still in {len(after)} file(s): {described(store, after)}; "
                         f"statistics: {statistics_quoting(store, word)}")
    assert rows_containing(store.db, needle(word).decode()) == {}
    assert statistics_quoting(store, word) == []


def test_without_purge_the_word_stays_on_disk_and_the_report_says_so(store):
    word = purge_marker()
    memory_id = plant(store, word)
    report = store.forget(memory_ids=[memory_id])
    assert report["purge"] is None and report["vacuumed"] == []
    assert any("forget with purge" in item for item in report["not_reached"])
    store.stats()
    with store.db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("CHECKPOINT")
    assert files_holding(store.settings.home, word)  # what purge is for
    # forgetting something else with purge takes these dead rows with it: the same tables
    other = purge_marker()
    report = store.forget(memory_ids=[plant(store, other)], purge=True)
    assert report["purge"]["problems"] == []
    assert files_holding(store.settings.home, word) == [] and files_holding(store.settings.home, other) == []


def test_the_cli_forget_purges_by_default(store, monkeypatch, capsys):
    from ultron.cli import main
    from ultron.cli.parser import build_parser

    assert build_parser().parse_args(["forget", "--agent-id", "a"]).purge is True
    assert build_parser().parse_args(["forget", "--agent-id", "a", "--no-purge"]).purge is False
    word = purge_marker()
    memory_id = plant(store, word)
    assert files_holding(store.settings.home, word)
    monkeypatch.setenv("ULTRON_HOME", str(store.settings.home))
    monkeypatch.setenv("ULTRON_LLM_PROVIDER", "rules")

    code = main(["forget", "--memory", memory_id, "--yes", "--json"])
    out = capsys.readouterr().out
    assert code == 0, out
    report = json.loads(out)
    assert report["memories_deleted"] == 1 and report["purge"]["problems"] == []
    assert files_holding(store.settings.home, word) == []

    # the printed report says what was purged and what forget cannot reach
    memory_id = plant(store, purge_marker())
    assert main(["forget", "--memory", memory_id, "--yes"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # lines wrapped at 100 columns
    assert "purged: VACUUM FULL of memory_records" in out and "the planner statistics" in out, out
    assert "not reached by forget" in out and "backups" in out and "note: PostgreSQL keeps" not in out


def test_the_memory_browsers_forget_purges(store):
    from tests.e2e.test_memory_browser import csrf
    from ultron.api.app import create_app

    word = purge_marker()
    memory_id = plant(store, word)
    assert files_holding(store.settings.home, word)
    with TestClient(create_app(store.settings, client=store, token=TOKEN), base_url="http://127.0.0.1") as web:
        signed = web.post("/ui/signin", data={"token": TOKEN, "next": "/ui/memories"}, follow_redirects=False)
        assert signed.status_code == 303
        confirm = web.get(f"/ui/memories/{memory_id}/forget")
        assert confirm.status_code == 200
        gone = web.post(f"/ui/memories/{memory_id}/forget", data={"csrf": csrf(confirm.text)},
                        follow_redirects=False)
        assert gone.status_code == 303 and re.search(r"forgot=", gone.headers["location"])
    assert store.get_memory_details([memory_id]) == []
    assert files_holding(store.settings.home, word) == []


def test_a_role_that_may_not_checkpoint_gets_the_purge_it_may_run_and_a_report(store):
    """As on an external server where Ultron's role owns its database and nothing more: the
    tables and the statistics catalog are vacuumed (a database's owner may), CHECKPOINT and
    pg_switch_wal() are refused, and the report says so instead of failing."""
    from ultron.db.database import Database
    from ultron.sdk import Ultron
    from ultron.settings import Settings

    admin = sa.make_url(store.db.urls.ultron)
    root = sa.create_engine(admin, isolation_level="AUTOCOMMIT")
    with root.connect() as conn:
        conn.execute(sa.text("CREATE ROLE purge_app LOGIN"))
        conn.execute(sa.text("CREATE DATABASE purge_app OWNER purge_app"))
    app_db = sa.create_engine(admin.set(database="purge_app"), isolation_level="AUTOCOMMIT")
    with app_db.connect() as conn:
        conn.execute(sa.text("CREATE EXTENSION vector"))  # pgvector is not trusted: a superuser's step
    app_db.dispose()
    url = admin.set(username="purge_app", database="purge_app").render_as_string(hide_password=False)
    settings = Settings.from_env(home=store.settings.home / "as-app", database_url=url, llm_provider="rules")
    db = Database.open(settings)
    try:
        svc = Ultron(settings, db=db)
        memory_id = svc.upload_memory(f"The importer crashes with {purge_marker()}", "nightly import job",
                                      "Skip empty feeds.", ["importer"]).id
        report = svc.forget(memory_ids=[memory_id], purge=True)
        purged = report["purge"]
        assert "memory_records" in purged["tables"] and purged["statistics"] is True
        assert purged["checkpoints"] == 0 and purged["wal_switches"] == 0
        assert [p.split(":")[0] for p in purged["problems"]] == ["CHECKPOINT"], purged["problems"]
        assert purged["problems"][0] in report["not_reached"]
        assert any(item.startswith("the external server's disks") for item in report["not_reached"])
    finally:
        db.dispose()
        with root.connect() as conn:
            conn.execute(sa.text("DROP DATABASE purge_app WITH (FORCE)"))
            conn.execute(sa.text("DROP ROLE purge_app"))
        root.dispose()
