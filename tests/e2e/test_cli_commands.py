"""The `ultron` commands a user reaches for after ingest: search, details, skills,
export-sft, stats, forget, reembed, maintenance, serve - their output, JSON and exit codes.

Most run in-process through ``ultron.cli.main`` (same code, no interpreter start-up);
the ones about the process itself (progress on stderr, --help) run the real command."""

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.conftest import TEST_HOME, write_jsonl
from ultron.cli import main

ULTRON = [sys.executable, "-m", "ultron.cli"]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PANDAS = ("ModuleNotFoundError: No module named 'pandas' in the report container",
          "Running the nightly report script in the app Docker container",
          "Add pandas to requirements.txt. Rebuild the image with `docker build -t app .`")
GIT = ("git push rejected: non-fast-forward after a rebase", "pushing the feature branch",
       "use git push --force-with-lease")
SKILL_MEMORIES = [
    PANDAS,
    ("ImportError: pandas is missing when the CI tests start", "CI job running the unit tests inside Docker",
     "pip install pandas inside the Dockerfile, then rebuild the image."),
    ("The worker service crashed: no module named pandas", "docker compose worker service for the ETL jobs",
     "Added pandas to requirements.txt and rebuilt the container."),
    ("Airflow task failed with ModuleNotFoundError for pandas", "Airflow task executed in a Docker operator",
     "Rebuild the image with `docker build --no-cache -t app .` after adding pandas to requirements.txt"),
    ("Installed pandas on the host instead of inside the image",
     "Local Docker development setup with a virtualenv on the laptop",
     "User: install it in the image, not on the host. Then: Bash `docker compose build worker`"),
]


def run(*args):
    env = {**os.environ, "ULTRON_HOME": str(TEST_HOME)}
    return subprocess.run([*ULTRON, *args], capture_output=True, text=True, env=env, timeout=120)


def cli(capsys, *args):
    """Run a command in-process: (exit code, stdout, stderr)."""
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def sql(client, statement, **params):
    with client.db.engine.begin() as conn:
        result = conn.execute(sa.text(statement), params)
        return result.all() if result.returns_rows else None


def test_search_prints_a_table_and_valid_json(client, capsys):
    pandas = client.upload_memory(*PANDAS, tags=["docker"])
    client.upload_memory(*GIT)

    code, out, err = cli(capsys, "search", "pandas missing in docker")
    assert code == 0, err
    header, rule, first = out.splitlines()[:3]
    assert header.split() == ["id", "type", "tier", "sim", "score", "summary"] and set(rule) <= {"-", " "}
    assert first.split()[:3] == [pandas.id[:8], "error", "WARM"] and "pandas" in first

    code, out, _ = cli(capsys, "search", "pandas", "--json", "--detail", "l0", "--limit", "1")
    results = json.loads(out)
    assert code == 0 and [r["id"] for r in results] == [pandas.id]
    assert results[0]["summary_l0"] and "overview_l1" not in results[0]

    long = client.upload_memory("pandas " + "and a very long explanation of the docker image layers " * 20,
                                "docker", "rebuild")
    code, out, _ = cli(capsys, "search", "pandas docker image layers")  # not a terminal: a pipe's width
    assert long.id[:8] in out and max(len(line) for line in out.splitlines()) <= 100

    assert cli(capsys, "search", "pandas", "--tier", "cold")[1].strip() == "no memory matches"
    assert json.loads(cli(capsys, "search", "git push", "--tag", "docker", "--json")[1]) == []


def test_bad_arguments_are_explained_without_a_traceback(client, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["search", "pandas", "--limit", "0"])
    assert exc.value.code == 2 and "--limit: 0 is too small" in capsys.readouterr().err
    code, _, err = cli(capsys, "search", "   ")
    assert code == 2 and err.strip() == "ultron: error: the query is empty"


def test_details_prints_the_full_record_and_fails_on_an_unknown_id(client, capsys):
    rec = client.upload_memory(*PANDAS, tags=["docker"])
    code, out, err = cli(capsys, "details", rec.id[:8])  # the short id search shows
    assert code == 0, err
    assert out.startswith(f"memory {rec.id}  (error, WARM, active)")
    for text in ("content:", PANDAS[0], "resolution:", "docker build -t app .", "tags:", "docker"):
        assert text in out

    missing = str(uuid.uuid4())
    code, out, err = cli(capsys, "details", missing)
    assert code == 1 and out == "" and f"no memory with id '{missing}'" in err and "Traceback" not in err
    code, out, err = cli(capsys, "details", rec.id, "zzzz", "--json")
    assert code == 1 and [r["id"] for r in json.loads(out)] == [rec.id] and "'zzzz'" in err


def test_stats_shows_every_section_with_its_counts(client, capsys, tmp_path):
    write_jsonl(tmp_path / "s.jsonl", [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
    client.ingest([tmp_path / "s.jsonl"], "stats-agent")
    client.upload_memory(*PANDAS)
    client.upload_memory(*GIT)

    code, out, err = cli(capsys, "stats")
    assert code == 0, err
    for heading in ("sessions", "segments", "memories by tier", "memories by type (active)", "clusters", "skills"):
        assert f"\n{heading}\n" in f"\n{out}"
    lines = out.splitlines()
    tiers = lines[lines.index("memories by tier") + 1:][:3]
    assert tiers[0].split() == ["HOT", "WARM", "COLD", "archived", "total"] and tiers[2].split() == \
        ["0", "2", "0", "0", "2"]
    sessions = lines[lines.index("sessions") + 1:][:3]
    assert sessions[0].split() == ["total", "segmented", "pending"] and sessions[2].split() == ["1", "0", "1"]

    data = json.loads(cli(capsys, "stats", "--json")[1])
    assert data["memories"]["total"] == 2 and data["sessions"]["total"] == 1 and "skills" in data


def test_forget_removes_a_memory_and_says_what_went(client, capsys):
    doomed = client.upload_memory(*PANDAS)
    kept = client.upload_memory(*GIT)

    code, _, err = cli(capsys, "forget", "--memory", doomed.id[:8])  # stdin is no terminal: --yes needed
    assert code == 2 and "pass --yes" in err
    assert client.get_memory_details([doomed.id])

    code, out, err = cli(capsys, "forget", "--memory", doomed.id[:8], "--yes")
    assert code == 0, err
    assert f"forgot 1 memory ({doomed.id[:8]})" in out
    assert "memories deleted      1" in out
    assert client.get_memory_details([doomed.id]) == [] and client.get_memory_details([kept.id])
    assert cli(capsys, "details", doomed.id)[0] == 1

    code, _, err = cli(capsys, "forget", "--memory", doomed.id, "--yes")
    assert code == 1 and "nothing was deleted" in err


def test_forget_a_session_file_by_its_path(client, capsys, tmp_path, monkeypatch):
    path = write_jsonl(tmp_path / "s.jsonl", [{"role": "user", "content": "hi"}])
    client.ingest([path], "forget-agent")
    monkeypatch.chdir(tmp_path)
    code, out, _ = cli(capsys, "forget", "--session-file", "s.jsonl", "--yes", "--json")  # relative to cwd
    assert code == 0 and json.loads(out)["sessions"] == 1
    assert cli(capsys, "forget", "--agent-id", "forget-agent", "--yes")[0] == 1  # nothing left


def test_forget_prints_every_table_and_file_and_the_vacuum_note(client, capsys, tmp_path):
    path = write_jsonl(tmp_path / "v.jsonl", [{"role": "user", "content": "hello there"},
                                              {"role": "assistant", "content": "hi, how can I help?"}])
    client.ingest([path], "vacuum-agent")
    client.segment_pending_sessions()
    code, out, err = cli(capsys, "forget", "--session-file", str(path), "--yes", "--no-purge")
    assert code == 0, err
    assert f"forgot everything ingested from {path}" in out and "sessions              1" in out
    assert "tables:" in out and "trajectory_records" in out and "session_messages" in out
    assert f"dagster partitions to remove: vacuum-agent:{path}" in out
    assert "note: PostgreSQL keeps deleted rows in its data files until VACUUM" in out
    assert "still on disk, outside ULTRON_HOME (not deleted" in err and str(path) in err  # the user's file stays

    client.ingest([path], "vacuum-agent")
    code, out, err = cli(capsys, "forget", "--agent-id", "vacuum-agent", "--yes", "--no-purge", "--vacuum", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["sessions"] == 1 and report["partitions"] == [f"vacuum-agent:{path}"]
    assert report["tables"]["session_messages"] == {"deleted": 2, "updated": 0}
    assert set(report["vacuumed"]) >= {"trajectory_records", "session_messages", "raw_user_uploads"}
    assert report["kept_on_disk"] == [str(path)]


@pytest.fixture
def skill(client):
    """One crystallised skill: five memories in one cluster, then a skill-evolution run."""
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("TRUNCATE knowledge_clusters, skills CASCADE"))
    shutil.rmtree(client.settings.skills_dir, ignore_errors=True)
    ids = [client.upload_memory(*m, tags=["docker"]).id for m in SKILL_MEMORIES]
    sql(client, "INSERT INTO knowledge_clusters (id, topic, size) VALUES ('cli-c1', 'pandas missing in docker', 5)")
    sql(client, "UPDATE memory_records SET cluster_id = 'cli-c1' WHERE id = ANY(:ids)", ids=ids)
    published = client.run_skill_evolution()["published"]
    assert len(published) == 1, published
    return published[0]


def test_skills_list_search_and_show(client, capsys, skill):
    slug = skill["slug"]
    code, out, _ = cli(capsys, "skills")
    assert code == 0
    assert out.splitlines()[0].split() == ["slug", "version", "memories", "name"]
    assert out.splitlines()[2].split()[:3] == [slug, "1.0.0", "5"]

    code, out, _ = cli(capsys, "skills", "pandas module missing in the docker image")
    assert code == 0 and out.splitlines()[0].split()[:3] == ["slug", "version", "sim"]
    assert out.splitlines()[2].startswith(slug)
    assert [s["slug"] for s in json.loads(cli(capsys, "skills", "pandas docker", "--json")[1])] == [slug]

    code, out, _ = cli(capsys, "skills", "--show", slug)
    assert code == 0 and out.startswith("---\nname: " + slug) and "## Steps" in out
    code, out, err = cli(capsys, "skills", "--show", "no-such-skill")
    assert code == 1 and out == "" and "no skill 'no-such-skill'" in err


def test_skills_export_writes_a_valid_agent_skills_tree(client, capsys, skill, tmp_path):
    from ultron.skills.export import validate_tree

    slug, out = skill["slug"], tmp_path / "claude" / "skills"
    code, stdout, err = cli(capsys, "skills", "export", "--to", str(out))
    assert code == 0, err
    assert stdout.startswith(f"exported to {out}: 1 skill written, 0 unchanged, 0 removed")
    assert (out / slug / "SKILL.md").read_text().startswith(f"---\nname: {slug}\n") and validate_tree(out) == {}
    code, stdout, _ = cli(capsys, "skills", "export", "--to", str(out), "--json")
    report = json.loads(stdout)
    assert code == 0 and report["written"] == [] and report["unchanged"] == [slug] and report["problems"] == {}
    code, _, err = cli(capsys, "skills", "export")
    assert code == 2 and "ULTRON_SKILLS_EXPORT_DIR" in err
    code, _, err = cli(capsys, "skills", "pandas", "--to", str(out))
    assert code == 2 and "--to goes with" in err


def test_maintenance_then_export_sft_writes_files_and_prints_where(client, capsys, tmp_path):
    for name in ("docker-flask-missing-module.jsonl", "docker-psycopg2-binary.jsonl"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    client.ingest([tmp_path], "sft-agent")

    code, out, err = cli(capsys, "maintenance")
    assert code == 0, err
    assert "segmented (sessions)      2" in out and "tiers" in out and "clusters" in out and "skills" in out

    code, out, err = cli(capsys, "export-sft", "--min-score", "0.8")
    assert code == 0, err
    directory = Path(out.splitlines()[0].rsplit(" written to ", 1)[1])
    assert directory.is_dir() and directory.parent == client.settings.sft_dir
    assert "exported             2" in out
    listed = {line.split(":", 1)[0].strip(): Path(line.split(":", 1)[1].strip())
              for line in out.splitlines() if line.startswith("  ") and ": " in line}
    assert set(listed) >= {"manifest", "train.openai", "train.sharegpt", "validation.openai"}
    assert all(p.is_file() and p.parent == directory for p in listed.values())
    lines = [json.loads(x) for x in (listed["train.openai"].read_text() + listed["validation.openai"].read_text())
             .splitlines()]
    assert len(lines) == 2 and all(x["messages"] for x in lines)

    data = json.loads(cli(capsys, "export-sft", "--json", "--task-type", "writing")[1])
    assert data["manifest"]["counts"]["exported"] == 0 and Path(data["files"]["manifest"]).is_file()


def test_ingest_json_stays_valid_with_the_progress_bar_on(client, tmp_path):
    for i in range(3):
        write_jsonl(tmp_path / f"s{i}.jsonl", [{"role": "user", "content": f"hello {i}"}])
    out = run("ingest", str(tmp_path), "--agent-id", "bar-agent", "--json", "--progress")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["totals"]["new"] == 3
    assert "ingest" in out.stderr and "3/3" in out.stderr
    quiet = run("ingest", str(tmp_path), "--agent-id", "bar-agent")  # stderr is a pipe: no bar
    assert quiet.returncode == 0 and quiet.stderr == ""


def test_ingest_progress_callback_sees_every_path(client, tmp_path):
    for i in range(2):
        write_jsonl(tmp_path / f"s{i}.jsonl", [{"role": "user", "content": f"hello {i}"}])
    (tmp_path / "notes.txt").write_text("not a session")
    seen = []
    client.ingest([tmp_path, tmp_path / "notes.txt"], "cb-agent", progress=lambda *a: seen.append(a))
    assert seen == [(1, 3, str(tmp_path / "s0.jsonl")), (2, 3, str(tmp_path / "s1.jsonl")),
                    (3, 3, str(tmp_path / "notes.txt"))]


def test_reembed_moves_the_store_to_the_configured_embedder(client, capsys, monkeypatch):
    rec = client.upload_memory(*PANDAS)
    sql(client, "UPDATE embedding_profile SET name = 'another-model:384'")  # built by another embedder

    code, _, err = cli(capsys, "search", "pandas")
    assert code == 2 and "another-model:384" in err and "ultron reembed" in err and "Traceback" not in err
    code, _, err = cli(capsys, "reembed")
    assert code == 2 and "pass --yes" in err

    code, out, err = cli(capsys, "reembed", "--yes")
    assert code == 0, err
    assert out.startswith("re-embedded 1 memory, 0 cluster centroids and 0 skills with hash:384 (384-d)")
    assert "instead of another-model:384" in out
    assert sql(client, "SELECT name, dim FROM embedding_profile") == [("hash:384", 384)]
    code, out, _ = cli(capsys, "search", "pandas", "--json")
    assert code == 0 and json.loads(out)[0]["id"] == rec.id

    monkeypatch.setenv("ULTRON_EMBEDDING_DIM", "256")
    code, _, err = cli(capsys, "reembed", "--yes")
    assert code == 2 and "256-d" in err and "384-d embedder" in err and "Nothing was changed" in err


def test_a_database_that_is_down_is_one_clear_line(capsys, monkeypatch):
    monkeypatch.setenv("ULTRON_DATABASE_URL", "postgresql://u:secret@127.0.0.1:1/ultron")
    code, out, err = cli(capsys, "stats")
    assert code == 2 and out == ""
    assert err.startswith("ultron: error: Cannot connect to PostgreSQL at") and "secret" not in err
    assert "Traceback" not in err


def test_every_command_documents_itself():
    top = run("--help")
    assert top.returncode == 0
    for command in ("search", "details", "skills", "export-sft", "stats", "forget", "serve", "reembed",
                    "maintenance", "ingest"):
        assert command in top.stdout
    serve = run("serve", "--help")
    assert serve.returncode == 0
    assert "--host" in serve.stdout and "--port" in serve.stdout and "ULTRON_API_TOKEN" in serve.stdout


def test_status_names_the_database_readably_without_a_password(client, capsys):
    """Not `/ultron?host=%2Ftmp%2F…`: a socket directory or host:port/db, and never a password."""
    code, out, _ = cli(capsys, "status")
    assert code == 0
    line = next(ln for ln in out.splitlines() if ln.startswith("database:"))
    assert "%2F" not in line and "?" not in line and "password" not in line.lower()
    from sqlalchemy.engine import make_url

    password = make_url(client.db.urls.ultron).password
    assert not password or password not in line
    assert "(Unix socket), database ultron" in line or "/ultron" in line


def test_skills_search_takes_any_words_even_a_subcommands_name(client, capsys):
    """`ultron skills search export` searches for the word "export"; `ultron skills export`
    still exports."""
    client.upload_memory("Export the nightly report as CSV with pandas to_csv", "report export", "df.to_csv(path)")
    code, out, err = cli(capsys, "skills", "search", "export", "--json")
    assert code == 0, err
    assert isinstance(json.loads(out), list)
    code, out, err = cli(capsys, "skills", "search", "docker", "images", "--json")
    assert code == 0, err


def test_a_command_outside_any_store_says_where_it_looked_and_creates_nothing(tmp_path):
    """Run from another directory, `./.ultron` is not a store: no new 50 MB store, no zeros."""
    env = {k: v for k, v in os.environ.items() if k not in ("ULTRON_HOME", "ULTRON_DATABASE_URL")}
    done = subprocess.run([*ULTRON, "status"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert f"no Ultron store at {tmp_path / '.ultron'} (ULTRON_HOME is unset: ./.ultron)" in done.stderr
    assert "--init" in done.stderr and not (tmp_path / ".ultron").exists()


def test_tokens_bound_to_an_agent_and_share(client, capsys):
    """`ultron tokens create --agent` binds a token; `ultron share` lets other agents' tokens
    see a memory; both show in the list and the audit log."""
    from ultron.access import acting

    code, out, err = cli(capsys, "tokens", "create", "--name", "cli-bound", "--agent", "cli-agent-a", "--scope",
                         "read")
    assert code == 0 and out.startswith("ult_") and "agents cli-agent-a" in err
    token = out.strip()
    try:
        code, out, _ = cli(capsys, "tokens", "list")
        assert code == 0 and "cli-agent-a" in out
        memory = client.upload_memory("Flush the zzcli cache before the nightly import.", agent_id="cli-agent-b")
        principal, _ = client.tokens.resolve(token, None)
        assert principal.agents == ("cli-agent-a",)

        def found() -> bool:
            import contextvars

            def look():
                acting(principal)
                return client.get_memory(memory.id) is not None
            return contextvars.copy_context().run(look)

        assert not found(), "another agent's private memory is not the bound token's to see"
        code, out, _ = cli(capsys, "share", memory.id)
        assert code == 0 and out.startswith("1 memory now shared")
        assert found()
        code, out, _ = cli(capsys, "share", "--agent", "cli-agent-b", "--private")
        assert code == 0 and not found()
        code, out, _ = cli(capsys, "audit", "--action", "memories.share", "--json")
        assert code == 0 and json.loads(out)[0]["detail"]["changed"] == 1
        code, _, err = cli(capsys, "share")
        assert code == 2 and "memory ids or --agent" in err
    finally:
        cli(capsys, "tokens", "revoke", "--name", "cli-bound")
