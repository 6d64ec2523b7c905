"""Memory extraction without a model: a segment's messages in, memory candidates out.

The same messages always give the same memories, and a 30-message segment takes
1.5-3 ms (regular expressions over capped texts after one reading pass). The segment
is read once (:mod:`.reader`) and seen as the extractors see it (:mod:`.episodes`);
then six heuristics each look for one memory type:

=====================  =====================================================
:mod:`.errors`         a failed call and the call that fixed it (``error``;
                       permission / credential errors are ``security``)
:mod:`.corrections`    the user setting the agent right (``correction``)
:mod:`.preferences`    what the user wants, always or here (``preference``)
:mod:`.patterns`       a multi-step procedure that worked (``pattern``)
:mod:`.security`       a credential in plain text, a refusal (``security``)
:mod:`.policies`       a service agent's stated rules (``life``)
=====================  =====================================================

Their candidates are assembled, tagged, redacted and deduplicated by
:mod:`.candidates`; each module's docstring gives its rule and its confidence.
"""

from __future__ import annotations

import re
from typing import Any

from ultron.heuristics.candidates import CONTEXT_CHARS, REDACT, candidate, dedupe
from ultron.heuristics.classify import classify_memory_type
from ultron.heuristics.corrections import extract_corrections
from ultron.heuristics.episodes import Digest
from ultron.heuristics.cues import GAVE_UP, KEEP_STEPS
from ultron.heuristics.lessons import PROBLEM_REPORT, WORKAROUND, extract_prose_fixes, extract_security_lessons, extract_stated
from ultron.heuristics.errors import ERR_LINE, EXC_LINE, extract_errors
from ultron.heuristics.generalise import generalise, people_in
from ultron.heuristics.patterns import extract_patterns
from ultron.heuristics.policies import extract_life
from ultron.heuristics.preferences import (PREF_CUE_START, PREF_EXPLICIT, PREF_LIKE, PREF_STANDING,
                                           extract_preferences)
from ultron.heuristics.reader import cap
from ultron.heuristics.security import extract_security, is_sighting
from ultron.heuristics.text import MARKDOWN, clip, first_sentence, norm_key, sentences, words
from ultron.sessions.messages import Message

_I = re.IGNORECASE


def extract_memories(messages: list[Message], *, task_type: str | None = None) -> list[dict]:
    """Memory candidates of one task segment (each rule module's docstring says how).

    Each is ``{content, context, resolution, tags, kind, tools_used, confidence,
    type_hint}``; low-confidence candidates are returned too (the caller filters)."""
    msgs = list(messages or [])
    if not msgs:
        return []
    d = Digest(msgs)
    if not d.msgs:
        return []
    memories: list[dict[str, Any]] = []
    corrections, used = extract_corrections(d, task_type)
    stated, said = extract_stated(d, task_type, used)
    told = used | (said if any(m["type_hint"] == "correction" for m in stated) else set())
    errors, fixed = extract_errors(d, task_type, told)
    memories.extend(errors)
    memories.extend(corrections)
    memories.extend(stated)
    memories.extend(extract_prose_fixes(d, task_type, fixed))
    memories.extend(extract_preferences(d, task_type, used))
    memories.extend(extract_patterns(d, task_type, fixed, told))
    sightings = extract_security(d, task_type)
    lesson = extract_security_lessons(d, task_type, " ".join(
        m["content"] for m in sightings if is_sighting(m))[:300])
    if lesson:
        # the lesson says what to do about the exposure; the sighting is its context, not a memory of its own
        sightings = [m for m in sightings if not is_sighting(m)]
        memories = [m for m in memories if not (m["type_hint"] == "security" and norm_key(m["content"]) ==
                                                norm_key(lesson[0]["content"]))]
    memories.extend(lesson)
    memories.extend(sightings)
    memories.extend(extract_life(d, task_type))
    _supersede_workarounds(memories)
    _rules_over_instances(memories)
    _fixes_over_troubleshooting(memories)
    memories = _endorsed_procedures(memories)
    _discount_if_abandoned(d, memories)
    generalise_segment(memories, d)
    return dedupe(memories)


def generalise_segment(memories: list[dict[str, Any]], d: Digest) -> None:
    """Instance specifics out of a segment's memories, the people named by the user or a
    tool of that segment included (every extractor of segments, rules or learned, ends here)."""
    if memories:
        _generalise(memories, people_in(d.text[i] for i, k in enumerate(d.kind) if k in ("user", "tool")))


def _generalise(memories: list[dict[str, Any]], people: set[str] | frozenset[str] = frozenset()) -> None:
    """Instance specifics out of every memory (ids, the person served, one-off paths):
    a memory is for the next task, not this one. Provenance keeps where it came from."""
    for m in memories:
        for key in ("content", "context", "resolution"):
            if m[key]:
                m[key] = generalise(m[key], people)


def _rules_over_instances(memories: list[dict[str, Any]]) -> None:
    """A rule stated in words and an error of the same segment it speaks about: the rule is the
    lesson and the error one instance of it. The error is named in the rule's context and
    ranks just below the rule."""
    rules = [m for m in memories if m["type_hint"] in ("pattern", "correction", "security") and m.get("confirmed")
             and not m["tools_used"]]
    for rule in rules:
        probe = words(rule["content"] + " " + rule["resolution"])
        for m in memories:
            if m["type_hint"] != "error" or m is rule:
                continue
            if len(probe & words(m["content"] + " " + m["resolution"])) < 3:
                continue
            if "Seen when:" not in rule["context"]:
                rule["context"] = clip(f"{rule['context']} Seen when: {m['content']}".strip(), CONTEXT_CHARS)
            m["confidence"] = round(min(m["confidence"], rule["confidence"] - 0.05), 3)


def _fixes_over_troubleshooting(memories: list[dict[str, Any]]) -> None:
    """A task that reports a problem ("pods are stuck in ImagePullBackOff") and was solved: its
    steps are mostly the search for the cause, and the error / fix memory of the same calls
    is the lesson. The procedure stays, ranked just below the fix."""
    fixes = [m for m in memories if m["type_hint"] in ("error", "security") and m.get("confirmed")]
    for m in memories:
        if m["type_hint"] != "pattern" or not m["tools_used"] or not PROBLEM_REPORT.search(m["content"][:400]):
            continue
        same = [f["confidence"] for f in fixes if set(f["tools_used"]) & set(m["tools_used"]) or not f["tools_used"]]
        if same:
            m["confidence"] = round(min(m["confidence"], max(same) - 0.05), 3)


def _endorsed_procedures(memories: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """"That's the release checklist from now on": a rule stated about the steps just taken is
    the procedure's endorsement, not a lesson of its own. The procedure keeps the user's
    words in its context and the rule's confidence; the bare rule goes."""
    procs = [m for m in memories if m["type_hint"] in ("pattern", "security") and m["tools_used"]]
    if not procs:
        return memories
    out = []
    for m in memories:
        if not m["tools_used"] and m.get("confirmed") and KEEP_STEPS.search(m["content"]) \
                and len(m["content"].split()) <= 16:
            best = max(procs, key=lambda p: p["confidence"])
            best["confirmed"] = True
            best["confidence"] = round(max(best["confidence"], m["confidence"]) + 0.05, 3)
            best["context"] = clip(f"User: {m['content']} {best['context']}".strip(), CONTEXT_CHARS)
            continue
        out.append(m)
    return out


def _discount_if_abandoned(d: Digest, memories: list[dict[str, Any]]) -> None:
    """The user gave up at the end ("forget it, I'll do it myself"): what the agent did
    taught nothing, so its errors, procedures and weak corrections are not kept. A rule
    or preference the user stated for good still is."""
    last = next((d.text[i] for i in range(len(d.kind) - 1, -1, -1) if d.kind[i] == "user"), "")
    if not last or not GAVE_UP.search(last[:600]):
        return
    for m in memories:
        stated_for_good = m["type_hint"] in ("preference", "pattern", "security") and m.get("confirmed") \
            and not m["tools_used"]
        if stated_for_good:
            continue
        m["confidence"] = round(max(0.0, m["confidence"] - 0.35), 3)
        m["confirmed"] = False


def _supersede_workarounds(memories: list[dict[str, Any]]) -> None:
    """A "sleep and retry" fix never outranks the rule the session states in its place:
    when a stated rule exists, a workaround fix drops below it (usually below the
    confidence floor)."""
    rules = [m for m in memories if m["type_hint"] in ("pattern", "correction") and m.get("confirmed")
             and not m["tools_used"]]            # stated in words, not a procedure of calls
    if not rules:
        return
    top = max(m["confidence"] for m in rules)
    for m in memories:
        if m["type_hint"] in ("error", "pattern") and m["tools_used"] and WORKAROUND.search(m["resolution"]):
            m["confidence"] = round(min(m["confidence"], top - 0.15, 0.45), 3)
            m["confirmed"] = False


def lesson_signals(messages: list[Message], min_confidence: float = 0.5) -> dict[str, Any]:
    """Does this segment teach a confirmed lesson? Stored with the segment's quality
    (``summary.teaches_lesson``) so the memory gate (:mod:`ultron.memory.selection`) reads
    a segment whose trajectory scored low but whose lesson the user stated or confirmed,
    or whose fix reported success: a failed call is often the very reason for the lesson.
    The rules' own extraction decides (a few milliseconds), so the gate and the offline
    extractor never disagree."""
    token = REDACT.set(False)          # counted, never stored: no redaction needed
    try:
        found = [m for m in extract_memories(messages) if m.get("confirmed") and m["confidence"] >= min_confidence]
    finally:
        REDACT.reset(token)
    return {"teaches_lesson": bool(found), "lesson_types": sorted({m["type_hint"] for m in found})}


def extract_from_text(text: str) -> list[dict]:
    """Memory candidates from free text someone shared (not a transcript).

    Numbered / bulleted steps -> a pattern (content = the heading or first sentence);
    an error line with a "fix / solution / resolved by / workaround" sentence -> an
    error; preference sentences -> preferences; anything else -> one memory of the
    type :func:`classify_memory_type` gives, content = the first sentences and
    resolution = the rest. Confidence 0.5-0.65: the text is not checked against an
    outcome."""
    text = cap(text or "", 20000).strip()
    if not text:
        return []
    out: list[dict[str, Any]] = []
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    steps = [ln for ln in lines if re.match(r"^(?:\d+[.)]|[-*•])\s+\S", ln)]
    err = next((ln for ln in lines if EXC_LINE.match(ln) or ERR_LINE.search(ln)), "")
    fix_sents = [s for s in sentences(text) if re.search(
        r"\b(?:fix(?:ed)?|solution|solved|resolved?|workaround|the trick|instead|worked)\b", s, _I)]
    if len(steps) >= 2:
        head = next((ln for ln in lines if ln not in steps), "") or first_sentence(text)
        out.append(candidate("pattern", "procedural", MARKDOWN.sub("", head), "", "\n".join(steps), [], 0.6, None,
                           [text[:2000]]))
    elif err and fix_sents:
        out.append(candidate("error", "procedural", err, "", " ".join(fix_sents[:3]), [], 0.6, None, [text[:2000]]))
    for s in sentences(text):
        if PREF_STANDING.search(s) or PREF_EXPLICIT.search(s) or PREF_LIKE.search(s):
            kind = "procedural" if PREF_STANDING.search(s) else "episodic"
            m = PREF_CUE_START.search(s)
            directive = s[m.start():] if m else s
            out.append(candidate("preference", kind, s, "", directive[:1].upper() + directive[1:], [],
                                 0.6 if kind == "procedural" else 0.5, None, [s]))
    if not out:
        sents = sentences(text)
        content = " ".join(sents[:2]) if sents else text
        rest = " ".join(sents[2:])
        kind_type = classify_memory_type(content, "", rest)
        kind = "episodic" if kind_type in ("life", "preference") else "procedural"
        out.append(candidate(kind_type, kind, content, "", rest, [], 0.5, None, [text[:2000]]))
    _generalise(out)
    return dedupe(out)
