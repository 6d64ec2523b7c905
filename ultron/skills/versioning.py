"""Skill versions (MAJOR.MINOR.PATCH) and slugs.

A cluster's first skill is 1.0.0; each better re-crystallisation is the next minor.
Slugs are the directory and lookup names, so they are plain lowercase-hyphen words,
at most ``SLUG_MAX`` characters (SKILL.md's ``name`` rules).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Iterable

FIRST_VERSION = "1.0.0"
SLUG_MAX = 64
_SLUG_BASE_MAX = 48            # leaves room for a "-2" style suffix
SLUG_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")


def parse_version(version: str) -> tuple[int, int, int]:
    m = _VERSION.match(str(version or "").strip())
    if not m:
        raise ValueError(f"not a MAJOR.MINOR.PATCH version: {version!r}")
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def next_minor(version: str) -> str:
    major, minor, _ = parse_version(version)
    return f"{major}.{minor + 1}.0"


def latest(versions: Iterable[str]) -> str | None:
    """The highest well-formed version; malformed ones are ignored."""
    good = []
    for v in versions:
        try:
            good.append((parse_version(v), v))
        except ValueError:
            continue
    return max(good)[1] if good else None


def slugify(text: str, fallback: str = "skill", max_len: int = _SLUG_BASE_MAX) -> str:
    """Lowercase ASCII words joined by hyphens, cut at a word boundary (``max_len`` characters)."""
    ascii_text = unicodedata.normalize("NFKD", text or "").encode("ascii", "ignore").decode()
    words = re.findall(r"[a-z0-9]+", ascii_text.lower())
    slug = ""
    for w in words:
        candidate = f"{slug}-{w}" if slug else w
        if len(candidate) > max_len:
            break
        slug = candidate
    if not slug and words:
        slug = words[0][:max_len]
    return slug or fallback


def slug_candidates(base: str, limit: int = 50) -> list[str]:
    """``base``, ``base-2``, ``base-3`` ...: tried in order until one is free."""
    return [base] + [f"{base}-{i}" for i in range(2, limit + 1)]
