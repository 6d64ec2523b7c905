"""The maintenance schedule: every ULTRON_DECAY_INTERVAL_HOURS."""

from __future__ import annotations

import dagster as dg

from jobs.maintenance import maintenance_job
from ultron.settings import Settings


def interval_cron(hours: float) -> str:
    """A cron string for "every N hours".

    Cron cannot say "every 5 hours" across midnight; for periods that do not
    divide a day we run at the multiples of N within each day (0, 5, 10, 15, 20),
    which never runs less often than asked. Periods under an hour run every
    ``round(60*hours)`` minutes; whole days run at midnight every N days.
    """
    if hours < 1:
        minutes = max(1, round(hours * 60))
        return f"*/{minutes} * * * *"
    if hours >= 24 and hours % 24 == 0:
        days = int(hours // 24)
        return "0 0 * * *" if days == 1 else f"0 0 */{days} * *"
    step = int(round(hours))
    if step >= 24:
        return "0 0 * * *"
    if 24 % step == 0:
        return "0 * * * *" if step == 1 else f"0 */{step} * * *"
    return "0 " + ",".join(str(h) for h in range(0, 24, step)) + " * * *"


def build_maintenance_schedule(settings: Settings | None = None) -> dg.ScheduleDefinition:
    settings = settings or Settings.from_env()
    return dg.ScheduleDefinition(
        name="maintenance_schedule",
        job=maintenance_job,
        cron_schedule=interval_cron(settings.decay_interval_hours),
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description=f"Runs maintenance every {settings.decay_interval_hours:g} h (ULTRON_DECAY_INTERVAL_HOURS).",
    )
