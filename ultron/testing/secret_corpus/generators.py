"""Sample functions for token formats with structure: JWTs, base64-JSON tokens, webhooks, connection strings."""

from __future__ import annotations

import base64
import hashlib
import json
import random

from ultron.testing.secret_corpus.model import (
    A62, B58, B64U, DG, LO, LODG, PWD, UPDG, Sample, b64, b64url, hexstr, plain, rand, uuid4,
)


# ----------------------------------------------------------------------------- special generators


def _jwt(rng: random.Random, alg: str, payload: dict, kid: str | None = None, typ: str | None = "JWT") -> Sample:
    header: dict = {"alg": alg}
    if typ:
        header["typ"] = typ
    if kid:
        header["kid"] = kid
    sig = {"HS256": 32, "HS384": 48, "HS512": 64, "RS256": 256, "PS256": 256, "ES256": 64, "EdDSA": 64}[alg]
    h = b64url(json.dumps(header, separators=(",", ":")).encode())
    p = b64url(json.dumps(payload, separators=(",", ":")).encode())
    token = f"{h}.{p}.{b64url(rng.randbytes(sig))}"
    return Sample(token, (token,), (h,) if not kid else ())


def _epoch(rng: random.Random) -> int:
    return rng.randint(1_690_000_000, 1_760_000_000)


def jwt_generic_hs(rng: random.Random) -> Sample:
    iat = _epoch(rng)
    return _jwt(rng, rng.choice(["HS256", "HS512"]), {
        "sub": str(rng.randint(1000, 9_999_999)), "name": rng.choice(["deploy-bot", "api", "worker"]),
        "role": rng.choice(["admin", "user", "service"]), "iat": iat, "exp": iat + 3600})


def jwt_auth0(rng: random.Random) -> Sample:
    iat = _epoch(rng)
    tenant = rng.choice(["acme", "dev-x7k2", "widgets-prod"])
    return _jwt(rng, "RS256", {
        "iss": f"https://{tenant}.us.auth0.com/", "sub": f"auth0|{hexstr(rng, 24)}",
        "aud": ["https://api.example.com", f"https://{tenant}.us.auth0.com/userinfo"],
        "iat": iat, "exp": iat + 86400, "scope": "openid profile email read:orders",
        "azp": rand(rng, A62, 32)}, kid=rand(rng, B64U, 22))


def jwt_k8s(rng: random.Random) -> Sample:
    iat = _epoch(rng)
    ns, sa = rng.choice([("default", "default"), ("ci", "deployer"), ("monitoring", "prometheus")])
    return _jwt(rng, "RS256", {
        "aud": ["https://kubernetes.default.svc.cluster.local"], "exp": iat + 31_536_000, "iat": iat,
        "iss": "https://kubernetes.default.svc.cluster.local",
        "kubernetes.io": {"namespace": ns, "serviceaccount": {"name": sa, "uid": uuid4(rng)}},
        "nbf": iat, "sub": f"system:serviceaccount:{ns}:{sa}"}, kid=rand(rng, B64U, 43), typ=None)


def jwt_supabase(rng: random.Random) -> Sample:
    iat = _epoch(rng)
    return _jwt(rng, "HS256", {"iss": "supabase", "ref": rand(rng, LO, 20),
                               "role": rng.choice(["service_role", "anon"]), "iat": iat, "exp": iat + 315_360_000})


def jwt_firebase(rng: random.Random) -> Sample:
    iat = _epoch(rng)
    proj = rng.choice(["shop-app-4f21", "chat-prod", "notes-dev"])
    return _jwt(rng, "RS256", {
        "iss": f"https://securetoken.google.com/{proj}", "aud": proj, "auth_time": iat,
        "user_id": rand(rng, A62, 28), "sub": rand(rng, A62, 28), "iat": iat, "exp": iat + 3600,
        "firebase": {"identities": {}, "sign_in_provider": "password"}}, kid=hexstr(rng, 40))


def jwt_azure(rng: random.Random) -> Sample:
    iat = _epoch(rng)
    tid = uuid4(rng)
    return _jwt(rng, "RS256", {
        "aud": "https://management.azure.com", "iss": f"https://sts.windows.net/{tid}/", "iat": iat,
        "nbf": iat, "exp": iat + 4200, "appid": uuid4(rng), "oid": uuid4(rng), "tid": tid,
        "ver": "1.0", "uti": rand(rng, B64U, 22)}, kid=rand(rng, B64U, 27))


def jwt_gha_oidc(rng: random.Random) -> Sample:
    iat = _epoch(rng)
    repo = rng.choice(["acme/api", "octo/web", "team/infra"])
    return _jwt(rng, "RS256", {
        "jti": uuid4(rng), "sub": f"repo:{repo}:ref:refs/heads/main", "aud": "sts.amazonaws.com",
        "ref": "refs/heads/main", "sha": hexstr(rng, 40), "repository": repo, "run_id": str(rng.randint(10**9, 10**10)),
        "iss": "https://token.actions.githubusercontent.com", "nbf": iat, "exp": iat + 600, "iat": iat},
        kid=hexstr(rng, 40).upper())


def jwt_es(rng: random.Random) -> Sample:
    iat = _epoch(rng)
    return _jwt(rng, "ES256", {"iss": rand(rng, UPDG, 10), "iat": iat, "exp": iat + 1200,
                               "aud": "appstoreconnect-v1"}, kid=rand(rng, UPDG, 10))


def jwe(rng: random.Random) -> Sample:
    h = b64url(b'{"alg":"RSA-OAEP-256","enc":"A256GCM"}')
    parts = [h, b64url(rng.randbytes(256)), b64url(rng.randbytes(12)), b64url(rng.randbytes(rng.randint(120, 260))),
             b64url(rng.randbytes(16))]
    token = ".".join(parts)
    return Sample(token, (token,), (h,))


def jwt_turso(rng: random.Random) -> Sample:
    iat = _epoch(rng)
    return _jwt(rng, "EdDSA", {"a": "rw", "iat": iat, "id": uuid4(rng)}, typ="JWT")


def _b64_json_token(prefix: str, obj: dict, suffix: str = "") -> str:
    return prefix + base64.b64encode(json.dumps(obj, separators=(",", ":")).encode()).decode().rstrip("=") + suffix


def grafana_cloud(rng: random.Random) -> Sample:
    v = _b64_json_token("glc_", {"o": str(rng.randint(100000, 999999)),
                                 "n": f"stack-{rng.randint(100000, 999999)}-hm-read-{rng.choice(['ci', 'agent'])}",
                                 "k": rand(rng, A62, 24), "m": {"r": rng.choice(["prod-us-east-0", "prod-eu-west-2"])}})
    return plain(v, "glc_")


def grafana_legacy(rng: random.Random) -> Sample:
    return plain(_b64_json_token("", {"k": rand(rng, A62, 32), "n": rng.choice(["ci", "deploy", "admin"]),
                                       "id": rng.randint(1, 99)}))


def sentry_org_token(rng: random.Random) -> Sample:
    v = _b64_json_token("sntrys_", {"iat": float(_epoch(rng)), "url": "https://sentry.io",
                                    "region_url": "https://us.sentry.io",
                                    "org": rng.choice(["acme", "widgets", "octo"])},
                        "_" + rand(rng, A62, 43))
    return plain(v, "sntrys_")


def onepassword_sa(rng: random.Random) -> Sample:
    v = "ops_" + b64url(json.dumps({
        "signInAddress": "my.1password.com", "userAuth": {"method": "SRPg-4096", "alg": "PBES2g-HS256",
                                                         "iterations": 650000, "salt": rand(rng, B64U, 22)},
        "email": f"{rand(rng, LODG, 13)}@1passwordserviceaccounts.com", "srpX": hexstr(rng, 64),
        "muk": {"alg": "A256GCM", "ext": True, "k": rand(rng, B64U, 43), "key_ops": ["encrypt", "decrypt"],
                "kty": "oct", "kid": "mp"}, "secretKey": "A3-" + rand(rng, UPDG, 6) + "-" + rand(rng, UPDG, 26),
        "throttleSecret": {"seed": hexstr(rng, 64), "uuid": rand(rng, UPDG, 26)}, "deviceUuid": rand(rng, LODG, 26)},
        separators=(",", ":")).encode())
    return plain(v, "ops_")


def intercom(rng: random.Random) -> Sample:
    u = uuid4(rng).replace("-", "_")
    return plain(base64.b64encode(f"tok:{u}:1:0".encode()).decode())


def discord_bot(rng: random.Random) -> Sample:
    uid = str(rng.randint(10**17, 10**19 - 1))
    return plain(b64url(uid.encode()) + "." + rand(rng, B64U, 6) + "." + rand(rng, B64U, 38))


def mapbox(rng: random.Random) -> Sample:
    body = b64url(json.dumps({"u": rng.choice(["acme", "geo-team", "mapsdev"]), "a": rand(rng, LODG, 25)},
                            separators=(",", ":")).encode())
    return plain(f"sk.{body}.{rand(rng, B64U, 22)}", "sk.eyJ1Ijoi")


def azure_client_secret(rng: random.Random) -> Sample:
    alpha = A62 + "_~.-"
    return plain(rand(rng, alpha, 3) + rng.choice(DG) + "Q~" + rand(rng, alpha, 34))


def _urlenc_b64(raw: bytes) -> str:
    return b64(raw).replace("+", "%2B").replace("/", "%2F").replace("=", "%3D")


def azure_storage_conn(rng: random.Random) -> Sample:
    key = b64(rng.randbytes(64))
    acct = rng.choice(["acmeprodstore", "stwebdev01", "logsarchive"])
    v = (f"DefaultEndpointsProtocol=https;AccountName={acct};AccountKey={key};"
         f"EndpointSuffix=core.windows.net")
    return Sample(v, (key,))


def azure_sas(rng: random.Random) -> Sample:
    sig = _urlenc_b64(rng.randbytes(32))
    acct = rng.choice(["acmeprodstore", "stwebdev01", "exportsweu"])
    v = (f"https://{acct}.blob.core.windows.net/exports/report.csv?sv=2022-11-02&ss=b&srt=sco&sp=rl"
         f"&se=2025-12-31T23:59:59Z&st=2024-01-01T00:00:00Z&spr=https&sig={sig}")
    return Sample(v, (sig,))


def azure_servicebus(rng: random.Random) -> Sample:
    key = b64(rng.randbytes(32))
    ns = rng.choice(["orders-bus", "acme-events", "sb-prod-weu"])
    v = (f"Endpoint=sb://{ns}.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;"
         f"SharedAccessKey={key}")
    return Sample(v, (key,))


def azure_cosmos(rng: random.Random) -> Sample:
    key = b64(rng.randbytes(64))
    acct = rng.choice(["acme-cosmos", "catalog-db", "cosmos-dev"])
    return Sample(f"AccountEndpoint=https://{acct}.documents.azure.com:443/;AccountKey={key};", (key,))


def azure_eventhub(rng: random.Random) -> Sample:
    key = b64(rng.randbytes(32))
    return Sample(f"Endpoint=sb://telemetry-ns.servicebus.windows.net/;SharedAccessKeyName=send;"
                  f"SharedAccessKey={key};EntityPath=events", (key,))


def cloudinary(rng: random.Random) -> Sample:
    secret = rand(rng, B64U, 27)
    return Sample(f"cloudinary://{rand(rng, DG, 15)}:{secret}@{rng.choice(['acme', 'dxyz12ab', 'media-prod'])}",
                  (secret,))


def slack_webhook(rng: random.Random) -> Sample:
    token = rand(rng, A62, 24)
    v = f"https://hooks.slack.com/services/T{rand(rng, UPDG, 8)}/B{rand(rng, UPDG, 10)}/{token}"
    return Sample(v, (token,))


def discord_webhook(rng: random.Random) -> Sample:
    token = rand(rng, B64U, 68)
    return Sample(f"https://discord.com/api/webhooks/{rng.randint(10**17, 10**19 - 1)}/{token}", (token,))


def teams_webhook(rng: random.Random) -> Sample:
    hx = hexstr(rng, 32)
    tenant = rng.choice(["acme", "contoso", "widgetsinc"])
    v = (f"https://{tenant}.webhook.office.com/webhookb2/{uuid4(rng)}@{uuid4(rng)}/IncomingWebhook/"
         f"{hx}/{uuid4(rng)}")
    return Sample(v, (hx,))


def gchat_webhook(rng: random.Random) -> Sample:
    key = "AIzaSy" + rand(rng, B64U, 33)
    tok = rand(rng, B64U, 43)
    v = f"https://chat.googleapis.com/v1/spaces/AAAA{rand(rng, B64U, 7)}/messages?key={key}&token={tok}%3D"
    return Sample(v, (key, tok), ("AIzaSy",))


def sentry_dsn(rng: random.Random) -> Sample:
    key = hexstr(rng, 32)
    region = rng.choice(["", "us.", "de."])
    v = f"https://{key}@o{rng.randint(100000, 4_999_999)}.ingest.{region}sentry.io/{rng.randint(10**6, 10**16)}"
    return Sample(v, (key,))


def telegram(rng: random.Random) -> Sample:
    return plain(f"{rng.randint(10**8, 10**10 - 1)}:AA{rand(rng, B64U, 33)}")


def twitter_bearer(rng: random.Random) -> Sample:
    lead = "A" * 21
    return plain(lead + rand(rng, A62, 20) + "AAAAAAA" + rand(rng, A62 + "%", 62), lead)


def plaid_access(rng: random.Random) -> Sample:
    env = rng.choice(["sandbox", "production", "development"])
    return plain(f"access-{env}-{uuid4(rng)}", f"access-{env}-")


def hubspot(rng: random.Random) -> Sample:
    region = rng.choice(["na1", "eu1", "na2"])
    return plain(f"pat-{region}-{uuid4(rng)}", f"pat-{region}-")


def asana(rng: random.Random) -> Sample:
    return plain(f"2/{rng.randint(10**15, 10**16 - 1)}/{rng.randint(10**15, 10**16 - 1)}:{hexstr(rng, 32)}")


def mailchimp(rng: random.Random) -> Sample:
    return plain(f"{hexstr(rng, 32)}-us{rng.randint(1, 21)}")


def fcm(rng: random.Random) -> Sample:
    return plain(f"AAAA{rand(rng, B64U, 7)}:APA91b{rand(rng, B64U, 134)}", ":APA91b")


def basic_auth(rng: random.Random) -> Sample:
    user = rng.choice(["admin", "deploy", "ci-bot", "api"])
    return plain(b64(f"{user}:{password(rng)}".encode()))


def docker_auth(rng: random.Random) -> Sample:
    user = rng.choice(["acmeci", "deploybot", "jdoe"])
    return plain(b64(f"{user}:dckr_pat_{rand(rng, B64U, 27)}".encode()))


def sidekiq(rng: random.Random) -> Sample:
    return plain(f"{hexstr(rng, 8)}:{hexstr(rng, 8)}")


def password(rng: random.Random, lo: int = 14, hi: int = 24) -> str:
    return rng.choice(A62) + rand(rng, PWD, rng.randint(lo, hi) - 2) + rng.choice(A62)


def human_password(rng: random.Random) -> Sample:
    word = rng.choice(["Summer", "Winter", "Dragon", "Monkey", "Sunshine", "Password", "Welcome", "Football",
                       "Tigers", "Galaxy", "Coffee", "Rainbow"])
    return plain(f"{word}{rng.randint(1970, 2026)}{rng.choice('!#$@*.')}{rng.choice(['', 'x', 'Q', '9'])}")


_WORDS = ("correct", "horse", "battery", "staple", "orbit", "maple", "violet", "canyon", "ember", "falcon",
          "glacier", "harbor", "juniper", "lantern", "meadow", "nickel", "quartz", "ripple", "saddle", "timber")


def passphrase(rng: random.Random) -> Sample:
    return plain("-".join(rng.sample(_WORDS, 4)) + str(rng.randint(10, 99)))


def django_key(rng: random.Random, insecure: bool) -> Sample:
    alphabet = LODG + "!@#%^&*(-_=+)"
    body = rand(rng, alphabet, 50)
    return plain(("django-insecure-" if insecure else "") + body, *(("django-insecure-",) if insecure else ()))


def wif(rng: random.Random) -> Sample:
    payload = b"\x80" + rng.randbytes(32) + b"\x01"
    check = hashlib.sha256(hashlib.sha256(payload).digest()).digest()[:4]
    n = int.from_bytes(payload + check, "big")
    out = ""
    while n:
        n, r = divmod(n, 58)
        out = B58[r] + out
    return plain(out)


def wireguard(rng: random.Random) -> Sample:
    return plain(b64(rng.randbytes(32)))


def ibm_like(rng: random.Random) -> Sample:
    return plain(rand(rng, B64U, 44))
