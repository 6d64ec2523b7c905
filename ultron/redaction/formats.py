r"""Layer 1: token formats that identify themselves, one entry per provider format.

This module is a data table: each entry is the entity (and so the tag) a token becomes, the literal prefixes that
trigger it (:mod:`ultron.redaction.prefilter`), and a regex written from the
provider's published format facts: prefix, alphabet, length. No regex here is a
copy of another scanner's rule; gitleaks' public rule list was only read as an
inventory of which formats exist.

Why a table of formats rather than entropy alone: a prefixed token is recognised
wherever it appears (a bare log line, a URL, a header of any name, prose) with
almost no false positives, and its tag says what leaked. Formats that carry no
prefix of their own (Datadog's 32 hex, Twilio's account SID, an AWS secret key)
are matched only near their provider's name (:func:`_near`).

Decisions (the tests pin each of them):

* Every format regex is bounded by non-token characters on both sides, so a
  prefix inside a longer identifier (``task-``, ``mask_live_``) is not a token.
* A token body must look generated: a digit, or both letter cases, and at least
  six distinct characters. ``glpat-xxxxxxxxxxxxxxxxxxxx`` and
  ``sk-some-very-long-kebab-case-slug`` are documentation, not secrets.
* A trailing ``.`` that ends a sentence is not part of a token whose alphabet has
  dots (GitLab routable tokens, Vault, Doppler).
* Google OAuth values (``GOCSPX-``, ``ya29.``, ``1//0``) keep the generic
  ``<REDACTED_CREDENTIAL>`` tag they always had; Google ``AIza`` keys stay
  ``<LLM_API_KEY>`` (Gemini).
* JSON Web Tokens are ``<JWT>`` anywhere, but the ``Authorization`` header's
  ``<REDACTED_TOKEN>`` wins on the same span (see the catalogue's priorities).
* A token of a fixed published shape (Hugging Face, GitHub, GitLab, npm, Google,
  OpenAI, Anthropic, Slack bot/user) cut in 2-4 pieces, at a line end (a wrap, a ``\``
  continuation, JSON-escaped ``\n``) or between string literals (``"a" "b"``,
  ``'a' + 'b'``, ``.``, ``||``, a JSON array of chunks), has every piece redacted under
  its provider's tag, the layout kept. Only when the first piece is short of the full
  shape and the pieces joined have it exactly: a line after a whole token, a join that
  overshoots, or a next line that starts ``NAME=`` stays (:data:`_SPLIT_TOKENS`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import Callable

import regex

from ultron.redaction.checks import has_digit, has_lower, has_upper
from ultron.redaction.entropy import looks_random
from ultron.redaction.rules import Span, _rule, _Rule

# Token boundaries: no word character or dash glued on either side.
_B = r"(?<![\w-])"
_E = r"(?![\w-])"
_B64 = "[A-Za-z0-9+/]"


def _generated(value: str) -> bool:
    """A digit or both letter cases, and six distinct characters at least."""
    return bool(has_digit(value) or (has_lower(value) and has_upper(value))) and len(set(value)) >= 6


def _check_token(match: "regex.Match[str]", span: Span) -> Span | None:
    text = match.string
    start, end = span
    if end - start > 1 and text[end - 1] == "." and (end == len(text) or not text[end].isalnum()):
        end -= 1  # sentence punctuation after a token whose alphabet has dots
    body = match.group("body") if "body" in match.re.groupindex else None
    if not _generated(body or text[start:end]):
        return None
    return start, end


def _check_sk(match: "regex.Match[str]", span: Span) -> Span | None:
    # ``sk-some-very-long-kebab-case-identifier`` is a slug; keys are random.
    value = match.string[span[0] : span[1]]
    return span if any(c.isdigit() for c in value) else None


def _check_discord(match: "regex.Match[str]", span: Span) -> Span | None:
    """The first segment of a Discord bot token is the bot's numeric id in base64."""
    head = match.group("head")
    try:
        decoded = base64.b64decode(head + "=" * (-len(head) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None
    return span if decoded.isdigit() and 15 <= len(decoded) <= 21 else None


# A token boundary in the middle of a pattern, JSON-escape aware like _B.
_MID_B = r"(?:(?<=\\(?:[nrt]|u[0-9A-Fa-f]{4}))|(?<![\\\w-]))"


def _check_near(match: "regex.Match[str]", span: Span) -> Span | None:
    """A shape-only token named by its provider must look generated
    (:func:`~ultron.redaction.entropy.looks_random`)."""
    value = match.string[span[0] : span[1]]
    if not looks_random("".join(c for c in value if c.isalnum()), min_len=16):
        return None  # (cafebabe:deadbeef is judged as one run)
    return _check_token(match, span)


def _near(entity: str, name: str, words: str, triggers: str, token: str, window: int = 160):
    """A token with no prefix of its own, within ``window`` characters after its
    provider's name (a key name, a config section, a command): the pattern starts
    at the name, which is rare, instead of at every run of letters."""
    pattern = (
        r"(?<![A-Za-z])(?i:" + words + r")[\s\S]{0," + str(window) + r"}?"
        + _MID_B + r"(?P<token>" + token + r")" + _E
    )
    return entity, _rule(name, pattern, group="token", check=_check_near, triggers=triggers.split())


def _check_aws_secret(match: "regex.Match[str]", span: Span) -> Span | None:
    value = match.string[span[0] : span[1]]
    has_upper = any(c.isupper() for c in value)
    has_lower = any(c.islower() for c in value)
    has_other = any(c.isdigit() or c in "/+" for c in value)
    return span if has_upper and has_lower and has_other else None


_AWS_CONTEXT = regex.compile(
    r"(?i)(?:(?<=\\[nrt])|(?<![a-z]))aws|amazon|secret[ _-]?access"
    r"|(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}"
)


def _check_aws_secret_near(match: "regex.Match[str]", span: Span) -> Span | None:
    text = match.string
    if _AWS_CONTEXT.search(text, max(0, span[0] - 300), min(len(text), span[1] + 120)) is None:
        return None
    if not looks_random(text[span[0] : span[1]], min_len=40):
        return None
    return _check_aws_secret(match, span)


# The keyword-anchored form: ``aws_secret_access_key = ...``, ``"SecretAccessKey": "..."``,
# "the secret key is ...".
_AWS_SECRET_KEYED = (
    r"(?i:{word})(?:\\*[\"'])?[ \t]*(?:[:=]|=>|\bis\b)?[ \t]*(?:\\*[\"'])?"
    r"(?P<value>[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])"
)
_AWS_SECRET_NAMES = {
    "aws": r"aws_?secret_?(?:access_?)?key|aws[ _-]secret",
    "secret": r"secret_?access_?key|secret[ _-]key",
}


def _fmt(
    entity: str,
    name: str,
    triggers: str,
    body: str,
    *,
    check=_check_token,
    ignore_case: bool = False,
    group: str | int = 0,
    bounded: bool = True,
    gate: str | tuple[str, ...] = (),
) -> tuple[str, _Rule]:
    pattern = (_B + body + _E) if bounded else body
    return entity, _rule(
        name, pattern, check=check, ignore_case=ignore_case, group=group, triggers=triggers.split() or None,
        gate=gate,
    )


_BASE58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def _check_wif(match: "regex.Match[str]", span: Span) -> Span | None:
    """A Bitcoin WIF private key: base58check with the private-key version byte."""
    text = match.string
    if span[0] > 0 and (text[span[0] - 1].isalnum() or text[span[0] - 1] in "_-"):
        return None  # inside a longer token
    number = 0
    for ch in match.string[span[0] : span[1]]:
        number = number * 58 + _BASE58.index(ch)
    raw = number.to_bytes((number.bit_length() + 7) // 8, "big")
    payload, checksum = raw[:-4], raw[-4:]
    if not payload or payload[0] not in (0x80, 0xEF) or len(payload) not in (33, 34):
        return None
    return span if hashlib.sha256(hashlib.sha256(payload).digest()).digest()[:4] == checksum else None


def _check_private_key(match: "regex.Match[str]", span: Span) -> Span | None:
    start, end = span
    body = match.string[start:end]
    trimmed = regex.sub(r"(?:\s|\\[nr])+$", "", body)  # also JSON-escaped newlines
    return start, start + len(trimmed)


# A PEM block to its END line, or to the end of its base64 body when truncated.
_PEM = (
    r"-----BEGIN[A-Z0-9 _-]*PRIVATE KEY(?: BLOCK)?-----"
    r"(?:.*?-----END[A-Z0-9 _-]*PRIVATE KEY(?: BLOCK)?-----"
    r"|[A-Za-z0-9+/=\s\\:,-]*)"
)
# PuTTY .ppk: the private lines and their MAC (the public half is public).
_NL = r"(?:\r?\n|\\+(?:r\\+)?n)"  # a newline, also JSON-escaped (at any depth)
_PUTTY = (
    r"Private-Lines:[ \t]*\d+[ \t]*" + _NL
    + r"(?:[ \t]*[A-Za-z0-9+/=]+[ \t]*(?:" + _NL + r"|$))+(?:[ \t]*Private-(?:MAC|Hash):[ \t]*[0-9a-fA-F]+)?"
)


# ------------------------------------------------------------ split tokens

# A provider token cut in pieces: wrapped at a line end (a log viewer, a terminal, a
# 76-column fold), or written as string pieces ("hf_AbCd" + "EfGh", implicit Python
# concatenation across lines, a JSON array of chunks). The pieces after the first carry
# no prefix, so no format rule sees them. The engine knows a piece continues a token
# when the first one ends at a line end or a closing quote WITHOUT the provider's full
# length, the next one starts the next line or string with the same alphabet, and the
# pieces joined have exactly the provider's shape (:data:`_SPLIT_TOKENS`): a line that
# merely follows a complete token, or one that would overshoot the length, is left.
_WRAP = r"(?:\\?\r?\n|\\+(?:r\\+)?n)[ \t]*"  # a line end (a continuation, JSON-escaped), indentation
_GAP = r"(?:[ \t]|" + _NL + r")*"
_CONCAT = r"(?P<q>\\*[\"'`])" + _GAP + r"(?:(?:\+|\.{1,2}|\|\||&|,)" + _GAP + r")?(?P=q)"


def _openai_whole(body: str) -> bool:
    """An OpenAI key body: ``T3BlbkFJ`` (base64 of "OpenAI") in its exact middle, 20+
    characters on each side (20+8+20 for user keys, 58 or 74 each side for project,
    service-account and admin keys)."""
    at = body.find("T3BlbkFJ")
    return at >= 20 and len(body) == 2 * at + 8 and regex.fullmatch(r"[\w-]+", body) is not None


def _split_rule(
    entity: str, name: str, triggers: str, prefix: str, body: str, whole: "str | Callable[[str], bool]"
) -> tuple[str, _Rule]:
    """``prefix`` + ``body`` characters, then 1-3 more runs of ``body`` characters, each
    after a line end or a string concatenation; the check wants the runs joined to be
    ``whole`` (a regex for the full body, or a predicate) and no shorter join of them to be."""
    pattern = (
        _B + r"(?P<head>" + prefix + r"(?P<hb>" + body + r"++))"
        r"(?:(?:" + _WRAP + "|" + _CONCAT + r")(?P<seg>" + body + r"++)){1,3}" + _E
    )
    complete = regex.compile(whole).fullmatch if isinstance(whole, str) else whole

    def check(match: "regex.Match[str]", span: Span) -> list[Span] | None:
        text = match.string
        pieces = [match.span("hb"), *match.spans("seg")]
        joined = ""
        for k, (start, end) in enumerate(pieces):
            joined += text[start:end]
            if complete(joined):
                break
        else:
            return None  # the pieces never make a whole token
        if k == 0:
            return None  # the first piece is whole: what follows is something else
        last_end = pieces[k][1]
        if text[last_end : last_end + 1] in ("=", "(") or (
            k == len(pieces) - 1 and regex.match(r"[ \t]*:[ \t]", text[last_end : last_end + 3])
        ):
            return None  # the next line starts with a name (KEY=, call(, key: )
        if not _generated(joined):
            return None
        return [match.span("head"), *pieces[1 : k + 1]]

    return entity, _rule(name, pattern, check=check, triggers=triggers.split())


#: Providers whose tokens have a fixed, published shape, so that a cut piece is known
#: to be incomplete and its continuation to complete it.
_SPLIT_TOKENS: tuple[tuple[str, _Rule], ...] = (
    _split_rule("LLM_API_KEY", "split_huggingface", "hf_ api_org_", r"(?:hf_|api_org_)", "[A-Za-z0-9]",
                r"[A-Za-z0-9]{34}"),
    _split_rule("GITHUB_TOKEN", "split_github_token", "ghp_ gho_ ghu_ ghs_ ghr_", r"gh[pousr]_", "[A-Za-z0-9]",
                r"[A-Za-z0-9]{36}"),
    _split_rule("GITHUB_TOKEN", "split_github_pat", "github_pat_", r"github_pat_", r"\w",
                r"[A-Za-z0-9]{22}_[A-Za-z0-9]{59}"),
    _split_rule("GITLAB_TOKEN", "split_gitlab_pat", "glpat-", r"glpat-", r"[\w-]", r"[\w-]{20}"),
    _split_rule("PACKAGE_TOKEN", "split_npm_token", "npm_", r"npm_", "[A-Za-z0-9]", r"[A-Za-z0-9]{36}"),
    _split_rule("LLM_API_KEY", "split_google_api_key", "aiza", r"AIza", r"[\w-]", r"[\w-]{35}"),
    # OpenAI: the base64 of "OpenAI" sits in the middle of the body (20+8+20, 74+8+74...)
    _split_rule("LLM_API_KEY", "split_openai_key", "sk-", r"sk-(?:(?:proj|svcacct|admin)-)?", r"[\w-]",
                _openai_whole),
    _split_rule("LLM_API_KEY", "split_anthropic_key", "sk-ant-", r"sk-ant-(?:api|admin|oat)\d\d-", r"[\w-]",
                r"[\w-]{93}AA"),
    _split_rule("SLACK_TOKEN", "split_slack_token", "xoxb- xoxp-", r"xox[bp]-", r"[A-Za-z0-9-]",
                r"\d{8,14}-\d{8,14}-(?:[A-Za-z0-9]{24}|\d{8,14}-[a-f0-9]{32})"),
)


#: (entity, rule), in no particular order: the engine groups them by entity.
FORMAT_RULES: tuple[tuple[str, _Rule], ...] = (
    # ---------------------------------------------------------- private keys
    ("PRIVATE_KEY", _rule("pem_private_key", _PEM, dotall=True, check=_check_private_key, triggers="-----begin")),
    ("PRIVATE_KEY", _rule("putty_private_key", _PUTTY, check=_check_private_key, triggers="private-lines")),
    ("PRIVATE_KEY", _rule("bitcoin_wif", r"[5KLc9][1-9A-HJ-NP-Za-km-z]{50,51}(?![\w-])",
                          check=_check_wif, stdlib=True)),
    _fmt("PRIVATE_KEY", "age_secret_key", "age-secret-key-1 age-plugin-",
         r"AGE-(?:SECRET-KEY|PLUGIN-[A-Z0-9]+)-1(?P<body>[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{50,})"),
    # ---------------------------------------------------------------- cloud
    _fmt("AWS_ACCESS_KEY", "aws_access_key_id", "akia asia abia acca a3t",
         r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])(?P<body>[A-Z0-9]{16})(?![A-Za-z0-9])",
         bounded=False),
    ("AWS_SECRET_KEY", _rule("aws_secret_access_key", _AWS_SECRET_KEYED, group="value", check=_check_aws_secret,
                             words=_AWS_SECRET_NAMES)),
    _fmt("AWS_SECRET_KEY", "aws_secret_near_aws", "aws amazon akia asia abia acca",
         r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])",
         check=_check_aws_secret_near, bounded=False),
    _fmt("AWS_BEDROCK_KEY", "aws_bedrock_long_lived", "absk",
         r"ABSK(?P<body>" + _B64 + r"{100,300})={0,2}(?![\w+/=-])"),
    _fmt("AWS_BEDROCK_KEY", "aws_bedrock_short_lived", "bedrock-api-key-",
         r"bedrock-api-key-(?P<body>" + _B64 + r"{20,})={0,2}(?:&Version=\d+)?(?![\w+/=-])"),
    _fmt("CLOUD_KEY", "aws_session_token", "iqojb3jpz2lu fwogzxivyxdz",
         r"(?:IQoJb3JpZ2lu|FwoGZXIvYXdz)(?P<body>[A-Za-z0-9+/]{60,})={0,2}(?![\w+/=-])"),
    _fmt("LLM_API_KEY", "google_api_key", "aiza", r"AIza(?P<body>[0-9A-Za-z_-]{35})"),
    _fmt("CREDENTIAL", "google_oauth_client_secret", "gocspx-", r"GOCSPX-(?P<body>[\w-]{20,40})"),
    _fmt("CREDENTIAL", "google_oauth_access_token", "ya29.", r"ya29\.(?P<body>[\w.-]{20,})"),
    _fmt("CREDENTIAL", "google_oauth_refresh_token", "1//0", r"1//0(?P<body>[\w-]{30,})",
         bounded=True),
    _fmt("AZURE_KEY", "azure_storage_key", "accountkey sharedaccesskey accesskey=",
         r"(?i:(?:Account|SharedAccess|Primary|Secondary)Key)[ \t]*=[ \t]*"
         r"(?P<body>" + _B64 + r"{30,}={0,2})(?![\w+/=-])", group="body", bounded=False),
    _fmt("AZURE_KEY", "azure_sas_signature", "sig=",
         r"(?<=[?&;\s\"']|^)sig=(?P<body>(?:[A-Za-z0-9+/]|%2[BbFf]|%3[Dd]){30,}(?:=|%3[Dd]){0,2})",
         group="body", bounded=False),
    _fmt("AZURE_KEY", "azure_ad_client_secret", "q~",
         r"(?<![\w~.-])[\w~.]{3}\dQ~(?P<body>[\w~.-]{31,34})(?![\w~-]|\.[\w~])", bounded=False),
    _fmt("AZURE_KEY", "azure_devops_pat", "azdo", r"(?P<body>[A-Za-z0-9]{76}AZDO[A-Za-z0-9]{4})"),
    _fmt("CLOUD_KEY", "alibaba_access_key_id", "ltai", r"LTAI(?P<body>[A-Za-z0-9]{12,20})"),
    _fmt("CLOUD_KEY", "tencent_secret_id", "akid", r"AKID(?P<body>[A-Za-z0-9]{32,36})"),
    _fmt("CLOUD_KEY", "digitalocean_token", "dop_v1_ doo_v1_ dor_v1_", r"do[opr]_v1_(?P<body>[a-f0-9]{64})"),
    _fmt("CLOUD_KEY", "heroku_api_key", "hrku-", r"HRKU-(?P<body>[\w-]{40,80})"),
    _fmt("CLOUD_KEY", "flyio_token", "fo1_ fm1 fm2_",
         r"(?:fo1_(?P<body>[\w-]{40,})|(?:FlyV1 )?fm[12][ar]?_[\w+/=-]{50,}(?:,fm[12][ar]?_[\w+/=-]{50,})*)"
         r"(?![\w+/=-])"),
    _fmt("CLOUD_KEY", "vault_token", "hvs. hvb. hvr.", r"hv[sbr]\.(?P<body>[\w.-]{24,})"),
    _near("CLOUD_KEY", "vault_legacy_token", "vault", "vault", r"s\.(?P<body>[A-Za-z0-9]{24})", 120),
    _fmt("CLOUD_KEY", "doppler_token", "dp.",
         r"dp\.(?:pt|st|sa|ct|scim|audit)\.(?:[\w-]{1,40}\.)?(?P<body>[A-Za-z0-9]{40,44})"),
    _fmt("CLOUD_KEY", "databricks_token", "dapi", r"dapi(?P<body>[a-f0-9]{32})(?:-\d)?"),
    _fmt("CLOUD_KEY", "cloudflare_origin_ca_key", "v1.0-",
         r"v1\.0-(?P<body>[a-f0-9]{24}-[a-f0-9]{146})"),
    _fmt("CLOUD_KEY", "terraform_cloud_token", "atlasv1",
         r"[a-z0-9]{14}\.atlasv1\.(?P<body>[\w=-]{60,70})", ignore_case=True),
    _fmt("CLOUD_KEY", "pulumi_token", "pul-", r"pul-(?P<body>[a-f0-9]{40})"),
    _fmt("CLOUD_KEY", "planetscale_token", "pscale_", r"pscale_(?:tkn|oauth|pw)_(?P<body>[\w=.-]{32,64})"),
    _fmt("CLOUD_KEY", "scalingo_token", "tk-us-", r"tk-us-(?P<body>[\w-]{48})"),
    _fmt("CLOUD_KEY", "openshift_token", "sha256~", r"sha256~(?P<body>[\w-]{43})"),
    _fmt("CLOUD_KEY", "yandex_token", "t1. aqvn",
         r"(?:t1\.[\w-]+={0,2}\.(?P<body>[\w-]{86})={0,2}|AQVN[\w-]{35,38})"),
    _fmt("CLOUD_KEY", "tailscale_key", "tskey-", r"tskey-(?:auth|api|client|scim|webhook)-(?P<body>[\w-]{16,})"),
    _fmt("CLOUD_KEY", "scaleway_access_key", "scw", r"SCW(?P<body>[A-Z0-9]{17})"),
    _fmt("CLOUD_KEY", "render_key", "rnd_", r"rnd_(?P<body>[A-Za-z0-9]{32})"),
    _fmt("CLOUD_KEY", "netlify_token", "nfp_", r"nfp_(?P<body>[A-Za-z0-9]{36,40})"),
    _fmt("CLOUD_KEY", "neon_key", "napi_", r"napi_(?P<body>[a-z0-9]{64})"),
    _fmt("CLOUD_KEY", "yandex_static_key", "yc", r"YC(?P<body>[\w-]{38})"),
    _fmt("CLOUD_KEY", "defined_networking_key", "dnkey-", r"dnkey-(?P<body>[\w=-]{26}-[\w=-]{52})"),
    _fmt("CLOUD_KEY", "supabase_token", "sbp_ sb_secret_", r"(?:sbp_|sb_secret_)(?P<body>[\w-]{30,})"),
    _fmt("CLOUD_KEY", "onepassword_token", "ops_eyj a3-",
         r"(?:ops_(?P<body>eyJ[A-Za-z0-9+/]{100,}={0,3})|A3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})"
         r"-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5})(?![\w+/=-])"),
    # ----------------------------------------------------------- code hosts
    _fmt("GITHUB_TOKEN", "github_token", "ghp_ gho_ ghu_ ghs_ ghr_ github_pat_",
         r"(?:gh[pousr]_(?P<body>[A-Za-z0-9]{30,})|github_pat_[A-Za-z0-9_]{40,})"),
    _fmt("GITLAB_TOKEN", "gitlab_token",
         "glpat- gldt- glrt- glptt- glcbt- gloas- glft- glimt- glagent- glsoat- glffct- glwt- gr1348941",
         r"(?:gl(?:pat|dt|rt|ptt|cbt|oas|ft|imt|agent|soat|ffct|wt)-|GR1348941)(?P<body>[\w.-]{20,})"),
    _fmt("GITLAB_TOKEN", "gitlab_session_cookie", "_gitlab_session=",
         r"_gitlab_session=(?P<body>[0-9a-z]{32})", group="body", bounded=False),
    _fmt("ATLASSIAN_TOKEN", "atlassian_token", "atatt atbb atctt atta", r"AT(?:ATT|BB|CTT|TA)(?P<body>[\w=.-]{24,})"),
    _fmt("API_KEY", "sourcegraph_token", "sgp_", r"sgp_(?:[a-f0-9]{16}_|local_)?(?P<body>[a-f0-9]{40})"),
    # -------------------------------------------------------------------- CI
    _fmt("CI_TOKEN", "circleci_token", "ccipat_ cciprj_", r"CCI(?:PAT|PRJ)_(?P<body>[\w]{30,})"),
    _near("CI_TOKEN", "circleci_legacy_token", r"circle(?:ci)?[\w.-]*(?:token|key)", "circle",
          r"[a-f0-9]{40}", 40),
    _fmt("CI_TOKEN", "buildkite_token", "bkua_ bkct_ bkagent_", r"bk(?:ua|ct|agent)_(?P<body>[A-Za-z0-9]{30,})"),
    _near("CI_TOKEN", "travis_token", r"travis[\w.-]*(?:token|key)", "travis", r"[A-Za-z0-9]{22}", 40),
    _fmt("CI_TOKEN", "octopus_deploy_key", "api-", r"API-(?P<body>[A-Z0-9]{26})"),
    _fmt("CI_TOKEN", "harness_token", "pat. sat.",
         r"(?:pat|sat)\.[\w-]{22}\.(?P<body>[A-Za-z0-9]{24}\.[A-Za-z0-9]{20})"),
    _fmt("CI_TOKEN", "sonarqube_token", "squ_ sqp_ sqa_", r"sq[upa]_(?P<body>[a-f0-9]{40})"),
    # ---------------------------------------------------- package registries
    _fmt("PACKAGE_TOKEN", "npm_token", "npm_", r"npm_(?P<body>[A-Za-z0-9]{36,40})"),
    _fmt("PACKAGE_TOKEN", "pypi_token", "pypi-age", r"pypi-AgE(?P<body>[\w-]{50,})"),
    _fmt("PACKAGE_TOKEN", "nuget_key", "oy2", r"oy2(?P<body>[a-z0-9]{43})"),
    _fmt("PACKAGE_TOKEN", "rubygems_token", "rubygems_", r"rubygems_(?P<body>[a-f0-9]{48})"),
    _fmt("PACKAGE_TOKEN", "clojars_token", "clojars_", r"CLOJARS_(?P<body>[A-Za-z0-9]{60})", ignore_case=True),
    _fmt("PACKAGE_TOKEN", "jfrog_token", "akcp cmvmd", r"(?:AKCp(?P<body>[A-Za-z0-9]{64,73})|cmVmd[A-Za-z0-9]{59})"),
    _fmt("PACKAGE_TOKEN", "docker_hub_token", "dckr_pat_ dckr_oat_", r"dckr_(?:pat|oat)_(?P<body>[\w-]{20,})"),
    _fmt("PACKAGE_TOKEN", "readme_token", "rdme_", r"rdme_(?P<body>[a-z0-9]{70})"),
    _near("PACKAGE_TOKEN", "sidekiq_credentials", "contribsys", "contribsys", r"[a-f0-9]{8}:[a-f0-9]{8}", 80),
    _fmt("PACKAGE_TOKEN", "crates_io_token", "cio", r"cio(?P<body>[A-Za-z0-9]{32})"),
    # a docker config.json in base64 (``{"auths":`` / pretty-printed ``{\n  "auths":``)
    _fmt("PACKAGE_TOKEN", "docker_config_base64", "eyjhdxrocyi6 ewogicjhdxrocyi6",
         r"(?:eyJhdXRocyI6|ewogICJhdXRocyI6)(?P<body>[A-Za-z0-9+/]{20,})={0,2}(?![\w+/=-])"),
    # --------------------------------------------------------------- payment
    _fmt("STRIPE_KEY", "stripe_key", "sk_live_ sk_test_ sk_prod_ rk_live_ rk_test_ rk_prod_ whsec_",
         r"(?:[sr]k_(?:live|test|prod)_(?P<body>[A-Za-z0-9]{10,99})|whsec_[A-Za-z0-9+/=]{24,})"),
    _fmt("PAYMENT_KEY", "checkout_key", "sk_sbox_ sk_test_ sk_live_",
         r"sk_(?:sbox|test|live)_(?P<body>[a-z0-9]{26,28}|[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12})"),
    _fmt("PAYMENT_KEY", "square_token", "sq0atp- sq0csp- sq0idp- eaaa",
         r"(?:sq0(?:atp|csp|idp)-(?P<body>[\w-]{22,60})|EAAA[\w-]{60})"),
    _fmt("PAYMENT_KEY", "flutterwave_key", "flwseck flwpubk",
         r"FLW(?:SECK|PUBK)(?:_TEST)?-?(?P<body>[A-Za-z0-9]{12,32})(?:-X)?"),
    _fmt("PAYMENT_KEY", "plaid_access_token", "access-sandbox- access-development- access-production-",
         r"access-(?:sandbox|development|production)-(?P<body>[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12})"),
    _fmt("PAYMENT_KEY", "paypal_braintree_token", "access_token$",
         r"access_token\$(?:production|sandbox)\$[a-z0-9]{16}\$(?P<body>[a-f0-9]{32})"),
    _fmt("PAYMENT_KEY", "razorpay_key", "rzp_live_ rzp_test_", r"rzp_(?:live|test)_(?P<body>[A-Za-z0-9]{14,})"),
    _fmt("PAYMENT_KEY", "gocardless_token", "live_ sandbox_", r"(?:live|sandbox)_(?P<body>[\w=-]{40})"),
    _fmt("PAYMENT_KEY", "mollie_key", "live_ test_", r"(?:live|test)_(?P<body>[A-Za-z0-9]{30})"),
    _fmt("PAYMENT_KEY", "shippo_token", "shippo_", r"shippo_(?:live|test)_(?P<body>[a-fA-F0-9]{40})"),
    _fmt("PAYMENT_KEY", "duffel_token", "duffel_", r"duffel_(?:test|live)_(?P<body>[\w=-]{43})"),
    _fmt("PAYMENT_KEY", "easypost_token", "ezak eztk", r"EZ[AT]K(?P<body>[A-Za-z0-9]{54})"),
    _fmt("API_KEY", "shopify_token", "shpat_ shpca_ shppa_ shpss_", r"shp(?:at|ca|pa|ss)_(?P<body>[a-fA-F0-9]{32})"),
    # ------------------------------------------------------------- messaging
    _fmt("SLACK_TOKEN", "slack_token", "xoxa- xoxb- xoxp- xoxo- xoxs- xoxr- xoxe xapp-",
         r"(?:xox[abposre]|xoxe\.xox[bp]|xapp)-(?P<body>[A-Za-z0-9-]{10,}+)"),
    _fmt("SLACK_TOKEN", "slack_webhook", "hooks.slack.com",
         r"(?:https?://)?hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_+-]+",
         check=None, bounded=False),
    _fmt("MESSAGING_KEY", "twilio_api_key", "sk", r"SK(?P<body>[0-9a-fA-F]{32})"),
    _near("MESSAGING_KEY", "twilio_account_sid", "twilio", "twilio", r"AC(?P<body>[0-9a-fA-F]{32})", 240),
    _fmt("MESSAGING_KEY", "sendgrid_key", "sg.", r"SG\.(?P<body>[\w-]{16,32}\.[\w-]{30,50})"),
    _fmt("MESSAGING_KEY", "mailgun_key", "key- pubkey-", r"(?:pub)?key-(?P<body>[0-9a-f]{32})"),
    _fmt("MESSAGING_KEY", "mailchimp_key", "-us", r"(?P<body>[0-9a-f]{32})-us\d{1,2}"),
    _fmt("MESSAGING_KEY", "sendinblue_key", "xkeysib- xsmtpsib-",
         r"x(?:keysib|smtpsib)-(?P<body>[a-f0-9]{64}-[A-Za-z0-9]{16})"),
    _fmt("MESSAGING_KEY", "mandrill_key", "md-", r"md-(?P<body>[\w-]{22})"),
    _fmt("MESSAGING_KEY", "resend_key", "re_", r"re_[A-Za-z0-9]{8}_(?P<body>[A-Za-z0-9]{24})"),
    ("MESSAGING_KEY", _rule("discord_bot_token",
                            r"(?<![\w-])(?P<head>[MNO][A-Za-z0-9]{22,27})\.[\w-]{6,7}\.[\w-]{27,40}(?![\w-])",
                            check=_check_discord)),
    _fmt("MESSAGING_KEY", "discord_webhook", "discord",
         r"https?://(?:[\w-]+\.)?discord(?:app)?\.com/api/webhooks/\d+/(?P<body>[\w-]{40,})", bounded=False),
    _fmt("MESSAGING_KEY", "telegram_bot_token", ":a",
         r"(?<![\w:-])(?:bot)?(?P<token>\d{5,16}:A(?P<body>[\w-]{34}))" + _E, group="token", bounded=False),
    _fmt("MESSAGING_KEY", "teams_webhook", "webhook.office.com",
         r"https://[\w-]+\.webhook\.office\.com/webhookb2/[\w@-]+/IncomingWebhook/(?P<body>\w{32})/[\w-]+",
         bounded=False),
    _fmt("MESSAGING_KEY", "firebase_fcm_server_key", "apa91b",
         r"AAAA[A-Za-z0-9_-]{7}:APA91b(?P<body>[A-Za-z0-9_-]{100,})"),
    # --------------------------------------------------------- observability
    _near("OBSERVABILITY_KEY", "datadog_key", r"datadog|ddog|dd[_.-](?:api|app|application|client)",
          "datadog ddog dd_api dd_app dd_client dd-api dd-app dd-client dd.api dd.app dd.client",
          r"[a-f0-9]{32}(?:[a-f0-9]{8})?", 200),
    _fmt("OBSERVABILITY_KEY", "new_relic_key", "nrak- nrii- nrjs- nraa- nrra- nral",
         r"(?:NR(?:AK|II|JS|AA|RA)-(?P<body>[\w-]{19,40})|[a-f0-9]{36}NRAL)"),
    _fmt("OBSERVABILITY_KEY", "sentry_dsn", "://",
         r"https?://(?P<dsn>(?P<body>[0-9a-f]{32})(?::[0-9a-f]{32})?)(?=@[\w.-]+(?::\d+)?/\d)",
         group="dsn", bounded=False),
    _fmt("OBSERVABILITY_KEY", "sentry_token", "sntrys_ sntryu_",
         r"(?:sntrys_(?P<body>eyJ[A-Za-z0-9+/=_]{50,})|sntryu_[a-f0-9]{64})"),
    _fmt("OBSERVABILITY_KEY", "grafana_token", "glc_ glsa_ eyjrijoi",
         r"(?:glc_(?P<body>[A-Za-z0-9+/]{32,400}={0,2})|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}"
         r"|eyJrIjoi[A-Za-z0-9]{40,400}={0,2})(?![\w+/=-])"),
    _fmt("OBSERVABILITY_KEY", "dynatrace_token", "dt0",
         r"dt0[a-z]\d{2}\.[A-Z0-9]{24}\.(?P<body>[A-Z0-9]{64})", ignore_case=True),
    _fmt("OBSERVABILITY_KEY", "axiom_token", "xaat- xapt-",
         r"xa[ap]t-(?P<body>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"),
    _fmt("OBSERVABILITY_KEY", "honeycomb_key", "hcaik_ hcxik_ hcamk_ hcxmk_",
         r"hc[ax][im]k_(?P<body>[A-Za-z0-9]{20,})"),
    _fmt("OBSERVABILITY_KEY", "coralogix_key", "cxtp_", r"cxtp_(?P<body>[A-Za-z0-9]{20,})"),
    # ----------------------------------------------------------- AI providers
    _fmt("LLM_API_KEY", "sk_key", "sk-",
         r"sk-(?P<body>[A-Za-z0-9_-]{20,}+)", check=_check_sk),
    _fmt("LLM_API_KEY", "huggingface", "hf_ api_org_", r"(?:hf_|api_org_)(?P<body>[A-Za-z0-9]{30,})"),
    _fmt("LLM_API_KEY", "groq_key", "gsk_", r"gsk_(?P<body>[A-Za-z0-9]{40,60})"),
    _fmt("LLM_API_KEY", "perplexity_key", "pplx-", r"pplx-(?P<body>[A-Za-z0-9]{40,60})"),
    _fmt("LLM_API_KEY", "replicate_key", "r8_", r"r8_(?P<body>[A-Za-z0-9]{30,45})"),
    _fmt("LLM_API_KEY", "xai_key", "xai-", r"xai-(?P<body>[A-Za-z0-9]{50,100})"),
    _fmt("LLM_API_KEY", "together_key", "tgp_v1_", r"tgp_v1_(?P<body>[\w-]{40,})"),
    _fmt("LLM_API_KEY", "fireworks_key", "fw_", r"fw_(?P<body>[A-Za-z0-9]{20,})"),
    _fmt("LLM_API_KEY", "cerebras_key", "csk-", r"csk-(?P<body>[a-z0-9]{40,})"),
    _fmt("LLM_API_KEY", "modal_token", "ak- as-", r"a[ks]-(?P<body>[A-Za-z0-9]{22})"),
    _fmt("LLM_API_KEY", "elevenlabs_key", "sk_", r"sk_(?P<body>[a-f0-9]{48})"),
    _fmt("LLM_API_KEY", "anyscale_key", "esecret_", r"esecret_(?P<body>[A-Za-z0-9]{20,})"),
    _fmt("API_KEY", "tavily_key", "tvly-", r"tvly-(?P<body>[\w-]{30,})"),
    _fmt("API_KEY", "firecrawl_key", "fc-", r"fc-(?P<body>[a-f0-9]{32})"),
    _near("LLM_API_KEY", "cohere_key", r"cohere|co[_-]api[_-]key", "cohere co_api_key co-api-key",
          r"[A-Za-z0-9]{40}", 120),
    _near("LLM_API_KEY", "mistral_key", "mistral", "mistral", r"[A-Za-z0-9]{32}", 120),
    _fmt("API_KEY", "langsmith_key", "lsv2_", r"lsv2_(?:pt|sk)_(?P<body>[a-f0-9]{32})_[a-f0-9]{10}"),
    _fmt("API_KEY", "pinecone_key", "pcsk_", r"pcsk_(?P<body>[\w]{40,})"),
    # ------------------------------------------------------------------ JWT
    _fmt("JWT", "jwt", "eyj",
         r"eyJ[\w-]{8,}\.eyJ[\w-]{8,}\.(?P<body>[\w-]*)(?:\.[\w-]+\.[\w-]+)?", check=None),
    _fmt("JWT", "jwt_base64", "zxlk", r"ZXlK(?P<body>[A-Za-z0-9+/]{60,})={0,2}(?![\w+/=-])"),
    # ------------------------------------------------- other SaaS API tokens
    _fmt("CREDENTIAL", "django_insecure_key", "django-insecure-",
         r"django-insecure-(?P<body>[a-z0-9!@#$%^&*(=+)_-]{40,60})", bounded=False),
    _fmt("API_KEY", "adobe_client_secret", "p8e-", r"p8e-(?P<body>[A-Za-z0-9]{32})"),
    _fmt("API_KEY", "contentful_token", "cfpat-", r"CFPAT-(?P<body>[\w-]{40,50})"),
    _fmt("API_KEY", "figma_token", "figd_", r"figd_(?P<body>[\w-]{40})"),
    _fmt("API_KEY", "hubspot_token", "pat-na pat-eu",
         r"pat-(?:na|eu)\d-(?P<body>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"),
    _fmt("API_KEY", "launchdarkly_key", "api- sdk- mob-",
         r"(?:api|sdk|mob)-(?P<body>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"),
    _fmt("API_KEY", "asana_token", "", r"[12]/\d{10,16}(?:/\d{10,16})?:(?P<body>[0-9a-f]{32})", gate=r"[0-9]"),
    _fmt("API_KEY", "airtable_token", "pat", r"pat(?P<body>[A-Za-z0-9]{14}\.[a-f0-9]{64})"),
    _fmt("API_KEY", "authress_key", "sc_ ext_ scauth_ authress_",
         r"(?:sc|ext|scauth|authress)_[a-z0-9]{5,30}\.[a-z0-9]{4,6}\.acc[_-][a-z0-9-]{10,32}"
         r"\.(?P<body>[a-z0-9+/_=-]{30,120})", ignore_case=True),
    _fmt("API_KEY", "clickhouse_key", "4b1d", r"4b1d(?P<body>[A-Za-z0-9]{38})"),
    _fmt("API_KEY", "facebook_token", "eaa", r"EAA(?P<body>[A-Za-z0-9]{90,})"),
    _fmt("API_KEY", "facebook_app_token", "", r"\d{15,16}(?:\||%7[Cc])(?P<body>[\w-]{27,40})",
         gate=(r"[0-9]", r"\d{15}(?:\||%7[Cc])")),
    _fmt("API_KEY", "frameio_token", "fio-u-", r"fio-u-(?P<body>[\w=-]{64})"),
    _fmt("API_KEY", "infracost_token", "ico-", r"ico-(?P<body>[A-Za-z0-9]{32})"),
    _fmt("API_KEY", "intra42_secret", "s-s4t2", r"s-s4t2(?:ud|af)-(?P<body>[a-f0-9]{64})"),
    _fmt("API_KEY", "linear_key", "lin_api_", r"lin_api_(?P<body>[A-Za-z0-9]{40})"),
    _fmt("API_KEY", "maxmind_key", "_mmk", r"[A-Za-z0-9]{6}_(?P<body>[A-Za-z0-9]{29})_mmk"),
    _fmt("API_KEY", "notion_token", "ntn_ secret_", r"(?:ntn_\d{11}(?P<body>[A-Za-z0-9]{35})|secret_[A-Za-z0-9]{43})"),
    _fmt("API_KEY", "postman_token", "pmak-", r"PMAK-(?P<body>[a-f0-9]{24}-[a-f0-9]{34})", ignore_case=True),
    _fmt("API_KEY", "prefect_token", "pnu_", r"pnu_(?P<body>[A-Za-z0-9]{36})"),
    _fmt("API_KEY", "settlemint_token", "sm_aat_ sm_pat_ sm_sat_", r"sm_(?:aat|pat|sat)_(?P<body>[A-Za-z0-9]{16})"),
    _fmt("API_KEY", "typeform_token", "tfp_", r"tfp_(?P<body>[\w.=-]{59})"),
    _fmt("API_KEY", "mapbox_token", "pk. sk. tk.", r"[pst]k\.(?P<body>eyJ[\w-]{40,}\.[\w-]{20,})"),
    _fmt("API_KEY", "dropbox_token", "sl.", r"sl\.(?P<body>[\w=-]{130,})"),
    _fmt("API_KEY", "twitter_bearer", "aaaaaaaaaaaaaaaaaaaaaa", r"A{22}(?P<body>[A-Za-z0-9%]{60,240})"),
    # ------------------------------------------------------- split tokens
    *_SPLIT_TOKENS,
)

