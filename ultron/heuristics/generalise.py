"""Memories that generalise: one customer's ids and names taken out of a memory's texts.

A memory extracted offline from a session is written in that session's words: "Cancel
reservation M20IZO for user_id=sophia_silva_7557, refund to gift_card_1234567". Another
agent serving another customer can reuse the rule, not the ids, and a name is personal
data that has no business in a shared memory. Provenance (session file and line range)
is kept with the memory already, so nothing is lost by dropping the specifics here.

:func:`generalise` replaces instance specifics with placeholders:

* absolute one-off paths (``/home/u/...``, ``/Users/u/...``, ``/tmp/...``,
  ``/var/folders/...``, ``/private/...``, ``/root/...``, ``C:\\Users\\u\\...``) ->
  ``<path>``, keeping the file name: ``<path>/app.py``;
* e-mail addresses -> ``<email>``; UUIDs -> ``<uuid>``; phone numbers -> ``<phone>``;
* dates: ISO (``2024-05-20``, with a time) and written (``May 20th``, ``3 June 2024``)
  -> ``<date>``;
* payment ids (``credit_card_4421486``, ``Gift Card 6276644``, ``my 7447 card``) ->
  ``<payment_id>``; order ids (``#W2378156``, ``#1234567``) -> ``<order_id>``;
* tau-style user ids (``first_last_1234``), ``user_id=`` / ``"user_id": "..."`` slots and
  ids given in words ("my user ID is jdoe42") -> ``<user_id>``; likewise the slots of
  reservation, booking, order, payment and flight-number keys; ``origin=JFK`` /
  ``destination=SEA`` -> ``<airport>``; ``first_name=`` / ``passengers=[...]`` -> ``<name>``;
* reservation codes: six capitals and digits with a digit, not shaped like an acronym
  plus a number (``K67C4W``, ``2FBBAH``; not ``SHA256``), or six capitals named a
  reservation / booking / confirmation ("reservation ID is HXDUBJ") -> ``<reservation_id>``;
* flight numbers (two or three capitals and 2-4 digits, ``HAT229``) in a text that speaks
  of flights (flight, depart, arrive, layover, itinerary ...), or followed by a date, or
  sharing the carrier of one already replaced -> ``<flight>``. Outside such a text the
  shape is an acronym plus a number (``RFC3339``, ``ES2020``) and is kept;
* numbers of 7+ digits -> ``<number>`` (not sizes: multiples of 1000 or 1024; not version
  or model suffixes such as ``-20250929``); hex strings of 7+ characters with a digit and
  a letter (commit ids) -> ``<hash>``;
* names: the people of the session (:func:`people_in`) and names given in words ("my
  name is ...") -> ``<name>``.

URLs are kept whole (a link to documentation generalises; an id inside it is not
cut out). Repeats are then collapsed ("<name> <name>" -> "<name>",
"reservation_id=<reservation_id>, reservation_id=<reservation_id>" -> one). Placeholders
never match a rule, so the function is idempotent.

Deliberately kept: tool and package names, versions ("Python 3.11", "node 20"), ports,
HTTP codes, amounts ("$100"), durations ("24 hours"), times ("after 8 am"), error class
names, commands, relative paths and file names, system paths (``/usr/lib``, ``/etc``),
env var names, lint codes (``E501``), issue numbers up to five digits (``#13733``), the
redactor's tags (``<USER>``), and city names. Airport codes are kept in prose: a
three-capital word ("JFK", "SQL", "EST") cannot be told from an acronym, and a route is
not an identity (nor an id); they are replaced only in ``origin=`` / ``destination=``
slots, where they are the customer's trip in a tool call, not part of a rule.

Speed: a pattern that starts with a literal lets the regex engine skip ahead in C, so
the word rules start at their key word and run only when a substring test finds it; the
token shapes that hold a digit share one pass gated on word starts with a digit.

:func:`instance_specifics` is the measure: an independent detector with its own,
broader patterns (any ``word_1234`` id, any 5-8 character capital code with a digit,
ISO dates, absolute home/tmp paths, id slots, long numbers, hashes, names), so a
benchmark counting memories that still hold ids does not just ask "would generalise
change it".
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterable

_MONTH = (r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
          r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)")
_DAY = r"[0-3]?\d(?:st|nd|rd|th)?"
_NAME_WORD = r"[A-Z][a-z]+(?:[-'][A-Z][a-z]+)?(?![\w-])"

# Words never taken as a person's name when a self-introduction is read ("I'm Sorry",
# "I'm Looking"), and product / tool names. Ids and JSON name fields are stronger
# evidence and are only checked against _ID_WORDS.
_ID_WORDS = frozenset(
    "card gift credit debit certificate payment account bank order reservation booking flight user customer "
    "member test tmp temp id name first last paypal voucher coupon wallet".split())
_NOT_NAMES = _ID_WORDS | frozenset(
    "a an the i hi hello hey dear thanks thank yes no not sure ok okay please sorry just also still here there "
    "going trying looking ready happy glad fine good great unable afraid new back done interested currently "
    "actually planning hoping calling writing wondering traveling travelling flying worried confused curious "
    "available aware able free busy late early away home sick tired really very so well now today tomorrow "
    "agent assistant admin administrator support team manager owner developer engineer staff guest root "
    "gold silver regular economy business basic premium mr mrs ms dr sir madam miss mister doctor "
    "monday tuesday wednesday thursday friday saturday sunday january february march april may june july "
    "august september october november december "
    "python claude docker git github gitlab linux windows mac macos ubuntu debian node npm react django "
    "flask rust java ruby swift kotlin postgres redis mongo bash zsh google chrome firefox slack jira "
    "notion excel openai anthropic aws azure vim emacs vscode cursor copilot gpt chatgpt".split())

# --- generalise --------------------------------------------------------------------

_PATH_SEG = r"(?:[^\s\"'`,;|()\[\]{}<>\\/…]|<[A-Za-z_]+>)+"
_PATH = re.compile(rf"/(?<![\w.~/<>-]/)(?:home|Users|tmp|var/folders|var/tmp|private|root|mnt/[a-z]/Users)"
                   rf"(?:/{_PATH_SEG})+/?")
_WIN_PATH = re.compile(rf"(?<!\w)[A-Za-z]:\\(?:Users|Documents and Settings)(?:\\{_PATH_SEG})+\\?")
_PATH_ROOTS = ("/home/", "/Users/", "/tmp/", "/var/", "/private/", "/root/", "/mnt/")
_SHALLOW = ("/tmp/", "/root/", "/var/tmp/", "/private/")
_EXT = re.compile(r"\.[A-Za-z0-9_-]{1,10}$")
_EMAIL = re.compile(r"<?(?<![\w.%+\\-])(?!git@)[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b"
                    r"(?![(\w])>?")
_TOKEN = re.compile(
    r"(?<!\w)(?=[\w.#+(-]*\d)(?:"
    r"(?P<uuid>[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b)"
    r"|(?P<date>(?<!-)(?:19|20)\d\d-[01]\d-[0-3]\d(?:[T ][0-2]\d:[0-5]\d(?::[0-5]\d(?:\.\d+)?)?"
    rf"(?:Z|[+-]\d\d:?\d\d)?)?\b|{_DAY} (?:of )?{_MONTH}\b(?:,? (?:19|20)\d\d\b)?)"
    r"|(?P<payment_id>[a-z_]*(?:card|certificate|paypal|voucher|coupon|wallet|account)_\d{3,}\b)"
    r"|(?P<user_id>(?!(?:test|tmp|temp|step|case|issue|item|file|table|run|job|build|page|part|version|task|"
    r"ticket|bug)_)[a-z]{2,}_[a-z]{2,}_\d{3,5}\b)"
    r"|(?P<order_id>#(?:[A-Z]{1,2}\d{5,}|\d{6,})\b)"
    r"|(?P<phone>(?:\+\d{1,3}[ .-]?)?\(?\d{3}\)?[ .-]\d{3}[ .-]\d{4}\b)"
    r"|(?P<number>(?<![-.$,])\d{7,}\b(?!-))"
    r"|(?P<reservation_id>(?![A-Z]+\d+\b)(?!\d+(?:[KMGTP]B|[KMG]?HZ|MS|PX|FPS|[KMGPDXSH])\b)"
    r"(?=[A-Z]*\d)(?=\d*[A-Z])[A-Z0-9]{6}\b)"
    r"|(?P<flight>(?!(?:SHA|AES|RSA|UTF|ISO|RFC|PEP|CVE|PY|TLS|SSL|CP|GPT|RTX|GTX|DDR|RX)\d)[A-Z]{2,3}\d{2,4}\b)"
    r"|(?P<hash>(?:0x)?(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,64}\b)"
    r"|(?P<short>\d{4,6}\b))")
_URL = re.compile(r"[a-z][a-z0-9+.-]*://[^\s\"'`<>)\]]+")
_CARD_BEFORE = re.compile(r"(?i:card|certificate|voucher|coupon)(?: (?i:number|no\.?|ending in|ending))? ?#?$")
_CARD_AFTER = re.compile(r" (?i:(?:credit |debit |master ?|visa |amex )?card)\b")
_DATE_AHEAD = re.compile(r" (?:<date>|(?:19|20)\d\d-\d\d-\d\d)")
_SERVICE_WORDS = ("reservation", "booking", "confirmation", "flight", "order", "ticket", "itinerar", "passenger",
                  "<user_id>", "<reservation_id>")
_AIR_WORDS = ("flight", "depart", "arriv", "airline", "boarding", "layover", "nonstop", "itinerar")
_MONTH_DATE = re.compile(rf"{_MONTH}\.? {_DAY}\b(?:,? (?:19|20)\d\d\b)?")
_KV = re.compile(
    r"(user_?id|userId|customer_?id|customerId|account_?id|accountId|member_?id|username|reservation_?id|"
    r"reservationId|booking_?id|bookingId|confirmation_(?:code|number|id)|order_?id|orderId|"
    r"payment_(?:method_)?id|paymentId|flight_(?:number|no)|flightNumber|origin|destination)"
    r"([\"']?\s?[:=]\s?[\"']?)((?!<)[^\s,;\"'\]\)}]+)")
_KV_TAG = {"user": "<user_id>", "cust": "<user_id>", "acco": "<user_id>", "memb": "<user_id>",
           "rese": "<reservation_id>", "book": "<reservation_id>", "conf": "<reservation_id>",
           "orde": "<order_id>", "paym": "<payment_id>", "flig": "<flight>"}
_KV_WORDS = ("_id", "id=", 'id"', "id'", "id:", "username", "origin", "destination", "flight_", "flightnumber")
_KV_NAME_WORDS = ("_name", "firstname", "lastname", "fullname", "passenger")
_ID_VALUE = re.compile(r"[\w.#@-]*[\d_][\w.#@-]*|[A-Z0-9]{5,10}")
_KV_NAME = re.compile(
    r"(first_?name|firstName|last_?name|lastName|full_?name|fullName|customer_?name|passenger_?name|passengers?)"
    rf"([\"']?\s?[:=]\s?[\"']?\[?)({_NAME_WORD}(?:,? {_NAME_WORD})*)")
_SAID_ID = re.compile(r"(?:user ?[Ii][Dd]|User ?[Ii][Dd]|username|Username|user name|customer [Ii][Dd]|"
                      r"account [Ii][Dd]|member [Ii][Dd])((?:,? (?:is|was|it's|it is))?:? [\"'`]?)"
                      r"((?!<)(?=[\w.-]*[\d_])[\w.-]{3,}\w)")
_SAID_CODE = re.compile(
    r"(?:reservation|Reservation|booking|Booking|confirmation|Confirmation)s?(?: (?:[Ii][Dd]|code|number|no\.?))?"
    r"((?:,? (?:is|was|under|with code|code|number|of|it's|it is)|,)*[:#]? ?[\"'`(]?)([A-Z0-9]{5,8})\b")
_SAID_NAME = re.compile(rf"(?:my name's|My name's|name is|Name is|call me|Call me)( {_NAME_WORD}(?: {_NAME_WORD})?)")
_DIGIT = re.compile(r"\d")
_LIST_GATE = re.compile(r">(?:, | & | and | or | ?/ ?| <)")
_SAME_TAG = re.compile(r"(<[a-z_]+>)(?:[ \t]+\1)+")
_SEP = r"(?:, | & | and | or | ?/ ?)"
_RUN = re.compile(rf"<[a-z_]+>(?: <[a-z_]+>)?(?:{_SEP}(?:[\w.\-]+[=:] ?)?<[a-z_]+>(?: <[a-z_]+>)?)+")
_RUN_SPLIT = re.compile(rf"({_SEP})")
_KEY_BEFORE = re.compile(r"[\w.\-]+[=:] ?$")
_WORD_CODES = frozenset("ACTIVE CLOSED FAILED LOCKED EXISTS NOTICE UPDATE DELETE INSERT SELECT CREATE STATUS "
                        "UNIQUE DETAIL CHANGE CANCEL PLEASE THANKS".split())


def _path(m: re.Match) -> str:
    text, tail = m.group(0), ""
    while text[-1] in ".:":
        text, tail = text[:-1], text[-1] + tail
    text = text.rstrip("/\\")
    last = re.split(r"[/\\]", text)[-1]
    depth = text.count("/") + text.count("\\")
    keep = _EXT.search(last) and depth >= (2 if text.startswith(_SHALLOW) else 3)
    return ("<path>/" + last if keep else "<path>") + tail


def _round(number: str) -> bool:
    """A size or a limit (10485760, 8000000), not an id: a multiple of 1000 or 1024."""
    n = int(number)
    return n % 1000 == 0 or n % 1024 == 0


def _starts_word(m: re.Match) -> bool:
    i = m.start()
    return i == 0 or not (m.string[i - 1].isalnum() or m.string[i - 1] == "_")


def _kv(m: re.Match) -> str:
    key, sep, val = m.groups()
    if not _starts_word(m):
        return m.group(0)
    if key in ("origin", "destination"):
        return key + sep + "<airport>" if len(val) == 3 and val.isalpha() and val.isupper() else m.group(0)
    if not _ID_VALUE.fullmatch(val):
        return m.group(0)
    return key + sep + _KV_TAG.get(key[:4].lower(), "<id>")


def _kv_name(m: re.Match) -> str:
    key, sep, val = m.groups()
    listed = "[" in sep if key.startswith("passenger") and "_" not in key else "=" in sep or "'" in sep or '"' in sep
    if not listed or not _starts_word(m) or val.split()[0].lower() in _NOT_NAMES:
        return m.group(0)
    return key + sep + "<name>"


def _said(tag: str):
    def sub(m: re.Match) -> str:
        code = m.group(2)
        if not _starts_word(m) or tag == "<reservation_id>" and (
                code.isdigit() or code.isalpha() and (len(code) != 6 or code in _WORD_CODES)):
            return m.group(0)
        return m.group(0)[: m.start(2) - m.start(0)] + tag
    return sub


_SAID_USER, _SAID_RESERVATION = _said("<user_id>"), _said("<reservation_id>")


def _said_name(m: re.Match) -> str:
    if not _starts_word(m) or m.group(1).split()[0].lower() in _NOT_NAMES:
        return m.group(0)
    return m.group(0)[: m.start(1) - m.start(0)] + " <name>"


def _run(m: re.Match) -> str:
    """One item of a run of equal placeholder items ("id=<id>, id=<id>" -> "id=<id>")."""
    key = _KEY_BEFORE.search(m.string, max(0, m.start() - 40), m.start())
    parts = _RUN_SPLIT.split(m.group(0))
    out, last = [parts[0]], (key.group(0) if key else "") + parts[0]
    for sep, item in zip(parts[1::2], parts[2::2]):
        if item != last:
            out.append(sep + item)
            last = item
    return "".join(out)


def _month_date(m: re.Match) -> str:
    return "<date>" if _starts_word(m) else m.group(0)


def _tokens(text: str, air: bool, service: bool = True) -> str:
    carriers: set[str] = set()
    urls = [u.span() for u in _URL.finditer(text)] if "://" in text else ()

    def sub(m: re.Match) -> str:
        kind, tok = m.lastgroup, m.group(0)
        if urls and any(a <= m.start() < b for a, b in urls):
            return tok
        if kind == "short" or kind == "number":
            before = text[max(0, m.start() - 24): m.start()]
            if _CARD_BEFORE.search(before) or len(tok) == 4 and _CARD_AFTER.match(text, m.end()):
                return "<payment_id>"
            return tok if kind == "short" or _round(tok) else "<number>"
        if kind == "reservation_id" and not service:
            return tok            # a bare 6-character code outside bookings is a name (IL2CPP, ES2020 ...)
        if kind == "flight":
            prefix = tok.rstrip("0123456789")
            if not (air or prefix in carriers or _DATE_AHEAD.match(text, m.end())):
                return tok
            carriers.add(prefix)
        return "<%s>" % kind

    return _TOKEN.sub(sub, text)


@lru_cache(maxsize=512)
def _names_re(people: frozenset[str]) -> re.Pattern | None:
    names = sorted((p for p in people if len(p) >= 2 and p[0].isupper()), key=len, reverse=True)
    return re.compile(r"(?:%s)(?!\w)" % "|".join(map(re.escape, names))) if names else None


def generalise(text: str, people: Iterable[str] = ()) -> str:
    """``text`` with one session's ids, paths, dates and names replaced by placeholders."""
    if not text:
        return text
    if "/" in text and any(r in text for r in _PATH_ROOTS):
        text = _PATH.sub(_path, text)
    if ":\\" in text:
        text = _WIN_PATH.sub(_path, text)
    if "@" in text:
        text = _EMAIL.sub("<email>", text)
    low = text.lower()
    if _DIGIT.search(text):
        text = _tokens(text, any(w in low for w in _AIR_WORDS), any(w in low for w in _SERVICE_WORDS))
        text = _MONTH_DATE.sub(_month_date, text)
    if any(k in low for k in _KV_WORDS):
        text = _KV.sub(_kv, text)
    if any(k in low for k in _KV_NAME_WORDS):
        text = _KV_NAME.sub(_kv_name, text)
    if "name is" in low or "name's" in low or "call me" in low:
        text = _SAID_NAME.sub(_said_name, text)
    if " id" in low or "userid" in low or "user name" in low or "username" in low:
        text = _SAID_ID.sub(_SAID_USER, text)
    if "reservation" in low or "booking" in low or "confirmation" in low:
        text = _SAID_CODE.sub(_SAID_RESERVATION, text)
    if people:
        names = _names_re(people if isinstance(people, frozenset) else frozenset(people))
        if names is not None:
            text = names.sub(lambda m: "<name>" if _starts_word(m) else m.group(0), text)
    if "<" in text and _LIST_GATE.search(text):
        text = _RUN.sub(_run, _SAME_TAG.sub(r"\1", text))
    return text


# --- people_in ----------------------------------------------------------------------

_INTRO = re.compile(
    rf"(?:\b[Mm]y name(?:'s| is)|\b[Nn]ame(?:[?.!] *(?:[Ii]t's|[Ii]t is)|:| is)|\bI'm|\bI’m|\bI am|"
    rf"\b[Cc]all me|\b[Tt]his is) ({_NAME_WORD}(?: {_NAME_WORD}){{0,2}})")
_ID_NAME = re.compile(r"\b([a-z]{2,})_([a-z]{2,})_\d{3,5}\b")
_JSON_NAME = re.compile(r"[\"'](?:first_?name|last_?name|given_?name|family_?name|full_?name|firstName|lastName|"
                        r"fullName|passenger_?name|customer_?name)[\"']\s*:\s*[\"']([^\"'\n]{2,40})[\"']")
_JSON_BARE_NAME = re.compile(rf"[\"']name[\"']\s*:\s*[\"']({_NAME_WORD}(?: {_NAME_WORD}){{1,2}})[\"']")
_PERSON_CUES = re.compile(r"(?i)\b(?:dob|date_of_birth|birth|e-?mail|phone|passengers?|customer|address)\b")
_WORD = re.compile(_NAME_WORD)


def people_in(texts: Iterable[str]) -> set[str]:
    """Name words of the people a session serves, from its user turns and tool results.

    Read from self-introductions ("my name is Sophia Silva", "I'm Sophia"), tau-style
    user ids (``sophia_silva_7557`` -> Sophia, Silva) and name fields of tool results
    (``"first_name": "Sofia"``; ``"name": "Sofia Kim"`` next to an e-mail, a birth date,
    a phone, an address or passengers). Common words, titles and tool names are not names.
    """
    out: set[str] = set()
    for text in texts:
        if not text:
            continue
        for m in _INTRO.finditer(text):
            for w in m.group(1).split():
                if w.lower() in _NOT_NAMES or w.endswith(("ing", "ly", "ed")):
                    break
                out.add(w)
        if "_" in text:
            for first, last in _ID_NAME.findall(text):
                if first not in _ID_WORDS and last not in _ID_WORDS:
                    out.update((first.title(), last.title()))
        if "name" in text:
            for value in _JSON_NAME.findall(text):
                out.update(w for w in _WORD.findall(value) if w.lower() not in _ID_WORDS)
            if _PERSON_CUES.search(text):
                for value in _JSON_BARE_NAME.findall(text):
                    ws = value.split()
                    if not any(w.lower() in _NOT_NAMES for w in ws):
                        out.update(ws)
    return out


# --- instance_specifics -----------------------------------------------------------------
# The measure's own patterns: broader than the rules above and written apart from them.

_ACRONYMS = frozenset("SHA256 SHA384 SHA512 SHA224 BASE64 BASE32 UTF16 UTF32 AES128 AES256 RSA2048 RSA4096 "
                      "ISO8601 ISO8859 X86 ARM64 AMD64 WIN32 WIN64 INT64 INT32 FLOAT32 FLOAT64 UINT8 UINT16 "
                      "UINT32 UINT64 HTTP11 HTTP2 HTTP3 OAUTH1 OAUTH2 IPV4 IPV6 GPT35 PY311 PY312 CP1252 H264 "
                      "H265".split())
_DETECT = re.compile(
    r"(?P<email>(?<!\\)\b[\w.+-]+@[\w-]+\.[\w.-]*[A-Za-z](?![\w(]))"
    r"|(?P<snake>\b[a-z]+(?:_[a-z]+)*_\d{4,}\b)"
    r"|(?P<uuid>\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b)"
    r"|(?P<iso>\b(?:19|20)\d\d-\d\d-\d\d\b)"
    r"|(?P<path>(?<![\w.~/<>-])(?:/(?:home|Users|tmp|private|var/folders|root)/|[A-Za-z]:\\Users\\)[^\s\"'`]*)"
    r"|(?P<order>#[A-Z]?\d{6,}\b)"
    r"|(?P<slot>(?i:\b(?:user|customer|reservation|booking|order|payment|account)_?id)[\"']?\s?[:=]\s?[\"']?"
    r"(?!<)[\w-]+)"
    r"|(?P<said>(?i:\b(?:reservation|booking|confirmation)(?: (?:id|code|number))?"
    r"(?:,| is| was| under| code| with| of)*:? [\"'`]?)[A-Z0-9]{6}\b)"
    r"|(?P<code>\b(?=[A-Z0-9]{5,8}\b)(?=[A-Z]*\d)(?=\d*[A-Z])[A-Z0-9]+\b)"
    r"|(?P<hex>\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,}\b)"
    r"|(?P<phone>\(?\b\d{3}\)?[ .-]\d{3}[ .-]\d{4}\b)"
    r"|(?P<num>(?<![\w.-])\d{7,}\b)"
    r"|(?P<card>\b\d{4,}(?= (?:[a-z]+ )?card\b)|(?<=(?i:card) )#?\d{4,}\b)"
    r"|(?P<intro>\b(?i:my name is) [A-Z][a-z]+)")
_DETECT_URL = re.compile(r"\w+://\S+")
_UNIT = re.compile(r"\d+(?:[KMGTP]B|[KMG]?HZ|MS|PX|FPS|[KMGPDXSH])")


@lru_cache(maxsize=512)
def _people_re(people: frozenset[str]) -> re.Pattern | None:
    names = sorted((p for p in people if len(p) >= 2), key=len, reverse=True)
    return re.compile(r"(?<![\w<])(?:%s)(?![\w>])" % "|".join(map(re.escape, names))) if names else None


def instance_specifics(text: str, people: Iterable[str] = ()) -> list[str]:
    """The ids, one-off paths and customer names in ``text`` (empty when it generalises)."""
    if not text:
        return []
    found: list[str] = []
    urls = [u.span() for u in _DETECT_URL.finditer(text)] if "://" in text else ()
    for m in _DETECT.finditer(text):
        s, kind = m.group(0), m.lastgroup
        if urls and kind in ("hex", "code", "num", "snake") and any(a <= m.start() < b for a, b in urls):
            continue
        if kind == "code" and (s in _ACRONYMS or _UNIT.fullmatch(s)) or kind == "num" and _round(s):
            continue
        if kind in ("slot", "said", "intro"):
            s = re.split(r"[\s:=\"'`]+", s)[-1]
        found.append(s.rstrip(".,;:)"))
    names = _people_re(people if isinstance(people, frozenset) else frozenset(people))
    if names is not None:
        found.extend(m.group(0) for m in names.finditer(text))
    return list(dict.fromkeys(found))
