"""The deployment files (deploy/) hold what they claim, checked as far as a machine without
Docker, Kubernetes or an image registry allows.

Run here: every YAML file parses; each Compose service's command and healthcheck exist (the
console script runs and knows every flag given); the environment Compose passes is what
ultron/settings.py reads; the Helm values use keys of the chart; each dagster.yaml loads into
a real instance on the embedded Postgres; and the Compose topology itself, a code server
(`dagster api grpc`), a webserver loading it through a grpc_server workspace and a daemon,
as separate processes, answering over HTTP. Not run: docker build, compose up, helm install.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
DOCKER = DEPLOY / "docker"
BIN = Path(sys.executable).parent
COMPOSE = yaml.safe_load((DOCKER / "compose.yaml").read_text())
ULTRON_SERVICES = ("usercode", "webserver", "daemon", "api", "celery-worker")
ASSETS = {"raw_sessions", "task_segments", "quality_metrics", "memories", "tiers", "clusters", "skills",
          "sft_dataset"}


def interpolate(text: str) -> str:
    """Compose's ${NAME:-default} / ${NAME:?error} / ${NAME}, as with an empty .env."""
    def one(m: re.Match) -> str:
        name, op, arg = m.group(1), m.group(2), m.group(3) or ""
        value = os.environ.get(name, "") if name.startswith("ULTRON_TEST_") else ""
        if value:
            return value
        return arg if op == ":-" else ("test-token" if op == ":?" else "")
    return re.sub(r"\$\{(\w+)(?:(:-|:\?)([^}]*))?\}", one, text).replace("$$", "$")


def help_command(argv: list[str]) -> list[str]:
    """The command's subcommand chain plus --help: options stay out, except celery's -A app."""
    out: list[str] = []
    it = iter(argv)
    for token in it:
        if token == "-A":
            out += [token, next(it)]
        elif token.startswith("-"):
            break
        else:
            out.append(token)
    return out + ["--help"]


def flags(argv: list[str]) -> set[str]:
    return {t.split("=", 1)[0] for t in argv if t.startswith("-") and t != "-A"}


def service_commands() -> list[list[str]]:
    commands = []
    for name in ULTRON_SERVICES:
        service = COMPOSE["services"][name]
        commands.append([interpolate(t) for t in service["command"]])
        test = service["healthcheck"]["test"]
        if test[0] == "CMD":
            commands.append(test[1:])
        elif test[0] == "CMD-SHELL":
            commands.append(interpolate(test[1]).split())
    return commands


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- files and commands


def test_every_yaml_file_under_deploy_is_well_formed():
    files = sorted([*DEPLOY.rglob("*.yaml"), *DEPLOY.rglob("*.yml")])
    assert {f.relative_to(DEPLOY).as_posix() for f in files} >= {
        "docker/compose.yaml", "docker/dagster.yaml", "docker/workspace.yaml", "helm/values.yaml"}
    for f in files:
        assert isinstance(yaml.safe_load(f.read_text()), dict), f


def test_compose_file_follows_the_compose_specification(tmp_path):
    """The Compose Specification's own JSON schema (vendored by check-jsonschema): unknown keys,
    a misspelt depends_on condition or a healthcheck of the wrong shape fail here."""
    check = [str(BIN / "check-jsonschema"), "--builtin-schema", "vendor.compose-spec"]
    out = subprocess.run([*check, str(DOCKER / "compose.yaml")], capture_output=True, text=True, timeout=60,
                         check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    broken = tmp_path / "compose.yaml"
    broken.write_text((DOCKER / "compose.yaml").read_text().replace("service_healthy", "healthy", 1))
    assert subprocess.run([*check, str(broken)], capture_output=True, timeout=60, check=False).returncode == 1


def test_compose_runs_every_service_from_the_ultron_image_with_healthchecks_and_ordering():
    services = COMPOSE["services"]
    assert set(services) == {"postgres", "redis", *ULTRON_SERVICES}
    assert services["postgres"]["image"].startswith("pgvector/pgvector:pg")
    for name in ULTRON_SERVICES:
        service = services[name]
        assert service["build"]["dockerfile"] == "deploy/docker/Dockerfile", name
        assert (DOCKER / service["build"]["context"]).resolve() == ROOT, name
        assert "healthcheck" in service, name
        assert services[name]["depends_on"]["postgres"]["condition"] == "service_healthy", name
    assert services["usercode"]["command"][:5] == ["dagster", "api", "grpc", "-m", "ultron_assets.definitions"]
    for name in ("webserver", "daemon"):
        assert services[name]["depends_on"]["usercode"]["condition"] == "service_healthy"
        assert "/opt/dagster/home/workspace.yaml" in services[name]["command"]
    # run monitoring checks run worker pids, which live in the code server's container
    assert services["daemon"]["pid"] == "service:usercode"
    assert services["celery-worker"]["depends_on"]["redis"]["condition"] == "service_healthy"
    workspace = yaml.safe_load((DOCKER / "workspace.yaml").read_text())
    grpc = workspace["load_from"][0]["grpc_server"]
    assert grpc["host"] == "usercode" and str(grpc["port"]) == services["usercode"]["command"][-1]


def test_every_compose_command_and_healthcheck_is_an_installed_command_that_knows_its_flags(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(DEPLOY / "celery"), "DAGSTER_HOME": str(tmp_path)}
    commands = service_commands()

    def run(argv: list[str]) -> tuple[list[str], subprocess.CompletedProcess]:
        exe = BIN / argv[0]
        assert exe.exists(), f"{argv[0]} is not an installed console script"
        return argv, subprocess.run([str(exe), *help_command(argv)[1:]], capture_output=True, text=True,
                                    env=env, timeout=120, check=False)

    with ThreadPoolExecutor(4) as pool:
        for argv, out in pool.map(run, commands):
            assert out.returncode == 0, (argv, out.stderr[-2000:])
            for flag in flags(argv):
                assert re.search(rf"(^|[\s,\[]){re.escape(flag)}\b", out.stdout, re.MULTILINE), (argv, flag)


def test_compose_passes_only_environment_that_ultron_reads():
    read = (ROOT / "ultron" / "settings.py").read_text() + "".join(
        p.read_text() for p in (ROOT / "resources").glob("*.py"))
    names = set()
    for name in ULTRON_SERVICES:
        env = COMPOSE["services"][name]["environment"]
        names |= {k for k in env if k.startswith("ULTRON_")}
    assert {"ULTRON_DATABASE_URL", "ULTRON_DAGSTER_DATABASE_URL", "ULTRON_HOME", "ULTRON_EXECUTOR",
            "ULTRON_CELERY_BROKER_URL", "ULTRON_CELERY_BACKEND_URL"} <= names
    assert not {n for n in names if f'"{n}"' not in read}, "variables nothing reads"
    assert "ULTRON_API_TOKEN" in COMPOSE["services"]["api"]["environment"]
    # deploy/docker/dagster.yaml names the Dagster storage by the setting Compose passes
    instance = yaml.safe_load((DOCKER / "dagster.yaml").read_text())
    assert instance["storage"]["custom"]["config"]["postgres_url"]["env"] == "ULTRON_DAGSTER_DATABASE_URL"
    # every variable the .env example sets is one compose.yaml uses
    text = (DOCKER / "compose.yaml").read_text()
    example = [line.split("=", 1)[0] for line in (DOCKER / ".env.example").read_text().splitlines()
               if line and not line.startswith("#")]
    assert example and not [n for n in example if "${" + n not in text]


def test_the_image_installs_cpu_torch_first_then_the_project_and_runs_the_code_server_as_a_user():
    dockerfile = (DOCKER / "Dockerfile").read_text()
    lines = [line.strip() for line in dockerfile.splitlines()]
    torch = next(i for i, line in enumerate(lines) if "torch==" in line and line.startswith("RUN pip install"))
    deps = next(i for i, line in enumerate(lines) if "pip install -r" in line)
    project = next(i for i, line in enumerate(lines) if line.startswith("RUN pip install --no-deps ."))
    assert torch < deps < project
    assert re.search(r"^FROM python:3\.11-slim", dockerfile, re.MULTILINE)
    assert "TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu" in dockerfile
    assert re.search(r"^USER ultron$", dockerfile, re.MULTILINE) and 'VOLUME ["/var/lib/ultron"]' in dockerfile
    cmd = json.loads(re.search(r"^CMD (.+)$", dockerfile, re.MULTILINE).group(1))
    assert cmd == COMPOSE["services"]["usercode"]["command"]
    # everything COPYed exists in the build context (the repository root) and is not ignored
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    for m in re.finditer(r"^COPY (?:--\S+ )*(.+) \S+$", dockerfile, re.MULTILINE):
        for src in m.group(1).split():
            assert (ROOT / src).exists(), src
            assert src.split("/")[0] not in ignored, src
    assert {".git", ".venv", ".ultron", "**/.env"} <= ignored
    # the dependency layer lists exactly pyproject's requirements, and the k8s extra for Helm
    out = subprocess.run([sys.executable, str(DOCKER / "requirements.py"), str(ROOT / "pyproject.toml"), "k8s"],
                         capture_output=True, text=True, check=True).stdout.split("\n")
    assert "dagster==1.13.27" in out and "dagster-k8s==0.29.27" in out and "dagster-celery==0.29.27" in out


# ---------------------------------------------------------------- Helm

#: Key paths of dagster/dagster chart 1.13.x values, from the chart's schema models
#: (helm/dagster/schema/schema/charts/*/subschema/*.py in dagster-io/dagster, 2025) and, for
#: runMonitoring / runRetries (free-form dicts in the schema), the keys its instance template
#: reads. A path ending in "*" takes anything below it (Kubernetes objects, env maps).
CHART_KEYS = """
global.postgresqlSecretName global.dagsterHome global.serviceAccountName global.celeryConfigSecretName
global.dagsterInstanceConfigMap generatePostgresqlPasswordSecret generateCeleryConfigSecret
postgresql.enabled postgresql.postgresqlHost postgresql.postgresqlUsername postgresql.postgresqlPassword
postgresql.postgresqlDatabase postgresql.postgresqlParams.* postgresql.postgresqlScheme postgresql.service.port
postgresql.image.repository postgresql.image.tag postgresql.image.pullPolicy
dagsterWebserver.replicaCount dagsterWebserver.image.* dagsterWebserver.nameOverride dagsterWebserver.pathPrefix
dagsterWebserver.service.* dagsterWebserver.workspace.enabled dagsterWebserver.workspace.servers.*
dagsterWebserver.workspace.externalConfigmap dagsterWebserver.env.* dagsterWebserver.envConfigMaps.*
dagsterWebserver.envSecrets.* dagsterWebserver.resources.* dagsterWebserver.nodeSelector.*
dagsterWebserver.affinity.* dagsterWebserver.tolerations.* dagsterWebserver.podSecurityContext.*
dagsterWebserver.securityContext.* dagsterWebserver.labels.* dagsterWebserver.annotations.*
dagsterWebserver.enableReadOnly dagsterWebserver.logLevel dagsterWebserver.dbStatementTimeout
dagster-user-deployments.enabled dagster-user-deployments.enableSubchart dagster-user-deployments.imagePullSecrets.*
dagster-user-deployments.deployments[].name dagster-user-deployments.deployments[].image.repository
dagster-user-deployments.deployments[].image.tag dagster-user-deployments.deployments[].image.pullPolicy
dagster-user-deployments.deployments[].port dagster-user-deployments.deployments[].dagsterApiGrpcArgs.*
dagster-user-deployments.deployments[].codeServerArgs.*
dagster-user-deployments.deployments[].includeConfigInLaunchedRuns.enabled
dagster-user-deployments.deployments[].env.* dagster-user-deployments.deployments[].envConfigMaps.*
dagster-user-deployments.deployments[].envSecrets.* dagster-user-deployments.deployments[].annotations.*
dagster-user-deployments.deployments[].nodeSelector.* dagster-user-deployments.deployments[].affinity.*
dagster-user-deployments.deployments[].tolerations.* dagster-user-deployments.deployments[].podSecurityContext.*
dagster-user-deployments.deployments[].securityContext.* dagster-user-deployments.deployments[].resources.*
dagster-user-deployments.deployments[].livenessProbe.* dagster-user-deployments.deployments[].readinessProbe.*
dagster-user-deployments.deployments[].startupProbe.* dagster-user-deployments.deployments[].labels.*
dagster-user-deployments.deployments[].volumeMounts.* dagster-user-deployments.deployments[].volumes.*
dagster-user-deployments.deployments[].schedulerName
runLauncher.type runLauncher.config.k8sRunLauncher.image.* runLauncher.config.k8sRunLauncher.imagePullPolicy
runLauncher.config.k8sRunLauncher.jobNamespace runLauncher.config.k8sRunLauncher.loadInclusterConfig
runLauncher.config.k8sRunLauncher.kubeconfigFile runLauncher.config.k8sRunLauncher.envConfigMaps.*
runLauncher.config.k8sRunLauncher.envSecrets.* runLauncher.config.k8sRunLauncher.envVars.*
runLauncher.config.k8sRunLauncher.volumeMounts.* runLauncher.config.k8sRunLauncher.volumes.*
runLauncher.config.k8sRunLauncher.labels.* runLauncher.config.k8sRunLauncher.failPodOnRunFailure
runLauncher.config.k8sRunLauncher.resources.* runLauncher.config.k8sRunLauncher.schedulerName
runLauncher.config.k8sRunLauncher.securityContext.* runLauncher.config.k8sRunLauncher.runK8sConfig.*
dagsterDaemon.enabled dagsterDaemon.image.* dagsterDaemon.heartbeatTolerance dagsterDaemon.env.*
dagsterDaemon.envConfigMaps.* dagsterDaemon.envSecrets.* dagsterDaemon.resources.*
dagsterDaemon.runCoordinator.enabled dagsterDaemon.runCoordinator.type
dagsterDaemon.runCoordinator.config.queuedRunCoordinator
dagsterDaemon.runCoordinator.config.queuedRunCoordinator.maxConcurrentRuns
dagsterDaemon.runCoordinator.config.queuedRunCoordinator.tagConcurrencyLimits.*
dagsterDaemon.runCoordinator.config.queuedRunCoordinator.dequeueIntervalSeconds
dagsterDaemon.runMonitoring.enabled dagsterDaemon.runMonitoring.startTimeoutSeconds
dagsterDaemon.runMonitoring.cancelTimeoutSeconds dagsterDaemon.runMonitoring.pollIntervalSeconds
dagsterDaemon.runMonitoring.maxResumeRunAttempts dagsterDaemon.runMonitoring.freeSlotsAfterRunEndSeconds
dagsterDaemon.runRetries.enabled dagsterDaemon.runRetries.maxRetries dagsterDaemon.runRetries.retryOnAssetOrOpFailure
dagsterDaemon.sensors.useThreads dagsterDaemon.sensors.numWorkers
concurrency.enabled concurrency.pools.defaultLimit concurrency.pools.granularity
concurrency.pools.opGranularityRunBuffer concurrency.runs.maxConcurrentRuns concurrency.runs.tagConcurrencyLimits.*
retention.enabled retention.sensor.purgeAfterDays retention.sensor.purgeAfterDays.skipped
retention.sensor.purgeAfterDays.success retention.sensor.purgeAfterDays.failure retention.sensor.purgeAfterDays.started
retention.schedule.purgeAfterDays retention.schedule.purgeAfterDays.skipped retention.schedule.purgeAfterDays.success
retention.schedule.purgeAfterDays.failure retention.schedule.purgeAfterDays.started
telemetry.enabled computeLogManager.type computeLogManager.config.* additionalInstanceConfig.*
""".split()


def key_paths(value: Any, prefix: str = "") -> Iterator[str]:
    if isinstance(value, dict):
        for key, sub in value.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            yield path
            yield from key_paths(sub, path)
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, dict):
                yield from key_paths(item, prefix + "[]")


def chart_knows(path: str) -> bool:
    for known in CHART_KEYS:
        if known.endswith(".*"):
            base = known[:-2]
            if path == base or path.startswith((base + ".", base + "[]")):
                return True
        elif path == known or known.startswith((path + ".", path + "[]")):
            return True
    return False


def test_helm_values_use_chart_keys_and_serve_ultron_assets_with_the_k8s_run_launcher():
    values = yaml.safe_load((DEPLOY / "helm" / "values.yaml").read_text())
    unknown = [p for p in key_paths(values) if not chart_knows(p)]
    assert not unknown, f"keys the dagster chart does not have: {unknown}"
    assert values["runLauncher"]["type"] == "K8sRunLauncher"
    assert values["postgresql"]["enabled"] is False and values["postgresql"]["postgresqlHost"]
    (deployment,) = values["dagster-user-deployments"]["deployments"]
    assert deployment["dagsterApiGrpcArgs"] == ["-m", "ultron_assets.definitions"]
    assert deployment["env"]["ULTRON_HOME"] == "/var/lib/ultron"
    assert {"name": "ultron-env"} in deployment["envSecrets"]
    # the chart refuses a run limit in both places
    assert "maxConcurrentRuns" not in values["dagsterDaemon"]["runCoordinator"]["config"]["queuedRunCoordinator"]
    assert values["concurrency"]["pools"] == {"defaultLimit": 1, "granularity": "run"}
    # the key check itself rejects a misspelt key
    assert not chart_knows("runLauncher.config.k8sRunLauncher.jobNameSpace")
    assert not chart_knows("dagster-user-deployments.deployments[].grpcArgs")


# ---------------------------------------------------------------- instances on Postgres


@pytest.fixture
def new_database(db) -> Iterator[Any]:
    """Creates databases on the test session's server (embedded or external); all dropped afterwards."""
    import sqlalchemy as sa

    admin = sa.make_url(db.urls.dagster)
    engine = sa.create_engine(admin, isolation_level="AUTOCOMMIT")
    names: list[str] = []

    def create(name: str | None = None) -> str:
        names.append(name or f"deploy_{uuid.uuid4().hex[:8]}")
        with engine.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{names[-1]}"'))
        return admin.set(database=names[-1]).render_as_string(hide_password=False)

    yield create
    with engine.connect() as conn:
        for name in names:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    engine.dispose()


@pytest.fixture
def fresh_database(new_database) -> str:
    return new_database()


def test_the_postgres_init_script_creates_dagsters_database_and_pgvector(new_database, tmp_path):
    """The script as the postgres image runs it (psql, stop on the first error), on databases
    renamed so that it cannot touch the test server's own."""
    import sqlalchemy as sa

    psql = shutil.which("psql")
    if psql is None:
        pytest.skip("psql is not installed")
    suffix = uuid.uuid4().hex[:8]
    ultron_url = sa.make_url(new_database(f"initdb_ultron_{suffix}"))
    script = (DOCKER / "initdb" / "10-dagster-database.sql").read_text()
    assert "CREATE DATABASE dagster;" in script and "\\connect ultron" in script
    renamed = tmp_path / "init.sql"
    renamed.write_text(script.replace("CREATE DATABASE dagster;", f"CREATE DATABASE initdb_dagster_{suffix};")
                       .replace("\\connect ultron", f"\\connect initdb_ultron_{suffix}"))
    host = ultron_url.host or ultron_url.query.get("host")  # a unix socket directory on the embedded server
    env = {**os.environ, "PGHOST": str(host), "PGPORT": str(ultron_url.port or 5432), "PGUSER": ultron_url.username,
           "PGPASSWORD": ultron_url.password or "", "PGDATABASE": ultron_url.database}
    out = subprocess.run([psql, "-v", "ON_ERROR_STOP=1", "--no-psqlrc", "-f", str(renamed)], capture_output=True,
                         text=True, env=env, timeout=60, check=False)
    # the script's own database is dropped here; the factory drops the other
    engine = sa.create_engine(ultron_url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            created = conn.execute(sa.text("SELECT 1 FROM pg_database WHERE datname = :n"),
                                   {"n": f"initdb_dagster_{suffix}"}).first()
            if created:
                conn.execute(sa.text(f'DROP DATABASE "initdb_dagster_{suffix}" WITH (FORCE)'))
            vector = conn.execute(sa.text("SELECT 1 FROM pg_extension WHERE extname = 'vector'")).first()
    finally:
        engine.dispose()
    assert out.returncode == 0, out.stderr
    assert created and vector


DAGSTER_YAMLS = sorted(p.relative_to(ROOT).as_posix() for p in [ROOT / "dagster.yaml", *DEPLOY.rglob("dagster.yaml")])


@pytest.mark.parametrize("relpath", DAGSTER_YAMLS)
def test_each_dagster_yaml_loads_into_an_instance_on_postgres(relpath, fresh_database, db, tmp_path, monkeypatch):
    """Every variant uses only classes installed with the project (storage and launcher from
    resources/, dagster-postgres), so each loads for real here; none needs dagster-k8s or
    dagster-docker (the Helm chart renders its own instance)."""
    import dagster as dg
    from dagster_postgres import PostgresEventLogStorage, PostgresRunStorage

    from resources.run_launcher import UltronRunLauncher

    for name in ("ULTRON_DAGSTER_PG_URL", "ULTRON_DAGSTER_DATABASE_URL"):
        monkeypatch.setenv(name, fresh_database)
    monkeypatch.setenv("ULTRON_DATABASE_URL", db.urls.ultron)
    shutil.copyfile(ROOT / relpath, tmp_path / "dagster.yaml")
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        assert isinstance(instance.run_storage, PostgresRunStorage)
        assert isinstance(instance.event_log_storage, PostgresEventLogStorage)
        assert isinstance(instance.run_launcher, UltronRunLauncher)
        assert instance.run_monitoring_enabled and instance.run_retries_enabled
        assert instance.get_concurrency_config().pool_config.default_pool_limit == 1
        run = instance.create_run_for_job(dg.GraphDefinition("noop").to_job())
        assert instance.get_run_by_id(run.run_id) is not None  # written to and read from Postgres
    import sqlalchemy as sa

    engine = sa.create_engine(fresh_database)
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM runs")).scalar() == 1
    engine.dispose()


# ---------------------------------------------------------------- the topology


class Processes:
    def __init__(self, env: dict[str, str], cwd: Path, logs: Path) -> None:
        self.env, self.cwd, self.logs, self.procs = env, cwd, logs, {}

    def start(self, name: str, argv: list[str], **extra_env: str) -> subprocess.Popen:
        exe = argv[0] if os.path.isabs(argv[0]) else str(BIN / argv[0])
        with open(self.logs / f"{name}.log", "wb") as log:
            self.procs[name] = proc = subprocess.Popen([exe, *argv[1:]], env={**self.env, **extra_env},
                                                       cwd=self.cwd, stdout=log, stderr=subprocess.STDOUT,
                                                       start_new_session=True)
        return proc

    def log(self, name: str) -> str:
        return (self.logs / f"{name}.log").read_text(errors="replace")[-3000:]

    def alive(self, name: str) -> None:
        assert self.procs[name].poll() is None, f"{name} exited:\n{self.log(name)}"

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for proc in self.procs.values():
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)


def wait_for(check, what: str, timeout: float, procs: Processes, name: str):
    deadline = time.monotonic() + timeout
    while True:
        procs.alive(name)
        try:
            result = check()
            if result:
                return result
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not ready after {timeout}s:\n{procs.log(name)}")
        time.sleep(0.5)


def graphql(port: int, query: str, variables: dict | None = None) -> dict:
    payload = {"query": query, "variables": variables or {}}
    request = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", data=json.dumps(payload).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as resp:
        body = json.load(resp)
    assert "errors" not in body, body
    return body["data"]


LOCATIONS = """{ workspaceOrError { __typename ... on Workspace { locationEntries { name loadStatus
  locationOrLoadError { __typename ... on PythonError { message }
    ... on RepositoryLocation { repositories { name jobs { name } assetNodes { assetKey { path } } } } } } } } }"""
DAEMONS = "{ instance { daemonHealth { allDaemonStatuses { daemonType healthy required } } } }"
LAUNCH = """mutation($p: ExecutionParams!) { launchRun(executionParams: $p) { __typename
  ... on LaunchRunSuccess { run { runId } } ... on PythonError { message }
  ... on RunConfigValidationInvalid { errors { message } } ... on InvalidSubsetError { message } } }"""
RUN = "query($id: ID!) { runOrError(runId: $id) { __typename ... on Run { status } } }"


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed")
def test_the_compose_topology_as_processes_launches_a_run_whose_step_runs_on_a_celery_worker(
        db, new_database, tmp_path):
    """deploy/docker's topology with its own dagster.yaml, workspace.yaml and commands, each a
    process of its own: Redis, `dagster api grpc` serving the definitions, a Celery worker,
    dagster-webserver loading the code server through the grpc_server entry, dagster-daemon.
    A run launched over GraphQL (as from the UI) is queued, dequeued by the daemon, started
    by the code server through the launcher, and its step executed by the Celery worker.
    Ultron's store and Dagster's storage are new databases; the inbox is empty, so no sensor
    starts a run of its own."""
    import sqlalchemy as sa

    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copyfile(DOCKER / "dagster.yaml", home / "dagster.yaml")
    grpc_port, web_port, redis_port = free_port(), free_port(), free_port()
    workspace = yaml.safe_load((DOCKER / "workspace.yaml").read_text())
    workspace["load_from"][0]["grpc_server"].update(host="127.0.0.1", port=grpc_port)
    (home / "workspace.yaml").write_text(yaml.safe_dump(workspace))
    ultron_home = tmp_path / "ultron_home"
    (ultron_home / "inbox").mkdir(parents=True)
    ultron_url = new_database()
    compose_env = COMPOSE["services"]["usercode"]["environment"]
    env = {**os.environ, "DAGSTER_HOME": str(home), "ULTRON_HOME": str(ultron_home),
           "ULTRON_DATABASE_URL": ultron_url, "ULTRON_DAGSTER_DATABASE_URL": new_database(),
           "ULTRON_EXECUTOR": interpolate(compose_env["ULTRON_EXECUTOR"]),
           "ULTRON_CELERY_BROKER_URL": f"redis://127.0.0.1:{redis_port}/0",
           "ULTRON_CELERY_BACKEND_URL": f"redis://127.0.0.1:{redis_port}/1"}
    assert env["ULTRON_EXECUTOR"] == "celery"
    env.pop("ULTRON_DAGSTER_PG_URL", None)
    procs = Processes(env, tmp_path, tmp_path)  # cwd outside the repository: the installed package serves
    try:
        procs.start("redis", [shutil.which("redis-server"), "--port", str(redis_port), "--bind", "127.0.0.1",
                              "--save", "", "--appendonly", "no"])
        procs.start("usercode", ["dagster", "api", "grpc", "-m", "ultron_assets.definitions",
                                 "-h", "127.0.0.1", "-p", str(grpc_port)])
        worker = [interpolate(t) for t in COMPOSE["services"]["celery-worker"]["command"]]
        procs.start("celery-worker", [*worker, "-n", "deploytest@%h", "--without-mingle", "--without-gossip"],
                    PYTHONPATH=str(DEPLOY / "celery"))

        def grpc_up() -> bool:
            with socket.create_connection(("127.0.0.1", grpc_port), timeout=1):
                return True
        wait_for(grpc_up, "code server", 90, procs, "usercode")
        workspace_file = str(home / "workspace.yaml")
        procs.start("webserver", ["dagster-webserver", "-h", "127.0.0.1", "-p", str(web_port), "-w", workspace_file])
        procs.start("daemon", ["dagster-daemon", "run", "-w", workspace_file])

        def server_info() -> bool:
            with urllib.request.urlopen(f"http://127.0.0.1:{web_port}/server_info", timeout=2) as resp:
                return resp.status == 200
        wait_for(server_info, "webserver", 90, procs, "webserver")

        (entry,) = graphql(web_port, LOCATIONS)["workspaceOrError"]["locationEntries"]
        assert entry["name"] == "ultron" and entry["loadStatus"] == "LOADED", entry
        location = entry["locationOrLoadError"]
        assert location["__typename"] == "RepositoryLocation", location
        (repo,) = location["repositories"]
        assets = {"/".join(node["assetKey"]["path"]) for node in repo["assetNodes"]}
        jobs = {job["name"] for job in repo["jobs"]}
        assert ASSETS <= assets, assets
        assert {"ingest_sessions", "maintenance_job"} <= jobs, jobs

        def daemons_healthy() -> bool:
            statuses = graphql(web_port, DAEMONS)["instance"]["daemonHealth"]["allDaemonStatuses"]
            healthy = {s["daemonType"] for s in statuses if s["healthy"]}
            return {"SENSOR", "SCHEDULER", "QUEUED_RUN_COORDINATOR", "MONITORING"} <= healthy
        wait_for(daemons_healthy, "daemon heartbeats", 60, procs, "daemon")

        params = {"selector": {"repositoryLocationName": "ultron", "repositoryName": repo["name"],
                               "jobName": "__ASSET_JOB", "assetSelection": [{"path": ["tiers"]}]},
                  "runConfigData": {}}
        launched = graphql(web_port, LAUNCH, {"p": params})["launchRun"]
        assert launched["__typename"] == "LaunchRunSuccess", launched
        run_id = launched["run"]["runId"]

        def finished() -> str | None:
            procs.alive("usercode")
            procs.alive("celery-worker")
            status = graphql(web_port, RUN, {"id": run_id})["runOrError"]["status"]
            return status if status in ("SUCCESS", "FAILURE", "CANCELED") else None
        assert wait_for(finished, "the run", 120, procs, "daemon") == "SUCCESS", procs.log("usercode")
        # the step ran on the Celery worker, and wrote to Ultron's store through the run's settings
        wait_for(lambda: "succeeded in" in procs.log("celery-worker"), "the worker's task", 10, procs,
                 "celery-worker")
        engine = sa.create_engine(ultron_url)
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT count(*) FROM ultron_alembic_version")).scalar() == 1
        engine.dispose()
    finally:
        procs.stop()
