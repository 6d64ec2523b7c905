"""Stable cluster ids across batch runs: matching by member overlap, merges, splits,
and what happens to skills attached to merged clusters."""

from datetime import datetime, timezone

import pytest

from ultron.clusters.matching import (
    SkillState, jaccard, match_clusters, materially_changed, merge_skill_state,
)


def ids(prefix: str, n: int, start: int = 0) -> set[str]:
    return {f"{prefix}{i:03d}" for i in range(start, start + n)}


def test_unchanged_clusters_keep_their_ids_whatever_the_label_order():
    a, b = ids("a", 5), ids("b", 4)
    previous = {"A": a, "B": b}
    assert match_clusters([a, b], previous).ids == ["A", "B"]
    assert match_clusters([b, a], previous).ids == ["B", "A"]


def test_grown_and_shrunk_clusters_keep_their_ids_and_new_groups_are_new():
    previous = {"A": ids("a", 5), "B": ids("b", 5)}
    new = [ids("a", 7), ids("b", 3), ids("c", 4)]
    m = match_clusters(new, previous)
    assert m.ids == ["A", "B", None] and m.absorbed == {} and m.dissolved == []


def test_a_merge_keeps_the_best_overlap_and_absorbs_the_other():
    previous = {"A": ids("a", 6), "B": ids("b", 4)}
    m = match_clusters([ids("a", 6) | ids("b", 4)], previous)
    assert m.ids == ["A"] and m.absorbed == {"B": "A"} and m.dissolved == []
    assert m.absorbed_into("A") == ["B"]


def test_a_split_keeps_the_id_on_the_larger_part():
    previous = {"A": ids("a", 10)}
    m = match_clusters([ids("a", 3), ids("a", 7, start=3)], previous)
    assert m.ids == [None, "A"]


def test_matching_is_one_to_one_greedy_by_overlap():
    # new 0 overlaps A by 5 and B by 1; new 1 overlaps A by 2 and B by 2: A goes to new 0 (the
    # largest overlap), so new 1 takes B even though it shares as much with A
    previous = {"A": ids("a", 7), "B": ids("b", 3)}
    new = [ids("a", 5) | {"b000"}, ids("a", 2, start=5) | {"b001", "b002"}]
    m = match_clusters(new, previous)
    assert m.ids == ["A", "B"]


def test_ties_are_deterministic():
    previous = {"A": {"x1", "x2"}, "B": {"x3", "x4"}}
    new = [{"x1", "x2", "x3", "x4"}]
    for _ in range(3):
        m = match_clusters(new, dict(reversed(list(previous.items()))))
        assert m.ids == ["A"] and m.absorbed == {"B": "A"}


def test_clusters_that_lost_their_members_dissolve():
    previous = {"A": ids("a", 5), "B": ids("b", 6), "E": set()}
    # B: only 2 of 6 members went anywhere (the rest became noise): no merge, just gone
    m = match_clusters([ids("a", 5) | ids("b", 2)], previous)
    assert m.ids == ["A"] and m.absorbed == {} and sorted(m.dissolved) == ["B", "E"]


def test_empty_inputs():
    assert match_clusters([], {}).ids == []
    m = match_clusters([], {"A": {"x"}})
    assert m.dissolved == ["A"]
    assert match_clusters([{"x"}], {}).ids == [None]


WHEN = datetime(2026, 1, 1, tzinfo=timezone.utc)


def test_absorbed_skills_are_superseded_by_the_survivors():
    survivor = SkillState("docker-deps", ("old-one",), ("m1",), "published", None, WHEN)
    absorbed = [SkillState("pip-in-docker", ("older",)), SkillState(None)]
    out = merge_skill_state(survivor, absorbed)
    assert out.skill_slug == "docker-deps"
    assert out.superseded_slugs == ("old-one", "pip-in-docker", "older")
    assert out.attempt_member_ids == ("m1",) and out.attempt_status == "published"


def test_a_survivor_without_a_skill_inherits_the_only_absorbed_skill():
    heir = SkillState("pip-in-docker", ("older",), ("m1", "m2"), "published", None, WHEN)
    out = merge_skill_state(SkillState(None), [heir, SkillState(None)])
    assert out == SkillState("pip-in-docker", ("older",), ("m1", "m2"), "published", None, WHEN)


def test_two_absorbed_skills_and_no_survivor_skill_are_both_superseded():
    out = merge_skill_state(SkillState(None), [SkillState("one"), SkillState("two")])
    assert out.skill_slug is None and out.superseded_slugs == ("one", "two")


def test_no_skills_absorbed_changes_nothing():
    survivor = SkillState("s", ("t",))
    assert merge_skill_state(survivor, [SkillState(None)]) is survivor


@pytest.mark.parametrize("old,new,merged,topic,changed", [
    ({"a", "b", "c", "d", "e"}, {"a", "b", "c", "d", "e", "f"}, False, "x", False),
    ({"a", "b", "c"}, {"a", "b", "c", "d", "e"}, False, "x", True),
    ({"a", "b", "c"}, {"a", "b", "c"}, True, "x", True),
    ({"a", "b", "c"}, {"a", "b", "c"}, False, "", True),
])
def test_material_change_decides_relabelling(old, new, merged, topic, changed):
    assert materially_changed(old, new, merged=merged, topic=topic) is changed


def test_jaccard():
    assert jaccard(set(), set()) == 1.0 and jaccard({"a"}, {"b"}) == 0.0 and jaccard({"a", "b"}, {"a"}) == 0.5
