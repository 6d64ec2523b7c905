r"""Offline redaction of secrets and personal data before text is stored.

Detection runs on Microsoft Presidio's :class:`~presidio_analyzer.AnalyzerEngine`
configured to work with no network and no model:

* the NLP engine is presidio's ``no_op`` engine, so no spaCy model is loaded;
* every recognizer is our own (:class:`_RuleRecognizer`): compiled regexes plus a
  Python check per rule (Luhn, IIN/length for cards, ``ipaddress`` for IPs,
  "is this code or a secret" heuristics for ``key=value`` fields);
* ``TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS`` is set to ``""`` before presidio is
  imported, otherwise tldextract (pulled in by presidio) may try to download the
  public suffix list.

An installed spaCy model can be named (``Redactor(spacy_model=...)`` or
``ULTRON_REDACTION_SPACY_MODEL``) to add name/location detection (``<PERSON>``,
``<LOCATION>``). It is only used when ``spacy.util.is_package`` says it is
installed, because presidio's spaCy engine would otherwise try to download it; a
missing model logs one warning and the redactor stays on ``no_op``.

Replacement tags (each detected span is replaced by its tag):

=====================  =========================================================
``<LLM_API_KEY>``      ``sk-...`` (OpenAI incl. ``sk-proj-``, Anthropic
                       ``sk-ant-``, DashScope and other long ``sk-`` keys),
                       Hugging Face ``hf_...``, Google ``AIza...``
``<GITHUB_TOKEN>``     ``ghp_/gho_/ghu_/ghs_/ghr_...``, ``github_pat_...``
``<AWS_ACCESS_KEY>``   ``AKIA...`` / ``ASIA...`` access key ids
``<AWS_SECRET_KEY>``   40-character secret access key after an
                       ``aws_secret_access_key`` / ``SecretAccessKey`` /
                       "secret key" context
``<REDACTED_TOKEN>``   the token of ``Authorization: Bearer|Basic|Token ...``
                       and of a bare ``Bearer <token>``; the scheme word stays
``<REDACTED_CREDENTIAL>`` the value of ``password=``, ``passwd:``, ``token=``,
                       ``secret``, ``api_key``, ``access_token``,
                       ``client_secret``, ``*_TOKEN=`` ... (key=value, key: value,
                       JSON / escaped JSON, ``--password value``, Chinese
                       ``密码=``/``密码：``/``密码是``, ``口令``, ``密钥``, ``令牌``),
                       and the password of ``scheme://user:password@host``; the
                       key, the user and the host stay
``<PRIVATE_KEY>``      ``-----BEGIN ... PRIVATE KEY-----`` blocks (to the END
                       line, or to the end of the base64 body when truncated)
``<SLACK_TOKEN>``      ``xoxb-/xoxp-/xoxa-/xoxr-/xoxs-/xoxo-``, ``xapp-`` and whole
                       ``https://hooks.slack.com/...`` webhook URLs
``<EMAIL_ADDRESS>``    e-mail addresses (not ``git@host:`` SSH remotes, not the
                       ``user@host`` part of a URL)
``<PHONE_NUMBER>``     ``+<country> ...`` (8-15 digits), US ``(555) 123-4567`` /
                       ``555-123-4567`` / ``555.123.4567``, Chinese mobiles
                       ``1[3-9]x xxxx xxxx`` with optional ``+86``/``86``/``0086``
``<CREDIT_CARD>``      13-19 digits (spaces/dashes allowed) passing Luhn and a
                       known issuer prefix/length
``<IP_ADDRESS>``       IPv4 (4 valid octets) and IPv6
``<UUID>``             8-4-4-4-12 hex UUIDs
``<USER>``             the user name in ``/home/<USER>/``, ``/Users/<USER>/``,
                       ``C:\Users\<USER>\`` and ``~<USER>/``
``<PERSON>``, ``<LOCATION>``  only with an installed spaCy model
=====================  =========================================================

The package is cut along the three questions a redaction answers, so that each
can change without touching the others: :mod:`~ultron.redaction.catalogue` says
what may be a secret (one regex table and its tags), :mod:`~ultron.redaction.checks`
decides whether a match really is one (checksums, "is this code", escapes), and
:mod:`~ultron.redaction.engine` runs both on presidio and settles overlaps. Each
module's docstring lists the decisions it makes; ``tests/unit/test_redaction.py``
pins each of them.
"""

from __future__ import annotations

import os

# Must be set before presidio (and with it tldextract) is imported anywhere. The
# package body runs before any of its modules, so this holds whichever is imported.
os.environ.setdefault("TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS", "")

from ultron.redaction.catalogue import TAGS  # noqa: E402
from ultron.redaction.engine import Redactor, get_redactor  # noqa: E402

__all__ = ["TAGS", "Redactor", "get_redactor"]
