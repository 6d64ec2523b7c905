"""clusters: active memories grouped by meaning (HDBSCAN), with stable ids and topics."""

import dagster as dg

from resources.database import UltronResource
from resources.llm import LLMResource
from ultron_assets.automation import follow_upstream
from ultron_assets.memories import tiers
from ultron_assets.trajectory import llm_metadata

CLUSTER_SCHEMA = dg.TableSchema(columns=[
    dg.TableColumn("cluster", "string"), dg.TableColumn("topic", "string"), dg.TableColumn("size", "int"),
    dg.TableColumn("skill", "string"),
])


def size_chart(rows: list[dict]) -> str:
    if not rows:
        return "(no clusters yet)"
    top = max(r["size"] for r in rows) or 1
    lines = [f"| {r['topic'][:60] or '(untitled)'} | {r['size']} | {'█' * max(1, round(30 * r['size'] / top))} |"
             for r in rows[:40]]
    return "| topic | memories | |\n|---|---:|---|\n" + "\n".join(lines)


def clusters_metadata(report: dict, rows: list[dict]) -> dict:
    """Shared by the asset and the maintenance job's clustering op."""
    rows = sorted(rows, key=lambda r: (-r["size"], r["id"]))
    return {
        **{k: v for k, v in report.items() if isinstance(v, (int, float)) and not isinstance(v, bool)},
        "sizes": dg.MetadataValue.md(size_chart(rows)),
        "clusters_table": dg.MetadataValue.table(
            [dg.TableRecord({"cluster": r["id"][:8], "topic": (r["topic"] or "")[:120], "size": r["size"],
                             "skill": r.get("skill_slug") or ""}) for r in rows[:200]],
            schema=CLUSTER_SCHEMA),
    }


@dg.asset(
    deps=[tiers],
    group_name="skill_hub",
    kinds={"postgres", "pgvector"},
    automation_condition=follow_upstream,
    description="Active memories clustered with HDBSCAN; each new cluster keeps the id of the previous cluster it "
                "overlaps most, so skills keep their cluster. Topics come from the LLM, or top terms offline. "
                "Between runs, uploads join the nearest centroid (cosine >= ULTRON_CLUSTER_SIMILARITY_THRESHOLD).",
)
def clusters(context: dg.AssetExecutionContext, ultron: UltronResource, llm: LLMResource) -> dg.MaterializeResult:
    client = ultron.client(llm)
    report = client.clusters.run_clustering().to_dict()
    context.log.info(f"clustering: { {k: v for k, v in report.items() if not isinstance(v, list)} }")
    return dg.MaterializeResult(metadata={
        **clusters_metadata(report, client.clusters.list_clusters()),
        **llm_metadata(client.memory.provider.usage, client.memory.provider.name),
    })
