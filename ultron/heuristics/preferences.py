"""``preference`` memories: what the user says they want, always or here.

Sentences of human turns: standing rules ("always …", "never …", "from now on",
"going forward", "by default", "whenever …"; kind procedural), explicit preferences
("I prefer", "I'd rather", "my preferred / favourite"), likes ("I like / love / hate
/ don't like …") and "I don't want to …" (weakest, always episodic). "I prefer X"
is procedural (a lasting taste); "I'd prefer", "if", or words tying it to this task
("this", "here", "now", "for my …") make it episodic. A sentence that is already a
strong correction is left to the correction rule.

content = the sentence; resolution = the directive (the clause from the cue on,
"I'd" dropped) and "Applied: <call>" when a later successful call of the episode has
the preferred words in its arguments (only those arguments shown).

Confidence: 0.75 standing rule / 0.60 "prefer" / 0.50 like-dislike / 0.45 "don't
want to"; + 0.10 [honoured later]; - 0.10 [conditional: "if", "unless"]; - 0.10 [a
question].
"""

from __future__ import annotations

import re
from typing import Any

from ultron.heuristics.candidates import candidate
from ultron.heuristics.corrections import CORR_STRONG
from ultron.heuristics.episodes import Call, Digest, is_closing
from ultron.heuristics.lessons import ASKING, clauses, is_standing, lesson_type
from ultron.heuristics.gists import arg_gist, arg_words, call_gist, short_value
from ultron.heuristics.text import clip, sentences, words

_I = re.IGNORECASE

PREF_STANDING = re.compile(
    r"(?:^|[.!?;,]\s*|\bplease\s+)(?:always|never)\s+(?!mind\b|nice\b|good\b|great\b|fun\b|helpful\b|easy\b)\w+|\bi (?:always|never)\s+\w+|\bfrom now on\b|"
    r"\bgoing forward\b|\bin (?:the )?future\b|\bby default\b|\bevery time\b|\bwhenever\b|"
    r"\bas a (?:general )?rule\b", _I)
PREF_EXPLICIT = re.compile(
    r"\bi(?:'d| would)? (?:really |strongly |much |generally )?(?:prefer|rather)\b|"
    r"\bmy (?:preferred|favou?rite|preference)\b|\bi(?:'m| am) (?:a )?fan of\b", _I)
PREF_LIKE = re.compile(
    r"\bi (?:really |do |just )?(?:like|love|hate|dislike|enjoy|can'?t stand)\s+(?!it\b|this\b|that\b|them\b|"
    r"to know\b)\w+|\bi (?:do not|don'?t) (?:really )?(?:like|enjoy|care for)\s+\w+", _I)
_PREF_WANT = re.compile(r"\bi (?:do not|don'?t) want to\s+\w+", _I)
PREF_CUE_START = re.compile(
    r"\b(?:always|never|from now on|going forward|by default|whenever|every time|prefer|rather|preferred|"
    r"favou?rite|like|love|hate|dislike|enjoy|don'?t want to|do not want to)\b", _I)
_SITUATIONAL = re.compile(
    r"\bi'd\b|\bi would\b|\b(?:this|that|these|those|here|now|today|tomorrow|current|for the|for my|"
    r"on (?:the|my)|if|unless)\b", _I)
_ONE_OFF = re.compile(r"\bfor this (?:one|time|letter|e-?mail|message|slide|doc\w*|reply|task|trip|deck|post)\b|"
                      r"\bthis time\b|\bjust (?:this once|for now|this one)\b|\bonly (?:this|here) \w+", _I)
_GENERAL = re.compile(r"\b(?:generally|in general|usually|as a rule|always|never|in all|any|every|keep doing|"
                      r"from now on|for me)\b", _I)
_CONDITIONAL = re.compile(r"\b(?:if|unless|in case)\b", _I)
_PRONOUN_LEAD = re.compile(r"^(?:i(?:'d| would)?\s+(?:really |strongly |much |generally |also )?)", _I)

_PREF_OBJECT_NOISE = words("always never prefer preferred rather like love hate want use from now on going forward "
                           "default whenever every time favourite favorite please")


def extract_preferences(d: Digest, task_type: str | None, skip: set[int]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, k in enumerate(d.kind):
        if k != "user" or is_closing(d.text[i]):
            continue
        later_calls: list[Call] | None = None
        for s in clauses(d.text[i]):
            if len(s) < 8 or ASKING.match(s) or s.rstrip().endswith("?"):
                continue          # a question ("what port does redis use by default") states no preference
            if i in skip and (CORR_STRONG.search(s) or PREF_STANDING.match(s)):
                continue          # already a correction
            if is_standing(s):
                continue          # a stated rule, convention or security rule (ultron.heuristics.lessons)
            if _ONE_OFF.search(s) and not _GENERAL.search(s):
                continue          # "for this slide": a choice for this task, not a lasting preference
            m = PREF_STANDING.search(s)
            if m:
                base, kind = 0.75, "procedural"
            else:
                for rx, b in ((PREF_EXPLICIT, 0.60), (PREF_LIKE, 0.50)):
                    m = rx.search(s)
                    if m:
                        # "I prefer X" states a lasting taste; "I'd prefer ..." or one about
                        # this very task is situational
                        general = (not _SITUATIONAL.search(s) or bool(_GENERAL.search(s))) and not _ONE_OFF.search(s)
                        base, kind = b, ("procedural" if general else "episodic")
                        break
            if not m:
                continue
            directive = s[m.start():].lstrip(" ,.;!?")
            directive = _PRONOUN_LEAD.sub("", directive) or directive
            if len(directive.split()) < 4:        # the cue closes the sentence ("... exact match by default.")
                directive = s.strip()
            directive = directive[:1].upper() + directive[1:]
            # honoured: a later tool call of the same episode uses the preferred thing
            obj = words(directive) - _PREF_OBJECT_NOISE
            if later_calls is None:
                ep = d.episode_of[i]
                later_calls = [c for c in d.calls if c.msg > i and d.episode_of[c.msg] == ep
                               and not c.housekeeping and c.error is False][:12]
            applied = ""
            tools: list[str] = []
            need = max(1, (len(obj) + 2) // 3)
            for c in later_calls:
                if not obj or len(obj & arg_words(c)) < need:
                    continue
                keys = [key for key, v in (c.args or {}).items() if obj & words(short_value(v, 300))]
                applied = (f"{c.name} with " + arg_gist(c.args, c.raw, 140, keys=keys)) if keys else \
                    call_gist(c.name, c.args, c.raw, 140)
                tools.append(c.name)
                break
            conf = (base + (0.10 if applied else 0.0) - (0.10 if _CONDITIONAL.search(s) else 0.0)
                    - (0.15 if kind == "episodic" else 0.0)         # about this task only: no lasting lesson
                    - (0.10 if s.rstrip().endswith("?") else 0.0))
            others = [x for x in sentences(d.text[i]) if x != s]
            context = d.task_context(i, skip=d.text[i])
            if not context and others:
                context = "Said with: " + clip(" ".join(others), 300)
            resolution = clip(directive, 300) + (f" Applied: {applied}" if applied else "")
            typ = lesson_type(s)
            c = candidate(typ if typ in ("security", "correction") else "preference", kind, s, context, resolution,
                          tools, conf, task_type, [d.text[i]])
            c["confirmed"] = True             # the user said it
            out.append(c)
    return out
