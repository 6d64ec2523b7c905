"""Sample functions for database URLs, private-key blocks (DER-shaped PEM, OpenSSH, PGP with its CRC-24,
PuTTY) and PII with its checksums (Luhn, IBAN mod-97, ISO 7064 for Chinese ids)."""

from __future__ import annotations

import json
import random
from typing import Callable, Sequence

from ultron.testing.secret_corpus.generators import password
from ultron.testing.secret_corpus.model import A62, DG, HEXU, LODG, UP, UPDG, URLSAFE, Sample, b64, hexstr, plain, rand


# ---- database URLs: the password is the secret


def db_url(template: str, users: Sequence[str], hosts: Sequence[str]) -> Callable[[random.Random], Sample]:
    def make(rng: random.Random) -> Sample:
        pw = rng.choice(A62) + rand(rng, URLSAFE, rng.randint(10, 28)) + rng.choice(A62)
        if rng.random() < 0.25:  # a percent-encoded symbol, as URL-builders write them
            pw = pw[:5] + rng.choice(["%21", "%40", "%23", "%24"]) + pw[5:]
        v = template.format(user=rng.choice(users), pw=pw, host=rng.choice(hosts),
                            db=rng.choice(["app", "orders", "analytics", "main"]), r=rand(rng, LODG, 5))
        return Sample(v, (pw,))
    return make


PG_HOSTS = ("db.internal", "localhost", "prod-db.c9akciq32xyz.us-east-1.rds.amazonaws.com",
             "ep-cool-darkness-123456.us-east-2.aws.neon.tech", "10.0.3.17")
USERS = ("app", "postgres", "deploy", "admin", "api_user", "svc_orders")


def kafka_jaas(rng: random.Random) -> Sample:
    pw = password(rng, 16, 32).replace('"', "")
    user = rng.choice(["svc-orders", "ABCDEFGH12345678", "consumer"])
    return Sample(f'org.apache.kafka.common.security.plain.PlainLoginModule required username="{user}" '
                  f'password="{pw}";', (pw,))


def pg_keywords(rng: random.Random) -> Sample:
    pw = password(rng, 12, 24).replace("'", "")
    return Sample(f"host={rng.choice(PG_HOSTS)} port=5432 dbname=app user={rng.choice(USERS)} password={pw} "
                  f"sslmode=require", (pw,))


def mssql_ado(rng: random.Random) -> Sample:
    pw = password(rng, 12, 24).replace(";", "")
    return Sample(f"Server=tcp:{rng.choice(['acme-sql', 'ordersdb'])}.database.windows.net,1433;"
                  f"Initial Catalog=app;User ID={rng.choice(USERS)};Password={pw};Encrypt=True;", (pw,))


def git_cred_url(host: str, user: str, token: Callable[[random.Random], str]) -> Callable[[random.Random], Sample]:
    def make(rng: random.Random) -> Sample:
        tok = token(rng)
        repo = rng.choice(["acme/api", "octo/web-app", "infra/terraform-modules"])
        return Sample(f"https://{user}:{tok}@{host}/{repo}.git", (tok,))
    return make


def pip_index(rng: random.Random) -> Sample:
    pw = rand(rng, A62, 24)
    return Sample(f"https://{rng.choice(['ci', 'deploy', 'build'])}:{pw}@pypi.acme-internal.com/simple", (pw,))


# ---- private-key blocks


def pem(label: str, prefix: bytes, total: int, width: int = 64,
         headers: Callable[[random.Random], list[str]] | None = None,
         json_doc: Callable[[random.Random, str], str] | None = None) -> Callable[[random.Random], Sample]:
    def make(rng: random.Random) -> Sample:
        body = b64(prefix + rng.randbytes(total - len(prefix)))
        lines = [body[i:i + width] for i in range(0, len(body), width)]
        head = headers(rng) if headers else []
        block = "\n".join([f"-----BEGIN {label}-----", *head, *([""] if head else []), *lines,
                           f"-----END {label}-----"])
        public = b64(prefix[: len(prefix) // 3 * 3])
        return Sample(block, tuple(ln for ln in lines if len(ln) >= 12), (public,) if public else (),
                      json_doc(rng, block) if json_doc else "")
    return make


def gcp_sa_doc(rng: random.Random, block: str) -> str:
    proj = rng.choice(["acme-prod-381209", "data-pipeline-dev", "ml-training-42"])
    sa = rng.choice(["deployer", "ci-runner", "bq-reader"])
    return json.dumps({
        "type": "service_account", "project_id": proj, "private_key_id": hexstr(rng, 40), "private_key": block + "\n",
        "client_email": f"{sa}@{proj}.iam.gserviceaccount.com", "client_id": str(rng.randint(10**20, 10**21 - 1)),
        "auth_uri": "https://accounts.google.com/o/oauth2/auth", "token_uri": "https://oauth2.googleapis.com/token",
    }, indent=2)


def legacy_enc_headers(rng: random.Random) -> list[str]:
    return ["Proc-Type: 4,ENCRYPTED", f"DEK-Info: AES-256-CBC,{rand(rng, HEXU, 32)}"]


def _crc24(data: bytes) -> int:
    crc = 0xB704CE
    for byte in data:
        crc ^= byte << 16
        for _ in range(8):
            crc <<= 1
            if crc & 0x1000000:
                crc ^= 0x1864CFB
    return crc & 0xFFFFFF


def pgp(rng: random.Random) -> Sample:
    data = b"\x95\x03\xc6\x04" + rng.randbytes(4) + b"\x01\x08\x00" + rng.randbytes(rng.randint(900, 1100))
    body = b64(data)
    lines = [body[i:i + 64] for i in range(0, len(body), 64)]
    crc = "=" + b64(_crc24(data).to_bytes(3, "big"))
    block = "\n".join(["-----BEGIN PGP PRIVATE KEY BLOCK-----", "", *lines, crc, "-----END PGP PRIVATE KEY BLOCK-----"])
    return Sample(block, tuple(ln for ln in lines if len(ln) >= 12), (b64(data[:3]),))


def openssh(key_type: bytes, total: int) -> Callable[[random.Random], Sample]:
    def make(rng: random.Random) -> Sample:
        head = (b"openssh-key-v1\x00" + b"\x00\x00\x00\x04none" * 2 + b"\x00\x00\x00\x00\x00\x00\x00\x01"
                + len(key_type).to_bytes(4, "big") + key_type)
        return pem("OPENSSH PRIVATE KEY", head, total, width=70)(rng)
    return make


def putty(rng: random.Random) -> Sample:
    pub = b64(b"\x00\x00\x00\x0bssh-ed25519\x00\x00\x00\x20" + rng.randbytes(32))
    priv = b64(b"\x00\x00\x00\x20" + rng.randbytes(32))
    text = "\n".join([
        "PuTTY-User-Key-File-3: ssh-ed25519", "Encryption: none",
        f"Comment: ed25519-key-2024{rng.randint(1, 12):02d}01",
        "Public-Lines: 2", pub[:64], pub[64:], "Private-Lines: 1", priv, f"Private-MAC: {hexstr(rng, 64)}"])
    return Sample(text, (priv,), ("AAAAI",))


def ec_sec1(rng: random.Random) -> Sample:
    der = (b"\x30\x77\x02\x01\x01\x04\x20" + rng.randbytes(32) + b"\xa0\x0a\x06\x08\x2a\x86\x48\xce\x3d\x03\x01\x07"
           + b"\xa1\x44\x03\x42\x00\x04" + rng.randbytes(64))
    body = b64(der)
    lines = [body[i:i + 64] for i in range(0, len(body), 64)]
    block = "\n".join(["-----BEGIN EC PRIVATE KEY-----", *lines, "-----END EC PRIVATE KEY-----"])
    return Sample(block, tuple(ln for ln in lines if len(ln) >= 12), ("MHcCAQEEI",))


# ---- PII with checksums


def _luhn_complete(prefix: str, length: int, rng: random.Random) -> str:
    body = prefix + rand(rng, DG, length - len(prefix) - 1)
    total = 0
    for i, ch in enumerate(reversed(body)):
        d = int(ch)
        if i % 2 == 0:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return body + str((10 - total % 10) % 10)


def card(prefixes: Sequence[str], length: int) -> Callable[[random.Random], Sample]:
    def make(rng: random.Random) -> Sample:
        num = _luhn_complete(rng.choice(prefixes), length, rng)
        style = rng.choice(["compact", "spaces", "dashes"])
        if style != "compact":
            sep = " " if style == "spaces" else "-"
            groups = [4, 6, 5] if length == 15 else [4] * (length // 4) + ([length % 4] if length % 4 else [])
            out, i = [], 0
            for g in groups:
                out.append(num[i:i + g])
                i += g
            num = sep.join(out)
        return plain(num)
    return make


_IBAN_BBAN = {
    "DE": lambda rng: rand(rng, DG, 18),
    "GB": lambda rng: rng.choice(["NWBK", "BARC", "HBUK", "LOYD"]) + rand(rng, DG, 14),
    "FR": lambda rng: rand(rng, DG, 10) + rand(rng, UPDG, 11) + rand(rng, DG, 2),
    "NL": lambda rng: rng.choice(["ABNA", "INGB", "RABO"]) + rand(rng, DG, 10),
    "ES": lambda rng: rand(rng, DG, 20),
    "IT": lambda rng: rng.choice(UP) + rand(rng, DG, 10) + rand(rng, UPDG, 12),
    "CH": lambda rng: rand(rng, DG, 17),
}


def iban(spaced: bool) -> Callable[[random.Random], Sample]:
    def make(rng: random.Random) -> Sample:
        cc = rng.choice(sorted(_IBAN_BBAN))
        bban = _IBAN_BBAN[cc](rng)
        numeric = "".join(str(int(ch, 36)) for ch in bban + cc + "00")
        check = 98 - int(numeric) % 97
        number = f"{cc}{check:02d}{bban}"
        if spaced:
            number = " ".join(number[i:i + 4] for i in range(0, len(number), 4))
        return plain(number)
    return make


def ssn(rng: random.Random) -> Sample:
    area = rng.choice([a for a in range(1, 900) if a != 666])
    return plain(f"{area:03d}-{rng.randint(1, 99):02d}-{rng.randint(1, 9999):04d}")


def nino(rng: random.Random) -> Sample:
    first = rng.choice("ABCEGHJKLMNPRSTWXYZ")
    second = rng.choice("ABCEGHJKLMNPRSTWXYZ".replace("O", ""))
    digits = rand(rng, DG, 6)
    if rng.random() < 0.5:
        return plain(f"{first}{second} {digits[:2]} {digits[2:4]} {digits[4:]} {rng.choice('ABCD')}")
    return plain(f"{first}{second}{digits}{rng.choice('ABCD')}")


def cn_id(rng: random.Random) -> Sample:
    region = rng.choice(["110101", "310104", "440305", "330106", "510107", "420102"])
    birth = f"{rng.randint(1955, 2004)}{rng.randint(1, 12):02d}{rng.randint(1, 28):02d}"
    body = region + birth + rand(rng, DG, 3)
    weights = [7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2]
    check = "10X98765432"[sum(int(d) * w for d, w in zip(body, weights)) % 11]
    return plain(body + check)


_FIRST = ("james", "maria", "wei", "priya", "lucas", "sofia", "ahmed", "yuki", "olga", "mateo", "chloe", "noah")
_LAST = ("smith", "garcia", "zhang", "patel", "mueller", "rossi", "tanaka", "kowalski", "silva", "nguyen")


def email(rng: random.Random) -> Sample:
    f, l_ = rng.choice(_FIRST), rng.choice(_LAST)
    local = rng.choice([f"{f}.{l_}", f"{f[0]}{l_}", f"{f}{rng.randint(1, 99)}", f"{f}_{l_}", f"{l_}.{f}+billing"])
    dom = rng.choice(["gmail.com", "outlook.com", "acme-corp.com", "proton.me", "yahoo.co.uk", "fastmail.fm",
                      "company.io", "mail.example.de"])
    return plain(f"{local}@{dom}")


def phone_us(rng: random.Random) -> Sample:
    a, e, n = rng.randint(201, 989), rng.randint(200, 999), rng.randint(0, 9999)
    return plain(rng.choice([f"({a}) {e}-{n:04d}", f"{a}-{e}-{n:04d}", f"+1 {a} {e} {n:04d}", f"+1-{a}-{e}-{n:04d}",
                              f"{a}.{e}.{n:04d}"]))


def phone_intl(rng: random.Random) -> Sample:
    return plain(rng.choice([
        f"+44 20 {rng.randint(7000, 8999)} {rng.randint(0, 9999):04d}",
        f"+44 7{rng.randint(100, 999)} {rng.randint(100000, 999999)}",
        f"+49 30 {rng.randint(1000000, 99999999)}",
        f"+33 6 {rng.randint(10, 99)} {rng.randint(10, 99)} {rng.randint(10, 99)} {rng.randint(10, 99)}",
        f"+91 {rng.randint(70000, 99999)} {rng.randint(10000, 99999)}",
        f"+61 4{rng.randint(10, 99)} {rng.randint(100, 999)} {rng.randint(100, 999)}",
    ]))


def cn_mobile(rng: random.Random) -> Sample:
    num = "1" + rng.choice("3456789") + rand(rng, DG, 9)
    return plain(rng.choice([num, f"{num[:3]} {num[3:7]} {num[7:]}", f"+86 {num}", f"+86-{num}"]))


def ipv4(rng: random.Random) -> Sample:
    while True:
        a = rng.randint(1, 223)
        if a in (10, 100, 127, 169, 172, 192, 198, 203, 0):
            continue
        return plain(f"{a}.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}")


def ipv6(rng: random.Random) -> Sample:
    head = rng.choice(["2a01:4f8", "2600:1f18", "2001:41d0", "2a00:1450", "2607:f8b0"])
    groups = [f"{rng.randint(0, 0xffff):x}" for _ in range(rng.choice([3, 6]))]
    if len(groups) == 6:
        return plain(head + ":" + ":".join(groups))
    return plain(head + ":" + ":".join(groups) + "::" + f"{rng.randint(1, 0xffff):x}")


_USERNAMES = ("jdoe", "mchen", "priya.k", "alexw", "sgarcia", "tnguyen", "olga", "dev-kim", "rkowalski", "yuki_t")


def home(kind: str) -> Callable[[random.Random], Sample]:
    def make(rng: random.Random) -> Sample:
        user = rng.choice(_USERNAMES)
        rest = rng.choice(["projects/api/app/main.py", "code/web/src/index.ts", "work/infra/main.tf",
                           "repos/ml/train.py", "src/service/handlers.go"])
        if kind == "linux":
            v = f"/home/{user}/{rest}"
        elif kind == "mac":
            v = f"/Users/{user}/{rest}"
        else:
            v = f"C:\\Users\\{user}\\" + rest.replace("/", "\\")
        return Sample(v, (user,))
    return make
