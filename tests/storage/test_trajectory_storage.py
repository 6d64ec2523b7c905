"""Segmentation and labelling against the real database, with the real openai client
talking to a local fake OpenAI-compatible server."""

import json
import re

import pytest
import sqlalchemy as sa

from tests.conftest import write_jsonl
from ultron.context import ServiceContext
from ultron.providers import OpenAIProvider
from ultron.sdk import Ultron
from ultron.testing.fake_openai import FakeOpenAI, Reply
from ultron.trajectory.service import TrajectoryService

LINE = re.compile(r"^\[(\d+)\] \w+(?: \(sub-agent\))?: \[(\w)\]", re.M)


def marker_responder(body):
    """Answers segmentation like a good model would: a new task wherever the [X] marker changes."""
    system, user = body["messages"][0]["content"], body["messages"][1]["content"]
    if "grade" in system:
        return Reply.json({"goal_achieved": 1, "correctness": 1, "efficiency": 1, "safety": 1, "rationale": "ok"})
    n = len(re.findall(r"^\[\d+\] ", user, re.M))
    marks = {int(i): m for i, m in LINE.findall(user)}
    tasks, start = [], 1
    for i in range(2, n + 1):
        if i in marks and marks[i] != marks.get(start, marks.get(i - 1)):
            tasks.append({"start": start, "end": i - 1, "topic": f"task {marks.get(start, '?')}"})
            start = i
    tasks.append({"start": start, "end": n, "topic": f"task {marks.get(start, '?')}"})
    return Reply.json({"tasks": tasks})


@pytest.fixture
def server():
    with FakeOpenAI(marker_responder) as fake:
        yield fake


def service_for(client: Ultron, server: FakeOpenAI) -> TrajectoryService:
    settings = client.settings.__class__.from_env(
        home=client.settings.home, llm_provider="openai", llm_base_url=server.url, llm_api_key="k",
        llm_retry_base_seconds=0.01, llm_max_retries=1, llm_timeout_seconds=2)
    return TrajectoryService(ServiceContext(client.db, settings, provider=OpenAIProvider(settings)))


def turns(letter: str, n_pairs: int, start: int = 0):
    rows = []
    for i in range(start, start + n_pairs):
        rows.append({"role": "user", "content": f"[{letter}] request {letter}{i}"})
        rows.append({"role": "assistant", "content": f"[{letter}] answer {letter}{i}"})
    return rows


def rows(conn, sql, **p):
    return conn.execute(sa.text(sql), p).all()


def test_day1_day2_incremental_resegmentation(client, server, tmp_path):
    f = write_jsonl(tmp_path / "file.jsonl", turns("A", 2) + turns("B", 2) + turns("C", 1))
    client.ingest([f], "agent")
    svc = service_for(client, server)
    [day1] = svc.segment_pending_sessions()
    assert day1.status == "segmented" and [s.action for s in day1.segments] == ["new", "new", "new"]
    with client.db.engine.begin() as conn:
        segs = rows(conn, "SELECT id, topic, start_line, end_line, fingerprint FROM task_segments ORDER BY segment_index")
        assert [(s.topic, s.start_line, s.end_line) for s in segs] == [("task A", 1, 4), ("task B", 5, 8), ("task C", 9, 10)]
        a_id, c_id = segs[0].id, segs[2].id
        for mid, seg_id in (("m-a", a_id), ("m-c", c_id)):
            conn.execute(sa.text("INSERT INTO memory_records (id, memory_type, content, tags) "
                                 "VALUES (:i, 'pattern', 'x', ARRAY[:t])"),
                         {"i": mid, "t": f"segment:{seg_id[:8]}"})

    # Day 2: the file is appended; task C is now complete.
    with open(f, "a") as fh:
        for row in turns("C", 2, start=1):
            fh.write(json.dumps(row) + "\n")
    assert client.ingest([f], "agent").files[0].status == "changed"
    calls_before = server.calls
    [day2] = svc.segment_pending_sessions()
    assert [s.action for s in day2.segments] == ["kept", "kept", "new"]
    assert day2.replaced == 1 and day2.archived_memories == 1
    assert server.calls == calls_before + 1
    with client.db.engine.connect() as conn:
        segs2 = rows(conn, "SELECT id, start_line, end_line FROM task_segments ORDER BY segment_index")
        assert [s.id for s in segs2[:2]] == [segs[0].id, segs[1].id]
        assert segs2[2].id != c_id and (segs2[2].start_line, segs2[2].end_line) == (9, 14)
        status = dict(rows(conn, "SELECT id, status FROM memory_records"))
        assert status == {"m-a": "active", "m-c": "archived"}
        assert rows(conn, "SELECT segmented FROM trajectory_records")[0][0] == 1
    # Nothing pending: no more calls, no duplicates.
    assert svc.segment_pending_sessions() == [] and server.calls == calls_before + 1


def test_llm_outage_keeps_the_session_pending_until_it_recovers(client, server, tmp_path):
    f = write_jsonl(tmp_path / "s.jsonl", turns("A", 2) + turns("B", 2))
    client.ingest([f], "agent")
    svc = service_for(client, server)
    server.script(Reply.http(503), Reply.http(503))
    [r] = svc.segment_pending_sessions()
    assert r.status == "pending" and "unavailable" in r.reason
    with client.db.engine.connect() as conn:
        assert rows(conn, "SELECT segmented FROM trajectory_records")[0][0] == 0
        assert rows(conn, "SELECT count(*) FROM task_segments")[0][0] == 0
    [again] = svc.segment_pending_sessions()
    assert again.status == "segmented" and len(again.segments) == 2


def test_invalid_answers_are_retried_once_then_left_pending(client, server, tmp_path):
    f = write_jsonl(tmp_path / "s.jsonl", turns("A", 2))
    client.ingest([f], "agent")
    svc = service_for(client, server)
    server.script(Reply.json({"tasks": [{"start": 1, "end": 2}]}), Reply.text("garbage"))
    [r] = svc.segment_pending_sessions()
    assert r.status == "pending" and "2 attempts" in r.reason
    assert svc.usage.failures == 2


def test_short_sessions_cost_no_call(client, server, tmp_path):
    f = write_jsonl(tmp_path / "s.jsonl", [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
    client.ingest([f], "agent")
    svc = service_for(client, server)
    [r] = svc.segment_pending_sessions()
    assert r.status == "segmented" and len(r.segments) == 1 and server.calls == 0


def test_segment_lines_are_real_source_lines(client, server, tmp_path):
    f = write_jsonl(tmp_path / "s.jsonl", [
        {"_type": "metadata", "id": 1},
        {"type": "file-history-snapshot", "snapshot": {}},
        *turns("A", 2),
        b"{broken\n",
        *turns("B", 2),
    ])
    client.ingest([f], "agent")
    [r] = service_for(client, server).segment_pending_sessions()
    assert [(s.start_line, s.end_line) for s in r.segments] == [(3, 6), (8, 11)]


def test_rules_provider_splits_the_seeds_example(client, tmp_path):
    f = write_jsonl(tmp_path / "s.jsonl", [
        {"role": "user", "content": "How do I read a CSV in Python?"},
        {"role": "assistant", "content": "You can use pandas.read_csv()..."},
        {"role": "user", "content": "Write me a Docker compose file"},
        {"role": "assistant", "content": "version: '3'\nservices:\n  ..."},
    ])
    client.ingest([f], "agent")
    svc = client.trajectory_service
    assert svc.provider.name == "rules"
    [r] = svc.segment_pending_sessions()
    assert [(s.start_line, s.end_line) for s in r.segments] == [(1, 2), (3, 4)]
    assert "csv" in r.segments[0].topic.lower() and "docker" in r.segments[1].topic.lower()


def test_a_thank_you_that_opens_the_next_request_confirms_the_task_it_closes(client, tmp_path):
    """The example of docs/benchmarks.md: the CSV fix is confirmed in the message that asks for the compose file."""
    from ultron.db import segments as store
    from ultron.heuristics.segmenter import with_closing

    f = write_jsonl(tmp_path / "s.jsonl", [
        {"role": "user", "content": "How do I read a CSV in Python?"},
        {"role": "assistant", "content": "Use pandas: pd.read_csv('data.csv')."},
        {"role": "user", "content": "It fails with UnicodeDecodeError: 'utf-8' codec can't decode byte 0xe9"},
        {"role": "assistant", "content": "Pass the real encoding: pd.read_csv('data.csv', encoding='latin-1')."},
        {"role": "user", "content": "Thanks, that worked. Now write me a Docker compose file for Postgres."},
        {"role": "assistant", "content": "services:\n  db:\n    image: postgres:16"},
    ])
    client.ingest([f], "agent")
    svc = client.trajectory_service
    [r] = svc.segment_pending_sessions()
    assert [(s.start_line, s.end_line) for s in r.segments] == [(1, 4), (5, 6)]
    with svc.db.engine.connect() as conn:
        first, second = sorted(store.segments_for(conn, "agent", r.session_file), key=lambda s: s.start_line)
        msgs = with_closing(store.segment_messages(conn, first), store.message_after(conn, first))
        assert [m.content for m in msgs][-1] == "Thanks, that worked."
        assert store.message_after(conn, second) is None


def test_a_failed_judge_leaves_segments_unlabeled_until_it_recovers(client, server, tmp_path):
    f = write_jsonl(tmp_path / "s.jsonl", turns("A", 2) + turns("B", 2))
    client.ingest([f], "agent")
    svc = service_for(client, server)
    svc.segment_pending_sessions()
    server.script(Reply.http(500), Reply.http(500))  # first judge call: retried once, then given up
    labels = svc.label_pending_segments()
    assert [lb.status for lb in labels] == ["pending", "labeled"]
    assert "quality judge unavailable" in labels[0].reason
    [retry] = svc.label_pending_segments()
    assert retry.status == "labeled" and retry.segment_id == labels[0].segment_id
    with client.db.engine.connect() as conn:
        docs = [json.loads(d) for d in conn.execute(sa.text("SELECT quality_metrics FROM task_segments")).scalars()]
    for doc in docs:
        assert doc["summary"]["judge_used"] and doc["metrics"]["llm_judge"]["score"] == 1.0


def test_eligibility_and_stats_follow_the_settings(client, tmp_path):
    f = write_jsonl(tmp_path / "s.jsonl", turns("A", 2))
    client.ingest([f], "agent")
    svc = client.trajectory_service
    svc.segment_pending_sessions()
    [label] = svc.label_pending_segments()
    score = label.overall_score
    assert svc.is_memory_eligible({"summary": {"overall_score": 0.7}})
    assert not svc.is_memory_eligible({"summary": {"overall_score": 0.69}})
    assert svc.is_sft_eligible('{"summary": {"overall_score": 0.8}}') and not svc.is_sft_eligible("not json")
    stats = svc.get_trajectory_stats()
    assert stats["segments"]["total"] == stats["segments"]["labeled"] == 1
    assert stats["sessions"] == {"total": 1, "segmented": 1, "pending": 0}
    assert sum(stats["score_buckets"].values()) == 1
    # Thresholds come from settings: put the bar just above or below this segment's score.
    from ultron.trajectory.service import TrajectoryService

    strict = TrajectoryService(ServiceContext(client.db, client.settings.__class__.from_env(
        home=client.settings.home, trajectory_memory_score_threshold=min(1.0, score + 0.01),
        trajectory_sft_score_threshold=min(1.0, score + 0.01), trajectory_excellent_score_threshold=1.0)))
    lenient = TrajectoryService(ServiceContext(client.db, client.settings.__class__.from_env(
        home=client.settings.home, trajectory_memory_score_threshold=max(0.0, score - 0.01),
        trajectory_sft_score_threshold=max(0.0, score - 0.01), trajectory_excellent_score_threshold=max(0.0, score - 0.01))))
    assert strict.get_trajectory_stats()["segments"]["memory_eligible"] == 0
    assert strict.get_trajectory_stats()["score_buckets"]["weak"] == 1
    assert lenient.get_trajectory_stats()["segments"]["sft_eligible"] == 1
    assert lenient.get_trajectory_stats()["score_buckets"]["excellent"] == 1
