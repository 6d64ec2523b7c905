"""A memory's L0 one-liner and L1 overview, without a model.

Both are picked, not written: sentences of the memory in their order, within
``L0_TOKENS`` / ``L1_TOKENS`` (cl100k tokens), the most informative first - an
exception line buried in a dump, else a "failed: / error" line, else the first
sentence; see :func:`summarize_l0` and :func:`overview_l1`.
"""

from __future__ import annotations

import re

from ultron.heuristics.reader import cap
from ultron.heuristics.text import RESULT_HEAD, clip, first_sentence, norm_key, sentences, squash
from ultron.llm.tokens import count_tokens, truncate_to_tokens
from ultron.vocabulary import L0_TOKENS, L1_TOKENS

_I = re.IGNORECASE

_EXC_LINE_ML = re.compile(
    r"^[ \t]*(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Warning)\b(?::[^\n]*|[ \t]*)$", re.M)
_RES_LEAD = re.compile(r"^(?:Worked|Fix|Then re-ran|Applied|Policy):\s*")
_FAILED_LINE = re.compile(r"\bfailed:|\berror:|\berror\b", _I)


def _lead(content: str) -> str:
    """The most informative sentence of a content: its exception line if it has one
    (the last of a traceback, read from the head and the tail of a long text), a
    "failed: / error" line, else its first sentence."""
    content = (content or "")[:20000]
    exc = [m.group(0) for m in _EXC_LINE_ML.finditer(content)]
    if exc:
        pick = exc[-1] if "Traceback (most recent call last)" in content else exc[0]
        return clip(pick, 1000)
    lines = [ln.strip() for ln in content[:RESULT_HEAD].splitlines() if ln.strip()]
    for ln in lines[:60]:
        if _FAILED_LINE.search(ln):
            return first_sentence(ln, 1000) or squash(ln)
    return first_sentence(content, 1000) or squash(content)


def summarize_l0(content: str, context: str = "", resolution: str = "") -> str:
    """One line within L0_TOKENS: the lead of content (its exception line - the last
    of a traceback -, else a "failed: / error" line, else its first sentence; the
    context's or resolution's first sentence when content is empty), then " -> " and
    the gist of the resolution (its "Worked: / Fix: / Applied: / Policy:" sentence,
    else its first, label dropped) when that fits, shortened to fit when at least 12
    tokens are left."""
    lead = _lead(content) or first_sentence(context, 400) or first_sentence(resolution, 400)
    lead = squash(lead)
    if not lead:
        return ""
    lead = truncate_to_tokens(lead, L0_TOKENS)
    sents = sentences((resolution or "")[:3000])
    best = next((x for x in sents if _RES_LEAD.match(x)), sents[0] if sents else "")
    gist = squash(re.sub(r"^(?:User:|Worked:|Fix:|Then re-ran:|Applied:|Policy:|Unresolved\.)\s*", "", clip(best, 300)))
    if gist and norm_key(gist) != norm_key(lead):
        joined = f"{lead} -> {gist}"
        if count_tokens(joined) <= L0_TOKENS:
            return joined
        room = L0_TOKENS - count_tokens(lead) - 2
        if room >= 12:
            return f"{lead} -> " + truncate_to_tokens(gist, room, marker="…")
    return lead


def _condense(text: str, budget: int) -> str:
    """Sentences of ``text`` in order (duplicates dropped) until ``budget`` tokens."""
    if budget <= 0 or not text:
        return ""
    out: list[str] = []
    seen: set[str] = set()
    used = 0
    for s in sentences(text):
        k = norm_key(s)
        if k in seen:
            continue
        seen.add(k)
        t = count_tokens(s) + 1
        if used + t > budget:
            if not out:
                out.append(truncate_to_tokens(s, budget, marker="…"))
            break
        out.append(s)
        used += t
    return " ".join(out)


def overview_l1(content: str, context: str = "", resolution: str = "") -> str:
    """Content, context and resolution condensed to sentences within L1_TOKENS:
    content gets up to 90 tokens, resolution 110, context the rest; what one part
    leaves unused goes to the others. An error line buried in a long content is moved
    to its front; repeated sentences are dropped. Lines: content, "Context: …",
    "Resolution: …"."""
    content, context, resolution = (cap(content, 20000), cap(context, 20000), cap(resolution, 20000))
    budget = L1_TOKENS - 12     # labels and line breaks
    need = {k: count_tokens(v) for k, v in (("c", content), ("x", context), ("r", resolution))}
    share = {"c": 90, "r": 110, "x": budget - 200}
    spare = sum(max(0, share[k] - need[k]) for k in share)
    for k in ("r", "c", "x"):      # hand the spare to the parts that want more
        if need[k] > share[k] and spare > 0:
            extra = min(spare, need[k] - share[k])
            share[k] += extra
            spare -= extra
    parts = []
    lead = _lead(content)
    if lead and norm_key(lead) != norm_key(first_sentence(content, 1000)):
        content = lead + "\n" + content          # an error line buried in a dump comes first
    c = _condense(content, share["c"])
    if c:
        parts.append(c)
    x = _condense(context, share["x"])
    if x:
        parts.append("Context: " + x)
    r = _condense(resolution, share["r"])
    if r:
        parts.append("Resolution: " + r)
    text = "\n".join(parts)
    return truncate_to_tokens(text, L1_TOKENS) if count_tokens(text) > L1_TOKENS else text
