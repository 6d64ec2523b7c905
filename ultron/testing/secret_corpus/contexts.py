"""How a sample is written into a text: one renderer per context (``.env`` line, JSON, a PEM file ...)."""

from __future__ import annotations

import html
import json
import random
import re
from typing import Callable

from ultron.testing.secret_corpus.model import CONTEXTS, Sample, TokenFormat


def timestamp(rng: random.Random) -> str:
    return (f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} {rng.randint(0, 23):02d}:"
            f"{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}")


def iso_timestamp(rng: random.Random) -> str:
    return timestamp(rng).replace(" ", "T") + "Z"


def _words(var: str) -> list[str]:
    return [w for w in var.lower().split("_") if w]


def _snake(var: str) -> str:
    return "_".join(_words(var))


def _camel(var: str) -> str:
    w = _words(var)
    return w[0] + "".join(x.capitalize() for x in w[1:])


def _pascal(var: str) -> str:
    return "".join(x.capitalize() for x in _words(var))


def _role(fmt: TokenFormat) -> str:
    if fmt.kind == "pii":
        return fmt.label or "value"
    v = fmt.var.upper()
    if fmt.kind == "block" or "PRIVATE_KEY" in v:
        return "private_key"
    if v.endswith(("PASSWORD", "PASSWD", "_PASS", "PWD")):
        return "password"
    if v.endswith(("URL", "URI", "DSN", "CONNECTION_STRING", "CONFIG", "WEBHOOK")):
        return "url"
    if "SECRET" in v:
        return "secret"
    if v.endswith("TOKEN") or v.endswith("PAT") or v.endswith("_SID"):
        return "token"
    return "api_key"


_KWARG = {"password": "password", "url": "url", "secret": "client_secret", "token": "token", "api_key": "api_key",
          "private_key": "private_key"}
_FLAG = {"password": "password", "url": "url", "secret": "client-secret", "token": "token", "api_key": "api-key",
         "private_key": "private-key"}


def _kw(fmt: TokenFormat) -> str:
    return _KWARG.get(_role(fmt), _role(fmt))


def _shell(v: str) -> str:
    if re.fullmatch(r"[A-Za-z0-9_./:=+@%^,~-]+", v):
        return v
    return "'" + v.replace("'", "'\\''") + "'"


def _env_value(v: str) -> str:
    if re.search(r"[\s#\"'$`;&|<>()\\]", v):
        return "'" + v + "'" if "'" not in v else '"' + v.replace('"', '\\"') + '"'
    return v


def _dq(v: str) -> str:  # double-quoted string in Python/Go/TOML
    return v.replace("\\", "\\\\").replace('"', '\\"')


def _json_str(v: str) -> str:
    return json.dumps(v)[1:-1]


def _yaml_value(v: str) -> str:
    if re.fullmatch(r"[A-Za-z0-9_./+=][A-Za-z0-9_./+=:~@%^,-]*", v) and ": " not in v and not v.endswith(":"):
        return v
    return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _service_title(fmt: TokenFormat) -> str:
    return fmt.service[:1].upper() + fmt.service[1:]


_NEIGHBOURS = ("NODE_ENV=production", "LOG_LEVEL=info", "PORT=8080", "AWS_REGION=us-east-1", "DEBUG=false",
               "APP_NAME=orders-api", "TZ=UTC", "WORKERS=4")


def _ctx_env(fmt: TokenFormat, s: Sample, rng: random.Random) -> str:
    line = f"{fmt.var}={_env_value(s.value)}"
    others = rng.sample(_NEIGHBOURS, rng.randint(0, 4))  # other lines of the same file, around it
    cut = rng.randint(0, len(others))
    lines = others[:cut] + [line] + others[cut:]
    head = rng.choice(["$ cat .env", "$ cat .env.production", "", "# .env.local"])
    return "\n".join(([head] if head else []) + lines)


def _ctx_export(fmt: TokenFormat, s: Sample, rng: random.Random) -> str:
    v = s.value
    quoted = f"'{v}'" if re.search(r'[$"`\\!]', v) and "'" not in v else f'"{v}"'
    return rng.choice([
        f"export {fmt.var}={quoted}",
        f"$ export {fmt.var}={quoted} && {fmt.service} whoami",
        f"# add to ~/.zshrc\nexport {fmt.var}={quoted}",
        f"set -euo pipefail\nexport {fmt.var}={quoted}\n./scripts/deploy.sh",
    ])


def _ctx_json(fmt: TokenFormat, s: Sample, rng: random.Random) -> str:
    v = _json_str(s.value)
    key = rng.choice([_snake(fmt.var), _camel(fmt.var), _kw(fmt)])
    choice = rng.randint(0, 3)
    if choice == 0:
        return f'{{"{key}": "{v}", "region": "us-east-1", "timeout": 30}}'
    if choice == 1:
        return (f'{{\n  "name": "{fmt.service}",\n  "credentials": {{\n    "{key}": "{v}"\n  }},\n'
                f'  "enabled": true\n}}')
    if choice == 2:  # a tool call whose argument is a shell command, as agents log them
        inner = f"{fmt.var}={_env_value(s.value)} ./scripts/sync.sh --dry-run"
        return json.dumps({"type": "tool_use", "name": "Bash", "input": {"command": inner}})
    return f'{{"env": {{"{fmt.var}": "{v}", "NODE_ENV": "production"}}}}'


def _ctx_yaml(fmt: TokenFormat, s: Sample, rng: random.Random) -> str:
    v = _yaml_value(s.value)
    choice = rng.randint(0, 3)
    if choice == 0 and fmt.kind == "pii":
        return f"customer:\n  id: {rng.randint(1000, 99999)}\n  {_kw(fmt)}: {v}\n  status: active"
    if choice == 0:
        return f"{fmt.service}:\n  endpoint: https://{fmt.domain}\n  {_kw(fmt)}: {v}\n  retries: 3"
    if choice == 1:  # kubernetes container env
        return (f"    env:\n      - name: {fmt.var}\n        value: \"{_dq(s.value)}\"\n      - name: LOG_LEVEL\n"
                f"        value: info")
    if choice == 2:  # docker-compose
        return f"services:\n  app:\n    image: acme/app:1.4.2\n    environment:\n      {fmt.var}: {v}"
    return f"env:\n  {fmt.var}: {v}\njobs:\n  build:\n    runs-on: ubuntu-latest"


def _ctx_cli(fmt: TokenFormat, s: Sample, rng: random.Random) -> str:
    v = _shell(s.value)
    role = _role(fmt)
    flag = _FLAG.get(role, role.replace("_", "-"))
    tool = fmt.service
    if fmt.kind == "pii":
        return rng.choice([
            f"$ python manage.py create_customer --{flag.replace('_', '-')} {v}",
            f"$ ./scripts/lookup.sh --{flag.replace('_', '-')}={v} --verbose",
        ])
    if role == "url":
        return rng.choice([
            f"$ {tool} migrate --{flag} {v}",
            f"$ {tool} --{flag}={v} status",
            f"$ docker run --rm -e {fmt.var}={v} acme/worker:2.3.1",
        ])
    options = [
        f"$ {tool} login --{flag} {v}",
        f"$ {tool} deploy --{flag}={v} --yes",
        f"$ docker run -d -e {fmt.var}={v} -p 8080:8080 acme/api:1.9.0",
    ]
    if fmt.kind in ("token", "password"):
        options.append(f"$ curl -sf -u {rng.choice(['admin', 'deploy', 'api'])}:{v} https://{fmt.domain}/v1/status")
    return rng.choice(options)


def _header_line(fmt: TokenFormat, s: Sample, rng: random.Random) -> str:
    if fmt.header:
        return fmt.header.format(v=s.value)
    if rng.random() < 0.6:
        return f"Authorization: Bearer {s.value}"
    return f"X-{_service_title(fmt)}-Key: {s.value}"


def _ctx_http_header(fmt: TokenFormat, s: Sample, rng: random.Random) -> str:
    h = _header_line(fmt, s, rng)
    path = rng.choice(["v1/me", "api/v2/items?limit=50", "v1/projects", "user", "api/health"])
    if ": " not in h or h.startswith(("POST ", "GET ")):
        return f"$ curl -s -X POST '{h.split(' ', 1)[1]}' -d 'chat_id=42'" if h.startswith("POST ") else h
    name, value = h.split(": ", 1)
    choice = rng.randint(0, 2)
    if choice == 0:
        return f'$ curl -s -H "{h}" https://{fmt.domain}/{path}'
    if choice == 1:
        return (f"> GET /{path} HTTP/1.1\n> Host: {fmt.domain}\n> User-Agent: curl/8.5.0\n> {h}\n> Accept: */*\n>\n"
                f"< HTTP/1.1 200 OK")
    return f'headers = {{"{name}": "{_dq(value)}", "Content-Type": "application/json"}}'


_LOG_TEMPLATES = (
    "{ts} INFO using {v} for upload",
    "[{iso}] DEBUG auth ok, credential {v} expires in 3600s",
    "error: request rejected for {v} (401 Unauthorized)",
    "{ts} WARN found {v} in config/settings.py:12, rotating",
    "Your new token is {v}\nStore it somewhere safe; it will not be shown again.",
    "\u2192 Created API key: {v}",
    "Traceback (most recent call last):\n  File \"app/client.py\", line 88, in connect\n"
    "PermissionError: invalid key {v}",
    "{ts} ERROR upstream said: token {v} has been revoked",
)
_URL_LOG_TEMPLATES = (
    "{ts} INFO connecting to {v}",
    "{ts} WARN retrying connection to {v} (attempt 2/5)",
    "sqlalchemy.exc.OperationalError: could not connect using {v}",
    "[{iso}] notify: POST {v} -> 200",
    "Configured endpoint: {v}",
)
_PII_LOG_TEMPLATES = (
    "{ts} INFO sent receipt to {v}",
    "{ts} DEBUG customer {label}: {v}",
    "[{iso}] user record updated ({label}={v})",
    "WARN: duplicate {label} {v} in import batch 17",
)


def _ctx_log(fmt: TokenFormat, s: Sample, rng: random.Random) -> str:
    if fmt.log_templates:
        pool = fmt.log_templates
    elif fmt.kind == "url":
        pool = _URL_LOG_TEMPLATES
    elif fmt.kind == "pii":
        pool = _PII_LOG_TEMPLATES
    else:
        pool = _LOG_TEMPLATES
    return rng.choice(pool).format(v=s.value, ts=timestamp(rng), iso=iso_timestamp(rng),
                                   label=fmt.label.replace("_", " "),
                                   n=rng.randint(3, 400))


def _ctx_python(fmt: TokenFormat, s: Sample, rng: random.Random) -> str:
    v = _dq(s.value)
    cls = "Customer" if fmt.kind == "pii" else _service_title(fmt).replace("-", "") + "Client"
    return rng.choice([
        f'client = {cls}({_kw(fmt)}="{v}")',
        f'{fmt.service.replace("-", "_")}.{_kw(fmt)} = "{v}"',
        f'os.environ["{fmt.var}"] = "{v}"',
        f'>>> conn = client.connect({_kw(fmt)}="{v}", timeout=10)',
    ])


def _ctx_toml(fmt: TokenFormat, s: Sample, rng: random.Random) -> str:
    v = _dq(s.value)
    if rng.random() < 0.5 and fmt.kind == "pii":
        return f'[[customers]]\nid = {rng.randint(1000, 99999)}\n{_kw(fmt)} = "{v}"'
    if rng.random() < 0.5:
        return f'[{fmt.service}]\nendpoint = "https://{fmt.domain}"\n{_kw(fmt)} = "{v}"'
    return f'[env]\n  {fmt.var} = "{v}"\n  LOG_LEVEL = "info"'


def _ctx_xml(fmt: TokenFormat, s: Sample, rng: random.Random) -> str:
    v = html.escape(s.value, quote=True)
    choice = rng.randint(0, 2)
    if choice == 0:
        return f'<appSettings>\n  <add key="{_pascal(fmt.var)}" value="{v}" />\n</appSettings>'
    if choice == 1:
        return f"<server>\n  <id>{fmt.service}</id>\n  <{_camel(_kw(fmt))}>{v}</{_camel(_kw(fmt))}>\n</server>"
    return f'<property name="{fmt.service}.{_kw(fmt).replace("_", "-")}" value="{v}"/>'


def _ctx_php(fmt: TokenFormat, s: Sample, rng: random.Random) -> str:
    v = s.value.replace("\\", "\\\\").replace("'", "\\'")
    return rng.choice([
        f"    '{_kw(fmt)}' => '{v}',",
        f"define('{fmt.var}', '{v}');",
        f"${_camel(fmt.var)} = '{v}';",
        f"'{fmt.service}' => [\n    '{_kw(fmt)}' => env('{fmt.var}', '{v}'),\n],",
    ])


def _ctx_go(fmt: TokenFormat, s: Sample, rng: random.Random) -> str:
    v = _dq(s.value)
    return rng.choice([
        f'{_camel(_kw(fmt))} := "{v}"',
        f'const {_camel(fmt.var)} = "{v}"',
        f'cfg := &Config{{Endpoint: "https://{fmt.domain}", {_pascal(_kw(fmt))}: "{v}"}}',
        f'os.Setenv("{fmt.var}", "{v}")',
    ])


# ---- blocks


def _key_path(fmt: TokenFormat, rng: random.Random) -> str:
    if fmt.service == "ssh":
        return rng.choice(["~/.ssh/id_ed25519", "~/.ssh/deploy_key", "keys/ci_deploy"])
    return rng.choice(["certs/server.key", "secrets/signing.pem", "deploy/key.pem", "config/jwt/private.pem"])


def _ctx_pem_file(fmt: TokenFormat, s: Sample, rng: random.Random) -> str:
    return f"$ cat {_key_path(fmt, rng)}\n{s.value}\n$ "


def _ctx_json_escaped(fmt: TokenFormat, s: Sample, rng: random.Random) -> str:
    if s.json_document:
        return f"$ cat credentials/service-account.json\n{s.json_document}"
    return json.dumps({_kw(fmt): s.value + "\n", "passphrase": "", "type": fmt.service})


def _ctx_yaml_block(fmt: TokenFormat, s: Sample, rng: random.Random) -> str:
    body = "\n".join("    " + ln for ln in s.value.split("\n"))
    return f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: {fmt.service}-key\nstringData:\n  key.pem: |\n{body}"


def _ctx_env_escaped(fmt: TokenFormat, s: Sample, rng: random.Random) -> str:
    if s.json_document:
        return f"{fmt.var}='{json.dumps(json.loads(s.json_document))}'"
    return f'{fmt.var}="{s.value.replace(chr(10), chr(92) + "n")}"'


def _ctx_python_multiline(fmt: TokenFormat, s: Sample, rng: random.Random) -> str:
    return f'{fmt.var} = """{s.value}\n"""\nsigner = load_pem_private_key({fmt.var}.encode(), password=None)'


def _ctx_log_block(fmt: TokenFormat, s: Sample, rng: random.Random) -> str:
    return (f"{timestamp(rng)} DEBUG loaded key from {_key_path(fmt, rng)}:\n{s.value}\n"
            f"{timestamp(rng)} INFO signer ready")


# ---- shapes (only for the formats that name them)

_PROSE_TEMPLATES = (
    "{ts} INFO using {service} credential {v}",
    "[{iso}] {service}_hub: using {service} credential {v} for the download",
    "Loaded {Service} token {v} from the local cache",
    "{ts} DEBUG {service} api key is {v}",
    "auth token for {service}: {v}",
    "Your {service} token ({v}) has been saved to the credential store.",
    "{ts} WARN rotating {service} access key {v} after the incident",
    "{Service} secret {v} expires in 3 days; rotate it before Friday",
    "error: {service} rejected bearer {v} (401 Unauthorized)",
    "> logged in to {service} with token '{v}'",
)


def _ctx_prose(fmt: TokenFormat, s: Sample, rng: random.Random) -> str:
    """A credential named in prose: a log line or a message says what the value is."""
    return rng.choice(_PROSE_TEMPLATES).format(v=s.value, ts=timestamp(rng), iso=iso_timestamp(rng),
                                               service=fmt.service, Service=_service_title(fmt))


_CURL_USERS = ("deploy", "admin", "ci-bot", "svc", "api", "jenkins")


def _ctx_curl_user(fmt: TokenFormat, s: Sample, rng: random.Random) -> str:
    """``curl -u name:password`` (and wget/httpie) in the quotings a shell log shows."""
    v, user, dom = s.value, rng.choice(_CURL_USERS), fmt.domain
    bare = re.fullmatch(r"[A-Za-z0-9!#%&*+,.:=?@^_~-]+", v) is not None  # as typed, & and ! included
    options = [
        f"$ curl -sS --user '{user}:{v}' https://{dom}/api/v1/status",
        f"$ curl -fsSL -u {user}:'{v}' https://{dom}/export.csv -o export.csv",
        f"$ curl -X POST \\\n    -H 'Content-Type: application/json' \\\n    -u '{user}:{v}' \\\n"
        f"    https://{dom}/v1/deploy",
        f"$ wget --user={user} --password='{v}' https://{dom}/backup.tar.gz",
        f"$ http -a {user}:'{v}' https://{dom}/v1/me",
        "subprocess.run([\"curl\", \"-u\", " + json.dumps(f"{user}:{v}") + f", \"https://{dom}/v1/ping\"])",
    ]
    if '"' not in v and "$" not in v and "`" not in v and "\\" not in v:
        options += [
            f'$ curl -u "{user}:{v}" -X POST https://{dom}/v1/jobs',
            json.dumps({"type": "tool_use", "name": "Bash",
                        "input": {"command": f'curl -s -u "{user}:{v}" https://{dom}/health'}}),
        ]
    if bare:
        options += [
            f"$ curl -u {user}:{v} https://{dom}/v1/status",
            f"$ curl -su {user}:{v} 'https://{dom}/v1/items?page=2&per_page=50'",
            f"$ wget --http-user={user} --http-password={v} https://{dom}/files/report.pdf",
        ]
    return rng.choice(options)


def _cut(value: str, public: tuple[str, ...], rng: random.Random, pieces: int) -> list[str]:
    """``value`` in ``pieces`` pieces of 8+ characters, the first one past the public prefix."""
    lead = max((len(p) for p in public if value.startswith(p)), default=0)
    for _ in range(50):
        cuts = sorted(rng.sample(range(lead + 8, len(value) - 7), pieces - 1))
        if all(b - a >= 8 for a, b in zip([0, *cuts], [*cuts, len(value)])):
            return [value[a:b] for a, b in zip([0, *cuts], [*cuts, len(value)])]
    return [value[: len(value) // 2], value[len(value) // 2 :]]


def _ctx_split_token(fmt: TokenFormat, s: Sample, rng: random.Random) -> tuple[str, tuple[str, ...]]:
    """A token cut in pieces: a wrapped log line, string concatenation, a list of chunks.
    Every piece must vanish; the later ones have no prefix."""
    parts = _cut(s.value, s.public, rng, 3 if len(s.value) > 90 and rng.random() < 0.5 else 2)
    var, ts = fmt.var, timestamp(rng)
    choice = rng.randint(0, 6)
    if choice == 0:  # a log viewer wrapping long lines
        text = f"{ts} DEBUG loaded {var}={parts[0]}\n" + "\n".join(parts[1:]) + f"\n{timestamp(rng)} INFO ready"
    elif choice == 1:  # Python implicit concatenation inside parentheses
        text = f"{var} = (\n" + "".join(f'    "{p}"\n' for p in parts) + ")"
    elif choice == 2:  # JavaScript +
        text = f"const {_camel(var)} = " + " +\n  ".join(f"'{p}'" for p in parts) + ";"
    elif choice == 3:  # a JSON document holding the chunks
        text = json.dumps({"name": fmt.service, f"{_snake(var)}_parts": parts}, indent=2)
    elif choice == 4:  # a transcript line: a tool result with the wrapped export
        text = json.dumps({"type": "tool_result",
                           "content": f"$ cat .env\nexport {var}=" + "\n".join(parts) + "\nLOG_LEVEL=info\n"})
    elif choice == 5:  # a shell line continuation inside a double-quoted value
        text = f'export {var}="' + "\\\n".join(parts) + '"'
    else:  # adjacent literals on one line (C, Python)
        text = f"#define {var} " + " ".join(f'"{p}"' for p in parts)
    return text, tuple(parts)


RENDER: dict[str, Callable[[TokenFormat, Sample, random.Random], "str | tuple[str, tuple[str, ...]]"]] = {
    "env": _ctx_env, "export": _ctx_export, "json": _ctx_json, "yaml": _ctx_yaml, "cli": _ctx_cli,
    "http_header": _ctx_http_header, "log": _ctx_log, "python": _ctx_python, "toml": _ctx_toml, "xml": _ctx_xml,
    "php": _ctx_php, "go": _ctx_go, "pem_file": _ctx_pem_file, "json_escaped": _ctx_json_escaped,
    "yaml_block": _ctx_yaml_block, "env_escaped": _ctx_env_escaped, "python_multiline": _ctx_python_multiline,
    "log_block": _ctx_log_block, "prose": _ctx_prose, "curl_user": _ctx_curl_user, "split_token": _ctx_split_token,
}
assert set(RENDER) == set(CONTEXTS)
