"""How the pipeline's results look in the Dagster UI: shared by the assets and the
maintenance job's steps, so a result reads the same whichever ran it."""

import dagster as dg

from ultron.llm.usage import LLMUsage

SEGMENT_SCHEMA = dg.TableSchema(columns=[
    dg.TableColumn("index", "int"), dg.TableColumn("lines", "string"), dg.TableColumn("topic", "string"),
    dg.TableColumn("fingerprint", "string"), dg.TableColumn("labeled", "bool"), dg.TableColumn("score", "float"),
])


def llm_metadata(usage: LLMUsage, provider: str) -> dict:
    return {
        "llm_provider": provider,
        "llm_calls": usage.calls,
        "llm_prompt_tokens": usage.prompt_tokens,
        "llm_completion_tokens": usage.completion_tokens,
        "llm_retries": usage.retries,
        "llm_failures": usage.failures,
        "llm_fallbacks": usage.fallbacks,
        **({"llm_errors": dg.MetadataValue.json(usage.errors)} if usage.errors else {}),
    }


def segments_table(rows) -> dg.MetadataValue:
    records = []
    for r in rows:
        m = r.metrics
        records.append(dg.TableRecord({
            "index": r.segment_index, "lines": f"{r.start_line}-{r.end_line}", "topic": (r.topic or "")[:120],
            "fingerprint": r.fingerprint, "labeled": bool(r.labeled),
            "score": float(m["summary"]["overall_score"]) if m else float("nan"),
        }))
    return dg.MetadataValue.table(records, schema=SEGMENT_SCHEMA)


def tier_chart(counts: dict[str, int]) -> str:
    total = max(1, sum(counts[t] for t in ("HOT", "WARM", "COLD", "ARCHIVED")))
    rows = [f"| {t} | {counts[t]} | {'█' * round(40 * counts[t] / total)} |" for t in ("HOT", "WARM", "COLD", "ARCHIVED")]
    return "| tier | memories | |\n|---|---:|---|\n" + "\n".join(rows)


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
    exported = report.get("exported")
    if exported:  # ULTRON_SKILLS_EXPORT_DIR is set: where agents load the current skills from
        meta["skills_export_dir"] = dg.MetadataValue.path(exported["dir"])
        meta["skills_exported"] = len(exported.get("written", [])) + len(exported.get("unchanged", []))
    return meta
