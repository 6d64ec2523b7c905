"""Every lesson shape, in every session format, is kept with its type; sessions that teach
nothing give no memory. Sessions come from the lesson corpus (benchmarks/data/lessons/dev)
rendered by ultron.testing.transcripts, and go through the offline pipeline the way the
services take them (parse, segment, score, gate, extract, keep)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.lessons import FORMATS, KEY_SHARE, SHAPES, Pipeline, key_share
from tests.messages import call, result, say, user
from ultron.heuristics.extract import extract_memories, lesson_signals
from ultron.memory import selection
from ultron.settings import Settings
from ultron.testing.transcripts import load_specs, render_jsonl

DEV = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "lessons" / "dev"
SPECS = load_specs(DEV.glob("*.json"))
GOLD = {"error_fix": "error", "prose_fix": "error", "correction": "correction", "preference": "preference",
        "general_lesson": "pattern", "procedure": "pattern", "security": "security"}


@pytest.fixture(scope="module")
def pipe() -> Pipeline:
    return Pipeline()


@pytest.fixture(scope="module")
def runs(pipe: Pipeline) -> dict[tuple[str, str], list[dict]]:
    return {(s["id"], fmt): pipe.memories(render_jsonl(s, fmt).encode("utf-8")) for s in SPECS for fmt in FORMATS}


def _kept(spec: dict, mems: list[dict]) -> dict | None:
    hits = [m for m in mems if key_share(m, spec["key_terms"]) >= KEY_SHARE]
    return max(hits, key=lambda m: (key_share(m, spec["key_terms"]), m["confidence"])) if hits else None


def test_corpus_covers_every_shape_in_every_format():
    shapes = {s["shape"] for s in SPECS}
    assert set(SHAPES) <= shapes and "negative" in shapes
    for shape in SHAPES:
        assert sum(s["shape"] == shape for s in SPECS) >= 10
        assert all(GOLD[shape] == s["type"] for s in SPECS if s["shape"] == shape)
    assert sum(s["shape"] == "negative" for s in SPECS) >= 15


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("shape", SHAPES)
def test_each_shape_is_kept_with_its_type_in_each_format(runs, shape, fmt):
    specs = [s for s in SPECS if s["shape"] == shape]
    kept = [(s, _kept(s, runs[(s["id"], fmt)])) for s in specs]
    found = [(s, m) for s, m in kept if m is not None]
    assert len(found) / len(specs) >= 0.4, [s["id"] for s, m in kept if m is None]
    assert sum(m["type"] == s["type"] for s, m in found) / len(found) >= 0.75


@pytest.mark.parametrize("fmt", FORMATS)
def test_overall_recall_and_type_accuracy(runs, fmt):
    lessons = [s for s in SPECS if s["shape"] != "negative"]
    found = [(s, _kept(s, runs[(s["id"], fmt)])) for s in lessons]
    kept = [(s, m) for s, m in found if m is not None]
    assert len(kept) / len(lessons) >= 0.7
    assert sum(m["type"] == s["type"] for s, m in kept) / len(kept) >= 0.9


@pytest.mark.parametrize("fmt", FORMATS)
def test_sessions_that_teach_nothing_give_no_memory(runs, fmt):
    negatives = [s for s in SPECS if s["shape"] == "negative"]
    leaks = {s["id"]: [m["content"] for m in runs[(s["id"], fmt)]] for s in negatives if runs[(s["id"], fmt)]}
    assert len(leaks) <= 1, leaks


# -- one session of each shape, written here, with what a user would check ------------------

def _kept_only(messages) -> list[dict]:
    return [m for m in extract_memories(messages, task_type="code") if m["confidence"] >= 0.5]


def test_prose_fix_confirmed_by_the_user_is_an_error_memory():
    mems = _kept_only([
        user("docker compose up fails on my laptop"),
        call("Bash", {"command": "docker compose up -d"}, "c1"),
        result("c1", "Error response from daemon: driver failed programming external connectivity: "
                     "Bind for 0.0.0.0:5432 failed: port is already allocated", name="error"),
        say("Something else already listens on 5432, probably a local Postgres. Stop it with "
            "`sudo systemctl stop postgresql`, or map the container to another port like `5433:5432` in compose."),
        user("stopped the local postgres and it works now, thanks"),
    ])
    [err] = [m for m in mems if m["type_hint"] == "error"]
    assert "port is already allocated" in err["content"]
    assert "systemctl stop postgresql" in err["resolution"] and err["confirmed"] is True


def test_team_convention_is_a_correction_stated_as_the_rule():
    mems = _kept_only([
        user("add lodash to the web app"),
        call("Bash", {"command": "npm install lodash"}, "c1"), result("c1", "added 1 package"),
        say("Installed lodash with npm."),
        user("no, we use pnpm here, not npm. redo it with pnpm please"),
        say("Got it, switching to pnpm."),
        call("Bash", {"command": "pnpm add lodash"}, "c2"), result("c2", "Done in 1.2s"),
    ])
    [corr] = [m for m in mems if m["type_hint"] == "correction"]
    assert "pnpm" in corr["content"] and "npm install lodash" in corr["context"]


def test_stated_general_lesson_outranks_the_sleep_workaround():
    mems = extract_memories([
        user("the migrations fail in CI because postgres isn't up yet"),
        call("Bash", {"command": "alembic upgrade head"}, "c1"),
        result("c1", "psql: error: connection to server at \"db\" (172.18.0.2), port 5432 failed: Connection refused",
               name="error"),
        call("Bash", {"command": "sleep 5 && alembic upgrade head"}, "c2"), result("c2", "Running upgrade -> 4f2a"),
        say("Adding a sleep 5 got the migrations through."),
        user("that's flaky. in general, wait for the DB health check (pg_isready) before running migrations "
             "instead of sleeping."),
        say("Understood, I'll use the health check."),
    ], task_type="ops")
    rule = next(m for m in mems if m["type_hint"] == "pattern" and "health check" in m["content"])
    workarounds = [m for m in mems if "sleep 5" in m["resolution"] and m is not rule]
    assert rule["confidence"] >= 0.7 and rule["confirmed"] is True
    assert all(w["confidence"] < rule["confidence"] and w["confidence"] < 0.5 for w in workarounds)


def test_preference_given_before_we_start_is_kept_for_good():
    mems = _kept_only([
        user("Before we start: always answer in British English, and keep it short. Now, can you rename "
             "utils.py to helpers.py?"),
        call("Bash", {"command": "git mv utils.py helpers.py"}, "c1"), result("c1", ""),
        say("Renamed utils.py to helpers.py."),
    ])
    prefs = [m for m in mems if m["type_hint"] == "preference"]
    assert any("British English" in m["content"] and m["kind"] == "procedural" for m in prefs)


def test_security_lesson_says_what_to_do():
    mems = _kept_only([
        user("I accidentally committed our .env with the Stripe key to the repo, what now?"),
        say("Treat the key as compromised: rotate it in the Stripe dashboard first, then remove .env from git "
            "with `git rm --cached .env` and add .env to .gitignore so it is never committed again."),
        user("rotated it and pushed the .gitignore change, thanks"),
    ])
    [sec] = [m for m in mems if m["type_hint"] == "security"]
    assert "rotate" in (sec["content"] + sec["resolution"]).lower() and ".gitignore" in sec["resolution"]


def test_memories_hold_no_customer_ids_or_names():
    mems = extract_memories([
        user("Hi, I'm Sophia Silva, user id sophia_silva_7557. Please cancel reservation M20IZO."),
        call("get_reservation_details", {"reservation_id": "M20IZO"}, "c1"),
        result("c1", '{"reservation_id": "M20IZO", "user_id": "sophia_silva_7557", "cabin": "basic_economy"}'),
        say("I'm sorry, but basic economy reservations cannot be modified or refunded after 24 hours."),
        user("no, I meant reservation M20IZO should be cancelled, not modified"),
        say("You're right, my mistake."),
    ], task_type="customer_service")
    text = json.dumps(mems)
    assert mems and not any(x in text for x in ("sophia", "Sophia", "Silva", "M20IZO"))


def test_the_word_prefilter_never_hides_a_standing_statement():
    from ultron.heuristics.lessons import _STANDING_WORDS, clauses, standing_cues

    texts = [t.get("text") or "" for spec in SPECS for t in spec["turns"]]
    checked = 0
    for text in texts:
        for s in clauses(text):
            if standing_cues(s):
                checked += 1
                assert any(w in s.lower() for w in _STANDING_WORDS), s
    assert checked > 50


# -- the memory gate -------------------------------------------------------------------------

def test_gate_reads_a_low_scoring_segment_only_for_confirmed_lessons():
    settings = Settings.from_env({})
    low = {"overall_score": 0.3, "teaches_lesson": True}
    assert selection.is_extractable(low, settings)
    assert not selection.is_extractable({"overall_score": 0.3, "teaches_lesson": False}, settings)
    assert selection.is_extractable({"overall_score": 0.75}, settings)
    cands = [{"confidence": 0.8, "confirmed": True}, {"confidence": 0.8, "confirmed": False},
             {"confidence": 0.4, "confirmed": True}]
    assert selection.select(cands, low, settings) == [cands[0]]
    assert selection.select(cands, {"overall_score": 0.9}, settings) == cands[:2]


def test_lesson_signals_flag_a_confirmed_fix_and_not_a_failed_session():
    fixed = [user("pip install fails"), call("Bash", {"command": "pip install psycopg2"}, "c1"),
             result("c1", "Error: pg_config executable not found.", name="error"),
             say("You need the libpq headers: run `sudo apt-get install libpq-dev`, then install again."),
             user("installed libpq-dev and pip works now, thanks")]
    failed = [user("pip install fails"), call("Bash", {"command": "pip install psycopg2"}, "c1"),
              result("c1", "Error: pg_config executable not found.", name="error"),
              say("Let me look at it."), user("forget it, I'll do it myself")]
    assert lesson_signals(fixed)["teaches_lesson"] is True
    assert lesson_signals(failed)["teaches_lesson"] is False
