"""How a found lesson is worded as guidance (``docs/rubric.md``): the cause as the lesson, the
fix as an instruction, steps with their substance and without look-ups.

An agent's session reports what it did ("Found it: the build installs into /opt/venv …",
"Moved COPY requirements.txt before RUN pip install and rebuilt the image, so the
container now starts"). A note for the next agent says what goes wrong and what to do:
the conversational opener goes, a report of a change becomes the instruction to make it,
the outcome clause ("so it now starts") is left to the context, and a step that only
looked something up (reading a file, listing a directory) is not a step of the fix.

The verb table is closed-class grammar (the past forms agents use to report a change),
not a list of lessons: any wording of any lesson passes through it unchanged but for
its first verbs.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from difflib import SequenceMatcher
from typing import Iterable, Sequence

import json_repair

_I = re.IGNORECASE

#: a conversational opener before the lesson proper ("Found it: …", "OK, so …")
_OPENER = re.compile(r"^\s*(?:(?:found it|got it|i see|i found it|ok(?:ay)?|alright|all right|right|great|perfect|"
                     r"aha|ah|done|there we go|good news|that'?s it)\s*[:,.!—–-]+\s*)+", _I)
#: the first person before a reported change ("I moved …", "I've added …")
_ME = re.compile(r"^\s*(?:i(?:'ve| have)?|we(?:'ve| have)?)\s+", _I)

_BASE = {
    "added": "add", "moved": "move", "replaced": "replace", "changed": "change", "set": "set",
    "installed": "install", "copied": "copy", "put": "put", "fixed": "fix", "updated": "update",
    "removed": "remove", "renamed": "rename", "pinned": "pin", "switched": "switch", "rebuilt": "rebuild",
    "built": "build", "reordered": "reorder", "upgraded": "upgrade", "downgraded": "downgrade",
    "created": "create", "edited": "edit", "declared": "declare", "configured": "configure",
    "enabled": "enable", "disabled": "disable", "ran": "run", "re-ran": "re-run", "reran": "re-run",
    "restarted": "restart", "wrapped": "wrap", "used": "use", "bumped": "bump", "raised": "raise",
    "increased": "increase", "decreased": "decrease", "lowered": "lower", "deleted": "delete",
    "reverted": "revert", "exported": "export", "mounted": "mount", "passed": "pass", "specified": "specify",
    "quoted": "quote", "escaped": "escape", "converted": "convert", "rewrote": "rewrite", "wrote": "write",
    "made": "make", "swapped": "swap", "dropped": "drop", "split": "split", "merged": "merge",
    "rotated": "rotate", "revoked": "revoke", "regenerated": "regenerate", "restored": "restore",
    "granted": "grant", "committed": "commit", "pushed": "push", "pulled": "pull", "cleared": "clear",
    "reset": "reset", "applied": "apply", "marked": "mark", "limited": "limit", "extended": "extend",
    "included": "include", "excluded": "exclude", "imported": "import",
}
_VERB = re.compile(r"\b(" + "|".join(sorted(map(re.escape, _BASE), key=len, reverse=True)) + r")\b", _I)
#: the outcome a report ends with ("…, so the container now imports redis and starts")
_OUTCOME = re.compile(r",?\s+(?:so|and so|which means|and now)\s+(?:that\s+)?[^.;]*\bnow\b[^.;]*", _I)

#: a call that only reads (files, listings, searches, state): a look-up, not a step of the fix
_LOOKUP_TOOL = re.compile(r"^(?:read|view|cat|open|get|list|ls|glob|grep|search|find|fetch|look|show|check|describe|"
                          r"query|retrieve|websearch|webfetch)(?:_|\b|[A-Z])", _I)
_LOOKUP_CMD = re.compile(r"^\s*(?:sudo\s+)?(?:cat|less|more|head|tail|ls|ll|tree|find|grep|rg|ag|wc|file|stat|which|"
                         r"type|pwd|echo|printenv|env|du|df|ps|top|git (?:status|log|diff|show|branch|blame)|"
                         r"docker (?:ps|images|logs|inspect)|kubectl (?:get|describe|logs)|pip (?:show|list|freeze))\b"
                         r"(?![^|;&]*(?:>|\|\s*(?:sh|bash|tee)\b))", _I)


def without_opener(text: str) -> str:
    """The sentence without its conversational opener ("Found it: X" reads "X")."""
    # the first word keeps its case: "requirements.txt lists …" is not a sentence to capitalise
    return _OPENER.sub("", text or "", count=1) or text


def reports_change(sentence: str) -> bool:
    """Does the sentence open by reporting a change made ("Moved …", "I added …")?"""
    s = _ME.sub("", without_opener(sentence))
    m = _VERB.match(s)
    return bool(m) and m.start() == 0


def as_instruction(sentence: str) -> str:
    """A report of a change worded as the instruction to make it: "Moved X and rebuilt the
    image, so it now starts." reads "Move X and rebuild the image." Other sentences are
    returned without their opener."""
    s = without_opener(sentence).strip()
    if not reports_change(s):
        return s
    s = _ME.sub("", s)
    s = _OUTCOME.sub("", s).rstrip(" ,;")

    def base(m: re.Match[str]) -> str:
        word = _BASE[m.group(1).lower()]
        return word

    # the first verb, and each verb coordinated with it ("… and rebuilt the image")
    head = _VERB.sub(base, s, count=1)
    head = re.sub(r"(\b(?:and|then|,)\s+)(" + _VERB.pattern + r")",
                  lambda m: m.group(1) + _BASE[m.group(2).lower()], head, flags=_I)
    head = head[:1].upper() + head[1:]
    return head if head.endswith((".", "!", ")")) else head + "."


#: a command's read-only subcommand or flag ("gh gist view", "kubectl get", "claude --help")
_LOOKUP_SUB = re.compile(r"^\s*[\w.-]+(?:\s+[\w.-]+)?\s+(?:view|list|ls|show|status|get|describe|logs|inspect|info|"
                         r"help|version)\b|\s--(?:help|version)\b", _I)
#: what a command line opens with before its command: "cd dir &&", "FOO=1 "
_PREAMBLE = re.compile(r"^\s*(?:cd\s+\S+\s*(?:&&|;)\s*|[A-Z_][A-Z0-9_]*=\S*\s+)+")
#: a dry run changes nothing: it looks at what a command would do
_DRY_RUN = re.compile(r"\s--?dry[-_]?run\b", _I)
_SED_PRINT = re.compile(r"^\s*sed\s+-n\b")
#: output written to a file (not "2>&1")
_WRITES = re.compile(r"(?<![0-9&])>(?!&)|\|\s*(?:tee|sh|bash)\b")
#: the harness's own tools: asking the person, plans, to-do lists, background shells
_HARNESS_TOOL = re.compile(r"^(?:AskUser\w*|TodoWrite|TodoRead|ExitPlanMode|EnterPlanMode|KillShell|KillBash|"
                           r"BashOutput|TaskOutput)$")


def is_harness(name: str) -> bool:
    """The harness's own bookkeeping tool (asking the person, plan mode, to-do lists)."""
    return bool(_HARNESS_TOOL.match(name or ""))


def is_lookup(name: str, gist: str = "") -> bool:
    """A call that is no step of a fix: a read-only tool or shell command, or the harness's
    own bookkeeping (asking the person, plan mode, to-do lists)."""
    if is_harness(name):
        return True
    if gist and gist != name and not gist.startswith(name + " "):
        # the gist is the command itself; a pipe into head or grep does not make a run a look-up
        cmd = _PREAMBLE.sub("", gist)
        return bool(_LOOKUP_CMD.match(cmd) or _SED_PRINT.match(cmd) or _DRY_RUN.search(cmd)
                    or (_LOOKUP_SUB.search(cmd) and not _WRITES.search(cmd)))
    return bool(_LOOKUP_TOOL.match(name or "")) and not re.search(r"write|edit|create|update|delete|set", name, _I)


_PATH_KEYS = ("file_path", "path", "filename", "file", "target")
_NEW_KEYS = ("new_string", "new_str", "content", "text", "contents", "file_text", "patch", "diff")
_OLD_KEYS = ("old_string", "old_str")


def step_of_call(name: str, args: str, gist: str, limit: int = 220) -> str:
    """A call as a step with its substance: a file edit says which file and what it now holds
    ("Edit src/dates.py: replace `a` with `b`"); anything else is its command or gist."""
    data = None
    if args and args.lstrip().startswith("{"):
        try:
            data = json.loads(args)
        except ValueError:
            # arguments cut short where they were stored: what survives still names the file
            data = json_repair.loads(args)
    if isinstance(data, dict):
        path = next((str(data[k]) for k in _PATH_KEYS if isinstance(data.get(k), str) and data[k].strip()), "")
        new = next((str(data[k]) for k in _NEW_KEYS if isinstance(data.get(k), str) and data[k].strip()), "")
        old = next((str(data[k]) for k in _OLD_KEYS if isinstance(data.get(k), str) and data[k].strip()), "")
        if new:
            body = " ".join(new.split())
            if path and old:
                text = f"In {path}: replace `{' '.join(old.split())}` with `{body}`"
            elif path:
                text = f"Write {path}: `{body}`"
            else:           # the path was cut off with the rest of the arguments
                text = f"{name}: `{body}`"
            return _clip_code(text, limit)
    return _clip_code(gist, limit)


def _clip_code(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[:limit - 1].rstrip()
    # an open code span is closed after the ellipsis so the step still renders
    return cut + ("…`" if cut.count("`") % 2 else "…")


def common_form(texts: Sequence[str], share: float = 0.5) -> str:
    """What several wordings of one thing share, the parts that differ shown as "…":
    "docker build -t worker ." and "docker build -t api ." read "docker build -t … .".
    A word is kept when it lines up with a word of at least ``share`` of the others."""
    texts = [t for t in texts if t and t.strip()]
    if not texts:
        return ""
    if len(texts) == 1:
        return texts[0]
    base = Counter(texts).most_common(1)[0][0]
    ref = base.split()
    votes = [0] * len(ref)
    for other in texts:
        if other is base:
            continue
        sm = SequenceMatcher(a=ref, b=other.split(), autojunk=False)
        for blk in sm.get_matching_blocks():
            for i in range(blk.a, blk.a + blk.size):
                votes[i] += 1
    need = share * (len(texts) - 1)
    out: list[str] = []
    for word, v in zip(ref, votes):
        if v >= need:
            out.append(word)
        elif not out or out[-1] != "…":
            # a quoted or bracketed name keeps its quotes: "'redis'" reads "'…'"
            lead = word[0] if word[0] in "'\"`(<[" else ""
            tail = word[-1] if word[-1] in "'\"`)>].,:;" and len(word) > 1 else ""
            out.append(f"{lead}…{tail}")
    return " ".join(out)


def file_names(text: str) -> list[str]:
    """File names a text mentions, in order (``requirements.txt``, ``Dockerfile``): what a
    reader checks first. A one-off suffix of a Dockerfile (``Dockerfile.worker``) is dropped."""
    out: list[str] = []
    for m in _FILE.finditer(text or ""):
        name = m.group(0)
        if name.lower().startswith("dockerfile"):
            name = "Dockerfile"
        if name not in out:
            out.append(name)
    return out


_FILE = re.compile(r"(?<![\w/.-])(?:Dockerfile(?:\.[\w-]+)?|Makefile|Procfile|Gemfile|"
                   r"[\w-]+\.(?:txt|toml|ya?ml|json|cfg|ini|conf|lock|env|sh|py|js|ts|go|rs|java|rb|sql|md))(?![\w/])")


def first_error(texts: Iterable[str]) -> str:
    """The exception class most of the texts name (``ModuleNotFoundError``), or ""."""
    names = Counter()
    for t in texts:
        m = re.search(r"\b([A-Z]\w*(?:Error|Exception|Exit|Fault))\b", t or "")
        if m:
            names[m.group(1)] += 1
    return names.most_common(1)[0][0] if names else ""
