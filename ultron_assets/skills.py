"""Skill hub: memories clustered by meaning (HDBSCAN, stable ids, topics), clusters
crystallised into versioned SKILL.md directories under ULTRON_HOME/skills."""

import dagster as dg

from resources.database import UltronResource
from resources.llm import LLMResource
from ultron_assets.automation import follow_upstream
from ultron_assets.memory import tiers
from ultron_assets.metadata import clusters_metadata, llm_metadata, skills_metadata
from ultron_assets.pools import STORE_POOL

@dg.asset(
    deps=[tiers],
    group_name="skill_hub",
    kinds={"postgres", "pgvector"},
    automation_condition=follow_upstream,
    pool=STORE_POOL,
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
        **llm_metadata(client.context.provider.usage, client.context.provider.name),
    })


@dg.asset(
    deps=[clusters],
    group_name="skill_hub",
    kinds={"postgres", "markdown"},
    automation_condition=follow_upstream,
    pool=STORE_POOL,
    description="Clusters with at least ULTRON_CRYSTALLIZATION_THRESHOLD memories crystallised into skills "
                "({slug}-{version}/SKILL.md + _meta.json); re-crystallised after ULTRON_RECRYSTALLIZATION_DELTA new "
                "members, published as a new minor version only when it scores better. A quality gate (structure, "
                "every step grounded in a member memory) guards publication.",
)
def skills(context: dg.AssetExecutionContext, ultron: UltronResource, llm: LLMResource) -> dg.MaterializeResult:
    client = ultron.client(llm)
    report = client.skills.run_skill_evolution().to_dict()
    context.log.info(f"skill evolution: { {k: v for k, v in report.items() if not isinstance(v, list)} }")
    for failure in report.get("failed") or []:
        context.log.warning(f"cluster {str(failure.get('cluster_id'))[:8]} not crystallised: {failure.get('reason')}")
    return dg.MaterializeResult(metadata={
        **skills_metadata(client, report),
        **llm_metadata(client.context.provider.usage, client.context.provider.name),
    })
