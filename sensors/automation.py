"""The automation sensor that keeps the whole-store assets following their upstream.

Dagster's default automation sensor is STOPPED on a new deployment; this one is
declared RUNNING so the examples reach skills and an SFT export on first start.
"""

import dagster as dg


def build_automation_sensor() -> dg.AutomationConditionSensorDefinition:
    return dg.AutomationConditionSensorDefinition(
        "ultron_automation_sensor",
        target=dg.AssetSelection.groups("skill_hub") | dg.AssetSelection.assets("tiers", "sft_dataset"),
        default_status=dg.DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=30,
        description="Requests tiers, clusters, skills and sft_dataset once new memories or segments land.",
    )
