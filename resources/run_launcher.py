"""Dagster's default run launcher, plus the worker health check that run monitoring needs.

The default launcher cannot tell whether a run worker is alive, so run monitoring only
times out runs stuck STARTING or CANCELING: a worker killed mid-run (OOM, kill -9, a
reboot) left its run STARTED forever, holding a run slot and the ``ultron_store`` pool.
Every event a run worker writes records its pid, and Ultron's run workers run on the
host of the daemon that monitors them (``ultron dev``), so the check looks that pid up.
"""

import os

import dagster as dg
from dagster._core.launcher import CheckRunHealthResult, DefaultRunLauncher, WorkerStatus
from dagster._core.storage.dagster_run import DagsterRunStatus


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def run_worker_pid(instance: dg.DagsterInstance, run_id: str) -> int | None:
    """The pid of the process that last started (or resumed) the run."""
    records = instance.get_records_for_run(
        run_id, of_type=dg.DagsterEventType.RUN_START, ascending=False, limit=1
    ).records
    event = records[0].event_log_entry.dagster_event if records else None
    return event.pid if event is not None else None


class UltronRunLauncher(DefaultRunLauncher):
    @property
    def supports_check_run_worker_health(self) -> bool:
        return True

    def check_run_worker_health(self, run: dg.DagsterRun) -> CheckRunHealthResult:
        pid = run_worker_pid(self._instance, run.run_id)
        if pid is None:
            # Nothing to check yet: the start timeout covers a worker that never started.
            return CheckRunHealthResult(WorkerStatus.RUNNING, "run worker pid not recorded yet")
        if pid_alive(pid):
            return CheckRunHealthResult(WorkerStatus.RUNNING, f"run worker pid {pid} is alive",
                                        run_worker_id=str(pid))
        # The worker may have finished between the monitor's listing and this check.
        latest = self._instance.get_run_by_id(run.run_id)
        if latest is not None and latest.status != DagsterRunStatus.STARTED:
            return CheckRunHealthResult(WorkerStatus.SUCCESS, f"run is {latest.status.value}",
                                        run_worker_id=str(pid))
        return CheckRunHealthResult(WorkerStatus.FAILED, f"run worker pid {pid} is gone",
                                    run_worker_id=str(pid))
