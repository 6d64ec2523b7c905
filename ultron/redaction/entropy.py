r"""Layer 3: does a string look generated, and bare high-entropy tokens near a
credential word.

A token with no known prefix and no ``name=`` in front of it (``Using key
9fK2...`` in a log line, a token pasted into prose) can only be told from the
look-alikes agents print all day by how it is built. :func:`looks_random` is that
judgement, shared with the keyword-anchored layer (a ``*_key`` value must look
generated) and the provider rules that have no prefix:

* one unbroken run, long enough (16+ by default, 20+ for bare tokens) and not
  mostly separators;
* Shannon entropy of at least 3 bits per character;
* at least one unbroken chunk of 12+ characters between separators, so model
  names (``gpt-4o-mini-2024-07-18``), versions (``1.2.3-rc.4+build.5``), dates and
  dotted names are out;
* digits mixed into letters, or both letter cases, and not made of words
  (:func:`made_of_words`: ``getUserProfile``, ``test_redaction_formats`` and
  paths are long runs of frequent English letter pairs, generated strings are
  not);
* not base64 of ordinary text (decodes to printable text with spaces).

Base64 of ``user:password`` (HTTP Basic, a docker ``auth``) is taken from 16
characters on. The bare-token rule then asks for a credential word (key, token, secret,
password, credential, auth, bearer, api...) shortly before the token on the same
line, or just after it. Pure hex is only taken right after such a word and never
next to a digest label (``sha256``, ``commit``, ``checksum``, ``etag``...): git
SHAs, docker digests and file hashes are hex too. UUIDs keep their own tag. The
base64 body of a ``data:...;base64,`` URI is an inline file, not a token.

A credential named in prose (:func:`prose_token`, rule ``credential_named_in_prose``):
"using huggingface credential hf_...", "openai api key is 9fK2...", "Your token (...)
has been saved", "auth token for stripe: ...". A credential noun (credential, token,
secret, password, passphrase, bearer, api key; a bare "key" or "auth" only after a
qualifier or a provider: "access key", "openai key") is followed, within four words on
the same line (two after a qualified "key"), by the first long word; that word is
redacted when it is shaped like a generated token: 16+ characters of
``[A-Za-z0-9_./+~=-]``, mixed character classes, 3 bits of entropy per character, a
random chunk of 8+ characters between ``-_.~`` (random chunks making half of it), not
made of words, not a version, an object id (``msg_01...``), a UUID or a path. Pure hex
only right after the noun and from 20 characters on; a digest label among the words
(``commit``, ``sha256``, ``id``, ``version``...) or a sentence end stops the search. It
runs after the other rules and never inside what they found, so a known token keeps its
tag; it reaches the values the bare-token rule leaves (16-19 characters, short chunks).
"""

from __future__ import annotations

import base64
import binascii
import math
from collections import Counter

import regex

from ultron.redaction.checks import has_digit, has_lower, has_space, has_upper
from ultron.redaction.rules import Span, _rule

_PIECE = regex.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")
_SEPARATORS = regex.compile(r"[^A-Za-z0-9]+")
_HEX_ONLY = regex.compile(r"^[0-9a-fA-F]+$")


def shannon_entropy(value: str) -> float:
    """Bits per character of ``value``'s own character distribution."""
    n = len(value)
    if n == 0:
        return 0.0
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


# The ~150 most frequent letter pairs of English: words and identifiers made of
# words are mostly built from them, generated strings only by chance (~1 in 5).
_COMMON_BIGRAMS = frozenset(
    "th he in er an re on at en nd ti es or te of ed is it al ar st to nt ng se ha as ou io le ve co me "
    "de hi ri ro ic ne ea ra ce li ch ll be ma si om ur ca el ta la ns di fo ho pe ec pr no ct us ac ot "
    "il tr ly nc et ut ss so rs un lo wa ge ie wh ee wi em ad ol rt po we na ul ni ts mo ow pa im mi ai "
    "sh ir su id os iv ia am fi ci vi pl ig tu ev ld ry mp fe bl ab gh ty op wo sa ay ex ke fr oo av ag "
    "if ap gr od bo sp rd do uc bu ei ov by rm ep oc fa ef cu rn sc gi da".split()
)


def made_of_words(value: str) -> bool:
    """Letters grouped in long pieces (camelCase, snake_case and path pieces split
    apart) whose letter pairs are mostly frequent in English: ``getUserProfile``,
    ``test_redaction_formats``, ``src/app/main.py``. Generated strings break into
    short pieces (a capital, a digit every few characters) and hit the frequent
    pairs about one time in five."""
    letters = pairs = common = 0
    for piece in _PIECE.findall(value):
        if not piece.isalpha():
            continue
        letters += len(piece)
        low = piece.lower()
        for i in range(len(low) - 1):
            pairs += 1
            common += low[i : i + 2] in _COMMON_BIGRAMS
    if pairs < 4:
        return False
    return common >= 0.5 * pairs and pairs >= 0.65 * letters


def base64_text(value: str) -> bool:
    """``value`` is base64 of ordinary text: printable, with spaces between words."""
    body = value.rstrip("=")
    if len(body) < 16:
        return False
    padded = body + "=" * (-len(body) % 4)
    try:
        raw = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
        decoded = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return False
    printable = sum(ch.isprintable() or ch in "\n\t" for ch in decoded)
    return printable >= 0.95 * len(decoded) and decoded.count(" ") >= max(1, len(decoded) // 20)


def basic_credentials(value: str) -> bool:
    """base64 of ``user:password`` (a docker config's ``auth``, HTTP Basic)."""
    try:
        decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return False
    user, colon, password = decoded.partition(":")
    return bool(colon and user and password) and decoded.isprintable() and " " not in decoded


_PASSWORD_SYMBOLS = regex.compile(r"[!@#$%^&*?~+=]")
_NOT_A_PASSWORD = regex.compile(r"^v?\d+(?:\.\d+)+|://|^[/~.]|@[\w-]+\.[A-Za-z]{2,}$")


def password_like(value: str) -> bool:
    """Shaped like a chosen password (``Winter2024!``, ``p@ssw0rd-2024``): 8-64
    characters, letters and digits, and a symbol or both letter cases; not a
    version, a path, a URL or an e-mail address."""
    if not 8 <= len(value) <= 64 or has_space(value) or _NOT_A_PASSWORD.search(value):
        return False
    if not (has_digit(value) and (has_lower(value) or has_upper(value))):
        return False
    return bool(_PASSWORD_SYMBOLS.search(value) or (has_lower(value) and has_upper(value)))


def looks_random(value: str, min_len: int = 16) -> bool:
    """Built like a generated key rather than a word, number, path or version."""
    body = value.rstrip("=")
    n = len(body)
    if n < min_len or has_space(body):
        return False
    alnum = sum(c.isalnum() for c in body)
    longest = max((len(c) for c in _SEPARATORS.split(body)), default=0)
    if alnum < 0.8 * n or longest < min(12, min_len):
        return False
    digit, upper, lower = has_digit(body), has_upper(body), has_lower(body)
    if not ((digit and (upper or lower)) or (upper and lower)):
        return False  # one class only: a number, a word, a constant name
    if shannon_entropy(body) < 3.0:
        return False
    if not _HEX_ONLY.match(body) and made_of_words(body):
        return False
    return not base64_text(body)


# ----------------------------------------------------------- bare token rule

# Words that announce a credential. Matched on camelCase/snake_case pieces, so
# ``apiKey``, ``X-Auth-Token`` and ``client_secret`` count and ``author`` does not.
CREDENTIAL_WORDS = frozenset({
    "key", "keys", "apikey", "token", "tokens", "secret", "secrets", "password", "passwords",
    "passwd", "pwd", "passphrase", "passcode", "credential", "credentials", "creds", "auth",
    "authorization", "authentication", "authenticate", "authenticated", "authenticating",
    "authorize", "authorized", "bearer", "api",
})
_STRONG_WORDS = CREDENTIAL_WORDS - {"api", "auth"}
_PUBLIC = frozenset({"public", "publishable", "pub"})
# Labels in front of a hex string that is a digest, a revision or an object id.
_DIGEST_LABEL = regex.compile(
    r"(?i)(?<![a-z])(?:sha\d*|md5|blake\d*\w*|crc\d*|digest|hash(?:es)?|checksum|fingerprint|commit|rev"
    r"|revision|etag|integrity|object|oid|blob|tree|ref|parent|build|run|trace|span|request|nonce|salt"
    r"|merge|head|tag|version|image|layer|manifest|git|id|ids)(?![a-z])"
)
_LABEL_JUST_BEFORE = regex.compile(r"(?i)(?:sha\d*|md5|blake\w*|crc\d*|etag|digest)[ \t]*[:=][ \t]*[\"']?$")
# msg_01..., req_..., toolu_..., chatcmpl-...: an API's object ids
_OBJECT_ID = regex.compile(r"^[a-z]{2,12}[_-][A-Za-z0-9]{10,}$")
_PUBLIC_KEY_TYPE = regex.compile(r"(?:ssh-(?:rsa|dss|ed25519|ed448)|ecdsa-sha2-[\w-]+|sk-ssh-[\w@.-]+)[ \t]+$")
_WORDS = regex.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")
_UUID_SHAPE = regex.compile(r"^[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$")

_BEFORE = 40
_AFTER = 24


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORDS.findall(text)}


def _window_before(text: str, pos: int, size: int) -> str:
    """Up to ``size`` characters before ``pos`` on its line (a JSON-escaped
    ``\\n`` ends a line too)."""
    piece = text[max(0, pos - size) : pos]
    escaped = piece.rfind("\\n")
    return piece[max(piece.rfind("\n") + 1, escaped + 2 if escaped >= 0 else 0) :]


def _window_after(text: str, pos: int, size: int) -> str:
    piece = text[pos : pos + size]
    cuts = [i for i in (piece.find("\n"), piece.find("\\n")) if i >= 0]
    return piece[: min(cuts)] if cuts else piece


_RUN_CHARS = frozenset("+/.~-_")


def _check_bare_token(match: "regex.Match[str]", span: Span) -> Span | None:
    text = match.string
    start, end = span
    if start > 0 and text[start - 1] in _RUN_CHARS:
        if start > 1 and (text[start - 2].isalnum() or text[start - 2] in _RUN_CHARS or text[start - 2] == ":"):
            return None  # the tail of a path, a URL, a flag: not a token of its own
    if text.endswith(";base64,", max(0, start - 8), start):
        return None  # data:image/png;base64,...: an inline file, not a token
    if start > 0 and text[start - 1] == "\\" and text[start] in "nrtu":
        start += 5 if text[start] == "u" else 1  # the letter of a JSON escape is not the token's
    while end > start and text[end - 1] in ".-~_":
        end -= 1  # sentence punctuation, a dangling separator
    token = text[start:end]
    if not (has_digit(token) or (has_upper(token) and has_lower(token))) or _UUID_SHAPE.match(token):
        return None  # (a cheap first cut: generated tokens mix character classes)
    before = _window_before(text, start, _BEFORE)
    after = _window_after(text, end, _AFTER)
    words_before = _words(before)
    strong = (words_before | _words(after)) & _STRONG_WORDS
    if not strong and not words_before & CREDENTIAL_WORDS:
        return None
    if words_before & _PUBLIC:
        return None  # a public key, a publishable key: published on purpose
    if _LABEL_JUST_BEFORE.search(before):
        return None  # SHA256:<base64>, md5=<hex>: a labelled digest
    if len(token) < 20 and not basic_credentials(token):
        return None
    if _HEX_ONLY.match(token):
        # hex: only right after a credential word, never next to a digest label
        close = _words(before[-24:])
        if not close & _STRONG_WORDS or _DIGEST_LABEL.search(before):
            return None
        if shannon_entropy(token) < 3.0:
            return None
        return start, end
    if token.lower().startswith(("sha1", "sha256", "sha384", "sha512", "md5")):
        return None  # sha512-<base64> integrity strings
    if token.startswith("AAAA") and _PUBLIC_KEY_TYPE.search(before):
        return None  # ssh-ed25519 AAAAC3Nza...: a public key
    if not strong and (_OBJECT_ID.match(token) or _DIGEST_LABEL.search(before[-16:])):
        return None  # "api" near msg_01..., req_..., request ids: object ids, not keys
    if basic_credentials(token):
        return start, end  # base64 of user:password near "auth"
    return (start, end) if looks_random(token, min_len=20) else None


# ------------------------------------------------------ a credential named in prose

# "using huggingface credential hf_...", "loaded openai api key 9fK2...", "token for
# stripe: rK8m...", "Your token (hf_...) has been saved": a credential noun, a few words,
# then a value shaped like a generated token. The noun anchors the pattern (one literal
# per trigger); :func:`_check_prose_token` reads the words after it.
_PROSE_NOUNS = {
    "credential": r"credentials?", "creds": "creds", "token": "tokens?", "secret": "secrets?",
    "passw": r"passw(?:or)?ds?", "passphrase": "passphrases?", "passcode": "passcodes?", "bearer": "bearer",
    "auth": r"auth(?:entication|orization)?", "key": r"(?:api)?keys?",
}
_PROSE_NOUN = r"(?i)(?<![A-Za-z0-9])(?:{word})(?![A-Za-z0-9_])"
# Nouns that name a credential on their own; the others need a word just before them
# ("api key", "openai key", "HF auth") and allow fewer words before the value.
_STRONG_NOUNS = ("credential", "cred", "token", "secret", "passw", "passphrase", "passcode", "bearer", "apikey")
# What may stand before a bare "key"/"auth" to make it a credential's name.
_KEY_QUALIFIERS = frozenset(
    "api access secret private signing client service deploy license licence master encryption app account admin "
    "root auth session personal hmac webhook bot user cloud "
    "huggingface hf openai anthropic claude gemini google gcp aws azure github gh gitlab bitbucket slack stripe "
    "twilio sendgrid mailgun datadog sentry npm pypi docker heroku vercel netlify cloudflare supabase firebase "
    "mistral cohere groq replicate pinecone linear notion jira atlassian shopify paypal square algolia".split()
)
_PROSE_WORDS_AFTER = 120  # characters read after the noun, on its line
_VALUE_CHARS = regex.compile(r"[A-Za-z0-9_-][A-Za-z0-9_./+~-]*={0,2}")
_EDGE_OPEN = "\"'`([{<“‘:="
_EDGE_CLOSE = "\"'`)]}>”’,;:!?"
_VERSION = regex.compile(r"(?i)^v?\d+(?:[._-]\d+)+(?:[.+_-][a-z0-9.]+)?$")
# API object ids that sit next to the word "token" in usage logs (msg_01..., req_...).
_OBJECT_ID_PREFIX = regex.compile(
    r"^(?:msg|req|toolu|call|chatcmpl|resp|run|thread|asst|file|batch|ftjob|ft|evt|cus|pi|ch|sub|in|price|prod|seti"
    r"|src|acct|txn|step|span|trace|org|proj)[_-][A-Za-z0-9]"
)
_SPLIT_CHUNKS = regex.compile(r"[-_.~]+")


def _mixed(value: str) -> bool:
    upper, lower = has_upper(value), has_lower(value)
    return bool((has_digit(value) and (upper or lower)) or (upper and lower))


def prose_token(value: str, direct: bool) -> bool:
    """Shaped like a generated credential rather than a name, path, version, hash or id:
    16+ characters of ``[A-Za-z0-9_./+~=-]``, mixed character classes, 3 bits of entropy
    per character, a random-looking chunk of 8+ between ``-_.~`` (and such chunks making at
    least half of it: a name with a generated suffix is a name) and not made of words.
    Pure hex counts only ``direct``ly after the noun and from 20 characters on (digests
    and key ids are hex too)."""
    body = value.rstrip("=")
    if not 16 <= len(body) <= 512 or _UUID_SHAPE.match(body) or not _mixed(body):
        return False
    if _VERSION.match(body) or body.lower().startswith(("sha", "md5")):
        return False
    if _OBJECT_ID_PREFIX.match(body) and "secret" not in body:
        return False  # msg_01..., req_...; not pi_..._secret_... (a client secret)
    if _HEX_ONLY.match(body):
        return direct and len(body) >= 20 and shannon_entropy(body) >= 2.7  # a 16-hex gpg key id is public
    if shannon_entropy(body) < 3.0:
        return False
    chunks = _SPLIT_CHUNKS.split(body)
    if not any(len(c) >= 8 and _mixed(c) for c in chunks):
        return False  # gpt-4o-mini-2024-07-18, claude-3-5-sonnet-20241022, 1.2.3-rc.4+build.5
    if 2 * sum(len(c) for c in chunks if len(c) >= 4 and _mixed(c)) < sum(map(len, chunks)):
        return False  # app-prod-db-credentials-7f8d9c6b: mostly words, a generated suffix
    return not made_of_words(body) and not base64_text(body)


_NON_SPACE = regex.compile(r"\S+")
_LONG_RUN = regex.compile(r"[A-Za-z0-9_./+~=-]{16}")
_NOT_ALNUM = regex.compile(r"[^a-z0-9]")


def _check_prose_token(match: "regex.Match[str]", span: Span) -> Span | None:
    """From a credential noun to the first long word after it on its line (within four
    words, two after a qualified "key"/"auth"), unless the noun is a name being assigned,
    is not a credential's ("primary key", "public token"), or a digest label or a sentence
    end comes first. The word's shape is judged by :func:`_confirm_prose_token`."""
    text = match.string
    start, end = span
    after = text[end : end + 1]
    if after == "=" or (start and text[start - 1] in "_.$\"'" and after in ("\"", "'", ":")):
        return None  # API_KEY=..., "token": ..., $token: a name being assigned (the assignment layer's)
    line = _window_after(text, end, _PROSE_WORDS_AFTER)
    if _LONG_RUN.search(line) is None:
        return None  # no word long enough to be a value on the rest of the line
    noun = text[start:end].lower()
    strong = noun.startswith(_STRONG_NOUNS)
    if strong:
        if "pub" in text[max(0, start - 14) : start].lower():
            return None  # a public key, a publishable key: published on purpose
    else:
        before = _window_before(text, start, _BEFORE).rstrip(" \t\"'`(_-")
        previous = before.rsplit(None, 1)[-1] if before.strip() else ""
        prev_word = _NOT_ALNUM.sub("", previous.lower().replace("-", "_").split("_")[-1])
        if prev_word not in _KEY_QUALIFIERS:
            return None  # "primary key", "the key point", "auth middleware", "public key"
    for i, found in enumerate(_NON_SPACE.finditer(line)):
        if i == (5 if strong else 3):
            break
        w_start = end + found.start()
        word = found.group()
        if i == 0 and w_start == end and word[:1] not in ":=":
            return None  # glued to the noun: an identifier (token-based, token/refresh)
        lead = 0
        while lead < len(word) and (word[lead] in _EDGE_OPEN or word[lead] == "\\"):
            lead += 1
        trail = len(word)
        while trail > lead and (word[trail - 1] in _EDGE_CLOSE or word[trail - 1] == "\\"):
            trail -= 1
        if trail > lead + 1 and word[trail - 1] == "." and word[trail - 2] != ".":
            trail -= 1  # sentence end
        value = word[lead:trail]
        if len(value) < 16 or _VALUE_CHARS.fullmatch(value) is None or (value[0] == "-" and not lead):
            if _DIGEST_LABEL.fullmatch(value.lower().strip(":=")) or value.lower() in _PUBLIC:
                return None  # "token commit 3f5a...", "secret sha256 ...": a digest follows
            if word.endswith((".", ";", "!", "?")):
                return None  # the sentence ended before any value
            continue
        if _LABEL_JUST_BEFORE.search(text[max(0, w_start - 16) : w_start + lead]):
            return None
        return w_start + lead, w_start + trail  # the first long word decides (_confirm_prose_token)
    return None


def _confirm_prose_token(match: "regex.Match[str]", span: Span) -> Span | None:
    """Is the value :func:`_check_prose_token` found shaped like a token? (Run only when no
    other rule found it: most are known tokens already.)"""
    text = match.string
    between = [w for w in (w.strip(_EDGE_OPEN + "\\") for w in text[match.end() : span[0]].split()) if w]
    direct = not between or (len(between) == 1 and between[0].lower() in ("is", "was"))
    return span if prose_token(text[span[0] : span[1]], direct) else None


#: (entity, rule) of the bare-token layer.
ENTROPY_RULES = (
    (
        "ENTROPY_SECRET",
        _rule(
            "bare_high_entropy_token",
            r"[A-Za-z0-9](?:[\w+/.~-]{15,}={0,2}|[A-Za-z0-9+/]{11,14}={1,2})",
            check=_check_bare_token,
            stdlib=True,
            fallback=True,
            triggers=(
                "key", "token", "secret", "passw", "pwd", "credential", "creds", "auth", "bearer", "api",
            ),
        ),
    ),
    (
        "ENTROPY_SECRET",
        _rule("credential_named_in_prose", _PROSE_NOUN, check=_check_prose_token, confirm=_confirm_prose_token,
              fallback=True, words=_PROSE_NOUNS),
    ),
)
