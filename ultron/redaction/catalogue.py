r"""What may be a secret: the recognisers' regexes, the tag each kind becomes, and
which kind wins a tie.

Kept as data so adding or tuning a kind is one entry in :data:`_RULES` (pattern,
replaced group, check) and nothing else; the checks that confirm a match live in
:mod:`ultron.redaction.checks`, the code that runs the table in
:mod:`ultron.redaction.engine`.

Decisions (the tests pin each of them):

* In unquoted values ``&`` only ends the value before another ``name=`` (query
  strings); ``,`` ``;`` and whitespace always end it. A single trailing ``.``
  before whitespace is sentence punctuation and stays outside the value.
* Phone numbers: Chinese mobiles need 11 digits with no digit, letter, ``_``,
  ``.`` or ``-`` glued on either side (``13812345678901`` and ``ORD13812345678``
  stay); CJK text around them is fine. ``+1980-02-29 01:02:03`` is a date.
* JSON-encoded text (a transcript line, and JSON inside a JSON string as in
  tool-call arguments) gives the same result as the decoded text and still parses
  afterwards: token boundaries hold after a ``\n`` or ``\uXXXX`` escape (json.dumps
  escapes CJK), quotes may carry any number of backslashes, a span never starts on
  the letter of an escape nor ends on a backslash, and unquoted values stop at
  escapes. Boundaries are ASCII, so CJK text glued to a token (``密钥sk-...``,
  ``电话13812345678``) does not hide it. Chinese field names are only seen as
  literal characters, not as ``\uXXXX`` escapes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import regex  # presidio's own regex engine (variable-length lookbehind)

from ultron.redaction.checks import (
    _KEYWORDS,
    Span,
    _check_auth_header,
    _check_aws_secret,
    _check_bare_bearer,
    _check_card,
    _check_cli_credential,
    _check_credential,
    _check_email,
    _check_intl_phone,
    _check_ipv4,
    _check_ipv6,
    _check_llm_key,
    _check_private_key,
    _check_url_credential,
    _check_user,
    _check_zh_credential,
)

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


# ------------------------------------------------------------- secret patterns

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

_AUTH_HEADER = (
    r"(?<![\w-])(?:proxy-)?authorization(?:\\*[\"'])?[ \t]*[:=][ \t]*(?:\\*[\"'])?"
    r"(?:(?P<scheme>bearer|basic|token|bot|apikey|sso-key)[ \t]+)?"
    r"(?P<value>(?:[^\s\"',;\\()\[\]{}]|" + _NOT_ESCAPE + r")++)"
)
_BARE_BEARER = r"(?<![\w-])bearer[ \t]+(?P<value>[A-Za-z0-9._~+/=-]{8,}+)"


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
