"""SFT export throughput: segments/s and MB/s, against reading the same messages only.

Two corpora, each in a private ULTRON_HOME:

* ``shared``: the real sessions in ../shared/data (tau-airline-dev and claude-code),
  ingested, segmented and labelled offline (rules provider), exported with every
  labelled segment (min score 0) so the whole corpus goes through the exporter
  (skipped when ../shared is absent);
* ``synthetic``: N support sessions with tool calls, personal data to redact, 10 %
  duplicated content and some broken structure to repair, written straight through
  the storage layer as segmented + labelled (no segmentation cost to wait for).

Timed per corpus, after the redactor is built (a one-off of a few seconds):

* baseline: select the eligible segments and read their messages in batches, nothing else;
* naive read: the same, one query per segment (``segments.segment_messages``);
* export_sft: select, read, clean, redact, format (in memory, the SDK path);
* export_sft_dataset: the same plus split, both formats, manifest, atomic write;
* validate: ``validate_sft_file`` over the four written files.

    python benchmarks/sft_export.py [--segments 5000]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _support import machine_line, private_home  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"


def synthetic_session(rng: random.Random, i: int) -> list[dict]:
    order = f"{rng.randint(100000, 999999)}"
    rows = [{"role": "system", "content": "You are a support agent for an online shop. Be brief."},
            {"role": "user", "content": f"Hi, order {order} has not arrived. Reach me at user{i}@example.com "
                                        f"or +1 415-555-{rng.randint(1000, 9999)}."}]
    for k in range(rng.randint(1, 4)):
        cid = f"call_{i}_{k}"
        rows.append({"role": "assistant", "content": None if k % 2 else "Let me check.", "tool_calls": [{
            "id": cid, "type": "function", "function": {"name": rng.choice(["get_order", "track", "get_user"]),
                                                         "arguments": json.dumps({"order_id": order, "step": k})}}]})
        note = "carrier " + " ".join(rng.choice("abcdefgh") * 4 for _ in range(20))
        rows.append({"role": "tool", "tool_call_id": cid, "content": json.dumps(
            {"status": rng.choice(["shipped", "delayed"]), "eta_days": k + 1, "note": note})})
    if i % 7 == 0:  # a result whose call was lost, and an empty streamed fragment: repaired
        rows.append({"role": "tool", "tool_call_id": "lost", "content": "stray"})
        rows.append({"role": "assistant", "content": ""})
    rows.append({"role": "assistant", "content": f"Order {order} is on its way and should arrive within "
                                                 f"{rng.randint(1, 5)} days. Anything else?"})
    rows.append({"role": "user", "content": "No, thanks!"})
    rows.append({"role": "assistant", "content": "You're welcome, have a nice day."})
    return rows


def build_synthetic(client, n: int) -> None:
    """Sessions, messages and one labelled segment each, through the storage layer."""
    from ultron.db import segments as segs
    from ultron.db import sessions as store
    from ultron.sessions.messages import Message
    from ultron.trajectory.segmentation import fingerprint

    rng = random.Random(11)
    sessions = [synthetic_session(rng, i) for i in range(n)]
    for i in range(0, n, 10):  # 10 % duplicated content: the same session in another file
        if i + 1 < n:
            sessions[i + 1] = sessions[i]
    with client.db.engine.begin() as conn:
        for i, rows in enumerate(sessions):
            msgs = [Message(role=r["role"], content=r.get("content") or "", line=k + 1, tool_calls=r.get("tool_calls"),
                            tool_call_id=r.get("tool_call_id")) for k, r in enumerate(rows)]
            data = json.dumps(rows).encode()
            rid = store.upsert_record(conn, agent_id="bench", session_file=f"/synthetic/s{i:05d}.jsonl",
                                      partition_key=None, content_hash=hashlib.sha256(data).hexdigest(),
                                      size_bytes=len(data), mtime_ns=None)
            store.copy_messages(conn, rid, msgs)
            segs.mark_segmented(conn, rid)
            seg_id = segs.insert_segment(conn, agent_id="bench", session_file=f"/synthetic/s{i:05d}.jsonl",
                                         segment_index=0, start_line=1, end_line=len(msgs),
                                         fingerprint=fingerprint(msgs), topic=f"order {i} not arrived")
            score = round(0.8 + rng.random() * 0.2, 4)
            segs.save_label(conn, seg_id, {"version": 1, "summary": {"overall_score": score,
                                                                      "task_type": "customer_service"}})


def build_shared(client) -> None:
    assert client.ingest([SHARED], "shared").totals["failed"] == 0
    svc = client
    svc.segment_pending_sessions(batch_size=100_000)
    svc.label_pending_segments(batch_size=100_000)


def measure(client, label: str, min_score: float) -> dict:
    from ultron.db import segments as segs
    from ultron.db import sft as store
    from ultron.sft.export import BATCH
    from ultron.sft.validate import validate_sft_file

    svc = client
    t0 = time.perf_counter()
    with client.db.engine.connect() as conn:
        cands = store.select_candidates(conn, min_score=min_score, limit=None)
        read = []
        for k in range(0, len(cands), BATCH):
            read.extend(store.messages_for(conn, cands[k:k + BATCH]).values())
    baseline = time.perf_counter() - t0
    read_bytes = sum(len(m.content.encode()) + (len(json.dumps(m.tool_calls).encode()) if m.tool_calls else 0)
                     for msgs in read for m in msgs)

    t0 = time.perf_counter()
    with client.db.engine.connect() as conn:
        for c in cands:
            row = segs.SegmentRow(c.id, c.agent_id, c.session_file, 0, c.start_line, c.end_line, c.fingerprint,
                                  c.topic, None, 1, 0)
            segs.segment_messages(conn, row)
    naive = time.perf_counter() - t0

    t0 = time.perf_counter()
    examples = svc.export_sft(min_quality_score=min_score, limit=None)
    in_memory = time.perf_counter() - t0

    t0 = time.perf_counter()
    export = svc.export_sft_dataset(min_quality_score=min_score, limit=None)
    dataset = time.perf_counter() - t0
    out_bytes = sum(p.stat().st_size for p in export.files.values())

    t0 = time.perf_counter()
    results = [validate_sft_file(p, key.split(".")[1]) for key, p in export.files.items()]
    validate = time.perf_counter() - t0
    assert all(r.passed for r in results), [r.errors[:3] for r in results if not r.passed]
    assert len(examples) == export.manifest["counts"]["exported"]
    return {"corpus": label, "segments": len(cands), "exported": export.manifest["counts"]["exported"],
            "read_mb": read_bytes / 1e6, "out_mb": out_bytes / 1e6, "baseline_s": baseline, "naive_s": naive,
            "export_sft_s": in_memory, "dataset_s": dataset, "validate_s": validate,
            "deduplicated": export.manifest["counts"]["deduplicated"], "repairs": export.manifest["repairs"],
            "dropped": export.manifest["dropped"]}


def table(results: list[dict]) -> str:
    out = ["| corpus | step | seconds | segments/s | MB/s | vs baseline |", "|---|---|---:|---:|---:|---:|"]
    for r in results:
        n, base = r["segments"], r["baseline_s"]
        for step, secs, mb in (("baseline: select + batched message read", base, r["read_mb"]),
                               ("naive read: one query per segment", r["naive_s"], r["read_mb"]),
                               ("export_sft (clean + redact + format, in memory)", r["export_sft_s"], r["read_mb"]),
                               ("export_sft_dataset (+ split, 2 formats, manifest, files)", r["dataset_s"],
                                r["out_mb"]),
                               ("validate_sft_file x4 (the asset check)", r["validate_s"], r["out_mb"])):
            out.append(f"| {r['corpus']} | {step} | {secs:.2f} | {n / secs:,.0f} | {mb / secs:.2f} | "
                       f"{secs / base:.1f}x |")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--segments", type=int, default=5000)
    args = ap.parse_args()
    results = []
    if SHARED.is_dir():
        with private_home("ultron-sft-shared-"):
            results.append(run("shared", None))
    else:
        print(f"(../shared/data not found at {SHARED}: the real-data row is skipped)")
    with private_home("ultron-sft-synth-"):
        results.append(run("synthetic", args.segments))
    print(machine_line())
    for r in results:
        print(f"{r['corpus']}: {r['segments']} segments selected, {r['exported']} exported, "
              f"{r['deduplicated']} deduplicated; read {r['read_mb']:.1f} MB, wrote {r['out_mb']:.1f} MB "
              f"(4 files); dropped {r['dropped'] or 'none'}; repairs {r['repairs'] or 'none'}")
    print()
    print(table(results))
    print()
    print("RESULT " + json.dumps({r["corpus"]: {k: (round(v, 4) if isinstance(v, float) else v)
                                                for k, v in r.items() if k not in ("repairs", "dropped")}
                                 for r in results}))
    return 0


def run(label: str, n: int | None) -> dict:
    from ultron.redaction import get_redactor
    from ultron.sdk import Ultron
    from ultron.settings import Settings

    client = Ultron(Settings.from_env(llm_provider="rules", embedding_provider="hash"))
    get_redactor()  # built once per process, not part of any timing
    if n is None:
        build_shared(client)
        return measure(client, "shared (all labelled segments)", 0.0)
    build_synthetic(client, n)
    return measure(client, f"synthetic ({n:,})", 0.8)


if __name__ == "__main__":
    sys.exit(main())
