"""Small text tools shared by the extractors, the summaries and merging.

Every offline memory task compares texts the same way - sentences split after
". " before a capital or at a line break, words lowercased with stop words dropped,
light stemming and a few synonyms (fixed / resolved / solved -> fix) - so that a
summary, a dedupe key and a near-duplicate test agree on what "the same sentence" is.
"""

from __future__ import annotations

import re

# Tool results are read this far at the head and the tail (the lines that say what
# went wrong are at one end or the other); other texts up to reader.TEXT_CAP.
RESULT_HEAD = 2000
RESULT_TAIL = 1500

_WS = re.compile(r"\s+")
_SENT_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[\"'`(\[]?[A-Z0-9])|\n+")
_WORD = re.compile(r"[a-z0-9][a-z0-9_']*")
_DIGITS = re.compile(r"\d+")
_HEXISH = re.compile(r"\b[0-9a-f]{7,}\b|\b(?=[A-Za-z0-9]*\d)[A-Za-z0-9]{5,}\b")
#: markdown emphasis, headings, bullets and list numbers (dropped from sentences).
MARKDOWN = re.compile(r"\*\*|__|^#+\s*|^\s*[-*•]\s+|^\s*\d+[.)]\s+", re.MULTILINE)
_STOP = frozenset(
    "a an the and or but if then else of to in on at by for with from into onto as is are was were be been being "
    "it its it's this that these those there here i me my we our you your he she they them their his her "
    "do does did doing done have has had having not no yes so than too very can could would should will shall "
    "may might must just also only about over under again more most some any all each other such what which who "
    "whom whose when where why how let lets let's please ok okay now up out off s t".split())
_SYNONYMS = {
    "fixed": "fix", "fixes": "fix", "fixing": "fix", "resolved": "fix", "resolves": "fix", "resolve": "fix",
    "resolving": "fix", "solved": "fix", "solve": "fix", "solves": "fix", "solution": "fix", "workaround": "fix",
    "failed": "fail", "fails": "fail", "failing": "fail", "failure": "fail", "errors": "error", "broke": "fail",
    "broken": "fail", "crash": "fail", "crashed": "fail", "crashes": "fail",
    "installed": "install", "installing": "install", "installs": "install", "installation": "install",
    "adding": "add", "added": "add", "adds": "add", "running": "run", "ran": "run", "runs": "run",
    "using": "use", "used": "use", "uses": "use", "setting": "set", "sets": "set",
    "upgrading": "upgrade", "upgraded": "upgrade", "updating": "update", "updated": "update", "updates": "update",
}


def squash(text: str) -> str:
    """``text`` with every run of whitespace one space."""
    return _WS.sub(" ", text).strip()


def clip(text: str, n: int) -> str:
    """``text`` on one line, cut at a word boundary to at most ``n`` characters."""
    text = squash(text)
    if len(text) <= n:
        return text
    cut = text[: max(1, n - 1)]
    space = cut.rfind(" ")
    if space > n * 0.6:
        cut = cut[:space]
    return cut.rstrip(" ,;:-") + "…"


def clip_lines(text: str, n: int) -> str:
    """Like :func:`clip` but keeps line breaks (for step lists)."""
    lines = [squash(x) for x in text.split("\n")]
    text = "\n".join(x for x in lines if x)
    if len(text) <= n:
        return text
    cut = text[: max(1, n - 1)]
    nl = cut.rfind("\n")
    if nl > n * 0.6:
        return cut[:nl]
    space = cut.rfind(" ")
    if space > n * 0.6:
        cut = cut[:space]
    return cut.rstrip(" ,;:-") + "…"


def redact(text: str) -> str:
    """The project's one redaction scheme (ultron.redaction), so tags are the same everywhere."""
    if not text:
        return text
    from ultron.redaction import get_redactor

    return get_redactor().redact(text)


def sentences(text: str) -> list[str]:
    """Sentences and lines of ``text``, markdown dropped, whitespace squashed."""
    out = []
    for part in _SENT_SPLIT.split(text or ""):
        part = squash(MARKDOWN.sub("", part))
        if part:
            out.append(part)
    return out


def first_sentence(text: str, n: int = 200) -> str:
    """The first sentence of at least three characters, clipped to ``n``."""
    for s in sentences(text):
        if len(s) >= 3:
            return clip(s, n)
    return ""


def words(text: str) -> set[str]:
    """Content words: lowercased, stop words dropped, synonyms merged, a plural "s" cut."""
    out = set()
    for w in _WORD.findall(text.lower()):
        w = w.strip("'")
        if len(w) < 2 or w in _STOP:
            continue
        w = _SYNONYMS.get(w, w)
        if len(w) > 4 and w.endswith("s") and not w.endswith("ss"):
            w = w[:-1]
        out.add(w)
    return out


def jaccard(a: set[str], b: set[str]) -> float:
    """Shared share of the union (0 when either is empty)."""
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def containment(a: set[str], b: set[str]) -> float:
    """Share of the smaller set found in the other."""
    if not a or not b:
        return 0.0
    return len(a & b) / min(len(a), len(b))


def norm_key(text: str) -> str:
    """Dedupe key: lowercase, ids and numbers masked, whitespace collapsed."""
    text = _HEXISH.sub("#", text.lower())
    return squash(_DIGITS.sub("0", text))[:200]
