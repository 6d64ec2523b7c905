"""SFT export against the real database: sessions are ingested and segmented like in
production (offline rules provider); scores are set in SQL where a test needs exact values."""

import json
import os

import pytest
import sqlalchemy as sa

from tests.conftest import SHARED_DATA, write_jsonl
from ultron.sdk import Ultron
from ultron.settings import Settings
from ultron.sft import SFTExportError, latest_export, validate_export, validate_sft_file
from ultron.testing.planted import PLANTED, session_rows


def tool_session(order: str, extra: str = "") -> list[dict]:
    """One support task with two tool calls (OpenAI format), different text per order."""
    return [
        {"role": "system", "content": "You are a support agent for an online shop."},
        {"role": "user", "content": f"Where is my order {order}? {extra}".strip()},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{order}", "type": "function",
             "function": {"name": "get_order", "arguments": json.dumps({"order_id": order})}}]},
        {"role": "tool", "tool_call_id": f"call_{order}", "name": "get_order",
         "content": json.dumps({"order_id": order, "status": "shipped", "carrier": "UPS"})},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"track_{order}", "type": "function",
             "function": {"name": "track", "arguments": json.dumps({"order_id": order, "verbose": True})}}]},
        {"role": "tool", "tool_call_id": f"track_{order}", "name": "track", "content": "arrives tomorrow"},
        {"role": "assistant", "content": f"Order {order} shipped with UPS and arrives tomorrow."},
    ]


@pytest.fixture
def home(tmp_path):
    return tmp_path / "home"


def service(client, home, **overrides) -> Ultron:
    """The SDK on the shared test database, but with its own ULTRON_HOME for the files."""
    settings = Settings.from_env(home=home, llm_provider="rules", **overrides)
    return Ultron(settings, db=client.db)


def ingest(client, svc, tmp_path, sessions: dict[str, list[dict]], agent="agent") -> dict[str, str]:
    """Ingest and segment; returns file name -> its (single) segment id."""
    files = [write_jsonl(tmp_path / "sessions" / name, rows) for name, rows in sessions.items()]
    assert client.ingest(files, agent).totals["failed"] == 0
    svc.segment_pending_sessions(batch_size=1000)
    out = {}
    with client.db.engine.connect() as conn:
        for name in sessions:
            ids = conn.execute(sa.text("SELECT id FROM task_segments WHERE agent_id = :a AND session_file LIKE :f"),
                               {"a": agent, "f": f"%/{name}"}).scalars().all()
            assert len(ids) == 1, (name, ids)
            out[name] = ids[0]
    return out


def set_score(client, seg_id, score, task_type="customer_service"):
    metrics = {"version": 1, "summary": {"overall_score": score, "task_type": task_type}, "metrics": {}}
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("UPDATE task_segments SET quality_metrics = :q, labeled = 1 WHERE id = :id"),
                     {"q": json.dumps(metrics), "id": seg_id})


def read_lines(path):
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def all_text(directory) -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted(directory.iterdir()) if p.is_file())


def test_export_keeps_tool_calls_passes_the_check_and_leaks_no_secret(client, home, tmp_path):
    svc = service(client, home)
    segs = ingest(client, svc, tmp_path, {"planted.jsonl": session_rows(), "orders.jsonl": tool_session("A100")})
    labels = svc.label_pending_segments()  # the real offline scorer, then exact scores for the test
    assert {lb.status for lb in labels} == {"labeled"}
    set_score(client, segs["planted.jsonl"], 0.9, "ops")
    set_score(client, segs["orders.jsonl"], 0.95)
    # Stored text is redacted at ingest; plant secrets behind its back to prove the export redacts too.
    with client.db.engine.begin() as conn:
        conn.execute(sa.text(
            "UPDATE session_messages SET content = content || :s WHERE role = 'user' AND record_id IN "
            "(SELECT id FROM trajectory_records WHERE session_file LIKE '%orders.jsonl')"),
            {"s": f" Reach me at {PLANTED['email']}, key {PLANTED['openai_key']}"})
        conn.execute(sa.text(
            "UPDATE session_messages SET tool_calls = CAST(:tc AS jsonb) WHERE tool_calls->0->>'id' = 'call_A100'"),
            {"tc": json.dumps([{"id": "call_A100", "type": "function", "function": {
                "name": "get_order", "arguments": json.dumps({"order_id": "A100", "token": PLANTED["github_ghp"]})}}])})
        conn.execute(sa.text("UPDATE session_messages SET content = :c WHERE tool_call_id = 'track_A100'"),
                     {"c": f"arrives tomorrow; courier phone {PLANTED['phone']}"})
        conn.execute(sa.text("UPDATE task_segments SET topic = :t WHERE id = :id"),
                     {"t": f"order for {PLANTED['email']}", "id": segs["orders.jsonl"]})

    export = svc.export_sft_dataset()

    assert sorted(p.name for p in export.directory.iterdir()) == [
        "manifest.json", "train.openai.jsonl", "train.sharegpt.jsonl", "validation.openai.jsonl",
        "validation.sharegpt.jsonl"]
    assert export.manifest["counts"]["exported"] == 2
    for name, result in validate_export(export.directory).items():
        assert result.passed, (name, result.errors)
    for key, path in export.files.items():
        assert validate_sft_file(path, key.split(".")[1]).passed
    text = all_text(export.directory)
    leaked = [kind for kind, value in PLANTED.items() if value in text]
    assert leaked == []
    assert "<EMAIL_ADDRESS>" in text and "<GITHUB_TOKEN>" in text and "<PHONE_NUMBER>" in text

    lines = [x for key in ("train.openai", "validation.openai") for x in read_lines(export.files[key])]
    orders = next(x for x in lines if x["messages"][0]["role"] == "system")
    assert [m["role"] for m in orders["messages"]] == ["system", "user", "assistant", "tool", "assistant", "tool",
                                                      "assistant"]
    first_call = orders["messages"][2]["tool_calls"][0]
    assert first_call["id"] == "call_A100" and first_call["type"] == "function"
    assert json.loads(first_call["function"]["arguments"]) == {"order_id": "A100", "token": "<GITHUB_TOKEN>"}
    assert orders["messages"][3]["tool_call_id"] == "call_A100" and orders["messages"][3]["name"] == "get_order"
    assert [t["function"]["name"] for t in orders["tools"]] == ["get_order", "track"]
    assert orders["tools"][1]["function"]["parameters"]["properties"] == {
        "order_id": {"type": "string"}, "verbose": {"type": "boolean"}}
    # The planted session's error result keeps its call's name (Bash), not the stored "error" flag.
    planted = next(x for x in lines if x is not orders)
    assert {m["name"] for m in planted["messages"] if m["role"] == "tool"} == {"Bash"}

    share = [x for key in ("train.sharegpt", "validation.sharegpt") for x in read_lines(export.files[key])]
    assert {x["system"] for x in share if "system" in x} == {"You are a support agent for an online shop."}
    assert all(x["conversations"][-1]["from"] == "gpt" for x in share)

    sdk = svc.export_sft()
    assert {x["segment_id"] for x in sdk} == set(segs.values())
    assert all(set(x) >= {"messages", "topic"} for x in sdk)
    assert next(x for x in sdk if x["segment_id"] == segs["orders.jsonl"])["topic"] == "order for <EMAIL_ADDRESS>"
    assert not [kind for kind, value in PLANTED.items() if value in json.dumps(sdk)]
    assert next(x for x in sdk if x["segment_id"] == segs["orders.jsonl"])["messages"] == orders["messages"]


def test_threshold_task_type_and_limit_filters(client, home, tmp_path):
    svc = service(client, home)
    segs = ingest(client, svc, tmp_path, {f"s{i}.jsonl": tool_session(f"B{i}") for i in range(5)})
    for name, score, task_type in (("s0.jsonl", 0.97, "code"), ("s1.jsonl", 0.91, "customer_service"),
                                   ("s2.jsonl", 0.80, "code"), ("s3.jsonl", 0.79, "code"),
                                   ("s4.jsonl", 0.50, "customer_service")):
        set_score(client, segs[name], score, task_type)

    def ids(**kw):
        return [x["segment_id"] for x in svc.export_sft(**kw)]

    assert ids() == [segs["s0.jsonl"], segs["s1.jsonl"], segs["s2.jsonl"]]  # >= 0.8, best first
    assert ids(min_quality_score=0.75) == [segs[f"s{i}.jsonl"] for i in range(4)]
    assert ids(task_type="code") == [segs["s0.jsonl"], segs["s2.jsonl"]]
    assert ids(limit=1) == [segs["s0.jsonl"]]
    assert ids(task_type="customer_service", min_quality_score=0.0) == [segs["s1.jsonl"], segs["s4.jsonl"]]
    # The settings' threshold is the default floor.
    assert [x["segment_id"] for x in service(client, home, trajectory_sft_score_threshold=0.9).export_sft()] == [
        segs["s0.jsonl"], segs["s1.jsonl"]]
    export = svc.export_sft_dataset(task_type="code", limit=1)
    assert export.manifest["filters"] == {"task_type": "code", "min_quality_score": 0.8, "limit": 1}
    assert [s["segment_id"] for s in export.manifest["sources"]] == [segs["s0.jsonl"]]
    for bad in ({"task_type": "cooking"}, {"min_quality_score": 1.5}, {"limit": 0}):
        with pytest.raises(SFTExportError) as info:
            svc.export_sft(**bad)
        assert list(bad)[0].split("_")[0] in str(info.value)


def test_unreadable_metrics_are_not_eligible_and_do_not_break_the_export(client, home, tmp_path):
    svc = service(client, home)
    segs = ingest(client, svc, tmp_path, {"ok.jsonl": tool_session("C1"), "bad.jsonl": tool_session("C2"),
                                          "odd.jsonl": tool_session("C3")})
    set_score(client, segs["ok.jsonl"], 0.9)
    with client.db.engine.begin() as conn:
        conn.execute(sa.text("UPDATE task_segments SET quality_metrics = 'not json', labeled = 1 WHERE id = :id"),
                     {"id": segs["bad.jsonl"]})
        conn.execute(sa.text("UPDATE task_segments SET quality_metrics = :q, labeled = 1 WHERE id = :id"),
                     {"q": json.dumps({"summary": {"overall_score": "high"}}), "id": segs["odd.jsonl"]})
    assert [x["segment_id"] for x in svc.export_sft(min_quality_score=0.0)] == [segs["ok.jsonl"]]


def test_same_content_in_two_files_is_exported_once_with_its_best_score(client, home, tmp_path):
    svc = service(client, home)
    rows = tool_session("D1")
    segs = ingest(client, svc, tmp_path,
                  {"copy-a.jsonl": rows, "copy-b.jsonl": rows, "other.jsonl": tool_session("D2")})
    set_score(client, segs["copy-a.jsonl"], 0.85)
    set_score(client, segs["copy-b.jsonl"], 0.93)
    set_score(client, segs["other.jsonl"], 0.9)
    export = svc.export_sft_dataset()
    counts = export.manifest["counts"]
    assert counts["selected"] == 2 and counts["exported"] == 2 and counts["deduplicated"] == 1
    by_id = {s["segment_id"]: s for s in export.manifest["sources"]}
    assert set(by_id) == {segs["copy-b.jsonl"], segs["other.jsonl"]}
    assert by_id[segs["copy-b.jsonl"]]["score"] == 0.93


def test_split_is_deterministic_and_independent_of_limit_and_order(client, home, tmp_path):
    svc = service(client, home, sft_validation_fraction=0.5)
    segs = ingest(client, svc, tmp_path, {f"e{i}.jsonl": tool_session(f"E{i}") for i in range(8)})
    for i, name in enumerate(sorted(segs)):
        set_score(client, segs[name], 0.81 + i * 0.02)
    full = svc.export_sft_dataset()
    splits = {s["segment_id"]: s["split"] for s in full.manifest["sources"]}
    assert set(splits.values()) == {"train", "validation"}  # 8 examples at 0.5: both splits used
    again = svc.export_sft_dataset()
    assert {s["segment_id"]: s["split"] for s in again.manifest["sources"]} == splits
    limited = svc.export_sft_dataset(limit=3)
    assert all(splits[s["segment_id"]] == s["split"] for s in limited.manifest["sources"])
    # Reversing the scores reverses the order, not the split.
    for i, name in enumerate(sorted(segs)):
        set_score(client, segs[name], 0.95 - i * 0.02)
    assert {x["segment_id"]: x["split"] for x in svc.export_sft()} == splits
    counts = full.manifest["counts"]
    assert counts["train"] + counts["validation"] == counts["exported"] == 8
    assert len(read_lines(full.files["validation.openai"])) == counts["validation"]
    assert len(read_lines(full.files["train.sharegpt"])) == counts["train"]


def test_manifest_latest_pointer_and_progress(client, home, tmp_path):
    svc = service(client, home)
    segs = ingest(client, svc, tmp_path, {"f1.jsonl": tool_session("F1"), "f2.jsonl": tool_session("F2"),
                                          "lonely.jsonl": [{"role": "user", "content": "Is anyone there at all?"},
                                                           {"role": "user", "content": "Hello? I need my order."}]})
    set_score(client, segs["f1.jsonl"], 0.9)
    set_score(client, segs["f2.jsonl"], 0.83)
    set_score(client, segs["lonely.jsonl"], 0.99)
    calls = []
    first = svc.export_sft_dataset(progress=lambda done, total: calls.append((done, total)))
    assert calls[0] == (0, 3) and calls[-1] == (3, 3)
    m = json.loads(first.manifest_path.read_text())
    assert m == first.manifest
    assert m["export_id"] == first.export_id and m["created_at"]
    assert m["counts"] == {"selected": 3, "exported": 2, "train": m["counts"]["train"],
                           "validation": m["counts"]["validation"], "deduplicated": 0, "dropped": 1,
                           "with_tool_calls": 2}
    assert m["dropped"] == {"no_assistant_turn": 1}
    assert m["task_types"] == {"customer_service": 2}
    dist = m["score_distribution"]
    assert (dist["min"], dist["max"], dist["mean"]) == (0.83, 0.9, 0.865)
    assert dist["histogram"] == {"0.80-0.85": 1, "0.85-0.90": 0, "0.90-0.95": 1, "0.95-1.00": 0}
    src = {s["segment_id"]: s for s in m["sources"]}
    f1 = src[segs["f1.jsonl"]]
    assert f1["session_file"].endswith("f1.jsonl") and (f1["start_line"], f1["end_line"]) == (1, 7)
    assert f1["score"] == 0.9 and len(f1["fingerprint"]) == 16 and f1["split"] in ("train", "validation")
    key = f"{f1['split']}.openai"
    assert "F1" in read_lines(first.files[key])[f1["line"] - 1]["messages"][1]["content"]

    root = home / "sft"
    assert os.readlink(root / "latest") == first.export_id
    second = svc.export_sft_dataset()
    assert second.export_id > first.export_id and first.directory.is_dir()
    assert os.readlink(root / "latest") == second.export_id
    assert json.loads((root / "latest.json").read_text())["export_id"] == second.export_id
    assert latest_export(svc.settings).export_id == second.export_id
    assert not [p for p in root.iterdir() if p.name.startswith(".")]  # no temporary leftovers


def test_an_empty_export_is_still_a_valid_export(client, home):
    export = service(client, home).export_sft_dataset()
    assert export.manifest["counts"]["exported"] == 0
    assert export.manifest["score_distribution"]["min"] is None
    assert all(validate_sft_file(p, k.split(".")[1]).passed for k, p in export.files.items())


@pytest.mark.skipif(not (SHARED_DATA / "tau-airline-dev").is_dir(), reason="../shared/data is not present")
def test_real_airline_sessions_export_and_pass_the_check(client, home):
    svc = service(client, home)
    assert client.ingest([SHARED_DATA / "tau-airline-dev"], "tau").totals["failed"] == 0
    svc.segment_pending_sessions(batch_size=1000)
    svc.label_pending_segments(batch_size=1000)
    stats = svc.get_trajectory_stats()["segments"]
    export = svc.export_sft_dataset(min_quality_score=0.6)
    counts = export.manifest["counts"]
    assert counts["exported"] > 10 and counts["with_tool_calls"] > 5
    assert svc.export_sft_dataset().manifest["counts"]["selected"] == stats["sft_eligible"]
    for name, result in validate_export(export.directory).items():
        assert result.passed and result.lines == counts[name.split(".")[0]], (name, result.errors[:3])


# A writer holding a staging dir the way an export does: it says "ready" once it has
# written something, then waits on stdin (to be killed, or to stay alive meanwhile).
STAGING_WRITER = """
import sys
from pathlib import Path
from ultron.sft.staging import staging_dir
with staging_dir(Path(sys.argv[1]), sys.argv[2]) as tmp:
    (tmp / "train.openai.jsonl").write_text("{}\\n" * 1000)
    print("ready", flush=True)
    sys.stdin.read()
"""


def test_a_killed_exports_tmp_dir_is_removed_by_the_next_export_but_a_live_exports_is_kept(client, home):
    import subprocess
    import sys

    svc = service(client, home)
    root = home / "sft"
    root.mkdir(parents=True)
    legacy = root / ".tmp-20250101T000000000000Z-dead00"  # killed under a version without writer locks
    legacy.mkdir()
    (legacy / "train.openai.jsonl").write_text("{}\n", encoding="utf-8")
    killed_id, live_id = "20250102T000000000000Z-dead01", "20250103T000000000000Z-live02"
    writers = {name: subprocess.Popen([sys.executable, "-c", STAGING_WRITER, str(root), name], text=True,
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
               for name in (killed_id, live_id)}
    try:
        for proc in writers.values():
            assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        writers[killed_id].kill()  # SIGKILL mid-export: no cleanup of its own runs
        writers[killed_id].wait(timeout=30)

        export = svc.export_sft_dataset()
        assert export.directory.is_dir()
        assert not legacy.exists() and not (root / f".tmp-{killed_id}").exists()
        assert (root / f".tmp-{live_id}" / "train.openai.jsonl").is_file()  # still being written
        assert [p.name for p in root.iterdir() if p.name.startswith(".")] == [f".tmp-{live_id}"]
    finally:
        for proc in writers.values():
            proc.communicate(timeout=30)  # closing stdin lets the live writer finish
    assert writers[live_id].returncode == 0
    svc.export_sft_dataset()  # its writer has gone now, so the next export clears it too
    assert not [p for p in root.iterdir() if p.name.startswith(".")]
