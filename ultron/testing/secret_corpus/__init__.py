"""A generated corpus of secrets, PII and look-alike non-secrets, as agents' logs show them.

It measures a redactor from the outside: every sample is built from public facts
about a credential format (its prefix, alphabet, length, and a checksum where the
format has one: Luhn for cards, mod-97 for IBANs, ISO 7064 for Chinese ids, CRC-24
for PGP armour, base58check for Bitcoin WIF keys), never from our recognisers. The
inventory of formats follows the public lists of secret scanners (gitleaks' rule
list, providers' own documentation of their token prefixes).

Three parts, all deterministic from a seed (stdlib only):

* ``secrets``: :class:`SecretCase` -- a sample of a :class:`TokenFormat` embedded in
  one syntactic context (``.env`` line, ``export``, JSON, YAML, CLI flag, HTTP header,
  a bare log line, Python kwarg, TOML, XML, PHP, Go, or for key blocks a PEM file,
  an escaped JSON string, a YAML block ...; and three shapes shown only for the formats
  of ``formats_shapes``: a credential named in prose, ``curl -u name:password`` in its
  quotings, a token split in pieces whose later pieces have no prefix). ``secrets`` are the exact substrings
  that must disappear; ``public`` are the fixed parts of the format (``sk_live_``,
  a DER header) that may stay without being a leak.
* ``non_secrets``: :class:`NonSecretCase` -- lines agents' logs are full of (git
  SHAs, digests labelled as such, versions, paths, placeholders, ids, counts under
  token-like names ...). Nothing in them should change.
* ``uuids``: :class:`UuidCase` -- lines with UUIDs, which the redactor replaces by
  policy; ``expected`` is the text with each UUID replaced by ``<UUID>``.

Formats whose values have no distinctive shape (a Datadog key is 32 hex digits)
are only ever shown assigned to a name that says what they are (``DD_API_KEY=``),
never bare in a log line: no redactor can tell them from a digest there.

    from ultron.testing.secret_corpus import generate
    corpus = generate(seed=0, samples_per_format=3)

The package is split so that no module outgrows a readable size: ``model`` (alphabets,
:class:`Sample`, :class:`TokenFormat`, the case types), ``generators`` and ``material``
(sample functions for structured tokens; URLs, key blocks, PII), the format tables
``formats_infra``, ``formats_services``, ``formats_data`` and ``formats_shapes``, ``contexts`` (one
renderer per context) and ``non_secrets``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Iterator

from ultron.testing.secret_corpus.contexts import RENDER
from ultron.testing.secret_corpus.formats_data import DATA_FORMATS
from ultron.testing.secret_corpus.formats_infra import INFRA_FORMATS
from ultron.testing.secret_corpus.formats_services import SERVICE_FORMATS
from ultron.testing.secret_corpus.formats_shapes import SHAPE_FORMATS
from ultron.testing.secret_corpus.model import (
    CONTEXTS, FAMILIES, NonSecretCase, Sample, SecretCase, TokenFormat, UuidCase,
)
from ultron.testing.secret_corpus.non_secrets import non_secret_cases, uuid_cases

__all__ = [
    "CONTEXTS",
    "FAMILIES",
    "FORMATS",
    "Corpus",
    "NonSecretCase",
    "Sample",
    "SecretCase",
    "TokenFormat",
    "UuidCase",
    "generate",
]

FORMATS: tuple[TokenFormat, ...] = INFRA_FORMATS + SERVICE_FORMATS + DATA_FORMATS + SHAPE_FORMATS


@dataclass
class Corpus:
    """Everything :func:`generate` makes for one seed."""

    seed: int
    secrets: list[SecretCase]
    non_secrets: list[NonSecretCase]
    uuids: list[UuidCase]
    formats: tuple[TokenFormat, ...] = field(default=(), repr=False)

    def texts(self) -> Iterator[str]:
        """Every text of the corpus: secret cases, non-secrets, then UUID lines."""
        for case in (*self.secrets, *self.non_secrets, *self.uuids):
            yield case.text


def _secret_cases(fmt: TokenFormat, seed: int, n: int) -> list[SecretCase]:
    """``n`` cases of ``fmt``, each in another of its contexts (its own random stream: adding a
    format does not change the others' samples)."""
    rng = random.Random(f"{seed}:secret:{fmt.name}")
    allowed = list(fmt.allowed_contexts)
    order = rng.sample(allowed, len(allowed))
    cases: list[SecretCase] = []
    attempts = 0
    i = 0
    while len(cases) < n:
        attempts += 1
        if attempts > n * 20:
            raise RuntimeError(f"cannot render {fmt.name}")
        ctx = order[i % len(order)]
        i += 1
        sample = fmt.sample(rng)
        rendered = RENDER[ctx](fmt, sample, rng)
        # a context that cuts the value in pieces (split_token) says which pieces must vanish
        text, secrets = rendered if isinstance(rendered, tuple) else (rendered, sample.secrets)
        if not all(sec and sec in text for sec in secrets):
            continue  # this context's escaping changes the value; take the next context
        cases.append(SecretCase(text, secrets, fmt.name, fmt.family, ctx, sample.public))
    return cases


def generate(seed: int = 0, samples_per_format: int = 3) -> Corpus:
    """The whole corpus for ``seed``: ``samples_per_format`` cases of every format."""
    secrets: list[SecretCase] = []
    for fmt in FORMATS:
        secrets.extend(_secret_cases(fmt, seed, samples_per_format))
    return Corpus(seed=seed, secrets=secrets, non_secrets=non_secret_cases(seed), uuids=uuid_cases(seed),
                  formats=FORMATS)
