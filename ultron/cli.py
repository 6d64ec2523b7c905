"""The ``ultron`` command line: dev server, ingestion, status, database control."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from ultron.settings import Settings

PROJECT_ROOT = Path(__file__).resolve().parent.parent
EXAMPLES_AGENT = "examples"
SEEDED_MARKER = ".examples-seeded"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ultron", description="Ultron: memory for LLM agents, on Dagster.")
    sub = parser.add_subparsers(dest="command", required=True)

    dev = sub.add_parser("dev", help="start the database if needed, then the Dagster UI and daemon")
    dev.add_argument("--host", default=None, help="UI host (default ULTRON_DAGSTER_HOST or 127.0.0.1)")
    dev.add_argument("--port", type=int, default=None, help="UI port (default ULTRON_DAGSTER_PORT or 3000)")
    dev.add_argument("--no-examples", action="store_true", help="do not copy examples/ into the inbox on first start")

    ing = sub.add_parser("ingest", help="ingest session .jsonl files or directories")
    ing.add_argument("paths", nargs="+")
    ing.add_argument("--agent-id", required=True)
    ing.add_argument("--json", action="store_true", help="print the full report as JSON")

    st = sub.add_parser("status", help="row counts per table and pending work")
    st.add_argument("--json", action="store_true")

    db = sub.add_parser("db", help="control the embedded PostgreSQL server")
    db.add_argument("action", choices=["start", "stop", "status", "url"])

    args = parser.parse_args(argv)
    try:
        settings = Settings.from_env()
        return {"dev": _dev, "ingest": _ingest, "status": _status, "db": _db}[args.command](settings, args)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001 - a CLI shows the message, not a traceback
        from ultron.db.database import DatabaseError
        from ultron.settings import SettingsError

        if isinstance(exc, (DatabaseError, SettingsError, ValueError)):
            print(f"ultron: error: {exc}", file=sys.stderr)
            return 2
        raise


def _ingest(settings: Settings, args: argparse.Namespace) -> int:
    from ultron.sdk import Ultron

    report = Ultron(settings).ingest(args.paths, args.agent_id)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        for f in report.files:
            print(f"{f.status:9} {f.messages:6} msgs  {f.path}")
            for p in f.problems[:10]:
                print(f"          line {p.line}: {p.error}" if p.line is not None else f"          {p.error}")
            if len(f.problems) > 10:
                print(f"          ... {len(f.problems) - 10} more problems (use --json)")
        totals = report.totals
        print("totals: " + ", ".join(f"{k}={v}" for k, v in totals.items()))
    return 1 if report.totals["failed"] else 0


def _status(settings: Settings, args: argparse.Namespace) -> int:
    from ultron.db import embedded
    from ultron.sdk import Ultron

    status = Ultron(settings).status()
    status["home"] = str(settings.home)
    status["inbox"] = [str(p) for p in settings.inbox]
    if settings.uses_embedded_database:
        status["embedded_server"] = embedded.server_status(settings.pgdata)
    if args.json:
        print(json.dumps(status, indent=2, default=str))
        return 0
    print(f"home:      {status['home']}")
    print(f"inbox:     {', '.join(status['inbox'])}")
    print(f"database:  {status['database']} (schema {status['schema_revision']})")
    print("tables:")
    for name, count in status["tables"].items():
        print(f"  {name:22} {count:>10}")
    print("pending:")
    for name, count in status["pending"].items():
        print(f"  {name:32} {count:>10}")
    return 0


def _db(settings: Settings, args: argparse.Namespace) -> int:
    from ultron.db import embedded
    from ultron.db.database import Database, resolve_urls

    if args.action in ("start", "url"):
        if settings.uses_embedded_database and args.action == "start":
            resolve_urls(settings, keep_running=True)
        db = Database.open(settings)
        print(db.urls.ultron if args.action == "url" else f"database ready: {db.urls.ultron}")
        return 0
    if not settings.uses_embedded_database:
        print("ULTRON_DATABASE_URL is set: the external server is not managed by ultron", file=sys.stderr)
        return 2
    if args.action == "stop":
        print("stopped" if embedded.stop_server(settings.pgdata) else "not running")
        return 0
    print(json.dumps(embedded.server_status(settings.pgdata), indent=2))
    return 0


def seed_examples(settings: Settings, examples_dir: Path = PROJECT_ROOT / "examples") -> list[Path]:
    """Copy the bundled example sessions into the first inbox, once per state directory."""
    inbox = settings.inbox[0]
    marker = inbox / SEEDED_MARKER
    if marker.exists() or not examples_dir.is_dir():
        return []
    target = inbox / EXAMPLES_AGENT
    target.mkdir(parents=True, exist_ok=True)
    copied = []
    for src in sorted(examples_dir.glob("*.jsonl")):
        dst = target / src.name
        if not dst.exists():
            shutil.copy2(src, dst)
            copied.append(dst)
    marker.write_text("examples copied on first start; delete this file to copy them again\n")
    return copied


def _dev(settings: Settings, args: argparse.Namespace) -> int:
    from ultron.db.database import Database

    host = args.host or settings.dagster_host
    port = args.port or settings.dagster_port
    db = Database.open(settings)  # starts the embedded server; this process keeps it up
    for inbox in settings.inbox:
        inbox.mkdir(parents=True, exist_ok=True)
    if not args.no_examples:
        copied = seed_examples(settings)
        if copied:
            print(f"ultron: copied {len(copied)} example sessions into {copied[0].parent}")

    dagster_home = settings.dagster_home
    dagster_home.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(PROJECT_ROOT / "dagster.yaml", dagster_home / "dagster.yaml")
    env = dict(os.environ)
    env.update(
        DAGSTER_HOME=str(dagster_home),
        ULTRON_HOME=str(settings.home),
        ULTRON_INBOX=os.pathsep.join(str(p) for p in settings.inbox),
        ULTRON_DAGSTER_PG_URL=db.urls.dagster,
    )
    if not settings.uses_embedded_database:
        env["ULTRON_DATABASE_URL"] = settings.database_url or ""
    workspace = PROJECT_ROOT / "workspace.yaml"
    target = ["-w", str(workspace)] if workspace.exists() else ["-m", "ultron_assets.definitions"]
    cmd = [sys.executable, "-m", "dagster", "dev", *target, "-h", host, "-p", str(port)]
    print(f"ultron: Dagster UI at http://{host}:{port}  (DAGSTER_HOME={dagster_home})", flush=True)
    children: list[subprocess.Popen] = []

    def forward(signum, _frame):  # let dagster dev shut its webserver and daemon down cleanly
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGINT)  # dagster dev shuts down cleanly on SIGINT only

    # Installed before the child starts: a shell's background job has SIGINT ignored,
    # and an ignored signal would be inherited by dagster dev, which then never stops.
    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)
    # Its own process group, so whatever it leaves behind (code servers) can be cleaned up.
    proc = subprocess.Popen(cmd, env=env, cwd=str(PROJECT_ROOT), start_new_session=True)
    children.append(proc)
    code = proc.wait()
    _stop_group(proc.pid)
    return code


def _stop_group(pgid: int, grace_seconds: float = 10.0) -> None:
    """Terminate what is left of a process group: SIGTERM, then SIGKILL after a grace period."""
    import time

    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace_seconds
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.2)


if __name__ == "__main__":
    sys.exit(main())
