"""Run ``pipeline_job`` once in this process, as a backfill run over a partition range does.

``python -m jobs.run_range '<json spec>'``: the code location from its module (what Celery
workers import too), the instance from DAGSTER_HOME, the range by tags. Prints one JSON line:
the run's outcome, which Celery workers took its steps, and the numbers each materialisation
reported. The Celery end-to-end test and ``benchmarks/throughput.py`` drive runs with it.
Spec keys: ``add_partitions`` (session keys to register, then exit), ``assets``, ``range``
([first, last] partition key), ``root`` (the project directory).
"""

import json
import sys

import dagster as dg
from dagster._core.definitions.reconstruct import ReconstructableRepository
from dagster._core.events import DagsterEventType


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0])
    with dg.DagsterInstance.get() as instance:
        if spec.get("add_partitions"):
            instance.add_dynamic_partitions("session_files", spec["add_partitions"])
            print(json.dumps({"added": len(spec["add_partitions"])}))
            return 0
        repo = ReconstructableRepository.for_module("ultron_assets.definitions", "defs",
                                                    working_directory=spec["root"])
        tags = {}
        if spec.get("range"):
            tags = {"dagster/asset_partition_range_start": spec["range"][0],
                    "dagster/asset_partition_range_end": spec["range"][1]}
        result = dg.execute_job(repo.get_reconstructable_job("pipeline_job"), instance, tags=tags,
                                asset_selection=[dg.AssetKey(a) for a in spec["assets"]])
        workers, materialized, steps_on_workers = set(), [], 0
        for record in instance.all_logs(result.run_id):
            event = record.dagster_event
            if event is None:
                continue
            if (event.event_type == DagsterEventType.ENGINE_EVENT
                    and "Celery worker" in event.engine_event_data.metadata):
                workers.add(event.engine_event_data.metadata["Celery worker"].value)
                steps_on_workers += 1
            if event.event_type == DagsterEventType.ASSET_MATERIALIZATION:
                mat = event.step_materialization_data.materialization
                if any(m["asset"] == mat.asset_key.to_user_string() for m in materialized):
                    continue  # a range run records one materialisation per partition, each with the range's totals
                materialized.append({"asset": mat.asset_key.to_user_string(), "metadata": {
                    k: v.value for k, v in mat.metadata.items() if isinstance(v.value, (int, float))}})
        print(json.dumps({"run_id": result.run_id, "success": result.success, "workers": sorted(workers),
                          "steps_on_workers": steps_on_workers,
                          "executor": result.job_def.executor_def.name, "materialized": materialized}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
