"""The learned lesson model as a user of the pipeline sees it: lessons kept whatever the
trajectory scored, nothing from sessions that teach nothing, no customer's wish stored
as the team's, no harness text stored as a lesson, and weights that are small, load
offline and are reproduced by the training script."""

from __future__ import annotations

import numpy as np

from tests.messages import call, result, say, user
from ultron.heuristics import score_trajectory
from ultron.learned import lessons
from ultron.learned.units import RepeatIndex, opening_keys, strip_repeated
from ultron.memory import selection
from ultron.providers import RulesProvider
from ultron.settings import Settings


def kept(messages) -> list[dict]:
    """What the offline pipeline keeps from one segment (score, gate, extract, select)."""
    settings = Settings.from_env({})
    summary = score_trajectory(messages)["summary"]
    summary.update(lessons.teaches(messages, summary["task_type"]))
    if not selection.is_extractable(summary, settings):
        return []
    return selection.select(RulesProvider().extract_memories(messages, summary["task_type"]), summary, settings,
                            messages)


def test_shipped_weights_are_small_and_name_every_class():
    assert lessons.WEIGHTS.stat().st_size <= 10 * 1024 * 1024
    m = lessons.model()
    assert set(m.units.classes) == {"none", "third_party", *lessons.SHAPES}
    assert m.meta["sessions"] >= 1000 and len(m.meta["authors"]) >= 12
    assert not set(m.meta["blind"]) & set(m.meta["authors"])       # blind authors never trained on


def test_a_correction_is_kept_as_the_principals_rule_even_from_a_low_scoring_segment():
    msgs = [user("add lodash to the web app"),
            call("Bash", {"command": "npm install lodash"}, "c1"), result("c1", "added 1 package in 2s"),
            say("Installed lodash with npm."),
            user("Hmm, that's not how we do it in this repo. We use pnpm, never npm, because the lockfile is "
                 "pnpm-lock.yaml. Please redo it with pnpm add lodash."),
            say("Got it, switching to pnpm."),
            call("Bash", {"command": "pnpm add lodash"}, "c2"), result("c2", "Done in 1.2s"),
            say("Done, lodash is added with pnpm."), user("thanks")]
    [mem] = [m for m in kept(msgs) if m["type_hint"] == "correction"]
    assert "pnpm" in mem["content"] and mem["shape"] == "correction"
    assert "npm install lodash" not in mem["resolution"]     # the rejected attempt is not the way
    # the trajectory score does not gate a lesson: the same candidate from a segment scored 0.2
    low = {"overall_score": 0.2, "teaches_lesson": True}
    assert selection.select([mem], low, Settings.from_env({})) == [mem]


def test_a_failed_session_that_teaches_nothing_yields_nothing():
    msgs = [user("can you get the staging dashboard loading again?"),
            call("Bash", {"command": "curl -s https://staging.internal/health"}, "c1"),
            result("c1", "curl: (6) Could not resolve host: staging.internal"),
            say("I can't reach staging from this sandbox: the host does not resolve."),
            user("ugh ok, forget it, I'll ask Priya tomorrow")]
    assert kept(msgs) == []


def test_chit_chat_and_a_one_off_request_yield_nothing():
    assert kept([user("random question: why is the sky blue?"),
                 say("Rayleigh scattering: shorter wavelengths scatter more in the atmosphere."),
                 user("cool, thanks")]) == []
    assert kept([user("rename notes.txt to notes-2024.txt please"),
                 call("Bash", {"command": "mv notes.txt notes-2024.txt"}, "c1"), result("c1", ""),
                 say("Renamed."), user("thanks")]) == []


def test_a_customers_wish_is_not_stored_as_the_teams_preference():
    system = ("You are an airline customer service agent. Follow the policy: basic economy flights "
              "cannot be modified; verify the user id before any change.")
    from ultron.sessions.messages import Message

    msgs = [Message("system", system),
            user("hi, user id mia_li_3668. I prefer aisle seats, please always book aisle for me. Also my "
                 "wife Ana is vegetarian."),
            call("get_user_details", {"user_id": "mia_li_3668"}, "c1"),
            result("c1", '{"name": "Mia Li", "membership": "gold", "reservations": ["NO6JO3"]}'),
            say("Thanks Mia. I can see reservation NO6JO3. What would you like to change?"),
            user("move it to next friday please"),
            call("update_reservation_flights", {"reservation_id": "NO6JO3", "flights": ["HAT100"]}, "c2"),
            result("c2", "Error: basic economy reservations cannot be modified"),
            say("I'm sorry, this is a basic economy booking, which cannot be modified under our policy.")]
    prefs = [m for m in kept(msgs) if m["type_hint"] == "preference"]
    assert prefs == []


def test_the_harness_text_repeated_in_every_session_is_never_a_lesson():
    harness = ("You are an autonomous programmer working in a sandbox. Always start by trying to reproduce "
               "the bug that the issue discusses. You should always wait for feedback after every command. "
               "Never forget the people's champ.")
    msgs = [user(harness + "\nIssue: the date parser rejects ISO weeks like 2024-W05."),
            call("Bash", {"command": "python -c 'import dateparse; dateparse.parse(\"2024-W05\")'"}, "c1"),
            result("c1", "ValueError: unknown format 2024-W05"),
            say("Reproduced. Adding ISO week support via datetime.fromisocalendar."),
            call("Edit", {"file_path": "dateparse.py", "new_string": "datetime.fromisocalendar(y, w, 1)"}, "c2"),
            result("c2", "ok"), say("Fixed: ISO week strings now parse.")]
    counts = {k: 7 for k in opening_keys([user(harness)])}
    mems = kept(strip_repeated(msgs, RepeatIndex(counts)))
    text = " ".join(m["content"] + " " + m["context"] + " " + m["resolution"] for m in mems).lower()
    assert "people's champ" not in text and "wait for feedback" not in text and "reproduce the bug" not in text


def test_repeats_are_counted_by_hash_and_a_sentence_seen_once_stays():
    idx = RepeatIndex({RepeatIndex.key("Always wait for feedback after every command."): 4})
    assert idx.strip("Always wait for feedback after every command.\nThe build fails on ARM.") == \
        "The build fails on ARM."
    assert idx.strip("The build fails on ARM.") == "The build fails on ARM."
    assert RepeatIndex.key("too short") is None


def test_training_reproduces_the_same_weights_from_the_same_sessions(tmp_path):
    from ultron.learned import corpus, train

    specs = [s for s in corpus.load() if s["author"] == "legacy-dev"][:60]
    a = train.fit_units(train.build(specs))
    b = train.fit_units(train.build(specs))
    assert a.classes == b.classes
    assert np.array_equal(a.weight, b.weight)


def test_a_word_no_author_ever_wrote_does_not_change_what_is_kept():
    """Unknown tokens (a project's name, a random id) are outside the model's vocabulary, so they
    cannot borrow a trained token's weight through a shared hash bucket and flip a decision."""
    def session(word: str) -> list:
        return [user(f"The indexer service (catalog indexer) will not start: it dies with {word}. "
                     "Please fix the indexer startup."),
                call("Bash", {"command": "./start_indexer.sh"}, "c1"),
                result("c1", f"Error: {word} raised by indexer on port 9200"),
                say(f"The indexer start script fails with {word} on port 9200; the service needs --heap 2g "
                    "to start, so I will pass it."),
                call("Bash", {"command": "./start_indexer.sh --heap 2g"}, "c2"), result("c2", "ok: started"),
                say(f"Fixed: the {word} error of indexer goes away when it starts with --heap 2g."),
                user("Thanks, that worked!")]

    rng = np.random.default_rng(7)
    words = ["".join(chr(97 + int(c)) for c in rng.integers(0, 26, 14)) for _ in range(12)]
    runs = [lessons.detect(session(w), "code") for w in words]
    assert runs[0][3] and runs[0][3][0].shape == "error_fix"
    for _, _, p, found in runs[1:]:
        assert np.allclose(p, runs[0][2]) and found == runs[0][3]
    m = lessons.model()
    assert m.units.vocab is not None and len(m.units.vocab) > 1000
    assert m.units.logits([["zzqxj-never-written"]]).tolist() == m.units.logits([[]]).tolist()


def _candidate(content: str, context: str, resolution: str, shape: str, task_type: str) -> dict:
    from ultron.heuristics.candidates import candidate

    c = candidate("pattern", "procedural", content, context, resolution, [], 0.85, task_type)
    c["shape"] = shape
    return c


def test_a_retelling_of_one_session_or_its_request_is_not_served_but_a_fix_with_substance_is():
    """The worth check reads a candidate as the rubric's reviewer does."""
    from tests.messages import Message
    from ultron.learned import worth

    airline = [Message(role="system", content="You are an airline agent. Basic economy flights cannot be modified."),
               user("Hi, I want to move my flight HAT170 to May 20 please, reservation ZFA04Y."),
               say("I'm sorry, your reservation is basic economy, so it cannot be changed. Your fare was $174 "
                   "and the new one is $136."), user("ok")]
    fare = _candidate("Your fare was $174 and the new one is $136 on <date>.", "", "", "general_lesson",
                      "customer_service")
    request = _candidate("Hi, I want to move my flight HAT170 to May 20 please, reservation ZFA04Y.", "", "",
                         "general_lesson", "customer_service")
    assert worth.keep([fare, request], airline) == []
    docker = [user("the api container crashes on start, fix it"),
              call("run_command", {"command": "docker run --rm api"}, "c1"),
              result("c1", "Traceback (most recent call last):\nModuleNotFoundError: No module named 'flask'"),
              say("requirements.txt lists gunicorn only; flask was installed by hand."),
              call("write_file", {"path": "requirements.txt", "content": "gunicorn==22.0.0\nflask==3.0.3\n"}, "c2"),
              result("c2", "written"), say("Added flask to requirements.txt and rebuilt the image."), user("works")]
    fix = _candidate("A module the app imports but requirements.txt lacks crashes the container on start: add "
                     "it (flask==3.0.3) to requirements.txt and rebuild.",
                     "Error: ModuleNotFoundError: No module named 'flask'",
                     "Added flask==3.0.3 to requirements.txt and rebuilt the image.\n"
                     "1. write_file path=requirements.txt content=gunicorn==22.0.0 flask==3.0.3\n"
                     "2. docker build -t api . && docker run --rm api", "error_fix", "code")
    echo = _candidate("the api container crashes on start, fix it", "", "", "error_fix", "code")
    assert worth.keep([fix, echo], docker) == [fix]
    assert fix["worth"] > worth.model().threshold > echo["worth"]


def test_the_worth_weights_name_the_features_they_were_trained_on():
    from ultron.learned import worth

    m = worth.model()
    assert m is not None and len(m.coef) == len(worth.FEATURES)
    assert m.meta["trained_on"] >= 400 and 0 < m.threshold < 1
