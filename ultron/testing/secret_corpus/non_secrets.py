"""Lines agents' logs are full of that are not secrets (nothing in them may change), and UUID lines."""

from __future__ import annotations

import random
import uuid as _uuid
from typing import Callable

from ultron.testing.secret_corpus.contexts import iso_timestamp, timestamp
from ultron.testing.secret_corpus.model import (
    A62, B64U, HEXU, K8S, LODG, NonSecretCase, UuidCase, b64, hexstr, rand, uuid4,
)


_ORGS = ("acme", "octo-org", "widgets", "data-team", "infra")
_REPOS = ("api", "web-app", "orders-service", "ml-pipeline", "cli", "docs")
_PKGS = ("requests", "numpy", "fastapi", "pydantic", "sqlalchemy", "react", "lodash", "express", "typescript", "vite",
         "pytest", "django", "boto3", "openai", "anthropic", "langchain", "serde", "tokio")
_FILES = ("main", "utils", "client", "models", "handlers", "auth", "config", "routes", "schema", "token_store",
          "password_reset", "api_keys", "secrets_manager")
_DIRS = ("api", "core", "services", "lib", "components", "auth", "db", "workers")
_FUNCS = ("get_access_token", "refresh_token", "validate_password", "parse_api_key", "load_secrets", "rotate_keys",
          "hash_password", "verify_signature", "build_auth_header", "mask_token")
_MSGS = ("fix token refresh race", "add password strength meter", "bump deps", "rotate api keys in CI",
         "refactor auth middleware", "handle expired JWT", "docs: explain SECRET_KEY", "test: cover key parsing",
         "chore: update lockfile", "feat: add webhook signature check")
_APPS = ("api", "web", "worker", "orders", "payments", "auth", "redis", "postgres", "ingest")
_SENTENCES = ("hello world", "The quick brown fox jumps over the lazy dog", "Lorem ipsum dolor sit amet",
              "user=guest&theme=dark", '{"page": 2, "per_page": 50}', "# Project README\n\nBuild with make.",
              "name,email_opt_in,created\n", "Release notes for version 2.4.0", "print('hello from the container')",
              "SELECT id, name FROM products WHERE active = true;")


def _ver(rng: random.Random) -> str:
    return f"{rng.randint(0, 5)}.{rng.randint(0, 30)}.{rng.randint(0, 20)}"


def _ns_git_short(rng: random.Random) -> str:
    a, b = hexstr(rng, 7), hexstr(rng, 7)
    return rng.choice([
        f"HEAD is now at {a} {rng.choice(_MSGS)}", f"[main {a}] {rng.choice(_MSGS)}", f"$ git revert {a}",
        f"{a} {rng.choice(_MSGS)}", f"Updating {a}..{b}\nFast-forward", f"$ git cherry-pick {a}",
        f"fixup! {a}", f"   {a}..{b}  main -> main",
    ])


def _ns_git_full(rng: random.Random) -> str:
    a = hexstr(rng, 40)
    return rng.choice([
        f"commit {a}\nAuthor: CI Bot <noreply>\nDate:   Mon May 6 10:12:01 2024 +0000",
        f"      - uses: actions/checkout@{a} # v4.1.1", f"{a}\trefs/heads/main", f'rev = "{a}"',
        f"Source commit {a} built in 2m 14s", f"git-sha: {a}", f"$ git show --stat {a}",
        f"Merge: {hexstr(rng, 7)} {hexstr(rng, 7)}",
    ])


def _ns_semver(rng: random.Random) -> str:
    v, w = _ver(rng), _ver(rng)
    p = rng.choice(_PKGS)
    return rng.choice([
        f"Successfully installed {p}-{v} urllib3-{w}", f'  "version": "{v}",', f"bump version {v} \u2192 {w}",
        f"node v{rng.randint(16, 22)}.{rng.randint(0, 19)}.{rng.randint(0, 9)}",
        f"go version go1.{rng.randint(19, 23)}.{rng.randint(0, 9)} linux/amd64",
        f"Python 3.{rng.randint(8, 13)}.{rng.randint(0, 12)}",
        f"{p}=={v}", f'    "{p}": "^{v}",', f"{v}-rc.{rng.randint(1, 5)}+build.{rng.randint(1, 900)}",
        f"Released {p} v{v} (2024-05-01)",
    ])


def _ns_path(rng: random.Random) -> str:
    d, f = rng.choice(_DIRS), rng.choice(_FILES)
    return rng.choice([
        f"src/{d}/{f}.py:{rng.randint(1, 400)}:{rng.randint(1, 80)}: E501 line too long (104 > 88 characters)",
        f"/usr/lib/python3.11/site-packages/{rng.choice(_PKGS)}/__init__.py",
        f"./node_modules/.bin/{rng.choice(['eslint', 'tsc', 'vite', 'jest'])}",
        f"/var/log/{rng.choice(_APPS)}/error.log",
        f"\tmodified:   src/{d}/{f}.ts",
        f'  File "/opt/app/{d}/{f}.py", line {rng.randint(1, 500)}, in {rng.choice(_FUNCS)}',
        "C:\\Program Files\\Git\\bin\\bash.exe", f"/etc/nginx/conf.d/{rng.choice(_APPS)}.conf",
        f"Wrote 1.2 kB to dist/assets/{f}.js", f"tests/{d}/test_{f}.py",
    ])


def _ns_digest(rng: random.Random) -> str:
    f = f"{rng.choice(_PKGS)}-{_ver(rng)}.tar.gz"
    return rng.choice([
        f"sha256:{hexstr(rng, 64)}", f"SHA256 ({f}) = {hexstr(rng, 64)}", f"md5: {hexstr(rng, 32)}",
        f"MD5 checksum {hexstr(rng, 32)} OK",
        f"    --hash=sha256:{hexstr(rng, 64)}", f"checksum: sha256:{hexstr(rng, 64)}",
        f'ETag: "{hexstr(rng, 32)}"', f"sha1: {hexstr(rng, 40)}", f"sha256sum: {hexstr(rng, 64)}  dist/{f}",
        f'      "integrity": "sha512-{b64(rng.randbytes(64))}",',
        f"golang.org/x/net v0.{rng.randint(10, 30)}.0 h1:{b64(rng.randbytes(32))}",
        f"md5sum {f}: {hexstr(rng, 32)}",
    ])


def _ns_docker(rng: random.Random) -> str:
    img = rng.choice(["python", "node", "postgres", "nginx", "redis", "golang"])
    return rng.choice([
        f"{img}@sha256:{hexstr(rng, 64)}", f"Digest: sha256:{hexstr(rng, 64)}",
        f"Status: Downloaded newer image for {img}:{rng.randint(3, 20)}-alpine",
        f"FROM {img}:3.11-slim@sha256:{hexstr(rng, 64)}", f"{hexstr(rng, 12)}: Pull complete",
        f"Successfully built {hexstr(rng, 12)}", f"ghcr.io/{rng.choice(_ORGS)}/{rng.choice(_REPOS)}:{_ver(rng)}",
        f" => [internal] load metadata for docker.io/library/{img}:latest",
        f"{rng.choice(_ORGS)}/{rng.choice(_REPOS)}   latest   {hexstr(rng, 12)}   2 days ago   182MB",
    ])


def _ns_url(rng: random.Random) -> str:
    o, r, n = rng.choice(_ORGS), rng.choice(_REPOS), rng.randint(1, 9999)
    return rng.choice([
        f"https://github.com/{o}/{r}/pull/{n}",
        f"https://docs.python.org/3/library/{rng.choice(['re', 'json', 'os'])}.html",
        f"See https://stackoverflow.com/questions/{rng.randint(10**6, 8 * 10**7)}/how-to-refresh-an-oauth-token",
        f"GET https://api.github.com/repos/{o}/{r}/actions/runs?per_page=50&page=2 200",
        f"https://pypi.org/project/{rng.choice(_PKGS)}/{_ver(rng)}/",
        f"https://registry.npmjs.org/{rng.choice(_PKGS)}/-/{rng.choice(_PKGS)}-{_ver(rng)}.tgz",
        f"http://localhost:{rng.choice([3000, 5173, 8000, 8080])}/api/health",
        f"https://storage.googleapis.com/{o}-releases/{_ver(rng)}/app.tar.gz",
        f"https://{o}.atlassian.net/browse/PROJ-{n}", f"https://www.youtube.com/watch?v={rand(rng, B64U, 11)}",
    ])


def _ns_timestamp(rng: random.Random) -> str:
    return rng.choice([
        f"{iso_timestamp(rng)}", f"{timestamp(rng)},{rng.randint(0, 999):03d} INFO worker started",
        f"timestamp={rng.randint(1_690_000_000, 1_760_000_000)}", f"created_at: {iso_timestamp(rng)}",
        f"Date: Mon, {rng.randint(1, 28):02d} May 2024 {rng.randint(0, 23):02d}:14:09 GMT",
        f"Last-Modified: Tue, {rng.randint(1, 28):02d} Apr 2024 08:00:00 GMT",
        f"schedule: \"{rng.randint(0, 59)} */6 * * *\"", f"ts_ms={rng.randint(1_690_000_000_000, 1_760_000_000_000)}",
        f"elapsed: {rng.randint(0, 59)}m{rng.randint(0, 59)}s", f"[{timestamp(rng)}] Build finished",
    ])


_PLACEHOLDERS = (
    "OPENAI_API_KEY=sk-xxxx", "api_key: <your-api-key>", "GITHUB_TOKEN=YOUR_TOKEN_HERE", "export API_KEY=${API_KEY}",
    "password: changeme", 'token = os.environ["GITHUB_TOKEN"]', "PASSWORD=", "password: ********",
    "STRIPE_SECRET_KEY=sk_test_...", "api_key = os.getenv(\"OPENAI_API_KEY\")", '"token": null',
    "Authorization: Bearer $TOKEN", "Authorization: Bearer <token>", "secret: ${{ secrets.NPM_TOKEN }}",
    "AWS_SECRET_ACCESS_KEY=<redacted>", "DB_PASSWORD=your_password_here", 'api_key="YOUR_API_KEY"',
    "export ANTHROPIC_API_KEY=<paste key>", "password=None", "HF_TOKEN=hf_***", "token: REPLACE_ME",
    "client_secret: {{ .Values.clientSecret }}", "DATABASE_URL=postgres://user:password@localhost:5432/db",
    "curl -H \"Authorization: Bearer $GITHUB_TOKEN\" https://api.github.com/user", "SECRET_KEY=dev",
    "password = getpass.getpass()", "--password-stdin", "api_key: ''", "token=***", "SLACK_BOT_TOKEN=xoxb-your-token",
    "const apiKey = process.env.STRIPE_KEY;", "password: !vault |", "token: \"{{ vault_token }}\"",
    "export GITHUB_TOKEN=$(gh auth token)", "AWS_ACCESS_KEY_ID=AKIAXXXXXXXXXXXXXXXX", "key: example-key",
)


def _ns_placeholder(rng: random.Random) -> str:
    return rng.choice(_PLACEHOLDERS)


def _ns_numeric_id(rng: random.Random) -> str:
    return rng.choice([
        f"PID {rng.randint(100, 99999)}", f"issue #{rng.randint(1, 9999)}", f"order_id={rng.randint(10**6, 10**8)}",
        f"Job {rng.randint(10**8, 10**9)} finished", f"user_id: {rng.randint(1, 10**7)}",
        f"Build #{rng.randint(100, 9999)} succeeded",
        f"PR #{rng.randint(1, 5000)} merged", f"row {rng.randint(1, 10**6)} of {rng.randint(10**6, 10**7)}",
        f"Run {rng.randint(10**9, 10**10)} completed in 4m", f"chat_id={rng.randint(10**5, 10**6)}",
    ])


def _ns_counts(rng: random.Random) -> str:
    n = rng.randint(0, 200000)
    return rng.choice([
        f"token_count={rng.randint(1, 5000)}", f"max_tokens: {rng.choice([256, 1024, 4096, 8192])}", "PuttyPassword=0",
        f'"input_tokens": {n}, "output_tokens": {rng.randint(1, 4000)}', f"password_min_length = {rng.randint(8, 16)}",
        f"secret_count: {rng.randint(0, 9)}", f"key_size={rng.choice([2048, 3072, 4096])}",
        f"max_token_length={rng.choice([128, 512])}", f"tokens_per_second: {rng.randint(10, 90)}.{rng.randint(0, 9)}",
        f"PASSWORD_EXPIRY_DAYS={rng.choice([30, 60, 90])}", f"api_key_required: {rng.choice(['true', 'false'])}",
        "token_type: bearer", f"num_keys={rng.randint(1, 512)}", f"cache_read_input_tokens: {n}",
        f"SECRET_ROTATION_DAYS={rng.randint(7, 90)}", "password_reset_enabled=false",
    ])


def _k8s_suffix(rng: random.Random) -> str:
    return f"{rand(rng, K8S, 10)}-{rand(rng, K8S, 5)}"


def _ns_k8s(rng: random.Random) -> str:
    a = rng.choice(_APPS)
    return rng.choice([
        f"pod/{a}-{_k8s_suffix(rng)}", f"deployment.apps/{a} configured", f"secret/{a}-tls created",
        f"{a}-{_k8s_suffix(rng)}   1/1     Running   0          3d",
        f"configmap/{a}-config unchanged", f"serviceaccount/{a} created", f"$ kubectl rollout status deployment/{a}",
        f"      secretName: {a}-tls", f"replicaset.apps/{a}-{rand(rng, K8S, 10)} scaled",
        f"Successfully assigned default/{a}-{_k8s_suffix(rng)} to node-pool-1-{rand(rng, K8S, 4)}",
    ])


def _ns_base64_text(rng: random.Random) -> str:
    b = b64(rng.choice(_SENTENCES).encode())
    return rng.choice([
        f"$ echo {b} | base64 -d", f"data: {b}", f'  "content": "{b}",\n  "encoding": "base64"',
        f"Content-Transfer-Encoding: base64\n\n{b}",
    ])


def _ns_test_name(rng: random.Random) -> str:
    f, fn = rng.choice(_FILES), rng.choice(_FUNCS)
    return rng.choice([
        f"tests/unit/test_{f}.py::test_{fn} PASSED",
        f"  \u2713 should {fn.replace('_', ' ')} ({rng.randint(1, 90)} ms)",
        f"--- FAIL: Test{''.join(w.capitalize() for w in fn.split('_'))} (0.00s)",
        f"test_{fn}_handles_expired_credentials ... ok",
        "=== RUN   TestPasswordValidation/empty_password",
        f"FAILED tests/test_{f}.py::Test{f.capitalize()}::test_{fn} - AssertionError",
    ])


def _ns_css(rng: random.Random) -> str:
    return rng.choice([
        f"  color: #{hexstr(rng, 6)};", f"  background: #{hexstr(rng, 3)};", f"  --primary: #{hexstr(rng, 6).upper()};",
        f'<path fill="#{hexstr(rng, 6)}" d="M0 0h24v24H0z"/>',
        f"  border: 1px solid rgba(0, 0, 0, 0.{rng.randint(1, 9)});",
        f'className="css-{rand(rng, LODG, 7)}"',
    ])


def _ns_port(rng: random.Random) -> str:
    p = rng.choice([3000, 5000, 5173, 5432, 6379, 8000, 8080, 8443, 9000, 9090, 27017])
    return rng.choice([
        f"Listening on http://0.0.0.0:{p}", f"  Local:   http://localhost:{p}/",
        f"EXPOSE {p}", f"docker run -p {p}:{p} app",
        f"port: {p}", f"Error: listen EADDRINUSE: address already in use 127.0.0.1:{p}",
    ])


def _ns_hex_code(rng: random.Random) -> str:
    return rng.choice([
        f"error code 0x{rand(rng, HEXU, 8)}", "HRESULT 0x8007000E", "Process exited with code 0xC0000005",
        f"Segmentation fault at address 0x00007ffd{hexstr(rng, 8)}", f"errno=0x{hexstr(rng, 2)}", "pylint: E1101",
        "ORA-00942: table or view does not exist", "SQLSTATE[23505]: unique violation", f"crc32=0x{hexstr(rng, 8)}",
    ])


def _ns_env_plain(rng: random.Random) -> str:
    return rng.choice([
        "NODE_ENV=production", "AWS_REGION=eu-west-1", "LOG_LEVEL=debug",
        "DATABASE_URL=postgres://localhost:5432/app_dev",
        "REDIS_URL=redis://localhost:6379/0", "TOKEN_TTL_SECONDS=3600", "error: GITHUB_TOKEN is not set",
        "Missing required environment variable STRIPE_SECRET_KEY", 'export PATH="$HOME/.cargo/bin:$PATH"',
        "AWS_PROFILE=default", "DATABASE_URL=postgresql://app@db:5432/app", "KEY_FILE=/run/secrets/signing.pem",
    ])


def _ns_cloud_ids(rng: random.Random) -> str:
    return rng.choice([
        f"arn:aws:iam::{rng.randint(10**11, 10**12 - 1)}:role/{rng.choice(_APPS)}-deployer",
        f"InstanceId: i-0{hexstr(rng, 16)}", f"ami-0{hexstr(rng, 16)}", f"sg-0{hexstr(rng, 16)}",
        f"subnet-0{hexstr(rng, 16)}",
        f"arn:aws:s3:::{rng.choice(_ORGS)}-artifacts/builds/{_ver(rng)}.zip",
        f"projects/{rng.choice(_ORGS)}-prod/locations/us-central1/functions/{rng.choice(_APPS)}",
        f"Created stack {rng.choice(_APPS)}-prod (us-east-1)",
    ])


def _ns_llm_ids(rng: random.Random) -> str:
    return rng.choice([
        f'"id": "toolu_01{rand(rng, A62, 22)}"', f'"id": "msg_01{rand(rng, A62, 22)}"',
        f"chatcmpl-{rand(rng, A62, 29)}",
        f"request-id: req_011C{rand(rng, A62, 20)}", f'"tool_call_id": "call_{rand(rng, A62, 24)}"',
        '"model": "claude-3-5-sonnet-20241022"', '"model": "gpt-4o-2024-08-06"', f'"id": "resp_{hexstr(rng, 48)}"',
    ])


def _ns_stripe_ids(rng: random.Random) -> str:
    return rng.choice([
        f"cus_{rand(rng, A62, 14)}", f"PaymentIntent pi_3{rand(rng, A62, 23)} succeeded",
        f"charge ch_3{rand(rng, A62, 23)}",
        f"evt_1{rand(rng, A62, 23)}", f"price_1{rand(rng, A62, 23)}", f"subscription sub_1{rand(rng, A62, 23)} created",
        f"invoice in_1{rand(rng, A62, 23)} paid",
    ])


def _ns_code(rng: random.Random) -> str:
    return rng.choice([
        'token = request.headers.get("Authorization")', "if not api_key:\n    raise ValueError(\"missing api key\")",
        "def get_secret(name: str) -> str:", "const token = await getToken();",
        "password_hash = bcrypt.hashpw(pw, salt)",
        "self.api_key = api_key", "return jwt.decode(token, key, algorithms=[\"RS256\"])",
        "headers[\"Authorization\"] = f\"Bearer {token}\"", "func (c *Client) SetToken(token string) {",
        "let secret = env::var(\"APP_SECRET\")?;", "private readonly apiKey: string;",
        "password: str = Field(min_length=12)",
    ])


def _ns_public_material(rng: random.Random) -> str:
    choice = rng.randint(0, 2)
    if choice == 0:
        blob = b64(b"\x00\x00\x00\x0bssh-ed25519\x00\x00\x00\x20" + rng.randbytes(32))
        return f"ssh-ed25519 {blob} deploy-key"
    if choice == 1:
        body = b64(bytes.fromhex("3082035d30820245a003020102020900") + rng.randbytes(rng.randint(600, 845)))
        lines = "\n".join(body[i:i + 64] for i in range(0, len(body), 64))
        return f"-----BEGIN CERTIFICATE-----\n{lines}\n-----END CERTIFICATE-----"
    body = b64(bytes.fromhex("3059301306072a8648ce3d020106082a8648ce3d030107034200") + b"\x04" + rng.randbytes(64))
    lines = "\n".join(body[i:i + 64] for i in range(0, len(body), 64))
    return f"-----BEGIN PUBLIC KEY-----\n{lines}\n-----END PUBLIC KEY-----"


def _ns_metrics(rng: random.Random) -> str:
    return rng.choice([
        f"epoch {rng.randint(1, 50)} loss={rng.random():.4f} acc={rng.random():.4f}",
        f"Downloaded {rng.randint(1, 900)}.{rng.randint(0, 9)} MB in {rng.randint(1, 30)}.{rng.randint(0, 9)}s",
        f"p95={rng.randint(20, 900)}ms p99={rng.randint(900, 3000)}ms",
        f"Compiled {rng.randint(10, 900)} modules in {rng.random() * 9:.2f}s",
        f"Memory: {rng.randint(1, 15)}.{rng.randint(0, 9)}GiB / 16GiB",
        f"{rng.randint(1, 500)} passed, {rng.randint(0, 5)} skipped in {rng.random() * 60:.2f}s",
    ])


def _ns_identifiers(rng: random.Random) -> str:
    return rng.choice([
        "function getAccessTokenFromHeader(req)", "class PasswordResetTokenGenerator", "ERR_INVALID_API_KEY",
        "npm ERR! code E401", "TokenExpiredError: jwt expired", "KeyError: 'api_key'", f"main.{hexstr(rng, 8)}.js",
        f"app.{hexstr(rng, 8)}.css", f"chunk-{rand(rng, A62, 8)}.js",
        "AWS_SECRET_ACCESS_KEY", "__pycache__/auth.cpython-311.pyc",
        f"vendor.{hexstr(rng, 20)}.bundle.js",
    ])


def _ns_credential_words(rng: random.Random) -> str:
    """Prose and commands that name a credential next to a value that is not one: the three
    leak shapes' look-alikes (a credential word before a hash, a path, a version; ``curl -u``
    with no password or a variable; ``git push -u``)."""
    app, n = rng.choice(_APPS), rng.randint(3, 900)
    dom = f"api.{rng.choice(_ORGS)}.com"
    return rng.choice([
        f"the token endpoint returned 200 in {n} ms", f"POST /oauth/token 200 {n}ms",
        f"password reset link sent to the user (request {n})",
        f"secret stored at /var/lib/{app}/secrets/{rng.choice(_FILES)}.json",
        f"rotate the deploy token, see commit {hexstr(rng, 40)}",
        f"$ curl -u {rng.choice(['deploy', 'admin', 'ci'])} https://{dom}/v1/status",
        f'$ curl -u "$API_USER:$API_PASSWORD" https://{dom}/v1/status',
        f'$ curl --user "${{REGISTRY_USER}}:${{REGISTRY_TOKEN}}" https://{dom}/v2/_catalog',
        f"api key model gpt-4o-mini-2024-07-{rng.randint(10, 28)}",
        f"access token expires at {iso_timestamp(rng)}",
        f"secret name: {app}-prod-database-credentials", "the api key goes in the X-Api-Key header",
        f"token usage: prompt_tokens={n} completion_tokens={rng.randint(1, 900)}",
        f"$ git push -u origin feature/token-refresh-{n}",
        f"credential helper 'store' configured for https://{dom}",
        f"auth middleware took {n}ms for /api/{rng.choice(_DIRS)}",
        f"secret /run/secrets/{app}_db_password mounted read-only",
        f"docker run --user {rng.choice(['1000:1000', 'app:app', 'node:node'])} acme/{app}:{_ver(rng)}",
    ])


_NON_SECRET_CATEGORIES: dict[str, Callable[[random.Random], str]] = {
    "git_sha_short": _ns_git_short, "git_sha_full": _ns_git_full, "semver": _ns_semver, "file_path": _ns_path,
    "digest": _ns_digest, "docker": _ns_docker, "url": _ns_url, "timestamp": _ns_timestamp,
    "placeholder": _ns_placeholder, "numeric_id": _ns_numeric_id, "token_like_count": _ns_counts,
    "k8s_name": _ns_k8s, "base64_text": _ns_base64_text, "test_name": _ns_test_name, "css_color": _ns_css,
    "port": _ns_port, "hex_error_code": _ns_hex_code, "env_without_secret": _ns_env_plain,
    "cloud_resource_id": _ns_cloud_ids, "llm_api_id": _ns_llm_ids, "payment_object_id": _ns_stripe_ids,
    "code": _ns_code, "public_key_material": _ns_public_material, "metrics": _ns_metrics,
    "identifier": _ns_identifiers, "credential_words": _ns_credential_words,
}


def non_secret_cases(seed: int, per_category: int = 14) -> list[NonSecretCase]:
    out: list[NonSecretCase] = []
    for cat, gen in _NON_SECRET_CATEGORIES.items():
        rng = random.Random(f"{seed}:non_secret:{cat}")
        seen: set[str] = set()
        for _ in range(per_category * 20):
            if len(seen) >= per_category:
                break
            text = gen(rng)
            if text not in seen:
                seen.add(text)
                out.append(NonSecretCase(text, cat))
    return out


_UUID_TEMPLATES = (
    "run_id={u}", "Request ID: {u}", "    uid: {u}", '"sessionId": "{u}"', "Created workspace {u}",
    "correlation-id: {u}", "$ docker volume rm {u}", "trace_id={u} status=ok", "GET /api/v1/orders/{u} 200 12ms",
    "session {u} resumed", "Deleted project {u}", "{{\"parentUuid\": \"{u}\", \"type\": \"user\"}}",
)


def uuid_cases(seed: int, n: int = 36) -> list[UuidCase]:
    rng = random.Random(f"{seed}:uuid")
    out = []
    for i in range(n):
        u = uuid4(rng) if rng.random() < 0.8 else str(_uuid.UUID(int=rng.getrandbits(128), version=1))
        if rng.random() < 0.15:
            u = u.upper()
        text = _UUID_TEMPLATES[i % len(_UUID_TEMPLATES)].format(u=u)
        out.append(UuidCase(text, (u,)))
    return out
