"""The files a task segment read or edited, and what the session saw in them.

A memory learned while working in a repository is only as current as the files it was
learned from. This module reads, from a segment's messages alone (no disk, no git), which
files the session touched and, where the session itself shows it, the file's whole
content at the end of the segment; :mod:`ultron.memory.repos` then places the paths in
their repository and :mod:`ultron.memory.staleness` compares the hashes later.

**The content rule** (what "the hash at the time" means), per file, in message order:

- ``Write`` (``content``): the file is exactly that text.
- a ``Read`` with no ``offset``/``limit`` whose result is a complete numbered listing
  (``cat -n`` style, lines 1..n, no truncation note): the file is those lines with their
  number prefixes stripped. A partial read says nothing about the whole file.
- ``Edit`` / ``MultiEdit`` on a file whose content is known: the replacement is applied
  (``old_string`` must occur exactly once, or ``replace_all``); otherwise the content
  becomes unknown, since the session never showed the result in full.
- ``apply_patch`` updates, shell ``cat``/``sed -n``/``head``/``tail`` reads, and anything
  else: the path is recorded, the content is unknown.
- a failed call (an error result) changes nothing.

Unknown content is hashed from the working tree at ingest time when that is possible,
else recorded as null (see :func:`ultron.memory.repos.locate`); a null hash can only
ever report the file as vanished, never as changed.

Hashes are :func:`text_hash` of the text with line endings and trailing newlines
normalised, because a Read listing cannot show whether the file ended with a newline:
the same function hashes the file on disk later, so the two always agree on equal text.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
import shlex
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

#: files recorded per segment: edited ones first, then reads, in order of first touch
MAX_FILES = 20

#: tool names (lower-cased) by what they do to a file
_READ_TOOLS = {"read", "read_file", "view", "notebookread"}
_WRITE_TOOLS = {"write", "write_file", "create_file"}
_EDIT_TOOLS = {"edit", "multiedit", "str_replace", "str_replace_editor", "str_replace_based_edit_tool",
               "notebookedit"}
_PATCH_TOOLS = {"apply_patch"}
_SHELL_TOOLS = {"bash", "shell", "exec_command", "local_shell", "run_terminal_cmd", "container.exec"}

#: one line of a ``cat -n`` style listing (Claude Code's Read: spaces, number, tab or arrow)
_NUMBERED = re.compile(r"^\s*(\d+)(?:\t|\u2192)(.*)$")
_PATCH_FILE = re.compile(r"^\*\*\* (Update|Add|Delete) File: (.+?)\s*$", re.MULTILINE)
_PATCH_MOVE = re.compile(r"^\*\*\* Move to: (.+?)\s*$", re.MULTILINE)
#: shell programs whose file arguments are reads
_SHELL_READERS = {"cat", "sed", "head", "tail", "less", "more", "nl", "bat"}
_SHELL_SEPARATORS = {"|", "||", "&&", ";", "&"}


@dataclass
class FileRef:
    """A file the segment touched: its path as the session wrote it (absolute or relative
    to the session's working directory), whether it was edited, and the whole text the
    session last saw in it (None: not known from the session)."""

    path: str
    edited: bool = False
    text: str | None = None


def text_hash(text: str) -> str:
    """sha256 of the text with CRLF/CR read as LF and trailing newlines dropped."""
    norm = text.replace("\r\n", "\n").replace("\r", "\n").rstrip("\n")
    return hashlib.sha256(norm.encode("utf-8", "surrogatepass")).hexdigest()


def bytes_hash(data: bytes) -> str:
    """:func:`text_hash` of a file's bytes (undecodable bytes replaced, as a listing shows them)."""
    return text_hash(data.decode("utf-8", "replace"))


def file_refs(messages: Sequence[Any], limit: int = MAX_FILES, cwd: str | None = None) -> list[FileRef]:
    """The files the messages' tool calls touched, edited first, at most ``limit``.

    ``messages`` are :class:`~ultron.sessions.messages.Message` (or anything with ``role``,
    ``content``, ``tool_calls``, ``tool_call_id`` and ``name``). With the session's working
    directory ``cwd``, relative paths are made absolute, so a file named both ways is one
    file (a Read by absolute path, then a patch by relative path, replay in order)."""
    results = {m.tool_call_id: m for m in messages if m.role == "tool" and m.tool_call_id}
    refs: dict[str, FileRef] = {}

    def ref(path: str) -> FileRef:
        if cwd and not path.startswith(("/", "~")):
            path = posixpath.normpath(posixpath.join(cwd, path))
        return refs.setdefault(path, FileRef(path))

    for m in messages:
        for call in m.tool_calls or []:
            name, args = _call(call)
            result = results.get(call.get("id") or "")
            if result is not None and _failed(result):
                continue
            _apply(name, args, result.content if result is not None else None, ref)
    ordered = sorted(refs.values(), key=lambda r: not r.edited)  # stable: first touch order within each group
    return ordered[:limit]


def _apply(name: str, args: dict[str, Any], output: str | None, ref) -> None:
    path = _path_arg(args)
    if name in _WRITE_TOOLS and path:
        r = ref(path)
        r.edited = True
        content = args.get("content", args.get("file_text"))
        r.text = content if isinstance(content, str) else None
    elif name in _READ_TOOLS and path:
        r = ref(path)
        whole = None if (args.get("offset") or args.get("limit") or args.get("view_range")) else _listing(output)
        if whole is not None:
            r.text = whole
    elif name in _EDIT_TOOLS and path:
        r = ref(path)
        if args.get("command") in ("view",):  # the editor tool's read mode
            return
        r.edited = True
        edits = args.get("edits") if isinstance(args.get("edits"), list) else [args]
        r.text = _edited(r.text, edits)
    elif name in _PATCH_TOOLS:
        for p in patch_paths(_patch_text(args)):
            r = ref(p)
            r.edited, r.text = True, None
    elif name in _SHELL_TOOLS:
        for p in shell_reads(args.get("command", args.get("cmd"))):
            ref(p)


def _call(call: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    fn = call.get("function") if isinstance(call.get("function"), dict) else call
    name = str(fn.get("name") or "").strip().lower()
    raw = fn.get("arguments", fn.get("input", {}))
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            raw = {"input": raw}  # apply_patch's free-form input
    return name, raw if isinstance(raw, dict) else {"input": raw}


def _failed(result: Any) -> bool:
    text = result.content if isinstance(result.content, str) else ""
    return result.name == "error" or text.lstrip().startswith("<tool_use_error>")


def _path_arg(args: dict[str, Any]) -> str | None:
    for key in ("file_path", "path", "notebook_path", "filename"):
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _listing(output: str | None) -> str | None:
    """The file text of a complete numbered listing (lines 1..n), else None."""
    if not output:
        return None
    lines: list[str] = []
    for raw in output.split("\n"):
        match = _NUMBERED.match(raw)
        if match is None:
            if lines and raw.strip().startswith("<system-reminder>"):
                break  # the harness's note after the listing
            if lines and not raw.strip():
                continue
            return None
        if int(match.group(1)) != len(lines) + 1:
            return None  # a gap or a listing that does not start at 1: not the whole file
        lines.append(match.group(2))
    return "\n".join(lines) if lines else None


def _edited(text: str | None, edits: Iterable[Any]) -> str | None:
    """The text after the edits, or None when any of them cannot be replayed exactly."""
    for edit in edits:
        if text is None or not isinstance(edit, dict):
            return None
        old, new = edit.get("old_string", edit.get("old_str")), edit.get("new_string", edit.get("new_str", ""))
        if not isinstance(old, str) or not old or not isinstance(new, str):
            return None
        count = text.count(old)
        if count == 0 or (count > 1 and not edit.get("replace_all")):
            return None
        text = text.replace(old, new) if edit.get("replace_all") else text.replace(old, new, 1)
    return text


def _patch_text(args: dict[str, Any]) -> str:
    for key in ("input", "patch", "command"):
        value = args.get(key)
        if isinstance(value, list):  # codex: ["apply_patch", "*** Begin Patch ..."]
            value = "\n".join(str(v) for v in value)
        if isinstance(value, str):
            return value
    return ""


def patch_paths(patch: str) -> list[str]:
    """Files an ``apply_patch`` envelope adds, updates, deletes or moves to."""
    found = [m.group(2) for m in _PATCH_FILE.finditer(patch)] + [m.group(1) for m in _PATCH_MOVE.finditer(patch)]
    return list(dict.fromkeys(p.strip() for p in found if p.strip()))


def shell_reads(command: Any) -> list[str]:
    """Files a shell command reads with cat / sed -n / head / tail and the like (best effort:
    options, globs, redirections and anything not plainly a path are skipped)."""
    if isinstance(command, list):  # codex: ["bash", "-lc", "cat x"] or ["cat", "x"]
        words = [str(w) for w in command]
        if len(words) >= 3 and words[0].rsplit("/", 1)[-1] in ("bash", "sh", "zsh") and words[1] in ("-c", "-lc"):
            command = words[2]
        else:
            command = shlex.join(words)
    if not isinstance(command, str) or not command.strip():
        return []
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:
        return []
    out: list[str] = []
    program: str | None = None
    skip_next = False
    script_pending = False
    for word in words:
        if word in _SHELL_SEPARATORS or set(word) <= set("<>|&;()"):
            program, skip_next, script_pending = None, word in (">", ">>", "<"), False
            continue
        if skip_next:
            skip_next = False
            continue
        if program is None:
            program = word.rsplit("/", 1)[-1]
            script_pending = program == "sed"
            continue
        if program not in _SHELL_READERS:
            continue
        if word.startswith("-"):
            if program in ("head", "tail") and word in ("-n", "-c"):
                skip_next = True
            if program == "sed" and word in ("-e", "--expression"):
                script_pending = False
                skip_next = True
            continue
        if script_pending:  # sed's first operand is its script
            script_pending = False
            continue
        if any(ch in word for ch in "*?$`{}") or "=" in word:
            continue
        out.append(word)
    return list(dict.fromkeys(out))
