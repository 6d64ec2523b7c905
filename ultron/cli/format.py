"""Plain-text rendering for the ``ultron`` command line: aligned tables and key/value blocks.

No dependency beyond the standard library, so every command's human output looks the
same and ``--json`` stays the machine format.
"""

from __future__ import annotations

import re
import shutil
import sys
import textwrap
from typing import Any, Iterable, Mapping, Sequence

_SPACE = re.compile(r"\s+")
ELLIPSIS = "…"
#: A column narrower than this is never squeezed further to fit the terminal.
MIN_FLEX = 12


def terminal_width(stream=None) -> int | None:
    """Columns of the terminal behind ``stream`` (stdout); None when it is a pipe or file,
    so redirected output is never truncated."""
    stream = stream or sys.stdout
    try:
        if not stream.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    return shutil.get_terminal_size((100, 24)).columns


#: Width of a summary table when stdout is not a terminal (a pipe, an agent's tool call):
#: summaries are cut to it; ``--json`` has the full text.
PIPE_WIDTH = 100


def summary_width(stream=None) -> int:
    """The width for a table of summaries: the terminal's, else ``PIPE_WIDTH``."""
    return terminal_width(stream) or PIPE_WIDTH


def one_line(text: Any, width: int | None = None) -> str:
    """Collapse whitespace (a table cell is one line) and cut to ``width`` with an ellipsis."""
    s = _SPACE.sub(" ", "" if text is None else str(text)).strip()
    if width is not None and len(s) > width:
        return s[: max(0, width - 1)] + ELLIPSIS
    return s


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 0.01 and value else f"{value:.2f}"
    if isinstance(value, (list, tuple, set)):
        return ", ".join(cell(v) for v in value) or "-"
    return one_line(value)


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, align: str | None = None,
          max_width: int | None = None, flex: int = -1, indent: str = "") -> str:
    """An aligned table with a header rule (none when every header is blank). ``align`` has one ``l``/``r`` per column
    (default: left); when ``max_width`` is given, the ``flex`` column (default the last)
    is cut so each line fits."""
    cells = [[cell(v) for v in row] for row in rows]
    n = len(headers)
    align = (align or "l" * n).ljust(n, "l")
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    flex = flex % n
    if max_width is not None:
        others = sum(w for i, w in enumerate(widths) if i != flex) + 2 * (n - 1) + len(indent)
        room = max(MIN_FLEX, max_width - others)
        if widths[flex] > room:
            widths[flex] = max(room, len(headers[flex]))
            cells = [[one_line(c, widths[flex]) if i == flex else c for i, c in enumerate(r)] for r in cells]

    def line(values: Sequence[str]) -> str:
        parts = [v.rjust(widths[i]) if align[i] == "r" else v.ljust(widths[i]) for i, v in enumerate(values)]
        return (indent + "  ".join(parts)).rstrip()

    out = [line(headers), line(["-" * w for w in widths])] if any(headers) else []
    out += [line(r) for r in cells]
    return "\n".join(out)


def key_values(pairs: Iterable[tuple[str, Any]], *, indent: str = "  ", width: int | None = None) -> str:
    """``key: value`` lines with the values aligned; long or multi-line values continue
    on indented lines below, wrapped to ``width`` when given."""
    pairs = [(k, v) for k, v in pairs]
    if not pairs:
        return ""
    key_w = max(len(k) for k, _ in pairs) + 1
    out = []
    for key, value in pairs:
        text = value if isinstance(value, str) else cell(value)
        lines = text.splitlines() or [""]
        if width is not None:
            wrap_w = max(20, width - len(indent) - key_w - 1)
            lines = [w for ln in lines for w in (textwrap.wrap(ln, wrap_w) or [""])]
        out.append(f"{indent}{(key + ':').ljust(key_w)} {lines[0]}".rstrip())
        pad = indent + " " * (key_w + 1)
        out += [f"{pad}{ln}".rstrip() for ln in lines[1:]]
    return "\n".join(out)


def counts_table(counts: Mapping[str, Any], *, key_header: str = "", value_header: str = "count",
                 indent: str = "  ") -> str:
    """A two-column table of name → number (or text)."""
    return table([key_header, value_header], [(k, v) for k, v in counts.items()], align="lr", indent=indent)


def mapping(title: str, data: Any, *, indent: str = "") -> str:
    """A nested mapping as sections: scalars as an aligned count table, nested mappings
    as sub-sections, lists by their length (``--json`` shows them in full)."""
    lines = [f"{indent}{title}"]
    if not isinstance(data, Mapping):
        return f"{indent}{title}: {cell(data)}"
    scalars = {label(k): _listed(v) for k, v in data.items() if not isinstance(v, Mapping)}
    if scalars:
        lines.append(counts_table(scalars, value_header="", indent=indent + "  "))
    for key, value in data.items():
        if isinstance(value, Mapping):
            lines.append(mapping(label(key), value, indent=indent + "  ") if value
                         else f"{indent}  {label(key)}: -")
    if len(lines) == 1:
        lines.append(f"{indent}  (none)")
    return "\n".join(lines)


def label(key: Any) -> str:
    """A JSON key as a heading: ``memories_clustered`` -> ``memories clustered``."""
    return str(key).replace("_", " ")


def _listed(value: Any, most: int = 10) -> Any:
    """Short lists of plain values inline, longer ones by their length."""
    if isinstance(value, (list, tuple)):
        if len(value) <= most and all(not isinstance(v, (Mapping, list, tuple)) for v in value):
            return ", ".join(cell(v) for v in value) or "-"
        return f"{len(value)} items"
    return value


def short_id(identifier: str | None, n: int = 8) -> str:
    return (identifier or "-")[:n]


def plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n} {word if n == 1 else (many or word + 's')}"
