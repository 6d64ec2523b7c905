r"""Offline redaction of secrets and personal data before text is stored.

Detection runs on Microsoft Presidio's :class:`~presidio_analyzer.AnalyzerEngine`
configured to work with no network and no model:

* the NLP engine is presidio's ``no_op`` engine, so no spaCy model is loaded;
* every recognizer is our own (:class:`_RuleRecognizer`): compiled regexes plus a
  Python check per rule (Luhn, IIN/length for cards, ``ipaddress`` for IPs,
  "is this code or a secret" heuristics for ``key=value`` fields), run directly
  by the engine for speed (see :mod:`~ultron.redaction.engine`);
* ``TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS`` is set to ``""`` before presidio is
  imported, otherwise tldextract (pulled in by presidio) may try to download the
  public suffix list.

An installed spaCy model can be named (``Redactor(spacy_model=...)`` or
``ULTRON_REDACTION_SPACY_MODEL``) to add name/location detection (``<PERSON>``,
``<LOCATION>``). It is only used when ``spacy.util.is_package`` says it is
installed, because presidio's spaCy engine would otherwise try to download it; a
missing model logs one warning and the redactor stays on ``no_op``.

Detection works in layers, each its own module: token formats that identify
themselves, also when cut in pieces across lines or strings
(:mod:`~ultron.redaction.formats`), values assigned to a credential
name in any syntax (:mod:`~ultron.redaction.assignments`; the password of
``curl -u name:password`` and kin in :mod:`~ultron.redaction.commands`), bare high-entropy
tokens near a credential word (:mod:`~ultron.redaction.entropy`), and personal
data (:mod:`~ultron.redaction.catalogue`). One prefilter pass per text
(:mod:`~ultron.redaction.prefilter`) decides which rules can match at all.

Replacement tags (each detected span is replaced by its tag):

========================= ======================================================
``<LLM_API_KEY>``         OpenAI ``sk-``/``sk-proj-``/``sk-svcacct-``, Anthropic
                          ``sk-ant-``, DashScope/DeepSeek/OpenRouter ``sk-``,
                          Hugging Face ``hf_``/``api_org_``, Google/Gemini
                          ``AIza``, Groq ``gsk_``, Perplexity ``pplx-``,
                          Replicate ``r8_``, xAI ``xai-``, Together, Fireworks,
                          Cerebras, Modal, ElevenLabs, Anyscale; Cohere and
                          Mistral keys near their name
``<GITHUB_TOKEN>``        ``ghp_/gho_/ghu_/ghs_/ghr_...``, ``github_pat_...``
``<GITLAB_TOKEN>``        ``glpat-``, ``gldt-``, ``glrt-``, ``glptt-``, ``glcbt-``,
                          ``gloas-``, ``glft-``... and ``_gitlab_session``
``<ATLASSIAN_TOKEN>``     Atlassian ``ATATT3``, Bitbucket ``ATBB``, Trello ``ATTA``
``<AWS_ACCESS_KEY>``      ``AKIA``/``ASIA``/``ABIA``/``ACCA``/``A3T...`` key ids
``<AWS_SECRET_KEY>``      40-character secret access key after an
                          ``aws_secret_access_key`` / ``SecretAccessKey`` /
                          "secret key" name, or near an AWS context
``<AWS_BEDROCK_KEY>``     Bedrock API keys (``ABSK...``, ``bedrock-api-key-...``)
``<AZURE_KEY>``           storage ``AccountKey=``/``SharedAccessKey=``, SAS
                          ``sig=``, Entra client secrets (``xxx8Q~...``), DevOps PATs
``<CLOUD_KEY>``           Alibaba ``LTAI``, Tencent ``AKID``, DigitalOcean
                          ``dop_v1_``..., Vault ``hvs.``, Doppler ``dp.``,
                          Databricks ``dapi``, Heroku, Fly.io, Pulumi, Terraform,
                          PlanetScale, Scaleway, Tailscale, 1Password, Neon...
``<CI_TOKEN>``            CircleCI ``CCIPAT_``, Buildkite ``bkua_``, SonarQube
                          ``squ_``, Octopus ``API-``, Harness; Travis/CircleCI
                          legacy tokens near their name
``<PACKAGE_TOKEN>``       npm ``npm_``, PyPI ``pypi-AgE...``, NuGet ``oy2``,
                          RubyGems ``rubygems_``, crates.io, Docker Hub
                          ``dckr_pat_``, Clojars, JFrog, base64 docker configs
``<STRIPE_KEY>``          ``sk_``/``rk_`` ``live|test|prod``, ``whsec_``
``<PAYMENT_KEY>``         Square ``sq0atp-``/``sq0csp-``/``EAAA``, Flutterwave
                          ``FLWSECK``, Plaid ``access-...``, PayPal/Braintree,
                          Razorpay, Checkout, GoCardless, Mollie, Shippo...
``<SLACK_TOKEN>``         ``xoxb-/xoxp-/xoxa-/xoxr-/xoxs-/xoxo-/xoxe``, ``xapp-``
                          and whole ``https://hooks.slack.com/...`` webhook URLs
``<MESSAGING_KEY>``       Twilio ``SK``/``AC`` (near "twilio"), SendGrid ``SG.``,
                          Mailgun ``key-``, Mailchimp, Sendinblue, Mandrill,
                          Resend, Discord bot tokens and webhooks, Telegram bot
                          tokens, Teams webhooks, Firebase FCM keys
``<OBSERVABILITY_KEY>``   Datadog keys near a ``DD_``/datadog name, New Relic
                          ``NRAK-``..., Sentry DSNs and ``sntrys_``/``sntryu_``,
                          Grafana ``glc_``/``glsa_``, Dynatrace, Axiom, Honeycomb
``<API_KEY>``             other SaaS formats (Linear, Notion, Postman, Shopify,
                          Figma, HubSpot, Contentful, Airtable, Typeform...)
``<JWT>``                 ``eyJ....eyJ....sig`` anywhere (the ``Authorization``
                          header keeps ``<REDACTED_TOKEN>``)
``<REDACTED_TOKEN>``      the token of ``Authorization: Bearer|Basic|Token ...``
                          and of a bare ``Bearer <token>``; the scheme word stays
``<REDACTED_CREDENTIAL>`` the value of a credential name (``password=``,
                          ``DB_PASS``, ``client_secret``, ``*_TOKEN``, ``*_KEY``,
                          ``X-...-Key:`` ...) in every syntax (see
                          :mod:`~ultron.redaction.assignments`), the password of
                          ``scheme://user:password@host``, Google OAuth values
                          (``GOCSPX-``, ``ya29.``), Django ``django-insecure-``
                          keys, a bare high-entropy token next to a
                          credential word, a token-shaped value that prose
                          names as a credential ("using huggingface
                          credential ..."), the password of ``curl -u``;
                          names, users and hosts stay
``<PRIVATE_KEY>``         PEM/OpenSSH/PGP ``-----BEGIN ... PRIVATE KEY-----``
                          blocks (to the END line, or to the end of the base64
                          body when truncated), PuTTY private lines, age
                          ``AGE-SECRET-KEY-1...``, Bitcoin WIF keys (checksummed)
``<EMAIL_ADDRESS>``       e-mail addresses (not ``git@host:`` SSH remotes, not the
                          ``user@host`` part of a URL)
``<PHONE_NUMBER>``        ``+<country> ...`` (8-15 digits), US ``(555) 123-4567`` /
                          ``555-123-4567`` / ``555.123.4567``, Chinese mobiles
                          ``1[3-9]x xxxx xxxx`` with optional ``+86``/``86``/``0086``
``<CREDIT_CARD>``         13-19 digits (spaces/dashes allowed) passing Luhn and a
                          known issuer prefix/length
``<IBAN>``                IBANs of a known country, its length and mod-97 checksum
``<NATIONAL_ID>``         US SSNs, UK National Insurance numbers, Chinese resident
                          ids (checksummed)
``<IP_ADDRESS>``          IPv4 (4 valid octets) and IPv6
``<UUID>``                8-4-4-4-12 hex UUIDs
``<USER>``                the user name in ``/home/<USER>/``, ``/Users/<USER>/``,
                          ``C:\Users\<USER>\`` and ``~<USER>/``
``<PERSON>``,             only with an installed spaCy model
``<LOCATION>``
========================= ======================================================

The package is cut so that each part can change without touching the others: the
layer modules say what may be a secret and check their own matches,
:mod:`~ultron.redaction.catalogue` holds the tags, the priorities and the
personal-data rules and assembles the one table, :mod:`~ultron.redaction.checks`
holds the shared checks (placeholders, escapes, checksums),
:mod:`~ultron.redaction.rules` the shape of a rule, and
:mod:`~ultron.redaction.engine` runs the table on presidio and settles overlaps.
Each module's docstring lists the decisions it makes;
``tests/unit/test_redaction.py`` and ``tests/unit/test_redaction_formats.py`` pin
each of them.
"""

from __future__ import annotations

import os

# Must be set before presidio (and with it tldextract) is imported anywhere. The
# package body runs before any of its modules, so this holds whichever is imported.
os.environ.setdefault("TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS", "")

from ultron.redaction.catalogue import TAGS  # noqa: E402
from ultron.redaction.engine import Redactor, get_redactor  # noqa: E402

__all__ = ["TAGS", "Redactor", "get_redactor"]
