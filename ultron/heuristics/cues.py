"""Cues more than one rule reads: the user confirming a fix, and what a security lesson is about.

Kept apart so the error rule and the stated-lesson rule (:mod:`.lessons`) read the
same words without importing each other.
"""

from __future__ import annotations

import re

_I = re.IGNORECASE

# -- the user saying it worked ----------------------------------------------------------
CONFIRM = re.compile(
    r"\b(?:did it|did the trick|does the trick|fixed it|solved it|sorted it|sorted now|was it|nailed it|that'?s the fix|"
    r"that'?s what it was)\b|\b(?:works|worked|working|pass|passes|passed|passing|succeeded|succeeds|connects|connected|"
    r"went through|goes through|builds|compiles|deploys|deployed|loads|runs)\b(?! (?:on|for) (?:my|your) (?:end|side)"
    r" (?:either|too))|\b(?:it|that|this|everything)(?:'s| is) (?:up|live|green|fine now|good now|back|gone|fixed|"
    r"resolved|sorted)\b|\b(?:all|build(?:'s| is)?|ci(?:'s| is)?|pipeline(?:'s| is)?|tests? (?:are|is)|checks? (?:are|is)"
    r") (?:green|passing)\b|\bgreen (?:now|again)\b|\b(?:no more|no|zero|0) (?:errors?|warnings?|failures?|crash\w*|mismatch(?:es)?|restarts?)\b|"
    r"\b(?:problem|issue|error|warning|crash)(?:'s| is| has)? (?:gone|solved|fixed|resolved)\b|\bconfirmed\b|"
    r"\bfixed\b|\bup and running\b|\blooks? (?:right|good|fine|correct|ok(?:ay)?|normal) (?:now|again)\b|\b(?:shows? up|appears?|renders?|loads?|starts?|runs?|builds?|compiles?|"
    r"connects?|deploys?|resolves?|finishe[sd]|completes?|completed) (?:now|again|fine|correctly|properly|cleanly|"
    r"without (?:errors?|issues?|problems?))\b|\b(?:plot|page|it|build|job|deploy|app) renders\b|\bback (?:up|online|to normal)\b|\blooks good now\b", _I)
_NOT_CONFIRM = re.compile(
    r"\b(?:not|n't|never|no longer) (?:work|working|fixed|green|passing|help|connect|build|load|run)|"
    r"\b(?:didn'?t|doesn'?t|does not|did not|isn'?t|wasn'?t|won'?t|still)\b.{0,30}\b(?:work|fix|help|fail|error|"
    r"broken|red|same|crash)|\bsame (?:error|problem|issue|thing)\b|\bstill (?:fails?|failing|broken|get|getting|"
    r"seeing|see|red)\b|\bnope\b|\bgive up\b|\bforget it\b|\bnever ?mind\b|\b(?:worse|another error|new error)\b", _I)


#: the state of things now, in the user's words ("stable now", "we're back", "that was it")
_BETTER_NOW = re.compile(
    r"\b(?:stable|healthy|happy|clean|quiet|fine|good|ok(?:ay)?|green|up|running|fast|normal|smooth)(?: again| now)\b|"
    r"\b(?:all|we'?re|we are|i'?m|you'?re) (?:good|set|sorted|back|golden)\b|\bthat was (?:it|the (?:problem|issue|"
    r"fix|culprit|one|trick))\b|\b(?:yep|yes|yup),? that'?s it\b|\bno more \w+|\bwent (?:out|through|fine|ok|well|"
    r"smooth(?:ly)?)\b|\b(?:it|that|which) (?:helped|solved it|sorted it)\b|\bbingo\b|\bspot on\b", _I)
#: thanks, which confirms only beside a report of having done what was suggested
_THANKS = re.compile(r"\b(?:thanks|thank you|thx|ty|tysm|cheers|much appreciated|appreciate it|lifesaver)\b", _I)
_DID_REPORT = re.compile(
    r"\b(?:rebuilt|re-?ran|ran|pushed|applied|added|changed|restarted|redeployed|deployed|tried|did|set|installed|"
    r"updated|bumped|switched|removed|deleted|flushed|cleared|reinstalled|rotated|merged|reverted|renewed|bounced|"
    r"re-?created|upgraded|downgraded|pinned|edited)\b", _I)
_WILL_TRY = re.compile(r"\b(?:i'?ll|i will|will|going to|gonna|let me|about to) (?:try|do|run|give|test|check)\b", _I)


def user_confirms(text: str) -> bool:
    """The user says the fix worked ("that did it", "works now", "CI is green", "stable
    now", "rebuilt and pushed, thanks")."""
    head = text[:400]
    if _NOT_CONFIRM.search(head):
        return False
    if CONFIRM.search(head) or _BETTER_NOW.search(head):
        return True
    return bool(_THANKS.search(head) and _DID_REPORT.search(head) and not _WILL_TRY.search(head))



#: the user keeping the steps for next time ("write those steps down", "that's the release
#: checklist from now on"): a procedure endorsed for reuse, the strongest sign it is one
KEEP_STEPS = re.compile(
    r"\b(?:keep|save|write|note|jot|remember|document|record|store)\b(?:\s+\w+){0,3}?\s+(?:steps|procedure|process|"
    r"checklist|runbook|recipe|playbook|sequence)\b|\b(?:this|that|these|those|it)(?:'s| is| are| was)? (?:the|our|my) "
    r"(?:\w+ )?(?:checklist|runbook|procedure|process|recipe|playbook|way to do it|steps)\b|\b(?:same (?:steps|order)|"
    r"do it (?:this|that|the same) way) (?:next time|from now on|going forward|every time)\b|\bfor next (?:time|release|"
    r"year|month|quarter|rotation|renewal|upgrade)\b", _I)


#: the user abandoning the task: what the agent tried taught nothing worth keeping
GAVE_UP = re.compile(
    r"\b(?:forget (?:it|about it)|never ?mind|give up|giving up|leave it|drop it|going in circles|none of (?:those|these|them)|"
    r"(?:i|we)'?ll (?:deal with|look at|leave) (?:it|this|that)|not worth (?:the|a|going|digging|chasing)|"
    r"(?:let'?s|we'?ll|i'?ll) (?:just )?keep an eye on it|(?:park|shelve) (?:it|this|that)|i'?ll (?:do|handle|figure|sort|ask) (?:it|this|that|"
    r"out|someone|someone else|elsewhere)|not worth it|let'?s (?:drop|abandon|stop|leave) (?:it|this)|"
    r"(?:this|that) (?:isn'?t|is not|won'?t be) (?:going to )?work(?:ing)?|waste of time|revert (?:everything|it all)|"
    r"undo (?:everything|all of (?:it|that)))\b", _I)


SECURITY_TOPIC = re.compile(
    r"(?<![\w.])\.env\b|_secrets?\b|\b(?:stored?|saved?|kept|logged|sent|written|printed|visible|shown|is|are) (?:in|as) "
    r"(?:plain|clear) ?text\b|\b(?:secrets?|credentials?|api[ _-]?keys?|access[ _-]?keys?|tokens?|passwords?|passphrases?|"
    r"private[ _-]?keys?|ssh[ _-]?keys?|dotenv|leak(?:ed|s)?|expos(?:ed|ure)|vault|secrets? manager|kms|"
    r"chmod 600|0600|world-readable|(?:old|leaked|exposed|compromised|committed|live|secret|signing|registry|deploy|"
    r"stripe|aws|gcp|service[ -]account|gpg|pgp) (?:keys?|tokens?)|card numbers?|cvv|cvc)\b", _I)
SECURITY_ACTION = re.compile(
    r"\b(?:rotat\w*|revok\w*|regenerat\w*|invalidat\w*|deactivat\w*|never (?:commit|push|paste|log|share|store|"
    r"hard-?code|echo|print|collect|repeat|ask for)|"
    r"(?:don'?t|do not) (?:commit|push|paste|log|share|store|hard-?code|echo|print|put)|\.gitignore|gitignore|rolled|rolling|"
    r"git rm --cached|secrets? manager|vault|environment variables?|env vars?|chmod|scrub|purge|"
    r"filter-(?:repo|branch)|bfg|mask(?:ed)?|redact\w*|keep \S+ out of|out of (?:the )?(?:repo|git|logs?|chat))", _I)


def is_security_lesson(text: str) -> bool:
    """About a credential or its exposure, with something done about it (rotate, revoke,
    keep out of git, restrict permissions ...)."""
    return bool(SECURITY_TOPIC.search(text)) and bool(SECURITY_ACTION.search(text))
