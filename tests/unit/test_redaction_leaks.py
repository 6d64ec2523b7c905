"""The last leak shapes (ultron.redaction): a credential named in prose next to a
token-shaped value, ``curl -u name:password`` in every quoting, and the prefix-less
pieces of a provider token split across lines or strings; with the look-alikes that
must stay as they are.

Every value is generated here from the provider's published shape (prefix, alphabet,
length) by a seeded generator, so the file itself holds no token-shaped string and no
scanner's fixture."""

from __future__ import annotations

import json
import random
import string

import pytest

from ultron.redaction import Redactor, get_redactor
from ultron.redaction.entropy import prose_token

UP, LO, DG = string.ascii_uppercase, string.ascii_lowercase, string.digits
A62 = UP + LO + DG
B64U = A62 + "-_"
_rng = random.Random(20240501)


def rs(alphabet: str, n: int) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


# provider shapes
HF = "hf_" + rs(UP + LO, 34)
HF_ORG = "api_org_" + rs(UP + LO, 34)
GHP = "ghp_" + rs(A62, 36)
GH_FINE = "github_pat_" + rs(A62, 22) + "_" + rs(A62, 59)
OPENAI_PROJECT = "sk-proj-" + rs(B64U, 74) + "T3Blbk" + "FJ" + rs(B64U, 74)
OPENAI_USER = "sk-" + rs(A62, 20) + "T3Blbk" + "FJ" + rs(A62, 20)
ANTHROPIC = "sk-ant-api03-" + rs(B64U, 93) + "AA"
SLACK_BOT = "xoxb-" + rs(DG, 11) + "-" + rs(DG, 12) + "-" + rs(A62, 24)
NPM = "npm_" + rs(A62, 36)
GLPAT = "glpat-" + rs(B64U, 20)
GOOGLE = "AIza" + "Sy" + rs(B64U, 33)
SHA1 = rs("0123456789abcdef", 40)
SHA256 = rs("0123456789abcdef", 64)


@pytest.fixture(scope="module")
def redactor() -> Redactor:
    return get_redactor()


def gone(redactor: Redactor, text: str, *secrets: str) -> str:
    out = redactor.redact(text)
    for secret in secrets:
        assert secret not in out, out
        for i in range(len(secret) - 11):  # no 12-character piece of it either
            assert secret[i : i + 12] not in out, (secret[i : i + 12], out)
    return out


# ---------------------------------------------------------- 1. named in prose

HF_ODD = "hf_" + rs(UP + LO, 24)           # a Hugging Face token at a length the format rule does not take
HF_MIXED = "hf_" + rs(A62, 17)             # short, digits in the body
SHORT_KEY = rs(A62, 17)                    # no prefix at all, under the bare-token rule's 20
DOTTED = rs(A62, 8) + "." + rs(A62, 8) + "-" + rs(A62, 9)
URLSAFE = rs(B64U, 31)
B64 = rs(A62 + "+/", 27) + "="

PROSE = [
    ("hf_log", f"2024-05-01 12:00:01 INFO using huggingface credential {HF_ODD}", HF_ODD),
    ("hf_hub", f"[hub] using huggingface credential {HF_MIXED} for the download", HF_MIXED),
    ("saved_in_parens", f"Your token ({HF_ODD}) has been saved to the credential store.", HF_ODD),
    ("api_key_is", f"DEBUG openai api key is {SHORT_KEY}", SHORT_KEY),
    ("token_for_provider", f"auth token for stripe: {URLSAFE}", URLSAFE),
    ("dotted_chunks", f"Loaded Slack token {DOTTED} from the local cache", DOTTED),
    ("base64_body", f"rotating aws access key {B64} after the incident", B64),
    ("quoted", f"> logged in to github with token '{SHORT_KEY}'", SHORT_KEY),
    ("bearer_words", f"error: gitlab rejected bearer {URLSAFE} (401)", URLSAFE),
    ("secret_sentence", f"The Sentry secret {DOTTED}. Rotate it.", DOTTED),
    ("provider_key", f"heroku key {SHORT_KEY} expires tomorrow", SHORT_KEY),
    ("json_message", json.dumps({"message": f"using credential {SHORT_KEY}\nnext line"}), SHORT_KEY),
]


@pytest.mark.parametrize("text,secret", [p[1:] for p in PROSE], ids=[p[0] for p in PROSE])
def test_credential_named_in_prose(redactor: Redactor, text: str, secret: str) -> None:
    out = gone(redactor, text, secret)
    assert "<" in out


def test_prose_keeps_the_words_around_the_value(redactor: Redactor) -> None:
    assert redactor.redact(f"[hub] using huggingface credential {HF_MIXED} for the download") == (
        "[hub] using huggingface credential <REDACTED_CREDENTIAL> for the download"
    )
    assert redactor.redact(f"Your token ({HF_ODD}) has been saved.") == (
        "Your token (<REDACTED_CREDENTIAL>) has been saved."
    )


PROSE_LOOKALIKES = [
    "the token endpoint returned 200 in 35 ms",
    "password reset link sent to the user",
    f"commit {SHA1} rotates the api key",
    f"token refresh, see commit {SHA1}",
    f"credential rotation landed in {SHA1[:12]}",
    f"token sha256:{SHA256}",
    f"secret digest {SHA256}",
    "secret stored at /var/lib/app/secrets/production/db-credentials.json",
    "the secret lives in secrets/prod/DatabaseCredentials.yaml",
    "secret /run/secrets/kubernetes.io/serviceaccount/token mounted",
    "api key model gpt-4o-mini-2024-07-18",
    "token limit for claude-3-5-sonnet-20241022 is 200000",
    "the api key version v2.14.3-rc.1+build.20240501",
    "access token expires at 2024-05-01T12:00:00Z",
    "token usage: prompt_tokens=1234 completion_tokens=87",
    "auth token counted for msg_01" + rs(A62, 12),  # an API object id
    "the api key goes in the X-Api-Key header",
    "token endpoint https://oauth2.googleapis.com/token returned 200",
    "secret colour #3fa9c2 on the settings page",
    "secret scanning found 3 alerts in src/auth/TokenStore.ts",
    "gpg: key 3AA5C34371567BD2: public key imported",
    "public key AAAAC3NzaC1lZDI1NTE5AAAAI" + rs(A62, 40),
    "token: ${{ secrets.GITHUB_TOKEN }}",
    "the primary key is orders_customer_id_created_at_idx",
    "tokenizer loaded from bert-base-multilingual-uncased",
    "password_reset_token_expiry_minutes = 30",
    "the secret name is payments-prod-database-credentials",
    "credential helper osxkeychain stored it",
    "token image: data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk",
]


@pytest.mark.parametrize("text", PROSE_LOOKALIKES)
def test_prose_lookalikes_unchanged(redactor: Redactor, text: str) -> None:
    assert redactor.redact(text) == text


def test_uuid_after_a_credential_word_keeps_its_policy(redactor: Redactor) -> None:
    assert redactor.redact("credential id 123e4567-e89b-12d3-a456-426614174000") == "credential id <UUID>"


@pytest.mark.parametrize(
    "value,direct,expected",
    [
        (SHORT_KEY, False, True),
        (DOTTED, False, True),
        (B64, False, True),
        ("getUserProfileSettings", False, False),     # made of words
        ("src/auth/TokenStore.ts", False, False),     # a path
        ("gpt-4o-mini-2024-07-18", True, False),      # a model name: no random chunk
        ("1.2.3-rc.4+build.56789", True, False),      # a version
        (SHA1, True, True),                           # hex right after the noun ("api key <hex>")
        (SHA1, False, False),                         # hex a few words later: a digest
        ("3AA5C34371567BD2", True, False),            # a 16-hex key id
        ("123e4567-e89b-12d3-a456-426614174000", True, False),
        ("msg_01" + rs(A62, 22), True, False),        # an API object id
        ("abcdefghijklmnopqrstuvwx", True, False),    # one character class
    ],
)
def test_prose_token_shape(value: str, direct: bool, expected: bool) -> None:
    assert prose_token(value, direct) is expected


# ------------------------------------------------------------------ 2. curl -u

PW_SYMBOLS = "Tr0ub4" + "dor&3!x"
PW_SPACE = "p@ss " + "W0rd!"
PW_HASH = "S3cr#t" + "-Pa55"

CURL = [
    ("unquoted_ampersand", f"curl -u deploy:{PW_SYMBOLS} https://api.example.com/v1", PW_SYMBOLS),
    ("long_flag_password_quoted", f"curl --user admin:'{PW_SPACE}' https://x.example.com", PW_SPACE),
    ("double_quoted_pair", f'curl -u "svc:{PW_HASH}" https://x.example.com', PW_HASH),
    ("single_quoted_pair", f"curl -u 'admin:{PW_SPACE}' https://x.example.com", PW_SPACE),
    ("password_double_quoted", f'curl -u admin:"{PW_SPACE}" https://x.example.com', PW_SPACE),
    ("clustered_flags", f"curl -fsSLu deploy:{PW_HASH} https://x.example.com", PW_HASH),
    ("glued", f"curl -udeploy:{PW_HASH} https://x.example.com", PW_HASH),
    ("long_flag_equals", f"curl --user=deploy:{PW_HASH} https://x.example.com", PW_HASH),
    ("proxy_user", f"curl -U proxy:{PW_HASH} -x http://proxy:3128 https://x.example.com", PW_HASH),
    ("query_with_ampersand_first", f"curl 'https://x.example.com/?a=1&b=2' -u deploy:{PW_HASH}", PW_HASH),
    ("continued_lines", f"curl -X POST \\\n  -H 'Accept: */*' \\\n  -u deploy:{PW_SYMBOLS} \\\n  https://x.example.com",
     PW_SYMBOLS),
    ("json_tool_call", json.dumps({"command": f'curl -s -u "svc:{PW_SPACE}" https://x.example.com'}), PW_SPACE),
    ("json_continued", json.dumps({"command": f"curl -X POST \\\n  -u deploy:{PW_HASH} https://x.example.com"}),
     PW_HASH),
    ("argv_list", f'subprocess.run(["curl", "-u", "deploy:{PW_SPACE}", url])', PW_SPACE),
    ("httpie_a", f"http -a admin:'{PW_SPACE}' https://x.example.com/me", PW_SPACE),
    ("httpie_auth", f"http --auth admin:{PW_HASH} https://x.example.com/me", PW_HASH),
    ("wget_password", f"wget --user=bob --password='{PW_SPACE}' https://x.example.com/f", PW_SPACE),
    ("wget_http_password", f"wget --http-user=bob --http-password={PW_HASH} https://x.example.com/f", PW_HASH),
    ("api_token_as_password", f"curl -u api:{SHORT_KEY} https://x.example.com", SHORT_KEY),
]


@pytest.mark.parametrize("text,secret", [c[1:] for c in CURL], ids=[c[0] for c in CURL])
def test_curl_user_password(redactor: Redactor, text: str, secret: str) -> None:
    out = gone(redactor, text, secret)
    assert "<REDACTED_CREDENTIAL>" in out, out


@pytest.mark.parametrize(
    "text,expected",
    [
        (f"curl -u deploy:{PW_SYMBOLS} https://x.example", "curl -u deploy:<REDACTED_CREDENTIAL> https://x.example"),
        (f"curl --user admin:'{PW_SPACE}' https://x", "curl --user admin:'<REDACTED_CREDENTIAL>' https://x"),
        (f'curl -u "svc:{PW_HASH}" https://x', 'curl -u "svc:<REDACTED_CREDENTIAL>" https://x'),
        (json.dumps({"c": f'curl -u "svc:{PW_SPACE}" x'}), json.dumps({"c": 'curl -u "svc:<REDACTED_CREDENTIAL>" x'})),
    ],
)
def test_curl_keeps_the_user_name_and_the_quotes(redactor: Redactor, text: str, expected: str) -> None:
    out = redactor.redact(text)
    assert out == expected
    if text.startswith("{"):
        json.loads(out)  # escaped JSON stays valid


CURL_LOOKALIKES = [
    "curl -u deploy https://x.example.com/v1",               # curl asks for the password
    "curl -u admin: https://x.example.com/v1",               # an empty password
    'curl -u "$API_USER:$API_PASSWORD" https://x.example.com',
    "curl --user ${REGISTRY_USER}:${REGISTRY_TOKEN} https://x.example.com",
    'subprocess.run(["curl", "-u", f"{user}:{password}", url])',
    "git push -u origin feature/login",
    "sort -u users.txt | uniq -c",
    "ls -a /srv/app:/srv/lib",
    "docker run --user 1000:1000 acme/api:1.2.3",
    "docker exec --user app:app web sh",
    "podman run --user root:root alpine",
    "wget --ask-password https://x.example.com/file.tar.gz",
    "python -u train.py --resume ckpt:latest",
]


@pytest.mark.parametrize("text", CURL_LOOKALIKES)
def test_curl_lookalikes_unchanged(redactor: Redactor, text: str) -> None:
    assert redactor.redact(text) == text


# ----------------------------------------------------------- 3. split tokens


def halves(token: str, at: int) -> tuple[str, str]:
    return token[:at], token[at:]


SPLIT = [
    ("hf_org_wrapped_line", HF_ORG, 20, "HUGGINGFACE_API_TOKEN={a}\n{b}\nLOG_LEVEL=info"),
    ("hf_log_wrap_then_text", HF, 18, "2024-05-01 DEBUG token={a}\n{b} loaded from cache"),
    ("hf_python_implicit_concat", HF, 21, 'HF_TOKEN = (\n    "{a}"\n    "{b}"\n)'),
    ("github_js_plus", GHP, 16, "const t = '{a}' +\n  '{b}';"),
    ("github_fine_grained_json_chunks", GH_FINE, 40, None),
    ("openai_project_escaped_json_wrap", OPENAI_PROJECT, 70, None),
    ("openai_user_key_adjacent_literals", OPENAI_USER, 22, '#define OPENAI_KEY "{a}" "{b}"'),
    ("anthropic_shell_continuation", ANTHROPIC, 50, 'export ANTHROPIC_API_KEY="{a}\\\n{b}"'),
    ("slack_php_dot", SLACK_BOT, 20, "$token = '{a}' .\n    '{b}';"),
    ("npm_sql_concat", NPM, 12, "UPDATE cfg SET v = '{a}' || '{b}';"),
    ("gitlab_wrapped", GLPAT, 14, "token: {a}\n{b}"),
    ("google_wrapped_indented", GOOGLE, 20, "  key = {a}\n        {b}"),
]


def _split_text(token: str, at: int, template: str | None, name: str) -> tuple[str, tuple[str, ...]]:
    a, b = halves(token, at)
    if name == "github_fine_grained_json_chunks":
        return json.dumps({"parts": [a, b]}, indent=2), (a, b)
    if name == "openai_project_escaped_json_wrap":
        return json.dumps({"type": "tool_result", "content": f"export OPENAI_API_KEY={a}\n{b}\nDEBUG=0\n"}), (a, b)
    assert template is not None
    return template.format(a=a, b=b), (a, b)


@pytest.mark.parametrize("token,at,template,name", [(s[1], s[2], s[3], s[0]) for s in SPLIT],
                         ids=[s[0] for s in SPLIT])
def test_split_token_pieces_are_all_redacted(redactor: Redactor, token: str, at: int, template: str | None,
                                             name: str) -> None:
    text, pieces = _split_text(token, at, template, name)
    out = gone(redactor, text, *pieces)
    if text.startswith("{"):
        json.loads(out)


def test_split_token_in_three_pieces(redactor: Redactor) -> None:
    a, b, c = OPENAI_PROJECT[:60], OPENAI_PROJECT[60:130], OPENAI_PROJECT[130:]
    out = gone(redactor, f"OPENAI_API_KEY={a}\n{b}\n{c}\nNEXT=1", a, b, c)
    assert out == "OPENAI_API_KEY=<LLM_API_KEY>\n<LLM_API_KEY>\n<LLM_API_KEY>\nNEXT=1"


def test_split_token_keeps_its_provider_tag_and_layout(redactor: Redactor) -> None:
    a, b = halves(HF_ORG, 20)
    assert redactor.redact(f'HF = ("{a}"\n      "{b}")') == 'HF = ("<LLM_API_KEY>"\n      "<LLM_API_KEY>")'
    a, b = halves(GHP, 16)
    assert redactor.redact(f"t = '{a}' + '{b}'") == "t = '<GITHUB_TOKEN>' + '<GITHUB_TOKEN>'"


NEXT_LINE = rs(A62, 14)
OVERSHOOT = rs(A62, 30)


@pytest.mark.parametrize(
    "text,expected",
    [
        # a whole token, then a line that merely follows it: the token goes, the next line stays
        (f"GITHUB_TOKEN={GHP}\n{NEXT_LINE}", f"GITHUB_TOKEN=<GITHUB_TOKEN>\n{NEXT_LINE}"),
        (f"HF_TOKEN={HF}\n{SHA1}", f"HF_TOKEN=<LLM_API_KEY>\n{SHA1}"),
        (f'["{GHP}", "{NEXT_LINE}"]', f'["<GITHUB_TOKEN>", "{NEXT_LINE}"]'),
    ],
)
def test_a_line_after_a_whole_token_stays(redactor: Redactor, text: str, expected: str) -> None:
    assert redactor.redact(text) == expected


@pytest.mark.parametrize(
    "text,keep",
    [
        (f"x = '{GHP[:20]}' + '{OVERSHOOT}'", OVERSHOOT),  # joined, longer than a GitHub token
        (f"TOKEN={HF[:20]}\nNODE_ENV=production", "NODE_ENV=production"),  # the next line is a name
        ("HF_TOKEN=hf_xxxxxxxxxxxx\nxxxxxxxxxxxxxxxxxxxxxx", "xxxxxxxxxxxxxxxxxxxxxx"),  # documentation
        (f"OPENAI_API_KEY={OPENAI_USER[:30]}\n{rs(A62, 10)}", None),  # the marker off the middle
    ],
)
def test_what_does_not_complete_a_token_stays(redactor: Redactor, text: str, keep: str | None) -> None:
    out = redactor.redact(text)
    assert (keep or text.split("\n")[1]) in out, out


def test_split_and_prose_and_curl_are_idempotent(redactor: Redactor) -> None:
    a, b = halves(HF_ORG, 20)
    for text in (f"HF={a}\n{b}", f"using huggingface credential {HF_ODD}", f"curl -u 'u:{PW_SPACE}' x"):
        once = redactor.redact(text)
        assert redactor.redact(once) == once


def test_the_corpus_shows_the_three_shapes_and_all_are_caught(redactor: Redactor) -> None:
    """benchmarks/redaction.py --corpus-only scores these shapes; here they must all go."""
    from ultron.testing.secret_corpus import generate
    from ultron.testing.secret_corpus.model import SHAPE_CONTEXTS

    corpus = generate(seed=3, samples_per_format=3)
    cases = [c for c in corpus.secrets if c.context in SHAPE_CONTEXTS]
    assert {c.context for c in cases} == set(SHAPE_CONTEXTS)
    for case in cases:
        out = redactor.redact(case.text)
        assert not any(piece in out for piece in case.secrets), (case.format, case.context, out)
    lookalikes = [c for c in corpus.non_secrets if c.category == "credential_words"]
    assert lookalikes
    for case in lookalikes:
        assert redactor.redact(case.text) == case.text


@pytest.mark.parametrize(
    "text",
    [
        f"md5sum anthropic-4.3.9.tar.gz: {SHA1[:32]}",  # a provider's name in a file name, then its digest
        f"sha256sum openai-1.2.0.whl: {SHA256}",
        "secret logo data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk",
    ],
)
def test_digests_and_inline_files_near_names_unchanged(redactor: Redactor, text: str) -> None:
    assert redactor.redact(text) == text
