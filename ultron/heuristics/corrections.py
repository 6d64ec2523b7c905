"""``correction`` memories: the user setting the agent right.

A human turn after an agent turn that (a) rejects what the agent did: strong cues
"that's wrong", "I said / meant / wanted", "you should / forgot", "wrong file",
"(please / just) use X instead", ", not X.", "not X, but", "no, use / that's
wrong …"; medium cues "actually, …", "instead", "rather than", "it should be", a
sentence opening with "don't / do not / stop / never / avoid" (a strong cue in a
conditional sentence or in the user correcting their own input - "I realized I
gave the wrong id" - counts as medium); a bare "No, …" only when the agent had not
just asked something and the turn is not a closing ("no, that's all"); or (b)
follows a tool call the user rejected; or (c) is acknowledged by the agent as a
correction ("you're right", "my mistake", "I apologize for the confusion").

content = what the agent did or assumed: the rejected call, else the call since
the previous user turn sharing most words with the correction (with the agent's
matching sentence), else the agent's sentence sharing most words with it;
resolution = "User: <the corrective sentences>" plus "Then: <the agent's next
call>" when that succeeded. Kind procedural when phrased as a rule (an imperative:
"use …", "don't …", "always …"), else episodic.

Confidence: cue 0.60 strong / 0.40 medium / 0.50 after a rejected call / 0.35 by
acknowledgement only; + 0.15 [the agent acknowledged it] + 0.10 [a rejected call
preceded a cued correction] + 0.05 [a concrete alternative is named: use / instead
/ should / rather / want / meant] + 0.05 [the agent's next call succeeded] - 0.05
[every corrective sentence is a question].
"""

from __future__ import annotations

import re
from typing import Any

from ultron.heuristics.candidates import CONTENT_CHARS, candidate
from ultron.heuristics.episodes import ASKS, Call, Digest
from ultron.heuristics.gists import arg_words, call_gist
from ultron.heuristics.lessons import CONVENTION, EXPLICIT_RULE, clauses, correction_type, is_standing, statement
from ultron.heuristics.text import clip, sentences, words

_I = re.IGNORECASE

CORR_STRONG = re.compile(
    r"\b(?:that'?s|that is|this is|it'?s|it is) (?:wrong|incorrect|not (?:right|correct|what i))\b|"
    r"\bnot what i (?:asked|wanted|meant|said)\b|"
    r"\bi (?:said|told you|asked (?:for|you to)|meant|was (?:asking|looking) (?:for|to))\b|"
    r"\bi (?:actually )?wanted\b|"
    r"\byou (?:should(?:n'?t| not| have)?|need to|have to|must|forgot|missed|ignored|misunderstood|"
    r"(?:are|were) (?:wrong|mistaken)|used the wrong)\b|"
    r"\b(?:the )?wrong (?:file|one|flight|path|directory|folder|version|branch|command|name|date|id|number|"
    r"airport|city|reservation|place|answer|approach|tool|column|table|function|method|package|url|port|value)\b|"
    r"(?:^|[,;:]\s*|\bplease\s+|\bjust\s+)use\s+\S+(?:\s+\S+){0,4}?\s+instead\b|,\s*not\s+(?:the\s+|a\s+|an\s+)?[\w.\-/`'\"]+\s*(?:[.!?;:—–]|\s-\s|$)|"
    r"\bnot\s+[\w.\-/`'\"]+\s*,\s*but\b", _I)
# The user correcting their own earlier input, or a conditional: weaker evidence against the agent.
_SELF_OR_IF = re.compile(
    r"\bi(?:'ve| have)? (?:just )?(?:realized|realised|provided|gave|sent|typed|mistyped|mixed up|made a mistake)\b|"
    r"\b(?:if|unless|in case)\b", _I)
_CORR_MEDIUM = re.compile(
    r"^\W*actually\b|\bactually,?\s+(?:i|it|we|the|that|you|my)\b|\binstead\b|\brather than\b|"
    r"(?:^\W*(?:(?:hmm+|um+|uh+|oh|ok(?:ay)?|no|nope|wait|but|and|so|also|hey|erm)\W+)*|[.!?;]\s+)"
    r"(?:please\s+|pls\s+|plz\s+)?(?:don'?t|do not|stop|never|avoid)\s+\w+|"
    r"\b(?:it|that|this|the \w+) should (?:be|have been|use)\b(?! all\b| fine\b| ok(?:ay)?\b| good\b| enough\b| in my\b)",
    _I)
_CORR_NO = re.compile(
    r"^\W*(?:no|nope)\b\s*[,.!:-]*\s*(?:(?:that'?s|it'?s|this is|that is) (?:wrong|not|incorrect)|use\b|not\b|"
    r"instead\b|i said\b|i meant\b|it should\b|you should\b|wrong\b|don'?t\b|do not\b)", _I)
_BARE_NO = re.compile(r"^\W*(?:no|nope)\b\s*[,.!]", _I)
_INSTEAD = re.compile(r"\b(?:use|instead|rather|just|only|go with|should|stick (?:to|with))\b", _I)
_NO_BUT = re.compile(r"^\W*(?:no|nope|not|don'?t|do not|never|stop)\b", _I)
_CLOSING = re.compile(
    r"^\W*(?:no|nope)\W+(?:thanks|thank you|worries|problem|that'?s (?:all|it|ok(?:ay)?|fine|alright|good|everything)|"
    r"it'?s (?:ok(?:ay)?|fine|alright)|need|further|more|nothing|i'?m good|all good)\b", _I)
_ACK = re.compile(
    r"\byou'?re (?:absolutely |completely |quite )?right\b|\bmy (?:mistake|bad|apologies)\b|"
    r"\bapologi[sz]e for (?:the|my|any) (?:mistake|error|confusion|oversight|misunderstanding)|"
    r"\bsorry (?:for|about) (?:the|my) (?:mistake|error|confusion|oversight|misunderstanding)|"
    r"\bi (?:misunderstood|misread|was wrong|made a mistake)\b|\bgood (?:catch|point)\b|"
    r"\blet me (?:correct|fix) (?:that|this|it|my)\b|\bthanks for (?:the )?(?:correction|clarif)", _I)
_FOR_GOOD = re.compile(r"^\W*(?:please\s+|pls\s+)?(?:always|never|only)\s+\w+", _I)
_NEW_VALUE = re.compile(r"\b(?:make|change|move|push|set|switch|bump) (?:it|that|this|them) (?:to |back to )?(?:the )?"
                        r"(?:\d|(?:mon|tues|wednes|thurs|fri|satur|sun)day\b|tomorrow\b|next\b)", _I)
_ALTERNATIVE = re.compile(r"\b(?:use|instead|should|rather|prefer|want(?:ed)?|meant|need|just|only|run|go with)\b", _I)
_IMPERATIVE = re.compile(
    r"^\W*(?:please\s+)?(?:use|don'?t|do not|never|always|stop|avoid|make sure|run|put|keep|call|add|remove|"
    r"write|check|prefer)\b", _I)


def _best_sentence(text: str, probe: set[str], n: int = 220) -> str:
    sents = sentences(text[:3000])
    if not sents:
        return ""
    best, score = sents[0], -1.0
    for s in sents:
        sc = len(words(s) & probe)
        if sc > score:
            best, score = s, sc
    return clip(best, n)


def extract_corrections(d: Digest, task_type: str | None) -> tuple[list[dict[str, Any]], set[int]]:
    out: list[dict[str, Any]] = []
    used: set[int] = set()          # user messages turned into corrections
    last_asst = -1
    prev_user = -1
    for i, k in enumerate(d.kind):
        if k == "assistant":
            last_asst = i
            continue
        if k != "user":
            continue
        if last_asst < 0 or last_asst < prev_user:       # nothing of the agent's to correct
            prev_user = i
            continue
        text = d.text[i]
        prev_text = d.text[last_asst]
        between = [d.calls[p] for j in range(prev_user + 1, i) for p in d.msg_calls.get(j, ())]
        rejected = [c for c in between if c.rejected and c.result_msg > last_asst]
        j, next_text = d.next_assistant_text(i)
        acked = bool(next_text and _ACK.search(next_text[:600]))
        if EXPLICIT_RULE.search(text) and not rejected:
            prev_user = i
            continue                    # stated as a general rule: the stated-lesson rule's memory
        if not (rejected or acked or CORR_STRONG.search(text) or _CORR_MEDIUM.search(text)
                or _BARE_NO.match(text) or (_NO_BUT.match(text) and _INSTEAD.search(text))):
            prev_user = i
            continue                    # cheap exit: no cue anywhere in the turn
        asked = bool(ASKS.search(prev_text[-400:]))
        recent = [c for c in between if not c.housekeeping]
        sents = sentences(text)
        strong = [s for s in sents if CORR_STRONG.search(s) and not _SELF_OR_IF.search(s)]
        weak = [s for s in sents if CORR_STRONG.search(s) and _SELF_OR_IF.search(s)]
        if sents and sents[0] not in strong and (
                _CORR_NO.search(text) or (not asked and _BARE_NO.match(text) and not _CLOSING.search(text))
                # "no / not X - use Y": a proposal turned down with the way to do it instead
                or (_NO_BUT.match(text) and not _CLOSING.search(text) and _INSTEAD.search(text))):
            strong.insert(0, sents[0])
        medium = [s for s in sents if s not in strong and (s in weak or _CORR_MEDIUM.search(s))]
        if strong:
            base, cue = 0.60, strong + [s for s in medium][:1]
        elif rejected:
            base, cue = 0.50, (medium or sents[:4])
        elif medium:
            # "don't X ... always Y": turned down, with the way to do it from now on
            base, cue = (0.60 if any(_FOR_GOOD.search(x) for x in clauses(text)) else 0.40), medium
        elif acked:
            base, cue = 0.35, sents[:2]
        else:
            prev_user = i
            continue
        prev_user = i
        if base < 0.6 and not rejected and any(is_standing(x) for x in clauses(text)):
            continue                    # a weak cue in a rule stated for good: the stated-lesson rule's memory
        if not cue:
            continue
        probe = words(" ".join(cue))
        # what the agent did or assumed
        if rejected:
            c = rejected[-1]
            did = f"Agent tried {call_gist(c.name, c.args, c.raw, 180)} (rejected by the user)"
            tools = [c.name]
        else:
            said = _best_sentence(prev_text, probe) if prev_text else ""
            if len(said.split()) < 4:
                said = ""
            said_hits = len(words(said) & probe) if said else 0
            c = None
            if recent:        # the call the correction is most about (the last one on ties)
                c = max(reversed(recent), key=lambda x: len(arg_words(x) & probe))
                if not (arg_words(c) & probe) and said_hits:
                    c = None
            if c is not None:
                did = f"Agent ran {call_gist(c.name, c.args, c.raw, 160)}"
                if said_hits and len(did) + len(said) < CONTENT_CHARS - 10:
                    did += f"; said: {said}"
                tools = [c.name]
            elif said:
                did = f"Agent said: {said}"
                tools = []
            else:
                continue
        resolution = "User: " + clip(" ".join(cue[:4]), 420)
        followed = False
        if j >= 0:
            nxt: list[Call] = []
            for jj in range(j, min(j + 4, len(d.kind))):        # the agent may act a message later
                if d.kind[jj] == "user":
                    break
                if d.kind[jj] == "assistant" and d.msg_calls.get(jj):
                    nxt = [d.calls[p] for p in d.msg_calls[jj] if not d.calls[p].housekeeping]
                    if nxt:
                        break
            if nxt and nxt[0].error is False:
                followed = True
                resolution += f" Then: {call_gist(nxt[0].name, nxt[0].args, nxt[0].raw, 160)}"
                tools.append(nxt[0].name)
        cue_text = " ".join(cue)
        conf = (base + (0.15 if acked else 0.0) + (0.10 if rejected and base != 0.50 else 0.0)
                + (0.05 if _ALTERNATIVE.search(cue_text) else 0.0) + (0.05 if followed else 0.0)
                - (0.05 if all(x.rstrip().endswith("?") for x in cue) else 0.0))
        kind = "procedural" if any(_IMPERATIVE.match(x) for x in cue) or CONVENTION.search(cue_text) else "episodic"
        if kind == "episodic" and not rejected:
            conf -= 0.10          # about this task's details ("I wanted the 3 pm flight"): little to reuse
            if _NEW_VALUE.search(cue_text):
                conf -= 0.10      # "make it the 10th": a new value for this task, nothing to carry over
        # content is the lesson, stated as the user put it; what the agent did is its context
        ranked = sorted(cue, key=lambda x: (not _ALTERNATIVE.search(x), x.rstrip().endswith("?")))
        rule = statement(ranked[0]) if ranked else ""
        if len(rule.split()) < 3:
            rule = statement(" ".join(cue[:2]))
        task = d.task_context(last_asst, skip=text)
        context = " ".join(p for p in (task, f"The agent had: {did[len('Agent '):] if did.startswith('Agent ') else did}")
                           if p)
        typ = correction_type(cue_text)
        c = candidate(typ, kind, rule or did, context, resolution, tools, conf, task_type, [text])
        c["confirmed"] = base >= 0.5 or acked
        out.append(c)
        if conf >= 0.5 or rejected:
            used.add(i)         # a weak one ("are you sure?") neither blocks a procedure nor hides a rule
    return out, used
