"""The mechanical flags of the memory rubric (ultron/heuristics/checker.py)."""

from __future__ import annotations

from ultron.heuristics.candidates import candidate, dedupe
from ultron.heuristics.checker import check, check_memory, counts


def mem(content: str, resolution: str = "", session: str = "s1", segment: int = 0) -> dict:
    return {"content": content, "context": "", "resolution": resolution, "session": session, "segment": segment}


def test_a_memory_an_expert_would_write_has_no_flag():
    good = mem("A module the app imports but requirements.txt lacks crashes the container on start.",
               "Add it to requirements.txt and rebuild.\n1. docker build -t api . && docker run --rm api")
    assert check_memory(good, ["The api container crashes on start. Can you fix it?"]) == []


def test_each_mechanical_failure_is_flagged():
    request = "The db-sync container crashes on start. Can you find out why and fix it?"
    flags = {c for c, _ in check_memory(mem(request), [request])}
    assert flags == {"restates_request"}
    steps = mem("Pin the build image.", "1. read_file\n2. Checking the Dockerfile now\n3. docker build -t x .")
    assert [c for c, _ in check_memory(steps)] == ["bare_step", "narration_step"]
    cut = mem("Add a requirements file and install it:", "Run these:")
    assert [c for c, _ in check_memory(cut)] == ["cut_off", "cut_off"]


def test_a_code_only_one_session_knows_and_a_sibling_that_says_the_same_are_flagged():
    memories = [mem("Reservation FQ8APE cannot be changed after departure.", session="a"),
                mem("Ask for the reservation id before any change.", session="b"),
                mem("Ask for the reservation id before any change is made.", session="b")]
    requests = [["Change FQ8APE to May 20"], ["I need to change a booking"], ["I need to change a booking"]]
    n = counts(check(memories, requests))
    assert n["instance_name"] == 1 and n["same_as_sibling"] == 1


def test_two_candidates_of_one_segment_that_say_the_same_thing_become_one():
    a = candidate("error", "procedural", "Use psycopg2-binary on slim images: psycopg2 needs pg_config to build.",
                  "", "Replace psycopg2 with psycopg2-binary in requirements.txt.", [], 0.8, "code")
    b = candidate("pattern", "procedural", "psycopg2 needs pg_config to build, so on slim images use psycopg2-binary.",
                  "", "Replace psycopg2 with psycopg2-binary in requirements.txt and rebuild.", [], 0.9, "code")
    other = candidate("preference", "episodic", "Keep commit messages in the imperative mood.", "", "", [], 0.8, "code")
    kept = dedupe([a, b, other])
    assert [m["type_hint"] for m in kept] == ["pattern", "preference"]
