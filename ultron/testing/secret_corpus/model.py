"""The building blocks: alphabets, :class:`Sample`, :class:`TokenFormat` and its builders, the cases."""

from __future__ import annotations

import base64
import random
import string
import uuid as _uuid
from dataclasses import dataclass
from typing import Callable, Sequence


FAMILIES: tuple[str, ...] = (
    "cloud", "code_host", "ci", "package_registry", "payment", "messaging", "observability",
    "ai_provider", "jwt", "private_key", "database", "generic_assignment", "pii",
)

LINE_CONTEXTS: tuple[str, ...] = ("env", "export", "json", "yaml", "cli", "http_header", "log", "python", "toml",
                                  "xml", "php", "go")
BLOCK_CONTEXTS: tuple[str, ...] = ("pem_file", "json_escaped", "yaml_block", "env_escaped", "python_multiline",
                                   "log_block")
# Shapes that only the formats naming them are shown in (``TokenFormat.contexts``): a
# credential named in prose, ``curl -u name:password`` in its quotings, and a token split in
# pieces (a wrapped line, string concatenation) whose later pieces carry no prefix.
SHAPE_CONTEXTS: tuple[str, ...] = ("prose", "curl_user", "split_token")
CONTEXTS: tuple[str, ...] = LINE_CONTEXTS + BLOCK_CONTEXTS + SHAPE_CONTEXTS

# ----------------------------------------------------------------------------- alphabets

UP = string.ascii_uppercase
LO = string.ascii_lowercase
DG = string.digits
A62 = UP + LO + DG
HEXL = DG + "abcdef"
HEXU = DG + "ABCDEF"
B64 = A62 + "+/"
B64U = A62 + "-_"
UPDG = UP + DG
LODG = LO + DG
B32 = UP + "234567"
B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
PWD = A62 + "!#%*+-.=?@^_~"          # password characters that survive every context
URLSAFE = A62 + "-._~"                 # unreserved URL characters (passwords in URLs)
K8S = "bcdfghjklmnpqrstvwxz2456789"       # kubernetes' name-suffix alphabet


def rand(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def R(alphabet: str, n: int, m: int | None = None) -> Callable[[random.Random], str]:
    """A random string of ``n`` (or ``n``..``m``) characters of ``alphabet``."""
    def gen(rng: random.Random) -> str:
        return rand(rng, alphabet, n if m is None else rng.randint(n, m))
    return gen


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def uuid4(rng: random.Random) -> str:
    return str(_uuid.UUID(int=rng.getrandbits(128), version=4))


def hexstr(rng: random.Random, n: int) -> str:
    return rand(rng, HEXL, n)


# ----------------------------------------------------------------------------- samples & formats


@dataclass(frozen=True)
class Sample:
    """One generated value: what is written, what must vanish, what is public boilerplate."""

    value: str
    secrets: tuple[str, ...]
    public: tuple[str, ...] = ()
    json_document: str = ""     # a whole JSON document to show in the "json_escaped" context


@dataclass(frozen=True)
class TokenFormat:
    """A documented credential/PII format and how to make a valid-looking sample of it.

    ``kind`` chooses the contexts it can appear in: ``token`` (all; a bare log line
    only when ``distinctive``), ``password`` and ``url`` (connection strings,
    webhooks: no HTTP header), ``block`` (multi-line key material), ``pii``.
    """

    name: str
    family: str
    var: str
    make: Callable[[random.Random], Sample]
    kind: str = "token"
    distinctive: bool = True
    header: str | None = None
    service: str = ""
    domain: str = ""
    label: str = ""
    contexts: tuple[str, ...] | None = None
    log_templates: tuple[str, ...] = ()

    def sample(self, rng: random.Random) -> Sample:
        return self.make(rng)

    @property
    def allowed_contexts(self) -> tuple[str, ...]:
        if self.contexts:
            return self.contexts
        if self.kind == "block":
            return BLOCK_CONTEXTS
        if self.kind in ("password",):
            return tuple(c for c in LINE_CONTEXTS if c not in ("http_header", "log"))
        if self.kind in ("url", "pii"):
            return tuple(c for c in LINE_CONTEXTS if c != "http_header")
        if not self.distinctive:
            return tuple(c for c in LINE_CONTEXTS if c != "log")
        return LINE_CONTEXTS


def _compose(parts: Sequence[str | Callable[[random.Random], str]]) -> Callable[[random.Random], Sample]:
    public = tuple(p for p in parts if isinstance(p, str) and p)

    def make(rng: random.Random) -> Sample:
        value = "".join(p if isinstance(p, str) else p(rng) for p in parts)
        return Sample(value, (value,), public)
    return make


def t(name: str, family: str, var: str, *parts: str | Callable[[random.Random], str], **kw) -> TokenFormat:
    """A format written as literal (public) and random parts."""
    return _fmt(name, family, var, _compose(parts), **kw)


def c(name: str, family: str, var: str, make: Callable[[random.Random], Sample], **kw) -> TokenFormat:
    """A format with its own sample function."""
    return _fmt(name, family, var, make, **kw)


def _fmt(name: str, family: str, var: str, make: Callable[[random.Random], Sample], **kw) -> TokenFormat:
    assert family in FAMILIES, family
    service = kw.pop("service", "") or ("customer" if kw.get("kind") == "pii" else name.split("_")[0])
    domain = kw.pop("domain", "") or f"api.{service}.com"
    return TokenFormat(name=name, family=family, var=var, make=make, service=service, domain=domain, **kw)


def plain(value: str, *public: str) -> Sample:
    return Sample(value, (value,), tuple(public))


# ----------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class SecretCase:
    text: str
    secrets: tuple[str, ...]
    format: str
    family: str
    context: str
    public: tuple[str, ...] = ()


@dataclass(frozen=True)
class NonSecretCase:
    text: str
    category: str

    @property
    def expected(self) -> str:
        return self.text


@dataclass(frozen=True)
class UuidCase:
    text: str
    uuids: tuple[str, ...]
    category: str = "uuid"

    @property
    def expected(self) -> str:
        out = self.text
        for u in self.uuids:
            out = out.replace(u, "<UUID>")
        return out
