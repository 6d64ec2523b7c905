"""Topic labels for clusters without an LLM: the cluster's most distinctive terms.

A term describes a cluster when its members use it a lot and few memories elsewhere do
(class-based TF-IDF: the term's uses per member, times the log-inverse share of the
whole store's memories that use it). A term counts at most MAX_USES_PER_MEMORY times per
memory, so one long memory cannot dominate its cluster. Labels are deterministic: ties
go to the longer (more specific) term, then alphabetically.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Iterable, Mapping, Sequence

SEPARATOR = " · "
TERMS_PER_LABEL = 3
#: Characters of each member text shown to the LLM, and how many members it sees.
LLM_TEXT_CHARS = 400
LLM_TEXTS = 8
MAX_LABEL_CHARS = 80

_TOKEN = re.compile(r"[a-z][a-z0-9]*(?:[_.+#-][a-z0-9]+)*")
_STOP = frozenset("""
a about above after again against all also am an and any are as at be because been before being below between
both but by can cannot could did do does doing done down during each either else even ever every few for from
further get gets getting got had has have having he her here hers him his how however i if in into is it its
itself just let me more most much must my no nor not now of off on once one only or other our ours out over own
per please same she should since so some still such than that the their theirs them then there these they this
those though through thus to too under until up upon us use used uses using very via was we were what when where
whether which while who whom whose why will with within without would yes yet you your yours
new old via etc ok okay like make made need needs needed want wants run runs ran running work works worked
after before first last next again always never instead already really
add added adding check checked checking start started set try tried fix fixed fixing resolve resolved
""".split())
MAX_USES_PER_MEMORY = 3
#: Prefix length under which two terms count as one word in a label (rebase / rebasing).
SAME_STEM_PREFIX = 5


def terms(text: str) -> Counter[str]:
    """Lower-case terms of a text with their uses (capped), stop words and one-letter tokens dropped.

    Identifiers stay whole (``pg_hba.conf``, ``modulenotfounderror``) because they are
    usually the most telling words of a technical memory."""
    out: Counter[str] = Counter(t for t in _TOKEN.findall(text.lower()) if len(t) > 1 and t not in _STOP)
    return Counter({t: min(n, MAX_USES_PER_MEMORY) for t, n in out.items()})


def document_frequencies(docs: Iterable[Mapping[str, int]]) -> tuple[Counter[str], int]:
    """(memories containing each term, number of memories)."""
    df: Counter[str] = Counter()
    n = 0
    for doc in docs:
        df.update(doc.keys())
        n += 1
    return df, n


def distinctive_terms(members: Sequence[Mapping[str, int]], store_df: Mapping[str, int], store_size: int,
                      k: int = TERMS_PER_LABEL) -> list[str]:
    """The ``k`` terms with the highest class TF-IDF for this cluster.

    score = (uses per member) * log(1 + store memories / store memories using it). In a
    cluster of two or more, a term must be used by at least two members: a word only
    one member says is that member's detail, not the cluster's topic."""
    if not members:
        return []
    uses: Counter[str] = Counter()
    users: Counter[str] = Counter()
    for doc in members:
        uses.update(doc)
        users.update(doc.keys())
    floor = 2 if len(members) >= 2 else 1
    size = len(members)
    n = max(store_size, size)
    scored = sorted(((-round((uses[t] / size) * math.log(1 + n / max(store_df.get(t, 0), c)), 9), -len(t), t)
                     for t, c in users.items() if c >= floor))
    out: list[str] = []
    for _score, _length, t in scored:
        if any(_same_word(t, o) for o in out):
            continue
        out.append(t)
        if len(out) == k:
            break
    return out


def _same_word(a: str, b: str) -> bool:
    if a in b or b in a:
        return True
    return len(a) >= SAME_STEM_PREFIX and len(b) >= SAME_STEM_PREFIX and a[:SAME_STEM_PREFIX] == b[:SAME_STEM_PREFIX]


def label(terms_: Sequence[str], fallback: str = "") -> str:
    return SEPARATOR.join(terms_) if terms_ else (fallback or "untitled")


def rules_labels(clusters: Mapping[str, Sequence[str]], doc_terms: Mapping[str, Mapping[str, int]],
                 fallback: Mapping[str, str] | None = None) -> dict[str, str]:
    """Labels for ``clusters`` (cluster id -> member memory ids), measured against every
    memory in ``doc_terms`` (the whole active store)."""
    df, n = document_frequencies(doc_terms.values())
    out = {}
    for cid, members in clusters.items():
        docs = [doc_terms.get(m, Counter()) for m in members]
        out[cid] = label(distinctive_terms(docs, df, n), (fallback or {}).get(cid, ""))
    return out


def label_from_texts(texts: Sequence[str]) -> str:
    """A label from the texts alone (no store to compare with): the terms most members share."""
    docs = [terms(t) for t in texts]
    df, n = document_frequencies(docs)
    return label(distinctive_terms(docs, df, n), short_text(texts[0] if texts else "", 60))


def member_text(content: str, context: str, resolution: str, tags: Sequence[str]) -> str:
    return "\n".join(x for x in (content, context, resolution, " ".join(tags)) if x)


def short_text(text: str, limit: int = LLM_TEXT_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def clean_label(value: str) -> str:
    """One line, no wrapping quotes or trailing period, at most MAX_LABEL_CHARS."""
    flat = " ".join(str(value).split()).strip().strip("\"'`").rstrip(".").strip()
    return flat if len(flat) <= MAX_LABEL_CHARS else flat[: MAX_LABEL_CHARS - 1].rstrip() + "…"
