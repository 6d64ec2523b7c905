"""Planted secrets through the full pipeline: where do they end up?

Ingests a session carrying one secret of every kind the redactor handles (plus an
ingest_text note), runs segmentation, labelling and extraction offline, then counts,
for each planted string, the rows of every table that contain it. Everything outside
raw_user_uploads must be 0; the raw archive keeps the original bytes by design.
Also prints the redactor's speed on typical message sizes.

    python benchmarks/redaction.py
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _support import machine_line, private_home  # noqa: E402


def main() -> int:
    with private_home("ultron-bench-redaction-") as home:
        return run(home)


def run(home: Path) -> int:
    import sqlalchemy as sa

    from ultron.redaction import get_redactor
    from ultron.sdk import Ultron
    from ultron.settings import Settings
    from ultron.testing.planted import PLANTED, session_rows

    client = Ultron(Settings.from_env(embedding_provider="hash"))
    path = home / "inbox" / "bench" / "secrets.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in session_rows()))
    client.ingest([path], "bench")
    svc = client
    svc.segment_pending_sessions()
    svc.label_pending_segments()
    with client.db.engine.begin() as conn:  # extract regardless of the score: the point is where text goes
        conn.execute(sa.text("UPDATE task_segments SET quality_metrics = jsonb_set(CAST(quality_metrics AS jsonb), "
                             "'{summary,overall_score}', '0.95')::text"))
    extracted = svc.extract_memories_from_segments()
    client.ingest_text(f"Rotate {PLANTED['openai_key']} and tell {PLANTED['email']} (card {PLANTED['credit_card']}).")

    with client.db.engine.connect() as conn:
        tables = conn.execute(sa.text(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' "
            "AND table_type = 'BASE TABLE' ORDER BY 1")).scalars().all()
        rows = []
        for kind, secret in PLANTED.items():
            outside = {t: conn.execute(sa.text(f'SELECT count(*) FROM "{t}" x WHERE position(:s in x::text) > 0'),
                                       {"s": secret}).scalar_one() for t in tables if t != "raw_user_uploads"}
            raw = conn.execute(sa.text("SELECT count(*) FROM raw_user_uploads WHERE position(:s in "
                                       "convert_from(content, 'UTF8')) > 0"), {"s": secret}).scalar_one()
            rows.append((kind, sum(outside.values()), raw, [t for t, n in outside.items() if n]))
        memories = conn.execute(sa.text("SELECT count(*) FROM memory_records")).scalar_one()

    print(machine_line())
    print(f"pipeline: ingest → segment → label → extract ({sum(r.inserted + r.merged for r in extracted)} memory "
          f"uploads from the session) + ingest_text; {memories} memories stored\n")
    print(f"{'planted kind':16} {'rows outside raw archive':>25} {'raw archive rows':>17}  tables")
    for kind, n, raw, where in rows:
        print(f"{kind:16} {n:25} {raw:17}  {', '.join(where) or '-'}")
    leaks = sum(n for _, n, _, _ in rows)
    print(f"\nleaks outside raw_user_uploads: {leaks} (goal 0)")

    redactor = get_redactor()
    samples = {
        "short message (60 B)": "Thanks, that worked. Now can you write me a docker compose file?",
        "tool output (1 KB)": "Ran 12 tests in 0.31s; file src/app/dates.py updated; cache at /var/cache/app. " * 12,
        "secret-dense (1 KB)": " ".join(PLANTED.values()) * 2,
    }
    print(f"\n{'redactor speed':24} {'ms per text':>12}")
    for name, text in samples.items():
        times = []
        for _ in range(200):
            t = time.perf_counter()
            redactor.redact(text)
            times.append(time.perf_counter() - t)
        print(f"{name:24} {statistics.median(times) * 1e3:12.3f}")
    return 0 if leaks == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
