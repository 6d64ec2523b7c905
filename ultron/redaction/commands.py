r"""Layer 2, command lines: the password of ``curl -u name:password`` and its kin.

A command line says what a value is by the flag before it, and a flag means something
only for its command: ``-u`` is curl's user (``git push -u`` is not), ``-a`` httpie's
auth (``ls -a`` is not), ``--user`` a user and a password for curl and wget but a user
and a group for docker. So the pattern stops at the flag and the check reads the rest
the way the shell does: back to the start of the command (across ``\``-continued
lines, also JSON-escaped ones) to find which tool the flag belongs to, and forward over
the shell word after it (quotes, escaped JSON quotes, spaces inside quotes) to find the
password after the colon. The user name and the quotes stay.

The decisions are listed (and pinned) with the assignment layer's in
:mod:`~ultron.redaction.assignments`.
"""

from __future__ import annotations

import regex

from ultron.redaction.checks import _NUMBER, _is_placeholder, _trim_sentence_end, has_alnum
from ultron.redaction.rules import Span


def _small_number(value: str) -> bool:
    return bool(_NUMBER.match(value)) and len(value.lstrip("+-")) <= 3


# curl -u name:pass, -su name:pass, -uname:pass, --user name:pass, --proxy-user, httpie/xh
# -a/--auth name:pass, and the JSON-array form ["curl", "-u", "name:pass"]. The pattern
# stops at the flag; :func:`check_user_pass` reads the shell word after it (quotes,
# escaped JSON quotes, spaces inside quotes) and checks the command is one whose flag
# takes a password. The name stays.
USER_PASS = (
    r"(?<![\w-])(?:-(?P<cluster>[A-Za-z]{0,8}?)(?P<short>[uUa])|--(?P<long>user|proxy-user|auth)(?![\w-]))"
    r"(?:(?P<jq>\\*[\"'])[ \t]*,[ \t]*(?P=jq)|[ \t]*=?[ \t]*)"
    r"(?=(?:\\*[\"'])?[^\s:\"'`]*:)"
)

# Which command's short flag carries ``name:password`` (wget's -U is its user agent).
_USER_PASS_TOOLS = {"u": ("curl", "curlie"), "U": ("curl", "curlie"), "a": ("http", "https", "httpie", "xh", "xhs")}
# Commands whose --user is a user and a group (``docker run --user app:app``), not a password.
_USER_GROUP_TOOLS = frozenset({"docker", "podman", "nerdctl", "buildah", "lxc", "incus", "kubectl", "ctr"})
_TOOL_WORD = regex.compile(
    r"(?<![\w.$-])(?:[\w.~-]*/)?(?P<tool>curl|curlie|https?|httpie|xhs?|docker|podman|nerdctl|buildah|lxc|incus"
    r"|kubectl|ctr)(?=[ \t]|\\*[\"'],|\\*[\"'][ \t]|$)"
)
_QUOTE = regex.compile(r"\\*[\"']")


def _command_before(text: str, at: int) -> str:
    """The command line that ``at`` is in, up to ``at``: back to the last line break that
    is not a ``\\`` continuation (a JSON-escaped ``\\n`` breaks a line too)."""
    lo = max(0, at - 2000)
    i = at
    while i > lo:
        raw = text.rfind("\n", lo, i)
        esc = text.rfind("\\n", lo, i)
        if raw < 0 and esc < 0:
            return text[lo:at]
        if raw > esc:
            j = raw - 1 if raw > 0 and text[raw - 1] == "\r" else raw
            if j > 0 and text[j - 1] == "\\":
                i = j - 1  # continued: "curl -X POST \\" + newline + "  -u ..."
                continue
            return text[raw + 1 : at]
        before = text[max(0, esc - 2) : esc]
        if before == "\\\\" or text.endswith("\\\\r", 0, esc):
            i = esc - 2  # an escaped continuation inside a JSON string
            continue
        return text[esc + 2 : at]
    return text[lo:at]


def _tool_of(command: str) -> str:
    """The last tool named in ``command`` with no ``|``, ``;`` or ``&&`` after it outside quotes."""
    tools = list(_TOOL_WORD.finditer(command))
    if not tools:
        return ""
    last = tools[-1]
    quote = ""
    rest = command[last.end() :]
    for i, ch in enumerate(rest):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "|;" or (ch == "&" and not regex.match(r"&[\w.\[\]-]*=", rest[i:])):
            return ""
    return last.group("tool")


def _user_pass_word(text: str, pos: int) -> tuple[int, int, int] | None:
    """Read the shell word at ``pos`` (``name:pass``, ``'name:p w'``, ``name:"p w"``,
    ``\\"name:pass\\"`` in escaped JSON): the colon and the password's span without the
    quotes around it, or None when there is no colon."""
    n = len(text)
    i = pos
    colon = -1
    regions: list[tuple[int, int, int, int]] = []  # quote open start/end, close start/end
    while i < n:
        ch = text[i]
        q = _QUOTE.match(text, i) if ch in "\\\"'" else None
        if q is not None and (i == pos or i == colon + 1):
            close = text.find(q.group(), q.end())
            line_end = text.find("\n", q.end())
            if close < 0 or (0 <= line_end < close):
                return None  # unterminated on this line
            inner = text.find(":", q.end(), close)
            if colon < 0 and inner >= 0:
                colon = inner
            regions.append((i, q.end(), close, close + len(q.group())))
            i = close + len(q.group())
            continue
        if q is not None or ch.isspace() or ch in ";|<>`":
            break
        if ch == "\\":
            if text[i + 1 : i + 2] in ("n", "r", "t", "\n", "\r", ""):
                break  # an escaped line end, a continuation
            i += 2
            continue
        if ch == ":" and colon < 0:
            colon = i
        i += 1
    end = min(i, n)
    if colon < 0:
        return None
    start = colon + 1
    for o_start, o_end, c_start, c_end in regions:
        if c_end == end and o_start < colon < c_start:
            end = c_start  # 'name:pass': the closing quote is not the password's
        elif c_end == end and o_start == start:
            start, end = o_end, c_start  # name:'pass'
    if not regions:
        while end > start and text[end - 1] in ",":
            end -= 1
        end = _trim_sentence_end(text, start, end)
    return colon, start, end


def check_user_pass(match: "regex.Match[str]", span: Span) -> Span | None:
    """``curl -u name:pass`` (any quoting, flags clustered or glued), ``--user name:pass``,
    ``http -a name:pass``; not ``curl -u name`` (curl asks), ``$USER:$PASS``, a uid:gid
    nor ``docker run --user app:app``."""
    text = match.string
    short = match.group("short")
    command = _command_before(text, match.start())
    tool = _tool_of(command)
    if short is not None and tool not in _USER_PASS_TOOLS[short]:
        return None  # git push -u origin main, sort -u, ls -a
    if short is None and tool in _USER_GROUP_TOOLS:
        return None
    jq = match.group("jq")
    if jq is not None:
        close = text.find(jq, match.end())
        if close < 0 or "\n" in text[match.end() : close]:
            return None
        colon = text.find(":", match.end(), close)
        if colon < 0:
            return None
        start, end = colon + 1, close
    else:
        word = _user_pass_word(text, match.end())
        if word is None:
            return None
        colon, start, end = word
    user = text[match.end() : colon].strip("\\\"'")
    value = text[start:end]
    if not value or not has_alnum(value) or _is_placeholder(value) or _small_number(value):
        return None
    if "/" in user or value.startswith("//"):
        return None  # a URL, not name:password
    if value == user or (value.isdigit() and user.isdigit()):
        return None  # root:root, 1000:1000: a user and its group
    return start, end
