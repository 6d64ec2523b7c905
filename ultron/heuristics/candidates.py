"""What every extractor returns: a memory candidate, its tags, and dedupe.

A candidate is ``{content, context, resolution, tags, kind, tools_used, confidence,
type_hint}``. Its texts are clipped to fixed sizes (``CONTENT_CHARS`` ...) and every
one goes through :func:`ultron.heuristics.text.redact` (ultron.redaction), so a
credential seen in a session is never copied into a memory. Confidence is clamped to
[0, 1]; the caller drops candidates below 0.5.

Tags are the task type, up to three tool names and topics found by keyword (python,
javascript, docker, git, sql, pandas, …, airline, payment). Memories of one segment
are deduplicated on (type, content with numbers and ids masked), keeping the most
confident (a pattern's key also holds the start of its steps).
"""

from __future__ import annotations

import contextvars
import re
from typing import Any, Iterable

from ultron.heuristics.episodes import HOUSEKEEPING
from ultron.heuristics.reader import cap
from ultron.heuristics.text import clip, clip_lines, norm_key, redact
from ultron.heuristics.text import words as content_words

#: Off only while the memory gate asks whether a segment teaches a lesson: those candidates
#: are counted and dropped, never stored, so redacting them would be wasted work.
REDACT: contextvars.ContextVar[bool] = contextvars.ContextVar("ultron_candidates_redact", default=True)

# Field sizes of extracted memories.
CONTENT_CHARS = 300
CONTEXT_CHARS = 600
RESOLUTION_CHARS = 900
#: a procedure's steps are its lesson: room for a dozen or so of them
PROCEDURE_CHARS = 1500

# Topical tags: a tag is given when one of its words (or file extensions) is in the memory's
# texts. One tokenisation pass and set lookups: no per-tag regular expression.
_TAG_WORDS: tuple[tuple[str, frozenset[str], tuple[str, ...]], ...] = tuple(
    (tag, frozenset(words.split()), tuple(exts.split())) for tag, words, exts in (
        ("python", "python python3 pip pip3 pytest venv poetry traceback pyproject.toml requirements.txt", ".py"),
        ("javascript", "node nodejs npm yarn pnpm javascript package.json", ".js .mjs .cjs .jsx"),
        ("typescript", "typescript tsc tsconfig.json", ".ts .tsx"),
        ("docker", "docker dockerfile docker-compose docker-compose.yml compose.yaml container containers", ""),
        ("kubernetes", "kubectl kubernetes k8s helm", ""),
        ("git", "git github gh gist .gitignore", ""),
        ("sql", "sql postgres postgresql sqlite sqlite3 mysql psql", ".sql"),
        ("pandas", "pandas dataframe pd.dataframe pd.read_csv", ""),
        ("numpy", "numpy", ""),
        ("rust", "cargo rustc rust cargo.toml", ".rs"),
        ("go", "golang go.mod", ".go"),
        ("java", "java maven gradle", ".java"),
        ("aws", "aws ec2 s3 boto3", ""),
        ("shell", "bash zsh chmod shell sudo", ".sh"),
        ("claude-code", "claude .claude claude-code", ""),
        ("airline", "flight flights airline baggage cabin", ""),
        ("reservation", "reservation reservations booking", ""),
        ("payment", "payment certificate certificates refund refunds gift_card credit_card", ""),
    ))
_TAG_TOKEN = re.compile(r"[a-z0-9_.][a-z0-9_.+\-]*")
_MAX_TAGS = 6


def _tags(texts: Iterable[str], tools: Iterable[str], task_type: str | None) -> list[str]:
    out: list[str] = []
    if task_type:
        out.append(str(task_type).strip().lower())
    for t in tools:
        low = t.strip().lower()
        if low and low not in out and low not in HOUSEKEEPING and len(out) < 3:
            out.append(low)
    blob = "\n".join(cap(t, 1500) for t in texts if t).lower()
    tokens = {t.rstrip(".-") for t in _TAG_TOKEN.findall(blob)}
    suffixes = {t[t.rfind("."):] for t in tokens if "." in t}
    for tag, words, exts in _TAG_WORDS:
        if len(out) >= _MAX_TAGS:
            break
        if tag in out:
            continue
        if not tokens.isdisjoint(words) or (exts and not suffixes.isdisjoint(exts)):
            out.append(tag)
    return out[:_MAX_TAGS]


def candidate(type_hint: str, kind: str, content: str, context: str, resolution: str, tools: list[str],
              confidence: float, task_type: str | None, evidence: Iterable[str] = (),
              resolution_chars: int = RESOLUTION_CHARS) -> dict[str, Any]:
    """A memory candidate: texts clipped and redacted, tags found, confidence clamped."""
    scrub = redact if REDACT.get() else (lambda x: x)
    content = scrub(clip(content, CONTENT_CHARS))
    context = scrub(clip(context, CONTEXT_CHARS))
    resolution = scrub(clip_lines(resolution, resolution_chars))
    tools = list(dict.fromkeys(t for t in tools if t))
    return {
        "content": content,
        "context": context,
        "resolution": resolution,
        "tags": _tags([content, context, resolution, *evidence], tools, task_type),
        "kind": kind,
        "tools_used": tools,
        "confidence": round(min(1.0, max(0.0, confidence)), 3),
        "type_hint": type_hint,
        # the user stated or confirmed it: the memory gate's test for a low-scoring segment
        "confirmed": False,
    }


#: share of the wordier memory's words the other holds for two memories of a segment to say
#: the same thing (measured on the larger one: a memory that quotes another is not its twin)
SAME_WORDS = 0.6


def _says_the_same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    wa, wb = (content_words(m["content"] + " " + (m.get("resolution") or "")) for m in (a, b))
    return bool(wa and wb) and len(wa & wb) / max(len(wa), len(wb)) >= SAME_WORDS


def dedupe(memories: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One memory per lesson of a segment: per (type, normalised content), and one of two that
    say the same thing whatever their types (most of one's words in the other); the most
    confident, first on ties."""
    out = _dedupe_exact(memories)
    kept: list[dict[str, Any]] = []
    for m in out:
        same = next((i for i, k in enumerate(kept) if _says_the_same(m, k)), None)
        if same is None:
            kept.append(m)
        elif m["confidence"] > kept[same]["confidence"]:
            kept[same] = m
    return kept


def _dedupe_exact(memories: list[dict[str, Any]]) -> list[dict[str, Any]]:
    best: dict[tuple[str, str], int] = {}
    out: list[dict[str, Any]] = []
    for m in memories:
        if not m["content"].strip():
            continue
        key = (m["type_hint"], norm_key(m["content"]) + ("|" + norm_key(m["resolution"])[:80]
                                                         if m["type_hint"] == "pattern" else ""))
        if key in best:
            k = best[key]
            if m["confidence"] > out[k]["confidence"]:
                out[k] = m
            continue
        best[key] = len(out)
        out.append(m)
    return out
