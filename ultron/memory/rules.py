"""Offline ("rules") versions of the Memory Hub's LLM tasks: deterministic algorithms.

Nothing here calls a model. The same messages always give the same memories, and
extraction for a 30-message segment takes 1.5-3 ms (regular expressions over capped
texts, one pass to pair tool calls with results; stdlib and project modules only).

Memory extraction (``extract_memories``)
========================================
The segment is read once (:class:`_Digest`): sub-agent (sidechain) messages are left
out when there are main-thread ones; harness lines (slash-command echoes,
``<local-command-…>``, ``Caveat: …``, ``[Request interrupted …]``, task
notifications) are not user requests; IDE tag blocks and tau-bench's ``###STOP###``
are stripped; tool results are paired with their calls by id (the oldest waiting
call with that id) and judged with the trajectory scorer's error test
(:func:`ultron.trajectory.quality._is_error_result`); history replayed into the
log by a resumed session (same call id, tool and arguments) is skipped. Every text
is read only up to a cap, so a 5 MB tool output costs the same as a 5 KB one.

The segment is also cut into *episodes*: a human request opens one when the agent's
last word before it was a finished answer that asked nothing (no "?", "please
confirm", "let me know", "would you like" ...). A reply to the agent's question, a
confirmation ("yes", "go ahead", "sounds good"), or a turn after an interrupted or
pending tool call continues the episode. An episode's *goal* is its first request
that is more than a bare identity answer ("my user id is ...").

Five heuristics, each a memory type:

``error`` (error -> resolution; kind procedural)
    A failed tool call (not a call the user rejected, not a housekeeping tool such as
    TodoWrite / ExitPlanMode) is paired with the later successful call that most
    plausibly fixed it, searched among the next ``FIX_WINDOW`` calls of the same
    episode: the best by ``same tool`` first, then by argument similarity
    (``0.5 * Jaccard + 0.5 * share of the failed call's argument words kept``); a
    different tool qualifies only if it is not a mere lookup (a read-only tool or shell
    command, unless the failed call was one too) and has similarity >=
    ``OTHER_TOOL_MIN_SIM`` or is the first success right after the error with a fix
    announced ("instead", "let me try / fix / use", "workaround"). Repeats of the same
    error (same tool, same message with digits and ids masked) are one memory.
    content = "<tool> failed: <error line>" (the exception / ``error:`` line, the last
    one of a traceback, never the dump); context = the episode's goal, the latest user
    turn and the failing call; resolution = the agent's explanation (sentences with a
    cause or fix cue, no questions), the successful calls in between (at most two
    shown), then "Worked: <fixing call>" (for a retry of the same tool only the
    arguments that changed) or, when the very same call later succeeded unchanged,
    "Fix: <the calls in between>. Then re-ran: <call>", with the result when that is
    a short status line.
    An error with no fix is still emitted, with low confidence, so the caller counts it.
    An error whose line is about permissions or credentials is typed ``security``.

``correction`` (kind procedural when phrased as a rule, else episodic)
    A human turn after an agent turn that (a) rejects what the agent did: strong cues
    "that's wrong", "I said / meant / wanted", "you should / forgot", "wrong file",
    "(please / just) use X instead", ", not X.", "not X, but", "no, use / that's
    wrong …"; medium cues "actually, …", "instead", "rather than", "it should be", a
    sentence opening with "don't / do not / stop / never / avoid" (a strong cue in a
    conditional sentence or in the user correcting their own input - "I realized I
    gave the wrong id" - counts as medium); a bare "No, …" only when the agent had not
    just asked something and the turn is not a closing ("no, that's all"); or (b)
    follows a tool call the user rejected; or (c) is acknowledged by the agent as a
    correction ("you're right", "my mistake", "I apologize for the confusion").
    content = what the agent did or assumed: the rejected call, else the call since
    the previous user turn sharing most words with the correction (with the agent's
    matching sentence), else the agent's sentence sharing most words with it;
    resolution = "User: <the corrective sentences>" plus "Then: <the agent's next
    call>" when that succeeded.

``preference``
    Sentences of human turns: standing rules ("always …", "never …", "from now on",
    "going forward", "by default", "whenever …"; kind procedural), explicit
    preferences ("I prefer", "I'd rather", "my preferred / favourite"), likes
    ("I like / love / hate / don't like …") and "I don't want to …" (weakest, always
    episodic). "I prefer X" is procedural (a lasting taste); "I'd prefer", "if", or
    words tying it to this task ("this", "here", "now", "for my …") make it episodic.
    content = the sentence; resolution = the directive (the clause from the cue on,
    "I'd" dropped) and "Applied: <call>" when a later successful call of the episode
    has the preferred words in its arguments (only those arguments shown).

``pattern`` (kind procedural)
    An episode with at least ``PATTERN_MIN_CALLS`` successful non-housekeeping tool
    calls, every failed call followed by a later success of the same tool (or a fix
    found by the error rule), whose last tool result is not an error and which ends
    with an assistant text answer (closing thanks after it allowed). content = the
    goal; resolution = the ordered steps with a gist of each call's key argument
    (command, file name, query, or a few ``key=value``), runs of the same tool
    collapsed ("Read x3: a.toml, b.toml, c.toml") except for shell commands, each of
    which is a step; tools_used = tool names in order, deduplicated; context = the
    episode's other requests and "Outcome: <the final answer's first sentence>".

``security`` and ``life`` (optional types)
    security: an unmasked credential (AWS / GitHub / OpenAI / Slack / Google key,
    private key block) in a tool result, tool arguments or a user turn (the secret is
    never copied: every text of every memory goes through :func:`_redact`, i.e. ultron.redaction); an agent
    refusal that names a security reason (malware, exploit, credentials, …); and
    permission / authentication errors (from the error rule).
    life: in a customer-service segment (``task_type="customer_service"`` or a long
    system policy), agent sentences stating a rule ("cannot be modified", "free
    checked bag", "not refundable", "within 24 hours", "at most", …) about a travel /
    payment topic, with no personal ids or dates in them and not about the agent's own
    action ("I will …"), politeness ("I'm sorry, but", "Unfortunately,") stripped.
    Each is grounded against the system prompt: resolution = "Policy: <the policy
    sentence containing most of its words>" (when it holds at least half of them).
    At most ``MAX_LIFE_PER_SEGMENT`` per segment, the best grounded first.

Memories of one segment are deduplicated on (type, content with numbers and ids
masked), keeping the most confident; tags are the task type, up to three tool names
and topics found by keyword (python, javascript, docker, git, sql, pandas, …, airline,
payment); all texts are redacted of credentials.

Confidence (clamped to [0, 1]; the caller drops memories below 0.5)
-------------------------------------------------------------------
error, with a fix:  0.40 + 0.20 [same tool] + 0.15 * similarity + 0.10 [explicit
    success: a success word in the fix's result, the agent's next text or the user's
    next turn] + 0.05 [the agent explained the error] + 0.05 [the fix is the very next
    call] - 0.15 [the same error happened again after the fix] - 0.05 [more than five
    calls between the error and the fix].
error, no fix:  0.20 + 0.10 [the agent explained it].
correction:  cue 0.60 strong / 0.40 medium / 0.50 after a rejected call / 0.35 by
    acknowledgement only; + 0.15 [the agent acknowledged it] + 0.10 [a rejected call
    preceded a cued correction] + 0.05 [a concrete alternative is named: use /
    instead / should / rather / want / meant] + 0.05 [the agent's next call succeeded]
    - 0.05 [every corrective sentence is a question].
preference:  0.75 standing rule / 0.60 "prefer" / 0.50 like-dislike / 0.45 "don't want
    to"; + 0.10 [honoured later]; - 0.10 [conditional: "if", "unless"]; - 0.10 [a
    question].
pattern:  0.45 + 0.04 * min(successful steps - 3, 5) + 0.10 [the final answer reports
    completion] + 0.15 [the user's next turn confirms it works; plain thanks + 0.05]
    - 0.05 per resolved error (at most - 0.15) - 0.10 [read-only steps] - 0.20 [the
    final answer admits a failure].
security:  0.55 credential seen (+ 0.10 when the agent reacted to it) / 0.55 refusal.
life:  0.20 + 0.60 * share of its words found in one policy sentence (0.35 without a
    system policy to check against).

Other tasks
===========
``classify_memory_type``: weighted cue counts per type (content x1, resolution x0.75,
context x0.5, each pattern counted at most three times per field; tags naming a type
or a topic add 2 / 1); highest score wins, ties broken in the order security, error,
correction, preference, life, pattern; no cue at all -> "pattern".
``summarize_l0`` / ``overview_l1``: sentence selection within ``L0_TOKENS`` /
``L1_TOKENS`` (cl100k tokens); see their docstrings.
``is_same_memory`` / ``merge_bodies``: see their docstrings for thresholds.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any, Iterable

from ultron.llm.providers import L0_TOKENS, L1_TOKENS, MEMORY_TYPES
from ultron.llm.tokens import count_tokens, truncate_to_tokens
from ultron.sessions.messages import Message
from ultron.trajectory.quality import _INTERRUPT, _STOP_TOKEN, _cap, _is_error_result, _tool_kind

#: tie-break order of classify_memory_type (first wins).
TYPE_PRIORITY = ("security", "error", "correction", "preference", "life", "pattern")

# Field sizes of extracted memories, and of merged ones.
CONTENT_CHARS = 300
CONTEXT_CHARS = 600
RESOLUTION_CHARS = 600
MERGED_LIMITS = {"content": 600, "context": 600, "resolution": 1200}

FIX_WINDOW = 12            # calls after an error searched for its fix
OTHER_TOOL_MIN_SIM = 0.25  # argument similarity for a different tool to count as the fix
PATTERN_MIN_CALLS = 3
MAX_LIFE_PER_SEGMENT = 3

# Texts are only read this far: enough for every cue, bounded cost per message
# (``_cap``, shared with the quality signals, reads their _TEXT_CAP = 4000 characters by default).
_RESULT_HEAD = 2000
_RESULT_TAIL = 1500
_ARGS_CAP = 4000

_I = re.IGNORECASE

# -- harness text that no human typed ---------------------------------------------------
_TAG_BLOCK = re.compile(
    r"<(ide_opened_file|ide_selection|system-reminder|ide_diagnostics)>.*?</\1>", re.DOTALL)
_META_USER = re.compile(
    r"^\s*(?:<(?:local-command|command-|task-notification|user-prompt-submit|bash-(?:input|stdout|stderr))"
    r"|Caveat: The messages below|\[Request interrupted)", _I)
_REJECTED = re.compile(
    r"user doesn'?t want to proceed|tool use was rejected|user (?:rejected|denied|declined)|"
    r"user chose to (?:stay|not|keep|cancel)", _I)
_HOUSEKEEPING = frozenset({
    "todowrite", "todoread", "exitplanmode", "enterplanmode", "askuserquestion", "think",
    "taskoutput", "bashoutput", "killshell", "killbash", "listmcpresourcestool",
})
_READ_TOOL = re.compile(r"^(?:get|search|list|find|read|fetch|lookup|look|query|retrieve|show|view|check|"
                        r"glob|grep|ls|cat|websearch|webfetch|calculate|describe)", _I)

# -- errors ------------------------------------------------------------------------------
_EXC_LINE = re.compile(r"^\s*(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Warning)\b(?::|\s*$)")
_ERR_LINE = re.compile(
    r"^\s*(?:error\b|\[error\]|fatal\b|npm ERR!|E\s{2,}\S|FAILED\b|failure\b|panic\b|"
    r"exception\b|cannot\b|could not\b|unable to\b)|"
    r"\b(?:command not found|No such file or directory|Permission denied|not found|"
    r"is not (?:available|allowed|defined|recognized)|does not exist|unknown (?:option|command|skill|argument)|"
    r"invalid\b|denied\b|not enough|failed\b|timed? ?out)", _I)
_TOOL_ERR_TAG = re.compile(r"</?tool_use_error>")
_EXIT_LINE = re.compile(r"^\s*exit(?:ed with)? (?:code|status) -?\d+\s*$", _I)
_ERR_PREFIX = re.compile(r"^\s*(?:error|err)\s*[:!-]\s*", _I)
_SEC_ERR = re.compile(
    r"permission denied|access denied|\beacces\b|\beperm\b|operation not permitted|\bforbidden\b|\b403\b|"
    r"\b401\b|unauthori[sz]ed|authentication (?:failed|required|error)|not authori[sz]ed|"
    r"invalid (?:token|credentials?|api[ _-]?key|password)|(?:bad|expired|revoked) (?:token|credentials?)|"
    r"ssl certificate|certificate verify failed|\bsecret\b|credential", _I)
_FIX_CUE = re.compile(
    r"\binstead\b|\blet me (?:try|fix|use|correct|change|update|retry|install|add|set)\b|\bwork ?around\b|"
    r"\balternative(?:ly)?\b|\bmanually\b|\bthe (?:fix|issue|problem|error) (?:is|was)\b|\btry (?:again|with)\b", _I)
_CAUSE_CUE = re.compile(
    r"\bbecause\b|\bsince\b|\bdue to\b|\bmeans\b|\bneed(?:s|ed)? to\b|\brequires?\b|\bmissing\b|\bnot (?:set|installed|"
    r"available|supported|found|loaded|enough)\b|\bthe (?:issue|problem|error|cause) (?:is|was)\b|\bhappens when\b|"
    r"\binstead\b|\bshould\b|\blet me\b|\bdoesn'?t (?:exist|support|have|accept)\b|\bisn'?t\b|\bwasn'?t\b", _I)
_SUCCESS_WORD = re.compile(
    r"\b(?:success(?:ful(?:ly)?)?|succeeded|passed|works|worked|working now|fixed|resolved|done|completed?|"
    r"created|updated|published|installed|committed|booked|cancell?ed|modified|saved|ok)\b|✓|\ball \d+ tests? passed\b",
    _I)
_USER_SUCCESS = re.compile(
    r"\b(?:it|that|this|everything) (?:works|worked|is working|fixed it|did it|did the trick)\b|"
    r"\b(?:works|worked) (?:now|perfectly|great|fine)\b|\b(?:perfect|excellent|awesome|exactly what i)\b|"
    r"\b(?:problem|issue|it)(?:'s| is| has been) (?:solved|resolved|fixed)\b|\blooks good\b|\blgtm\b|\bnice\b|"
    r"\bgreat\b", _I)
_USER_THANKS = re.compile(r"\b(?:thanks|thank you|thx|appreciate)\b", _I)
_ASSISTANT_FAILURE = re.compile(
    r"\bi (?:was|am) (?:unable|not able) to\b|\bi (?:couldn'?t|could not|wasn'?t able to|failed to)\b|"
    r"\bunfortunately,? (?:i|it|the|this)\b.{0,60}\b(?:not|n't|unable|fail)|\b(?:did not|didn'?t) (?:work|succeed)\b",
    _I)
_COMPLETION = re.compile(
    r"\b(?:done|complete[ds]?|finished|success(?:ful(?:ly)?)?|created|updated|published|committed|booked|"
    r"cancell?ed|modified|all (?:set|good|tests pass)|is ready|now works|works|has been \w+ed)\b|✓", _I)

# -- corrections -------------------------------------------------------------------------
_CORR_STRONG = re.compile(
    r"\b(?:that'?s|that is|this is|it'?s|it is) (?:wrong|incorrect|not (?:right|correct|what i))\b|"
    r"\bnot what i (?:asked|wanted|meant|said)\b|"
    r"\bi (?:said|told you|asked (?:for|you to)|meant|was (?:asking|looking) (?:for|to))\b|"
    r"\bi (?:actually )?wanted\b|"
    r"\byou (?:should(?:n'?t| not| have)?|need to|have to|must|forgot|missed|ignored|misunderstood|"
    r"(?:are|were) (?:wrong|mistaken)|used the wrong)\b|"
    r"\b(?:the )?wrong (?:file|one|flight|path|directory|folder|version|branch|command|name|date|id|number|"
    r"airport|city|reservation|place|answer|approach|tool|column|table|function|method|package|url|port|value)\b|"
    r"(?:^|[,;:]\s*|\bplease\s+|\bjust\s+)use\s+\S+(?:\s+\S+){0,4}?\s+instead\b|,\s*not\s+(?:the\s+|a\s+|an\s+)?[\w.\-/`'\"]+\s*(?:[.!?]|$)|"
    r"\bnot\s+[\w.\-/`'\"]+\s*,\s*but\b", _I)
# The user correcting their own earlier input, or a conditional: weaker evidence against the agent.
_SELF_OR_IF = re.compile(
    r"\bi(?:'ve| have)? (?:just )?(?:realized|realised|provided|gave|sent|typed|mistyped|mixed up|made a mistake)\b|"
    r"\b(?:if|unless|in case)\b", _I)
_CORR_MEDIUM = re.compile(
    r"^\W*actually\b|\bactually,?\s+(?:i|it|we|the|that|you|my)\b|\binstead\b|\brather than\b|"
    r"(?:^|[.!?;]\s+)(?:please\s+)?(?:don'?t|do not|stop|never|avoid)\s+\w+|"
    r"\b(?:it|that|this|the \w+) should (?:be|have been|use)\b(?! all\b| fine\b| ok(?:ay)?\b| good\b| enough\b| in my\b)",
    _I)
_CORR_NO = re.compile(
    r"^\W*(?:no|nope)\b\s*[,.!:-]*\s*(?:(?:that'?s|it'?s|this is|that is) (?:wrong|not|incorrect)|use\b|not\b|"
    r"instead\b|i said\b|i meant\b|it should\b|you should\b|wrong\b|don'?t\b|do not\b)", _I)
_BARE_NO = re.compile(r"^\W*(?:no|nope)\b\s*[,.!]", _I)
_CLOSING = re.compile(
    r"^\W*(?:no|nope)\W+(?:thanks|thank you|worries|problem|that'?s (?:all|it|ok(?:ay)?|fine|alright|good|everything)|"
    r"it'?s (?:ok(?:ay)?|fine|alright)|need|further|more|nothing|i'?m good|all good)\b", _I)
_ACK = re.compile(
    r"\byou'?re (?:absolutely |completely |quite )?right\b|\bmy (?:mistake|bad|apologies)\b|"
    r"\bapologi[sz]e for (?:the|my|any) (?:mistake|error|confusion|oversight|misunderstanding)|"
    r"\bsorry (?:for|about) (?:the|my) (?:mistake|error|confusion|oversight|misunderstanding)|"
    r"\bi (?:misunderstood|misread|was wrong|made a mistake)\b|\bgood (?:catch|point)\b|"
    r"\blet me (?:correct|fix) (?:that|this|it|my)\b|\bthanks for (?:the )?(?:correction|clarif)", _I)
_ALTERNATIVE = re.compile(r"\b(?:use|instead|should|rather|prefer|want(?:ed)?|meant|need)\b", _I)
_IMPERATIVE = re.compile(
    r"^\W*(?:please\s+)?(?:use|don'?t|do not|never|always|stop|avoid|make sure|run|put|keep|call|add|remove|"
    r"write|check|prefer)\b", _I)

# The agent's turn waits for the user: a question or a request to confirm / provide / choose.
_ASKS = re.compile(
    r"\?|\b(?:please (?:confirm|provide|let me know|specify|choose|select|share|tell|review)|let me know|"
    r"would you like|do you want|shall i|should i|(?:can|could) you (?:please )?(?:confirm|provide|tell|share|let|"
    r"check|clarify)|which (?:one|option)|(?:reply|respond) with|awaiting your|once you confirm|if you confirm)\b", _I)
# A user turn that continues the current exchange rather than asking something new.
_CONTINUE = re.compile(
    r"^\W*(?:yes|yeah|yep|sure|ok(?:ay)?|alright|all right|sounds good|that'?s (?:fine|acceptable|correct|right|good)|"
    r"correct|confirm(?:ed)?|please (?:proceed|go ahead)|go ahead|proceed|great|perfect)\b", _I)
_IDENTITY_ONLY = re.compile(
    r"^\W*(?:(?:sure|yes|ok(?:ay)?|hi|hello)\W+)*(?:thing\W+)?(?:my (?:user ?id|user name|username|name|email)(?: is)?|"
    r"i'?m [a-z]+_[a-z]+_\d+|it'?s [a-z]+_[a-z]+_\d+)", _I)
_PRONOUN_LEAD = re.compile(r"^(?:i(?:'d| would)?\s+(?:really |strongly |much |generally |also )?)", _I)

# -- preferences -------------------------------------------------------------------------
_PREF_STANDING = re.compile(
    r"(?:^|[.!?;,]\s*|\bplease\s+)(?:always|never)\s+\w+|\bi (?:always|never)\s+\w+|\bfrom now on\b|"
    r"\bgoing forward\b|\bin (?:the )?future\b|\bby default\b|\bevery time\b|\bwhenever\b|"
    r"\bas a (?:general )?rule\b", _I)
_PREF_EXPLICIT = re.compile(
    r"\bi(?:'d| would)? (?:really |strongly |much |generally )?(?:prefer|rather)\b|"
    r"\bmy (?:preferred|favou?rite|preference)\b|\bi(?:'m| am) (?:a )?fan of\b", _I)
_PREF_LIKE = re.compile(
    r"\bi (?:really |do |just )?(?:like|love|hate|dislike|enjoy|can'?t stand)\s+(?!it\b|this\b|that\b|them\b|"
    r"to know\b)\w+|\bi (?:do not|don'?t) (?:really )?(?:like|enjoy|care for)\s+\w+", _I)
_PREF_WANT = re.compile(r"\bi (?:do not|don'?t) want to\s+\w+", _I)
_PREF_CUE_START = re.compile(
    r"\b(?:always|never|from now on|going forward|by default|whenever|every time|prefer|rather|preferred|"
    r"favou?rite|like|love|hate|dislike|enjoy|don'?t want to|do not want to)\b", _I)
_SITUATIONAL = re.compile(
    r"\bi'd\b|\bi would\b|\b(?:this|that|these|those|here|now|today|tomorrow|current|for the|for my|"
    r"on (?:the|my)|if|unless)\b", _I)
_CONDITIONAL = re.compile(r"\b(?:if|unless|in case)\b", _I)

# -- security / life ----------------------------------------------------------------------
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
_RULE_CUE = re.compile(
    r"\b(?:cannot|can'?t|can not) be (?:modified|changed|cancell?ed|refunded|removed|booked|added|used|"
    r"exchanged|upgraded|downgraded)\b|\b(?:is|are) not (?:allowed|permitted|eligible|refundable|possible)\b|"
    r"\bnon-?refundable\b|\bnot refundable\b|\bfree (?:checked )?(?:bags?|baggage)\b|\b(?:checked )?bag(?:gage)? "
    r"allowance\b|\bwithin \d+ (?:hours|days)\b|\bat most \w+\b|\bonly (?:be )?(?:cancell?ed|modified|changed|used|"
    r"refunded|booked)\b|\bper (?:passenger|bag|person|traveler)\b|\b(?:refunds?|refunded) (?:will go|go(?:es)?|to) "
    r"(?:to )?the original\b|\bbusiness (?:days|class)\b.*\b(?:refund|cancel)|\bmust be the same\b|"
    r"\bcan(?:not|'t)? (?:add|remove) (?:checked )?bags?\b|\bcannot add insurance\b", _I)
# Politeness in front of a rule ("I'm sorry, but ...", "Unfortunately, ...", "Please note that ...").
_HEDGE = re.compile(r"^(?:(?:yes|no),\s+|(?:i'?m|i am|we'?re) (?:sorry|afraid),?\s*(?:but\s+)?|unfortunately,?\s+|"
                    r"(?:please )?note that\s+|"
                    r"however,?\s+|as per (?:our|the) policy,?\s+|per (?:our|the) policy,?\s+)+", _I)
_FIRST_PERSON = re.compile(r"\b(?:i|i'll|i'd|i've|i'm|we'll|let me|let's)\b|^\W*(?:once|whether|if)\b", _I)
_LIFE_TOPIC = re.compile(
    r"\b(?:flights?|bags?|baggage|luggage|cabin|economy|business|tickets?|fares?|refunds?|cancell?ations?|"
    r"cancel|insurance|certificates?|gift cards?|credit cards?|payments?|passengers?|reservations?|bookings?|"
    r"membership|members?|seats?|travel|trips?|hotel|airport|compensation)\b", _I)
_PERSONAL_ID = re.compile(r"\b(?=[A-Z0-9]{6}\b)(?=[A-Z0-9]*\d)(?=[A-Z0-9]*[A-Z])[A-Z0-9]{6}\b|\b[a-z]+_[a-z]+_\d{3,}\b|"
                          r"\b\d{4}-\d{2}-\d{2}\b|\b(?:gift_card|certificate|credit_card)_\d+\b")

# -- text helpers -------------------------------------------------------------------------
_WS = re.compile(r"\s+")
_SENT_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[\"'`(\[]?[A-Z0-9])|\n+")
_WORD = re.compile(r"[a-z0-9][a-z0-9_']*")
_DIGITS = re.compile(r"\d+")
_HEXISH = re.compile(r"\b[0-9a-f]{7,}\b|\b(?=[A-Za-z0-9]*\d)[A-Za-z0-9]{5,}\b")
_MD = re.compile(r"\*\*|__|^#+\s*|^\s*[-*•]\s+|^\s*\d+[.)]\s+", re.MULTILINE)
_STOP = frozenset(
    "a an the and or but if then else of to in on at by for with from into onto as is are was were be been being "
    "it its it's this that these those there here i me my we our you your he she they them their his her "
    "do does did doing done have has had having not no yes so than too very can could would should will shall "
    "may might must just also only about over under again more most some any all each other such what which who "
    "whom whose when where why how let lets let's please ok okay now up out off s t".split())
_SYNONYMS = {
    "fixed": "fix", "fixes": "fix", "fixing": "fix", "resolved": "fix", "resolves": "fix", "resolve": "fix",
    "resolving": "fix", "solved": "fix", "solve": "fix", "solves": "fix", "solution": "fix", "workaround": "fix",
    "failed": "fail", "fails": "fail", "failing": "fail", "failure": "fail", "errors": "error", "broke": "fail",
    "broken": "fail", "crash": "fail", "crashed": "fail", "crashes": "fail",
    "installed": "install", "installing": "install", "installs": "install", "installation": "install",
    "adding": "add", "added": "add", "adds": "add", "running": "run", "ran": "run", "runs": "run",
    "using": "use", "used": "use", "uses": "use", "setting": "set", "sets": "set",
    "upgrading": "upgrade", "upgraded": "upgrade", "updating": "update", "updated": "update", "updates": "update",
}


def _squash(text: str) -> str:
    return _WS.sub(" ", text).strip()


def _clip(text: str, n: int) -> str:
    """``text`` on one line, cut at a word boundary to at most ``n`` characters."""
    text = _squash(text)
    if len(text) <= n:
        return text
    cut = text[: max(1, n - 1)]
    space = cut.rfind(" ")
    if space > n * 0.6:
        cut = cut[:space]
    return cut.rstrip(" ,;:-") + "…"


def _clip_lines(text: str, n: int) -> str:
    """Like :func:`_clip` but keeps line breaks (for step lists)."""
    lines = [_squash(x) for x in text.split("\n")]
    text = "\n".join(x for x in lines if x)
    if len(text) <= n:
        return text
    cut = text[: max(1, n - 1)]
    nl = cut.rfind("\n")
    if nl > n * 0.6:
        return cut[:nl]
    space = cut.rfind(" ")
    if space > n * 0.6:
        cut = cut[:space]
    return cut.rstrip(" ,;:-") + "…"


def _redact(text: str) -> str:
    """The project's one redaction scheme (ultron.redaction), so tags are the same everywhere."""
    if not text:
        return text
    from ultron.redaction import get_redactor

    return get_redactor().redact(text)


def _sentences(text: str) -> list[str]:
    out = []
    for part in _SENT_SPLIT.split(text or ""):
        part = _squash(_MD.sub("", part))
        if part:
            out.append(part)
    return out


def _first_sentence(text: str, n: int = 200) -> str:
    for s in _sentences(text):
        if len(s) >= 3:
            return _clip(s, n)
    return ""


def _words(text: str) -> set[str]:
    out = set()
    for w in _WORD.findall(text.lower()):
        w = w.strip("'")
        if len(w) < 2 or w in _STOP:
            continue
        w = _SYNONYMS.get(w, w)
        if len(w) > 4 and w.endswith("s") and not w.endswith("ss"):
            w = w[:-1]
        out.add(w)
    return out


def _jaccard(a: set[str], b: set[str]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def _containment(a: set[str], b: set[str]) -> float:
    """Share of the smaller set found in the other."""
    if not a or not b:
        return 0.0
    return len(a & b) / min(len(a), len(b))


def _norm_key(text: str) -> str:
    """Dedupe key: lowercase, ids and numbers masked, whitespace collapsed."""
    text = _HEXISH.sub("#", text.lower())
    return _squash(_DIGITS.sub("0", text))[:200]


def _clean_user(text: str) -> str:
    text = _cap(text)
    if _STOP_TOKEN in text:
        text = text.replace(_STOP_TOKEN, " ")
    if "<" in text:
        text = _TAG_BLOCK.sub(" ", text)
    return text.strip()


# -- tool calls ---------------------------------------------------------------------------
def _parse_args(raw: Any) -> tuple[str, dict[str, Any] | None]:
    """(canonical text, dict or None) of a call's arguments, whatever their shape."""
    if isinstance(raw, dict):
        try:
            return _cap(json.dumps(raw, sort_keys=True, default=str), _ARGS_CAP), raw
        except (TypeError, ValueError):
            return _cap(str(raw), _ARGS_CAP), None
    if raw is None:
        return "", None
    if not isinstance(raw, str):
        return _cap(str(raw), _ARGS_CAP), None
    s = raw.strip()
    if s.startswith("{"):
        try:
            val = json.loads(s)
        except ValueError:
            return _cap(s, _ARGS_CAP), None
        if isinstance(val, dict):
            return _cap(json.dumps(val, sort_keys=True, default=str), _ARGS_CAP), val
    return _cap(s, _ARGS_CAP), None


_KEY_ARGS = ("command", "cmd", "script", "code", "query", "sql", "file_path", "path", "notebook_path", "filename",
             "url", "pattern", "skill", "description", "subagent_type", "plan", "prompt")
_COMMAND_KEYS = ("command", "cmd", "script", "code", "sql")
_PATH_KEYS = frozenset({"file_path", "path", "notebook_path", "filename"})


def _short_value(v: Any, n: int = 60) -> str:
    if isinstance(v, str):
        return _clip(v, n)
    if isinstance(v, bool) or v is None or isinstance(v, (int, float)):
        return json.dumps(v)
    if isinstance(v, list):
        parts = [_item_gist(x, max(12, n // 2)) for x in v[:3]]
        more = f", +{len(v) - 3}" if len(v) > 3 else ""
        return _clip("[" + ", ".join(parts) + more + "]", n)
    if isinstance(v, dict):
        inner = ", ".join(f"{k}: {_short_value(x, 24)}" for k, x in list(v.items())[:4])
        return _clip("{" + inner + "}", n)
    return _clip(str(v), n)


def _item_gist(v: Any, n: int) -> str:
    """A list item: a dict shows its first two plain values ("HAT229 2024-05-27")."""
    if isinstance(v, dict):
        vals = [str(x) for x in v.values() if isinstance(x, (str, int, float)) and not isinstance(x, bool)][:2]
        if vals:
            return _clip(" ".join(vals), n)
    return _short_value(v, n)


def _basename(path: str) -> str:
    path = path.rstrip("/")
    return path.rsplit("/", 1)[-1] or path


def _arg_gist(args: dict[str, Any] | None, raw: str, n: int = 100, keys: Iterable[str] | None = None,
              value_chars: int = 48) -> str:
    """A short human gist of a call's arguments: the key argument, or a few k=v pairs."""
    if args is None:
        return _clip(raw, n) if raw else ""
    if keys is None:
        for k in _KEY_ARGS:
            v = args.get(k)
            if isinstance(v, str) and v.strip():
                if k in _PATH_KEYS:
                    return _clip(_basename(v), n)
                if k in _COMMAND_KEYS:
                    lines = [x.strip() for x in v.strip().split("\n") if x.strip()]
                    head = lines[0] if lines else ""
                    if "<<" in head and len(lines) > 1:          # a heredoc: show its first line too
                        head += " " + lines[1]
                    return "`" + _clip(head, n - 2) + "`"
                if k == "plan":
                    return _clip(v.strip().split("\n", 1)[0].lstrip("# "), n)
                return _clip(v, n)
        keys = list(args)
    parts = []
    for k in keys:
        if k not in args:
            continue
        parts.append(f"{k}={_short_value(args[k], value_chars)}")
        if sum(len(p) + 2 for p in parts) > n:
            break
    return _clip(", ".join(parts), n)


def _call_gist(name: str, args: dict[str, Any] | None, raw: str, n: int = 110) -> str:
    gist = _arg_gist(args, raw, n)
    return f"{name} {gist}" if gist else name


def _changed_gist(name: str, failed: "_Call", fixed: "_Call", n: int = 160) -> str:
    """For a retry of the same tool: only the arguments that changed."""
    a, b = failed.args, fixed.args
    if a is None or b is None:
        return _call_gist(name, b, fixed.raw, n)
    for k in ("command", "cmd", "script", "code", "sql", "query"):
        if isinstance(b.get(k), str):
            return _call_gist(name, b, fixed.raw, n)
    changed = [k for k in b if a.get(k) != b.get(k)]
    if not changed or len(changed) > 4:
        return _call_gist(name, b, fixed.raw, n)
    return f"{name} with " + _arg_gist(b, fixed.raw, n, keys=changed, value_chars=max(48, n // len(changed) - 12))


def _arg_words(c: "_Call") -> set[str]:
    if c.args is None:
        return _words(c.raw[:600])
    vals: list[str] = []

    def walk(v: Any) -> None:
        if len(vals) > 60:
            return
        if isinstance(v, str):
            vals.append(v[:300])
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v[:20]:
                walk(x)
        elif v is not None and not isinstance(v, bool):
            vals.append(str(v))

    walk(c.args)
    return _words(" ".join(vals))


def _arg_similarity(failed: "_Call", other: "_Call") -> float:
    a, b = _arg_words(failed), _arg_words(other)
    if not a and not b:
        return 1.0 if failed.raw == other.raw else 0.0
    if not a or not b:
        return 0.0
    inter = len(a & b)
    return 0.5 * inter / len(a | b) + 0.5 * inter / len(a)


def _error_line(text: str) -> str:
    """The informative line of an error result: an exception line (the last one of a
    traceback), else the first line that reads like an error, else the first line."""
    if not text:
        return ""
    if len(text) > _RESULT_HEAD + _RESULT_TAIL:
        text = text[:_RESULT_HEAD] + "\n" + text[-_RESULT_TAIL:]
    text = _TOOL_ERR_TAG.sub("", text)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return ""
    body = [ln for ln in lines if not _EXIT_LINE.match(ln)] or lines
    traceback = any(ln.startswith("Traceback (most recent call last)") for ln in body)
    exc = [ln for ln in body if _EXC_LINE.match(ln)]
    if exc:
        return exc[-1] if traceback else exc[0]
    for ln in body[:40]:
        if _ERR_LINE.search(ln):
            return ln
    return body[0]


_CLOSING_TURN = re.compile(
    r"\b(?:thanks?|thank you|thx|appreciate|bye|goodbye|have a (?:good|great|nice) (?:day|one)|cheers|"
    r"that'?s (?:all|it|everything)|all (?:good|set)|no further|nothing else)\b|^\W*(?:ok(?:ay)?|great|perfect|"
    r"awesome|cool|nice|good|got it|noted)\W*$", _I)


def _is_closing(text: str) -> bool:
    """A user turn that only closes (thanks, bye, ok) and asks nothing new."""
    return len(text.split()) <= 25 and bool(_CLOSING_TURN.search(text)) and not _ASKS.search(text) and \
        not re.search(r"\b(?:can|could|would|will) you\b|\bplease \w+|\bi (?:need|want|would like|'d like)\b", text, _I)


def _is_user_decision(text: str) -> bool:
    return bool(_REJECTED.search(text[:400]))


# -- the digest ---------------------------------------------------------------------------
class _Call:
    __slots__ = ("pos", "msg", "cid", "name", "raw", "args", "text", "error", "result", "result_msg",
                 "episode", "rejected")

    def __init__(self, pos: int, msg: int, cid: str, name: str, raw: str, args: dict | None, text: str) -> None:
        self.pos = pos
        self.msg = msg
        self.cid = cid
        self.name = name
        self.raw = raw
        self.args = args
        self.text = text            # the assistant text in the same message
        self.error: bool | None = None
        self.result = ""
        self.result_msg = -1
        self.episode = 0
        self.rejected = False

    @property
    def housekeeping(self) -> bool:
        return self.name.lower() in _HOUSEKEEPING or self.name == ""


class _Digest:
    """One pass over the segment: who said what, calls paired with results, episodes."""

    def __init__(self, messages: list[Message]) -> None:
        main = [m for m in messages if isinstance(m, Message) and not getattr(m, "is_sidechain", False)]
        self.msgs: list[Message] = main if main else [m for m in messages if isinstance(m, Message)]
        n = len(self.msgs)
        self.kind: list[str] = [""] * n        # system / user / meta / interrupt / assistant / tool / skip
        self.text: list[str] = [""] * n        # cleaned, capped text
        self.msg_calls: dict[int, list[int]] = {}
        self.calls: list[_Call] = []
        self.episode_of: list[int] = [0] * n
        self.episodes: list[tuple[int, int]] = []   # [start, end) message ranges
        self.system = ""
        self._collect()
        self._cut_episodes()

    def _collect(self) -> None:
        waiting: dict[str, list[int]] = {}
        seen_calls: set[tuple[str, str, str]] = set()
        answered: set[tuple[str, str]] = set()
        replay = False
        for i, m in enumerate(self.msgs):
            role = m.role
            content = m.content if isinstance(m.content, str) else ("" if m.content is None else str(m.content))
            if role == "system":
                self.kind[i] = "system"
                if not self.system:
                    self.system = content[:20000]
                continue
            if role == "user":
                raw = _cap(content)
                if _INTERRUPT.match(raw):
                    self.kind[i] = "interrupt"
                    continue
                text = _clean_user(raw)
                if not text or _META_USER.match(text):
                    self.kind[i] = "meta"
                    continue
                self.kind[i] = "user"
                self.text[i] = text
                continue
            if role == "assistant":
                parsed = []
                for k, tc in enumerate(m.tool_calls or []):
                    tc = tc if isinstance(tc, dict) else {}
                    fn = tc.get("function") if isinstance(tc.get("function"), dict) else {}
                    name = str(fn.get("name") or tc.get("name") or "")
                    raw_args, args = _parse_args(fn.get("arguments", tc.get("arguments")))
                    parsed.append((str(tc.get("id") or f"@{i}.{k}"), name, raw_args, args))
                if parsed:
                    keys = [(cid, name, raw_args) for cid, name, raw_args, _ in parsed]
                    replay = all(k in seen_calls for k in keys)
                    if replay:
                        self.kind[i] = "skip"
                        continue
                    seen_calls.update(keys)
                text = _cap(content).strip()
                self.kind[i] = "assistant"
                self.text[i] = text
                mine = self.msg_calls.setdefault(i, [])
                for cid, name, raw_args, args in parsed:
                    c = _Call(len(self.calls), i, cid, name, raw_args, args, text)
                    waiting.setdefault(cid, []).append(c.pos)
                    mine.append(c.pos)
                    self.calls.append(c)
                continue
            if role == "tool":
                cid = m.tool_call_id or ""
                queue = waiting.get(cid)
                head = content[:200]
                if not queue and cid and (cid, head) in answered:
                    self.kind[i] = "skip"              # a replayed result
                    continue
                answered.add((cid, head))
                self.kind[i] = "tool"
                if len(content) > _RESULT_HEAD + _RESULT_TAIL:
                    text = content[:_RESULT_HEAD] + "\n…\n" + content[-_RESULT_TAIL:]
                else:
                    text = content
                self.text[i] = text
                if queue:
                    c = self.calls[queue.pop(0)]
                else:                                   # a result without its call (tool-only segment)
                    c = _Call(len(self.calls), i, cid, str(m.name or "tool") if m.name != "error" else "tool",
                              "", None, "")
                    self.calls.append(c)
                c.result = text
                c.result_msg = i
                try:
                    c.error = _is_error_result(m)
                except Exception:  # noqa: BLE001 - an odd message is simply not an error
                    c.error = False
                if c.error and _is_user_decision(text):
                    c.rejected = True
                continue
            self.kind[i] = "skip"

    def _cut_episodes(self) -> None:
        start = 0
        last_assistant: int | None = None     # index of the last assistant message
        ep = 0
        for i, k in enumerate(self.kind):
            if k == "user" and last_assistant is not None and i > start:
                m = self.msgs[last_assistant]
                pending = bool(self.msg_calls.get(last_assistant))
                text = self.text[last_assistant]
                asked = bool(_ASKS.search(text[-400:]))
                interrupted = any(self.kind[j] in ("interrupt",) for j in range(last_assistant, i))
                continues = bool(_CONTINUE.match(self.text[i]))
                if (not pending and not asked and not interrupted and not continues and len(text) >= 20
                        and m.role == "assistant"):
                    self.episodes.append((start, i))
                    start = i
                    ep += 1
            if k == "assistant":
                last_assistant = i
            self.episode_of[i] = ep
        self.episodes.append((start, len(self.kind)))
        for c in self.calls:
            c.episode = self.episode_of[c.msg] if c.msg < len(self.episode_of) else ep

    # -- lookups ---------------------------------------------------------------------------
    def request_before(self, i: int) -> str:
        """The latest human request at or before message ``i``."""
        for j in range(min(i, len(self.kind) - 1), -1, -1):
            if self.kind[j] == "user":
                return self.text[j]
        return ""

    def episode_request(self, ep: int) -> str:
        """The episode's first substantive request (a bare identity answer is skipped)."""
        if ep >= len(self.episodes):
            return ""
        s, e = self.episodes[ep]
        first = ""
        for j in range(s, e):
            if self.kind[j] == "user":
                t = self.text[j]
                if not first:
                    first = t
                if not (_IDENTITY_ONLY.match(t) and len(t.split()) <= 14):
                    return t
        return first

    def task_context(self, i: int, skip: str = "") -> str:
        """"Task: <the episode's request>" plus the latest user turn before ``i`` when
        that says more than a confirmation."""
        goal = self.episode_request(self.episode_of[min(i, len(self.kind) - 1)]) if self.kind else ""
        if goal == skip and self.episodes:
            goal = self.episode_request(0)          # the segment's first request
        latest = self.request_before(i)
        parts = []
        if goal and goal != skip:
            parts.append("Task: " + _clip(goal, 260))
        if latest and latest not in (goal, skip) and len(latest.split()) >= 4:
            parts.append("Then: " + _clip(latest, 180))
        return " ".join(parts)

    def next_assistant_text(self, i: int, stop_at_user: bool = True) -> tuple[int, str]:
        for j in range(i + 1, len(self.kind)):
            k = self.kind[j]
            if k == "user" and stop_at_user:
                return -1, ""
            if k == "assistant" and self.text[j]:
                return j, self.text[j]
        return -1, ""

    def next_user_text(self, i: int) -> str:
        for j in range(i + 1, len(self.kind)):
            if self.kind[j] == "user":
                return self.text[j]
        return ""


# -- memory assembly ----------------------------------------------------------------------
# Topical tags: a tag is given when one of its words (or file extensions) is in the memory's
# texts. One tokenisation pass and set lookups: no per-tag regular expression.
_TAG_WORDS: tuple[tuple[str, frozenset[str], tuple[str, ...]], ...] = tuple(
    (tag, frozenset(words.split()), tuple(exts.split())) for tag, words, exts in (
        ("python", "python python3 pip pip3 pytest venv poetry traceback pyproject.toml requirements.txt", ".py"),
        ("javascript", "node nodejs npm yarn pnpm javascript package.json", ".js .mjs .cjs .jsx"),
        ("typescript", "typescript tsc tsconfig.json", ".ts .tsx"),
        ("docker", "docker dockerfile docker-compose docker-compose.yml compose.yaml container containers", ""),
        ("kubernetes", "kubectl kubernetes k8s helm", ""),
        ("git", "git github gh gist .gitignore", ""),
        ("sql", "sql postgres postgresql sqlite sqlite3 mysql psql", ".sql"),
        ("pandas", "pandas dataframe pd.dataframe pd.read_csv", ""),
        ("numpy", "numpy", ""),
        ("rust", "cargo rustc rust cargo.toml", ".rs"),
        ("go", "golang go.mod", ".go"),
        ("java", "java maven gradle", ".java"),
        ("aws", "aws ec2 s3 boto3", ""),
        ("shell", "bash zsh chmod shell sudo", ".sh"),
        ("claude-code", "claude .claude claude-code", ""),
        ("airline", "flight flights airline baggage cabin", ""),
        ("reservation", "reservation reservations booking", ""),
        ("payment", "payment certificate certificates refund refunds gift_card credit_card", ""),
    ))
_TAG_TOKEN = re.compile(r"[a-z0-9_.][a-z0-9_.+\-]*")
_MAX_TAGS = 6


def _tags(texts: Iterable[str], tools: Iterable[str], task_type: str | None) -> list[str]:
    out: list[str] = []
    if task_type:
        out.append(str(task_type).strip().lower())
    for t in tools:
        low = t.strip().lower()
        if low and low not in out and low not in _HOUSEKEEPING and len(out) < 3:
            out.append(low)
    blob = "\n".join(_cap(t, 1500) for t in texts if t).lower()
    tokens = {t.rstrip(".-") for t in _TAG_TOKEN.findall(blob)}
    suffixes = {t[t.rfind("."):] for t in tokens if "." in t}
    for tag, words, exts in _TAG_WORDS:
        if len(out) >= _MAX_TAGS:
            break
        if tag in out:
            continue
        if not tokens.isdisjoint(words) or (exts and not suffixes.isdisjoint(exts)):
            out.append(tag)
    return out[:_MAX_TAGS]


def _memory(type_hint: str, kind: str, content: str, context: str, resolution: str, tools: list[str],
            confidence: float, task_type: str | None, evidence: Iterable[str] = ()) -> dict[str, Any]:
    content = _redact(_clip(content, CONTENT_CHARS))
    context = _redact(_clip(context, CONTEXT_CHARS))
    resolution = _redact(_clip_lines(resolution, RESOLUTION_CHARS))
    tools = list(dict.fromkeys(t for t in tools if t))
    return {
        "content": content,
        "context": context,
        "resolution": resolution,
        "tags": _tags([content, context, resolution, *evidence], tools, task_type),
        "kind": kind,
        "tools_used": tools,
        "confidence": round(min(1.0, max(0.0, confidence)), 3),
        "type_hint": type_hint,
    }


# -- heuristic 1: error -> resolution -----------------------------------------------------
def _explanation(d: _Digest, after_msg: int, before_msg: int) -> str:
    """The agent's sentences between an error and its fix that explain cause or fix."""
    picked: list[str] = []
    for j in range(after_msg + 1, min(before_msg + 1, len(d.kind))):
        if d.kind[j] != "assistant" or not d.text[j]:
            continue
        sents = [s for s in _sentences(d.text[j][:1500]) if not _ASKS.search(s) and not s.endswith(":")]
        good = [s for s in sents if _CAUSE_CUE.search(s) or _FIX_CUE.search(s)]
        for s in good or sents[:1]:
            if len(s) >= 12 and s not in picked:
                picked.append(s)
            if len(picked) >= 2:
                break
        if len(picked) >= 2:
            break
    return _clip(" ".join(picked), 260)


_DONE_VERB = re.compile(
    r"\b(?:added|moved|replaced|changed|set|installed|copied|put|fixed|updated|removed|renamed|pinned|switched|"
    r"rebuilt|reordered|upgraded|downgraded|created|edited|declared|configured|enabled|disabled)\b", _I)


def _fix_summary(text: str) -> str:
    """The agent's own account of what fixed it ("Added flask to requirements.txt and rebuilt
    the image"): the first sentence after the fix that reports a change. It is the most
    reusable part of an error memory, and tool gists alone ("write_file Dockerfile") lose it."""
    for sent in _sentences(text[:1200])[:3]:
        if len(sent) >= 12 and not _ASKS.search(sent) and (_DONE_VERB.search(sent) or _FIX_CUE.search(sent)):
            return _clip(sent, 220)
    return ""


def _is_read(c: _Call) -> bool:
    """A call that only looks something up (the trajectory scorer's read/write split)."""
    try:
        return _tool_kind(c.name, c.raw) == "read" or bool(_READ_TOOL.match(c.name))
    except Exception:  # noqa: BLE001 - odd arguments: judge by the name alone
        return bool(_READ_TOOL.match(c.name))


def _find_fix(d: _Digest, err: _Call) -> tuple[_Call | None, float]:
    best: tuple[float, int, _Call, float] | None = None
    first_success = True
    seen = 0
    for c in d.calls[err.pos + 1:]:
        if c.episode != err.episode:
            break
        if c.housekeeping:
            continue
        seen += 1
        if seen > FIX_WINDOW:
            break
        if c.error is not False:
            if c.error and c.name == err.name:
                first_success = False
            continue
        sim = _arg_similarity(err, c)
        same = c.name == err.name
        if not same:
            if _is_read(c) and not _is_read(err):
                continue      # looking something up is a step towards a fix, not the fix
            announced = first_success and bool(_FIX_CUE.search(c.text[:600]))
            if sim < OTHER_TOOL_MIN_SIM and not announced:
                first_success = False
                continue
        score = (2.0 if same else 0.0) + sim
        if best is None or score > best[0] + 1e-9:
            best = (score, c.pos, c, sim)
        first_success = False
    if best is None:
        return None, 0.0
    return best[2], best[3]


def _extract_errors(d: _Digest, task_type: str | None) -> tuple[list[dict[str, Any]], set[int]]:
    """Error memories, and the positions of the failed calls that found a fix."""
    out: list[dict[str, Any]] = []
    fixed: set[int] = set()
    done: set[tuple[str, str]] = set()
    for err in d.calls:
        if not err.error or err.rejected or err.housekeeping:
            continue
        fix, sim = _find_fix(d, err)
        if fix is not None:
            fixed.add(err.pos)
        line = _error_line(err.result)
        if not line:
            continue
        key = (err.name, _norm_key(line))
        if key in done:
            continue
        done.add(key)
        # later failures with the same message belong to this memory
        repeats = [c for c in d.calls[err.pos + 1:] if c.error and c.name == err.name
                   and _norm_key(_error_line(c.result)) == key[1]]
        if fix is not None:
            # a retry that failed the same way before the fix: the fix is judged from the last one
            before = [c for c in repeats if c.pos < fix.pos]
            last_err = before[-1] if before else err
            fix2, sim2 = _find_fix(d, last_err)
            if fix2 is fix:
                sim = max(sim, sim2)
        else:
            last_err = repeats[-1] if repeats else err
        request = d.request_before(err.msg)
        shown = _ERR_PREFIX.sub("", line) or line
        content = f"{err.name or 'tool'} failed: {_clip(shown, CONTENT_CHARS - 20)}"
        context_parts = []
        task = d.task_context(err.msg)
        if task:
            context_parts.append(task)
        context_parts.append("Attempted: " + _call_gist(err.name, err.args, err.raw, 200))
        if len(repeats) > 0:
            context_parts.append(f"(failed {len(repeats) + 1} times)")
        context = " ".join(context_parts)
        security = bool(_SEC_ERR.search(line))
        type_hint = "security" if security else "error"
        tools = [err.name]
        if fix is None:
            episode_end = d.episodes[last_err.episode][1] - 1 if last_err.episode < len(d.episodes) else len(d.kind)
            expl = _explanation(d, last_err.result_msg, episode_end)
            if not expl:
                j, t = d.next_assistant_text(last_err.result_msg)
                expl = _first_sentence(t, 200) if j >= 0 else ""
            resolution = ("Unresolved. Agent's reading: " + expl) if expl else ""
            conf = 0.20 + (0.10 if expl else 0.0)
            out.append(_memory(type_hint, "procedural", content, context, resolution, tools, conf, task_type,
                               [err.raw[:400]]))
            continue
        same = fix.name == err.name
        between = [c for c in d.calls[last_err.pos + 1:fix.pos]
                   if c.error is False and not c.housekeeping]
        expl = _explanation(d, last_err.result_msg, fix.msg)
        fix_gist = _changed_gist(fix.name, last_err, fix) if same else _call_gist(fix.name, fix.args, fix.raw, 200)
        res_parts = []
        if expl:
            res_parts.append(expl)
        if between:
            steps = "; ".join(_call_gist(c.name, c.args, c.raw, 80) for c in between[:2])
            more = f" (+{len(between) - 2} more)" if len(between) > 2 else ""
            label = "Fix" if same and fix.raw == last_err.raw else "First"
            res_parts.append(f"{label}: {steps}{more}.")
        result_line = _first_sentence(fix.result, 140) if fix.result else ""
        status = ""
        if result_line and (len(fix.result) <= 200 or _SUCCESS_WORD.search(result_line)):
            status = f" -> {result_line}"
        if same and between and fix.raw == last_err.raw:
            # the same call succeeded unchanged: the steps in between were the fix
            res_parts.append(f"Then re-ran: {fix_gist}{status}")
        else:
            res_parts.append(f"Worked: {fix_gist}{status}")
        j, after_text = d.next_assistant_text(fix.result_msg if fix.result_msg >= 0 else fix.msg)
        summary = _fix_summary(after_text) if j >= 0 else ""
        if summary and summary not in expl:
            # right after the diagnosis: what was changed, in the agent's words, then the calls
            res_parts.insert(1 if expl else 0, summary if summary.endswith((".", "!")) else summary + ".")
        resolution = " ".join(res_parts)
        success = bool(_SUCCESS_WORD.search(fix.result[:600]) or _SUCCESS_WORD.search(after_text[:400])
                       or _USER_SUCCESS.search(d.next_user_text(fix.result_msg)[:400]))
        recurred = any(c.pos > fix.pos for c in repeats)
        gap = fix.pos - last_err.pos - 1
        conf = (0.40 + (0.20 if same else 0.0) + 0.15 * min(1.0, sim) + (0.10 if success else 0.0)
                + (0.05 if expl else 0.0) + (0.05 if gap == 0 else 0.0) - (0.15 if recurred else 0.0)
                - (0.05 if gap > 5 else 0.0))
        tools = [err.name] + [c.name for c in between] + [fix.name]
        out.append(_memory(type_hint, "procedural", content, context, resolution, tools, conf, task_type,
                           [err.raw[:400], fix.raw[:400], request]))
    return out, fixed


# -- heuristic 2: corrections -------------------------------------------------------------
def _best_sentence(text: str, probe: set[str], n: int = 220) -> str:
    sents = _sentences(text[:3000])
    if not sents:
        return ""
    best, score = sents[0], -1.0
    for s in sents:
        sc = len(_words(s) & probe)
        if sc > score:
            best, score = s, sc
    return _clip(best, n)


def _extract_corrections(d: _Digest, task_type: str | None) -> tuple[list[dict[str, Any]], set[int]]:
    out: list[dict[str, Any]] = []
    used: set[int] = set()          # user messages turned into corrections
    last_asst = -1
    prev_user = -1
    for i, k in enumerate(d.kind):
        if k == "assistant":
            last_asst = i
            continue
        if k != "user":
            continue
        if last_asst < 0 or last_asst < prev_user:       # nothing of the agent's to correct
            prev_user = i
            continue
        text = d.text[i]
        prev_text = d.text[last_asst]
        between = [d.calls[p] for j in range(prev_user + 1, i) for p in d.msg_calls.get(j, ())]
        rejected = [c for c in between if c.rejected and c.result_msg > last_asst]
        j, next_text = d.next_assistant_text(i)
        acked = bool(next_text and _ACK.search(next_text[:600]))
        if not (rejected or acked or _CORR_STRONG.search(text) or _CORR_MEDIUM.search(text)
                or _BARE_NO.match(text)):
            prev_user = i
            continue                    # cheap exit: no cue anywhere in the turn
        asked = bool(_ASKS.search(prev_text[-400:]))
        recent = [c for c in between if not c.housekeeping]
        sents = _sentences(text)
        strong = [s for s in sents if _CORR_STRONG.search(s) and not _SELF_OR_IF.search(s)]
        weak = [s for s in sents if _CORR_STRONG.search(s) and _SELF_OR_IF.search(s)]
        if sents and sents[0] not in strong and (
                _CORR_NO.search(text) or (not asked and _BARE_NO.match(text) and not _CLOSING.search(text))):
            strong.insert(0, sents[0])
        medium = [s for s in sents if s not in strong and (s in weak or _CORR_MEDIUM.search(s))]
        if strong:
            base, cue = 0.60, strong + [s for s in medium][:1]
        elif rejected:
            base, cue = 0.50, (medium or sents[:4])
        elif medium:
            base, cue = 0.40, medium
        elif acked:
            base, cue = 0.35, sents[:2]
        else:
            prev_user = i
            continue
        prev_user = i
        if not cue:
            continue
        probe = _words(" ".join(cue))
        # what the agent did or assumed
        if rejected:
            c = rejected[-1]
            did = f"Agent tried {_call_gist(c.name, c.args, c.raw, 180)} (rejected by the user)"
            tools = [c.name]
        else:
            said = _best_sentence(prev_text, probe) if prev_text else ""
            if len(said.split()) < 4:
                said = ""
            said_hits = len(_words(said) & probe) if said else 0
            c = None
            if recent:        # the call the correction is most about (the last one on ties)
                c = max(reversed(recent), key=lambda x: len(_arg_words(x) & probe))
                if not (_arg_words(c) & probe) and said_hits:
                    c = None
            if c is not None:
                did = f"Agent ran {_call_gist(c.name, c.args, c.raw, 160)}"
                if said_hits and len(did) + len(said) < CONTENT_CHARS - 10:
                    did += f"; said: {said}"
                tools = [c.name]
            elif said:
                did = f"Agent said: {said}"
                tools = []
            else:
                continue
        resolution = "User: " + _clip(" ".join(cue[:4]), 420)
        followed = False
        if j >= 0:
            nxt: list[_Call] = []
            for jj in range(j, min(j + 4, len(d.kind))):        # the agent may act a message later
                if d.kind[jj] == "user":
                    break
                if d.kind[jj] == "assistant" and d.msg_calls.get(jj):
                    nxt = [d.calls[p] for p in d.msg_calls[jj] if not d.calls[p].housekeeping]
                    if nxt:
                        break
            if nxt and nxt[0].error is False:
                followed = True
                resolution += f" Then: {_call_gist(nxt[0].name, nxt[0].args, nxt[0].raw, 160)}"
                tools.append(nxt[0].name)
        cue_text = " ".join(cue)
        conf = (base + (0.15 if acked else 0.0) + (0.10 if rejected and base != 0.50 else 0.0)
                + (0.05 if _ALTERNATIVE.search(cue_text) else 0.0) + (0.05 if followed else 0.0)
                - (0.05 if all(x.rstrip().endswith("?") for x in cue) else 0.0))
        kind = "procedural" if any(_IMPERATIVE.match(x) for x in cue) else "episodic"
        context = d.task_context(last_asst, skip=text)
        out.append(_memory("correction", kind, did, context, resolution, tools, conf, task_type, [text]))
        used.add(i)
    return out, used


def _prev_user(d: _Digest, i: int) -> int:
    for j in range(i - 1, -1, -1):
        if d.kind[j] == "user":
            return j
    return -1


# -- heuristic 3: preferences -------------------------------------------------------------
_PREF_OBJECT_NOISE = _words("always never prefer preferred rather like love hate want use from now on going forward "
                            "default whenever every time favourite favorite please")


def _extract_preferences(d: _Digest, task_type: str | None, skip: set[int]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, k in enumerate(d.kind):
        if k != "user":
            continue
        later_calls: list[_Call] | None = None
        for s in _sentences(d.text[i]):
            if len(s) < 8:
                continue
            if i in skip and _CORR_STRONG.search(s):
                continue          # already a correction
            m = _PREF_STANDING.search(s)
            if m:
                base, kind = 0.75, "procedural"
            else:
                for rx, b in ((_PREF_EXPLICIT, 0.60), (_PREF_LIKE, 0.50), (_PREF_WANT, 0.45)):
                    m = rx.search(s)
                    if m:
                        # "I prefer X" states a lasting taste; "I'd prefer ..." or one about
                        # this very task is situational
                        general = rx is not _PREF_WANT and not _SITUATIONAL.search(s)
                        base, kind = b, ("procedural" if general else "episodic")
                        break
            if not m:
                continue
            directive = s[m.start():].lstrip(" ,.;!?")
            directive = _PRONOUN_LEAD.sub("", directive) or directive
            directive = directive[:1].upper() + directive[1:]
            # honoured: a later tool call of the same episode uses the preferred thing
            obj = _words(directive) - _PREF_OBJECT_NOISE
            if later_calls is None:
                ep = d.episode_of[i]
                later_calls = [c for c in d.calls if c.msg > i and d.episode_of[c.msg] == ep
                               and not c.housekeeping and c.error is False][:12]
            applied = ""
            tools: list[str] = []
            need = max(1, (len(obj) + 2) // 3)
            for c in later_calls:
                if not obj or len(obj & _arg_words(c)) < need:
                    continue
                keys = [key for key, v in (c.args or {}).items() if obj & _words(_short_value(v, 300))]
                applied = (f"{c.name} with " + _arg_gist(c.args, c.raw, 140, keys=keys)) if keys else \
                    _call_gist(c.name, c.args, c.raw, 140)
                tools.append(c.name)
                break
            conf = (base + (0.10 if applied else 0.0) - (0.10 if _CONDITIONAL.search(s) else 0.0)
                    - (0.10 if s.rstrip().endswith("?") else 0.0))
            others = [x for x in _sentences(d.text[i]) if x != s]
            context = d.task_context(i, skip=d.text[i])
            if not context and others:
                context = "Said with: " + _clip(" ".join(others), 300)
            resolution = _clip(directive, 300) + (f" Applied: {applied}" if applied else "")
            out.append(_memory("preference", kind, s, context, resolution, tools, conf, task_type, [d.text[i]]))
    return out


# -- heuristic 4: successful multi-step patterns ------------------------------------------
def _extract_patterns(d: _Digest, task_type: str | None, fixed_errors: set[int]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    by_episode: dict[int, list[_Call]] = {}
    for c in d.calls:
        if not c.rejected:
            by_episode.setdefault(c.episode, []).append(c)
    for ep, (s, e) in enumerate(d.episodes):
        calls = by_episode.get(ep, [])
        work = [c for c in calls if not c.housekeeping]
        ok = [c for c in work if c.error is False]
        if len(ok) < PATTERN_MIN_CALLS:
            continue
        # ends with an assistant text answer
        last = -1
        for j in range(e - 1, s - 1, -1):
            if d.kind[j] in ("assistant", "tool", "user"):
                last = j
                break
        while last >= s and d.kind[last] == "user" and _is_closing(d.text[last]):   # thanks / bye after it
            last -= 1
            while last >= s and d.kind[last] not in ("assistant", "tool", "user"):
                last -= 1
        if last < s or d.kind[last] != "assistant" or d.msg_calls.get(last) or len(d.text[last]) < 20:
            continue
        results = [c for c in work if c.error is not None]
        if results and results[-1].error:
            continue
        errors = [c for c in work if c.error]
        unresolved = [c for c in errors if c.pos not in fixed_errors
                      and not any(x.name == c.name and x.error is False and x.pos > c.pos for x in work)]
        if unresolved:
            continue
        goal = d.episode_request(ep)
        if not goal:
            continue
        final = d.text[last]
        # steps: runs of the same tool collapsed (not for commands, each of which is a step)
        runs: list[tuple[str, list[str], list[int]]] = []     # (tool, distinct gists, [count])
        for c in ok:
            gist = _arg_gist(c.args, c.raw, 70)
            command = c.args is not None and any(isinstance(c.args.get(k), str) for k in _COMMAND_KEYS)
            if runs and runs[-1][0] == c.name and not command:
                runs[-1][2][0] += 1
                if gist and gist not in runs[-1][1]:
                    runs[-1][1].append(gist)
            else:
                runs.append((c.name, [gist] if gist else [], [1]))
        lines = []
        for n, (name, gists, (cnt,)) in enumerate(runs, 1):
            label = f"{name} x{cnt}" if cnt > 1 else name
            shown = ", ".join(gists[:3]) + (", …" if len(gists) > 3 else "")
            lines.append(f"{n}. {label}: {shown}" if shown else f"{n}. {label}")
        resolution = ""
        for n, ln in enumerate(lines):
            cand = (resolution + "\n" + ln) if resolution else ln
            if len(cand) > RESOLUTION_CHARS - 30:
                resolution += f"\n… (+{len(lines) - n} more steps)"
                break
            resolution = cand
        tools = list(dict.fromkeys(c.name for c in ok))
        user_after = d.next_user_text(last)
        confirmed = 0.15 if _USER_SUCCESS.search(user_after[:400]) else (
            0.05 if _USER_THANKS.search(user_after[:400]) else 0.0)
        all_reads = all(_READ_TOOL.match(c.name) for c in ok)
        conf = (0.45 + 0.04 * min(len(ok) - PATTERN_MIN_CALLS, 5)
                + (0.10 if _COMPLETION.search(final[:1500]) else 0.0) + confirmed
                - min(0.15, 0.05 * len(errors)) - (0.10 if all_reads else 0.0)
                - (0.20 if _ASSISTANT_FAILURE.search(final[:1500]) else 0.0))
        outcome = _first_sentence(final, 220)
        follow = [d.text[j] for j in range(s, e) if d.kind[j] == "user" and d.text[j] != goal
                  and not _CONTINUE.match(d.text[j]) and not _is_closing(d.text[j])][:2]
        context = " ".join([f"Also asked: {_clip(' / '.join(follow), 300)}"] if follow else []) + (
            f" Outcome: {outcome}" if outcome else "")
        out.append(_memory("pattern", "procedural", _clip(goal, CONTENT_CHARS), context, resolution, tools,
                           conf, task_type, [c.raw[:300] for c in ok[:8]]))
    return out


# -- security and life --------------------------------------------------------------------
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


def _extract_security(d: _Digest, task_type: str | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    by_result = {c.result_msg: c for c in d.calls if c.result_msg >= 0}
    for i, k in enumerate(d.kind):
        sources: list[tuple[str, str, list[str]]] = []
        if k == "tool":
            if _ANY_SECRET.search(d.text[i]):
                c = by_result.get(i)
                where = f"the output of {_call_gist(c.name, c.args, c.raw, 120)}" if c else "a tool result"
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
                react = next((_clip(x, 260) for x in _sentences(reaction[:1500]) if _REACTION.search(x)), "") \
                    if reaction else ""
                out.append(_memory(
                    "security", "procedural", f"A {label} appeared in plain text in {where}.", d.task_context(i),
                    react, tools, 0.55 + (0.10 if react else 0.0), task_type, [text[:300]]))
        if k == "assistant" and d.text[i] and not d.msg_calls.get(i):
            t = d.text[i][:1500]
            if _REFUSAL.search(t) and _SEC_TOPIC.search(t):
                sents = _sentences(t)
                refusal = next((x for x in sents if _REFUSAL.search(x)), "")
                reason = next((x for x in sents if _SEC_TOPIC.search(x) and x != refusal), "")
                request = d.request_before(i)
                if refusal and request and _norm_key(refusal) not in seen:
                    seen.add(_norm_key(refusal))
                    out.append(_memory("security", "procedural", "Agent declined: " + _clip(refusal, 260),
                                       "Request: " + _clip(request, 300), reason, [], 0.55, task_type, [t]))
    return out


@functools.lru_cache(maxsize=16)
def _policy_sentences(system: str) -> tuple[tuple[str, frozenset[str]], ...]:
    """Sentences of a system prompt with their word sets (cached: every segment of a
    service session repeats the same policy)."""
    out = []
    for x in _sentences(system[:20000]):
        w = _words(x)
        if len(w) >= 3:
            out.append((x, frozenset(w)))
    return tuple(out)


def _extract_life(d: _Digest, task_type: str | None) -> list[dict[str, Any]]:
    service = task_type == "customer_service" or (
        len(d.system) >= 400 and len(_LIFE_TOPIC.findall(d.system[:6000])) >= 8)
    if not service:
        return []
    policy: tuple[tuple[str, frozenset[str]], ...] | None = None
    cands: dict[str, tuple[float, int, str, str, int]] = {}
    for i, k in enumerate(d.kind):
        if k != "assistant" or not d.text[i]:
            continue
        text = d.text[i][:2500]
        if not _RULE_CUE.search(text):
            continue
        for x in _sentences(text):
            x = _HEDGE.sub("", x)
            x = x[:1].upper() + x[1:]
            if x.endswith("?") or len(x) < 20 or len(x) > 300:
                continue
            if not _RULE_CUE.search(x) or not _LIFE_TOPIC.search(x) or _PERSONAL_ID.search(x):
                continue
            if _FIRST_PERSON.search(x):
                continue          # the agent's own action or offer, not a rule
            key = _norm_key(x)
            if key in cands:
                continue
            if policy is None:
                policy = _policy_sentences(d.system) if d.system else ()
            w = _words(x)
            best, share = "", 0.0
            for ps, pw in policy:
                if not w:
                    break
                sh = len(w & pw) / len(w)
                if sh > share:
                    best, share = ps, sh
            conf = 0.20 + 0.60 * share if policy else 0.35
            cands[key] = (conf, len(cands), x, best if share >= 0.5 else "", i)
    out = []
    for conf, _, x, best, i in sorted(cands.values(), key=lambda t: (-t[0], t[1]))[:MAX_LIFE_PER_SEGMENT]:
        request = d.request_before(i)
        out.append(_memory("life", "episodic", x, ("User: " + _clip(request, 300)) if request else "",
                           ("Policy: " + best) if best else "", [], conf, task_type, []))
    return out


# -- public API: extraction ---------------------------------------------------------------
def extract_memories(messages: list[Message], *, task_type: str | None = None) -> list[dict]:
    """Memory candidates of one task segment (see the module docstring for every rule).

    Each is ``{content, context, resolution, tags, kind, tools_used, confidence,
    type_hint}``; low-confidence candidates are returned too (the caller filters)."""
    msgs = list(messages or [])
    if not msgs:
        return []
    d = _Digest(msgs)
    if not d.msgs:
        return []
    memories: list[dict[str, Any]] = []
    errors, fixed = _extract_errors(d, task_type)
    memories.extend(errors)
    corrections, used = _extract_corrections(d, task_type)
    memories.extend(corrections)
    memories.extend(_extract_preferences(d, task_type, used))
    memories.extend(_extract_patterns(d, task_type, fixed))
    memories.extend(_extract_security(d, task_type))
    memories.extend(_extract_life(d, task_type))
    return _dedupe(memories)


def _dedupe(memories: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One memory per (type, normalised content): the most confident, first on ties."""
    best: dict[tuple[str, str], int] = {}
    out: list[dict[str, Any]] = []
    for m in memories:
        if not m["content"].strip():
            continue
        key = (m["type_hint"], _norm_key(m["content"]) + ("|" + _norm_key(m["resolution"])[:80]
                                                          if m["type_hint"] == "pattern" else ""))
        if key in best:
            k = best[key]
            if m["confidence"] > out[k]["confidence"]:
                out[k] = m
            continue
        best[key] = len(out)
        out.append(m)
    return out


def extract_from_text(text: str) -> list[dict]:
    """Memory candidates from free text someone shared (not a transcript).

    Numbered / bulleted steps -> a pattern (content = the heading or first sentence);
    an error line with a "fix / solution / resolved by / workaround" sentence -> an
    error; preference sentences -> preferences; anything else -> one memory of the
    type :func:`classify_memory_type` gives, content = the first sentences and
    resolution = the rest. Confidence 0.5-0.65: the text is not checked against an
    outcome."""
    text = _cap(text or "", 20000).strip()
    if not text:
        return []
    out: list[dict[str, Any]] = []
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    steps = [ln for ln in lines if re.match(r"^(?:\d+[.)]|[-*•])\s+\S", ln)]
    err = next((ln for ln in lines if _EXC_LINE.match(ln) or _ERR_LINE.search(ln)), "")
    fix_sents = [s for s in _sentences(text) if re.search(
        r"\b(?:fix(?:ed)?|solution|solved|resolved?|workaround|the trick|instead|worked)\b", s, _I)]
    if len(steps) >= 2:
        head = next((ln for ln in lines if ln not in steps), "") or _first_sentence(text)
        out.append(_memory("pattern", "procedural", _MD.sub("", head), "", "\n".join(steps), [], 0.6, None,
                           [text[:2000]]))
    elif err and fix_sents:
        out.append(_memory("error", "procedural", err, "", " ".join(fix_sents[:3]), [], 0.6, None, [text[:2000]]))
    for s in _sentences(text):
        if _PREF_STANDING.search(s) or _PREF_EXPLICIT.search(s) or _PREF_LIKE.search(s):
            kind = "procedural" if _PREF_STANDING.search(s) else "episodic"
            m = _PREF_CUE_START.search(s)
            directive = s[m.start():] if m else s
            out.append(_memory("preference", kind, s, "", directive[:1].upper() + directive[1:], [],
                               0.6 if kind == "procedural" else 0.5, None, [s]))
    if not out:
        sents = _sentences(text)
        content = " ".join(sents[:2]) if sents else text
        rest = " ".join(sents[2:])
        kind_type = classify_memory_type(content, "", rest)
        kind = "episodic" if kind_type in ("life", "preference") else "procedural"
        out.append(_memory(kind_type, kind, content, "", rest, [], 0.5, None, [text[:2000]]))
    return _dedupe(out)


# -- public API: classification -----------------------------------------------------------
_TYPE_CUES: dict[str, tuple[tuple[re.Pattern[str], float], ...]] = {
    "security": (
        (re.compile(r"\b(?:credentials?|secrets?|api[ _-]?keys?|passwords?|private keys?|access tokens?|"
                    r"tokens? (?:leak|expos)\w*|leak(?:ed|s)?|exposed|vulnerab\w*|cve-\d{4}-\d+|exploit\w*|"
                    r"injection|xss|csrf|malware|phishing|privilege escalation|least privilege|encrypt\w*|"
                    r"unauthori[sz]ed|forbidden|permission denied|access denied|permissions?|auth(?:entication|"
                    r"orization)|security|sudo|chmod|rbac|iam|ssl|tls|certificates? verif\w*|redact\w*|"
                    r"rotate (?:the )?(?:key|token|secret)s?)\b", _I), 1.5),
    ),
    "error": (
        (re.compile(r"\b\w+(?:Error|Exception)\b|\btraceback\b|\berrors?\b|\bfail(?:ed|s|ure|ing)?\b|\bcrash\w*\b|"
                    r"\bexit (?:code|status) [1-9]\d*|\bsegfault\b|\bstack ?trace\b|\bbug\b|\bbroken\b"), 1.0),
        (re.compile(r"\b(?:exception|cannot|can'?t|unable to|not found|invalid|denied|timed? ?out|"
                    r"no such file|command not found|does not exist)\b", _I), 0.5),
    ),
    "correction": (
        (re.compile(r"\binstead\b|\bshould (?:be|have|use)\b|\bactually\b|\bwrong\b|\bincorrect\b|\bmistake\b|"
                    r"\bcorrect(?:ed|ion)\b|\bi (?:said|meant)\b|\brather than\b|\bnot what\b|\bmisunderst\w+", _I),
         1.2),
    ),
    "preference": (
        (re.compile(r"\bprefer(?:s|red|ence)?\b|\bfavou?rite\b|\bi (?:really )?(?:like|love|hate|dislike)\b|"
                    r"\b(?:always|never)\b|\bfrom now on\b|\bby default\b|\bgoing forward\b|\bi'?d rather\b", _I),
         1.2),
    ),
    "pattern": (
        (re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+\S|\bsteps?\b|\bhow to\b|\bfirst\b.{0,80}\bthen\b|\bworkflow\b|"
                    r"\bprocedure\b|\brecipe for\b|\bchecklist\b", _I | re.MULTILINE), 0.8),
        (re.compile(r"\b(?:run|use|install|configure|set up|setup|create|deploy|build|then|after that)\b", _I),
         0.3),
    ),
    "life": (
        (re.compile(r"\b(?:travel|trips?|flights?|airlines?|airports?|baggage|luggage|passports?|visas?|hotels?|"
                    r"restaurants?|food|recipes?|cooking|diet|health|doctor|medicine|exercise|sleep|money|budget|"
                    r"bank|tax(?:es)?|insurance|refunds?|weather|shopping|groceries|rent|commute|holiday|"
                    r"vacation)\b", _I), 1.0),
    ),
}
_TAG_TYPE = {"error": "error", "errors": "error", "bug": "error", "security": "security", "secrets": "security",
             "credentials": "security", "correction": "correction", "preference": "preference",
             "preferences": "preference", "pattern": "pattern", "howto": "pattern", "how-to": "pattern",
             "workflow": "pattern", "life": "life", "travel": "life", "airline": "life", "health": "life",
             "food": "life", "finance": "life"}


def _type_scores(content: str, context: str, resolution: str, tags: list[str] | None) -> dict[str, float]:
    scores = {t: 0.0 for t in MEMORY_TYPES}
    fields = ((_cap(content, 3000), 1.0), (_cap(resolution, 3000), 0.75), (_cap(context, 3000), 0.5))
    for t, cues in _TYPE_CUES.items():
        for rx, w in cues:
            for text, fw in fields:
                if text:
                    n = len(rx.findall(text))
                    if n:
                        scores[t] += w * fw * min(n, 3)
    for tag in tags or []:
        t = _TAG_TYPE.get(str(tag).strip().lower())
        if t:
            scores[t] += 2.0 if str(tag).strip().lower() == t else 1.0
    return scores


def classify_memory_type(content: str, context: str = "", resolution: str = "",
                         tags: list[str] | None = None) -> str:
    """error / security / correction / pattern / preference / life by weighted cues
    (see the module docstring); deterministic ties; "pattern" when nothing matches."""
    scores = _type_scores(content or "", context or "", resolution or "", tags)
    top = max(scores.values())
    if top <= 0:
        return "pattern"
    for t in TYPE_PRIORITY:
        if scores[t] == top:
            return t
    return "pattern"


# -- public API: summaries ----------------------------------------------------------------
_EXC_LINE_ML = re.compile(
    r"^[ \t]*(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Warning)\b(?::[^\n]*|[ \t]*)$", re.M)
_RES_LEAD = re.compile(r"^(?:Worked|Fix|Then re-ran|Applied|Policy):\s*")
_FAILED_LINE = re.compile(r"\bfailed:|\berror:|\berror\b", _I)


def _lead(content: str) -> str:
    """The most informative sentence of a content: its exception line if it has one
    (the last of a traceback, read from the head and the tail of a long text), a
    "failed: / error" line, else its first sentence."""
    content = (content or "")[:20000]
    exc = [m.group(0) for m in _EXC_LINE_ML.finditer(content)]
    if exc:
        pick = exc[-1] if "Traceback (most recent call last)" in content else exc[0]
        return _clip(pick, 1000)
    lines = [ln.strip() for ln in content[:_RESULT_HEAD].splitlines() if ln.strip()]
    for ln in lines[:60]:
        if _FAILED_LINE.search(ln):
            return _first_sentence(ln, 1000) or _squash(ln)
    return _first_sentence(content, 1000) or _squash(content)


def summarize_l0(content: str, context: str = "", resolution: str = "") -> str:
    """One line within L0_TOKENS: the lead of content (its exception line - the last
    of a traceback -, else a "failed: / error" line, else its first sentence; the
    context's or resolution's first sentence when content is empty), then " -> " and
    the gist of the resolution (its "Worked: / Fix: / Applied: / Policy:" sentence,
    else its first, label dropped) when that fits, shortened to fit when at least 12
    tokens are left."""
    lead = _lead(content) or _first_sentence(context, 400) or _first_sentence(resolution, 400)
    lead = _squash(lead)
    if not lead:
        return ""
    lead = truncate_to_tokens(lead, L0_TOKENS)
    sents = _sentences((resolution or "")[:3000])
    best = next((x for x in sents if _RES_LEAD.match(x)), sents[0] if sents else "")
    gist = _squash(re.sub(r"^(?:User:|Worked:|Fix:|Then re-ran:|Applied:|Policy:|Unresolved\.)\s*", "", _clip(best, 300)))
    if gist and _norm_key(gist) != _norm_key(lead):
        joined = f"{lead} -> {gist}"
        if count_tokens(joined) <= L0_TOKENS:
            return joined
        room = L0_TOKENS - count_tokens(lead) - 2
        if room >= 12:
            return f"{lead} -> " + truncate_to_tokens(gist, room, marker="…")
    return lead


def _condense(text: str, budget: int) -> str:
    """Sentences of ``text`` in order (duplicates dropped) until ``budget`` tokens."""
    if budget <= 0 or not text:
        return ""
    out: list[str] = []
    seen: set[str] = set()
    used = 0
    for s in _sentences(text):
        k = _norm_key(s)
        if k in seen:
            continue
        seen.add(k)
        t = count_tokens(s) + 1
        if used + t > budget:
            if not out:
                out.append(truncate_to_tokens(s, budget, marker="…"))
            break
        out.append(s)
        used += t
    return " ".join(out)


def overview_l1(content: str, context: str = "", resolution: str = "") -> str:
    """Content, context and resolution condensed to sentences within L1_TOKENS:
    content gets up to 90 tokens, resolution 110, context the rest; what one part
    leaves unused goes to the others. An error line buried in a long content is moved
    to its front; repeated sentences are dropped. Lines: content, "Context: …",
    "Resolution: …"."""
    content, context, resolution = (_cap(content, 20000), _cap(context, 20000), _cap(resolution, 20000))
    budget = L1_TOKENS - 12     # labels and line breaks
    need = {k: count_tokens(v) for k, v in (("c", content), ("x", context), ("r", resolution))}
    share = {"c": 90, "r": 110, "x": budget - 200}
    spare = sum(max(0, share[k] - need[k]) for k in share)
    for k in ("r", "c", "x"):      # hand the spare to the parts that want more
        if need[k] > share[k] and spare > 0:
            extra = min(spare, need[k] - share[k])
            share[k] += extra
            spare -= extra
    parts = []
    lead = _lead(content)
    if lead and _norm_key(lead) != _norm_key(_first_sentence(content, 1000)):
        content = lead + "\n" + content          # an error line buried in a dump comes first
    c = _condense(content, share["c"])
    if c:
        parts.append(c)
    x = _condense(context, share["x"])
    if x:
        parts.append("Context: " + x)
    r = _condense(resolution, share["r"])
    if r:
        parts.append("Resolution: " + r)
    text = "\n".join(parts)
    return truncate_to_tokens(text, L1_TOKENS) if count_tokens(text) > L1_TOKENS else text


# -- public API: duplicates and merging ---------------------------------------------------
_ID_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("exception", re.compile(r"\b[A-Z]\w*(?:Error|Exception)\b")),
    ("file", re.compile(r"\b[\w\-]+\.(?:py|js|ts|tsx|jsx|json|ya?ml|toml|ini|cfg|md|txt|csv|sql|sh|rs|go|java|rb|"
                        r"c|cpp|h|html|css|lock|env|conf|xml)\b")),
    ("quoted", re.compile(r"'([^'\s]{2,60})'|\"([^\"\s]{2,60})\"|`([^`\s]{2,60})`")),
    ("code", re.compile(r"\b(?=[A-Z0-9]*\d)(?=[A-Z0-9]*[A-Z])[A-Z0-9]{5,8}\b|\bE\d{3,5}\b|\bHTTP \d{3}\b")),
    ("number", re.compile(r"(?<![\w.])\d{2,}(?:\.\d+)*(?![\w.])")),
)
# What a sentence names that another may lack: dotted names (files, hosts, versions), flags,
# quoted names, codes and numbers. A sentence naming something new is never a duplicate.
_NAMED = re.compile(r"\b[\w-]+(?:\.[\w-]+)+\b|--?[A-Za-z][\w-]*|'[^'\s]{2,60}'|\"[^\"\s]{2,60}\"|`[^`]{2,80}`|"
                    r"\b(?=[A-Z0-9]*\d)(?=[A-Z0-9]*[A-Z])[A-Z0-9]{4,10}\b|\b\d+(?:[.,]\d+)*\b")
SAME_CONTENT_SIM = 0.45      # max(Jaccard, 0.8 * containment) of content word sets
SAME_RESOLUTION_SIM = 0.30   # the same for resolutions, when both have one
SAME_OVERALL_SIM = 0.40      # ... or of all three fields together, when content alone falls short


def _identifiers(text: str) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for name, rx in _ID_RULES:
        vals = set()
        for m in rx.finditer(text):
            v = next((g for g in m.groups() if g), None) if m.groups() else m.group(0)
            if v:
                vals.add(v.lower())
        if vals:
            out[name] = vals
    return out


def _field_sim(a: str, b: str) -> float:
    wa, wb = _words(a), _words(b)
    return max(_jaccard(wa, wb), 0.8 * _containment(wa, wb))


def is_same_memory(a: dict, b: dict) -> bool:
    """Rules confirmation of a near-duplicate in the soft cosine zone.

    Words are lowercased, stop words dropped, light stemming and synonyms applied
    (fixed / resolved / solved -> fix, failed / failing -> fail, ...). Same when:

    * no key identifier conflicts: for exception class names, file names, quoted
      names, codes (HAT030, E0432) and numbers, when both contents name some of one
      kind they must share at least one (``KeyError: 'user_id'`` is not
      ``KeyError: 'order_id'``);
    * the contents agree: ``max(Jaccard, 0.8 * containment)`` of their word sets >=
      SAME_CONTENT_SIM (0.45), or all three fields together >= SAME_OVERALL_SIM (0.40)
      with the contents at least half of SAME_CONTENT_SIM;
    * the resolutions agree when both have one: the same measure >= SAME_RESOLUTION_SIM
      (0.30), or at least half of it when they share an identifier (the same flag, file,
      package or code said in other words)."""
    a = a or {}
    b = b or {}
    ca, cb = str(a.get("content") or ""), str(b.get("content") or "")
    ra, rb = str(a.get("resolution") or ""), str(b.get("resolution") or "")
    xa, xb = str(a.get("context") or ""), str(b.get("context") or "")
    if not ca.strip() or not cb.strip():
        return False
    if _squash(ca).lower() == _squash(cb).lower() and _squash(ra).lower() == _squash(rb).lower():
        return True
    ida, idb = _identifiers(ca), _identifiers(cb)
    for kind in ("exception", "file", "quoted", "code", "number"):
        if kind in ida and kind in idb and not (ida[kind] & idb[kind]):
            return False
    c_sim = _field_sim(ca, cb)
    overall = _field_sim(" ".join((ca, xa, ra)), " ".join((cb, xb, rb)))
    if c_sim < SAME_CONTENT_SIM and not (overall >= SAME_OVERALL_SIM and c_sim >= SAME_CONTENT_SIM / 2):
        return False
    if ra.strip() and rb.strip():
        r_sim = _field_sim(ra, rb)
        if r_sim < SAME_RESOLUTION_SIM:
            # different words for the fix may still be the same fix: shared identifiers decide
            ira, irb = _identifiers(ra), _identifiers(rb)
            shared = any(ira[k] & irb.get(k, set()) for k in ira)
            if not shared or r_sim < SAME_RESOLUTION_SIM / 2:
                return False
    return True


_NEAR_SAME_CONTAINED = 0.8    # a new sentence is a near-duplicate when this share of its words is in an
                              # existing one and it names nothing (file, flag, number, code) the old lacks


def _named(text: str) -> set[str]:
    return {m.group(0).lower().strip("'\"`") for m in _NAMED.finditer(text)}


def _merge_field(old: str, new: str, limit: int) -> str:
    old, new = (old or "").strip(), (new or "").strip()
    if not new or _squash(new).lower() == _squash(old).lower():
        return _clip_lines(old, limit) if len(old) > limit else old
    if not old:
        return _clip_lines(new, limit) if len(new) > limit else new
    multiline = "\n" in old or "\n" in new
    units = _split_units if multiline else _sentences
    kept = [(x, _words(x)) for x in units(old)]
    named = _named(old)
    result = old if len(old) <= limit else _clip_lines(old, limit)
    sep = "\n" if multiline else " "
    for x in units(new):
        w = _words(x)
        fresh = _named(x) - named
        dup = False
        if not fresh:
            for y, yw in kept:
                if _squash(x).lower() == _squash(y).lower() or (
                        w and yw and len(w & yw) / len(w) >= _NEAR_SAME_CONTAINED):
                    dup = True
                    break
        if dup:
            continue
        # a new sentence that says all an old one says and more replaces it in place
        wider = next((y for y, yw in kept if yw and yw <= w and y in result), None)
        if wider is not None and len(result) - len(wider) + len(x) <= limit:
            result = result.replace(wider, x, 1)
            kept = [(x, w) if y == wider else (y, yw) for y, yw in kept]
            named |= fresh
            continue
        if len(result) + len(sep) + len(x) > limit:
            continue          # too long to add whole; a shorter later sentence may still fit
        result = result + sep + x
        kept.append((x, w))
        named |= fresh
    return result


def _split_units(text: str) -> list[str]:
    """Lines, and the sentences of long lines (for multi-line fields such as steps)."""
    out = []
    for ln in text.split("\n"):
        ln = ln.strip()
        if not ln:
            continue
        if len(ln) > 200:
            out.extend(_sentences(ln))
        else:
            out.append(ln)
    return out


def merge_bodies(existing: dict, incoming: dict) -> dict:
    """Merged ``{content, context, resolution}``: the existing text kept as it is, then
    every incoming sentence (line, for multi-line fields such as step lists) that is
    not a near-duplicate of one already there - at least 80 % of its words already in
    one existing sentence, and naming no file, host, flag, number, code or quoted name
    the existing text lacks. A new sentence that contains every word of an existing
    one replaces it in place. Sentences are added while the field stays within
    MERGED_LIMITS (content 600, context 600, resolution 1200 chars); one that does not
    fit is skipped, so a shorter later one may still get in."""
    existing = existing or {}
    incoming = incoming or {}
    out = {}
    for key, limit in MERGED_LIMITS.items():
        out[key] = _merge_field(str(existing.get(key) or ""), str(incoming.get(key) or ""), limit)
    if not out["content"].strip():
        out["content"] = _clip(str(incoming.get("content") or existing.get("content") or ""), MERGED_LIMITS["content"])
    return out
