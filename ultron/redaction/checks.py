r"""Whether a regex match really is personal data, and the helpers every check shares.

The catalogue's regexes are kept loose on purpose (one readable pattern per kind);
everything a regex cannot say well lives here, as plain Python run on each match:
checksums, "is this a version rather than an address", "is this a placeholder".
A check returns ``None`` to veto the match or a (possibly narrowed) span. The
checks of credential assignments live with their patterns in
:mod:`ultron.redaction.assignments`, those of token formats in
:mod:`ultron.redaction.formats`.

Decisions (the tests pin each of them):

* IPs: loopback, unspecified and netmask-shaped addresses (``127.0.0.0/8``,
  ``0.0.0.0``, ``255.255.255.0``, ``255.255.255.255``, ``::1``, ``::``,
  ``ffff:ffff::``) are kept: they identify nobody and are all over logs. Private
  ranges (``10.x``, ``192.168.x``) and public ones are redacted. Three-part
  versions (``3.11.7``) never match; a four-part dotted number is kept when the
  words before it say it is a version ("V8 to 10.8.168.25", "Git 1.7.12.1",
  "section 7.2.1.1", ``==1.2.3.4``), otherwise it is treated as an address.
* Placeholders are never secrets: ``$TOKEN``, ``${...}``, ``{token}``,
  ``{{ token }}``, ``%s``, ``<your-password>``, masks (``****``, ``xxxx``),
  literals (``None``, ``null``, ``true``) and the words documentation puts in
  place of a value (``changeme``, ``your-api-key``, ``your_token_here``,
  ``xoxb-your-token``, ``placeholder``, ``REDACTED``...), and YAML tags
  (``!vault |``). Only the whole value counts: AWS's
  documented ``...EXAMPLEKEY`` secret is still a secret.
* Cards: bare digit runs must be 15 or 16 digits, grouped ones (spaces or dashes,
  not both) 13-19 digits in groups of four (or Amex/Diners 4-6-5 / 4-6-4); plus a
  known issuer prefix for the length and the Luhn checksum. Seeds, ids and
  timestamps of other lengths are left alone.
* IBANs: a known country code, that country's length and the ISO 7064 mod-97
  checksum; spaces in groups of four are allowed. A wrong check digit is not an
  IBAN.
* National ids (``<NATIONAL_ID>``): US SSNs written ``123-45-6789`` (or any
  9 digits right after "SSN" / "social security"), with the ranges the SSA never
  issues left alone; UK National Insurance numbers (``AB 12 34 56 C``, the
  prefixes never issued excluded); Chinese resident ids (18 characters, a valid
  birth date and the ISO 7064 MOD 11-2 check character).
* Documentation names in paths (``/home/user``, ``~username``, ``/Users/me``) and
  system folders (``C:\Users\Public``) are kept; ``/root`` is not a user home.
"""

from __future__ import annotations

import ipaddress
import re

import regex  # presidio's own regex engine (variable-length lookbehind)

from ultron.redaction.rules import Span


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

# Character-class tests run on every candidate value: a C-level search beats a
# Python generator over the characters.
has_space = re.compile(r"\s").search
has_digit = re.compile(r"[0-9]").search
has_upper = re.compile(r"[A-Z]").search
has_lower = re.compile(r"[a-z]").search
has_alnum = re.compile(r"[^\W_]").search

_PLACEHOLDER_START = ("$", "<", "{", "%", "[", "!")  # ! : a YAML tag (``!vault |``)
_LITERALS = frozenset({
    "none", "null", "nil", "true", "false", "undefined", "empty", "redacted", "n/a",
})
_TYPE_NAMES = frozenset({
    "str", "string", "int", "bytes", "bool", "boolean", "number", "any", "optional",
    "secretstr", "secretbytes", "object", "text", "varchar", "char", "float", "double", "dict",
    "list", "tuple", "set", "uuid", "path", "datetime", "json", "map", "array",
})
_MASK = regex.compile(r"^(?:[*xX•.#-]+|\.\.\.|…)$")
# A token prefix then a mask or an ellipsis: sk_test_..., ghp_xxxxxxxx (hunter2... is cut, not elided).
_ELIDED = regex.compile(r"^(?:[\w.-]{0,16}[_-])?(?:x{4,}|X{4,}|\*{3,}|•{3,}|\.{3,}|…)$")
# The words documentation writes instead of a value (the whole value, any case).
_PLACEHOLDER_WORDS = regex.compile(
    r"(?i)^(?:(?:your|insert|enter|put|paste|replace|example|sample|dummy|fake|demo)[ _.-]*(?:own[ _.-]*)?)?"
    r"(?:api[ _.-]*)?(?:access[ _.-]*|secret[ _.-]*|auth[ _.-]*|bearer[ _.-]*|private[ _.-]*)?"
    r"(?:key|token|secret|password|passwd|pwd|passphrase|credentials?)"
    r"(?:[ _.-]*(?:here|goes[ _.-]*here|value|placeholder))?$"
    r"|^(?:change[ _.-]?me(?:[ _.-]?please|[ _.-]?now)?|changeit|replace[ _.-]?(?:me|this)|fill[ _.-]?me[ _.-]?in"
    r"|set[ _.-]?me|placeholder|redacted|masked|hidden"
    r"|removed|omitted|todo|tbd|fixme|xxx+|\?+|not[ _.-]?set|unset|notasecret|not[ _.-]a[ _.-]secret)$"
)
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


# "your" before a credential word anywhere: xoxb-your-token, sk-your-key-here.
_YOUR_CREDENTIAL = regex.compile(
    r"(?i)(?:^|[^a-z])your[ _.-]*(?:own[ _.-]*)?(?:[a-z]+[ _.-]*)?"
    r"(?:key|token|secret|password|pass|pwd|passphrase|credentials?|id)(?![a-z])"
)


def _is_placeholder(value: str) -> bool:
    return (
        not value
        or value.startswith(_PLACEHOLDER_START)
        or value.lower() in _LITERALS
        or bool(_MASK.match(value))
        or bool(_ELIDED.match(value))
        or (len(value) <= 40 and bool(_PLACEHOLDER_WORDS.match(value)))
        or (len(value) <= 60 and bool(_YOUR_CREDENTIAL.search(value)))
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


# ---------------------------------------------------------------------- IBAN

# Country code -> IBAN length (ISO 13616 registry).
_IBAN_LENGTHS: dict[str, int] = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22,
    "BI": 27, "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DJ": 27,
    "DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FK": 18, "FO": 18, "FR": 27,
    "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28, "HN": 28, "HR": 21, "HU": 28,
    "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28,
    "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22,
    "MK": 19, "MN": 20, "MR": 27, "MT": 31, "MU": 30, "NI": 28, "NL": 18, "NO": 15, "OM": 23,
    "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "RU": 33, "SA": 24,
    "SC": 31, "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25, "SV": 28,
    "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20, "YE": 30,
}


def _iban_ok(compact: str) -> bool:
    if _IBAN_LENGTHS.get(compact[:2]) != len(compact) or not compact[2:4].isdigit():
        return False
    rearranged = compact[4:] + compact[:4]
    digits = "".join(str(int(ch, 36)) for ch in rearranged)
    return int(digits) % 97 == 1


def _check_iban(match: "regex.Match[str]", span: Span) -> Span | None:
    raw = match.string[span[0] : span[1]]
    compact = raw.replace(" ", "").upper()
    if not compact.isalnum() or not _iban_ok(compact):
        return None
    return span


# --------------------------------------------------------------- national ids

_CN_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)


def _check_cn_resident_id(match: "regex.Match[str]", span: Span) -> Span | None:
    """18 characters whose last is the ISO 7064 MOD 11-2 check of the first 17."""
    value = match.string[span[0] : span[1]].upper()
    total = sum(int(d) * w for d, w in zip(value[:17], _CN_ID_WEIGHTS))
    return span if "10X98765432"[total % 11] == value[17] else None


_NINO_NEVER = frozenset({"BG", "GB", "KN", "NK", "NT", "TN", "ZZ"})


def _check_nino(match: "regex.Match[str]", span: Span) -> Span | None:
    """A UK National Insurance number standing alone, with an issued prefix."""
    text, start = match.string, span[0]
    if start > 0 and text[start - 1].isalnum() and not (start > 1 and text[start - 2] == "\\"):
        return None  # inside a longer word (an escape's letter, ``\\n``, is a boundary)
    return None if text[start : start + 2] in _NINO_NEVER else span


def _check_ssn(match: "regex.Match[str]", span: Span) -> Span | None:
    """Area 001-899 but not 666, group and serial not all zeros."""
    digits = "".join(c for c in match.string[span[0] : span[1]] if c.isdigit())
    area, group, serial = digits[:3], digits[3:5], digits[5:]
    if area in ("000", "666") or area[0] == "9" or group == "00" or serial == "0000":
        return None
    return span
