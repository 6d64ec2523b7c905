"""The maintenance sequence, written once.

The SDK's ``run_maintenance`` (and so the CLI's ``ultron maintenance``) runs these steps
in this order; the Dagster ``maintenance_job`` is built from the same list, one op per
step, and the sensor's batch job ``ingest_inbox`` from its first four. Work an LLM
outage left pending is picked up here: every step takes everything still pending.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from ultron.sdk import Ultron

#: everything pending; each item is its own transaction, so a big batch holds no long lock
BATCH = 100_000


@dataclass(frozen=True)
class Step:
    name: str                                   # also the Dagster op's name
    description: str
    run: Callable[["Ultron", int], Any]         # (client, batch size) -> the step's report
    summary: Callable[[Any], Any]               # the report as run_maintenance returns it
    key: str                                    # its key in run_maintenance's result


def _count(status: str) -> Callable[[list[Any]], int]:
    return lambda results: sum(1 for r in results if r.status == status)


def _redo_fallbacks(client: "Ultron", batch_size: int) -> list[Any]:
    from ultron.memory.redo import redo_fallbacks

    return redo_fallbacks(client.memory, batch_size)


def _redo_summary(results: list[Any]) -> dict[str, int]:
    return {"redone": sum(r.status == "redone" for r in results),
            "retyped": sum(r.retyped for r in results),
            "still_marked": sum(bool(r.still_marked) for r in results)}


def _index_owners(client: "Ultron", batch_size: int) -> dict[str, Any]:
    from ultron.memory.owner_indexes import refresh_owner_indexes

    return refresh_owner_indexes(client.db, client.settings)


def _consolidate(client: "Ultron", batch_size: int) -> dict[str, int] | None:
    if not client.settings.consolidate_enabled:
        return None
    return client.memory.consolidate(max_merges=1000)


STEPS: tuple[Step, ...] = (
    Step("refresh_sessions", "Re-ingest inbox files that changed or were never ingested (the sensor's safety net).",
         lambda c, n: c.ingestion.refresh(), lambda r: r.totals, "refreshed"),
    Step("segment_sessions", "Segment every session still pending (segmented=0).",
         lambda c, n: c.segment_pending_sessions(n), _count("segmented"), "segmented"),
    Step("label_segments", "Score every segment still unlabeled (labeled=0).",
         lambda c, n: c.label_pending_segments(n), _count("labeled"), "labeled"),
    Step("extract_memories", "Extract memories from every memory-eligible segment not yet extracted.",
         lambda c, n: c.extract_memories_from_segments(n), _count("extracted"), "extracted"),
    Step("redo_fallbacks", "Redo with the LLM what the rules did for memories during an outage (type, "
         "summaries, merged body); a mark stays until the LLM answers.", _redo_fallbacks, _redo_summary,
         "fallbacks_redone"),
    Step("rebalance_tiers", "Rebalance HOT/WARM/COLD tiers; archive stale COLD memories.",
         lambda c, n: c.run_tier_rebalance(), lambda r: r, "tiers"),
    Step("index_owners", "Give each agent with many memories (and the shared memories) an HNSW index of its own; "
         "drop those that shrank.", _index_owners, lambda r: r, "owner_indexes"),
    Step("cluster_memories", "Re-cluster active memories (HDBSCAN, stable ids, topics).",
         lambda c, n: c.clusters.run_clustering(), lambda r: r.to_dict(), "clusters"),
    Step("evolve_skills", "Crystallise ready clusters into skills; re-crystallise grown ones (new version if better).",
         lambda c, n: c.skills.run_skill_evolution(), lambda r: r.to_dict(), "skills"),
    Step("consolidate_memories", "Merge near-duplicate memories already in the store "
         "(only when ULTRON_CONSOLIDATE_ENABLED).", _consolidate, lambda r: r, "consolidation"),
    Step("purge_raw_archive", "Drop raw uploads older than ULTRON_RAW_ARCHIVE_RETENTION_DAYS.",
         lambda c, n: c.purge_raw_archive(), lambda r: r, "raw_archive_purged"),
)

#: the per-session part: what the sensor's batch job runs for a large sweep of new files
PIPELINE_STEPS: tuple[Step, ...] = STEPS[:4]


def run_maintenance(client: "Ultron", batch_size: int | None = None) -> dict[str, Any]:
    """Every step in order; returns each step's summary under its key."""
    n = BATCH if batch_size is None else batch_size
    return {step.key: step.summary(step.run(client, n)) for step in STEPS}
