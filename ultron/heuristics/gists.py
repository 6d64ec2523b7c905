"""How the extractors show a tool call, and how alike two calls are.

A memory names the calls behind it in a few words a person can act on ("Bash
`pytest -x`", "Edit settings.py", "update_reservation with cabin=business"), not as
a JSON dump: the key argument (command, file name, query ...) when there is one,
else a few ``key=value`` pairs. Argument similarity (the error rule's fix search,
the correction and preference rules' "which call is this about") compares the
words of the argument values, not the JSON.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, Iterable

from ultron.heuristics.text import clip, words

if TYPE_CHECKING:
    from ultron.heuristics.episodes import Call

_KEY_ARGS = ("command", "cmd", "script", "code", "query", "sql", "file_path", "path", "notebook_path", "filename",
             "url", "pattern", "skill", "description", "subagent_type", "plan", "prompt")
COMMAND_KEYS = ("command", "cmd", "script", "code", "sql")
_PATH_KEYS = frozenset({"file_path", "path", "notebook_path", "filename"})


def short_value(v: Any, n: int = 60) -> str:
    if isinstance(v, str):
        return clip(v, n)
    if isinstance(v, bool) or v is None or isinstance(v, (int, float)):
        return json.dumps(v)
    if isinstance(v, list):
        parts = [_item_gist(x, max(12, n // 2)) for x in v[:3]]
        more = f", +{len(v) - 3}" if len(v) > 3 else ""
        return clip("[" + ", ".join(parts) + more + "]", n)
    if isinstance(v, dict):
        inner = ", ".join(f"{k}: {short_value(x, 24)}" for k, x in list(v.items())[:4])
        return clip("{" + inner + "}", n)
    return clip(str(v), n)


def _item_gist(v: Any, n: int) -> str:
    """A list item: a dict shows its first two plain values ("HAT229 2024-05-27")."""
    if isinstance(v, dict):
        vals = [str(x) for x in v.values() if isinstance(x, (str, int, float)) and not isinstance(x, bool)][:2]
        if vals:
            return clip(" ".join(vals), n)
    return short_value(v, n)


def _basename(path: str) -> str:
    path = path.rstrip("/")
    return path.rsplit("/", 1)[-1] or path


_DIFF_FILE = re.compile(r"^(?:\+\+\+ (?:b/)?|\*\*\* (?:Update|Add) File: )(\S+)", re.MULTILINE)
_EDIT_PAIRS = (("old_string", "new_string"), ("old_str", "new_str"), ("old_text", "new_text"), ("search", "replace"))


def _changed_lines(old: str, new: str) -> tuple[str, str]:
    """The first line that differs on each side: what an edit changed, without the context."""
    a = [x.strip() for x in old.splitlines() if x.strip()]
    b = [x.strip() for x in new.splitlines() if x.strip()]
    gone = [x for x in a if x not in b]
    added = [x for x in b if x not in a]
    return (gone[0] if gone else ""), (added[0] if added else "")


def _change_gist(where: str, old: str, new: str, n: int) -> str:
    """"file: old → new": the change itself is what a fix memory has to show (the new
    setting, the pinned version); a bare file name says nothing an agent can reuse."""
    before, after = _changed_lines(old, new)
    if not after and not before:
        return clip(where, n)
    room = max(24, (n - len(where) - 6) // 2)
    body = f"{clip(before, room)} → {clip(after, room)}" if before and after else clip(after or before, 2 * room)
    return clip(f"{where}: {body}" if where else body, n)


def diff_gist(text: str, n: int) -> str:
    """A unified diff (or an apply_patch envelope) as "file: removed line → added line"."""
    lines = text.splitlines()
    minus = "\n".join(x[1:] for x in lines if x.startswith("-") and not x.startswith("---"))
    plus = "\n".join(x[1:] for x in lines if x.startswith("+") and not x.startswith("+++"))
    m = _DIFF_FILE.search(text)
    return _change_gist(_basename(m.group(1)) if m else "", minus, plus, n)


def _is_diff(v: str) -> bool:
    return ("\n+" in v or v.startswith("+")) and ("\n@@" in v or v.startswith(("---", "*** Begin Patch", "diff ")))


def arg_gist(args: dict[str, Any] | None, raw: str, n: int = 100, keys: Iterable[str] | None = None,
             value_chars: int = 48) -> str:
    """A short human gist of a call's arguments: the key argument, or a few k=v pairs; an
    edit or a patch shows what it changed."""
    if args is None:
        return clip(raw, n) if raw else ""
    for old_k, new_k in _EDIT_PAIRS:
        if isinstance(args.get(new_k), str) and isinstance(args.get(old_k), str):
            where = next((_basename(args[k]) for k in _PATH_KEYS if isinstance(args.get(k), str)), "")
            return _change_gist(where, args[old_k], args[new_k], n)
    diff = next((v for v in args.values() if isinstance(v, str) and _is_diff(v)), None)
    if diff is not None and keys is None:
        return diff_gist(diff, n)
    if keys is None:
        for k in _KEY_ARGS:
            v = args.get(k)
            if isinstance(v, str) and v.strip():
                if k in _PATH_KEYS:
                    return clip(_basename(v), n)
                if k in COMMAND_KEYS:
                    lines = [x.strip() for x in v.strip().split("\n") if x.strip()]
                    head = lines[0] if lines else ""
                    if "<<" in head and len(lines) > 1:          # a heredoc: show its first line too
                        head += " " + lines[1]
                    return "`" + clip(head, n - 2) + "`"
                if k == "plan":
                    return clip(v.strip().split("\n", 1)[0].lstrip("# "), n)
                return clip(v, n)
        keys = list(args)
    parts = []
    for k in keys:
        if k not in args:
            continue
        parts.append(f"{k}={short_value(args[k], value_chars)}")
        if sum(len(p) + 2 for p in parts) > n:
            break
    return clip(", ".join(parts), n)


def call_gist(name: str, args: dict[str, Any] | None, raw: str, n: int = 110) -> str:
    gist = arg_gist(args, raw, n)
    return f"{name} {gist}" if gist else name


def changed_gist(name: str, failed: Call, fixed: Call, n: int = 160) -> str:
    """For a retry of the same tool: only the arguments that changed."""
    a, b = failed.args, fixed.args
    if a is None or b is None:
        return call_gist(name, b, fixed.raw, n)
    for k in ("command", "cmd", "script", "code", "sql", "query"):
        if isinstance(b.get(k), str):
            return call_gist(name, b, fixed.raw, n)
    changed = [k for k in b if a.get(k) != b.get(k)]
    if not changed or len(changed) > 4:
        return call_gist(name, b, fixed.raw, n)
    return f"{name} with " + arg_gist(b, fixed.raw, n, keys=changed, value_chars=max(48, n // len(changed) - 12))


def arg_words(c: Call) -> set[str]:
    if c.args is None:
        return words(c.raw[:600])
    vals: list[str] = []

    def walk(v: Any) -> None:
        if len(vals) > 60:
            return
        if isinstance(v, str):
            vals.append(v[:300])
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v[:20]:
                walk(x)
        elif v is not None and not isinstance(v, bool):
            vals.append(str(v))

    walk(c.args)
    return words(" ".join(vals))


def arg_similarity(failed: Call, other: Call) -> float:
    a, b = arg_words(failed), arg_words(other)
    if not a and not b:
        return 1.0 if failed.raw == other.raw else 0.0
    if not a or not b:
        return 0.0
    inter = len(a & b)
    return 0.5 * inter / len(a | b) + 0.5 * inter / len(a)
