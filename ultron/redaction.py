r"""Offline redaction of secrets and personal data before text is stored.

Detection runs on Microsoft Presidio's :class:`~presidio_analyzer.AnalyzerEngine`
configured to work with no network and no model:

* the NLP engine is presidio's ``no_op`` engine, so no spaCy model is loaded;
* every recognizer is our own (:class:`_RuleRecognizer`): compiled regexes plus a
  Python check per rule (Luhn, IIN/length for cards, ``ipaddress`` for IPs,
  "is this code or a secret" heuristics for ``key=value`` fields);
* ``TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS`` is set to ``""`` before presidio is
  imported, otherwise tldextract (pulled in by presidio) may try to download the
  public suffix list.

An installed spaCy model can be named (``Redactor(spacy_model=...)`` or
``ULTRON_REDACTION_SPACY_MODEL``) to add name/location detection (``<PERSON>``,
``<LOCATION>``). It is only used when ``spacy.util.is_package`` says it is
installed, because presidio's spaCy engine would otherwise try to download it; a
missing model logs one warning and the redactor stays on ``no_op``.

Replacement tags (each detected span is replaced by its tag):

=====================  =========================================================
``<LLM_API_KEY>``      ``sk-...`` (OpenAI incl. ``sk-proj-``, Anthropic
                       ``sk-ant-``, DashScope and other long ``sk-`` keys),
                       Hugging Face ``hf_...``, Google ``AIza...``
``<GITHUB_TOKEN>``     ``ghp_/gho_/ghu_/ghs_/ghr_...``, ``github_pat_...``
``<AWS_ACCESS_KEY>``   ``AKIA...`` / ``ASIA...`` access key ids
``<AWS_SECRET_KEY>``   40-character secret access key after an
                       ``aws_secret_access_key`` / ``SecretAccessKey`` /
                       "secret key" context
``<REDACTED_TOKEN>``   the token of ``Authorization: Bearer|Basic|Token ...``
                       and of a bare ``Bearer <token>``; the scheme word stays
``<REDACTED_CREDENTIAL>`` the value of ``password=``, ``passwd:``, ``token=``,
                       ``secret``, ``api_key``, ``access_token``,
                       ``client_secret``, ``*_TOKEN=`` ... (key=value, key: value,
                       JSON / escaped JSON, ``--password value``, Chinese
                       ``密码=``/``密码：``/``密码是``, ``口令``, ``密钥``, ``令牌``),
                       and the password of ``scheme://user:password@host``; the
                       key, the user and the host stay
``<PRIVATE_KEY>``      ``-----BEGIN ... PRIVATE KEY-----`` blocks (to the END
                       line, or to the end of the base64 body when truncated)
``<SLACK_TOKEN>``      ``xoxb-/xoxp-/xoxa-/xoxr-/xoxs-/xoxo-``, ``xapp-`` and whole
                       ``https://hooks.slack.com/...`` webhook URLs
``<EMAIL_ADDRESS>``    e-mail addresses (not ``git@host:`` SSH remotes, not the
                       ``user@host`` part of a URL)
``<PHONE_NUMBER>``     ``+<country> ...`` (8-15 digits), US ``(555) 123-4567`` /
                       ``555-123-4567`` / ``555.123.4567``, Chinese mobiles
                       ``1[3-9]x xxxx xxxx`` with optional ``+86``/``86``/``0086``
``<CREDIT_CARD>``      13-19 digits (spaces/dashes allowed) passing Luhn and a
                       known issuer prefix/length
``<IP_ADDRESS>``       IPv4 (4 valid octets) and IPv6
``<UUID>``             8-4-4-4-12 hex UUIDs
``<USER>``             the user name in ``/home/<USER>/``, ``/Users/<USER>/``,
                       ``C:\Users\<USER>\`` and ``~<USER>/``
``<PERSON>``, ``<LOCATION>``  only with an installed spaCy model
=====================  =========================================================

Decisions (the tests pin each of them):

* Overlaps are resolved to non-overlapping spans: the longest span wins, ties go
  to the more specific kind (private key > provider tokens > AWS secret > URL
  password > auth header > generic credential > PII), then to the earlier start.
  So ``api_key="sk-..."`` becomes ``api_key="<LLM_API_KEY>"`` and
  ``secret="sk-... and more"`` becomes ``secret="<REDACTED_CREDENTIAL>"``. A
  candidate that only partly overlaps a winner keeps the part that sticks out
  (under its own tag) rather than leaking it. Spans are replaced right to left.
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
* In unquoted values ``&`` only ends the value before another ``name=`` (query
  strings); ``,`` ``;`` and whitespace always end it. A single trailing ``.``
  before whitespace is sentence punctuation and stays outside the value.
* Cards: bare digit runs must be 15 or 16 digits, grouped ones (spaces or dashes,
  not both) 13-19 digits in groups of four (or Amex/Diners 4-6-5 / 4-6-4); plus a
  known issuer prefix for the length and the Luhn checksum. Seeds, ids and
  timestamps of other lengths are left alone.
* Phone numbers: Chinese mobiles need 11 digits with no digit, letter, ``_``,
  ``.`` or ``-`` glued on either side (``13812345678901`` and ``ORD13812345678``
  stay); CJK text around them is fine. ``+1980-02-29 01:02:03`` is a date.
* Documentation names in paths (``/home/user``, ``~username``, ``/Users/me``) and
  system folders (``C:\Users\Public``) are kept; ``/root`` is not a user home.
* JSON-encoded text (a transcript line, and JSON inside a JSON string as in
  tool-call arguments) gives the same result as the decoded text and still parses
  afterwards: token boundaries hold after a ``\n`` or ``\uXXXX`` escape (json.dumps
  escapes CJK), quotes may carry any number of backslashes, a span never starts on
  the letter of an escape nor ends on a backslash, and unquoted values stop at
  escapes. Boundaries are ASCII, so CJK text glued to a token (``密钥sk-...``,
  ``电话13812345678``) does not hide it. Chinese field names are only seen as
  literal characters, not as ``\uXXXX`` escapes.
* ``<TAG>`` strings are never re-redacted, so ``redact(redact(x)) == redact(x)``.
"""

from __future__ import annotations

import bisect
import ipaddress
import logging
import os
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

# Must be set before presidio (and with it tldextract) is imported anywhere.
os.environ.setdefault("TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS", "")

import regex  # noqa: E402 - presidio's own regex engine (variable-length lookbehind)

if TYPE_CHECKING:
    from presidio_analyzer import EntityRecognizer

__all__ = ["TAGS", "Redactor", "get_redactor"]

logger = logging.getLogger(__name__)

SPACY_MODEL_ENV = "ULTRON_REDACTION_SPACY_MODEL"
LANGUAGE = "en"

#: entity -> replacement tag
TAGS: dict[str, str] = {
    "PRIVATE_KEY": "<PRIVATE_KEY>",
    "LLM_API_KEY": "<LLM_API_KEY>",
    "GITHUB_TOKEN": "<GITHUB_TOKEN>",
    "AWS_ACCESS_KEY": "<AWS_ACCESS_KEY>",
    "AWS_SECRET_KEY": "<AWS_SECRET_KEY>",
    "SLACK_TOKEN": "<SLACK_TOKEN>",
    "URL_CREDENTIAL": "<REDACTED_CREDENTIAL>",
    "AUTH_TOKEN": "<REDACTED_TOKEN>",
    "CREDENTIAL": "<REDACTED_CREDENTIAL>",
    "CREDIT_CARD": "<CREDIT_CARD>",
    "EMAIL_ADDRESS": "<EMAIL_ADDRESS>",
    "IP_ADDRESS": "<IP_ADDRESS>",
    "UUID": "<UUID>",
    "PHONE_NUMBER": "<PHONE_NUMBER>",
    "USER_PATH": "<USER>",
    "PERSON": "<PERSON>",
    "LOCATION": "<LOCATION>",
}

# Tie-break between spans of equal length: the more specific kind wins.
_PRIORITY: dict[str, int] = {
    "PRIVATE_KEY": 100,
    "LLM_API_KEY": 90,
    "GITHUB_TOKEN": 90,
    "AWS_ACCESS_KEY": 90,
    "SLACK_TOKEN": 90,
    "AWS_SECRET_KEY": 80,
    "URL_CREDENTIAL": 70,
    "AUTH_TOKEN": 60,
    "CREDENTIAL": 50,
    "CREDIT_CARD": 40,
    "EMAIL_ADDRESS": 35,
    "UUID": 30,
    "IP_ADDRESS": 30,
    "PHONE_NUMBER": 20,
    "USER_PATH": 20,
    "PERSON": 10,
    "LOCATION": 10,
}
_EXTRA_PRIORITY = 15
_SPACY_ENTITIES = ("PERSON", "LOCATION")

Span = tuple[int, int]


# --------------------------------------------------------------------------- rules


@dataclass(frozen=True)
class _Rule:
    """One regex; ``group`` names the part of the match that is replaced (the
    first of several alternative groups that took part), ``check`` may veto the
    match or narrow its span."""

    name: str
    pattern: "regex.Pattern[str]"
    group: str | tuple[str, ...] | int = 0
    check: Callable[["regex.Match[str]", Span], Span | None] | None = None
    escapes: bool = True


def _rule(
    name: str,
    pattern: str,
    *,
    group: str | tuple[str, ...] | int = 0,
    check: Callable[["regex.Match[str]", Span], Span | None] | None = None,
    ignore_case: bool = False,
    dotall: bool = False,
    escapes: bool = True,
) -> _Rule:
    flags = regex.V0 | regex.ASCII  # CJK text glued to a token is still a boundary
    if ignore_case:
        flags |= regex.IGNORECASE
    if dotall:
        flags |= regex.DOTALL
    return _Rule(name, regex.compile(_escape_aware(pattern), flags), group, check, escapes)


_LEADING_BOUNDARY = regex.compile(r"\(\?<!\[((?:\\.|[^\]\\])+)\]\)")


def _escape_aware(pattern: str) -> str:
    """Let a leading ``(?<![chars])`` boundary also hold after a JSON escape.

    In JSON-encoded text (``json.dumps`` of a transcript or of tool-call arguments)
    a secret often follows ``\\n`` or a ``\\uXXXX`` escape of a CJK character:
    ``"note:\\nsk-..."``, ``"\\u5bc6\\u7801sk-..."``. A plain boundary sees the
    letter or hex digit and refuses; this one accepts a complete escape before the
    token and refuses to start on the escape's own letter (after a backslash)."""
    found = _LEADING_BOUNDARY.match(pattern)
    if found is None:
        return pattern
    chars = found.group(1)
    return (
        rf"(?:(?<=\\(?:[nrt]|u[0-9A-Fa-f]{{4}}))|(?<![\\{chars}]))"
        + pattern[found.end():]
    )


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


def _span_of(match: "regex.Match[str]", group: str | tuple[str, ...] | int) -> Span | None:
    if isinstance(group, tuple):
        for name in group:
            if match.start(name) >= 0:
                return match.span(name)
        return None
    start, end = match.span(group)
    return (start, end) if start >= 0 else None


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


# ------------------------------------------------------------- secret patterns

_KEYWORDS = (
    r"(?:pass(?:word|wd|phrase)|pwd|secret|token|api[_-]?key|apikey|access[_-]?key"
    r"|secret[_-]?key|private[_-]?key|auth[_-]?key|session[_-]?key|credentials?)"
)
# ``dbPassword``, ``DB_PASSWORD``, ``x-api-key``, ``--client-secret``, ``access.token``:
# the key must END with a keyword, so ``max_tokens`` or ``token_count`` are not keys.
# The whole word is taken atomically and then checked from behind: trying every
# split of a long ``a_b_c_...`` word against the keywords would be quadratic.
_KEY = r"(?P<key>(?>(?:--?)?(?:[A-Za-z0-9]+[_.-])*[A-Za-z0-9]*)(?<=" + _KEYWORDS + r"))"
# A backslash inside an unquoted value, unless it starts an escape (``\n``, ``\"``,
# ``\\``): escaped JSON must not have its escapes swallowed into the value.
_NOT_ESCAPE = r"\\(?![nrtbfu\"'\\/])"
_CREDENTIAL = (
    r"(?<![A-Za-z0-9_.-])" + _KEY + r"(?P<kq>\\*[\"'])?[ \t]*(?P<sep>:=|=(?![=>~])|:(?![:/]))[ \t]*"
    r"(?:(?P<bs>\\+)\"(?P<v_esc>(?:(?!\\+\")[^\n])+)(?P=bs)\""
    r"|\"(?P<v_dq>(?:\\.|[^\"\\\n])+)\""
    r"|'(?P<v_sq>(?:\\.|[^'\\\n])+)'"
    r"|(?P<v_raw>(?:[^\s\"'`,;&()\[\]{}\\]|&(?![\w.\[\]-]*=)|" + _NOT_ESCAPE + r")++))"
)
_CLI_CREDENTIAL = (
    r"(?<![\w-])--(?:[a-z0-9]+-)*(?:password|passwd|passphrase|token|secret|api-?key|access-key"
    r"|secret-key|client-secret)[ \t]+"
    r"(?:\"(?P<v_dq>[^\"\n]+)\"|'(?P<v_sq>[^'\n]+)'|(?P<v_raw>[^\s\"'`\\-][^\s\"'`\\]*+))"
)

# 密码=..., 密码：..., 密码是...: Chinese field names; the value is the ASCII run after them.
_CREDENTIAL_ZH = (
    r"(?:密码|口令|密钥|秘钥|令牌|访问令牌|私钥)(?:是|为)?[ \t]*[:：=]?[ \t]*"
    r"(?:[\"“](?P<v_dq>[^\"”\n]+)[\"”]|(?P<v_raw>[!#-&(-+\--\[\]-~]++))"
)


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


_AUTH_HEADER = (
    r"(?<![\w-])(?:proxy-)?authorization(?:\\*[\"'])?[ \t]*[:=][ \t]*(?:\\*[\"'])?"
    r"(?:(?P<scheme>bearer|basic|token|bot|apikey|sso-key)[ \t]+)?"
    r"(?P<value>(?:[^\s\"',;\\()\[\]{}]|" + _NOT_ESCAPE + r")++)"
)
_BARE_BEARER = r"(?<![\w-])bearer[ \t]+(?P<value>[A-Za-z0-9._~+/=-]{8,}+)"


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


# --------------------------------------------------------------- rule table

_HEX = "[0-9A-Fa-f]"
_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_WIN_NAME = r"[^\\/\s\"'<>:;,|*?]+"

_RULES: dict[str, tuple[_Rule, ...]] = {
    "PRIVATE_KEY": (
        _rule(
            "pem_private_key",
            r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
            r"(?:.*?-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
            r"|[A-Za-z0-9+/=\s\\:,-]*)",
            dotall=True,
            check=_check_private_key,
        ),
    ),
    "LLM_API_KEY": (
        _rule("sk_key", r"(?<![\w-])sk-[A-Za-z0-9_-]{20,}+(?![\w-])", check=_check_llm_key),
        _rule("huggingface", r"(?<![\w-])hf_[A-Za-z0-9]{30,}+(?![\w-])"),
        _rule("google_api_key", r"(?<![\w-])AIza[0-9A-Za-z_-]{35}(?![\w-])"),
    ),
    "GITHUB_TOKEN": (
        _rule(
            "github_token",
            r"(?<![\w-])(?:gh[pousr]_[A-Za-z0-9]{30,}+|github_pat_[A-Za-z0-9_]{40,}+)(?![\w-])",
        ),
    ),
    "AWS_ACCESS_KEY": (
        _rule("aws_access_key_id", r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])"),
    ),
    "AWS_SECRET_KEY": (
        _rule(
            "aws_secret_access_key",
            r"(?i:aws_?secret_?(?:access_?)?key|secret_?access_?key|aws[ _-]secret"
            r"|secret[ _-]key)(?:\\*[\"'])?[ \t]*(?:[:=]|=>|\bis\b)?[ \t]*(?:\\*[\"'])?"
            r"(?P<value>[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])",
            group="value",
            check=_check_aws_secret,
        ),
    ),
    "SLACK_TOKEN": (
        _rule("slack_token", r"(?<![\w-])(?:xox[abposr]|xapp)-[A-Za-z0-9-]{10,}+"),
        _rule(
            "slack_webhook",
            r"https?://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_+-]+",
        ),
    ),
    "URL_CREDENTIAL": (
        _rule(
            "url_password",
            r"(?<![\w+.-])[A-Za-z][A-Za-z0-9+.-]{1,30}://[^\s:/@?#\"'<>]*:"
            r"(?P<value>[^\s/?#\"'<>]+)@[^\s/?#\"'<>@]+",
            group="value",
            check=_check_url_credential,
        ),
    ),
    "AUTH_TOKEN": (
        _rule(
            "authorization_header", _AUTH_HEADER, group="value",
            check=_check_auth_header, ignore_case=True,
        ),
        _rule("bearer_token", _BARE_BEARER, group="value", check=_check_bare_bearer, ignore_case=True),
    ),
    "CREDENTIAL": (
        _rule(
            "credential_field", _CREDENTIAL, group=("v_esc", "v_dq", "v_sq", "v_raw"),
            check=_check_credential, ignore_case=True,
        ),
        _rule(
            "credential_zh", _CREDENTIAL_ZH, group=("v_dq", "v_raw"), check=_check_zh_credential,
        ),
        _rule(
            "credential_cli_flag", _CLI_CREDENTIAL, group=("v_dq", "v_sq", "v_raw"),
            check=_check_cli_credential, ignore_case=True,
        ),
    ),
    "CREDIT_CARD": (
        _rule("credit_card", r"(?<![\w+.-])\d(?:[ -]?\d){12,18}(?![\w-]|\.\d)", check=_check_card),
    ),
    "EMAIL_ADDRESS": (
        _rule(
            "email",
            r"(?<![\w.+%-])(?<!://[^\s/?#\"'<>]{0,256})[A-Za-z0-9][A-Za-z0-9._%+-]{0,63}@"
            r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24}"
            r"(?![\w-]|\.[A-Za-z0-9])",
            check=_check_email,
        ),
    ),
    "IP_ADDRESS": (
        _rule(
            "ipv4",
            rf"(?<![\w.])(?<!\d\.|[=<>~!]=)(?:{_OCTET}\.){{3}}{_OCTET}(?![\w]|\.\d)",
            check=_check_ipv4,
        ),
        _rule(
            "ipv6",
            rf"(?<![\w:.]){_HEX}{{0,4}}(?::{_HEX}{{0,4}}){{2,7}}(?![\w:.])",
            check=_check_ipv6,
        ),
    ),
    "UUID": (
        _rule(
            "uuid",
            rf"(?<![\w-]){_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}(?![\w-])",
        ),
    ),
    "PHONE_NUMBER": (
        _rule(
            "international_phone",
            r"(?<![\w+])\+[1-9]\d{0,2}(?:[ .-]?\(\d{1,4}\))?(?:[ .-]?\d{1,5}){1,5}(?![\w]|[.-]\d)",
            check=_check_intl_phone,
        ),
        _rule(
            "us_phone",
            r"(?<![\w+().-])(?:1[ .-])?(?:\(\d{3}\)[ .-]?|\d{3}[.-])\d{3}[.-]\d{4}(?![\w-]|\.\d)",
        ),
        _rule(
            "cn_mobile",
            r"(?<![A-Za-z0-9_+.-])(?:(?:\+|00)?86[ -]?)?1[3-9]\d(?:\d{8}|[ -]\d{4}[ -]\d{4})"
            r"(?![A-Za-z0-9_]|[.-]\d)",
        ),
    ),
    "USER_PATH": (
        _rule(
            "unix_home",
            r"(?<![\w.~-])/(?:home|Users)/(?P<user>[A-Za-z0-9_][A-Za-z0-9._@+-]*)"
            r"(?=[/\\\s\"'`,;:)\]}>]|$)",
            group="user",
            check=_check_user,
        ),
        _rule(
            "windows_home",
            r"(?<![\w])[A-Za-z]:(?:\\+|/)(?:Users|Documents and Settings)(?:\\+|/)"
            rf"(?P<user>{_WIN_NAME}(?: {_WIN_NAME})*(?=[\\/])|{_WIN_NAME})",
            group="user",
            check=_check_user,
            ignore_case=True,
            escapes=False,  # C:\nancy is a path, not an escaped newline
        ),
        _rule(
            "tilde_home",
            r"(?<![\w~/$])~(?P<user>[a-z_][a-z0-9_.-]{0,31})(?=/)",
            group="user",
            check=_check_user,
        ),
    ),
}


# ------------------------------------------------------------- the recognizer


def _recognizer_class() -> type:
    """Build the presidio recognizer class lazily: importing presidio is slow."""
    from presidio_analyzer import LocalRecognizer, RecognizerResult

    class _RuleRecognizer(LocalRecognizer):
        """A presidio recognizer running our rules for one entity."""

        def __init__(self, entity: str, rules: Sequence[_Rule], score: float = 0.9) -> None:
            self._rules = tuple(rules)
            self._score = score
            super().__init__(supported_entities=[entity], name=f"ultron_{entity.lower()}")

        def load(self) -> None:  # noqa: D102 - nothing to load
            pass

        def analyze(self, text: str, entities: list[str], nlp_artifacts: Any = None) -> list:
            entity = self.supported_entities[0]
            results = []
            for rule in self._rules:
                for match in rule.pattern.finditer(text):
                    span = _span_of(match, rule.group)
                    if span is None or span[0] == span[1]:
                        continue
                    if rule.check is not None:
                        span = rule.check(match, span)
                        if span is None:
                            continue
                    if rule.escapes:
                        span = _respect_escapes(text, *span)
                    if span[0] >= span[1]:
                        continue
                    results.append(
                        RecognizerResult(
                            entity_type=entity,
                            start=span[0],
                            end=span[1],
                            score=self._score,
                            recognition_metadata={
                                RecognizerResult.RECOGNIZER_NAME_KEY: self.name,
                                RecognizerResult.RECOGNIZER_IDENTIFIER_KEY: self.id,
                                "rule": rule.name,
                            },
                        )
                    )
            return results

    return _RuleRecognizer


# ------------------------------------------------------------------ spaCy option

_warned_models: set[str] = set()
_warn_lock = threading.Lock()


def _configured_spacy_model() -> str | None:
    try:
        from ultron.settings import Settings

        return Settings.from_env().redaction_spacy_model
    except Exception:  # noqa: BLE001 - a bad unrelated ULTRON_* value must not stop redaction
        return os.environ.get(SPACY_MODEL_ENV) or None


def _warn_once(model: str, message: str) -> None:
    with _warn_lock:
        if model in _warned_models:
            return
        _warned_models.add(model)
    logger.warning(message)


def _spacy_engine(model: str) -> Any | None:
    """A presidio spaCy engine for an installed model, else None (warned once)."""
    try:
        import spacy.util

        installed = spacy.util.is_package(model)
    except Exception:  # noqa: BLE001 - spaCy missing or broken: no model
        installed = False
    if not installed:
        _warn_once(
            model,
            f"spaCy model {model!r} is not installed; redaction runs with regex "
            "recognizers only (no name/location detection)",
        )
        return None
    try:
        from presidio_analyzer.nlp_engine import NlpEngineProvider

        provider = NlpEngineProvider(
            nlp_configuration={
                "nlp_engine_name": "spacy",
                "models": [{"lang_code": LANGUAGE, "model_name": model}],
            }
        )
        return provider.create_engine()
    except Exception as exc:  # noqa: BLE001 - fall back to no_op rather than fail ingestion
        _warn_once(model, f"spaCy model {model!r} could not be loaded ({exc}); using regex only")
        return None


# ---------------------------------------------------------------- the redactor

class Redactor:
    """Replace secrets and personal data in text with ``<TAG>`` placeholders.

    Build once and reuse (:func:`get_redactor`): building the analyzer imports
    presidio and compiles the rules; :meth:`redact` is cheap and thread-safe.

    ``extra_entities`` maps an entity name to one regex or a list of them; each
    match is replaced by ``<NAME>`` (e.g. ``{"EMPLOYEE_ID": r"\\bEMP-\\d{6}\\b"}``).
    ``extra_recognizers`` are further presidio recognizers (tags ``<ENTITY>``).
    """

    def __init__(
        self,
        *,
        spacy_model: str | None = None,
        extra_entities: Mapping[str, str | Sequence[str]] | None = None,
        extra_recognizers: Iterable["EntityRecognizer"] | None = None,
    ) -> None:
        from presidio_analyzer import AnalyzerEngine, RecognizerRegistry
        from presidio_analyzer.nlp_engine import NoOpNlpEngine

        rule_recognizer = _recognizer_class()
        self._tags = dict(TAGS)
        self._priority = dict(_PRIORITY)
        recognizers: list[EntityRecognizer] = [
            rule_recognizer(entity, rules) for entity, rules in _RULES.items()
        ]
        for entity, patterns in (extra_entities or {}).items():
            entity = entity.strip().upper()
            if not regex.fullmatch(r"[A-Z][A-Z0-9_]*", entity):
                raise ValueError(f"extra entity names are UPPER_SNAKE_CASE, not {entity!r}")
            if isinstance(patterns, str):
                patterns = [patterns]
            rules = [_rule(f"extra_{entity.lower()}_{i}", p) for i, p in enumerate(patterns)]
            recognizers.append(rule_recognizer(entity, rules))
            self._tags.setdefault(entity, f"<{entity}>")
            self._priority.setdefault(entity, _EXTRA_PRIORITY)
        for recognizer in extra_recognizers or ():
            recognizers.append(recognizer)
            for entity in recognizer.get_supported_entities():
                self._tags.setdefault(entity, f"<{entity}>")
                self._priority.setdefault(entity, _EXTRA_PRIORITY)

        if spacy_model is None:
            spacy_model = _configured_spacy_model()
        nlp_engine = _spacy_engine(spacy_model) if spacy_model else None
        if nlp_engine is not None:
            from presidio_analyzer.predefined_recognizers import SpacyRecognizer

            recognizers.append(
                SpacyRecognizer(supported_language=LANGUAGE, supported_entities=list(_SPACY_ENTITIES))
            )
            self.spacy_model: str | None = spacy_model
        else:
            nlp_engine = NoOpNlpEngine(models=[{"lang_code": LANGUAGE, "model_name": "no_op"}])
            nlp_engine.load()
            self.spacy_model = None

        registry = RecognizerRegistry(recognizers=recognizers, supported_languages=[LANGUAGE])
        self.analyzer = AnalyzerEngine(
            registry=registry, nlp_engine=nlp_engine, supported_languages=[LANGUAGE]
        )
        tag_names = sorted({t[1:-1] for t in self._tags.values()}, key=len, reverse=True)
        self._tag_pattern = regex.compile("<(?:" + "|".join(map(regex.escape, tag_names)) + ")>")

    # ---------------------------------------------------------------- public

    def redact(self, text: str) -> str:
        """``text`` with every detected span replaced by its tag."""
        return self.redact_with_report(text)[0]

    def redact_with_report(self, text: str) -> tuple[str, list[dict]]:
        """The redacted text and one finding per replaced span:
        ``{"entity", "start", "end", "tag"}`` with offsets into the input text.
        Findings never carry the detected text."""
        if not text:
            return text, []
        spans = self._spans(text)
        pieces: list[str] = []
        cursor = len(text)
        for start, end, entity in reversed(spans):  # right to left
            pieces.append(text[end:cursor])
            pieces.append(self._tags[entity])
            cursor = start
        pieces.append(text[:cursor])
        redacted = "".join(reversed(pieces))
        findings = [
            {"entity": entity, "start": start, "end": end, "tag": self._tags[entity]}
            for start, end, entity in spans
        ]
        return redacted, findings

    # -------------------------------------------------------------- internal

    def _spans(self, text: str) -> list[tuple[int, int, str]]:
        """Non-overlapping (start, end, entity) spans sorted by start."""
        results = self.analyzer.analyze(text=text, language=LANGUAGE)
        if not results:
            return []
        tags = [m.span() for m in self._tag_pattern.finditer(text)]
        candidates = []
        for r in results:
            if r.entity_type not in self._tags:
                continue
            if any(r.start < t_end and t_start < r.end for t_start, t_end in tags):
                continue  # never re-redact (part of) a tag
            candidates.append((r.start, r.end, r.entity_type))
        # Longest first, then the more specific kind, then the earlier start.
        candidates.sort(key=lambda c: (c[0] - c[1], -self._priority.get(c[2], 0), c[0], c[2]))
        # Chosen spans never overlap, so sorted by start they are sorted by end too.
        starts: list[int] = []
        ends: list[int] = []
        kinds: list[str] = []

        def choose(start: int, end: int, entity: str) -> None:
            i = bisect.bisect_left(starts, start)
            starts.insert(i, start)
            ends.insert(i, end)
            kinds.insert(i, entity)

        for start, end, entity in candidates:
            first = bisect.bisect_right(ends, start)  # first chosen span ending after start
            last = bisect.bisect_left(starts, end)  # chosen spans from here start at/after end
            if first >= last:
                choose(start, end, entity)
                continue
            # A partial overlap keeps what sticks out, under its own tag: dropping
            # it would leak e.g. a password glued to a private key block.
            blocked = list(zip(starts[first:last], ends[first:last]))
            cursor = start
            for s, e in blocked + [(end, end)]:
                if s > cursor:
                    piece = _respect_escapes(text, cursor, s)
                    if piece[0] < piece[1] and any(ch.isalnum() for ch in text[piece[0] : piece[1]]):
                        choose(piece[0], piece[1], entity)
                cursor = max(cursor, e)
        return list(zip(starts, ends, kinds))


_redactor: Redactor | None = None
_redactor_lock = threading.Lock()


def get_redactor() -> Redactor:
    """The process-wide redactor (built on first use; building takes seconds)."""
    global _redactor
    if _redactor is None:
        with _redactor_lock:
            if _redactor is None:
                _redactor = Redactor()
    return _redactor
