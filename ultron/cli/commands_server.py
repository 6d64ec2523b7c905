"""The commands that run servers: ``dev`` (embedded database, Dagster UI and daemon, and
the HTTP API beside them), ``serve`` (the HTTP API alone) and ``db`` (the embedded
PostgreSQL server)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Callable

from ultron.settings import Settings

PROJECT_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES_AGENT = "examples"
SEEDED_MARKER = ".examples-seeded"
#: what the marker file says (its presence is what counts).
SEEDED_NOTE = "examples copied on first start; delete this file to copy them again\n"


def _serve(settings: Settings, args: argparse.Namespace) -> int:
    from ultron.api.server import serve

    code = serve(settings, host=args.host, port=args.port)
    return code if isinstance(code, int) else 0


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
    marker.write_text(SEEDED_NOTE)
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
    # `dagster dev` itself warns that it is superseded by `dg dev`, which needs a dg project
    # layout this one does not use: nothing a user of `ultron dev` can act on.
    env["PYTHONWARNINGS"] = ",".join(filter(None, [os.environ.get("PYTHONWARNINGS"),
                                                   "ignore:Function `dev_command` is superseded"]))
    workspace = PROJECT_ROOT / "workspace.yaml"
    target = ["-w", str(workspace)] if workspace.exists() else ["-m", "ultron_assets.definitions"]
    cmd = [sys.executable, "-m", "dagster", "dev", *target, "-h", host, "-p", str(port)]
    print(f"ultron: Dagster UI at http://{host}:{port}  (DAGSTER_HOME={dagster_home})", flush=True)
    children: list[subprocess.Popen] = []
    api_cmd = None if args.no_api else _api_command(settings)

    def forward(signum, _frame):  # let dagster dev shut its webserver and daemon down cleanly
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGINT)  # dagster dev shuts down cleanly on SIGINT only

    # Installed before the child starts: a shell's background job has SIGINT ignored,
    # and an ignored signal would be inherited by dagster dev, which then never stops.
    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)
    # Its own process group, so whatever it leaves behind (code servers) can be cleaned up.
    # Run from DAGSTER_HOME: started in the project, dagster dev sees the project's own
    # dagster.yaml beside a different DAGSTER_HOME and warns that it "will not be used" (the
    # copy in DAGSTER_HOME is the one in use, and the same file).
    proc = subprocess.Popen(cmd, env=env, cwd=str(dagster_home), start_new_session=True)
    children.append(proc)
    api = subprocess.Popen(api_cmd, env=env, cwd=str(PROJECT_ROOT), start_new_session=True) if api_cmd else None
    if api is not None:
        children.append(api)
    code = proc.wait()
    if api is not None:
        if api.poll() is None:
            api.send_signal(signal.SIGINT)
        try:
            api.wait(timeout=15)
        except subprocess.TimeoutExpired:
            pass
        _stop_group(api.pid)
    _stop_group(proc.pid)
    return code


def _api_command(settings: Settings) -> list[str] | None:
    """The HTTP API beside the UI, so agents can reach the same store; None (with the reason
    printed) when it cannot start, e.g. a non-loopback ULTRON_API_HOST without a token."""
    from ultron.api.auth import api_token

    try:
        api_token(settings, settings.api_host)  # creates $ULTRON_HOME/api_token on loopback
    except Exception as exc:  # noqa: BLE001 - the UI still starts; say why the API does not
        print(f"ultron: HTTP API not started: {exc}", file=sys.stderr)
        return None
    where = "ULTRON_API_TOKEN" if settings.api_token else str(settings.home / "api_token")
    print(f"ultron: HTTP API at http://{settings.api_host}:{settings.api_port}  (bearer token: {where})",
          flush=True)
    print(f"ultron: memory browser at http://{settings.api_host}:{settings.api_port}/ui  (sign in with that token)",
          flush=True)
    return [sys.executable, "-m", "ultron.api", "--host", settings.api_host, "--port", str(settings.api_port)]


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


COMMANDS: dict[str, Callable[[Settings, argparse.Namespace], int]] = {"dev": _dev, "serve": _serve, "db": _db}
