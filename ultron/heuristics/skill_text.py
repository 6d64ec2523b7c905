"""Word-level text tools shared by rules synthesis and the quality gate.

Both sides must agree on what "the same step" and "supported by a memory" mean, so
tokenising, light stemming, overlap measures and the splitting of a resolution into
actionable units live here once.
"""

from __future__ import annotations

import re
from typing import Iterable

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset("""
a an the and or but nor so to of in on at by for from with without into onto over under about as is are was were be
been being it its this that these those there here then than too very can could should would will shall may might must
do does did done have has had having i me my we our you your he she they them their his her not no yes if else when
while which who whom what where why how all any each some such own same just also only again further once both few
more most other out up down off via per vs etc e g ie eg let lets use using used one two""".split())

# Labels the rules extractor puts in resolutions ("Worked: ...", "User: ..."): markers, not words.
LABELS = re.compile(r"\b(?:Worked|Fix|First|Then re-ran|Then|Applied|User|Policy|Outcome|Also asked|Task|Attempted|"
                    r"Found it|Unresolved\. Agent's reading)\s*:\s*")
_OUTCOME = re.compile(r"\bOutcome:.*$", re.DOTALL)
_CODE = re.compile(r"`[^`\n]{1,400}`")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[\x00A-Z0-9])")
_THEN = re.compile(r"\s*(?:;|,?\s+and then\s+|,\s*then\s+|\s+then\s+(?=[a-z]))\s*", re.IGNORECASE)
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)]|\(\d+\))\s+")
_RESULT_TAIL = re.compile(r"\s+->\s+.*$")
_MORE = re.compile(r"^\s*…?\s*\(\+\d+ more(?: steps)?\)\s*$|\s*\(\+\d+ more\)")
_WS = re.compile(r"\s+")

def stem(word: str) -> str:
    """Crude suffix stripping: enough for "installed"/"installing"/"installs" to meet."""
    w = word.lower()
    if len(w) > 5 and w.endswith("ing"):
        w = w[:-3]
    elif len(w) > 4 and w.endswith("ied"):
        w = w[:-3] + "y"
    elif len(w) > 4 and w.endswith("ed"):
        w = w[:-2]
    elif len(w) > 4 and w.endswith("es") and w[-3] in "sxz":
        w = w[:-2]
    elif len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
        w = w[:-1]
    if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "aeiouls":   # "stopp" -> "stop"
        w = w[:-1]
    if len(w) > 4 and w.endswith("e"):                               # "rebuilde"/"rebuild", "use"/"us"
        w = w[:-1]
    return w


#: First words of an actionable unit (any tense, after stemming), tool names included.
_VERBS = frozenset(stem(w) for w in """
activate add adjust allow apply avoid backup bump build call cd change check chmod chown clean clear clone close commit
compile configure confirm connect copy create curl declare define delete deploy disable docker downgrade download drop
edit enable ensure escape exclude execute export extend fetch fix follow format generate git grant grep increase
import include init install kill kubectl launch limit link load lock log login make map mark merge migrate mount move
npm open override pass patch pin pip point prefer pull push put raise read rebuild recreate reduce refresh register
reinstall reload remove rename reorder replace rerun reset resize restart restore retry return revert review rotate run
save scale select send set source specify split start stop store switch sync tag test touch trigger truncate try
uninstall unpin unset update upgrade validate verify wait wrap write yarn bash python python3 apt apk brew conda
""".split())
_LEADS = re.compile(r"^(?:(?:then|first|next|finally|also|just|please|instead|so)\b,?\s*|to fix (?:it|this),?\s*|"
                    r"(?:you|we|i) (?:need to|have to|should|must|can)\s+|make sure (?:to\s+)?)", re.IGNORECASE)
_MODAL = re.compile(r"\b(?:should|must|needs? to|have to|make sure|ensure)\b", re.IGNORECASE)
_IMPERATIVE = re.compile(r"^(?:always|never|don'?t|do not|use|avoid|prefer|keep|pin|only)\b", re.IGNORECASE)
# Command names: verbs of a kind, but written as typed, never capitalised.
_COMMANDS = frozenset("apk apt bash brew cd chmod chown conda curl docker git grep kubectl npm pip python python3 yarn"
                      .split())


def tokens(text: str) -> set[str]:
    """Content words, lower-cased and stemmed (stop words out)."""
    return {stem(w) for w in _WORD.findall(text.lower()) if len(w) > 1 and w not in _STOP}


def ordered_terms(text: str) -> list[tuple[str, str]]:
    """(stem, surface form) of each content word in order of appearance, first form kept."""
    seen: dict[str, str] = {}
    for w in _WORD.findall(text.lower()):
        if w in _STOP or len(w) < 3 or w.isdigit():
            continue
        seen.setdefault(stem(w), w)
    return list(seen.items())


def containment(part: set[str], whole: set[str]) -> float:
    """Share of ``part``'s words found in ``whole`` (0 when ``part`` is empty)."""
    return len(part & whole) / len(part) if part else 0.0


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def near_duplicate(a: set[str], b: set[str], *, jaccard_min: float = 0.6, contained_min: float = 0.8) -> bool:
    """Two steps say the same thing: most words shared, or the shorter one (two words or
    more) almost entirely inside the longer one."""
    if not a or not b:
        return False
    if a == b or jaccard(a, b) >= jaccard_min:
        return True
    small, big = (a, b) if len(a) <= len(b) else (b, a)
    return len(small) >= 2 and containment(small, big) >= contained_min


def squash(text: str) -> str:
    return _WS.sub(" ", text or "").strip()


def clip(text: str, n: int) -> str:
    """At most ``n`` characters, cut at a word boundary with an ellipsis."""
    text = squash(text)
    if len(text) <= n:
        return text
    cut = text[: n - 1]
    space = cut.rfind(" ")
    if space > n // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:-") + "…"


def sentences(text: str) -> list[str]:
    """Sentences and lines, code spans kept whole."""
    out = []
    for line in (text or "").splitlines():
        protected, spans = _protect(line)
        for part in _SENTENCE_END.split(protected):
            part = _restore(part, spans).strip()
            if part:
                out.append(part)
    return out


def _protect(text: str) -> tuple[str, list[str]]:
    spans: list[str] = []

    def keep(m: re.Match[str]) -> str:
        spans.append(m.group(0))
        return f"\x00{len(spans) - 1}\x00"

    return _CODE.sub(keep, text), spans


def _restore(text: str, spans: list[str]) -> str:
    return re.sub(r"\x00(\d+)\x00", lambda m: spans[int(m.group(1))], text)


def split_actions(resolution: str) -> list[str]:
    """A resolution cut into candidate steps: one per line, sentence, labelled part
    ("Worked: ...") or "; / , then" clause; bullets, labels and "-> result" tails go.
    Code spans are never cut."""
    units: list[str] = []
    for line in (resolution or "").splitlines():
        line = _BULLET.sub("", line).strip()
        if not line or _MORE.fullmatch(line):
            continue
        protected, spans = _protect(line)
        for labelled in LABELS.split(protected):
            for sentence in _SENTENCE_END.split(labelled):
                for clause in _THEN.split(sentence):
                    clause = _MORE.sub("", _RESULT_TAIL.sub("", clause))
                    clause = _restore(clause, spans).strip(" .;,")
                    clause = _LEADS.sub("", clause).strip()
                    if len(clause) >= 4 and tokens(clause):
                        units.append(clause)
    return units


def leading_verb(unit: str) -> str | None:
    """The stemmed action verb a unit opens with, if it opens with one."""
    first = _WORD.findall(unit.lower()[:40])
    return stem(first[0]) if first and stem(first[0]) in _VERBS else None


def is_actionable(unit: str) -> bool:
    """An instruction or a command: opens with an action verb (any tense) or a tool
    name, holds code, or says what one should / must / never do."""
    return bool("`" in unit or _MODAL.search(unit) or _IMPERATIVE.match(unit) or leading_verb(unit))


def display(unit: str) -> str:
    """Sentence case for plain words ("add pandas" -> "Add pandas"); commands, tool
    names (read_file) and code stay as typed."""
    m = re.match(r"[a-z]+\b", unit)
    if not m or m.group(0) in _COMMANDS or unit[m.end():m.end() + 1] in ("_", ".", "-", "/"):
        return unit
    return unit[:1].upper() + unit[1:]


def _norm_word(word: str) -> str:
    return word.lower().strip(":;,.!?'\"`()[]")


def same_shape(a: str, b: str) -> bool:
    """Same number of words, differing in at most a third of them (one at least allowed)."""
    wa, wb = a.split(), b.split()
    if len(wa) != len(wb) or not wa:
        return False
    differing = sum(_norm_word(x) != _norm_word(y) for x, y in zip(wa, wb))
    return differing <= max(1, len(wa) // 3)


def generalize(variants: list[str], max_values: int = 3) -> str:
    """One wording for near-duplicate variants that differ only in a few words ("lacks the
    redis module" / "lacks the flask module" -> "lacks the redis/flask module"); the
    first variant when their shapes differ. Case and punctuation do not count as a difference."""
    first = variants[0]
    split = [v.split() for v in dict.fromkeys(variants)]
    if len(split) < 2 or len({len(w) for w in split}) != 1:
        return first
    differing = [i for i in range(len(split[0])) if len({_norm_word(w[i]) for w in split}) > 1]
    if not differing or len(differing) > max(1, len(split[0]) // 3):
        return first
    out = list(split[0])
    for i in differing:
        values = list({_norm_word(w[i]): w[i] for w in reversed(split)}.values())[::-1]
        out[i] = "/".join(values[:max_values]) + ("/…" if len(values) > max_values else "")
    return " ".join(out)


def context_gist(context: str, n: int = 160) -> str:
    """The situation a context describes: its first sentence, labels and outcome left out."""
    return first_sentence(_OUTCOME.sub("", context or ""), n).rstrip(".")


def is_question(unit: str) -> bool:
    return unit.rstrip().endswith("?")


def first_sentence(text: str, n: int = 200) -> str:
    parts = sentences(LABELS.sub("", text or ""))
    return clip(parts[0], n) if parts else ""


def distinct(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(i for i in items if i))
