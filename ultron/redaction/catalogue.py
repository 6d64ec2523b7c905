r"""What may be a secret: the tag each kind becomes, which kind wins a tie, and the
one table the engine runs, assembled from the layers.

This module is the recogniser catalogue, a data table: the personal-data rules
are written here, the secret rules come from the layers, each in its module:

1. :mod:`~ultron.redaction.formats`: token formats that identify themselves
   (provider prefixes, JWTs, private key blocks);
2. :mod:`~ultron.redaction.assignments`: values assigned to a credential name, in
   every syntax (``.env``, JSON, YAML, XML, CLI flags, headers, ...), URL
   passwords and ``Authorization`` headers;
3. :mod:`~ultron.redaction.entropy`: bare high-entropy tokens near a credential
   word;
4. personal data (below): cards, e-mail, IPs, UUIDs, phones, IBANs, national ids
   (US SSN, UK NINO, Chinese resident id), user paths.

Adding or tuning a kind is one entry in one table (pattern, replaced group, check,
triggers) and, for a new kind, one tag and one priority here.

Decisions (the tests pin each of them):

* Tags are stable and say what leaked: provider families get their own
  (``<GITLAB_TOKEN>``, ``<STRIPE_KEY>``, ``<JWT>``...), the long tail of SaaS
  formats is ``<API_KEY>``, and a secret known only by its name or its entropy is
  ``<REDACTED_CREDENTIAL>``.
* A tie (same span) goes to the more specific kind: private key > provider
  formats > AWS secret > URL password > ``Authorization`` value > JWT > named
  credential > bare high-entropy token > PII.
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

from ultron.redaction.assignments import ASSIGNMENT_RULES
from ultron.redaction.checks import (
    _check_card,
    _check_cn_resident_id,
    _check_email,
    _check_iban,
    _check_nino,
    _check_ssn,
    _check_intl_phone,
    _check_ipv4,
    _check_ipv6,
    _check_user,
)
from ultron.redaction.entropy import ENTROPY_RULES
from ultron.redaction.formats import FORMAT_RULES
from ultron.redaction.rules import _rule, _Rule

__all__ = ["TAGS", "_PRIORITY", "_EXTRA_PRIORITY", "_RULES", "_Rule", "_rule"]

#: entity -> replacement tag
TAGS: dict[str, str] = {
    "PRIVATE_KEY": "<PRIVATE_KEY>",
    "LLM_API_KEY": "<LLM_API_KEY>",
    "GITHUB_TOKEN": "<GITHUB_TOKEN>",
    "GITLAB_TOKEN": "<GITLAB_TOKEN>",
    "ATLASSIAN_TOKEN": "<ATLASSIAN_TOKEN>",
    "AWS_ACCESS_KEY": "<AWS_ACCESS_KEY>",
    "AWS_SECRET_KEY": "<AWS_SECRET_KEY>",
    "AWS_BEDROCK_KEY": "<AWS_BEDROCK_KEY>",
    "AZURE_KEY": "<AZURE_KEY>",
    "CLOUD_KEY": "<CLOUD_KEY>",
    "CI_TOKEN": "<CI_TOKEN>",
    "PACKAGE_TOKEN": "<PACKAGE_TOKEN>",
    "STRIPE_KEY": "<STRIPE_KEY>",
    "PAYMENT_KEY": "<PAYMENT_KEY>",
    "SLACK_TOKEN": "<SLACK_TOKEN>",
    "MESSAGING_KEY": "<MESSAGING_KEY>",
    "OBSERVABILITY_KEY": "<OBSERVABILITY_KEY>",
    "API_KEY": "<API_KEY>",
    "JWT": "<JWT>",
    "URL_CREDENTIAL": "<REDACTED_CREDENTIAL>",
    "AUTH_TOKEN": "<REDACTED_TOKEN>",
    "CREDENTIAL": "<REDACTED_CREDENTIAL>",
    "ENTROPY_SECRET": "<REDACTED_CREDENTIAL>",
    "CREDIT_CARD": "<CREDIT_CARD>",
    "IBAN": "<IBAN>",
    "NATIONAL_ID": "<NATIONAL_ID>",
    "EMAIL_ADDRESS": "<EMAIL_ADDRESS>",
    "IP_ADDRESS": "<IP_ADDRESS>",
    "UUID": "<UUID>",
    "PHONE_NUMBER": "<PHONE_NUMBER>",
    "USER_PATH": "<USER>",
    "PERSON": "<PERSON>",
    "LOCATION": "<LOCATION>",
}

# Tie-break between spans of equal length: the more specific kind wins.
_PROVIDER = 90
_PRIORITY: dict[str, int] = {
    "PRIVATE_KEY": 100,
    **{entity: _PROVIDER for entity in (
        "LLM_API_KEY", "GITHUB_TOKEN", "GITLAB_TOKEN", "ATLASSIAN_TOKEN", "AWS_ACCESS_KEY", "AWS_BEDROCK_KEY",
        "AZURE_KEY", "CLOUD_KEY", "CI_TOKEN", "PACKAGE_TOKEN", "STRIPE_KEY", "PAYMENT_KEY", "SLACK_TOKEN",
        "MESSAGING_KEY", "OBSERVABILITY_KEY", "API_KEY",
    )},
    "AWS_SECRET_KEY": 80,
    "URL_CREDENTIAL": 70,
    "AUTH_TOKEN": 60,
    "JWT": 55,
    "CREDENTIAL": 50,
    "ENTROPY_SECRET": 45,
    "CREDIT_CARD": 40,
    "IBAN": 40,
    "NATIONAL_ID": 42,
    "EMAIL_ADDRESS": 35,
    "UUID": 30,
    "IP_ADDRESS": 30,
    "PHONE_NUMBER": 20,
    "USER_PATH": 20,
    "PERSON": 10,
    "LOCATION": 10,
}
_EXTRA_PRIORITY = 15


# ------------------------------------------------------------ personal data

_HEX = "[0-9A-Fa-f]"
# Every digit-based kind waits for a digit first (checked once per text).
_DIGIT = r"[0-9]"
_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_WIN_NAME = r"[^\\/\s\"'<>:;,|*?]+"

_PII_RULES: dict[str, tuple[_Rule, ...]] = {
    "CREDIT_CARD": (
        _rule("credit_card", r"(?<![\w+.-])\d(?:[ -]?\d){12,18}(?![\w-]|\.\d)", check=_check_card,
              gate=_DIGIT),
    ),
    "EMAIL_ADDRESS": (
        _rule(
            "email",
            r"(?<![\w.+%-])(?<!://[^\s/?#\"'<>]{0,256})[A-Za-z0-9][A-Za-z0-9._%+-]{0,63}@"
            r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24}"
            r"(?![\w-]|\.[A-Za-z0-9])",
            check=_check_email,
            triggers="@",
        ),
    ),
    "IP_ADDRESS": (
        _rule(
            "ipv4",
            rf"(?<![\w.])(?<!\d\.|[=<>~!]=)(?:{_OCTET}\.){{3}}{_OCTET}(?![\w]|\.\d)",
            check=_check_ipv4,
            gate=_DIGIT,
            triggers=".",
        ),
        _rule(
            "ipv6",
            rf"(?<![\w:.]){_HEX}{{0,4}}(?::{_HEX}{{0,4}}){{2,7}}(?![\w:.])",
            check=_check_ipv6,
            triggers=":",
        ),
    ),
    "IBAN": (
        _rule(
            "iban",
            # the boundary is checked after the first letters: a leading lookbehind
            # would be tried at every position of every text
            r"[A-Z]{2}(?<=(?:^|[^A-Za-z0-9]|\\[nrt])[A-Z]{2})\d{2}"
            r"(?:[A-Z0-9]{11,30}|(?: [A-Z0-9]{4}){2,7}(?: [A-Z0-9]{1,4})?)(?![A-Za-z0-9])",
            gate=_DIGIT,
            check=_check_iban,
        ),
    ),
    "NATIONAL_ID": (
        _rule(
            "us_ssn",
            r"(?<![\w-])\d{3}-\d{2}-\d{4}(?![\w-]|\.\d)",
            check=_check_ssn,
            gate=_DIGIT,
            triggers="-",
        ),
        _rule(
            "us_ssn_named",
            r"(?i:(?<![a-z])ssn|social[ _-]security(?:[ _-]n(?:umber|o\.?))?)[^\n\d]{0,24}"
            r"(?P<value>(?<!\d)\d{3}[ -]?\d{2}[ -]?\d{4})(?![\w-])",
            group="value",
            check=_check_ssn,
            triggers=("ssn", "social"),
        ),
        _rule(
            "uk_nino",
            r"[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z](?: ?\d{2}){3} ?[A-D](?![A-Za-z0-9])",
            check=_check_nino,
            gate=(_DIGIT, r"[A-Z]{2} ?\d\d ?\d\d"),
            stdlib=True,
        ),
        _rule(
            "cn_resident_id",
            r"(?<![\w-])[1-9]\d{5}(?:18|19|20)\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])\d{3}[\dXx]"
            r"(?![\w-])",
            gate=(_DIGIT, r"\d{17}"),
            check=_check_cn_resident_id,
        ),
    ),
    "UUID": (
        _rule(
            "uuid",
            rf"(?<![\w-]){_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}(?![\w-])",
            triggers="-",
        ),
    ),
    "PHONE_NUMBER": (
        _rule(
            "international_phone",
            r"(?<![\w+])\+[1-9]\d{0,2}(?:[ .-]?\(\d{1,4}\))?(?:[ .-]?\d{1,5}){1,5}(?![\w]|[.-]\d)",
            gate=(_DIGIT, r"\+[1-9]"),
            check=_check_intl_phone,
        ),
        _rule(
            "us_phone",
            r"(?<![\w+().-])(?:1[ .-])?(?:\(\d{3}\)[ .-]?|\d{3}[.-])\d{3}[.-]\d{4}(?![\w-]|\.\d)",
            gate=(_DIGIT, r"\d{3}[.-]\d{4}"),
        ),
        _rule(
            "cn_mobile",
            r"(?<![A-Za-z0-9_+.-])(?:(?:\+|00)?86[ -]?)?1[3-9]\d(?:\d{8}|[ -]\d{4}[ -]\d{4})"
            r"(?![A-Za-z0-9_]|[.-]\d)",
            gate=(_DIGIT, r"1[3-9]\d"),
        ),
    ),
    "USER_PATH": (
        _rule(
            "unix_home",
            r"(?<![\w.~-])/(?:home|Users)/(?P<user>[A-Za-z0-9_][A-Za-z0-9._@+-]*)"
            r"(?=[/\\\s\"'`,;:)\]}>]|$)",
            group="user",
            check=_check_user,
            triggers=("/home/", "/users/"),
        ),
        _rule(
            "windows_home",
            r"(?<![\w])[A-Za-z]:(?:\\+|/)(?:Users|Documents and Settings)(?:\\+|/)"
            rf"(?P<user>{_WIN_NAME}(?: {_WIN_NAME})*(?=[\\/])|{_WIN_NAME})",
            group="user",
            check=_check_user,
            ignore_case=True,
            escapes=False,  # C:\nancy is a path, not an escaped newline
            triggers=("users", "documents and settings"),
        ),
        _rule(
            "tilde_home",
            r"(?<![\w~/$])~(?P<user>[a-z_][a-z0-9_.-]{0,31})(?=/)",
            group="user",
            check=_check_user,
            triggers="~",
        ),
    ),
}


def _assemble() -> dict[str, tuple[_Rule, ...]]:
    table: dict[str, list[_Rule]] = {entity: [] for entity in TAGS}
    for entity, rule in (*FORMAT_RULES, *ASSIGNMENT_RULES, *ENTROPY_RULES):
        table[entity].append(rule)
    for entity, rules in _PII_RULES.items():
        table[entity].extend(rules)
    return {entity: tuple(rules) for entity, rules in table.items() if rules}


#: entity -> its rules, the one table the engine runs
_RULES: dict[str, tuple[_Rule, ...]] = _assemble()
