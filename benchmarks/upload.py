"""Time per upload_memory (redaction, classification, embedding, near-duplicate lookup
through HNSW, merge or insert, L0/L1) with 1k and with 100k memories already stored.

The store is filled with COPY (vectors from the same embedder as the uploads, so the
duplicate lookup meets realistic neighbours); then the same batch of uploads (new
memories plus near duplicates of stored ones) is timed at each size. Goal: the time
per upload at 100k is at most 1.5x the time at 1k. The hashing embedder keeps the
embedding cost small so the ratio shows the database work; the all-MiniLM-L6-v2 cost
per text is printed separately for scale.

    python benchmarks/upload.py [--small 1000] [--large 100000] [--uploads 200]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _support import machine_line, private_home  # noqa: E402

ERRORS = ["ModuleNotFoundError", "TimeoutError", "PermissionError", "ConnectionRefusedError", "KeyError",
          "ValueError", "FileNotFoundError", "OSError", "MemoryError", "SSLError"]
THINGS = ["pandas", "docker", "postgres", "redis", "nginx", "kafka", "numpy", "flask", "celery", "airflow",
          "spark", "terraform", "helm", "pytest", "poetry", "webpack", "react", "django", "fastapi", "boto3"]
FIXES = ["pin the version", "add the package to requirements", "open the port", "raise the timeout",
         "run as the service user", "set the proxy", "rebuild the image", "clear the cache", "rotate the key",
         "increase the memory limit"]


def text(rng: random.Random, i: int) -> tuple[str, str, str]:
    err, thing, fix = rng.choice(ERRORS), rng.choice(THINGS), rng.choice(FIXES)
    return (f"{err} in {thing} job {i}: step {rng.randint(1, 999)} failed",
            f"running the {thing} pipeline stage {rng.randint(1, 50)}", f"{fix} for {thing} ({i})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--small", type=int, default=1_000)
    ap.add_argument("--large", type=int, default=100_000)
    ap.add_argument("--uploads", type=int, default=200)
    args = ap.parse_args()
    with private_home("ultron-bench-upload-"):
        return run(args)


def run(args: argparse.Namespace) -> int:
    import sqlalchemy as sa

    from ultron.db.memories import vec
    from ultron.embeddings import HashingEmbedder
    from ultron.context import ServiceContext
    from ultron.memory.service import MemoryService, embedding_text
    from ultron.sdk import Ultron
    from ultron.settings import Settings

    settings = Settings.from_env(embedding_provider="hash")
    client = Ultron(settings)
    memory = MemoryService(ServiceContext(client.db, settings))
    embedder = HashingEmbedder(384)
    rng = random.Random(11)
    memory.upload_memory("warm-up upload", "", "")  # builds the redactor and profile outside the timing

    def fill_to(n: int, have: int) -> None:
        batch = 5000
        while have < n:
            k = min(batch, n - have)
            bodies = [text(rng, have + j) for j in range(k)]
            vectors = embedder.embed([embedding_text({"content": c, "context": x, "resolution": r})
                                      for c, x, r in bodies])
            with client.db.engine.begin() as conn:
                conn.execute(sa.text("SET LOCAL maintenance_work_mem = '512MB'"))
                raw = conn.connection.driver_connection
                with raw.cursor() as cur, cur.copy(
                        "COPY memory_records (id, memory_type, content, context, resolution, summary_l0, "
                        "overview_l1, embedding) FROM STDIN") as copy:
                    for (c, x, r), v in zip(bodies, vectors):
                        copy.write_row((str(uuid.uuid4()), "error", c, x, r, c[:80], c, vec(v)))
            have += k

    def time_uploads(seed: int) -> tuple[list[float], int]:
        local = random.Random(seed)
        times, merged = [], 0
        for i in range(args.uploads):
            if i % 4 == 3:  # a near duplicate of something stored
                c, x, r = text(random.Random(local.randint(0, 10**6)), local.randint(0, args.small - 1))
            else:
                c, x, r = text(local, 10**7 + seed * 10**5 + i)
            t = time.perf_counter()
            result = memory.upload_memory(c, x, r, tags=["bench"])
            times.append(time.perf_counter() - t)
            merged += result.action == "merged"
        return times, merged

    print(machine_line())
    print(f"{args.uploads} uploads per size (3 new : 1 near-duplicate), hashing embedder, rules provider\n")
    print(f"{'stored':>9} {'p50 ms':>8} {'p90 ms':>8} {'mean ms':>8} {'merged':>7} {'vs small':>9}")
    fill_to(args.small, 1)
    small, merged_s = time_uploads(1)
    base = statistics.mean(small)
    print(f"{args.small:>9,} {statistics.median(small) * 1e3:8.2f} {sorted(small)[int(0.9 * len(small))] * 1e3:8.2f} "
          f"{base * 1e3:8.2f} {merged_s:7} {1.0:8.2f}x")
    t0 = time.perf_counter()
    fill_to(args.large, args.small + args.uploads)
    fill_secs = time.perf_counter() - t0
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("ANALYZE memory_records"))
    large, merged_l = time_uploads(2)
    ratio = statistics.mean(large) / base
    print(f"{args.large:>9,} {statistics.median(large) * 1e3:8.2f} {sorted(large)[int(0.9 * len(large))] * 1e3:8.2f} "
          f"{statistics.mean(large) * 1e3:8.2f} {merged_l:7} {ratio:8.2f}x")
    print(f"\n(filled {args.large - args.small:,} rows with COPY, HNSW maintained, in {fill_secs:.1f} s)")
    try:
        from ultron.embeddings import LocalMiniLMEmbedder

        local = LocalMiniLMEmbedder()
        local.embed_one("load")
        t = time.perf_counter()
        for i in range(50):
            local.embed_one(" ".join(text(rng, i)))
        print(f"for scale: all-MiniLM-L6-v2 embeds one memory in {(time.perf_counter() - t) / 50 * 1e3:.1f} ms")
    except Exception as exc:  # noqa: BLE001 - the scale note is optional
        print(f"(all-MiniLM-L6-v2 not measured: {exc})")
    print(f"goal: ratio <= 1.5 -> {'PASS' if ratio <= 1.5 else 'FAIL'} ({ratio:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
