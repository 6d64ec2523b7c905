r"""Whether a regex match really is a secret, and exactly which characters to replace.

The catalogue's regexes are kept loose on purpose (one readable pattern per kind);
everything a regex cannot say well lives here, as plain Python run on each match:
checksums, "is this code rather than a secret", "is this a version rather than an
address". A check returns ``None`` to veto the match or a (possibly narrowed) span.

Decisions (the tests pin each of them):

* IPs: loopback, unspecified and netmask-shaped addresses (``127.0.0.0/8``,
  ``0.0.0.0``, ``255.255.255.0``, ``255.255.255.255``, ``::1``, ``::``,
  ``ffff:ffff::``) are kept: they identify nobody and are all over logs. Private
  ranges (``10.x``, ``192.168.x``) and public ones are redacted. Three-part
  versions (``3.11.7``) never match; a four-part dotted number is kept when the
  words before it say it is a version ("V8 to 10.8.168.25", "Git 1.7.12.1",
  "section 7.2.1.1", ``==1.2.3.4``), otherwise it is treated as an address.
* Code is not a secret. An unquoted value is kept when it is followed by ``(`` or
  ``[`` (``password = get_password()``, ``token = os.environ["TOKEN"]``), is a
  dotted reference written with spaces (``token = self.token``), an identifier
  naming a credential (``api_key=api_key``, ``password = credentials``,
  ``start_token: Token``), the key itself (``token=token``), a language keyword
  (``= await ...``, ``= new ...``), a literal (``None``/``null``/``true``), a type
  (``password: str``), a small number under a ``*token`` key (``last_token = -1``)
  or a bare word in a quoted-key mapping (``{"token": chunk}``: JSON has no bare
  words). Placeholders (``$TOKEN``, ``${...}``, ``{token}``, ``%s``,
  ``<your-password>``) and masks (``****``) are kept everywhere. Quoted values are
  redacted whole (``password = "hunter2"``).
* The keyword must be a word of its own at the end of the key: ``DB_PASSWORD``,
  ``dbPassword``, ``PGPASSWORD``, ``x-api-key`` are keys; ``tiktoken``,
  ``max_tokens``, ``token_count`` are not.
* ``*token`` / ``*key`` values must be 8+ characters without spaces, so
  ``{"token": "Hello", "logprob": -0.3}`` (LLM logprobs) stays; ``password`` and
  ``secret`` values of any length are redacted.
* ``key: value`` without quotes is prose-prone ("password: click the link"), so
  the value is only redacted when it has a digit or a symbol, or when the line is
  a ``key: value`` config line (YAML, HTTP header). ``--password value`` needs a
  digit or a symbol too ("use the --token flag").
* Cards: bare digit runs must be 15 or 16 digits, grouped ones (spaces or dashes,
  not both) 13-19 digits in groups of four (or Amex/Diners 4-6-5 / 4-6-4); plus a
  known issuer prefix for the length and the Luhn checksum. Seeds, ids and
  timestamps of other lengths are left alone.
* Documentation names in paths (``/home/user``, ``~username``, ``/Users/me``) and
  system folders (``C:\Users\Public``) are kept; ``/root`` is not a user home.
"""

from __future__ import annotations

import ipaddress

import regex  # presidio's own regex engine (variable-length lookbehind)

Span = tuple[int, int]


def _respect_escapes(text: str, start: int, end: int) -> Span:
    """Keep backslash escapes whole, so JSON-encoded text stays valid JSON.

    A span must not begin on the escaped letter of ``\\n`` or ``\\u00e9``
    (``"line\\nalice@example.com"``) nor end on a backslash (``password=hunter2\\"``
    inside an escaped JSON string). Parity is not checked: in JSON nested in a JSON
    string, ``\\\\n`` is the inner document's ``\\n``."""
    if 0 < start < end and text[start - 1] == "\\" and text[start] in "nrtbfu":
        hex4 = text[start + 1 : start + 5]
        if text[start] == "u" and len(hex4) == 4 and all(c in _HEX_DIGITS for c in hex4):
            start += 5
        elif text[start] != "u":
            start += 1
    while end > start and text[end - 1] == "\\":
        end -= 1
    return start, end


_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


# ---------------------------------------------------------------- shared helpers

_PLACEHOLDER_START = ("$", "<", "{", "%", "[")
_LITERALS = frozenset({
    "none", "null", "nil", "true", "false", "undefined", "empty", "redacted", "n/a",
})
_TYPE_NAMES = frozenset({
    "str", "string", "int", "bytes", "bool", "boolean", "number", "any", "optional",
    "secretstr", "secretbytes", "object", "text", "varchar", "char", "float", "double", "dict",
    "list", "tuple", "set", "uuid", "path", "datetime", "json", "map", "array",
})
_MASK = regex.compile(r"^(?:[*xX•.#-]+|\.\.\.)$")
_REFERENCE = regex.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")
_NUMBER = regex.compile(r"^[+-]?\d+(?:\.\d+)?$")
# Words that start an expression in Python / JavaScript: ``password = await ...``.
_KEYWORDS_CODE = frozenset({
    "await", "async", "not", "lambda", "yield", "new", "typeof", "function", "self", "this",
    "if", "else", "None", "True", "False", "return", "from", "import", "and", "or", "in", "is",
})
_CREDENTIAL_WORD = regex.compile(
    r"(?:pass(?:word|wd|phrase)?|pwd|secret|token|key|credentials?|auth)$", regex.IGNORECASE
)


def _is_placeholder(value: str) -> bool:
    return (
        not value
        or value.startswith(_PLACEHOLDER_START)
        or value.lower() in _LITERALS
        or bool(_MASK.match(value))
    )


def _trim_sentence_end(text: str, start: int, end: int) -> int:
    """Drop one trailing ``.`` when it ends a sentence (``!``/``?`` are kept:
    passwords end with them far more often than values end a question)."""
    if end - start > 1 and text[end - 1] == "." and (end == len(text) or text[end].isspace()):
        return end - 1
    return end


def _line_of(text: str, pos: int) -> tuple[int, int]:
    """The line around ``pos``; a JSON-escaped ``\\n`` ends a line too."""
    escaped = text.rfind("\\n", 0, pos)
    start = max(text.rfind("\n", 0, pos) + 1, escaped + 2 if escaped >= 0 else 0)
    ends = [i for i in (text.find("\n", pos), text.find("\\n", pos)) if i >= 0]
    end = min(ends, default=len(text))
    while end > start and text[end - 1] == "\\":
        end -= 1  # the rest of a doubly escaped "\\\\n"
    return start, end


# The keywords a credential key must end with; the key regex (catalogue) and
# :func:`_key_ends_in_keyword` share them.
_KEYWORDS = (
    r"(?:pass(?:word|wd|phrase)|pwd|secret|token|api[_-]?key|apikey|access[_-]?key"
    r"|secret[_-]?key|private[_-]?key|auth[_-]?key|session[_-]?key|credentials?)"
)


# ------------------------------------------------------------- secret checks


def _check_credential(match: "regex.Match[str]", span: Span) -> Span | None:
    text = match.string
    start, end = span
    value = text[start:end]
    if _is_placeholder(value) or not any(ch.isalnum() for ch in value):
        return None
    groups = match.groupdict()
    key = (groups.get("key") or "").lstrip("-")
    if key and not _key_ends_in_keyword(key):
        return None  # tiktoken=..., sometoken=...: the keyword is not a word of its own
    key = key.lower()
    if value.lower().lstrip("-") == key:
        return None  # token=token: a keyword argument passed on, SECRET = "SECRET"
    if key in ("pwd", "oldpwd") and value.startswith(("/", "~")):
        return None  # the shell's working directory, not a password
    if key.endswith(("token", "key")) and (len(value) < 8 or any(ch.isspace() for ch in value)):
        return None  # {"token": "Hello", "logprob": -0.1}: tokens and keys are long and unbroken
    if match.start("v_raw") < 0:
        return span  # quoted: everything between the quotes
    # Unquoted value: is it code rather than a secret?
    if end < len(text) and text[end] in "([":
        return None  # a call or a subscript
    sep = groups.get("sep")
    spaced = sep is not None and text[match.start("sep") - 1] in " \t"
    if sep == ":" and value.endswith(":"):
        return None  # "token: id:" in a docstring, nested YAML
    bare = value.rstrip(",")
    if _NUMBER.match(bare) and (key.endswith("token") or bare.startswith("-")) and len(bare) < 7:
        return None  # last_token = -1, next_token: 42
    if _REFERENCE.match(bare):
        if bare in _KEYWORDS_CODE or len(bare) == 1:
            return None  # password = await ..., token = not ..., eofToken = t
        if bare.lower() in _TYPE_NAMES:
            return None  # password: str
        if spaced and "." in bare:
            return None  # token = self.token
        code_like = "_" in bare or "." in bare or spaced or (sep == ":" and bare[0].isupper())
        if code_like and _ends_in_word(bare, _CREDENTIAL_WORD):
            return None  # api_key=api_key, password = credentials, start_token: Token
        if sep == ":" and match.start("kq") >= 0:
            return None  # {"token": chunk}: JSON has no bare words, so this is code
    end = _trim_sentence_end(text, start, end)
    if sep == ":" and not _looks_secret(text[start:end]):
        line_start, line_end = _line_of(text, start)
        before = text[line_start : match.start("key")].strip(" \t-\"'{,\\")
        after = text[end:line_end].strip(" \t,;\"'}\\")
        if before or after or value.endswith(":"):
            return None  # prose such as "password: click the link below"
    return start, end


_KEYWORD_AT_END = regex.compile(_KEYWORDS + "$", regex.IGNORECASE)


def _key_ends_in_keyword(key: str) -> bool:
    """``DB_PASSWORD``, ``dbPassword``, ``PGPASSWORD``, ``token`` yes; ``tiktoken`` no."""
    return _ends_in_word(key, _KEYWORD_AT_END)


def _ends_in_word(name: str, words: "regex.Pattern[str]") -> bool:
    """``name`` ends with one of ``words`` as a word of its own: after a non-letter,
    at a camelCase boundary, or anywhere in an all-caps name."""
    found = words.search(name)
    if found is None:
        return False
    i = found.start()
    if i == 0 or not name[i - 1].isalnum() or name.isupper():
        return True
    return name[i].isupper() and not name[i - 1].isupper()


def _check_cli_credential(match: "regex.Match[str]", span: Span) -> Span | None:
    span = _check_credential(match, span)
    if span is None or match.start("v_raw") < 0:
        return span
    # "use the --token flag" is prose; a password on a command line has a digit or symbol.
    return span if _looks_secret(match.string[span[0] : span[1]]) else None


def _check_zh_credential(match: "regex.Match[str]", span: Span) -> Span | None:
    span = _check_credential(match, span)
    if span is None or match.start("v_raw") < 0:
        return span
    text, end = match.string, span[1]
    # "修改密码: click here" is prose; "密码是abcdef，请保管" ends in Chinese text.
    if _looks_secret(text[span[0] : end]) or end == len(text) or not text[end].isascii():
        return span
    return span if text[end] in "\r\n" else None


def _looks_secret(value: str) -> bool:
    return any(not ch.isalpha() for ch in value)


def _check_auth_header(match: "regex.Match[str]", span: Span) -> Span | None:
    text = match.string
    start, end = span
    value = text[start:end]
    if _is_placeholder(value):
        return None
    if end < len(text) and text[end] in "([":
        return None  # authorization = request.headers["Authorization"]
    if match.start("scheme") < 0 and _REFERENCE.match(value) and "." in value:
        return None  # authorization: self.auth_header
    if match.start("scheme") < 0 and not (len(value) >= 16 or _has_digit(value)):
        return None  # "Authorization: required"
    if len(value) < 4:
        return None
    return start, _trim_sentence_end(text, start, end)


def _check_bare_bearer(match: "regex.Match[str]", span: Span) -> Span | None:
    text = match.string
    start, end = span
    end = _trim_sentence_end(text, start, end)
    value = text[start:end]
    # "Bearer authentication" is prose; real tokens carry digits or punctuation.
    if not (_has_digit(value) or any(ch in "._~+/=-" for ch in value)):
        return None
    return start, end


def _has_digit(value: str) -> bool:
    return any(ch.isdigit() for ch in value)


def _check_url_credential(match: "regex.Match[str]", span: Span) -> Span | None:
    value = match.string[span[0] : span[1]]
    return None if _is_placeholder(value) else span


def _check_private_key(match: "regex.Match[str]", span: Span) -> Span | None:
    start, end = span
    body = match.string[start:end]
    trimmed = regex.sub(r"(?:\s|\\[nr])+$", "", body)  # also JSON-escaped newlines
    return start, start + len(trimmed)


def _check_aws_secret(match: "regex.Match[str]", span: Span) -> Span | None:
    value = match.string[span[0] : span[1]]
    has_upper = any(c.isupper() for c in value)
    has_lower = any(c.islower() for c in value)
    has_other = any(c.isdigit() or c in "/+" for c in value)
    return span if has_upper and has_lower and has_other else None


def _check_llm_key(match: "regex.Match[str]", span: Span) -> Span | None:
    value = match.string[span[0] : span[1]]
    # ``sk-some-very-long-kebab-case-identifier`` is a slug; keys are random.
    return span if _has_digit(value) else None


# ------------------------------------------------------------------ PII checks


def _luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def _issuer_ok(digits: str) -> bool:
    n = len(digits)
    two, four = int(digits[:2]), int(digits[:4])
    if digits[0] == "4":
        return n in (13, 16, 19)  # Visa
    if 51 <= two <= 55 or 2221 <= four <= 2720:
        return n == 16  # Mastercard
    if two in (34, 37):
        return n == 15  # Amex
    if digits.startswith("6011") or two == 65 or 644 <= int(digits[:3]) <= 649:
        return 16 <= n <= 19  # Discover
    if two == 62:
        return 16 <= n <= 19  # UnionPay
    if 3528 <= four <= 3589:
        return 16 <= n <= 19  # JCB
    if two in (36, 38, 39) or 300 <= int(digits[:3]) <= 305:
        return 14 <= n <= 16  # Diners
    return False


def _check_card(match: "regex.Match[str]", span: Span) -> Span | None:
    raw = match.string[span[0] : span[1]]
    digits = "".join(ch for ch in raw if ch.isdigit())
    if not 13 <= len(digits) <= 19 or len(set(digits)) == 1:
        return None
    groups = [len(g) for g in regex.split(r"[ -]", raw)]
    if len(groups) == 1:
        if len(digits) not in (15, 16):
            return None  # long bare numbers are ids and seeds far more often than cards
    elif " " in raw and "-" in raw:
        return None
    elif not (
        groups in ([4, 6, 5], [4, 6, 4])
        or (all(g == 4 for g in groups[:-1]) and 1 <= groups[-1] <= 4)
    ):
        return None  # "4 47 84 10 90 ..." is a list of numbers
    return span if _issuer_ok(digits) and _luhn_ok(digits) else None


_DATE_LIKE = regex.compile(r"\d{4}-\d{2}-\d{2}|\d{4}\.\d{2}\.\d{2}")


def _check_intl_phone(match: "regex.Match[str]", span: Span) -> Span | None:
    raw = match.string[span[0] : span[1]]
    digits = sum(ch.isdigit() for ch in raw)
    if _DATE_LIKE.search(raw):
        return None  # "+1980-02-29 01:02:03" is an extended-year timestamp
    return span if 8 <= digits <= 15 else None


# Four-part versions look like IPv4 addresses; the words before them tell them apart.
_VERSION_BEFORE = regex.compile(
    r"(?i)(?:\bv(?:ersion)?|\bver\.?|release[sd]?(?:\s+id)?|\bv8|\bbuild|upgrade[sd]?|update[sd]?"
    r"|patch(?:ed)?|since|bump(?:ed)?|\bgit|python|node(?:\.js)?|chrome|firefox|windows|android|ios"
    r"|section|chapter|§|\d+\.\d+\.\d+\S*\s+(?:to|->|→))"
    r"(?:\s+(?:is|to|from|of|->|→))?[\s:=(\"']*$"
)


def _check_ipv4(match: "regex.Match[str]", span: Span) -> Span | None:
    text = match.string
    addr = ipaddress.IPv4Address(text[span[0] : span[1]])
    if addr.is_loopback or addr.is_unspecified or _is_netmask(int(addr), 32):
        return None
    if _VERSION_BEFORE.search(text[max(0, span[0] - 40) : span[0]]):
        return None  # "update V8 to 10.8.168.25", "Git 1.7.12.1", "section 7.2.1.1"
    return span


def _is_netmask(value: int, bits: int) -> bool:
    """255.255.255.0, ffff:ffff::, 255.255.255.255: ones then zeros, identifying nobody."""
    inverted = ~value & ((1 << bits) - 1)
    return value >> (bits - 8) == 0xFF and inverted & (inverted + 1) == 0


def _check_ipv6(match: "regex.Match[str]", span: Span) -> Span | None:
    raw = match.string[span[0] : span[1]]
    try:
        addr = ipaddress.IPv6Address(raw)
    except ValueError:
        return None  # 12:30:45, MAC addresses, C++ scopes ...
    if addr.is_loopback or addr.is_unspecified or _is_netmask(int(addr), 128):
        return None
    # ``1::2`` is a Python slice more often than an address.
    if sum(ch not in ":." for ch in raw) < 5:
        return None
    return span


def _check_email(match: "regex.Match[str]", span: Span) -> Span | None:
    text = match.string
    start, end = span
    if text[start : start + 4].lower() == "git@" and end < len(text) and text[end] == ":":
        return None  # git@github.com:owner/repo.git
    return span


# System folders and the placeholder names documentation uses.
_SYSTEM_USERS = frozenset({
    "shared", "public", "default", "default user", "all users", "guest",
    "user", "username", "user_name", "me", "you", "yourname", "your_name", "your-name", "name",
    "someone", "somebody", "example", "foo", "bar", "xxx", "...",
})


def _check_user(match: "regex.Match[str]", span: Span) -> Span | None:
    span = span[0], _trim_sentence_end(match.string, *span)
    user = match.string[span[0] : span[1]]
    if user.lower() in _SYSTEM_USERS or _is_placeholder(user):
        return None
    return span
