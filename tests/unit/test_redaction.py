"""Offline redactor (ultron.redaction): every kind of secret/PII, the negatives,
overlaps, idempotence, reports and the optional spaCy model path.

All secrets below are fabricated; none is a real credential."""

from __future__ import annotations

import json
import logging
import os
import uuid

import pytest

from ultron.redaction import TAGS, Redactor, get_redactor

# Fabricated values, built once so each test can plant them.
SK_PROJ = "sk-proj-" + "Ab3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5bC7dE9fG1hJ3"
SK_PLAIN = "sk-" + "9f8e7d6c5b4a39281706f5e4d3c2b1a0"  # DashScope-style 32 hex
SK_ANT = "sk-ant-api03-" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe9Dc8Ba7_-Q1"
GHP = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
GHO = "gho_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
GH_PAT = "github_pat_" + "11ABCDEFG0" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8s9T0u1V2w3X4y5Z6a7B8c9D0"
AKIA = "AKIA" + "IOSFODNN7EXAMPLE"
ASIA = "ASIA" + "Y34FZKBOKMUTVV7A"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NSJ9.dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
BASIC = "dXNlcjpwYXNzd29yZDEyMw=="
XOXB = "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
XOXP = "xoxp-" + "123456789012-123456789012-123456789012-0123456789abcdef0123456789abcdef"
SLACK_HOOK = "https://hooks.slack.com/services/" + "T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM2Y0Cx5ZL3G0NnFkQ+eOjvCPxw\n"
    "H7u1p9M0kq0v8HuR3bC2F1Ix5xGzC8LkF2A1w3bQW6QnV0v5Y4pJkZ/8mA==\n"
    "-----END RSA PRIVATE KEY-----"
)
OPENSSH = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    "-----END OPENSSH PRIVATE KEY-----"
)


@pytest.fixture(scope="module")
def redactor() -> Redactor:
    return get_redactor()


# (id, text, planted secret, expected tag, text that must survive)
POSITIVE = [
    # LLM API keys
    ("openai_proj", f"Set OPENAI_KEY to {SK_PROJ} before running the agent.", SK_PROJ, "<LLM_API_KEY>", "before running"),
    ("openai_plain", f"The DashScope key {SK_PLAIN} expired yesterday.", SK_PLAIN, "<LLM_API_KEY>", "expired"),
    ("anthropic", f"client = Anthropic(api_key='{SK_ANT}')", SK_ANT, "<LLM_API_KEY>", "Anthropic(api_key="),
    ("llm_key_in_env", f"OPENAI_API_KEY={SK_PROJ}", SK_PROJ, "<LLM_API_KEY>", "OPENAI_API_KEY="),
    # GitHub
    ("github_ghp", f"git clone https://{GHP}@github.com/acme/repo.git", GHP, "<GITHUB_TOKEN>", "github.com/acme"),
    ("github_gho", f"The OAuth token {GHO} was revoked.", GHO, "<GITHUB_TOKEN>", "was revoked"),
    ("github_pat", f"use {GH_PAT} for the API", GH_PAT, "<GITHUB_TOKEN>", "for the API"),
    # AWS
    ("aws_akia", f"aws_access_key_id = {AKIA}", AKIA, "<AWS_ACCESS_KEY>", "aws_access_key_id = "),
    ("aws_asia", f"Temporary credentials: {ASIA} (session)", ASIA, "<AWS_ACCESS_KEY>", "(session)"),
    ("aws_secret_ini", f"[default]\naws_secret_access_key = {AWS_SECRET}\n", AWS_SECRET, "<AWS_SECRET_KEY>",
     "aws_secret_access_key = "),
    ("aws_secret_json", f'{{"AccessKeyId": "{ASIA}", "SecretAccessKey": "{AWS_SECRET}"}}', AWS_SECRET,
     "<AWS_SECRET_KEY>", '"SecretAccessKey": "'),
    ("aws_secret_env", f"export AWS_SECRET_ACCESS_KEY={AWS_SECRET}", AWS_SECRET, "<AWS_SECRET_KEY>",
     "export AWS_SECRET_ACCESS_KEY="),
    ("aws_secret_prose", f"the secret key is {AWS_SECRET} so keep it safe", AWS_SECRET, "<AWS_SECRET_KEY>",
     "the secret key is "),
    # Authorization headers and bearer tokens
    ("bearer_header", f"curl -H 'Authorization: Bearer {JWT}' https://api.example.com/v1",
     JWT, "<REDACTED_TOKEN>", "Authorization: Bearer "),
    ("basic_header", f"Authorization: Basic {BASIC}\nAccept: */*", BASIC, "<REDACTED_TOKEN>", "Authorization: Basic "),
    ("bearer_bare", f"I sent Bearer {JWT} and got 401.", JWT, "<REDACTED_TOKEN>", "Bearer "),
    ("bearer_json_header", '{"headers": {"Authorization": "Bearer abc123def456ghi789"}}',
     "abc123def456ghi789", "<REDACTED_TOKEN>", '"Authorization": "Bearer '),
    ("token_scheme", "Authorization: token 0123456789abcdef0123456789abcdef01234567",
     "0123456789abcdef0123456789abcdef01234567", "<REDACTED_TOKEN>", "Authorization: token "),
    # generic credential fields
    ("password_eq", "login failed with password=hunter2 for user bob", "hunter2", "<REDACTED_CREDENTIAL>", "password="),
    ("passwd_colon", "passwd: Tr0ub4dor&3", "Tr0ub4dor&3", "<REDACTED_CREDENTIAL>", "passwd: "),
    ("token_eq", "GET /callback?token=f00dbabe1234&state=xyz", "f00dbabe1234", "<REDACTED_CREDENTIAL>", "&state=xyz"),
    ("secret_eq", "secret=correcthorsebatterystaple", "correcthorsebatterystaple", "<REDACTED_CREDENTIAL>", "secret="),
    ("api_key_yaml", 'llm:\n  api_key: "abcd-1234-efgh-5678"\n', "abcd-1234-efgh-5678", "<REDACTED_CREDENTIAL>",
     'api_key: "'),
    ("apikey_eq", "https://maps.example.com/geo?apikey=Zm9vYmFyYmF6cXV4&q=paris", "Zm9vYmFyYmF6cXV4",
     "<REDACTED_CREDENTIAL>", "&q=paris"),
    ("access_token_json", '{"access_token": "ya29.a0AfH6SMBx-example-token", "expires_in": 3599}',
     "ya29.a0AfH6SMBx-example-token", "<REDACTED_CREDENTIAL>", '"expires_in": 3599'),
    ("client_secret", "client_secret: 'GOCSPX-abcdefGHIJKL123456'", "GOCSPX-abcdefGHIJKL123456",
     "<REDACTED_CREDENTIAL>", "client_secret: '"),
    ("env_token", "SLACK_BOT_TOKEN=plainvalue123 ./run.sh", "plainvalue123", "<REDACTED_CREDENTIAL>",
     "SLACK_BOT_TOKEN="),
    ("db_password_env", "DB_PASSWORD='p@ss w0rd!'", "p@ss w0rd!", "<REDACTED_CREDENTIAL>", "DB_PASSWORD='"),
    ("camel_case", 'const config = { dbPassword: "s3cr3t-value" };', "s3cr3t-value", "<REDACTED_CREDENTIAL>",
     "dbPassword: "),
    ("yaml_letters_only", "database:\n  user: app\n  password: mysecretpass\n", "mysecretpass",
     "<REDACTED_CREDENTIAL>", "password: "),
    ("http_header_key", "X-Api-Key: 9b1cf2a7d3e4", "9b1cf2a7d3e4", "<REDACTED_CREDENTIAL>", "X-Api-Key: "),
    ("cli_flag", "mysql --user root --password Sup3rSecret! db", "Sup3rSecret!", "<REDACTED_CREDENTIAL>",
     "--password "),
    ("python_literal", 'password = "hunter2"', "hunter2", "<REDACTED_CREDENTIAL>", 'password = "'),
    # passwords in connection URLs
    ("url_postgres", "DATABASE_URL=postgresql://ultron:Sup3rS3cret@db.internal:5432/ultron",
     "Sup3rS3cret", "<REDACTED_CREDENTIAL>", "postgresql://ultron:"),
    ("url_redis_no_user", "redis://:r3dis-pass@cache:6379/0", "r3dis-pass", "<REDACTED_CREDENTIAL>", "@cache:6379"),
    ("url_at_in_password", "amqp://guest:p@ssw0rd@rabbit.local/vhost", "p@ssw0rd", "<REDACTED_CREDENTIAL>",
     "@rabbit.local/vhost"),
    # private keys
    ("pem_rsa", f"Here is the key:\n{PEM}\nDo not share.", "MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM2Y0Cx5ZL3G0NnFkQ",
     "<PRIVATE_KEY>", "Do not share."),
    ("pem_openssh", f"cat ~/.ssh/id_ed25519\n{OPENSSH}\n", "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ", "<PRIVATE_KEY>",
     "cat ~/.ssh/id_ed25519"),
    ("pem_truncated", "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n[output truncated]",
     "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", "<PRIVATE_KEY>", "[output truncated]"),
    # Slack
    ("slack_xoxb", f"bot token {XOXB} in .env", XOXB, "<SLACK_TOKEN>", "in .env"),
    ("slack_xoxp", f"user token: {XOXP}", XOXP, "<SLACK_TOKEN>", "user token"),
    ("slack_webhook", f"curl -X POST {SLACK_HOOK} -d '{{}}'", SLACK_HOOK, "<SLACK_TOKEN>", "curl -X POST"),
    # e-mail
    ("email", "Please contact alice.smith+agents@example.co.uk about the report.",
     "alice.smith+agents@example.co.uk", "<EMAIL_ADDRESS>", "about the report"),
    # phone numbers
    ("phone_intl_uk", "Call me on +44 20 7946 0958 tomorrow.", "+44 20 7946 0958", "<PHONE_NUMBER>", "tomorrow"),
    ("phone_intl_us", "Office: +1 (415) 555-0132.", "+1 (415) 555-0132", "<PHONE_NUMBER>", "Office"),
    ("phone_us_paren", "My number is (555) 123-4567, call after 5pm.", "(555) 123-4567", "<PHONE_NUMBER>", "after 5pm"),
    ("phone_us_dash", "Text 555-123-4567 when you land.", "555-123-4567", "<PHONE_NUMBER>", "when you land"),
    ("phone_cn", "我的手机号是13812345678，请联系。", "13812345678", "<PHONE_NUMBER>", "请联系"),
    ("phone_cn_plus86", "Contact: +86 139 1234 5678", "139 1234 5678", "<PHONE_NUMBER>", "Contact"),
    ("phone_cn_86_dash", "tel 86-150-1234-5678 ok", "150-1234-5678", "<PHONE_NUMBER>", " ok"),
    # credit cards
    ("card_visa_spaces", "Charge card 4111 1111 1111 1111 exp 12/27", "4111 1111 1111 1111", "<CREDIT_CARD>", "exp 12/27"),
    ("card_mc_dashes", "mastercard 5555-5555-5555-4444 on file", "5555-5555-5555-4444", "<CREDIT_CARD>", "on file"),
    ("card_amex_plain", "amex 378282246310005.", "378282246310005", "<CREDIT_CARD>", "amex"),
    # IP addresses
    ("ipv4", "ssh deploy@10.20.30.40 -p 2222", "10.20.30.40", "<IP_ADDRESS>", "-p 2222"),
    ("ipv4_port", "listening on 192.168.1.23:8080", "192.168.1.23", "<IP_ADDRESS>", ":8080"),
    ("ipv6_full", "client 2001:0db8:85a3:0000:0000:8a2e:0370:7334 connected", "2001:0db8:85a3:0000:0000:8a2e:0370:7334",
     "<IP_ADDRESS>", "connected"),
    ("ipv6_compressed", "peer fe80::1ff:fe23:4567:890a dropped", "fe80::1ff:fe23:4567:890a", "<IP_ADDRESS>", "dropped"),
    # UUID
    ("uuid", "session 123e4567-e89b-12d3-a456-426614174000 closed", "123e4567-e89b-12d3-a456-426614174000", "<UUID>",
     "closed"),
    # user paths
    ("path_linux", "Traceback: File \"/home/alice/projects/ultron/app.py\", line 3", "alice", "<USER>",
     "/home/<USER>/projects/ultron/app.py"),
    ("path_macos", "open /Users/bob.jones/Library/Logs/x.log", "bob.jones", "<USER>", "/Users/<USER>/Library/Logs/x.log"),
    ("path_windows", r"C:\Users\carol\AppData\Local\Temp\out.txt", "carol", "<USER>",
     r"C:\Users\<USER>\AppData\Local\Temp\out.txt"),
    ("path_windows_json", r'{"cwd": "C:\\Users\\dave\\repo"}', "dave", "<USER>", r"C:\\Users\\<USER>\\repo"),
    ("path_tilde", "ls ~erin/notes", "erin", "<USER>", "~<USER>/notes"),
    # provider token formats (ultron.redaction.formats): one per tag
    ("gitlab_pat", "git remote set-url origin https://oauth2:glpat-" + "Xk2mP9qR4tV7wY1zB3cD@gitlab.com/a/b.git",
     "glpat-Xk2mP9qR4tV7wY1zB3cD", "<GITLAB_TOKEN>", "@gitlab.com/a/b.git"),
    ("atlassian_token", "JIRA_TOKEN=ATATT3" + "xFfGF0T4nB8kQ2mZ7vW9yL1pR5sD3hJ6cE8gA0uN2", "ATATT3xFfGF0T4nB8kQ2mZ7vW9",
     "<ATLASSIAN_TOKEN>", "JIRA_TOKEN="),
    ("aws_bedrock", "bedrock key ABSK" + "QmVkcm9ja0FQSUtleS1hYmNkZWZnaDEyMzQ1Njc4OTA6" * 3 + " set", "ABSKQmVkcm9ja0FQSUtleS1h",
     "<AWS_BEDROCK_KEY>", " set"),
    ("azure_account_key", "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=" + "Zm9vYmFy" * 11 + "==;"
     "EndpointSuffix=core.windows.net", "Zm9vYmFyZm9vYmFy", "<AZURE_KEY>", "EndpointSuffix=core.windows.net"),
    ("digitalocean", "doctl auth init -t dop_v1_" + "8f3c2a1b9e7d6c5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f",
     "dop_v1_8f3c2a1b9e7d6c5f", "<CLOUD_KEY>", "doctl auth init"),
    ("buildkite", "buildkite-agent token bkua_" + "3f9a7c2e1b4d5a6f8e9c0b1a2d3e4f5a6b7c8d9e", "bkua_3f9a7c2e1b4d",
     "<CI_TOKEN>", "buildkite-agent token "),
    ("npm_token", "//registry.npmjs.org/:_authToken=npm_" + "Ab3De5Fg7Hi9Jk1Lm3No5Pq7Rs9Tu1Vw3Xy5Z",
     "npm_Ab3De5Fg7Hi9Jk1Lm3No5", "<PACKAGE_TOKEN>", "//registry.npmjs.org/:_authToken="),
    ("stripe_live", "stripe.api_key = 'sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc'", "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
     "<STRIPE_KEY>", "stripe.api_key = '"),
    ("square_token", "SQUARE token sq0atp-" + "Xk2mP9qR4tV7wY1zB3cD5e in the log", "sq0atp-Xk2mP9qR4tV7wY1zB3cD5e",
     "<PAYMENT_KEY>", "in the log"),
    ("sendgrid_key", "SG." + "Xk2mP9qR4tV7wY1zB3cD5e.Fg7Hi9Jk1Lm3No5Pq7Rs9Tu1Vw3Xy5Za7Bc9De1Fg3Hi5J was rotated",
     "SG.Xk2mP9qR4tV7wY1zB3cD5e", "<MESSAGING_KEY>", "was rotated"),
    ("new_relic", "NEW_RELIC_API_KEY=NRAK-" + "7GH2KQ9XW4ZP1MB3CV6NT8YL5RD", "NRAK-7GH2KQ9XW4ZP1MB3CV6NT8YL5RD",
     "<OBSERVABILITY_KEY>", "NEW_RELIC_API_KEY="),
    ("linear_key", "linear api: lin_api_" + "Xk2mP9qR4tV7wY1zB3cD5eFg7Hi9Jk1Lm3No5Pq7", "lin_api_Xk2mP9qR4tV7wY1z",
     "<API_KEY>", "linear api: "),
    ("jwt_bare", f"got {JWT} from the login endpoint", JWT, "<JWT>", "from the login endpoint"),
    ("iban", "Wire it to DE89 3704 0044 0532 0130 00 today.", "DE89 3704 0044 0532 0130 00", "<IBAN>", "today."),
    ("us_ssn", "Applicant SSN 123-45-6789 on file.", "123-45-6789", "<NATIONAL_ID>", "on file."),
]


@pytest.mark.parametrize(("text", "planted", "tag", "keep"), [p[1:] for p in POSITIVE], ids=[p[0] for p in POSITIVE])
def test_positive(redactor: Redactor, text: str, planted: str, tag: str, keep: str) -> None:
    out = redactor.redact(text)
    assert planted not in out, out
    assert tag in out, out
    assert keep in out, out


@pytest.mark.parametrize("depth", [1, 2])
@pytest.mark.parametrize(("text", "planted", "tag"), [p[1:4] for p in POSITIVE], ids=[p[0] for p in POSITIVE])
def test_positive_json_encoded(redactor: Redactor, text: str, planted: str, tag: str, depth: int) -> None:
    """Transcripts are JSON lines and tool-call arguments are JSON inside JSON
    (json.dumps escapes CJK as \\uXXXX): same result as on the plain text, and the
    escapes survive."""
    encoded, needle = "注意：\n" + text, planted
    for _ in range(depth):
        encoded, needle = json.dumps({"content": encoded}), json.dumps(needle)[1:-1]
    out = redactor.redact(encoded)
    assert needle not in out and tag in out, out
    for _ in range(depth):
        out = json.loads(out)["content"]
    assert out == redactor.redact("注意：\n" + text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"密钥{SK_PROJ}不要泄露", "密钥<LLM_API_KEY>不要泄露"),
        ("电话13812345678或邮箱alice@example.com", "电话<PHONE_NUMBER>或邮箱<EMAIL_ADDRESS>"),
        ("服务器10.0.0.8上的密码=hunter2", "服务器<IP_ADDRESS>上的密码=<REDACTED_CREDENTIAL>"),
        ("数据库密码是Passw0rd!，请保管", "数据库密码是<REDACTED_CREDENTIAL>，请保管"),
        ("密钥：“abc123xyz”", "密钥：“<REDACTED_CREDENTIAL>”"),
        ("请输入密码后继续", "请输入密码后继续"),
        ("修改密码: click here", "修改密码: click here"),
        ("密码是mysecretpass，请保管", "密码是<REDACTED_CREDENTIAL>，请保管"),
    ],
)
def test_cjk_text_glued_to_tokens(redactor: Redactor, text: str, expected: str) -> None:
    assert redactor.redact(text) == expected


def test_every_tag_is_covered() -> None:
    covered = {p[3] for p in POSITIVE}
    spacy_only = {TAGS["PERSON"], TAGS["LOCATION"]}
    assert set(TAGS.values()) - spacy_only <= covered


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ssh admin@10.0.0.5", "ssh admin@<IP_ADDRESS>"),
        ("Authorization: Bearer abc.def-123", "Authorization: Bearer <REDACTED_TOKEN>"),
        ("postgres://u:pw1@h/db", "postgres://u:<REDACTED_CREDENTIAL>@h/db"),
        ("/home/alice/x", "/home/<USER>/x"),
        (r"C:\Users\John Smith\Desktop", r"C:\Users\<USER>\Desktop"),
        ('{"password": "hunter2"}', '{"password": "<REDACTED_CREDENTIAL>"}'),
        ("password=hunter2.", "password=<REDACTED_CREDENTIAL>."),
        (f"api_key={SK_PROJ}", "api_key=<LLM_API_KEY>"),  # the more specific kind wins a tie
        (f'secret="{SK_PROJ} and more"', 'secret="<REDACTED_CREDENTIAL>"'),  # the longer span wins
        ("passwd: Tr0ub4dor&3", "passwd: <REDACTED_CREDENTIAL>"),  # & only ends a query parameter
        ("mysql --password Sup3rSecret! db", "mysql --password <REDACTED_CREDENTIAL> db"),
        ("password=hunter2-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----",
         "password=<REDACTED_CREDENTIAL><PRIVATE_KEY>"),  # a partial overlap keeps what sticks out
        ("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\n[truncated]", "<PRIVATE_KEY>\n[truncated]"),
        ("::ffff:10.0.0.1", "::ffff:<IP_ADDRESS>"),
        ("/home/bob.", "/home/<USER>."),
    ],
)
def test_exact_replacements(redactor: Redactor, text: str, expected: str) -> None:
    assert redactor.redact(text) == expected


# ----------------------------------------------------------- Chinese mobiles


@pytest.mark.parametrize(
    "text",
    [
        "手机13812345678",
        "call 138-1234-5678 now",
        "call 138 1234 5678 now",
        "+8613812345678",
        "8613912345678",
        "0086 15012345678",
        "联系人：张三，电话：19912345678。",
        "(13712345678)",
    ],
)
def test_cn_mobile_detected(redactor: Redactor, text: str) -> None:
    out = redactor.redact(text)
    assert "<PHONE_NUMBER>" in out
    assert not any(ch.isdigit() for ch in out.replace("<PHONE_NUMBER>", "")), out


@pytest.mark.parametrize(
    "text",
    [
        "order id 13812345678901",  # 14 digits: a longer number, not a phone
        "timestamp 1381234567890",  # 13-digit millisecond timestamp
        "ref 913812345678",  # a digit before
        "id ORD13812345678",  # glued to letters
        "build 13812345678_x",  # glued to an identifier
        "value 0.13812345678",  # a decimal fraction
        "12812345678",  # second digit not 3-9
        "1381234567",  # 10 digits
        "epoch 1712345678",  # 10-digit unix timestamp
    ],
)
def test_cn_mobile_boundaries(redactor: Redactor, text: str) -> None:
    assert redactor.redact(text) == text


# ------------------------------------------------------------------ Luhn


@pytest.mark.parametrize(
    "text",
    [
        "card 4111111111111112 declined",  # 16 digits, bad checksum
        "card 4111 1111 1111 1112 declined",
        "order 2024011512345678 shipped",  # not an issuer prefix
        "tracking 9400111899223344556677",  # too long / no issuer
        "0000 0000 0000 0000",
    ],
)
def test_luhn_and_issuer_validation(redactor: Redactor, text: str) -> None:
    assert redactor.redact(text) == text


def test_valid_luhn_is_redacted(redactor: Redactor) -> None:
    assert redactor.redact("card 4111111111111111 ok") == "card <CREDIT_CARD> ok"
    # bare numbers must be 15/16 digits; grouped ones may be 13-19 in groups of four
    assert redactor.redact("4222222222222") == "4222222222222"
    assert redactor.redact("visa 4222 2222 2222 2 ok") == "visa <CREDIT_CARD> ok"


# -------------------------------------------------------------- negatives

NEGATIVES = [
    "Upgraded Python from 3.11.7 to 3.12.1 and dagster to 1.13.27.",
    "Released v2.4.0 on 2024-05-17; see CHANGELOG for 1.2.3.",
    "The job started at 2024-05-17T10:30:00Z and ended at 2024-05-17 11:45:12.345+08:00.",
    "Fixed in commit a1b2c3d (merged from 9f8e7d6c5b4a39281706f5e4d3c2b1a0f9e8d7c6).",
    "The token expired, so reset your password and try again.",
    "Reset your password: click the link below.",
    "We need a token: the old one was revoked.",
    "password = get_password()",
    "token = os.environ[\"GITHUB_TOKEN\"]",
    "api_key = settings.llm_api_key",
    "client = OpenAI(api_key=api_key, base_url=base_url)",
    "def login(username: str, password: str) -> bool:",
    "if not password:\n    raise ValueError('password required')",
    "secret = None",
    "token = ''",
    'password: "${DB_PASSWORD}"',
    "export GITHUB_TOKEN=$(gh auth token)",
    "Authorization: Bearer $TOKEN",
    "Authorization: Bearer {token}",
    "password=<your-password>",
    "password=****",
    "max_tokens=1024, temperature=0.2, token_count: 512",
    "usage: prompt_tokens=812 completion_tokens=96 total_tokens=908",
    "The price is $1,299.99 (was $1,499.00), or ¥8999.",
    "Flight UA100 departs at 10:45; reservation ABC123 confirmed.",
    "Order #20240517001 and invoice 4412-77 are in the queue.",
    "Unix time 1715941800 is in seconds.",
    "Bearer authentication is described in RFC 6750.",
    "Listening on 127.0.0.1:8000 and 0.0.0.0:3000 (localhost only).",
    "IPv6 loopback is ::1 and x[::2] is a slice.",
    "std::vector<int> v; a::b::c();",
    "meeting from 09:30:00 to 10:15:00",
    "MAC 00:1a:2b:3c:4d:5e on eth0",
    "Version 10.0.19045.3803 of Windows.",
    "Run `pytest -q` in /tmp/work/ and /var/log/app.log; $HOME is /root.",
    "/home/$USER/.config and C:\\Users\\Public\\Documents",
    "git@github.com:acme/ultron.git",
    "npm install left-pad@1.3.0",
    "See https://example.com/docs?page=2#section-3",
    "It costs 42 tokens per 1000 characters, roughly 3.5 tokens/word.",
    "sk-learn is not a key and task-list-item-identifier-long is a slug",
    "The secret key to success is patience.",
    "Gradient 1e-4 and ratio 3:2 with score 0.87.",
    "width: 100px; height: 50%;",
    "<LLM_API_KEY> and <REDACTED_CREDENTIAL> and /home/<USER>/x",
    # code that names credentials without holding one
    '"tiktoken": "tiktoken>=0.12"',
    "last_non_pad_token = -1",
    "username, password = credentials",
    "valid_credentials = await valid_credentials",
    "const password = new Password(input)",
    "self.eofToken = t",
    "    start_token: Token\n    end_token: Token",
    "whitespace_per_token: float,",
    "        token: id:\n            the id",
    'out.append({"token": chunk, "score": s})',
    "f(token=token, password=password)",
    'connectors.append("PWD=%s" % pwd)',
    "PWD=/home/ and OLDPWD=~",
    '{"token": "Hello", "logprob": -0.31}, {"token": " world", "logprob": -1.2}',
    "authorization = request.headers[\"Authorization\"]",
    'headers = {"Authorization": "Bearer " + token}',
    "use the --token flag or --password-file",
    # numbers that are not cards, phones or addresses
    "np.random.default_rng(628174795866951638); seed = 3562050283508273023",
    "fact(n) = 4031078400000",
    "55 24 35 4 49 51 44 70 93 78 25 65 1 29 96 12 93 94 13 65 4 47 84 10 90 12 36 48 21 36",
    "np.array(['+1980-02-29 01:02:03'])",
    "update V8 to 10.8.168.25 and Git 1.7.12.1; see section 7.2.1.1",
    "netmask 255.255.255.0 / ffff:ffff:ffff:ffff::",
    "pip install foo==1.2.3.4",
    # documentation placeholders in paths
    "cd /home/user/project && ls ~username/bin and /Users/me/x",
]


@pytest.mark.parametrize("text", NEGATIVES)
def test_negatives_unchanged(redactor: Redactor, text: str) -> None:
    assert redactor.redact(text) == text


def test_private_ip_ranges_are_redacted_but_loopback_is_not(redactor: Redactor) -> None:
    out = redactor.redact("db at 10.1.2.3, cache at 127.0.0.1, bind 0.0.0.0, dns 8.8.8.8")
    assert out == "db at <IP_ADDRESS>, cache at 127.0.0.1, bind 0.0.0.0, dns <IP_ADDRESS>"


# ----------------------------------------------------- multi-secret, idempotence

MULTI = (
    f"Hi, I'm alice@example.com (phone +1 415 555 0132). My OpenAI key is {SK_PROJ} and the\n"
    f"GitHub token {GHP}. Server 203.0.113.7, db postgres://app:Pa55word@db.example.com/app,\n"
    f"card 4111 1111 1111 1111, run 123e4567-e89b-12d3-a456-426614174000 in /home/alice/proj.\n"
    f"{PEM}\n"
    f"Authorization: Bearer {JWT}\n"
    f"password=hunter2 aws {AKIA} slack {XOXB}"
)


def test_multi_secret_text(redactor: Redactor) -> None:
    out, findings = redactor.redact_with_report(MULTI)
    for secret in ("alice@example.com", "415 555 0132", SK_PROJ, GHP, "203.0.113.7", "Pa55word",
                   "4111 1111 1111 1111", "123e4567", "/home/alice", "MIIEpAIBAAK", JWT, "hunter2",
                   AKIA, XOXB):
        assert secret not in out, secret
    entities = {f["entity"] for f in findings}
    assert entities >= {
        "EMAIL_ADDRESS", "PHONE_NUMBER", "LLM_API_KEY", "GITHUB_TOKEN", "IP_ADDRESS", "URL_CREDENTIAL",
        "CREDIT_CARD", "UUID", "USER_PATH", "PRIVATE_KEY", "AUTH_TOKEN", "CREDENTIAL", "AWS_ACCESS_KEY",
        "SLACK_TOKEN",
    }
    assert "db.example.com/app" in out and "Authorization: Bearer <REDACTED_TOKEN>" in out


@pytest.mark.parametrize("text", [p[1] for p in POSITIVE] + [MULTI] + NEGATIVES, ids=lambda t: t[:30])
def test_idempotent(redactor: Redactor, text: str) -> None:
    once = redactor.redact(text)
    assert redactor.redact(once) == once


def test_tags_are_never_redacted(redactor: Redactor) -> None:
    tags = " ".join(sorted(set(TAGS.values())))
    text = f"{tags} password=<REDACTED_CREDENTIAL> Bearer <REDACTED_TOKEN> /home/<USER>/x"
    assert redactor.redact(text) == text


# --------------------------------------------------------------- reports


def test_report_never_contains_the_secret(redactor: Redactor) -> None:
    out, findings = redactor.redact_with_report(MULTI)
    assert findings
    blob = json.dumps(findings)
    for f in findings:
        assert set(f) == {"entity", "start", "end", "tag"}
        assert f["tag"] in out
        assert MULTI[f["start"]:f["end"]] not in blob
    for secret in (SK_PROJ, GHP, "hunter2", "Pa55word", "alice@example.com", JWT):
        assert secret not in blob


def test_report_offsets_point_into_the_input(redactor: Redactor) -> None:
    text = "a password=hunter2 b alice@example.com c"
    out, findings = redactor.redact_with_report(text)
    assert [(f["entity"], text[f["start"]:f["end"]]) for f in findings] == [
        ("CREDENTIAL", "hunter2"),
        ("EMAIL_ADDRESS", "alice@example.com"),
    ]
    assert out == "a password=<REDACTED_CREDENTIAL> b <EMAIL_ADDRESS> c"
    spans = [(f["start"], f["end"]) for f in findings]
    assert spans == sorted(spans)


def test_empty_and_clean_text(redactor: Redactor) -> None:
    assert redactor.redact_with_report("") == ("", [])
    assert redactor.redact_with_report("nothing to see here") == ("nothing to see here", [])


# ------------------------------------------------------------ JSON embedded


def test_secrets_inside_tool_call_arguments(redactor: Redactor) -> None:
    arguments = json.dumps({
        "url": "https://api.example.com/v1/items",
        "headers": {"Authorization": f"Bearer {JWT}"},
        "api_key": SK_PROJ,
        "password": "hunter2",
        "token": "plain-token-42",
        "notify": "bob@example.org",
    })
    message = json.dumps({
        "role": "assistant",
        "tool_calls": [{"id": "call_1", "type": "function",
                        "function": {"name": "http_request", "arguments": arguments}}],
    })
    assert '\\"password\\": \\"hunter2\\"' in message  # really embedded as an escaped string
    out = redactor.redact(message)
    for secret in (JWT, SK_PROJ, "hunter2", "plain-token-42", "bob@example.org"):
        assert secret not in out, secret
    # still valid JSON, keys intact
    args = json.loads(json.loads(out)["tool_calls"][0]["function"]["arguments"])
    assert args["password"] == "<REDACTED_CREDENTIAL>"
    assert args["token"] == "<REDACTED_CREDENTIAL>"
    assert args["api_key"] == "<LLM_API_KEY>"
    assert args["headers"]["Authorization"] == "Bearer <REDACTED_TOKEN>"
    assert args["notify"] == "<EMAIL_ADDRESS>"
    assert args["url"] == "https://api.example.com/v1/items"


def test_escaped_json_stays_valid(redactor: Redactor) -> None:
    inner = json.dumps({
        "cmd": "echo password=hunter2\n" + PEM + "\nmail alice@example.com",
        "note": "line\nbob@example.com",
        "auth": "Authorization: Basic " + BASIC,
    })
    outer = json.dumps({"arguments": inner})
    out = redactor.redact(outer)
    args = json.loads(json.loads(out)["arguments"])  # escapes were not split
    assert args["cmd"] == "echo password=<REDACTED_CREDENTIAL>\n<PRIVATE_KEY>\nmail <EMAIL_ADDRESS>"
    assert args["note"] == "line\n<EMAIL_ADDRESS>"
    assert args["auth"] == "Authorization: Basic <REDACTED_TOKEN>"


def test_plain_json_document(redactor: Redactor) -> None:
    doc = json.dumps({"user": "alice", "client_secret": "GOCSPX-1a2b3c", "count": 3})
    assert json.loads(redactor.redact(doc)) == {
        "user": "alice", "client_secret": "<REDACTED_CREDENTIAL>", "count": 3,
    }


# ---------------------------------------------------------- construction


def test_get_redactor_is_cached() -> None:
    assert get_redactor() is get_redactor()


def test_runs_offline_with_no_op_engine(redactor: Redactor) -> None:
    from presidio_analyzer.nlp_engine import NoOpNlpEngine

    assert os.environ.get("TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS") is not None
    assert isinstance(redactor.analyzer.nlp_engine, NoOpNlpEngine)
    assert redactor.spacy_model is None
    names = {r.name for r in redactor.analyzer.registry.recognizers}
    assert all(name.startswith("ultron_") for name in names)


def test_builds_and_redacts_without_network(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the redactor tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    r = Redactor(spacy_model="")
    assert r.redact(MULTI) == get_redactor().redact(MULTI)


def test_extra_entities() -> None:
    r = Redactor(spacy_model="", extra_entities={"EMPLOYEE_ID": r"\bEMP-\d{6}\b"})
    assert r.redact("ticket by EMP-004211 from alice@example.com") == (
        "ticket by <EMPLOYEE_ID> from <EMAIL_ADDRESS>"
    )
    assert r.redact("<EMPLOYEE_ID>") == "<EMPLOYEE_ID>"
    with pytest.raises(ValueError):
        Redactor(spacy_model="", extra_entities={"bad name": "x"})


def test_missing_spacy_model_warns_once_and_still_works(caplog: pytest.LogCaptureFixture) -> None:
    model = f"xx_ultron_missing_{uuid.uuid4().hex[:8]}"
    with caplog.at_level(logging.WARNING, logger="ultron.redaction"):
        first = Redactor(spacy_model=model)
        second = Redactor(spacy_model=model)
    warnings = [r for r in caplog.records if model in r.getMessage()]
    assert len(warnings) == 1
    for r in (first, second):
        assert r.spacy_model is None
        assert r.redact("mail alice@example.com") == "mail <EMAIL_ADDRESS>"


def test_spacy_model_from_environment(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    model = f"xx_ultron_env_{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("ULTRON_REDACTION_SPACY_MODEL", model)
    with caplog.at_level(logging.WARNING, logger="ultron.redaction"):
        r = Redactor()
    assert any(model in rec.getMessage() for rec in caplog.records)
    assert r.spacy_model is None
    assert r.redact("password=hunter2") == "password=<REDACTED_CREDENTIAL>"


def test_installed_spacy_model_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """With an 'installed' model the spaCy engine is used; a blank pipeline stands
    in for the model so nothing is downloaded."""
    import spacy
    import spacy.util

    monkeypatch.setattr(spacy.util, "is_package", lambda name: name == "xx_fake_model")
    monkeypatch.setattr(spacy, "load", lambda name, **kw: spacy.blank("en"))
    r = Redactor(spacy_model="xx_fake_model")
    assert r.spacy_model == "xx_fake_model"
    assert type(r.analyzer.nlp_engine).__name__ == "SpacyNlpEngine"
    assert r.redact(f"key {SK_PROJ} for alice@example.com") == "key <LLM_API_KEY> for <EMAIL_ADDRESS>"
