"""ULTRON_EXECUTOR picks how runs execute their steps; Celery broker passwords stay out of the UI."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from resources.executors import build_executor, celery_executor_config
from ultron.settings import Settings, SettingsError

ROOT = Path(__file__).resolve().parents[2]


def test_in_process_is_the_default_and_each_executor_can_be_chosen():
    assert Settings.from_env({}).executor == "in_process"
    names = {value: build_executor(Settings.from_env({"ULTRON_EXECUTOR": value})).name
             for value in ("in_process", "multiprocess", " Celery ")}
    assert names == {"in_process": "in_process", "multiprocess": "multiprocess", " Celery ": "celery"}


def test_an_unknown_executor_is_refused_with_the_choices():
    with pytest.raises(SettingsError, match="in_process, multiprocess or celery"):
        Settings.from_env({"ULTRON_EXECUTOR": "dask"})


def test_celery_urls_default_to_a_local_redis_and_are_env_references_when_set():
    default = celery_executor_config(Settings.from_env({}), env={})
    assert default["broker"] == default["backend"] == "redis://127.0.0.1:6379/0"
    env = {"ULTRON_CELERY_BROKER_URL": "redis://:s3cret@broker:6379/0"}
    configured = celery_executor_config(Settings.from_env(env), env=env)
    assert configured["broker"] == {"env": "ULTRON_CELERY_BROKER_URL"}
    assert configured["backend"] == "redis://127.0.0.1:6379/0"


CHECK = """
import json
from dagster._serdes import serialize_value
from ultron_assets.definitions import defs
out = {}
for name in ("pipeline_job", "ingest_sessions", "maintenance_job"):
    job = defs.get_job_def(name)
    out[name] = {"executor": job.executor_def.name, "snapshot": serialize_value(job.get_job_snapshot()),
                 "default_config": json.dumps(job.run_config_schema.config_type.fields.get("execution").default_value
                                              if job.run_config_schema.config_type.fields.get("execution") else None,
                                              default=str)}
print(json.dumps(out))
"""


def test_a_broker_password_never_reaches_the_job_snapshot_or_run_config():
    env = {**os.environ, "ULTRON_EXECUTOR": "celery", "ULTRON_CELERY_BROKER_URL": "redis://:s3cret-pw@broker:6379/0",
           "ULTRON_CELERY_BACKEND_URL": "redis://:s3cret-pw@broker:6379/1"}
    done = subprocess.run([sys.executable, "-c", CHECK], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    jobs = json.loads(done.stdout.strip().splitlines()[-1])
    for name, job in jobs.items():
        assert job["executor"] == "celery", name
        assert "s3cret-pw" not in job["snapshot"] and "s3cret-pw" not in job["default_config"], name
