"""The executor every job of the code location uses, chosen by ULTRON_EXECUTOR.

``in_process`` stays the default: on a two-core machine a process per step (multiprocess)
pays torch and Presidio start-up for every step and was about three times slower. ``celery``
sends each step to Celery workers (deploy/celery/), so several machines or processes share
the per-session work of the sensor's runs, backfills and UI launches.

The broker and backend URLs reach the Celery executor as ``{"env": NAME}`` when the variable
is set, so a URL holding a password is resolved in the run worker and never lands in the job
snapshot, the run config or the UI; only the password-free default is written literally.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import dagster as dg

from ultron.settings import Settings

#: Celery settings the executor's side needs beyond the URLs: one task prefetched per worker
#: process, so a long step never holds a second one back from an idle worker.
CELERY_CONFIG_SOURCE: dict[str, Any] = {"worker_prefetch_multiplier": 1}


def _url(env: Mapping[str, str], name: str, default: str) -> str | dict[str, str]:
    return {"env": name} if env.get(name, "").strip() else default


def celery_executor_config(settings: Settings, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The celery executor's config: what `deploy/celery/dagster_celery_config.py` gives the workers."""
    env = os.environ if env is None else env
    return {
        "broker": _url(env, "ULTRON_CELERY_BROKER_URL", settings.celery_broker_url),
        "backend": _url(env, "ULTRON_CELERY_BACKEND_URL", settings.celery_backend_url),
        "config_source": dict(CELERY_CONFIG_SOURCE),
    }


def build_executor(settings: Settings) -> dg.ExecutorDefinition:
    if settings.executor == "multiprocess":
        return dg.multiprocess_executor
    if settings.executor == "celery":
        from dagster_celery import celery_executor

        return celery_executor.configured(celery_executor_config(settings), name="celery")
    return dg.in_process_executor
