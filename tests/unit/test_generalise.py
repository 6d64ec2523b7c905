"""Memories that generalise (ultron.heuristics.generalise): one customer's ids, names,
dates and one-off paths leave a memory; tools, versions, ports, commands and project
paths stay."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ultron.heuristics.generalise import generalise, instance_specifics, people_in

SHARED_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
TAU = SHARED_DATA / "tau-airline-dev"
PEOPLE = frozenset({"Sophia", "Silva", "Mia", "Li"})


@pytest.mark.parametrize("text, planted, placeholder", [
    ("get_user_details: user_id=sophia_silva_7557", "sophia_silva_7557", "user_id=<user_id>"),
    ("My user ID is mia_li_3668, can you look me up?", "mia_li_3668", "My user ID is <user_id>,"),
    ("I'm omar_davis_3817, but I lost the reservation number", "omar_davis_3817", "I'm <user_id>,"),
    ("Cancel reservation M20IZO, please.", "M20IZO", "Cancel reservation <reservation_id>,"),
    ("reservation_id=JG7FMM, cabin=economy", "JG7FMM", "reservation_id=<reservation_id>"),
    ("my reservation ID is HXDUBJ.", "HXDUBJ", "reservation ID is <reservation_id>."),
    ("Changes to my flight reservation, HXDUBJ.", "HXDUBJ", "reservation, <reservation_id>."),
    ("not enough seats on flight HAT229", "HAT229", "flight <flight>"),
    ("I wanted HAT052 which departs at 03:00 EST.", "HAT052", "I wanted <flight> which departs"),
    ("payment_id=credit_card_4421486", "credit_card_4421486", "payment_id=<payment_id>"),
    ("pay with gift_card_1234567 then certificate_7504069", "gift_card_1234567", "with <payment_id> then"),
    ("Please use Gift Card 6276644 first", "6276644", "Gift Card <payment_id> first"),
    ("and pay the rest with my 7447 card", "7447", "my <payment_id> card"),
    ("Send it to sophia.silva1937@example.com today", "sophia.silva1937@example.com", "to <email> today"),
    ("Order #W2378156 was delivered", "#W2378156", "Order <order_id> was"),
    ("Call me back at 555-123-4567", "555-123-4567", "at <phone>"),
    ("Traceback: /home/alice/proj/x.py line 3", "/home/alice", "Traceback: <path>/x.py line 3"),
    ("wrote /tmp/tmpab12cd/out.txt", "tmpab12cd", "wrote <path>/out.txt"),
    ("opened C:\\Users\\bob\\proj\\app.py", "bob", "opened <path>/app.py"),
    ("cd /Users/<USER>/git/acme/web", "/Users/", "cd <path>"),
    ("Committed: `f0bf20a` on main", "f0bf20a", "Committed: `<hash>`"),
    ("session 8a718ed2-2856-435b-bd9a-63c5b8291b42 ended", "8a718ed2", "session <uuid> ended"),
    ("flying on 2024-05-20 and back May 27, 2024", "2024-05-20", "on <date> and back <date>"),
])
def test_instance_specifics_are_replaced(text, planted, placeholder):
    out = generalise(text)
    assert planted not in out
    assert placeholder in out
    assert instance_specifics(text), text
    assert instance_specifics(out) == [], out


def test_a_tool_call_gist_reads_as_a_procedure():
    text = ("book_reservation user_id=mia_li_3668, origin=JFK, destination=SEA, cabin=economy, "
            "flights=[HAT136 2024-05-20, HAT039 2024-05-20], passengers=[Mia Li]")
    assert generalise(text) == ("book_reservation user_id=<user_id>, origin=<airport>, destination=<airport>, "
                                "cabin=economy, flights=[<flight> <date>], passengers=[<name>]")


def test_repeats_collapse():
    text = "get_reservation_details x3: reservation_id=Z7GOZK, reservation_id=K67C4W, reservation_id=THY2DG"
    assert generalise(text) == "get_reservation_details x3: reservation_id=<reservation_id>"
    assert generalise("I'll take Flight HAT136 & HAT039.") == "I'll take Flight <flight>."
    assert generalise("Booked for Sophia Silva.", PEOPLE) == "Booked for <name>."


def test_names_of_the_session_people_are_replaced():
    assert generalise("Cancel reservation M20IZO for Sophia Silva", PEOPLE) == \
        "Cancel reservation <reservation_id> for <name>"
    assert generalise("Mia's bag was added; Li confirmed", PEOPLE) == "<name>'s bag was added; <name> confirmed"
    assert generalise("My name is Jane Doe and I need help") == "My name is <name> and I need help"
    # the lowercase word, a longer word and a placeholder are not the name
    assert generalise("Lithium and mia are fine", PEOPLE) == "Lithium and mia are fine"
    assert instance_specifics("Booked for Sophia", PEOPLE) == ["Sophia"]


@pytest.mark.parametrize("text", [
    "Use Python 3.11 (node 20 also works) and run `pnpm install --frozen-lockfile`.",
    "postgres listens on port 5432; the API returned HTTP 404 then 503.",
    "Refunds take 24 hours and cost $100; at most five passengers per reservation.",
    "ModuleNotFoundError: No module named 'requests'; pip install requests==2.31.0",
    "Edit src/app.py and ./migrations/0001_init.sql, then set DATABASE_URL and PYTHONPATH.",
    "ruff reports E501 and F401; hash it with SHA256 and base64; see RFC 3339, PEP 8.",
    "Basic economy flights cannot be modified. Travel from JFK to SEA is a direct route.",
    "read /usr/lib/python3/dist-packages/six.py and /etc/nginx/nginx.conf",
    "model claude-sonnet-4-5-20250929 on gpt-4o; issue #1234 is fixed",
    "See https://gist.github.com/acme/fc37fc5d0c258db83b75121eef7c8e01 for the docs.",
    "I prefer flights that depart after 8 am and before 9 pm, and a window seat.",
])
def test_general_things_survive(text):
    assert generalise(text, PEOPLE) == text
    assert instance_specifics(text, PEOPLE) == []


@pytest.mark.parametrize("text", [
    "user_id=sophia_silva_7557, reservation_id=M20IZO, flights=[HAT170 2024-05-20], passengers=[Sophia Silva]",
    "Gift Card 6276644 and my 7447 card, jane@example.com, /home/alice/x.py, #W2378156, f0bf20a",
    "Flight HAT136 & HAT039 & HAT039 for Mia Li, Mia Li; reservation, HXDUBJ",
    "<name> <name>, origin=<airport>, date=<date>",
    "",
])
def test_generalise_is_idempotent(text):
    once = generalise(text, PEOPLE)
    assert generalise(once, PEOPLE) == once


def test_people_in_a_self_introduction_and_a_tau_user_id():
    assert {"Sophia", "Silva"} <= people_in(["Hi, my name is Sophia Silva and I need to change a flight."])
    assert people_in(["Sure, it's sofia_kim_7287."]) == {"Sofia", "Kim"}
    assert people_in(["I'm Sophia, hello"]) == {"Sophia"}


def test_people_in_tool_results():
    result = ('{"name": {"first_name": "Sofia", "last_name": "Kim"}, "email": "s@example.com", '
              '"payment_methods": {"gift_card_7091239": {"source": "gift_card"}}, '
              '"passengers": [{"first_name": "Mia", "last_name": "Jackson", "dob": "1986-05-05"}]}')
    assert people_in([result]) == {"Sofia", "Kim", "Mia", "Jackson"}
    assert people_in(['{"name": "Ada Lovelace", "email": "ada@example.com"}']) == {"Ada", "Lovelace"}


def test_people_in_does_not_flag_common_words_or_tools():
    texts = ["I'm Sorry, I'm Looking for help. I'm Not sure.", "This is Python and I'm using Docker.",
             "credit_card_4421486 and gift_card_1234567", '{"name": "Python Debugger", "publisher": "ms"}',
             '{"name": "session-share", "version": "0.1.7"}', "Passengers: Each reservation has a name."]
    assert people_in(texts) == set()


def test_generalise_is_fast():
    text = ("1. get_user_details: user_id=omar_davis_3817\n2. get_reservation_details x3: reservation_id=JG7FMM, "
            "reservation_id=LQ940Q, reservation_id=2FBBAH\n3. search_direct_flight: origin=MCO, destination=BOS, "
            "date=2024-05-21\nUser: I'm not sure about the reservation IDs. Please downgrade all my business "
            "flights to economy and refund to the original payment method. Agent: The reservations have been "
            "downgraded; the refunds go to gift_card_7480005 in 5 to 7 business days. Flight HAT028 and HAT080 "
            "are confirmed for Omar Davis.")[:600]
    people = frozenset({"Omar", "Davis"})
    generalise(text, people)
    n = 200
    start = time.perf_counter()
    for _ in range(n):
        generalise(text, people)
    per_call = (time.perf_counter() - start) / n
    assert per_call < 2e-3, f"{per_call * 1e6:.0f} µs per 600-char text"


@pytest.mark.skipif(not TAU.is_dir(), reason="../shared/data/tau-airline-dev is absent")
def test_tau_memories_keep_at_most_five_percent_ids_after_generalise():
    from ultron.heuristics import extract_memories, score_trajectory
    from ultron.sessions.parsing import SessionParser

    total = with_ids = before = 0
    for path in sorted(TAU.glob("*.jsonl")):
        with open(path, "rb") as fh:
            msgs = list(SessionParser().messages(fh))
        people = frozenset(people_in(m.content for m in msgs if m.role in ("user", "tool")))
        meta = score_trajectory(msgs)
        for mem in extract_memories(msgs, task_type=meta["summary"]["task_type"]):
            if mem["confidence"] < 0.5:
                continue
            fields = [mem.get(k) or "" for k in ("content", "context", "resolution")]
            total += 1
            before += any(instance_specifics(f, people) for f in fields)
            with_ids += any(instance_specifics(generalise(f, people), people) for f in fields)
    assert total > 0
    assert with_ids <= 0.05 * total, f"{with_ids}/{total} still hold ids (before generalise: {before})"
