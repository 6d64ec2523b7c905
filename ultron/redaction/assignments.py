r"""Layer 2: values assigned to a name that says "credential", in every syntax an
agent log shows.

A secret of no known format is found through its name: ``DB_PASSWORD=...``,
``"client_secret": "..."``, ``<password>...</password>``, ``--token ...``,
``X-Datadog-Key: ...``. The name only makes a candidate; the VALUE decides, so that
code and configuration that merely talk about credentials stay
(``password_min_length=8``, ``token_count=12``, ``max_tokens: 4096``,
``PuttyPassword=0``, ``password = get_password()``, ``api_key: ${API_KEY}``).

Syntaxes: ``.env``/shell ``NAME=value`` and ``export``, JSON ``"name": "value"``
(also escaped inside a JSON string), YAML ``name: value`` and block scalars, TOML
and INI ``name = "value"``, XML attributes ``name="value"``, ``<add key="..."
value="..."/>`` pairs (NuGet ``ClearTextPassword``) and elements
``<password>value</password>``, PHP/Ruby ``'name' => 'value'``, Go ``name :=``,
Makefile ``::=``/``?=``, PHP ``.=``, typed declarations (``var apiToken string =``,
``password: str =``), Python kwargs, call pairs ``setProperty("API_TOKEN", "...")``,
Kubernetes/compose/ECS ``name: API_TOKEN`` + ``value: ...`` pairs,
CLI flags (``--password x``, ``--token=x``, ``mysql -pX``, ``sshpass -p``,
``redis-cli -a``, ``curl -u name:pass``, ``--user name:pass``, httpie ``-a``/``--auth``,
``openssl -pass pass:x``), HTTP headers (``Authorization``, ``Cookie``/``Set-Cookie``, any
``X-...-Key|Token|Secret|Auth...``), SQL ``IDENTIFIED BY '...'``, ``.netrc``
``login x password y``, Kubernetes ``kind: Secret`` data, the English "the
password is ..." / "with password <a password-shaped value>" and the Chinese
``密码是...``.

Decisions (the tests pin each of them):

* The keyword must be a word of its own at the end of the name: ``DB_PASSWORD``,
  ``dbPassword``, ``PGPASSWORD``, ``x-api-key``, ``DB_PASS`` are names;
  ``tiktoken``, ``max_tokens``, ``token_count``, ``bypass`` are not.
* Three strengths of name. ``password``/``secret``/``credential``/``private_key``
  values of any length are redacted. ``*token``/``api_key``/``access_key``...
  values must be 8+ characters without spaces (LLM logprobs
  ``{"token": "Hello"}`` stay). A bare ``*_key``/``*Key``/``auth``/``signature``
  name (``X-Datadog-Key``, ``DD_APP_KEY``, ``"auth"`` of a docker config) is as
  often a cache key or a sort key, so its value must look generated
  (:func:`ultron.redaction.entropy.looks_random`).
* A name containing a known provider (``ALGOLIA_APP_ID``, ``plaid_client_id``) is
  a candidate whatever it ends with; its value must look generated too.
* Code is not a secret. An unquoted value is kept when it is followed by ``(`` or
  ``[`` (``password = get_password()``, ``token = os.environ["TOKEN"]``), is a
  dotted reference written with spaces (``token = self.token``), an identifier
  naming a credential (``api_key=api_key``, ``password = credentials``,
  ``start_token: Token``), the key itself (``token=token``), a language keyword
  (``= await ...``, ``= new ...``), a literal, a type (``password: str``), a small
  number (``PuttyPassword=0``, ``last_token = -1``) or a bare word in a quoted-key
  mapping (``{"token": chunk}``: JSON has no bare words). Placeholders are kept
  everywhere (:func:`ultron.redaction.checks._is_placeholder`). Quoted values are
  redacted whole (``password = "hunter2"``).
* ``key: value`` without quotes is prose-prone ("password: click the link"), so
  the value is only redacted when it has a digit or a symbol, or when the line is
  a ``key: value`` config line (YAML, HTTP header). ``--password value`` needs a
  digit or a symbol too ("use the --token flag"), and so does "the password is X".
* In unquoted values ``&`` only ends the value before another ``name=`` (query
  strings); ``,`` ``;`` and whitespace always end it. A single trailing ``.``
  before whitespace is sentence punctuation and stays outside the value.
* Cookies: every ``name=value`` of a ``Cookie:``/``Set-Cookie:`` header is
  redacted but the names and the ``Path``/``Expires``/... attributes stay.
* ``curl -u name:password``: the password of any shape (case, punctuation, a space
  inside quotes) is redacted and the name and the quotes stay, however the shell word
  is written (``-u 'n:p w'``, ``-u n:"p w"``, ``\"n:p\"`` in escaped JSON, ``-su``,
  ``-un:p``, ``--user=``, ``["curl", "-u", "n:p"]``) and wherever the flag sits in the
  command (after a quoted URL with ``&``, on a ``\``-continued line). The short flag
  counts for curl (``-u``/``-U``) and httpie/xh (``-a``) only (``git push -u``, ``sort
  -u`` stay); ``curl -u name`` (curl asks), ``$USER:$PASS`` and other placeholders,
  uid:gid and ``docker run --user app:app`` stay. ``wget --ask-password URL`` is a
  switch: the URL stays.
"""

from __future__ import annotations

import regex

from ultron.redaction.checks import (
    _CREDENTIAL_WORD,
    _KEYWORDS_CODE,
    _LITERALS,
    _NUMBER,
    _REFERENCE,
    _TYPE_NAMES,
    _is_placeholder,
    _line_of,
    _trim_sentence_end,
    has_alnum,
    has_digit,
    has_space,
)
from ultron.redaction.commands import USER_PASS, check_user_pass
from ultron.redaction.entropy import basic_credentials, looks_random, password_like
from ultron.redaction.rules import Span, _rule

# --------------------------------------------------------------- key names

# The keywords a credential name must end with (:func:`_name_keyword`).
# ``key``, ``auth``, ``signature``, ``pat`` and ``sk`` are weak (see :data:`_WEAK`).
_KEYWORDS = (
    r"(?:pass(?:word|wd|phrase)?|pwd|secret|token|bearer|api[_-]?key|apikey|access[_-]?key"
    r"|secret[_-]?key(?:[_-]?base)?|private[_-]?key|auth[_-]?key|session[_-]?key|credentials?|key|auth"
    r"|signature|pat|sk)"
)
_KEYWORD_AT_END = regex.compile(_KEYWORDS + "$", regex.IGNORECASE)
_WEAK = frozenset({"key", "auth", "signature", "pat", "sk"})
# Short keywords only count after a separator or at a camelCase boundary:
# ``AZURE_DEVOPS_PAT``, ``HUAWEICLOUD_SDK_SK``, ``adoPat``, but not ``DISK``.
_SHORT = frozenset({"pat", "sk"})
_STRICT_LENGTH = ("token", "key")  # *token / *key values are long and unbroken

# ``dbPassword``, ``DB_PASSWORD``, ``x-api-key``, ``--client-secret``, ``access.token``,
# ``_authToken``: the name must END with a keyword, so ``max_tokens`` is not a name.
# Patterns match from the keyword (a literal the regex engine finds fast) and the
# checks walk back to the start of the name (:func:`_key_start`): matching from
# every position of every word would cost several times more.
_KW = r"(?P<kw>{word})"
# The last word of a credential name, per trigger the prefilter may see; the
# checks walk back to the whole name and judge it with _KEYWORD_AT_END.
_LAST_WORDS = {
    "pass": r"pass(?:word|wd|phrase)?", "pwd": "pwd", "secret": "secret", "token": "token", "bearer": "bearer",
    "key": r"key(?:[_-]?base)?", "credential": r"credentials?", "auth": "auth", "signature": "signature",
    "pat": "pat", "sk": "sk",
}
_KEYCHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
_HEXCHARS = frozenset("0123456789abcdefABCDEF")


def _key_start(text: str, end: int) -> int:
    """Where the name that ends with the keyword at ``end`` starts: the run of
    name characters before it, stopping after a JSON escape (``\\n``,
    ``\\u5bc6``) as a token boundary does."""
    i = end
    while i > 0 and text[i - 1] in _KEYCHARS:
        if i >= 2 and text[i - 2] == "\\" and text[i - 1] in "nrt":
            break
        if i >= 6 and text[i - 6] == "\\" and text[i - 5] == "u" and all(c in _HEXCHARS for c in text[i - 4 : i]):
            break
        i -= 1
    return i


def _key_of(match: "regex.Match[str]") -> tuple[str, int]:
    """The credential name of a match and where it starts."""
    groups = match.re.groupindex
    if "key" in groups and match.start("key") >= 0:
        return match.group("key"), match.start("key")
    if "kw" in groups and match.start("kw") >= 0:
        start = _key_start(match.string, match.start("kw"))
        return match.string[start : match.end("kw")], start
    return "", -1


# A backslash inside an unquoted value, unless it starts an escape (``\n``, ``\"``,
# ``\\``): escaped JSON must not have its escapes swallowed into the value.
_NOT_ESCAPE = r"\\(?![nrtbfu\"'\\/])"
# Type annotations between a name and ``=``: ``password: str =``, ``var apiToken string =``.
_TYPED = r"(?:[ \t]*:[ \t]*[A-Za-z_][\w.]*(?:\[[\w., ]*\])?(?:[ \t]*\|[ \t]*None)?(?=[ \t]*=[^=])" \
         r"|[ \t]+(?:string|String|str|&str|\[\]byte|SecureString)(?=[ \t]*=[^=]))?"
_SEP = r"(?P<sep>:{1,3}=|[?.]=|\?\?=|=>|=(?![=>~])|:(?![:/]))"
_VALUE = (
    r"(?:(?P<bs>\\+)\"(?P<v_esc>(?:(?!\\+\")[^\n])+)(?P=bs)\""
    r"|\"(?P<v_dq>(?:\\.|[^\"\\\n])+)\""
    r"|'(?P<v_sq>(?:\\.|[^'\\\n])+)'"
    r"|`(?P<v_bq>[^`\n]+)`"
    r"|(?P<v_raw>(?:[^\s\"'`,;&()\[\]{}\\]|&(?![\w.\[\]-]*=)|" + _NOT_ESCAPE + r")++))"
)
_CREDENTIAL = _KW + r"(?P<kq>\\*[\"'])?" + _TYPED + r"[ \t]*" + _SEP + r"[ \t]*" + _VALUE
_GROUPS = ("v_esc", "v_dq", "v_sq", "v_bq", "v_raw")

# Names that contain a provider: ``ALGOLIA_APP_ID``, ``plaid_client_id``, ``sumoAccessId``.
_PROVIDERS = (
    "adafruit adobe airtable algolia alibaba aliyun amplitude anthropic artifactory asana atlassian auth0 "
    "beamer bintray bitbucket bittrex braintree buildkite circleci clickhouse cloudflare codecov cohere "
    "coinbase confluence confluent contentful contribsys databricks datadog deepseek digitalocean discord "
    "doppler droneci dropbox dynatrace etsy facebook fastly finicity finnhub firebase flickr freshbooks "
    "gitter gocardless grafana groq heroku honeycomb hubspot intercom jfrog jira kraken kucoin launchdarkly "
    "linkedin looker mailchimp mailgun mapbox mattermost meraki messagebird mistral mixpanel netlify newrelic "
    "ngrok nytimes okta openai pagerduty paypal perplexity pinecone plaid postmark privateai pusher "
    "rapidapi replicate rollbar segment sendbird sendgrid sentry shopify snyk sonar sonarqube square "
    "squarespace stripe sumo sumologic supabase tailscale telegram travis twilio twitch twitter typeform "
    "vercel yandex zendesk"
).split()
_PROVIDER_KEY = (
    r"(?P<key>(?i:{word})"
    r"(?>[A-Za-z0-9_.-]*))(?P<kq>\\*[\"'])?[ \t]*" + _SEP + r"[ \t]*" + _VALUE
)


def _name_keyword(key: str) -> str:
    """The keyword ``key`` ends with as a word of its own (lower case, ``_`` for
    ``-``), or ``""``: ``DB_PASSWORD``, ``dbPassword``, ``PGPASSWORD``, ``token``
    yes; ``tiktoken``, ``DISK`` no."""
    found = _KEYWORD_AT_END.search(key)
    if found is None:
        return ""
    keyword, i = found.group(0).lower().replace("-", "_"), found.start()
    if keyword in _SHORT:
        ok = i == 0 or key[i - 1] in "_.-" or (key[i].isupper() and key[i - 1].islower())
    else:
        ok = _word_starts_at(key, i)
    return keyword if ok else ""


def _word_starts_at(name: str, i: int) -> bool:
    """A word of ``name`` starts at ``i``: after a non-letter, at a camelCase
    boundary, or anywhere in an all-caps name."""
    if i == 0 or not name[i - 1].isalnum() or name.isupper():
        return True
    return name[i].isupper() and not name[i - 1].isupper()


def _ends_in_word(name: str, words: "regex.Pattern[str]") -> bool:
    """``name`` ends with one of ``words`` as a word of its own."""
    found = words.search(name)
    return found is not None and _word_starts_at(name, found.start())


# ----------------------------------------------------------------- checks


def _looks_secret(value: str) -> bool:
    return any(not ch.isalpha() for ch in value)


def _small_number(value: str) -> bool:
    return bool(_NUMBER.match(value)) and len(value.lstrip("+-")) <= 3


def _check_credential(match: "regex.Match[str]", span: Span) -> Span | None:
    text = match.string
    start, end = span
    value = text[start:end]
    if not has_alnum(value) or _is_placeholder(value):
        return None
    groups = match.groupdict()
    key, key_start = _key_of(match)
    key = key.lstrip("-_")
    keyword = _name_keyword(key)
    if key and not keyword:
        return None  # tiktoken=..., sometoken=...: the keyword is not a word of its own
    key = key.lower()
    if value.lower().lstrip("-") == key:
        return None  # token=token: a keyword argument passed on, SECRET = "SECRET"
    if key in ("pwd", "oldpwd") and value.startswith(("/", "~")):
        return None  # the shell's working directory, not a password
    if _small_number(value.rstrip(",")):
        return None  # PuttyPassword=0, retries_key: 3
    if keyword in _WEAK:
        # cache_key = "user:42", sort_key: created_at, auth: required
        if key.startswith(("public", "pub_", "pub-", "publishable")):
            return None  # public_key, publishableKey: published on purpose
        if looks_random(_trim_value(value)) or (keyword == "auth" and basic_credentials(value)):
            return span
        return None
    if key.endswith(_STRICT_LENGTH) and (len(value) < 8 or has_space(value)):
        return None  # {"token": "Hello", "logprob": -0.1}: tokens and keys are long and unbroken
    if "v_raw" not in groups or match.start("v_raw") < 0:
        return span  # quoted: everything between the quotes
    return _check_unquoted(match, span, key, key_start)


def _trim_value(value: str) -> str:
    return value.strip().rstrip(".,;")


def _check_unquoted(match: "regex.Match[str]", span: Span, key: str, key_start: int) -> Span | None:
    """Is an unquoted value code rather than a secret?"""
    text = match.string
    start, end = span
    value = text[start:end]
    groups = match.groupdict()
    if end < len(text) and text[end] in "([":
        return None  # a call or a subscript
    sep = groups.get("sep")
    spaced = sep is not None and text[match.start("sep") - 1] in " \t"
    if sep == ":" and value.endswith(":"):
        return None  # "token: id:" in a docstring, nested YAML
    if sep == ":" and key_start > 0 and text[key_start - 1] == ":":
        return None  # arn:aws:secretsmanager:...:secret:prod/db: a colon-chained name
    if sep == ":" and text.endswith("://", 0, key_start):
        return None  # https://x-access-token:<token>@host: the URL rules take the password
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
        if sep == "=>" and spaced:
            return None  # token => token.trim(): an arrow function
    end = _trim_sentence_end(text, start, end)
    if sep == ":" and not _looks_secret(text[start:end]):
        line_start, line_end = _line_of(text, start)
        before = text[line_start:key_start].strip(" \t-\"'{,\\")
        after = text[end:line_end].strip(" \t,;\"'}\\")
        if before or after or value.endswith(":"):
            return None  # prose such as "password: click the link below"
    return start, end


_DIGEST_WORD = regex.compile(r"(?i)(?<![a-z])(?:md5|sha\d*|b2|blake\d*|crc\d*)(?:sum)?(?![a-z])|checksum|digest")


def _check_provider_key(match: "regex.Match[str]", span: Span) -> Span | None:
    """``ALGOLIA_APP_ID=...``: any name with a provider in it, a generated value."""
    text = match.string
    at = match.start("key")
    if at > 0 and text[at - 1].isalnum() and not (text[at].isupper() and not text[at - 1].isupper()):
        return None  # inside a word (``globalID``), unless at a camelCase boundary
    value = _trim_value(text[span[0] : span[1]])
    key = match.group("key").lower()
    if _is_placeholder(value) or value.lower() in _LITERALS:
        return None
    if key.endswith(("sha", "commit", "rev", "revision", "hash", "digest", "ref", "url", "uri", "host",
                     "endpoint", "region", "version", "path", "file", "dir", "name", "model")):
        return None  # GITHUB_SHA, SENTRY_DSN_URL, OPENAI_MODEL
    line_start, _ = _line_of(text, at)
    if _DIGEST_WORD.search(text, line_start, at):
        return None  # md5sum anthropic-4.3.9.tar.gz: <md5>: a file's digest
    if value.isdigit():
        return span if len(value) >= 14 else None  # client ids are long numbers
    if not looks_random(value, min_len=10):
        return None
    return span[0], span[0] + len(value)


def _check_cli_credential(match: "regex.Match[str]", span: Span) -> Span | None:
    if match.group("key").lower().startswith(("ask-", "no-", "prompt-")):
        return None  # wget --ask-password URL: a switch, the next word is not its value
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


def _check_value(match: "regex.Match[str]", span: Span) -> Span | None:
    """A value found by its syntax alone (``curl -u``, ``IDENTIFIED BY``, ``.netrc``)."""
    text = match.string
    start, end = span
    end = _trim_sentence_end(text, start, end)
    value = text[start:end]
    if not has_alnum(value) or _is_placeholder(value) or _small_number(value):
        return None
    return start, end


def _check_prose(match: "regex.Match[str]", span: Span) -> Span | None:
    """"the password is Tr0ub4dor&3" yes; "the token is expired", "if token is
    Name.Other", "the token is ULTRON_API_TOKEN when set" no."""
    start, end = span
    while end > start and match.string[end - 1] in ".,:;)]}":
        end -= 1  # sentence punctuation
    checked = _check_value(match, (start, end))
    if checked is None:
        return None
    value = match.string[checked[0] : checked[1]]
    if match.start("verb") < 0:
        # "login with password Winter2024!" (no "is"): only a password-shaped value
        return checked if password_like(value) and match.group(0)[:4].lower() in ("pass", "secr") else None
    if len(value) < 6 or not _looks_secret(value) or _NUMBER.match(value):
        return None
    if _REFERENCE.match(value) and ("." in value or "_" in value):
        return None  # a name in code or prose, not a value
    return checked


def _check_header_value(match: "regex.Match[str]", span: Span) -> Span | None:
    text = match.string
    value = _trim_value(text[span[0] : span[1]])
    if _is_placeholder(value):
        return None
    keyword = _name_keyword(match.group("key"))
    if keyword and keyword not in _WEAK and len(value) >= 8:
        return span  # X-Auth-Token: ..., X-Api-Secret: ...
    return span if looks_random(value, min_len=12) or password_like(value) else None


def _check_cookie(match: "regex.Match[str]", span: Span) -> list[Span] | None:
    """Every ``name=value`` of a cookie header: the values, not the names nor
    the ``Path``/``Expires``/... attributes."""
    text = match.string
    spans = []
    for pair in _COOKIE_PAIR.finditer(text, span[0], span[1]):
        value = pair.group("value")
        if _is_placeholder(value) or value.lower() in _LITERALS:
            continue
        if pair.group("name").lower() in _COOKIE_ATTRIBUTES:
            continue
        if len(value) >= 8 or any(c.isdigit() for c in value):
            spans.append(pair.span("value"))
    return spans or None


_COOKIE_ATTRIBUTES = frozenset({
    "path", "domain", "expires", "max-age", "samesite", "secure", "httponly", "priority", "version",
    "comment", "partitioned",
})


def _check_k8s_secret(match: "regex.Match[str]", span: Span) -> Span | None:
    """A ``data:`` value of a ``kind: Secret`` manifest (base64 of anything);
    ``kind:`` may come after ``data:`` (kubectl sorts the keys)."""
    text = match.string
    around = text[max(0, span[0] - 3000) : span[1] + 3000]
    if _K8S_KIND.search(around) is None or _K8S_DATA.search(text, max(0, span[0] - 3000), span[0]) is None:
        return None
    return _check_value(match, span)


_K8S_KIND = regex.compile(r"kind:[ \t]*[\"']?Secret\b")
_K8S_DATA = regex.compile(r"(?:^|\n|\\n)[ \t]*(?:data|stringData):[ \t]*(?:\n|\\n|$)")


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
    if match.start("scheme") < 0 and not (len(value) >= 16 or has_digit(value)):
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
    if not (has_digit(value) or any(ch in "._~+/=-" for ch in value)):
        return None
    return start, end


def _check_url_credential(match: "regex.Match[str]", span: Span) -> Span | None:
    value = match.string[span[0] : span[1]]
    return None if _is_placeholder(value) else span


def _check_url_token(match: "regex.Match[str]", span: Span) -> Span | None:
    """``https://<token>@host``: a user part that is a generated token."""
    value = match.string[span[0] : span[1]]
    return span if looks_random(value, min_len=16) else None


# --------------------------------------------------------------- patterns

_AUTH_HEADER = (
    r"(?<![\w-])(?:proxy-)?authorization(?:\\*[\"'])?[ \t]*[:=][ \t]*(?:\\*[\"'])?"
    r"(?:(?P<scheme>bearer|basic|token|bot|apikey|sso-key|negotiate|ntlm|dpop)[ \t]+)?"
    r"(?P<value>(?:[^\s\"',;\\()\[\]{}]|" + _NOT_ESCAPE + r")++)"
)
_BARE_BEARER = r"(?<![\w-])bearer[ \t]+(?P<value>[A-Za-z0-9._~+/=-]{8,}+)"
# scheme://user:password@host: a database URL, a git remote with a token, a proxy.
_URL_PASSWORD = (
    r"(?<![\w+.-])[A-Za-z][A-Za-z0-9+.-]{1,30}://[^\s:/@?#\"'<>]*:"
    r"(?P<value>[^\s/?#\"'<>]+)@[^\s/?#\"'<>@]+"
)
_URL_TOKEN = r"(?<![\w+.-])[A-Za-z][A-Za-z0-9+.-]{1,30}://(?P<value>[\w.~-]{16,})@[\w-]+(?:\.[\w-]+)+"

_CLI_KEYWORDS = (
    r"(?:password|passwd|passphrase|pass|token|secret|api-?key|access-key|secret-key|client-secret"
    r"|auth-token|access-token|private-key)"
)
_CLI_CREDENTIAL = (
    r"(?<![\w-])--(?P<key>(?:[a-z0-9]+-)*" + _CLI_KEYWORDS + r")[ \t]+"
    r"(?:\"(?P<v_dq>[^\"\n]+)\"|'(?P<v_sq>[^'\n]+)'|(?P<v_raw>[^\s\"'`\\-][^\s\"'`\\]*+))"
)
_Q_VALUE = r"(?:\"(?P<v_dq>[^\"\n]+)\"|'(?P<v_sq>[^'\n]+)'|(?P<v_raw>[^\s\"'`|;&<>]+))"
_GLUED_VALUE = r"(?:\"(?P<v_dq>[^\"\n]+)\"|'(?P<v_sq>[^'\n]+)'|(?P<v_raw>[^\s\"'`|;&<>-][^\s\"'`|;&<>]*))"
_ARGS = r"\b[^\n|;&]*?[ \t]"  # the rest of the command line up to the flag
# Tools whose short flag carries a password, one pattern per tool name (the
# prefilter says which names occur): mysql -pSECRET, sshpass -p, redis-cli -a,
# mongo -p, docker login -p.
_SHORT_FLAGS = {
    **{tool: r"(?<![\w-])" + tool + _ARGS + r"-p" + _GLUED_VALUE
       for tool in ("mysql", "mysqldump", "mysqladmin", "mysqlimport", "mysqlsh", "mariadb")},
    **{tool: r"(?<![\w-])" + tool + _ARGS + r"-p[ \t]+" + _Q_VALUE
       for tool in ("sshpass", "mongo", "mongosh", "mongodump", "mongorestore", "mongoexport", "mongoimport")},
    "redis-cli": r"(?<![\w-])redis-cli" + _ARGS + r"-a[ \t]+" + _Q_VALUE,
    "login": r"(?<![\w-])login" + _ARGS + r"-p[ \t]+" + _Q_VALUE,  # docker/podman/helm/oras login
}
_OPENSSL_PASS = r"(?<![\w-])-pass(?:in|out|word)?[ \t]+[\"']?pass:(?P<value>[^\s\"']+)"
_SQL_PASSWORD = (
    r"(?i)\b(?:identified[ \t]+by|with[ \t]+(?:encrypted[ \t]+)?password|password)[ \t]+"
    r"(?P<q>\\*')(?P<value>(?:(?!(?P=q))[^\n])+)(?P=q)"
)
_NETRC = r"\blogin[ \t]+\S+[ \t]+password[ \t]+(?P<value>[^\s\"']+)"
# libpq's password file line, host:port:database:user:password ("*" matches any field)
_PGPASS = (r"(?<![\w:/.-])(?=[\w.*-]*[A-Za-z*])[\w.*-]+:(?:\d{1,5}|\*):[\w.*$-]+:[\w.*$@-]+:"
           r"(?P<value>[^\s'\"\\:]+)")
_PROSE = (
    r"(?i)\b(?:{word})"
    r"(?:[ \t]+(?:for|of)[ \t]+\S+)?(?:[ \t]+(?P<verb>is|was|are|were)[ \t]*:?)?[ \t]+[\"'`“]?"
    r"(?P<value>[^\s\"'`”,;]+)"
)
_NAME = r"(?P<key>[\w.-]*?" + _KEYWORDS + r")"
_XML_ELEMENT = (
    r"<(?P<tag>(?:[\w.-]+:)?" + _NAME + r")(?:[ \t][^<>\n]*)?>"
    r"(?:\s|\\[nrt])*(?P<v_xml>[^<>\s\\](?:[^<>\n\\]|\\(?![nrt]))*?)(?:\s|\\[nrt])*</(?P=tag)>"
)
_XML_PAIR = (
    r"\b(?:key|name)[ \t]*=[ \t]*(?P<q>\\*[\"'])" + _NAME + r"(?P=q)"
    r"(?:[ \t\r\n]+|\\[nrt])+value[ \t]*=[ \t]*(?P=q)(?P<v_xml>(?:(?!(?P=q))[^\n])+)(?P=q)"
)
# Kubernetes/compose ``- name: API_TOKEN`` + ``value: ...`` and ECS-style JSON
# ``{"name": "API_TOKEN", "value": "..."}``: the name says what the next value is.
_NAME_VALUE = (
    r"name(?P<kq>\\*[\"']?)[ \t]*:[ \t]*(?P<q>\\*[\"']?)" + _NAME + r"(?P=q)[ \t]*,?"
    r"(?:[ \t]|\r?\n|\\r?\\n)*(?P=kq)value(?P=kq)[ \t]*:[ \t]*"
    r"(?:\\*\"(?P<v_dq>(?:(?!\\*\")[^\n])+)\\*\"|'(?P<v_sq>[^'\n]+)'|(?P<v_raw>[^\s\"',}\\]+))"
)
_CALL_PAIR = (
    r"\([ \t]*(?P<q>\\*[\"'])" + _NAME + r"(?P=q)[ \t]*,[ \t]*(?P=q)"
    r"(?P<v_xml>(?:(?!(?P=q))[^\n])+)(?P=q)"
)
_YAML_BLOCK = (
    r"(?P<kw>" + _KEYWORDS + r")(?P<kq>[\"'])?:[ \t]*[|>][-+]?[ \t]*(?:\r?\n|\\r?\\n)[ \t]+"
    r"(?P<v_xml>[^\s\\][^\n\\]*)"
)
_HEADER = (
    r"(?<![\w/-])(?P<key>(?i:x-(?:[a-z0-9]+-)*?(?:[a-z0-9]*(?:key|token|secret|auth|pass|password|credential"
    r"|signature|session|sig))(?:-[a-z0-9]+)*))[ \t]*:[ \t]*(?P<value>[^\s,;\"'\\]+)"
)
_COOKIE = r"(?i:(?:set-)?cookie)(?:\\*[\"'])?[ \t]*[:=][ \t]*(?:\\*[\"'])?(?P<value>[^\n\"'\\]+)"
_COOKIE_PAIR = regex.compile(r"(?<![^\s;])(?P<name>[\w.$!#%&*+^|~-]+)=(?P<value>[^;\s,]+)")
_K8S_DATA_LINE = (
    r"(?:\n|\\n)[ \t]+[\w.-]+:[ \t]+[\"']?(?P<value>[A-Za-z0-9+/]{4,}={0,2})[\"']?"
    r"(?=[ \t]*(?:\r?\n|\\[rn]|$))"
)

# 密码=..., 密码：..., 密码是...: Chinese field names; the value is the ASCII run after them.
_CREDENTIAL_ZH = (
    r"(?:密码|口令|密钥|秘钥|令牌|访问令牌|私钥)(?:是|为)?[ \t]*[:：=]?[ \t]*"
    r"(?:[\"“](?P<v_dq>[^\"”\n]+)[\"”]|(?P<v_raw>[!#-&(-+\--\[\]-~]++))"
)

_PROSE_WORDS = {
    "pass": r"pass(?:word|phrase|wd)", "secret": "secret", "token": "token", "key": r"(?:api|access)[ _-]?key",
}

#: (entity, rule) of the keyword-anchored layer.
ASSIGNMENT_RULES = (
    ("URL_CREDENTIAL", _rule("url_password", _URL_PASSWORD, group="value", check=_check_url_credential,
                             triggers="://")),
    ("URL_CREDENTIAL", _rule("url_token_user", _URL_TOKEN, group="value", check=_check_url_token,
                             triggers="://")),
    ("AUTH_TOKEN", _rule("authorization_header", _AUTH_HEADER, group="value", check=_check_auth_header,
                         ignore_case=True, triggers="authorization")),
    ("AUTH_TOKEN", _rule("bearer_token", _BARE_BEARER, group="value", check=_check_bare_bearer,
                         ignore_case=True, triggers="bearer")),
    ("CREDENTIAL", _rule("credential_field", _CREDENTIAL, group=_GROUPS, check=_check_credential,
                         ignore_case=True, words=_LAST_WORDS)),
    ("CREDENTIAL", _rule("credential_provider_name", _PROVIDER_KEY, group=_GROUPS,
                         check=_check_provider_key, words={p: p for p in _PROVIDERS})),
    ("CREDENTIAL", _rule("credential_zh", _CREDENTIAL_ZH, group=("v_dq", "v_raw"), check=_check_zh_credential,
                         triggers=("密码", "口令", "密钥", "秘钥", "令牌", "私钥"))),
    ("CREDENTIAL", _rule("credential_cli_flag", _CLI_CREDENTIAL, group=("v_dq", "v_sq", "v_raw"),
                         check=_check_cli_credential, ignore_case=True, triggers="--")),
    ("CREDENTIAL", _rule("credential_short_flag", "{word}", group=("v_dq", "v_sq", "v_raw"), check=_check_value,
                         words=_SHORT_FLAGS)),
    ("CREDENTIAL", _rule("credential_user_pass", USER_PASS, check=check_user_pass,
                         triggers=("curl", "http", "xh", "--user", "--proxy-user", "--auth"))),
    ("CREDENTIAL", _rule("credential_openssl_pass", _OPENSSL_PASS, group="value", check=_check_value,
                         triggers="pass:")),
    ("CREDENTIAL", _rule("credential_sql_password", _SQL_PASSWORD, group="value", check=_check_value,
                         triggers=("identified", "password"))),
    ("CREDENTIAL", _rule("credential_netrc", _NETRC, group="value", check=_check_value, triggers="login")),
    ("CREDENTIAL", _rule("credential_pgpass", _PGPASS, group="value", check=_check_value,
                         triggers=("pgpass", ":5432:", ":*:"))),
    ("CREDENTIAL", _rule("credential_prose", _PROSE, group="value", check=_check_prose, words=_PROSE_WORDS)),
    ("CREDENTIAL", _rule("credential_xml_element", _XML_ELEMENT, group="v_xml", check=_check_credential,
                         ignore_case=True, triggers=("</",))),
    ("CREDENTIAL", _rule("credential_xml_pair", _XML_PAIR, group="v_xml", check=_check_credential,
                         ignore_case=True, triggers=("value",))),
    ("CREDENTIAL", _rule("credential_call_pair", _CALL_PAIR, group="v_xml", check=_check_credential,
                         ignore_case=True, triggers=("(\"", "('", "(\\"))),
    ("CREDENTIAL", _rule("credential_name_value", _NAME_VALUE, group=("v_dq", "v_sq", "v_raw"),
                         check=_check_credential, ignore_case=True, triggers=("value",))),
    ("CREDENTIAL", _rule("credential_yaml_block", _YAML_BLOCK, group="v_xml", check=_check_credential,
                         ignore_case=True, triggers=(": |", ": >", ":|", ":>"))),
    ("CREDENTIAL", _rule("credential_header", _HEADER, group="value", check=_check_header_value,
                         triggers="x-")),
    ("CREDENTIAL", _rule("credential_cookie", _COOKIE, group="value", check=_check_cookie, triggers="cookie")),
    ("CREDENTIAL", _rule("credential_k8s_secret", _K8S_DATA_LINE, group="value", check=_check_k8s_secret,
                         triggers="secret")),
)
