"""Skill Hub costs: skill search through HNSW at 100 and 10,000 skills against exact scans,
and offline (rules) synthesis + quality gate per cluster of 5 and 50 memories.

Search: a private store is filled with N current skills whose 384-d vectors are
clustered like sentence embeddings (unit vectors around topic centres), then timed:

* ``search_skills (HNSW)``: the production path, ``SkillService.search_skills``
  (embedding supplied, HNSW query, similarity floor), end to end through Postgres;
* ``python scan (DB rows)``: every skill vector read from the database and compared in
  pure Python, one cosine at a time (the reference implementation's way);
* ``numpy exact (memory)``: an exact scan over all vectors already in memory, the recall
  reference.

recall@5 = overlap of the returned top 5 with the exact top 5. Ratios are p50 of the
Python scan divided by p50 of the method, in the same run.

Synthesis: clusters of 5 and 50 synthetic memories (errors, corrections and patterns
with shared and differing fixes) go through rules synthesis, redaction, grounding,
rendering and the gate, as ``run_skill_evolution`` does before its database write; the
whole evolution of one such cluster (read members, synthesise, gate, embed, write the
row and the files) is timed too.

    python benchmarks/skills.py [--sizes 100 10000] [--queries 200] [--scan-queries 5]
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
import uuid
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _support import machine_line, private_home  # noqa: E402

DIM = 384
K = 5
THINGS = ["pandas", "redis", "flask", "numpy", "psycopg2", "requests", "yaml", "celery", "boto3", "scipy"]
PLACES = ["the report container", "CI inside Docker", "the compose worker", "an Airflow task", "the notebook image",
          "the staging dashboard", "the cron exporter", "a Kubernetes job"]
FIXES = [("Add {t} to requirements.txt", "Rebuild the image with `docker build -t app .`"),
         ("pip install {t} inside the Dockerfile", "rebuild the image"),
         ("Copy /install into the final stage", "Run `docker build --no-cache -t app .`"),
         ("Point CMD at /opt/venv/bin/python", "Restart the container")]


class FixedEmbedder:
    """Returns the benchmark's query vectors in order (the store holds synthetic vectors)."""

    name, dim = "bench:synthetic", DIM

    def __init__(self) -> None:
        self.queue: list[np.ndarray] = []

    def embed_one(self, text: str) -> np.ndarray:
        return self.queue.pop(0) if self.queue else np.ones(DIM, np.float32) / math.sqrt(DIM)

    def embed(self, texts):
        return np.stack([self.embed_one(t) for t in texts])


class NoRedaction:
    @staticmethod
    def redact(text: str) -> str:
        return text


def make_vectors(n: int, rng: np.random.Generator, centres: np.ndarray) -> np.ndarray:
    idx = rng.integers(0, len(centres), n)
    v = centres[idx] + rng.normal(0, 0.8 / math.sqrt(DIM), (n, DIM)).astype(np.float32)
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def fill(conn, vectors: np.ndarray, start: int) -> list[str]:
    slugs = []
    raw = conn.connection.driver_connection
    with raw.cursor() as cur:
        with cur.copy("COPY skills (id, slug, version, name, description, skill_md, score, status, embedding) "
                      "FROM STDIN") as copy:
            for i, v in enumerate(vectors, start):
                slug = f"bench-skill-{i}"
                slugs.append(slug)
                copy.write_row((str(uuid.UUID(int=i + 1)), slug, "1.0.0", f"Skill {i}", f"benchmark skill {i}",
                                f"---\nname: {slug}\n---\n", 0.8, "current",
                                "[" + ",".join(f"{x:.6f}" for x in v) + "]"))
    return slugs


def queries_probe(rng: np.random.Generator, centres: np.ndarray) -> np.ndarray:
    return make_vectors(1, rng, centres)[0]


def plan(client, q: np.ndarray) -> str:
    """How Postgres runs the search query: it must be the HNSW index, not a scan."""
    import sqlalchemy as sa

    from ultron.db.memories import vec

    from ultron.db.skills import use_vector_index

    with client.db.engine.begin() as conn:
        use_vector_index(conn, 100)
        lines = conn.execute(sa.text(
            "EXPLAIN SELECT slug FROM skills WHERE embedding IS NOT NULL "
            "ORDER BY embedding <=> CAST(:q AS vector) LIMIT 5"), {"q": vec(q)}).scalars().all()
    used = next((ln.strip() for ln in lines if "Index Scan" in ln), lines[0].strip() if lines else "?")
    return used.split("  (")[0]


def percentile(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def cluster_memories(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        thing, place = rng.choice(THINGS), rng.choice(PLACES)
        first, second = rng.choice(FIXES)
        kind = rng.choices(["error", "correction", "pattern"], [6, 1, 2])[0]
        content = (f"ModuleNotFoundError: No module named '{thing}' in {place}" if kind != "correction"
                   else f"Installed {thing} on the host instead of the image ({place})")
        resolution = (f"The image lacks the {thing} module. {first.format(t=thing)}, then {second}."
                      if kind != "pattern" else f"1. read_file: Dockerfile\n2. {first.format(t=thing)}\n3. {second}")
        out.append({"id": str(uuid.UUID(int=seed * 100_000 + i + 1)), "memory_type": kind, "content": content,
                    "context": f"Task: {place} crashes on start. Attempted: run_command", "resolution": resolution,
                    "summary": content})
    return out


def time_synthesis(n: int, repeats: int, redactor) -> dict[str, float]:
    from ultron.prompts.skills import validate_skill
    from ultron.skills import gate
    from ultron.skills.draft import SkillDraft
    from ultron.skills.render import SkillHeader, render_skill_md
    from ultron.heuristics.skill_synthesis import synthesize

    members = cluster_memories(n, seed=n)
    synth, gating, passed = [], [], 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        draft = SkillDraft.from_dict(validate_skill(synthesize("missing python modules in docker", members)), "rules")
        t1 = time.perf_counter()
        draft = draft.map_text(redactor.redact)
        grounding = gate.ground(draft, members)
        header = SkillHeader(slug="missing-python-modules-in-docker", version="1.0.0", cluster_id="c", topic="t",
                             memory_ids=tuple(m["id"] for m in members))
        md = render_skill_md(grounding.draft, header, members)
        result = gate.evaluate(grounding, md, header.slug, members)
        t2 = time.perf_counter()
        synth.append(t1 - t0)
        gating.append(t2 - t1)
        passed += result.passed
    return {"synth": statistics.median(synth), "gate": statistics.median(gating),
            "total": statistics.median([a + b for a, b in zip(synth, gating)]), "passed": passed / repeats,
            "steps": len(draft.steps), "score": result.score}


def time_evolution(client, n: int, seed: int) -> float:
    """One cluster of n memories through run_skill_evolution (DB reads, files, row)."""
    import sqlalchemy as sa

    from ultron.skills.service import SkillService

    from ultron.db.memories import MemoryRecord, insert_record

    members = cluster_memories(n, seed=seed)
    cluster = f"bench-cluster-{seed}"
    embedder = client.memory.embedder
    with client.db.engine.begin() as conn:
        # stored directly (not uploaded), so near-identical synthetic memories stay n members
        ids = [insert_record(conn, MemoryRecord(id="", memory_type=m["memory_type"], content=m["content"],
                                                context=m["context"], resolution=m["resolution"],
                                                summary_l0=m["summary"]),
                             embedder.embed_one(m["content"])) for m in members]
        conn.execute(sa.text("INSERT INTO knowledge_clusters (id, topic) VALUES (:c, :t)"),
                     {"c": cluster, "t": f"missing python modules {seed}"})
        conn.execute(sa.text("UPDATE memory_records SET cluster_id = :c WHERE id = ANY(:ids)"),
                     {"c": cluster, "ids": ids})
    service = SkillService(client.context)
    t0 = time.perf_counter()
    report = service.run_skill_evolution()
    elapsed = time.perf_counter() - t0
    assert len(report.published) == 1, report.to_dict()
    return elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 10_000])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--scan-queries", type=int, default=5)
    ap.add_argument("--synth-repeats", type=int, default=20)
    args = ap.parse_args()
    with private_home("ultron-bench-skills-"):
        return run(args)


def run(args: argparse.Namespace) -> int:
    import sqlalchemy as sa

    from ultron.context import ServiceContext
    from ultron.memory.service import MemoryService
    from ultron.redaction import get_redactor
    from ultron.sdk import Ultron
    from ultron.settings import Settings
    from ultron.skills.service import SkillService

    settings = Settings.from_env(embedding_provider="hash", llm_provider="rules", search_min_score=0.0)
    client = Ultron(settings)
    rng = np.random.default_rng(11)
    centres = rng.normal(0, 1, (300, DIM)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    embedder = FixedEmbedder()
    memory = MemoryService(ServiceContext(client.db, settings, embedder=embedder, redactor=NoRedaction()))
    memory._profile_checked = True
    service = SkillService(memory)

    print(machine_line())
    print(f"vectors: {DIM}-d around 300 topic centres; {args.queries} queries; HNSW m=16, ef_construction=64, "
          f"ef_search={settings.hnsw_ef_search}; top {K}\n")
    print("| skills | method | p50 ms | p99 ms | recall@5 | vs python scan |")
    print("|---:|---|---:|---:|---:|---:|")
    stored, all_vectors = 0, np.zeros((0, DIM), np.float32)
    slugs: list[str] = []
    load_notes = []
    for size in sorted(args.sizes):
        add = make_vectors(size - stored, rng, centres)
        t0 = time.perf_counter()
        with client.db.engine.begin() as conn:
            conn.execute(sa.text("SET LOCAL maintenance_work_mem = '512MB'"))
            slugs += fill(conn, add, stored)
        with client.db.engine.begin() as conn:
            conn.execute(sa.text("ANALYZE skills"))
        load_notes.append(f"{size:,} skills loaded (COPY + index) in {time.perf_counter() - t0:.1f} s; "
                          f"plan: {plan(client, queries_probe(rng, centres))}")
        all_vectors = np.vstack([all_vectors, add])
        stored = size
        queries = make_vectors(args.queries, rng, centres)

        def exact(q: np.ndarray) -> set[str]:
            sims = all_vectors @ q
            top = np.argpartition(-sims, K)[:K]
            return {slugs[i] for i in top[np.argsort(-sims[top])]}

        exact_top = [exact(q) for q in queries]
        hnsw_times, recalls = [], []
        for q, truth in zip(queries, exact_top):
            embedder.queue.append(q)
            t = time.perf_counter()
            found = service.search_skills("benchmark query", limit=K)
            hnsw_times.append(time.perf_counter() - t)
            recalls.append(len({f["slug"] for f in found} & truth) / K)
        # timed after the index queries, once the server is idle after the load
        numpy_times = []
        for q in queries:
            t = time.perf_counter()
            exact(q)
            numpy_times.append(time.perf_counter() - t)

        scan_times, scan_recalls = [], []
        with client.db.engine.connect() as conn:
            for q, truth in list(zip(queries, exact_top))[: args.scan_queries]:
                ql = [float(x) for x in q]
                t = time.perf_counter()
                scored = []
                for slug, emb in conn.execute(sa.text(
                        "SELECT slug, embedding::text FROM skills WHERE status = 'current'")):
                    v = [float(x) for x in emb[1:-1].split(",")]
                    dot = sum(a * b for a, b in zip(ql, v))
                    norm = math.sqrt(sum(b * b for b in v)) or 1.0
                    scored.append((dot / norm, slug))
                scored.sort(reverse=True)
                scan_times.append(time.perf_counter() - t)
                scan_recalls.append(len({s for _, s in scored[:K]} & truth) / K)
        scan_p50 = statistics.median(scan_times)

        def row(name: str, times: list[float], recall: float) -> None:
            p50 = statistics.median(times)
            print(f"| {size:,} | {name} | {p50 * 1e3:.2f} | {percentile(times, 99) * 1e3:.2f} | {recall:.3f} | "
                  f"{scan_p50 / p50:,.0f}x |")

        row("search_skills (HNSW)", hnsw_times, statistics.mean(recalls))
        row("numpy exact (memory)", numpy_times, 1.0)
        row("python scan (DB rows)", scan_times, statistics.mean(scan_recalls))
    print()
    for note in load_notes:
        print(f"- {note}")

    print("\n| memories per cluster | rules synthesis ms | redact + ground + render + gate ms | total ms | "
          "steps | gate passed | score | run_skill_evolution for the cluster ms |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    redactor = get_redactor()
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("TRUNCATE skills, knowledge_clusters CASCADE"))
    client.memory.check_embedding_profile()          # one-time costs out of the timings
    _ = client.memory.redactor, client.memory.provider
    SkillService(client.context).run_skill_evolution()
    for n in (5, 50):
        t = time_synthesis(n, args.synth_repeats, redactor)
        evolution = time_evolution(client, n, seed=n)
        print(f"| {n} | {t['synth'] * 1e3:.2f} | {t['gate'] * 1e3:.2f} | {t['total'] * 1e3:.2f} | {t['steps']} | "
              f"{t['passed']:.0%} | {t['score']:.3f} | {evolution * 1e3:.1f} |")
    print("\ngoals: search p50 <= 10 ms at 10k skills with recall@5 >= 0.95; synthesis + gate of a 50-memory "
          "cluster well under a second")
    return 0


if __name__ == "__main__":
    sys.exit(main())
