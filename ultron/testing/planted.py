"""Secrets of every kind the redactor must catch, and a session that carries them all.

Used by the redaction test and ``benchmarks/redaction.py``: after the full pipeline,
none of these strings may appear anywhere in the database outside raw_user_uploads.
"""

from __future__ import annotations

import json

#: kind -> the exact string planted (what must never be found outside the raw archive)
PLANTED: dict[str, str] = {
    "openai_key": "sk-proj-Q1w2E3r4T5y6U7i8O9p0AaSsDdFfGgHhJj",
    "github_ghp": "ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "github_gho": "gho_ZyXwVuTsRqPoNmLkJiHgFeDcBa9876543210",
    "aws_access_key": "AKIAIOSFODNN7EXAMPLQ",
    "aws_secret_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEYq",
    "bearer_token": "eyJhbGciOiJIUzI1NiJ9.plantedPayload.SiGnAtUrE123",
    "basic_auth": "dXNlcjpwbGFudGVkLXBhc3M=",
    "generic_secret": "s3cr3t-Planted-Value-991",
    "url_password": "Pl4ntedDbPass",
    "private_key": "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7plantedkeybody",
    "slack_token": "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "email": "mia.li.planted@example.org",
    "phone": "+1 415-555-0199",
    "cn_mobile": "13912345678",
    "credit_card": "4111 1111 1111 1111",
    "ip_address": "203.0.113.57",
    "uuid": "3f2b8c1e-9d4a-4e7b-8c2d-1a2b3c4d5e6f",
    "unix_user": "plantedalice",
    "windows_user": "PlantedBob",
}


def session_rows() -> list[dict]:
    """A small coding session (an error, then a fix) that mentions every planted secret."""
    p = PLANTED
    return [
        {"role": "user", "content": (
            f"Deploy fails. My key is {p['openai_key']}, tokens {p['github_ghp']} and {p['github_gho']}. "
            f"Mail {p['email']} or call {p['phone']} / {p['cn_mobile']}. Card {p['credit_card']}. "
            f"The repo is in /home/{p['unix_user']}/app and C:\\Users\\{p['windows_user']}\\app. "
            "I prefer bash over python for scripts.")},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
            "name": "Bash", "arguments": json.dumps({"command": (
                f"AWS_ACCESS_KEY_ID={p['aws_access_key']} AWS_SECRET_ACCESS_KEY={p['aws_secret_key']} "
                f"curl -H 'Authorization: Bearer {p['bearer_token']}' https://{p['ip_address']}/deploy")})}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "error", "content": (
            f"Error: login failed: Authorization: Basic {p['basic_auth']} rejected; api_secret={p['generic_secret']}; "
            f"db postgresql://deploy:{p['url_password']}@db.internal:5432/app; run {p['uuid']}; "
            f"slack {p['slack_token']}\n-----BEGIN PRIVATE KEY-----\n{p['private_key']}\n-----END PRIVATE KEY-----")},
        {"role": "assistant", "content": "The deploy needs the deployer role; retrying.", "tool_calls": [
            {"id": "c2", "type": "function", "function": {
                "name": "Bash", "arguments": json.dumps({"command": "./deploy.sh --role deployer"})}}]},
        {"role": "tool", "tool_call_id": "c2", "content": "deployed successfully"},
        {"role": "assistant", "content": "Fixed: the deploy needed --role deployer."},
        {"role": "user", "content": "Thanks, it works!"},
    ]
