"""Whether two memories say the same thing, and merging them, without a model.

Called for pairs already close in embedding space (the soft cosine zone): the
words and the named things (exception classes, files, quoted names, codes,
numbers) decide. See :func:`is_same_memory` and :func:`merge_bodies` for the
thresholds.
"""

from __future__ import annotations

import re

from ultron.heuristics.text import clip, clip_lines, containment, jaccard, sentences, squash, words

#: field sizes of a merged memory.
MERGED_LIMITS = {"content": 600, "context": 600, "resolution": 1200}

_ID_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("exception", re.compile(r"\b[A-Z]\w*(?:Error|Exception)\b")),
    ("file", re.compile(r"\b[\w\-]+\.(?:py|js|ts|tsx|jsx|json|ya?ml|toml|ini|cfg|md|txt|csv|sql|sh|rs|go|java|rb|"
                        r"c|cpp|h|html|css|lock|env|conf|xml)\b")),
    ("quoted", re.compile(r"'([^'\s]{2,60})'|\"([^\"\s]{2,60})\"|`([^`\s]{2,60})`")),
    ("code", re.compile(r"\b(?=[A-Z0-9]*\d)(?=[A-Z0-9]*[A-Z])[A-Z0-9]{5,8}\b|\bE\d{3,5}\b|\bHTTP \d{3}\b")),
    ("number", re.compile(r"(?<![\w.])\d{2,}(?:\.\d+)*(?![\w.])")),
    ("flag", re.compile(r"(?<![\w-])--[A-Za-z][\w-]*")),
)
# What a sentence names that another may lack: dotted names (files, hosts, versions), flags,
# quoted names, codes and numbers. A sentence naming something new is never a duplicate.
_NAMED = re.compile(r"\b[\w-]+(?:\.[\w-]+)+\b|--?[A-Za-z][\w-]*|'[^'\s]{2,60}'|\"[^\"\s]{2,60}\"|`[^`]{2,80}`|"
                    r"\b(?=[A-Z0-9]*\d)(?=[A-Z0-9]*[A-Z])[A-Z0-9]{4,10}\b|\b\d+(?:[.,]\d+)*\b")
SAME_CONTENT_SIM = 0.45      # max(Jaccard, 0.8 * containment) of content word sets
SAME_RESOLUTION_SIM = 0.30   # the same for resolutions, when both have one
SAME_OVERALL_SIM = 0.40      # ... or of all three fields together, when content alone falls short


def _identifiers(text: str) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for name, rx in _ID_RULES:
        vals = set()
        for m in rx.finditer(text):
            v = next((g for g in m.groups() if g), None) if m.groups() else m.group(0)
            if v:
                vals.add(v.lower())
        if vals:
            out[name] = vals
    return out


def _field_sim(a: str, b: str) -> float:
    wa, wb = words(a), words(b)
    return max(jaccard(wa, wb), 0.8 * containment(wa, wb))


def names_different_things(a: str, b: str) -> bool:
    """Whether two texts name different things of one kind (exception, file, quoted name,
    code, number, flag) and share none of that kind.

    Templated lessons ("billing needs --port 8091", "search needs --heap 2g") embed as
    near-identical however different the fix; merging them would lose one fix and splice
    two sessions into one text. So even a very close pair is two memories when this holds."""
    ida, idb = _identifiers(a), _identifiers(b)
    return any(kind in idb and not (vals & idb[kind]) for kind, vals in ida.items())


def is_same_memory(a: dict, b: dict) -> bool:
    """Rules confirmation of a near-duplicate in the soft cosine zone.

    Words are lowercased, stop words dropped, light stemming and synonyms applied
    (fixed / resolved / solved -> fix, failed / failing -> fail, ...). Same when:

    * no key identifier conflicts: for exception class names, file names, quoted
      names, codes (HAT030, E0432), numbers and flags, when both contents name some of one
      kind they must share at least one (``KeyError: 'user_id'`` is not
      ``KeyError: 'order_id'``);
    * the contents agree: ``max(Jaccard, 0.8 * containment)`` of their word sets >=
      SAME_CONTENT_SIM (0.45), or all three fields together >= SAME_OVERALL_SIM (0.40)
      with the contents at least half of SAME_CONTENT_SIM;
    * the resolutions agree when both have one: the same measure >= SAME_RESOLUTION_SIM
      (0.30), or at least half of it when they share an identifier (the same flag, file,
      package or code said in other words)."""
    a = a or {}
    b = b or {}
    ca, cb = str(a.get("content") or ""), str(b.get("content") or "")
    ra, rb = str(a.get("resolution") or ""), str(b.get("resolution") or "")
    xa, xb = str(a.get("context") or ""), str(b.get("context") or "")
    if not ca.strip() or not cb.strip():
        return False
    if squash(ca).lower() == squash(cb).lower() and squash(ra).lower() == squash(rb).lower():
        return True
    if names_different_things(ca, cb):
        return False
    c_sim = _field_sim(ca, cb)
    overall = _field_sim(" ".join((ca, xa, ra)), " ".join((cb, xb, rb)))
    if c_sim < SAME_CONTENT_SIM and not (overall >= SAME_OVERALL_SIM and c_sim >= SAME_CONTENT_SIM / 2):
        return False
    if ra.strip() and rb.strip():
        r_sim = _field_sim(ra, rb)
        if r_sim < SAME_RESOLUTION_SIM:
            # different words for the fix may still be the same fix: shared identifiers decide
            ira, irb = _identifiers(ra), _identifiers(rb)
            shared = any(ira[k] & irb.get(k, set()) for k in ira)
            if not shared or r_sim < SAME_RESOLUTION_SIM / 2:
                return False
    return True


_NEAR_SAME_CONTAINED = 0.8    # a new sentence is a near-duplicate when this share of its words is in an
                              # existing one and it names nothing (file, flag, number, code) the old lacks


def _named(text: str) -> set[str]:
    return {m.group(0).lower().strip("'\"`") for m in _NAMED.finditer(text)}


def _merge_field(old: str, new: str, limit: int) -> str:
    old, new = (old or "").strip(), (new or "").strip()
    if not new or squash(new).lower() == squash(old).lower():
        return clip_lines(old, limit) if len(old) > limit else old
    if not old:
        return clip_lines(new, limit) if len(new) > limit else new
    multiline = "\n" in old or "\n" in new
    units = _split_units if multiline else sentences
    kept = [(x, words(x)) for x in units(old)]
    named = _named(old)
    result = old if len(old) <= limit else clip_lines(old, limit)
    sep = "\n" if multiline else " "
    for x in units(new):
        w = words(x)
        fresh = _named(x) - named
        dup = False
        if not fresh:
            for y, yw in kept:
                if squash(x).lower() == squash(y).lower() or (
                        w and yw and len(w & yw) / len(w) >= _NEAR_SAME_CONTAINED):
                    dup = True
                    break
        if dup:
            continue
        # a new sentence that says all an old one says and more replaces it in place
        wider = next((y for y, yw in kept if yw and yw <= w and y in result), None)
        if wider is not None and len(result) - len(wider) + len(x) <= limit:
            result = result.replace(wider, x, 1)
            kept = [(x, w) if y == wider else (y, yw) for y, yw in kept]
            named |= fresh
            continue
        if len(result) + len(sep) + len(x) > limit:
            continue          # too long to add whole; a shorter later sentence may still fit
        result = result + sep + x
        kept.append((x, w))
        named |= fresh
    return result


def _split_units(text: str) -> list[str]:
    """Lines, and the sentences of long lines (for multi-line fields such as steps)."""
    out = []
    for ln in text.split("\n"):
        ln = ln.strip()
        if not ln:
            continue
        if len(ln) > 200:
            out.extend(sentences(ln))
        else:
            out.append(ln)
    return out


def merge_bodies(existing: dict, incoming: dict) -> dict:
    """Merged ``{content, context, resolution}``: the existing text kept as it is, then
    every incoming sentence (line, for multi-line fields such as step lists) that is
    not a near-duplicate of one already there - at least 80 % of its words already in
    one existing sentence, and naming no file, host, flag, number, code or quoted name
    the existing text lacks. A new sentence that contains every word of an existing
    one replaces it in place. Sentences are added while the field stays within
    MERGED_LIMITS (content 600, context 600, resolution 1200 chars); one that does not
    fit is skipped, so a shorter later one may still get in."""
    existing = existing or {}
    incoming = incoming or {}
    out = {}
    for key, limit in MERGED_LIMITS.items():
        out[key] = _merge_field(str(existing.get(key) or ""), str(incoming.get(key) or ""), limit)
    if not out["content"].strip():
        out["content"] = clip(str(incoming.get("content") or existing.get("content") or ""), MERGED_LIMITS["content"])
    return out
