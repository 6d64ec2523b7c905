"""The redactor's layers (ultron.redaction): provider token formats, keyword-anchored
assignments in every syntax, bare high-entropy tokens and their look-alikes, IBANs and
national ids, placeholders, and the prefilter that decides which rules run.

Every secret below is fabricated (random characters in the provider's published
shape); none is a real credential. Values are assembled from pieces so that the
source file itself holds no token-shaped string."""

from __future__ import annotations

import json

import pytest

from ultron.redaction import Redactor, get_redactor
from ultron.redaction.entropy import looks_random, made_of_words
from ultron.redaction.prefilter import Prefilter

R62 = "Xk2mP9qR4tV7wY1zB3cD5eFg7Hi9Jk1Lm3No5Pq7Rs9Tu1Vw3Xy5Za7Bc9De1Fg3Hi5Jk7Lm9No1Pq3Rs5Tu7Vw9Xy1Za3Bc5De7Fg9"
HEX = "8f3c2a1b9e7d6c5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f"
B64 = "QmVkcm9ja0FQSUtleS1hYmNkZWZnaDEyMzQ1Njc4OTA6"


def r62(n: int) -> str:
    return (R62 * 4)[:n]


def hexs(n: int) -> str:
    return (HEX * 3)[:n]


@pytest.fixture(scope="module")
def redactor() -> Redactor:
    return get_redactor()


def assert_redacted(redactor: Redactor, text: str, secret: str, tag: str) -> str:
    out = redactor.redact(text)
    assert secret not in out, out
    assert tag in out, out
    return out


# ------------------------------------------------------------------ layer 1: formats

# (family, text, the secret, tag)
FORMATS = [
    # cloud
    ("aws_akia", "key AKIA" + "Q3XK7ZP2M5N4R6T8 in use", "AKIAQ3XK7ZP2M5N4R6T8", "<AWS_ACCESS_KEY>"),
    ("aws_acca", "ACCA" + "Q3XK7ZP2M5N4R6T8,", "ACCAQ3XK7ZP2M5N4R6T8", "<AWS_ACCESS_KEY>"),
    ("aws_secret_near_aws", "aws configure set default.region eu-west-1\nsecret " + r62(40)[:20] + "/" + r62(19),
     r62(40)[:20], "<AWS_SECRET_KEY>"),
    ("aws_bedrock", "ABSK" + B64 * 3, B64 * 2, "<AWS_BEDROCK_KEY>"),
    ("gcp_api_key", "key=AIza" + r62(35), "AIza" + r62(35), "<LLM_API_KEY>"),
    ("gcp_service_account", json.dumps({
        "type": "service_account",
        "private_key": "-----BEGIN PRIVATE KEY-----\nMIIEv" + r62(60) + "\n-----END PRIVATE KEY-----\n",
    }), "MIIEv" + r62(60), "<PRIVATE_KEY>"),
    ("azure_sas", "https://acme.blob.core.windows.net/c/f?sv=2022-11-02&sig=" + r62(43) + "%3D&se=2030",
     r62(43), "<AZURE_KEY>"),
    ("azure_ad_secret", "client secret " + "aB38Q~" + r62(34) + " expires", r62(34), "<AZURE_KEY>"),
    ("alibaba", "LTAI" + r62(20), "LTAI" + r62(20), "<CLOUD_KEY>"),
    ("digitalocean_refresh", "dor_v1_" + hexs(64), hexs(64), "<CLOUD_KEY>"),
    ("vault", "VAULT_TOKEN hvs." + r62(90), r62(90), "<CLOUD_KEY>"),
    # code hosts
    ("github_fine_grained", "github_pat_" + r62(22) + "_" + r62(59), r62(59), "<GITHUB_TOKEN>"),
    ("gitlab_deploy", "gldt-" + r62(20), "gldt-" + r62(20), "<GITLAB_TOKEN>"),
    ("gitlab_runner", "glrt-" + r62(20), "glrt-" + r62(20), "<GITLAB_TOKEN>"),
    ("gitlab_routable", "glpat-" + r62(27) + ".01.1" + "ab2cd3ef", r62(27), "<GITLAB_TOKEN>"),
    ("bitbucket", "app password ATBB" + r62(32), r62(32), "<ATLASSIAN_TOKEN>"),
    # CI
    ("circleci", "CCIPAT_" + r62(22) + "_" + hexs(40), hexs(40), "<CI_TOKEN>"),
    ("buildkite", "bkua_" + hexs(40), hexs(40), "<CI_TOKEN>"),
    ("travis_near_name", "travis_token: " + r62(22), r62(22), "<CI_TOKEN>"),
    # package registries
    ("pypi", "password = pypi-AgEIcHlwaS5vcmc" + r62(70), r62(70), "<PACKAGE_TOKEN>"),
    ("nuget", "nuget push -k oy2" + r62(43).lower(), r62(43).lower(), "<PACKAGE_TOKEN>"),
    ("rubygems", "rubygems_" + hexs(48), hexs(48), "<PACKAGE_TOKEN>"),
    # payment
    ("stripe_restricted", "rk_test_" + r62(24), "rk_test_" + r62(24), "<STRIPE_KEY>"),
    ("stripe_webhook", "whsec_" + r62(32), r62(32), "<STRIPE_KEY>"),
    ("square_secret", "sq0csp-" + r62(43), r62(43), "<PAYMENT_KEY>"),
    ("flutterwave", "FLWSECK-" + hexs(32) + "-X", hexs(32), "<PAYMENT_KEY>"),
    ("plaid", "access-sandbox-" + "3f9a7c2e-1b4d-4a6f-8e9c-0b1a2d3e4f5a", "3f9a7c2e-1b4d-4a6f-8e9c-0b1a2d3e4f5a",
     "<PAYMENT_KEY>"),
    # messaging
    ("slack_app", "xapp-1-A" + r62(10).upper() + "-1234567890123-" + hexs(64), hexs(64), "<SLACK_TOKEN>"),
    ("twilio_api_key", "SK" + hexs(32), "SK" + hexs(32), "<MESSAGING_KEY>"),
    ("twilio_sid_near_name", "TWILIO_ACCOUNT_SID=AC" + hexs(32), "AC" + hexs(32), "<MESSAGING_KEY>"),
    ("mailgun", "key-" + hexs(32), hexs(32), "<MESSAGING_KEY>"),
    ("telegram", "https://api.telegram.org/bot1234567890:AA" + r62(33) + "/sendMessage", r62(33),
     "<MESSAGING_KEY>"),
    ("discord_webhook", "https://discord.com/api/webhooks/123456789012345678/" + r62(68), r62(68), "<MESSAGING_KEY>"),
    ("discord_bot", "MTIzNDU2Nzg5MDEyMzQ1Njc4." + r62(6) + "." + r62(38), r62(38), "<MESSAGING_KEY>"),
    # observability
    ("datadog_near_name", "DD_API_KEY=" + hexs(32), hexs(32), "<OBSERVABILITY_KEY>"),
    ("sentry_dsn", "dsn: https://" + hexs(32) + "@o123456.ingest.sentry.io/4505", hexs(32), "<OBSERVABILITY_KEY>"),
    ("sentry_user", "sntryu_" + hexs(64), hexs(64), "<OBSERVABILITY_KEY>"),
    ("grafana_sa", "glsa_" + r62(32) + "_" + hexs(8), r62(32), "<OBSERVABILITY_KEY>"),
    # AI providers
    ("openai_svcacct", "sk-svcacct-" + r62(58) + "T3BlbkFJ" + r62(58), r62(58), "<LLM_API_KEY>"),
    ("anthropic", "sk-ant-api03-" + r62(93) + "AA", r62(93), "<LLM_API_KEY>"),
    ("groq", "gsk_" + r62(52), r62(52), "<LLM_API_KEY>"),
    ("perplexity", "pplx-" + r62(48), r62(48), "<LLM_API_KEY>"),
    ("replicate", "r8_" + r62(37), r62(37), "<LLM_API_KEY>"),
    ("xai", "xai-" + r62(80), r62(80), "<LLM_API_KEY>"),
    ("mistral_near_name", "MISTRAL_API_KEY=" + r62(32), r62(32), "<LLM_API_KEY>"),
    # JWT and private keys
    ("jwt_in_json", json.dumps({"id_token": "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhYmMifQ." + r62(43)}), r62(43), "<JWT>"),
    ("pgp_block", "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF" + r62(60) + "\n-----END PGP PRIVATE KEY BLOCK-----",
     r62(60), "<PRIVATE_KEY>"),
    ("age", "AGE-SECRET-KEY-1" + "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L" * 2, "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L",
     "<PRIVATE_KEY>"),
    ("putty", "PuTTY-User-Key-File-3: ssh-ed25519\nPublic-Lines: 1\nAAAAC3Nz\nPrivate-Lines: 1\n" + B64
     + "\nPrivate-MAC: " + hexs(64), B64, "<PRIVATE_KEY>"),
    ("db_url", "mongodb+srv://app:" + r62(16) + "@cluster0.example.net/db", r62(16), "<REDACTED_CREDENTIAL>"),
]


@pytest.mark.parametrize(("text", "secret", "tag"), [f[1:] for f in FORMATS], ids=[f[0] for f in FORMATS])
def test_provider_formats(redactor: Redactor, text: str, secret: str, tag: str) -> None:
    assert_redacted(redactor, text, secret, tag)


@pytest.mark.parametrize(("text", "secret", "tag"), [f[1:] for f in FORMATS], ids=[f[0] for f in FORMATS])
def test_provider_formats_json_encoded(redactor: Redactor, text: str, secret: str, tag: str) -> None:
    """Inside a transcript line (JSON-encoded, after an escaped newline) too."""
    encoded = json.dumps({"content": "log:\n" + text})
    out = redactor.redact(encoded)
    assert json.dumps(secret)[1:-1] not in out and tag in out, out
    assert json.loads(out)["content"] == redactor.redact("log:\n" + text)


@pytest.mark.parametrize(
    "text",
    [
        "glpat-xxxxxxxxxxxxxxxxxxxx",  # documentation mask
        "SLACK_BOT_TOKEN=xoxb-your-token",
        "STRIPE_SECRET_KEY=sk_test_...",
        "GITHUB_TOKEN=ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        "the task-manager-service-identifier-v2 and sk-some-very-long-kebab-case-slug",
        "AKIA is the prefix of AWS access key ids",
        "MTIzNDU2Nzg5MGFiY2RlZmdo.abcdef.ghijklmnopqrstuvwxyzabcdefghijkl",  # not a numeric id in base64
        "see 5HueCGU8rMjxEXxiPuD5BDku4MkFqeZyd4dZ1jvhTVqvbTLvyTK",  # base58 with a wrong checksum
    ],
)
def test_format_look_alikes_unchanged(redactor: Redactor, text: str) -> None:
    assert redactor.redact(text) == text


# ---------------------------------------------------------- layer 2: assignments

SECRET = "Zr8" + r62(17)  # 20 generated characters
SYNTAXES = [
    ("dotenv", f"DB_PASSWORD={SECRET}"),
    ("export", f'export SERVICE_TOKEN="{SECRET}"'),
    ("json", json.dumps({"clientSecret": SECRET, "region": "eu"})),
    ("yaml", f"database:\n  password: {SECRET}\n  pool: 5"),
    ("yaml_block", f"private_key: |\n  {SECRET}\n"),
    ("toml", f'[service]\napi_key = "{SECRET}"'),
    ("xml_attribute", f'<connection user="app" password="{SECRET}"/>'),
    ("nuget_cleartext", f'<add key="ClearTextPassword" value="{SECRET}" />'),
    ("xml_element", f"<apiToken>{SECRET}</apiToken>"),
    ("xml_element_multiline", f"<fooToken>\n    {SECRET}\n</fooToken>"),
    ("php_array", f"'secret_key' => '{SECRET}',"),
    ("go_short", f'authToken := "{SECRET}"'),
    ("go_typed", f'var accessToken string = "{SECRET}"'),
    ("python_typed", f'password: str = "{SECRET}"'),
    ("makefile", f"DEPLOY_TOKEN ::= {SECRET}"),
    ("makefile_conditional", f'DEPLOY_TOKEN ?= "{SECRET}"'),
    ("php_concat", f'$apiToken .= "{SECRET}";'),
    ("python_kwarg", f'Client(api_key="{SECRET}", timeout=3)'),
    ("call_pair", f'System.setProperty("SERVICE_TOKEN", "{SECRET}")'),
    ("name_value_yaml", f"env:\n  - name: UPLOAD_TOKEN\n    value: \"{SECRET}\""),
    ("name_value_json", json.dumps([{"name": "API_SECRET", "value": SECRET}])),
    ("cli_password", f"mongodump --password {SECRET} --db app"),
    ("cli_token_eq", f"gh-deploy --token={SECRET}"),
    ("mysql_short", f"mysql -u root -p{SECRET} app"),
    ("sshpass", f"sshpass -p '{SECRET}' ssh deploy@host"),
    ("redis_cli", f"redis-cli -h cache -a {SECRET} ping"),
    ("docker_login", f"docker login -u ci -p {SECRET} registry.example.com"),
    ("curl_u", f"curl -u admin:{SECRET} https://example.com/api"),
    ("user_flag", f"httpie-cli --user admin:{SECRET} https://example.com"),
    ("openssl_pass", f"openssl enc -aes-256-cbc -pass pass:{SECRET} -in a -out b"),
    ("authorization", f"Authorization: Bearer {SECRET}"),
    ("cookie", f"Cookie: sessionid={SECRET}; theme=dark"),
    ("set_cookie", f"Set-Cookie: sid={SECRET}; Path=/; HttpOnly"),
    ("x_service_key", f"X-Datadog-Key: {SECRET}"),
    ("x_service_auth", f"x-acme-auth: {SECRET}"),
    ("sql", f"CREATE USER app IDENTIFIED BY '{SECRET}';"),
    ("netrc", f"machine api.example.com login ci password {SECRET}"),
    ("pgpass", f"printf 'reporting-db:5432:events:maint:{SECRET}\\n' > ~/.pgpass"),
    ("pgpass_any", f"*:*:*:replicator:{SECRET}"),
    ("k8s_secret", f"apiVersion: v1\nkind: Secret\ndata:\n  tls.key: {SECRET}=="),
    ("prose", f"The password is {SECRET}, keep it safe."),
    ("prose_no_verb", f"login with password {SECRET} failed"),
    ("short_key_name", f"HUAWEICLOUD_SDK_SK={SECRET}"),
    ("pat_name", f"AZURE_DEVOPS_PAT={SECRET}"),
    ("bearer_name", f"twitter:\n  bearer: {SECRET}"),
]


@pytest.mark.parametrize("text", [s[1] for s in SYNTAXES], ids=[s[0] for s in SYNTAXES])
def test_assignment_syntaxes(redactor: Redactor, text: str) -> None:
    out = redactor.redact(text)
    assert SECRET not in out, out
    assert "<REDACTED_CREDENTIAL>" in out or "<REDACTED_TOKEN>" in out, out


def test_a_piece_of_a_found_secret_is_redacted_wherever_it_recurs(redactor: Redactor) -> None:
    """A search for the first half of a password leaks that half: it goes too."""
    text = (f"PGPASSWORD={SECRET} psql -h db -c 'select 1'\n"
            f"git log -S '{SECRET[:10]}' --all --oneline | wc -l")
    out = redactor.redact(text)
    assert SECRET[:10] not in out, out
    assert "git log -S '<REDACTED_CREDENTIAL>' --all" in out, out


def test_assignment_keeps_names_and_structure(redactor: Redactor) -> None:
    assert redactor.redact(f"'secret_key' => '{SECRET}',") == "'secret_key' => '<REDACTED_CREDENTIAL>',"
    assert redactor.redact(f'<add key="ClearTextPassword" value="{SECRET}" />') == (
        '<add key="ClearTextPassword" value="<REDACTED_CREDENTIAL>" />'
    )
    assert redactor.redact(f"curl -u admin:{SECRET} https://x.example") == (
        "curl -u admin:<REDACTED_CREDENTIAL> https://x.example"
    )
    assert redactor.redact(f"Set-Cookie: sid={SECRET}; Path=/; HttpOnly") == (
        "Set-Cookie: sid=<REDACTED_CREDENTIAL>; Path=/; HttpOnly"
    )
    # a provider token keeps its own tag whatever the name it is assigned to
    assert redactor.redact("NPM_TOKEN=npm_" + r62(36)) == "NPM_TOKEN=<PACKAGE_TOKEN>"


@pytest.mark.parametrize(
    "text",
    [
        "PuttyPassword=0",
        "token_count=12",
        "max_tokens: 4096",
        "password_min_length=8",
        "RememberPassword=true",
        'cache_key = "user:42:profile"',
        "sort_key: created_at",
        "primary_key=True",
        "key = lambda item: item[0]",
        '{"key": "welcome_message_title", "value": "Welcome"}',
        "public_key: AAAAC3NzaC1lZDI1NTE5AAAAIOkzR6vN1yY3fJ7cM2pL8tQ0sW4xB6nD9hK1",
        "docker run --user 1000:1000 image",
        "arn:aws:secretsmanager:us-east-1:123456789012:secret:prod/db-AbCdEf",
        "DISK=abcdefghijk2mnopqrst4vwxyz234567abcdefghijk2mnopqrst",
        "use the --password-file flag",
        "The token is expired; the secret is out.",
        "reset the password v2.1.0 and the secret rotation 2024; if token is Name.Other: pass",
        "password: !vault |",
    ],
)
def test_assignment_non_secrets_unchanged(redactor: Redactor, text: str) -> None:
    assert redactor.redact(text) == text


@pytest.mark.parametrize(
    "value",
    ["xxxx", "<your-key>", "${API_KEY}", "$TOKEN", "{{ secrets.TOKEN }}", "changeme", "CHANGE_ME", "REPLACE_ME",
     "your-api-key-here", "your_token", "placeholder", "REDACTED", "****", "sk_test_...", "%(password)s"],
)
@pytest.mark.parametrize("template", ["API_KEY={}", 'password: "{}"', '{{"client_secret": "{}"}}', "<token>{}</token>"])
def test_placeholders_untouched(redactor: Redactor, template: str, value: str) -> None:
    text = template.format(value)
    assert redactor.redact(text) == text


# ---------------------------------------------------------- layer 3: bare tokens


@pytest.mark.parametrize(
    "text",
    [
        f"Using API key {SECRET}Q9 for the upload",
        f"[2024-05-17 12:00:01] DEBUG authenticating with {SECRET}Q9",
        f"{SECRET}Q9 is the new token",
        f"the secret {B64[:24]}xY9 was rotated",
        "auth token Y2k6aHVudGVyMg== rejected",  # base64 of user:password
        f"api key: {hexs(32)}",
    ],
)
def test_bare_tokens_near_credential_words(redactor: Redactor, text: str) -> None:
    out = redactor.redact(text)
    assert "<REDACTED_CREDENTIAL>" in out, out


@pytest.mark.parametrize(
    "text",
    [
        f"api token rotated in commit {hexs(7)} ({hexs(40)})",
        f"token refresh fixed; sha256: {hexs(64)}",
        f"the key file digest is sha256:{hexs(64)}",
        f"key fingerprint SHA256:nThbg6kXUpJWGl7E1IGOCspRomTxdCARLviKw6E5SY8 (ED25519)",
        f"docker pull ghcr.io/acme/auth-service@sha256:{hexs(64)}",
        f"md5 checksum of secrets.yaml: {hexs(32)}",
        "token-utils upgraded to 1.2.3-beta.4+build.20240517 and auth-lib v2.10.0",
        "Using model gpt-4o-mini-2024-07-18 with the API key from the environment",
        "loaded keys from /opt/services/authentication/credentials_loader.py",
        "the auth header was SGVsbG8gd29ybGQsIHRoaXMgaXMgYSB0ZXN0IG1lc3NhZ2Uu in the log",  # base64 of text
        "getUserProfileSettingsForAccount validates the token",
        "api request req_011CPzYk8X4GtZbqr5W3sFuR failed with an auth error",
        '"type": "api_error", "id": "msg_01XFDUDYJgAACzvnptvVoYEL"',
        "Add this public key: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOkzR6vN1yY3fJ7cM2pL8tQ0sW4xB6nD9hK1 me@host",
        '"integrity": "sha512-' + B64 * 2 + '==" token package',
        "session 123e4567-e89b-12d3-a456-426614174000 token",  # the UUID keeps its own tag
    ],
)
def test_bare_token_look_alikes(redactor: Redactor, text: str) -> None:
    out = redactor.redact(text)
    assert "<REDACTED_CREDENTIAL>" not in out, out


def test_randomness_judgement() -> None:
    assert looks_random("Zk3mQ9pL2xR7vT4nW8yB1cD6")
    assert looks_random(hexs(40))
    assert not looks_random("getUserProfileSettingsForAccount")
    assert not looks_random("test_redaction_formats_module")
    assert not looks_random("1.2.3-beta.4+build.20240517")
    assert not looks_random("SGVsbG8gd29ybGQsIHRoaXMgaXMgYSB0ZXN0IG1lc3NhZ2Uu")  # base64 of prose
    assert not looks_random("aaaaaaaaaaaaaaaaaaaa1")
    assert made_of_words("src/services/authentication/loader.py")
    assert not made_of_words("Xk2mP9qR4tV7wY1zB3cD5eFg")


# -------------------------------------------------------------------- PII: IBAN etc.


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("IBAN DE89 3704 0044 0532 0130 00, BIC COBADEFFXXX", True),
        ("pay GB82WEST12345698765432 now", True),
        ("FR1420041010050500013M02606", True),
        ("pay GB82WEST12345698765431 now", False),  # wrong check digits
        ("DE89 3704 0044 0532 0130 01", False),
        ("ZZ89370400440532013000", False),  # no such country
        ("DE8937040044053201300", False),  # Germany's length is 22
    ],
)
def test_iban_checksum(redactor: Redactor, text: str, redacted: bool) -> None:
    out = redactor.redact(text)
    assert ("<IBAN>" in out) is redacted, out


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("SSN 123-45-6789", True),
        ("social security number: 123456789", True),
        ("SSN 000-12-3456", False),  # never issued
        ("SSN 666-12-3456", False),
        ("NINO AB 12 34 56 C", True),
        ("NINO QQ123456C", False),  # Q is never a first letter
        ("身份证 11010519491231002X", True),
        ("身份证 110105194912310021", False),  # wrong check character
    ],
)
def test_national_ids(redactor: Redactor, text: str, redacted: bool) -> None:
    out = redactor.redact(text)
    assert ("<NATIONAL_ID>" in out) is redacted, out


# ------------------------------------------------------------------- prefilter


def test_prefilter_selects_only_rules_whose_literals_occur() -> None:
    items = [(("glpat-",), "gitlab"), (("key", "token"), "credential"), (None, "always"), (("apikey",), "apikey")]
    prefilter = Prefilter(items)
    assert prefilter.select("hello world")[0] == ["always"]
    assert prefilter.select("GLPAT-abc")[0] == ["gitlab", "always"]
    # overlapping literals are all seen: "apikey" contains "key"
    assert prefilter.select("X-APIKEY: 1")[0] == ["credential", "always", "apikey"]
    assert "key" in prefilter.select("monkey")[1]


def test_plain_prose_runs_few_rules(redactor: Redactor) -> None:
    rules, _ = redactor._prefilter.select("Thanks, that worked. Now can you write me a docker compose file?")
    total = len(redactor._prefilter._items)
    assert len(rules) < total / 4, [r.name for _, r in rules]


def test_every_trigger_of_every_rule_selects_it(redactor: Redactor) -> None:
    """Soundness: a text holding any trigger of a rule (in any case, glued to other
    text) selects that rule."""
    for entity, rule in redactor._prefilter._items:
        for trigger in rule.triggers or ():
            text = "xx" + trigger.upper() + "yy"
            selected, _ = redactor._prefilter.select(text)
            assert (entity, rule) in selected, (rule.name, trigger)


def test_report_names_the_layer(redactor: Redactor) -> None:
    text = f"DB_PASSWORD={SECRET} and glpat-{r62(20)} and Using API key {SECRET}Q9 now"
    out, findings = redactor.redact_with_report(text)
    assert {f["entity"] for f in findings} == {"CREDENTIAL", "GITLAB_TOKEN", "ENTROPY_SECRET"}
    assert SECRET not in json.dumps(findings)
    assert redactor.redact(out) == out  # idempotent


# ------------------------------------------------------- whole tool outputs

TOOL_OUTPUTS = [
    # (command output, secrets that must go, text that must stay)
    ("origin\thttps://x-access-token:ghs_" + r62(36) + "@github.com/acme/app.git (fetch)",
     ["ghs_" + r62(36)], ["@github.com/acme/app.git (fetch)"]),
    ("[default]\naws_access_key_id = AKIA" + "Q3XK7ZP2M5N4R6T8\naws_secret_access_key = " + r62(40)
     + "\naws_session_token = IQoJb3JpZ2luX2Vj" + B64 * 2,
     ["Q3XK7ZP2M5N4R6T8", r62(40), B64], ["aws_session_token = "]),
    ("apiVersion: v1\ndata:\n  password: UzNjcjN0UGFzc3dvcmQh\n  username: YXBw\nkind: Secret\nmetadata:\n  name: db",
     ["UzNjcjN0UGFzc3dvcmQh", "YXBw"], ["name: db"]),
    ("DATABASE_URL:     postgres://u8ab:" + r62(14) + "@ec2.example.com:5432/d1\nSECRET_KEY_BASE:  " + hexs(64),
     [r62(14), hexs(64)], ["@ec2.example.com:5432/d1"]),
    (json.dumps({"Credentials": {"AccessKeyId": "ASIA" + "Q3XK7ZP2M5N4R6T8", "SecretAccessKey": r62(40),
                                 "SessionToken": "FwoGZXIvYXdz" + r62(80), "Expiration": "2030-05-17T12:00:00Z"}}),
     ["Q3XK7ZP2M5N4R6T8", r62(40), r62(80)], ["2030-05-17T12:00:00Z"]),
    ("Key                    Value\n---                    -----\ntoken                  hvs." + r62(90),
     [r62(90)], ["Key                    Value"]),
    ("401 Client Error for url: https://api.example.com/v2/items?access_token=" + r62(24) + "&page=2",
     [r62(24)], ["&page=2"]),
]


@pytest.mark.parametrize(("text", "secrets", "kept"), TOOL_OUTPUTS, ids=lambda v: str(v)[:20])
def test_tool_outputs(redactor: Redactor, text: str, secrets: list[str], kept: list[str]) -> None:
    out = redactor.redact(text)
    for secret in secrets:
        assert secret not in out, out
    for piece in kept:
        assert piece in out, out


def test_masked_and_generated_look_alikes_in_tool_output(redactor: Redactor) -> None:
    text = (
        "github.com\n  - Logged in as octocat\n  - Token: gho_************************************\n"
        "The key fingerprint is:\nSHA256:nThbg6kXUpJWGl7E1IGOCspRomTxdCARLviKw6E5SY8 dev@laptop"
    )
    assert redactor.redact(text) == text
