"""Pure helpers that turn store data into what a page shows: SKILL.md as HTML with its
evidence linked, a diff between two versions, a session message cut to a readable size."""

from __future__ import annotations

import difflib
import re
from typing import Any, Iterable
from urllib.parse import quote, urlencode

from markdown_it import MarkdownIt
from markupsafe import Markup, escape

# CommonMark with raw HTML off: a SKILL.md (partly LLM-written) can never inject markup.
_MARKDOWN = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")
_CODE_ID = re.compile(r"<code>([0-9a-f][0-9a-f-]{7,63})</code>")


def skill_html(skill_md: str, memory_ids: Iterable[str]) -> Markup:
    """SKILL.md rendered, each cited memory id a link to that memory (the memories behind
    each step). Front matter is shown as a code block, not parsed into the page."""
    text = skill_md
    if text.startswith("---\n"):
        end = text.find("\n---", 4)
        if end != -1:
            text = "```yaml\n" + text[4:end] + "\n```\n" + text[end + 4:]
    tokens = _MARKDOWN.parse(text)
    for token in tokens:  # the page has its own h1 and a "SKILL.md" h2: the skill's headings sit below
        if token.type in ("heading_open", "heading_close"):
            token.tag = f"h{min(6, int(token.tag[1]) + 2)}"
    html = _MARKDOWN.renderer.render(tokens, _MARKDOWN.options, {})
    known = set(memory_ids)

    def link(m: re.Match[str]) -> str:
        memory_id = m.group(1)
        if memory_id not in known:
            return m.group(0)
        return f'<a href="/ui/memories/{quote(memory_id)}"><code>{memory_id}</code></a>'

    return Markup(_CODE_ID.sub(link, html))


def diff_lines(old: str, new: str, context: int = 3) -> list[tuple[str, str]]:
    """A unified diff as (kind, line) pairs, kind in add / del / hunk / ctx / head."""
    out: list[tuple[str, str]] = []
    for line in difflib.unified_diff(old.splitlines(), new.splitlines(), "before", "after", lineterm="", n=context):
        if line.startswith(("---", "+++")):
            kind = "head"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        else:
            kind = "ctx"
        out.append((kind, line))
    return out


def query_string(params: dict[str, Any], **changes: Any) -> str:
    """The page's query string with some parameters changed (None or "" drops one)."""
    merged = {**params, **changes}
    return urlencode({k: v for k, v in merged.items() if v not in (None, "")})


def percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.0f}%"


def short_id(memory_id: str) -> str:
    return memory_id[:8]


def escape_text(value: Any) -> Markup:
    return escape(value)
