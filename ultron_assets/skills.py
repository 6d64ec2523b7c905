"""skills: clusters crystallised into versioned SKILL.md directories under ULTRON_HOME/skills."""

import dagster as dg

from resources.database import UltronResource
from resources.llm import LLMResource
from ultron_assets.automation import follow_upstream
from ultron_assets.clusters import clusters
from ultron_assets.trajectory import llm_metadata

PREVIEWS = 5  # SKILL.md previews per materialisation (each is a markdown metadata entry)


def skills_metadata(client, report: dict) -> dict:
    """Shared by the asset and the maintenance job's skill-evolution op: counts, the
    current skills, and each newly published SKILL.md rendered as markdown."""
    current = client.skills.list_skills()
    meta: dict = {k: v for k, v in report.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    meta["current_skills"] = dg.MetadataValue.md(
        "| skill | version | memories | score |\n|---|---|---:|---:|\n" + "\n".join(
            f"| {s['slug']} | {s['version']} | {len(s.get('memory_ids') or [])} | {float(s.get('score') or 0):.2f} |"
            for s in current[:100]) if current else "(no skills yet)")
    published = report.get("published") or []
    for i, item in enumerate(published[:PREVIEWS]):  # each entry carries the SKILL.md it published
        meta[f"preview_{i + 1}_{item['slug']}"] = dg.MetadataValue.md(item["skill_md"])
    if published and published[0].get("path"):
        meta["first_published_path"] = dg.MetadataValue.path(published[0]["path"])
    meta["skills_dir"] = dg.MetadataValue.path(str(client.settings.skills_dir))
    return meta


@dg.asset(
    deps=[clusters],
    group_name="skill_hub",
    kinds={"postgres", "markdown"},
    automation_condition=follow_upstream,
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
        **llm_metadata(client.memory.provider.usage, client.memory.provider.name),
    })
