"""Offline, deterministic task segmentation (the ``rules`` provider's ``segment``).

A window of messages is cut into contiguous tasks. Only a user message can open
a task; a system message always opens one; assistant and tool messages,
sub-agent (sidechain) traffic and harness notes (``[Request interrupted by
user]``, messages that are only markup tags) never do. The window is read left
to right and each candidate user message gets a score, a weighted sum of
features that each lie in [0, 1]; the task is cut where the score is above 0::

    closed           +3  the previous request was closed by the user ("thanks, that's all", ###STOP###)
    answered         +0.5  the last message before it is a finished text answer (no pending tool call)
    unfinished       +2  ... or a tool call / result the assistant never followed up on
    asked            -3  the assistant's last text asks the user something
    unreplied        -1  the previous request got no assistant reply at all (and was not closed)
    greeting         +5  "Hi", "Hello", "Good morning", ...
    new_topic        +2  "now", "next", "another question", "how do I", "what is", imperative verb ("write ...")
    new_request      +2  any of those, or "can you", "also", "I need / I want / I'd like", "I have a problem"
    identity         +0.5  "my user id / name / email is ..."
    continuation     -4  "yes", "ok", "it ...", "that ...", "still", "fails", "again", a pasted error, a short reply
    closing          -2  the message itself only closes ("Thank you for your help!")
    lexical_shift    +3  1 - TF-IDF cosine(current task so far, the request plus its reply)
    embedding_shift  +4  1 - cosine of dense vectors of the same two texts
    bias             -9

So a cut needs both a topic shift (at most 7 points) and a discourse cue. The
weights are round numbers close to a logistic-regression fit on synthetic
multi-task sessions (benchmarks/segmentation.py), with ``answered``,
``unfinished``, ``unreplied`` and ``identity`` held at modest values the data
alone would push to extremes.

The left side of each comparison is the current task so far (at most its last
LEFT_TURNS turns, a turn being one candidate and the messages up to the next);
the right side is the candidate's turn. Lexical cohesion uses TF-IDF vectors
(sublinear term frequency, English stop words removed, IDF over the window's
turns). The default "embedding" is not a learned model: it is signed feature
hashing of character 3-5-grams of the content words into 4096 dimensions,
which also sees shared word pieces ("book" / "booking") that exact tokens miss.
``segment_window(..., embed=f)`` swaps in a real sentence-embedding model;
its cosines have another scale, so EMBED_BASELINE (the cosine of unrelated
texts) and W_EMBED may need recalibrating with the benchmark.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ultron.sessions.messages import Message

Embed = Callable[[list[str]], np.ndarray]

# -- the decision rule ------------------------------------------------------------------
W_CLOSED = 3.0
W_ANSWERED = 0.5
W_UNFINISHED = 2.0
W_ASKED = -3.0
W_UNREPLIED = -1.0
W_GREETING = 5.0
W_NEW = 2.0
W_TOPIC = 2.0
W_IDENTITY = 0.5
W_CONTINUE = -4.0
W_CLOSING = -2.0
W_LEXICAL = 3.0
W_EMBED = 4.0
BIAS = -9.0
#: cosine an unrelated pair typically has under the embedding (0 for hashed n-grams).
EMBED_BASELINE = 0.0

LEFT_TURNS = 3
TOPIC_CHARS = 80
# text budget per message kind, so a huge tool output cannot drown the conversation
USER_CHARS = 2000
ASSISTANT_CHARS = 1500
TOOL_CHARS = 400
ARGS_CHARS = 200
TURN_CHARS = 4000
EMBED_DIM = 4096

# -- cues ---------------------------------------------------------------------------------
_I = re.IGNORECASE
# a harness note a person did not type: "[Request interrupted by user]", or text that is only tags
_BRACKET_NOTE = re.compile(r"^\s*\[[^\]\n]{1,200}\]\s*$")
_TAG_BLOCK = re.compile(r"<([A-Za-z][\w:-]*)(?:\s[^>]*)?>.*?</\1\s*>", re.DOTALL)
_LONE_TAG = re.compile(r"</?[A-Za-z][\w:-]*(?:\s[^>]*)?/?>")
_CAVEAT = re.compile(r"^\s*caveat:", _I)

# the user closes a request
_CLOSING_USER = re.compile(
    r"###stop###"
    r"|\b(?:that'?s|that\s+is|that\s+would\s+be|that\s+should\s+be|this\s+is)\s+(?:all|everything|it)\b"
    r"|\b(?:i'?m|i\s+am|we'?re|we\s+are)\s+all\s+set\b"
    r"|\b(?:that|this|it)\s+(?:worked|works\s+(?:now|perfectly|great)|fixed\s+it|did\s+(?:it|the\s+trick)"
    r"|solved\s+it)\b"
    r"|\bnothing\s+else\b|\bno\s+more\s+questions\b"
    r"|\bthanks?(?:\s+you)?(?:\s+(?:so|very)\s+much)?\s+for\s+(?:your|the|all)\b"
    r"|\b(?:have\s+a\s+(?:good|great|nice|wonderful)\s+(?:day|one|evening|night)|take\s+care|good\s?bye|bye)\b"
    r"|\bi'?ll\s+(?:get\s+back|reach\s+out|be\s+in\s+touch)\b",
    _I,
)
# the assistant signs off a finished answer
_CLOSING_ASSISTANT = re.compile(
    r"\b(?:anything\s+else|any\s+(?:other|further|more)\s+(?:questions?|assistance|help|requests?)"
    r"|feel\s+free\s+to|have\s+a\s+(?:great|good|nice|wonderful|safe)\s+(?:day|trip|flight|one)"
    r"|safe\s+travels|glad\s+(?:i|to)\s+(?:could\s+)?help|happy\s+to\s+help|you'?re\s+welcome)\b",
    _I,
)
# the assistant waits for the user's input
_ASKING = re.compile(
    r"\b(?:please|could\s+you|can\s+you|would\s+you|kindly)\b[^.!?\n]{0,60}?"
    r"\b(?:provide|confirm|share|specify|tell|choose|select|send|clarify|let\s+me\s+know)\b"
    r"|\blet\s+me\s+know\s+(?:which|whether|how|what|when|if\s+you(?:'d|\s+would)\s+(?:like|prefer))\b"
    r"|\b(?:once|when|as\s+soon\s+as)\s+you\s+(?:have|provide|share|find|send|confirm|decide|are\s+ready|'re\s+ready)\b"
    r"|\b(?:do|would)\s+you\s+(?:want|like|prefer)\b|\bshall\s+i\b|\bshould\s+i\b",
    _I,
)
_GREETING = re.compile(r"^(?:hi|hello|hey|hiya|howdy|greetings|good\s+(?:morning|afternoon|evening))\b", _I)
_GREETING_PREFIX = re.compile(r"^(?:hi|hello|hey)(?:\s+there)?[,!.]+\s+(?=\S)", _I)
_LEAD_IN = r"^(?:(?:ok(?:ay)?|thanks|thank\s+you|great|cool|alright|perfect|nice)[,.!]*\s+)?"
# a new subject or a fresh command: "now ...", "another question", "how do I", "write me ..."
_NEW_TOPIC = re.compile(
    _LEAD_IN + r"(?:"
    r"now|next|another|new\s+(?:question|task|topic)|one\s+more\s+(?:question|thing)|a\s+different|separately"
    r"|on\s+(?:another|a\s+different)\s+note|unrelated|switching|moving\s+on|let'?s\s+(?:move|switch|turn)"
    r"|how\s+(?:do|can|should|would|to)|what(?:'s|\s+is|\s+are|\s+does)|why\s+(?:does|is|do)|is\s+there\s+a\s+way"
    r"|(?:please\s+)?(?:write|create|make|build|generate|implement|add|fix|explain|show|give|tell|list|find"
    r"|refactor|convert|translate|summari[sz]e|design|draft|set\s+up|install|run|read|update|remove|delete"
    r"|rename|describe|compare|plan|test|debug|review|spawn|publish|deploy|commit|perform)\b(?!\s+(?:it|that|this)\b)"
    r")",
    _I,
)
# a request in the user's own words: "can you ...", "I need ...", "also ..."
_NEW_REQUEST = re.compile(
    _LEAD_IN + r"(?:"
    r"also|additionally|(?:can|could|would|will)\s+you|(?:please\s+)?help\s+me"
    r"|(?:i|we)(?:\s+(?:need|want|wanted|was\s+hoping|were\s+hoping|am\s+looking|am\s+having|would\s+(?:like|love))"
    r"|'d\s+(?:also\s+)?(?:like|love)|'m\s+(?:looking|having|trying)"
    r"|\s+have\s+(?:a|an|some)\s+(?:question|problem|issue"
    r"|request|task|bug|error|reservation|booking|order|flight|file|project))"
    r")\b",
    _I,
)
_IDENTITY = re.compile(
    r"\bmy\s+(?:user\s*(?:id|name)|username|customer\s+id|account(?:\s+(?:id|number))?|name|email)\s+is\b", _I
)
_CONTINUATION_START = re.compile(
    r"^(?:yes|yeah|yep|yup|no|nope|nah|ok(?:ay)?|sure|right|correct|exactly|perfect|alright|all\s+right"
    r"|got\s+it|sounds\s+good|fine|agreed|done|i\s+see|oh|hmm+|well|but|and|so|then|still|however|actually"
    r"|wait|hold\s+on|in\s+that\s+case|it|its|it's|that|this|they|those|these|neither|both|either|same"
    r"|the\s+(?:first|second|third|last|other|same|one)|option|instead|what\s+about|how\s+about"
    r"|thanks|thank\s+you|great|understood|i\s+understand|will\s+do|you\s+too|i'?ll|i\s+will|let\s+me)\b",
    _I,
)
# follow-up on the same problem, wherever it is said
_CONTINUATION_ANY = re.compile(
    r"\b(?:fails?|failed|failing|doesn'?t\s+work|didn'?t\s+work|not\s+working|still|broken|crash(?:es|ed)?"
    r"|again|i'?m\s+back|back\s+with)\b"
    r"|traceback\s+\(most\s+recent|^\s*\w*(?:error|exception)\b\s*:",
    _I | re.MULTILINE,
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_TRAILING_NOISE = re.compile(r"[\s*_`~)\]\"'»”’:;,-]+$")
_WORD = re.compile(r"[a-z0-9_]+")
_SPACE = re.compile(r"\s+")
_MARKUP = re.compile(r"\*\*|__|`+|^#+\s*")
_STOP = frozenset(
    """a about above after again all also am an and any are as at be been before being below between both but by
    can could did do does doing done down during each else few for from further get got had has have having he her
    here hers him his how i i'd i'll i'm if in into is it it's its just let like me more most my need no nor not now
    of off ok okay on once only or other our ours out over own please re same she should so some such than thank
    thanks that the their them then there these they this those through to too under until up very want was we
    were what when where which while who whom why will with would yes you your yours ll ve don didn doesn isn
    sure hi hello hey""".split()
)


@dataclass(frozen=True)
class Candidate:
    """One possible task start and why it was (not) taken. ``index`` is 0-based."""

    index: int
    score: float
    features: dict[str, float]
    boundary: bool


# -- public API ---------------------------------------------------------------------------


def segment_window(messages: list[Message], *, embed: Embed | None = None) -> list[tuple[int, int, str]]:
    """Tasks as (start, end, topic) with 1-based inclusive in-window indices; a contiguous,
    non-overlapping cover of 1..len(messages) in order (first start 1, last end L, next start = prev end + 1).

    ``embed`` maps texts to one vector per text (rows of an array); when given it
    replaces the built-in hashed character n-gram vectors.
    """
    n = len(messages)
    if n == 0:
        return []
    starts = [0] + [c.index for c in _decide(messages, embed) if c.boundary]
    ends = starts[1:] + [n]
    return [(s + 1, e, topic_for(messages[s:e])) for s, e in zip(starts, ends)]


def topic_for(messages: list[Message]) -> str:
    """A short (<= 80 chars) topic of one task, from its first user request."""
    texts = [_request_text(m) for m in messages if m.role == "user" and not m.is_sidechain]
    texts = [t for t in texts if t]
    if not texts:  # a task seen from its middle: say what the agent was doing
        texts = [_text(m) for m in messages if m.role in ("assistant", "system") and _text(m)]
    if not texts:
        names = [name for m in messages for name, _ in _calls(m) if name]
        return _shorten("tool calls: " + ", ".join(dict.fromkeys(names))) if names else "(no text)"
    sentences = [s.strip() for s in _SENTENCE_END.split(texts[0]) if s.strip()]
    # skip a bare greeting ("Hi there!") so the topic says what was asked
    while len(sentences) > 1 and _GREETING.match(sentences[0]) and len(_WORD.findall(sentences[0].lower())) <= 3:
        sentences.pop(0)
    sentences = [s.strip() for s in _SENTENCE_END.split(_after_acknowledgement(" ".join(sentences))[0]) if s.strip()]
    first = _SPACE.sub(" ", sentences[0]) if sentences else _SPACE.sub(" ", texts[0]).strip()
    first = _GREETING_PREFIX.sub("", first) or first
    first = _MARKUP.sub("", first).strip().rstrip(":").strip()
    return _shorten(first) or "(no text)"


# -- decision -----------------------------------------------------------------------------


def _decide(messages: Sequence[Message], embed: Embed | None = None,
            truth: set[int] | None = None) -> list[Candidate]:
    """Score every candidate start in the window, left to right. ``truth`` (fitting only): the
    true task starts, where the left context restarts instead of at the decided ones."""
    n = len(messages)
    cands = [i for i in range(1, n) if _can_start(messages, i)]
    if not cands:
        return []
    starts = [0] + cands
    bounds = list(zip(starts, starts[1:] + [n]))
    texts = [_turn_text(messages[s:e]) for s, e in bounds]
    tokens = [_tokens(t) for t in texts]
    lex = _tfidf(tokens)
    vecs = _embed_turns(texts, tokens, embed)

    out: list[Candidate] = []
    seg_first = 0  # turn index where the current task began
    for t in range(1, len(bounds)):
        i = starts[t]
        msg = messages[i]
        if msg.role == "system":  # a new system prompt opens a task (a run of them opens one)
            boundary = messages[i - 1].role != "system"
            feats, score = {"system": 1.0}, (math.inf if boundary else -math.inf)
        else:
            left = range(max(seg_first, t - LEFT_TURNS), t)
            feats = _cues(messages, bounds[t - 1], i)
            feats["lexical_shift"] = _shift(_cos_rows(lex, left, t), 0.0)
            feats["embedding_shift"] = _shift(_cos_rows(vecs, left, t), EMBED_BASELINE)
            score = BIAS + sum(_WEIGHTS[k] * v for k, v in feats.items())
            boundary = score > 0
        out.append(Candidate(i, score, feats, boundary))
        if (i in truth) if truth is not None else boundary:
            seg_first = t
    return out


def _can_start(messages: Sequence[Message], i: int) -> bool:
    msg = messages[i]
    if msg.is_sidechain:
        return False
    if msg.role == "system":
        return True
    if msg.role != "user" or not _request_text(msg):
        return False
    # the request that comes with a system prompt belongs to the task the prompt opened
    j = i - 1
    while j >= 0 and (messages[j].is_sidechain or (messages[j].role == "user" and not _request_text(messages[j]))):
        j -= 1
    return not (j >= 0 and messages[j].role == "system")


def _cues(messages: Sequence[Message], prev: tuple[int, int], i: int) -> dict[str, float]:
    """Discourse cues for a candidate at ``i``, given the previous turn's bounds."""
    s, e = prev
    opener = messages[s]
    prev_request = _request_text(opener) if opener.role == "user" else ""
    replies = [m for m in messages[s:e] if m.role == "assistant" and not m.is_sidechain]
    said = [_text(m) for m in replies if _text(m)]
    last_said = said[-1][-300:] if said else ""
    # the last real message before the candidate (sub-agent traffic skipped); a harness
    # note after it ("[Request interrupted by user]") means the user stepped in
    last, noted = None, False
    for m in reversed(messages[s:e]):
        if m.is_sidechain:
            continue
        if m.role == "user" and not _request_text(m):
            noted = True
            continue
        last = m
        break

    closing_offer = bool(_CLOSING_ASSISTANT.search(last_said))
    asked = bool(last_said) and not closing_offer and (
        _TRAILING_NOISE.sub("", last_said).endswith("?") or bool(_ASKING.search(_last_sentences(last_said)))
    )
    final_text = _text(last) if last is not None and last.role == "assistant" and not last.tool_calls else ""
    answered = bool(final_text) and not asked and (closing_offer or len(final_text) >= 20)
    unfinished = last is not None and not noted and (last.role == "tool" or bool(last.tool_calls))
    closed = bool(prev_request) and bool(_CLOSING_USER.search(prev_request[-400:]))

    req, closes_first = _after_acknowledgement(_request_text(messages[i]))
    closed = closed or closes_first
    head = req[:300]
    words = len(_WORD.findall(head.lower()))
    greeting = bool(_GREETING.match(head))
    opening = _GREETING_PREFIX.sub("", head)
    new_topic = bool(_NEW_TOPIC.match(opening))
    new_request = new_topic or bool(_NEW_REQUEST.match(opening))
    continuation = (
        (not greeting and not new_request and (words <= 4 or bool(_CONTINUATION_START.match(head))))
        or bool(_CONTINUATION_ANY.search(head))
    )
    return {
        "closed": float(closed),
        "answered": float(answered),
        "unfinished": float(unfinished),
        "asked": float(asked),
        "unreplied": float(not replies and not closed),
        "greeting": float(greeting),
        "new_topic": float(new_topic),
        "new_request": float(new_request),
        "identity": float(bool(_IDENTITY.search(head))),
        "continuation": float(continuation),
        "closing": float(not new_request and bool(_CLOSING_USER.search(req[-400:]))),
    }


_WEIGHTS = {
    "closed": W_CLOSED,
    "answered": W_ANSWERED,
    "unfinished": W_UNFINISHED,
    "asked": W_ASKED,
    "unreplied": W_UNREPLIED,
    "greeting": W_GREETING,
    "new_topic": W_TOPIC,
    "new_request": W_NEW,
    "identity": W_IDENTITY,
    "continuation": W_CONTINUE,
    "closing": W_CLOSING,
    "lexical_shift": W_LEXICAL,
    "embedding_shift": W_EMBED,
}


# -- text -----------------------------------------------------------------------------------


def _after_acknowledgement(req: str) -> tuple[str, bool]:
    """People close one task and open the next in one message ("Thanks, that worked. Now
    write me a compose file"): when a first sentence that closes is followed by a new topic,
    the cues read the new topic, and the previous task counts as closed. Returns (the text
    to read, whether its first sentence closed the previous task)."""
    parts = [p for p in _SENTENCE_END.split(req.strip(), maxsplit=3) if p.strip()]
    if len(parts) < 2 or _GREETING.match(parts[0]) or not _CLOSING_USER.search(parts[0]):
        return req, False
    rest = " ".join(parts[1:])
    # a follow-up in the same task ("that worked, can you also ...") is not a new topic
    if _NEW_TOPIC.match(_GREETING_PREFIX.sub("", rest[:300])) or _GREETING.match(rest[:300]):
        return rest, True
    return req, False


def closing_of(msg: Message | None) -> Message | None:
    """The closing sentence a task's next message opens with ("Thanks, that worked."), as a
    message of its own: it belongs to the task it closes, which reads it as its confirmation
    (the message itself opens the next task)."""
    if msg is None or msg.role != "user" or msg.is_sidechain:
        return None
    text = _request_text(msg)
    if not _after_acknowledgement(text)[1]:
        return None
    return Message(role="user", content=_SENTENCE_END.split(text.strip(), maxsplit=1)[0], line=msg.line)


def with_closing(messages: list[Message], following: Message | None) -> list[Message]:
    """A segment's messages, with the next message's closing sentence when it has one."""
    closing = closing_of(following)
    return messages + [closing] if closing is not None else messages


def _request_text(msg: Message) -> str:
    """What a person typed in a user message: harness tags and notes removed ('' if nothing)."""
    text = msg.content if isinstance(msg.content, str) else ""
    if not text.strip() or _BRACKET_NOTE.match(text) or _CAVEAT.match(text):
        return ""
    if "<" in text:
        text = _LONE_TAG.sub(" ", _TAG_BLOCK.sub(" ", text))
    return text.strip()


def _text(msg: Message) -> str:
    return msg.content.strip() if isinstance(msg.content, str) else ""


def _calls(msg: Message) -> list[tuple[str, str]]:
    """(name, arguments) of each OpenAI-shaped tool call, tolerating odd shapes."""
    out = []
    for call in msg.tool_calls or []:
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict):
            out.append((str(fn.get("name") or ""), str(fn.get("arguments") or "")))
    return out


def _last_sentences(text: str) -> str:
    parts = [p for p in _SENTENCE_END.split(text) if p.strip()]
    return " ".join(parts[-2:])


def _turn_text(messages: Sequence[Message]) -> str:
    parts: list[str] = []
    for m in messages:
        if m.role == "user":
            parts.append((_request_text(m) or "")[:USER_CHARS])
        elif m.role == "tool":
            parts.append(_text(m)[:TOOL_CHARS])
        else:
            parts.append(_text(m)[:ASSISTANT_CHARS])
            for name, args in _calls(m):
                parts.append(f"{name} {args[:ARGS_CHARS]}")
    return "\n".join(p for p in parts if p)[:TURN_CHARS]


def _tokens(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 1]


def _shorten(text: str) -> str:
    text = _SPACE.sub(" ", text).strip()
    if len(text) <= TOPIC_CHARS:
        return text
    cut = text[: TOPIC_CHARS - 1]
    if " " in cut[TOPIC_CHARS // 2:]:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,;:-") + "…"


# -- vectors --------------------------------------------------------------------------------


def _tfidf(tokens: list[list[str]]) -> np.ndarray:
    """Rows: L2-normalised TF-IDF of each turn (sublinear tf, IDF over the window's turns)."""
    vocab: dict[str, int] = {}
    counts = [Counter(toks) for toks in tokens]
    for c in counts:
        for w in c:
            vocab.setdefault(w, len(vocab))
    mat = np.zeros((len(tokens), max(1, len(vocab))), dtype=np.float64)
    for r, c in enumerate(counts):
        if c:
            idx = np.fromiter((vocab[w] for w in c), dtype=np.int64, count=len(c))
            mat[r, idx] = 1.0 + np.log(np.fromiter(c.values(), dtype=np.float64, count=len(c)))
    df = np.count_nonzero(mat, axis=0)
    mat *= np.log1p(len(tokens) / np.maximum(df, 1))
    return _normalise(mat)


def _hashed_ngrams(words: list[str]) -> np.ndarray:
    """Signed feature hashing of character 3-5-grams of ' word ' strings, L2-normalised."""
    vec = np.zeros(EMBED_DIM, dtype=np.float64)
    if not words:
        return vec
    data = np.frombuffer((" " + " ".join(words) + " ").encode("utf-8"), dtype=np.uint8).astype(np.uint64)
    for n in (3, 4, 5):
        if len(data) < n:
            break
        h = np.zeros(len(data) - n + 1, dtype=np.uint64)
        for k in range(n):
            h = h * np.uint64(1000003) + data[k: len(data) - n + 1 + k]
        h ^= h >> np.uint64(31)
        h *= np.uint64(0x9E3779B97F4A7C15)
        h ^= h >> np.uint64(29)
        idx = (h % np.uint64(EMBED_DIM)).astype(np.int64)
        sign = np.where((h >> np.uint64(63)) == 1, -1.0, 1.0)
        vec += np.bincount(idx, weights=sign, minlength=EMBED_DIM)
    norm = np.linalg.norm(vec)
    return vec / norm if norm else vec


def _embed_turns(texts: list[str], tokens: list[list[str]], embed: Embed | None) -> np.ndarray:
    if embed is None:
        return np.stack([_hashed_ngrams(t) for t in tokens])
    vecs = np.asarray(embed(list(texts)), dtype=np.float64)
    if vecs.ndim != 2 or vecs.shape[0] != len(texts):
        raise ValueError(f"embed returned shape {vecs.shape}, expected ({len(texts)}, dim)")
    return _normalise(vecs)


def _normalise(mat: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(mat, axis=1, keepdims=True)
    return np.divide(mat, norms, out=np.zeros_like(mat), where=norms > 0)


def _cos_rows(mat: np.ndarray, left: range, right: int) -> float | None:
    """Cosine between the sum of rows ``left`` and row ``right`` (rows are unit or zero);
    None when either side has nothing to compare."""
    a = mat[left.start:left.stop].sum(axis=0)
    na = float(np.linalg.norm(a))
    if not na or not mat[right].any():
        return None
    return float(np.clip(a @ mat[right] / na, -1.0, 1.0))


def _shift(cos: float | None, baseline: float) -> float:
    """1 - similarity above the baseline, in [0, 1]; 0.5 (no evidence) when a side is empty."""
    if cos is None:
        return 0.5
    return float(min(1.0, max(0.0, 1.0 - max(0.0, cos - baseline) / (1.0 - baseline))))
