"""``life`` memories: the everyday rules a service agent states (policy sentences).

Only in a customer-service segment (``task_type="customer_service"``, or a long
system prompt about travel / payments): agent sentences stating a rule ("cannot be
modified", "free checked bag", "not refundable", "within 24 hours", "at most", …)
about a travel / payment topic, with no personal ids or dates in them and not about
the agent's own action ("I will …"); politeness ("I'm sorry, but", "Unfortunately,")
is stripped. Each is grounded against the system prompt: resolution = "Policy: <the
policy sentence containing most of its words>" (when it holds at least half of
them). At most ``MAX_LIFE_PER_SEGMENT`` per segment, the best grounded first.

Confidence: 0.30 + 0.60 * share of its words found in one policy sentence (0.35
without a system policy to check against). A rule grounded in the policy is
``confirmed``: the memory gate keeps it even from a segment that scored low (a
failed booking still teaches the rule the agent held).
"""

from __future__ import annotations

import functools
import re
from typing import Any

from ultron.heuristics.candidates import candidate
from ultron.heuristics.episodes import Digest
from ultron.heuristics.text import clip, norm_key, sentences, words

MAX_LIFE_PER_SEGMENT = 3

_I = re.IGNORECASE

_RULE_CUE = re.compile(
    r"\b(?:cannot|can'?t|can not) be (?:modified|changed|cancell?ed|refunded|removed|booked|added|used|"
    r"exchanged|upgraded|downgraded)\b|\b(?:is|are) not (?:allowed|permitted|eligible|refundable|possible)\b|"
    r"\bnon-?refundable\b|\bnot refundable\b|\bfree (?:checked )?(?:bags?|baggage)\b|\b(?:checked )?bag(?:gage)? "
    r"allowance\b|\bwithin \d+ (?:hours|days)\b|\bat most \w+\b|\bonly (?:be )?(?:cancell?ed|modified|changed|used|"
    r"refunded|booked)\b|\bper (?:passenger|bag|person|traveler)\b|\b(?:refunds?|refunded) (?:will go|go(?:es)?|to) "
    r"(?:to )?the original\b|\bbusiness (?:days|class)\b.*\b(?:refund|cancel)|\bmust be the same\b|"
    r"\bcan(?:not|'t)? (?:add|remove) (?:checked )?bags?\b|\bcannot add insurance\b", _I)
# Politeness in front of a rule ("I'm sorry, but ...", "Unfortunately, ...", "Please note that ...").
_HEDGE = re.compile(r"^(?:(?:yes|no),\s+|(?:i'?m|i am|we'?re) (?:sorry|afraid),?\s*(?:but\s+)?|unfortunately,?\s+|"
                    r"(?:please )?note that\s+|"
                    r"however,?\s+|as per (?:our|the) policy,?\s+|per (?:our|the) policy,?\s+)+", _I)
_FIRST_PERSON = re.compile(r"\b(?:i|i'll|i'd|i've|i'm|we'll|let me|let's)\b|^\W*(?:once|whether|if)\b", _I)
_LIFE_TOPIC = re.compile(
    r"\b(?:flights?|bags?|baggage|luggage|cabin|economy|business|tickets?|fares?|refunds?|cancell?ations?|"
    r"cancel|insurance|certificates?|gift cards?|credit cards?|payments?|passengers?|reservations?|bookings?|"
    r"membership|members?|seats?|travel|trips?|hotel|airport|compensation)\b", _I)
_PERSONAL_ID = re.compile(r"\b(?=[A-Z0-9]{6}\b)(?=[A-Z0-9]*\d)(?=[A-Z0-9]*[A-Z])[A-Z0-9]{6}\b|\b[a-z]+_[a-z]+_\d{3,}\b|"
                          r"\b\d{4}-\d{2}-\d{2}\b|\b(?:gift_card|certificate|credit_card)_\d+\b")


@functools.lru_cache(maxsize=16)
def _policy_sentences(system: str) -> tuple[tuple[str, frozenset[str]], ...]:
    """Sentences of a system prompt with their word sets (cached: every segment of a
    service session repeats the same policy)."""
    out = []
    for x in sentences(system[:20000]):
        w = words(x)
        if len(w) >= 3:
            out.append((x, frozenset(w)))
    return tuple(out)


def extract_life(d: Digest, task_type: str | None) -> list[dict[str, Any]]:
    service = task_type == "customer_service" or (
        len(d.system) >= 400 and len(_LIFE_TOPIC.findall(d.system[:6000])) >= 8)
    if not service:
        return []
    policy: tuple[tuple[str, frozenset[str]], ...] | None = None
    cands: dict[str, tuple[float, int, str, str, int]] = {}
    for i, k in enumerate(d.kind):
        if k != "assistant" or not d.text[i]:
            continue
        text = d.text[i][:2500]
        if not _RULE_CUE.search(text):
            continue
        for x in sentences(text):
            x = _HEDGE.sub("", x)
            x = x[:1].upper() + x[1:]
            if x.endswith("?") or len(x) < 20 or len(x) > 300:
                continue
            if not _RULE_CUE.search(x) or not _LIFE_TOPIC.search(x) or _PERSONAL_ID.search(x):
                continue
            if _FIRST_PERSON.search(x):
                continue          # the agent's own action or offer, not a rule
            key = norm_key(x)
            if key in cands:
                continue
            if policy is None:
                policy = _policy_sentences(d.system) if d.system else ()
            w = words(x)
            best, share = "", 0.0
            for ps, pw in policy:
                if not w:
                    break
                sh = len(w & pw) / len(w)
                if sh > share:
                    best, share = ps, sh
            conf = 0.30 + 0.60 * share if policy else 0.35
            cands[key] = (conf, len(cands), x, best if share >= 0.5 else "", i)
    out = []
    for conf, _, x, best, i in sorted(cands.values(), key=lambda t: (-t[0], t[1]))[:MAX_LIFE_PER_SEGMENT]:
        request = d.request_before(i)
        mem = candidate("pattern", "procedural", x, ("User: " + clip(request, 300)) if request else "",
                        ("Policy: " + best) if best else "", [], conf, task_type, [])
        mem["confirmed"] = bool(best)       # the rule is the service's written policy, not the agent's say-so
        out.append(mem)
    return out
