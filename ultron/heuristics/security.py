"""``security`` memories: a credential in plain text, or a refusal for safety.

An unmasked credential (AWS / GitHub / OpenAI / Slack / Google key, private key
block) in a tool result, tool arguments or a user turn - the secret itself is never
copied: every text of every memory is redacted (:func:`ultron.heuristics.text.redact`);
an agent refusal that names a security reason (malware, exploit, credentials, …).
Permission and authentication errors are typed ``security`` by the error rule.

Confidence: 0.55 credential seen (+ 0.10 when the agent reacted to it) / 0.55 refusal.
"""

from __future__ import annotations

import re
from typing import Any

from ultron.heuristics.candidates import candidate
from ultron.heuristics.episodes import Digest
from ultron.heuristics.gists import call_gist
from ultron.heuristics.text import clip, norm_key, sentences

_I = re.IGNORECASE

# Credentials that must never sit in plain text (label, pattern).
_SECRETS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("AWS access key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("GitHub token", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}\b|\bgithub_pat_[A-Za-z0-9_]{40,}\b")),
    ("OpenAI API key", re.compile(r"\bsk-(?:proj-|live-|test-)?[A-Za-z0-9_\-]{20,}\b")),
    ("Slack token", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}\b")),
    ("Google API key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}\b")),
    ("private key", re.compile(r"-----BEGIN (?:RSA |EC |DSA |OPENSSH |PGP )?PRIVATE KEY(?: BLOCK)?-----")),
)
_SEC_TOPIC = re.compile(
    r"\b(?:malware|exploit|hack(?:ing)?|phishing|credentials?|passwords?|security|unsafe|harmful|illegal|"
    r"privacy|personal data|unauthori[sz]ed|vulnerabilit(?:y|ies)|attack|bypass|ransomware|keylogger)\b", _I)
_REFUSAL = re.compile(
    r"\b(?:i'?m|i am) (?:sorry|afraid),? (?:but )?(?:i |we )?(?:can(?:no|')t|can not|am unable|'?m unable|won'?t)|"
    r"\b(?:i|we) (?:can(?:no|')t|can not|am unable to|'?m unable to|won'?t) (?:assist|help|comply|provide|do that)\b",
    _I)

_ANY_SECRET_RX = re.compile("|".join(f"(?:{rx.pattern})" for _, rx in _SECRETS))
# Every credential pattern starts with one of these: a substring test first keeps the scan cheap.
_SECRET_PREFIXES = ("AKIA", "ASIA", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "sk-", "xox", "AIza",
                    "-----BEGIN")


class _AnySecret:
    @staticmethod
    def search(text: str) -> bool:
        return any(p in text for p in _SECRET_PREFIXES) and bool(_ANY_SECRET_RX.search(text))


_ANY_SECRET = _AnySecret()
_REACTION = re.compile(r"\b(?:token|key|secret|credential|password|redact\w*|rotate|revoke)\b", _I)


SIGHTED = " appeared in plain text in "


def is_sighting(memory: dict[str, Any]) -> bool:
    """A memory saying where a credential was seen in plain text (what this module writes)."""
    return SIGHTED in memory["content"]


def extract_security(d: Digest, task_type: str | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    by_result = {c.result_msg: c for c in d.calls if c.result_msg >= 0}
    for i, k in enumerate(d.kind):
        sources: list[tuple[str, str, list[str]]] = []
        if k == "tool":
            if _ANY_SECRET.search(d.text[i]):
                c = by_result.get(i)
                where = f"the output of {call_gist(c.name, c.args, c.raw, 120)}" if c else "a tool result"
                sources.append((d.text[i], where, [c.name] if c else []))
        elif k == "user":
            if _ANY_SECRET.search(d.text[i]):
                sources.append((d.text[i], "a user message", []))
        elif k == "assistant":
            for p in d.msg_calls.get(i, []):
                c = d.calls[p]
                if _ANY_SECRET.search(c.raw):
                    sources.append((c.raw, f"the arguments of a {c.name} call", [c.name]))
        for text, where, tools in sources:
            for label, rx in _SECRETS:
                if not rx.search(text):
                    continue
                key = label + where
                if key in seen:
                    continue
                seen.add(key)
                j, reaction = d.next_assistant_text(i)
                react = next((clip(x, 260) for x in sentences(reaction[:1500]) if _REACTION.search(x)), "") \
                    if reaction else ""
                out.append(candidate(
                    "security", "procedural", f"A {label}{SIGHTED}{where}.", d.task_context(i),
                    react, tools, 0.55 + (0.10 if react else 0.0), task_type, [text[:300]]))
        if k == "assistant" and d.text[i] and not d.msg_calls.get(i):
            t = d.text[i][:1500]
            if _REFUSAL.search(t) and _SEC_TOPIC.search(t):
                sents = sentences(t)
                refusal = next((x for x in sents if _REFUSAL.search(x)), "")
                reason = next((x for x in sents if _SEC_TOPIC.search(x) and x != refusal), "")
                request = d.request_before(i)
                if refusal and request and norm_key(refusal) not in seen:
                    seen.add(norm_key(refusal))
                    out.append(candidate("security", "procedural", "Agent declined: " + clip(refusal, 260),
                                         "Request: " + clip(request, 300), reason, [], 0.55, task_type, [t]))
    return out
