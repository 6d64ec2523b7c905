"""Lessons taught in words: stated rules, team conventions, security lessons, prose fixes.

The other rules read lessons off what the agent *did* (a failed call and the call
that fixed it, a procedure that worked). Much of what a session teaches is only
*said*: the user states a rule ("in general, wait for the DB health check before
running migrations"), a team convention ("we use pnpm here"), a security lesson
("never commit .env; rotate that key"), or the agent explains a fix in prose and the
user confirms it worked. This module finds those.

Who says it matters. A user's standing statement is evidence by itself (the user
knows their project); the agent's statement counts only when the user agrees
right after ("makes sense", "yes, let's do that") or confirms it worked.

The type of a stated lesson (:func:`lesson_type`), checked in this order:

* ``security``: about credentials or exposure (a secret, token, key, password,
  ``.env``, leaked / exposed, rotate / revoke, plaintext, permissions on a key);
* ``correction``: a team or project convention ("we use …", "in this repo …",
  "our convention …", "here we …");
* ``pattern``: an explicit general rule ("in general", "as a rule", "rule of thumb",
  "lesson learned", "best practice", "next time", "always … before …", "never …
  without …"), or a rule with its reason ("… because / otherwise / so that …");
* ``preference``: anything else the user wants for good ("always answer in British
  English", "from now on keep replies short").

Confidence: a user-stated rule 0.70 (+0.10 the agent acknowledged it, +0.05 a reason
is given); an agent-stated rule 0.45 (+0.25 the user agreed); a prose fix 0.45
(+0.30 the user confirmed it, +0.05 a command or code is given). ``confirmed`` is
set on each candidate the user stated or confirmed: the memory gate lets such a
lesson through from a segment whose trajectory score is below the memory threshold
(a failed call is often the very reason for the lesson).
"""

from __future__ import annotations

import re
from typing import Any

from ultron.heuristics.candidates import candidate
from ultron.heuristics.cues import SECURITY_ACTION, SECURITY_TOPIC, is_security_lesson, user_confirms
from ultron.heuristics.episodes import ASKS, Digest
from ultron.heuristics.errors import CAUSE, ERR_LINE, EXC_LINE, error_line
from ultron.heuristics.gists import call_gist
from ultron.heuristics.text import clip, norm_key, sentences

_I = re.IGNORECASE

_AGREE = re.compile(
    r"^\W*(?:yes|yep|yeah|yup|agreed|exactly|right|correct|noted|fair|good (?:call|idea|point|lesson|rule|catch)|makes sense|sounds (?:good|right)|"
    r"let'?s do (?:that|it)|do (?:that|it)|please do|ok(?:ay)?,? (?:do|let'?s|go|sounds)|true|indeed|absolutely|"
    r"definitely)\b", _I)

#: the agent taking a stated rule on board
_ACKED = re.compile(
    r"\b(?:got it|understood|noted|will do|good (?:call|point)|makes sense|you'?re right|i'?ll "
    r"(?:remember|keep|use|make sure|stick|follow|do that|wait|always|never)|thanks for|"
    r"will (?:use|keep|remember|follow|do))\b", _I)

# -- what a stated lesson is about ----------------------------------------------------------
CONVENTION = re.compile(
    r"\bwe(?:'ve| have)? (?:\w+ )?(?:use|always|never|don'?t|do not|only|prefer|stick|standardi[sz]ed|went with|deploy|"
    r"write|keep|name|put|run|follow|avoid|pin|tag|squash|rebase|ripped|removed|dropped|banned|moved|switched|"
    r"migrated|replaced|ban|forbid|require|talk|address|say|call|spell)\b|\b(?:in|for|across) (?:our|the) (?:app|"
    r"product|docs|brand|service|platform|site|emails?)\b|\b(?:brand|voice|style) (?:voice |style )?guide\b|\b\w+ (?:in )?here (?:are|is|use|uses|go|goes|follow|follows|must|"
    r"should|need)\b|\b(?:is|are) banned\b|\b\S+ only\b(?= *(?:[.!,;—-]|$))|\b(?:in|for|across) (?:this|our|the) (?:repo(?:sitory)?|project|"
    r"codebase|team|company|org(?:anization)?|monorepo|shop|stack)\b|\bour (?:convention|team|style ?guide|"
    r"standard|codebase|repo|policy|rule|setup|ci|linter|stack)\b|\bhere we\b|\bhouse (?:style|rule)\b|"
    r"\b(?:team|project|repo) (?:convention|rule|policy|standard)\b|\bstyle ?guide\b|\b(?:applies|goes) (?:to|for) "
    r"(?:all|every|any)\b|\b(?:in|across|for) (?:all|every) (?:of )?(?:our|the) \w+|\bthis (?:repo|project|codebase) (?:uses|"
    r"doesn'?t|does not|is on|has)\b", _I)
#: an explicit lesson: stated as a rule, it is one whatever else the sentence says
EXPLICIT_RULE = re.compile(
    r"\bin general\b|\bgenerally(?: speaking)?,|\b(?:as a|general|golden) rule\b|\brule (?:of thumb|for|here|is)\b|"
    r"\blessons? (?:learn[et]d?|for next time|here)\b|\bthe (?:lesson|takeaway|moral)(?: here)? is\b|\btake ?aways?\b|"
    r"\bbest practice\b|\bnext time\b|\bfor (?:future|next) (?:reference|time)\b|\bnote to (?:self|future)\b|"
    r"\bworth remembering\b|\bthe thing (?:i'?d|to) (?:take away|remember)\b|\bthe (?:right|proper|correct|real|"
    r"better) (?:way|fix|approach|thing) (?:is|would be)\b", _I)
RULE_CUE = re.compile(
    EXPLICIT_RULE.pattern + r"|\b(?:going|moving) forward\b(?! with)|\bfrom now on\b|\bin the future\b|"
    r"\bremember to\b|\bmake sure (?:to|you|that)\b|\bwhenever\b|\bevery time\b|"
    r"(?:^\W*|[,;:—-]\s*|\b(?:should|must|to|and|please)\s+)(?:always|never)\b.{3,80}\b(?:before|after|until|without|"
    r"unless|first)\b|\binstead of (?:sleep|waiting|"
    r"retry|retrying|polling|hard-?coding)", _I)
_PLEASE = re.compile(r"^\W*(?:\w+\W+){0,2}?(?:please|pls|plz)\b", _I)
_FOR_ME = re.compile(
    r"\b(?:for|with|to) me\b|\b(?:give|show|send|tell|write|answer|ask) me\b|\bi (?:really |generally |strongly |much )?(?:prefer|like|love|hate|want|use|need|can'?t "
    r"read|find|'d rather|would rather)\b|\bmy (?:preference|taste|eyes|style)\b|\bgeneral preference\b", _I)
#: a request ("... please", "pls"): with a standing scope it asks for good
_ASKED = re.compile(r"\b(?:please|pls|plz)\b|\bi(?:'m| am) going to (?:paste|send|post|use|share|publish|print)\b", _I)
_TALKING = re.compile(
    r"\b(?:answers?|repl(?:y|ies)|responses?|emojis?|tone|spelling|british|american|english|concise|verbose|terse|"
    r"bullet points?|formal|casual|address me|call me|explanations?)\b", _I)
_OWN_STEP = re.compile(r"^\W*(?:i|i'?ll|let me|i'?m|i will|want me|shall i|should i)\b", _I)
_REASON = re.compile(r"\b(?:because|otherwise|so that|since|or else|to avoid|to prevent|that way)\b", _I)
_STANDING = re.compile(
    r"\bnot (?:just|only) (?:today|now|this|here|for this)\b|\bfor (?:anything|everything|all)\b|\bin future\b|"
    r"\bas a general (?:thing|rule)\b|\bfor always\b|\bkeep (?:doing|it) (?:it )?(?:that|this) way\b|"
    r"\bfrom here on\b|\bin (?:anything|everything) you\b|\b(?:any|every|all) (?:\w+ )?(?:\w+s )?(?:you|that you) (?:write|give|make|"
    r"create|produce|send|generate)\b|\beverything you\b|\bfor (?:all|any) (?:future|my)\b|"
    r"\b(?:always|never|from now on|going forward|by default|whenever|every time|in the future|for (?:all|every)|"
    r"(?:all|every) (?:of )?your|in (?:all|every|each) (?:answer|reply|response|message|commit|pr)s?)\b", _I)
RESPONSE_STYLE = re.compile(
    r"\b(?:answers?|repl(?:y|ies)|respon(?:d|ses?)|explanations?|explain|tone|emojis?|english|spelling|language|"
    r"concise|short|brief|terse|verbose|bullet(?: points)?|formatting|summar\w*|wording|words|sentences?|"
    r"paragraphs?|prose|headings?|markdown|voice|formal|casual|address me|call me|talk|write|writing|style|"
    r"comments?|docstrings?|commit messages?|naming|tabs|spaces|indent\w*|quotes|semicolons?|oxford comma)\b", _I)
BEFORE_START = re.compile(
    r"\bbefore we (?:start|begin|get (?:started|going)|dive in|kick off)\b|\bfor (?:this whole|the whole|the rest of "
    r"(?:this|the)|this) (?:session|conversation|chat)\b|\bthroughout\b|\bground rules?\b|\ba (?:few|couple of) "
    r"(?:things|preferences|ground rules)\b", _I)
_IMPERATIVE = re.compile(
    r"^\W*(?:please\s+)?(?:(?:always|never|just|only)\s+)?(?:use|don'?t|do not|never|always|keep|write|answer|reply|"
    r"respond|give|put|add|avoid|stop|prefer|make|run|wait|check|pin|call|name|format|stick|start|end|skip|no|"
    r"include|spell|sign|address|be|stay|limit|default)\b", _I)
_LEAD_IN = re.compile(
    r"^(?:(?:ok(?:ay)?|so|also|and|but|hmm+|um+|uh+|btw|by the way|oh|one more thing|one thing|quick note|note|fyi|heads up|hey|hi|"
    r"well|right|alright|actually|no|nope|yes|yeah|anyway|in general|generally(?: speaking)?|as a (?:general )?rule|"
    r"lessons? learn[et]d?|the (?:lesson|takeaway|moral)(?: here)? is(?: that)?|takeaway|rule of thumb|"
    r"for (?:future|next) (?:reference|time)|note to (?:self|future \w+)|going forward|moving forward|"
    r"before we (?:start|begin|get started)|for the record|important|remember)\s*[:,.!;-]*\s*)+", _I)
_OWN_FUTURE = re.compile(r"^\W*(?:(?:ok(?:ay)?|got it|sure|alright|thanks?)\W+)?(?:i'?ll|i will|i'?m|i am|i'?d|"
                         r"i would|we'?ll|we will|let me|i can|i need|i want to|i was)\b", _I)
ASKING = re.compile(r"^\W*(?:(?:quick one|quick question|question|q|hey|hi|so|also|btw|ok(?:ay)?)\W+)?(?:what|how|why|where|when|which|who|whose|can you|could you|would you|will you|do you|"
                     r"does|did|is|are|was|were|should i|shall we)\b", _I)
_QUESTION_ONLY = re.compile(r"\?\s*$")
_CLOSING_ONLY = re.compile(r"^\W*(?:thanks?|thank you|ok(?:ay)?|great|perfect|cool|nice|bye)\W*$", _I)
WORKAROUND = re.compile(r"\bsleep\s+\d|\btime\.sleep\(|\bwait(?:ing)? (?:\d+|a few|some) (?:s|sec|seconds?|min)|"
                        r"\bretry(?:ing)? (?:loop|until)|\bfor i in \{?\d|\buntil\b.*\bdo\b|\btimeout \d+", _I)


def lesson_type(sentence: str) -> str:
    """The memory type of a standing statement (the order is the module docstring's)."""
    if SECURITY_TOPIC.search(sentence) and (SECURITY_ACTION.search(sentence) or _STANDING.search(sentence)
                                            or RULE_CUE.search(sentence)):
        return "security"
    if _FOR_ME.search(sentence) or _TALKING.search(sentence) or (_PLEASE.match(sentence)
                                                                   and not CONVENTION.search(sentence)):
        return "preference"       # what this user wants, or how to talk to them, however it is phrased
    if EXPLICIT_RULE.search(sentence):
        return "pattern"
    if CONVENTION.search(sentence):
        return "correction"
    if RULE_CUE.search(sentence) and not re.search(r"^\W*(?:from now on|going forward|in the future)\b", sentence, _I):
        return "pattern"
    if _REASON.search(sentence) and not RESPONSE_STYLE.search(sentence):
        return "pattern"
    if RESPONSE_STYLE.search(sentence) or re.search(r"\bi (?:prefer|like|love|hate|want|'d rather)\b", sentence, _I):
        return "preference"
    if re.search(r"^\W*(?:from now on|going forward|in the future|from here on)\b", sentence, _I):
        return "preference"       # a standing instruction to the agent
    return "pattern" if RULE_CUE.search(sentence) else "preference"


def correction_type(text: str) -> str:
    """The type of a correction: ``security`` when it is a security rule, ``preference``
    when it says what this user wants from now on, else ``correction``."""
    if lesson_type(text) == "security":
        return "security"
    if (_FOR_ME.search(text) or _TALKING.search(text)) and _STANDING.search(text) and not CONVENTION.search(text):
        return "preference"
    return "correction"


def statement(sentence: str) -> str:
    """The rule itself: lead-ins ("ok, one more thing:", "in general,") dropped, capitalised."""
    s = _LEAD_IN.sub("", sentence).strip(" -–—:;,")
    if not s:
        return ""
    return s[:1].upper() + s[1:]


_ANY_CASE_SPLIT = re.compile(r"(?<=[.?!])\s+(?=[\w\"'`(])")


def clauses(text: str) -> list[str]:
    """Sentences, also where people type on in lowercase ("which timezone is that?? ok, a
    thing for the future: always ...")."""
    out: list[str] = []
    for s in sentences(text):
        out.extend(x for x in _ANY_CASE_SPLIT.split(s) if x.strip())
    return out


#: Every cue of :func:`is_standing` contains one of these (checked by a test): a substring
#: test first keeps the regular expressions off the ordinary sentences of a session.
_STANDING_WORDS = ("general", "rule", "lesson", "take", "best practice", "next time", "future", "note to",
                   "worth", "thing", "right", "proper", "correct", "real", "better", "forward", "from now",
                   "remember", "make sure", "whenever", "every", "always", "never", "instead", "we", "here",
                   "our", "this repo", "this project", "this codebase", "banned", "only", "guide", "applies",
                   "goes for", "across", "for all", "in all", "me", "not just", "not only", "anything",
                   "as a", "default", ".env", "secret", "token", "key", "password", "credential", "leak",
                   "expos", "plain", "vault", "chmod", "0600", "readable", "card", "cvv", "cvc", "dotenv",
                   "passphrase", "kms")


def is_standing(sentence: str) -> bool:
    """A sentence that states something for good: a rule cue, a convention, a security rule,
    or what the user wants of everything the agent does for them."""
    low = sentence.lower()
    if not any(w in low for w in _STANDING_WORDS):
        return False              # none of the words any of these cues needs: skip the regexes
    return standing_cues(sentence)


def standing_cues(sentence: str) -> bool:
    """:func:`is_standing` without its word prefilter."""
    return bool(RULE_CUE.search(sentence) or CONVENTION.search(sentence)
                or ((_FOR_ME.search(sentence) or _ASKED.search(sentence)) and _STANDING.search(sentence))
                or (SECURITY_TOPIC.search(sentence) and SECURITY_ACTION.search(sentence)
                    and (_IMPERATIVE.match(statement(sentence)) or _STANDING.search(sentence))))


def _stated_sentences(text: str) -> list[tuple[str, bool]]:
    """(sentence, standing) pairs: a sentence with a cue, and after "before we start:"
    every imperative sentence of the same message."""
    out: list[tuple[str, bool]] = []
    opening = False
    for s in clauses(text[:3000]):
        if len(s) < 10 or _QUESTION_ONLY.search(s) or _CLOSING_ONLY.match(s) or ASKING.match(s):
            if BEFORE_START.search(s):
                opening = True
            continue
        if BEFORE_START.search(s):
            opening = True
            rest = statement(BEFORE_START.split(s, maxsplit=1)[-1]) if BEFORE_START.search(s) else s
            if len(rest.split()) >= 3:
                out.append((rest, True))
            continue
        if _OWN_FUTURE.match(s) and not (_FOR_ME.search(s) and _STANDING.search(s)):
            continue              # "I'll make sure to have my id next time": the speaker's own plan
        if is_standing(s):
            out.append((s, True))
        elif opening and _IMPERATIVE.match(statement(s)):
            out.append((s, True))
    return out


def extract_stated(d: Digest, task_type: str | None, skip: set[int]) -> tuple[list[dict[str, Any]], set[int]]:
    """Rules, conventions and security lessons the user states, or the agent states and
    the user agrees with. Returns the candidates and the user messages used."""
    out: list[dict[str, Any]] = []
    used: set[int] = set()
    seen: set[str] = set()
    for i, k in enumerate(d.kind):
        if k == "user" and i not in skip:
            picked = _stated_sentences(d.text[i])
            all_sents = clauses(d.text[i][:3000]) if picked else []
            stated = {x for x, _ in picked}      # each is its own memory, never another's elaboration
            for s, _ in picked:
                rule = statement(s)
                if len(rule.split()) < 3 or norm_key(rule) in seen:
                    continue
                seen.add(norm_key(rule))
                typ = lesson_type(s)
                j, reply = d.next_assistant_text(i)
                acked = bool(reply) and bool(_ACKED.search(reply[:400]))
                reason = [x for x in all_sents if x != s and _REASON.search(x)][:1]
                has_reason = bool(reason or _REASON.search(s))
                # what the user says right after the rule elaborates it ("it's structlog everywhere - ...")
                at = all_sents.index(s) if s in all_sents else -1
                follow = [x for x in all_sents[at + 1:at + 3] if at >= 0 and not ASKING.match(x) and x not in stated
                          and not x.rstrip().endswith("?") and x not in reason and len(x) >= 12]
                reason = follow + reason
                conf = 0.70 + (0.10 if acked else 0.0) + (0.05 if has_reason else 0.0)
                if typ == "preference" and not _STANDING.search(s) and not BEFORE_START.search(d.text[i]):
                    conf -= 0.10
                resolution = clip(" ".join([rule] + reason[:3]), 560)
                workaround = _workaround(d, i)
                if workaround and typ == "pattern":
                    resolution += f" (Instead of the workaround: {workaround}.)"
                kind = "episodic" if typ == "preference" and not _STANDING.search(s) else "procedural"
                c = candidate(typ, kind, rule, _context(d, i, typ), resolution, [], conf, task_type, [d.text[i]])
                c["confirmed"] = True
                out.append(c)
                used.add(i)
        elif k == "assistant" and d.text[i] and not d.msg_calls.get(i):
            nxt = d.next_user_text(i)
            agreed = bool(nxt) and (bool(_AGREE.match(nxt)) or user_confirms(nxt))
            sents = sentences(d.text[i][:3000])
            for at, s in enumerate(sents):
                if not EXPLICIT_RULE.search(s) or ASKS.search(s) or len(s) < 20:
                    continue
                if re.search(r"^\W*(?:i|i'?ll|let me|i'?m|i will)\b", s, _I):
                    continue         # the agent's own next step, not a rule
                rule = statement(s)
                if len(rule.split()) < 4 or norm_key(rule) in seen:
                    continue
                seen.add(norm_key(rule))
                typ = lesson_type(s)
                conf = 0.45 + (0.25 if agreed else 0.0)
                more = [x for x in sents[at + 1:at + 3] if not ASKS.search(x) and not _OWN_STEP.match(x)]
                c = candidate(typ, "procedural", rule, _context(d, i, typ), " ".join([rule] + more), [], conf,
                              task_type, [s])
                c["confirmed"] = agreed
                out.append(c)
    return out, used


def _context(d: Digest, i: int, typ: str) -> str:
    task = d.task_context(i)
    return ("Applies when: " + task[len("Task: "):]) if task.startswith("Task: ") else task


def _workaround(d: Digest, i: int) -> str:
    """A sleep / retry call of the same episode that a stated rule replaces."""
    ep = d.episode_of[i]
    for c in d.calls:
        if d.episode_of[c.msg] == ep and WORKAROUND.search(c.raw or ""):
            m = WORKAROUND.search(c.raw)
            return clip(c.raw[max(0, m.start() - 30):m.end() + 30].replace("\\n", " "), 80)
    return ""


# -- a fix explained in prose, confirmed by the user -----------------------------------------
_FIX_PROSE = re.compile(
    r"\b(?:you(?:'ll)? (?:need|have|want|should|can|must) (?:to )?|the (?:fix|solution|cause|culprit|problem|issue) "
    r"(?:is|was)|(?:is|was) (?:caused|happening) (?:by|because)|because\b|means\b|instead\b|make sure\b|"
    r"(?:add|set|run|install|change|replace|update|upgrade|downgrade|pin|remove|delete|rename|move|enable|disable|"
    r"export|use|switch|try|restart|reload|clear|rebuild|bump|increase|raise|lower|reduce|configure|point|mount|"
    r"grant|give|allow|pass|specify|call|regenerate|commit|re-?run|create|edit|open|connect|stop|start|kill|map|"
    r"free|delete|wait|bind|expose|drop|reset|log ?in|log ?out|chmod|chown|source)(?:s|ing)?\b)", _I)
#: a user reporting a problem ("the task dies", "isn't picking up", "getting 403s")
PROBLEM_REPORT = re.compile(
    r"\b(?:crash(?:es|ed|ing)?|broke|broken|fails?|failing|failed|errors?|exceptions?|hangs?|hanging|stuck|"
    r"mismatch(?:es)?|nonsense|bug(?:gy)?|timeouts?|timed out|refused|rejected|denied|dies|died|garbled|blank|spam|"
    r"(?:does|did|is|was)n'?t (?:work|working|load|start|build|run|connect|arrive|show)|wrong|missing|not found)\b|"
    r"\bweird\b|\bgarbled\b|\bcomes? out (?:like|as|wrong|garbled|broken)\b|\bshows? up as\b|\bwhat gives\b|"
    r"\b(?:isn'?t|is not|aren'?t|not) (?:working|showing|loading|picking up|starting|connecting)\b|"
    r"\bkeeps? (?:\w+ing|dying|failing)\b|\bdies\b|\bis (?:red|blank|broken|down|hanging)\b|\bblank page\b|"
    r"\b(?:i(?:'m| am)? (?:get|getting|seeing|hitting)|(?:it|this|the \w+) (?:fails|failed|errors?|crashes|"
    r"breaks|throws|dies)|error\b|exception\b|traceback\b|fails? with\b|won'?t (?:start|build|run|compile|"
    r"connect|install)|doesn'?t (?:work|start|build|run|compile|connect)|can'?t (?:connect|install|build|run|push|"
    r"pull|login|log in))", _I)
_FENCED = re.compile(r"```[^\n]*\n(.*?)```", re.DOTALL)
_INLINE = re.compile(r"`([^`\n]{3,120})`")


def _code_lines(text: str) -> list[str]:
    """Commands and config lines an answer gives: fenced blocks first, then inline code that
    reads like a command or a setting (has a space, ``=`` or ``:`` in it)."""
    text = text[:4000]
    out: list[str] = []
    for m in _FENCED.finditer(text):
        # a command continued with "\" over several lines is one command
        for ln in m.group(1).replace("\\\n", " ").splitlines():
            ln = re.sub(r"\s{2,}", " ", ln.strip())
            if ln and not ln.startswith(("#", "//")) and ln not in out:
                out.append(ln)
    for m in _INLINE.finditer(_FENCED.sub(" ", text)):
        x = m.group(1).strip()
        if re.search(r"[\s=:]", x) and x not in out:
            out.append(x)
    return out[:4]


_PASTED_ERROR = re.compile(r"\S:\s.*\b(?:error|exception|fault|failed|failure|refused|denied|timeout)\b|"
                           r"\b[A-Z_]{4,}\b.*\b(?:error|failed)\b|^\W*(?:error|fatal|warn(?:ing)?)\b", re.IGNORECASE)


def _error_text(d: Digest, i: int) -> str:
    """The error a user message pastes or describes, one line."""
    text = d.text[i]
    lines = [ln.strip().strip("`") for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if EXC_LINE.match(ln) or ERR_LINE.search(ln):
            return clip(ln, 200)
    # a pasted message names the error ("...: exec format error"), the user's prose around it does not
    pasted = [ln for ln in lines if _PASTED_ERROR.search(ln)]
    if pasted:
        return clip(pasted[0], 200)
    m = PROBLEM_REPORT.search(text)
    if not m:
        return ""
    return clip(next((s for s in sentences(text) if PROBLEM_REPORT.search(s)), text), 200)


def _fix_prose(text: str) -> tuple[list[str], list[str]]:
    """(fix sentences, command / code lines) of an agent's answer."""
    sents = [x for x in sentences(text[:4000]) if _FIX_PROSE.search(x) and len(x) >= 15
             and not (ASKS.search(x) and not _CAUSE_OR_FIX.search(x))]
    code = _code_lines(text)
    if not sents and code:        # the commands say it: their sentence is the fix
        sents = [x for x in sentences(text[:1500]) if len(x) >= 15][:2]
    return sents, code


_CAUSE_OR_FIX = re.compile(r"\b(?:because|means|the (?:fix|cause|problem|issue) is|you need|add|set|raise|install|"
                           r"run|use)\b", _I)
_DID_IT = re.compile(r"\bi (?:ran|did|applied|added|changed|set|installed|restarted|pushed|enabled|bumped|raised|"
                     r"moved|switched|updated|edited|went ahead|tried|removed|followed)\b|\b(?:done|applied)\b", _I)
_TROUBLE_WINDOW = 40      # messages searched back from a confirmation for the problem


def extract_prose_fixes(d: Digest, task_type: str | None, fixed_errors: set[int]) -> list[dict[str, Any]]:
    """The user confirms a fix the agent explained in words: the problem (a failed call not
    fixed by a later call, or an error the user reports), the agent's explanation before
    the confirmation (its fix sentences and commands), and the confirmation."""
    out: list[dict[str, Any]] = []
    done: set[str] = set()
    result_call = {c.result_msg: c for c in d.calls if c.result_msg >= 0}
    for i, k in enumerate(d.kind):
        if k != "user" or not user_confirms(d.text[i]):
            continue
        # the problem: the latest failed call or reported error before the confirmation
        trouble, err, tool = -1, "", ""
        for t in range(i - 1, max(-1, i - _TROUBLE_WINDOW), -1):
            if d.kind[t] == "tool":
                c = result_call.get(t)
                if c is not None and c.error and not c.rejected and not c.housekeeping:
                    if c.pos in fixed_errors:
                        break          # a later call fixed it: the error rule's memory
                    trouble, err, tool = t, error_line(c.result), c.name
                    break
            elif d.kind[t] == "user" and t != i:
                e = _error_text(d, t)
                if e:
                    trouble, err = t, e
                    break
        if trouble < 0 or not err:
            continue
        # the explanation: the agent's answer between problem and confirmation with the most fix content
        best: tuple[int, int, list[str], list[str]] | None = None
        for j in range(trouble + 1, i):
            if d.kind[j] != "assistant" or not d.text[j]:
                continue
            sents, code = _fix_prose(d.text[j])
            weight = len(sents) + 2 * bool(code)
            if sents and (best is None or weight >= best[0]):
                best = (weight, j, sents, code)
        if best is None:
            continue
        _, j, sents, code = best
        key = norm_key(err)
        if key in done:
            continue
        done.add(key)
        confirm = d.text[i]
        fix = clip(" ".join(sents[:3]), 380)
        # the agent's diagnosis, when an earlier answer gave it ("OOMKilled, exit code 137: ...")
        cause = next((x for t in range(trouble + 1, j) if d.kind[t] == "assistant" and d.text[t]
                      for x in sentences(d.text[t][:2000]) if CAUSE.search(x) and x not in sents
                      and not _OWN_STEP.match(x) and len(x) >= 20), "")
        resolution = (("Run: " + "; ".join(code[:3]) + "\n") if code else "") + fix + (
            f"\nCause: {clip(cause, 200)}" if cause else "")
        typ = "security" if is_security_lesson(" ".join(sents + code)) else "error"
        head = f"{tool} failed: {err}" if tool else err
        conf = 0.45 + 0.30 + (0.05 if code else 0.0) + (0.05 if _DID_IT.search(confirm[:300]) else 0.0)
        c = candidate(typ, "procedural", head, d.task_context(trouble),
                      resolution + f"\nConfirmed by the user: {clip(confirm, 120)}", [tool] if tool else [], conf,
                      task_type, [d.text[trouble][:400] if d.kind[trouble] == "user" else ""])
        c["confirmed"] = True
        out.append(c)
    return out


# -- security lessons ---------------------------------------------------------------------------
_MODAL = re.compile(r"\b(?:must|never|always|should|don'?t|do not|treat|need to|has to|have to|make sure)\b", _I)
_SEC_VERB = re.compile(r"\b(?:rotat\w*|revok\w*|regenerat\w*|deactivat\w*|invalidat\w*|roll(?:ed)?|reissu\w*)\b", _I)
_DONE_REPORT = re.compile(r"^\W*(?:(?:ok(?:ay)?|done|so)\W+)?(?:i(?:'ve| have)? )?(?:rotated|revoked|deleted|removed|"
                          r"changed|regenerated|deactivated|reset|fixed|did)\b", _I)
_USER_DID = re.compile(r"\b(?:i(?:'ve| have)?|we(?:'ve| have)?|just|already)\s+(?:\w+\s+)?(?:rotated|revoked|"
                       r"regenerated|deactivated|rolled|reset|changed|deleted)\b|^\W*(?:rotated|revoked|regenerated|"
                       r"deactivated|rolled|reset|changed|deleted)\b|\b(?:i'?m|we'?re) (?:rotating|revoking|rolling)\b", _I)
_SEC_CALL = re.compile(
    r"\b(?:chmod|update-access-key|delete-access-key|create-access-key|revoke|rotate|filter-repo|bfg|git rm --cached|"
    r"\.gitignore|secrets? (?:set|create|put)|gh secret|auth (?:login|refresh)|add-mask|vault)\b", _I)


def extract_security_lessons(d: Digest, task_type: str | None, sighting: str = "") -> list[dict[str, Any]]:
    """One security lesson per segment: the sentence that best says what to do about a
    credential or an exposure (rotate / revoke it, keep it out of git, chat and logs,
    restrict a key's permissions), by the user or by the agent; the calls that did it
    are its steps. ``sighting`` says where a secret was seen in plain text, if one was."""
    ranked: list[tuple[int, int, str, int]] = []
    for i, k in enumerate(d.kind):
        if k not in ("user", "assistant") or not d.text[i]:
            continue
        for n, s in enumerate(sentences(d.text[i][:4000])):
            if len(s) < 20 or not is_security_lesson(s) or (k == "assistant" and _OWN_STEP.match(s)):
                continue
            if s.rstrip().endswith("?"):
                continue
            directive = bool(_MODAL.search(s) or _IMPERATIVE.match(statement(s)))
            report = bool(_DONE_REPORT.match(s))       # "Rotated both, old key deactivated": what was done
            score = ((2 if k == "user" and not report else 1) + (1 if directive else 0)
                     + (1 if _SEC_VERB.search(s) else 0) - (1 if report else 0)
                     + (1 if len(s) >= 60 else 0) - (2 if re.match(r"^\W*\d", s) else 0))
            ranked.append((-score, len(ranked), s, i))
    if not ranked:
        return []
    ranked.sort()
    _, _, best, at = ranked[0]
    others = [s for _, _, s, _ in ranked[1:6] if norm_key(s) != norm_key(best)]
    # its steps: the calls that are plainly about credentials, then what was changed once the
    # exposure was first spoken of (the remediation: a hook, a config line, a new secret)
    first = min(i for _, _, _, i in ranked)
    calls = [c for c in d.calls if c.error is False and _SEC_CALL.search(c.raw or "")]
    calls += [c for c in d.calls if c.error is False and c.msg > first and c.kind != "read" and not c.housekeeping
              and c not in calls]
    calls = sorted(calls[:4], key=lambda c: c.pos)
    steps = "; ".join(call_gist(c.name, c.args, c.raw, 90) for c in calls)
    resolution = clip(" ".join([statement(best)] + others[:4]), 480) + (f" Done: {steps}." if steps else "")
    by_user = d.kind[at] == "user"
    later_users = [d.text[j] for j in range(at + 1, len(d.kind)) if d.kind[j] == "user"]
    last_user = later_users[-1] if later_users else ""
    agreed = bool(last_user) and (user_confirms(last_user) or bool(_AGREE.match(last_user))
                                  or bool(re.search(r"\b(?:thanks?|thank you|done|did (?:it|that))\b", last_user, _I)))
    # the user acting on it ("rotated prod db and smtp, go ahead", "deactivated it") agrees too
    agreed = agreed or any(_DONE_REPORT.match(x) or (_SEC_VERB.search(x[:300]) and _USER_DID.search(x[:300]))
                           for x in later_users)
    conf = 0.60 + (0.10 if by_user or agreed else 0.0) + (0.10 if calls else 0.0) + (0.05 if _SEC_VERB.search(best)
                                                                                    else 0.0)
    context = " ".join(x for x in (d.task_context(at), sighting) if x)
    c = candidate("security", "procedural", statement(best), context, resolution, [x.name for x in calls], conf,
                  task_type, [best])
    c["confirmed"] = by_user or agreed
    return [c]
