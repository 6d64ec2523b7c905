"""Celery settings of Ultron's workers, from the same ``ULTRON_*`` environment as the runs.

``celery -A dagster_celery.app worker`` builds its Celery app from a module of this name
when it is importable: put this directory on PYTHONPATH. The broker and backend URLs come
from ULTRON_CELERY_BROKER_URL / ULTRON_CELERY_BACKEND_URL (default redis://127.0.0.1:6379/0,
the same defaults the executor uses), so a password never has to be written to a file.
"""

from ultron.settings import Settings

_settings = Settings.from_env()

broker_url = _settings.celery_broker_url
result_backend = _settings.celery_backend_url
# One step at a time per worker process, and no second step prefetched behind a long one.
worker_prefetch_multiplier = 1
# Workers sit on the broker for hours between bursts: reconnect rather than exit.
broker_connection_retry_on_startup = True
