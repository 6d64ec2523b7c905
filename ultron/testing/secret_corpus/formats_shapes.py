"""Formats shown only in the three shape contexts (see ``model.SHAPE_CONTEXTS``).

* ``prose``: a value with no prefix a scanner knows, or a known prefix at a length the
  provider's rule does not take, named by the words around it ("using huggingface
  credential ...", "auth token for stripe: ...").
* ``curl_user``: the password of ``curl -u name:password`` and its wget/httpie kin,
  chosen by a person (letters, digits, punctuation, a space) or an API token used as one.
* ``split_token``: provider tokens of a fixed published shape cut in two or three pieces
  (a wrapped line, string concatenation, a list of chunks); the pieces after the first
  carry no prefix.

Values follow the providers' published shapes (prefix, alphabet, length); nothing here
comes from a scanner's fixtures.
"""

from __future__ import annotations

import random

from ultron.testing.secret_corpus.model import (
    A62, B64U, DG, LO, UP, R, Sample, TokenFormat, c, plain, rand, t,
)

_WORDS = ("Summer", "dragon", "Coffee", "orbit", "Maple", "violet", "Harbor", "quartz", "Tiger", "ember")
_SYMBOLS = "!#%&*+-.=?@^_~"


def chosen_password(rng: random.Random) -> Sample:
    """A password a person picks: a word with letters swapped for digits and symbols around it
    (``Tr0ub4dor&3!x``, ``S3cr#t-Pa55``)."""
    word = rng.choice(_WORDS)
    leet = "".join({"o": "0", "e": "3", "a": "4", "i": "1", "s": "5"}.get(ch, ch) if rng.random() < 0.5 else ch
                   for ch in word)
    tail = rand(rng, _SYMBOLS, rng.randint(1, 2)) + str(rng.randint(1, 99)) + rand(rng, A62 + _SYMBOLS, 2)
    return plain(leet + rng.choice(_SYMBOLS) + tail)


def spaced_password(rng: random.Random) -> Sample:
    """A passphrase-like password with a space inside (it must be quoted on a command line)."""
    a, b = rng.sample(_WORDS, 2)
    return plain(f"{a[0]}{rng.choice('@4a')}{a[2:]} {b}{rng.randint(10, 99)}{rng.choice('!?#')}")


def dotted_token(rng: random.Random) -> Sample:
    """A generated token in short dotted/dashed chunks (``9fK2xLm4.Qp8RtV6w-Z3nB...``)."""
    return plain(rand(rng, A62, 8) + "." + rand(rng, A62, 8) + "-" + rand(rng, A62, rng.randint(6, 12)))


SHAPE_FORMATS: tuple[TokenFormat, ...] = (
    # ---------------------------------------------------------------- prose
    t("huggingface_token_odd_length", "ai_provider", "HF_TOKEN", "hf_", R(UP + LO, 20, 29), contexts=("prose",),
      service="huggingface", domain="huggingface.co"),
    t("huggingface_token_mixed_body", "ai_provider", "HF_TOKEN", "hf_", R(A62, 16, 26), contexts=("prose",),
      service="huggingface", domain="huggingface.co"),
    t("prose_short_api_key", "generic_assignment", "OPENAI_API_KEY", R(A62, 16, 19), contexts=("prose",),
      service="openai"),
    t("prose_urlsafe_token", "generic_assignment", "STRIPE_TOKEN", R(B64U, 20, 40), contexts=("prose",),
      service="stripe"),
    c("prose_dotted_token", "generic_assignment", "SLACK_SECRET", dotted_token, contexts=("prose",),
      service="slack"),
    # ------------------------------------------------------------ curl -u
    c("curl_user_chosen_password", "generic_assignment", "BASIC_AUTH_PASSWORD", chosen_password,
      kind="password", contexts=("curl_user",), service="registry", domain="registry.example.com"),
    c("curl_user_spaced_password", "generic_assignment", "BASIC_AUTH_PASSWORD", spaced_password,
      kind="password", contexts=("curl_user",), service="jenkins", domain="ci.example.com"),
    t("curl_user_token_password", "generic_assignment", "API_PASSWORD", R(A62, 24, 40), kind="password",
      contexts=("curl_user",), service="artifactory", domain="acme.jfrog.io"),
    # ------------------------------------------------------- split tokens
    t("huggingface_token_split", "ai_provider", "HF_TOKEN", "hf_", R(UP + LO, 34), contexts=("split_token",),
      service="huggingface"),
    t("huggingface_org_token_split", "ai_provider", "HUGGINGFACE_API_TOKEN", "api_org_", R(UP + LO, 34),
      contexts=("split_token",), service="huggingface"),
    t("openai_project_key_split", "ai_provider", "OPENAI_API_KEY", "sk-proj-", R(B64U, 74), "T3BlbkFJ", R(B64U, 74),
      contexts=("split_token",), service="openai"),
    t("openai_legacy_key_split", "ai_provider", "OPENAI_API_KEY", "sk-", R(A62, 20), "T3BlbkFJ", R(A62, 20),
      contexts=("split_token",), service="openai"),
    t("anthropic_api_key_split", "ai_provider", "ANTHROPIC_API_KEY", "sk-ant-api03-", R(B64U, 93), "AA",
      contexts=("split_token",), service="anthropic"),
    t("gemini_api_key_split", "ai_provider", "GEMINI_API_KEY", "AIzaSy", R(B64U, 33), contexts=("split_token",),
      service="gemini"),
    t("github_pat_classic_split", "code_host", "GITHUB_TOKEN", "ghp_", R(A62, 36), contexts=("split_token",),
      service="github"),
    t("github_fine_grained_pat_split", "code_host", "GITHUB_PAT", "github_pat_", R(A62, 22), "_", R(A62, 59),
      contexts=("split_token",), service="github"),
    t("gitlab_pat_split", "code_host", "GITLAB_TOKEN", "glpat-", R(B64U, 20), contexts=("split_token",),
      service="gitlab"),
    t("npm_access_token_split", "package_registry", "NPM_TOKEN", "npm_", R(A62, 36), contexts=("split_token",),
      service="npm"),
    t("slack_bot_token_split", "messaging", "SLACK_BOT_TOKEN", "xoxb-", R(DG, 10, 13), "-", R(DG, 10, 13), "-",
      R(A62, 24), contexts=("split_token",), service="slack"),
)
