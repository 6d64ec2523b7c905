"""Offline skill synthesis: a cluster's memories turned into a procedure, with no model.

A family of error fixes with one symptom is written up as a troubleshooting skill
(:mod:`ultron.heuristics.troubleshooting`: symptom, where to look, cause → fix branches,
how to confirm). Any other cluster goes the general way below.

What a member memory gives:

* **Steps** come from resolutions. Each resolution is cut into actionable units
  (:func:`ultron.heuristics.skill_text.split_actions`: lines, sentences, "Worked: / Fix: / User:"
  parts, "; / , then" clauses; code spans kept whole). Explanations that are not
  instructions are left out, unless a memory has nothing else to offer.
* Units that say the same thing merge into one step citing every memory behind it:
  :func:`~ultron.heuristics.skill_text.near_duplicate` (Jaccard >= 0.6 of stemmed content words,
  or the shorter one 80 % inside the longer), unless they open with different action
  verbs ("read x" / "write x"). Variants differing in a few words are shown as one
  ("lacks the redis/flask module", :func:`~ultron.heuristics.skill_text.generalize`).
* The main path holds the steps the members share: from four members on, a step needs
  the support of a third of them (two at least); a fix only one memory made is what its
  particular cause called for, so it is left to the decision branches. Of those, the
  ``MAX_STEPS`` best supported are kept (first appearance breaks ties), then put in
  procedure order: step A goes before step B when more
  resolutions do A before B than the other way round; among steps free to go next, the
  best supported (then the first seen) goes first. Precedence cycles are broken the
  same way.
* **Pitfalls**: corrections (what the agent did that the user rejected: "Avoid: ..."),
  causes (an error resolution's explanations, or any sentence naming one: "because",
  "missing", "wrong", ...), then the error lines of error and security memories (the
  symptoms to watch for, at most ``MAX_SYMPTOMS``).
* **Decision branches** come from differing causes and contexts: each memory's most
  specific stated cause (else its context gist, labels and "Outcome:" left out) paired
  with its least shared step ("If <context> → <step>"),
  when that step is not on the main path (fewer than half the members do it): the
  context made the difference.
* **When to use**: the topic, the most common symptom, and the terms that recur in the
  members' contexts (contents for members without one). The name comes from the topic
  (or, without one, from the members' most frequent terms).

Every step, pitfall and branch cites the ids of the memories it came from, so the
quality gate can trace each one back.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from ultron.heuristics.skill_text import (clip, context_gist, display, first_sentence, generalize, is_actionable,
                                          is_question, jaccard, leading_verb, near_duplicate, ordered_terms,
                                          same_shape, split_actions, squash, tokens)
from ultron.heuristics.troubleshooting import ERROR_TYPES, troubleshooting

MAX_STEPS = 12
MAX_PITFALLS = 8
MAX_BRANCHES = 6
MAX_CONTEXT_TERMS = 6
STEP_CHARS = 300
PITFALL_CHARS = 240
CONDITION_CHARS = 160
DESCRIPTION_CHARS = 300
MAX_SYMPTOMS = 4
_ARTICLES = frozenset("The A An My Our Your This That These Those It".split())
_CAUSE = re.compile(r"\b(?:because|caused by|due to|the cause|root cause|missing|forgot|wrong|not (?:installed|set|"
                    r"found|listed|included|copied)|lacked|lacks|without)\b", re.IGNORECASE)


@dataclass(eq=False)
class _Group:
    """Near-duplicate texts merged into one item: their wordings, words and memories."""

    variants: list[str]
    words: set[str]
    verb: str | None
    first: tuple[int, int]
    members: list[str] = field(default_factory=list)
    kind: int = 0

    @property
    def support(self) -> int:
        return len(self.members)

    def text(self, n: int) -> str:
        return clip(display(generalize(self.variants)), n)

    def add(self, memory_id: str, variant: str) -> None:
        if memory_id not in self.members:
            self.members.append(memory_id)
        if variant not in self.variants:
            self.variants.append(variant)


def _merge_into(groups: list[_Group], text: str, memory_id: str, first: tuple[int, int], kind: int = 0) -> _Group:
    """The group ``text`` joins (the closest near-duplicate that does not open with another
    action verb: "read x" and "write x" stay apart), or a new one."""
    words, verb = tokens(text), leading_verb(text)
    twins = [g for g in groups if g.kind == kind and near_duplicate(words, g.words)
             and (verb is None or g.verb is None or verb == g.verb)]
    group = max(twins, key=lambda g: jaccard(words, g.words)) if twins else None
    if group is None:
        group = _Group([text], words, verb, first, kind=kind)
        groups.append(group)
    group.add(memory_id, text)
    return group


def synthesize(topic: str, memories: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A skill dict (name, description, when_to_use, steps, pitfalls, branches) from
    member memories ``{id, memory_type, content, context, resolution}`` in age order."""
    members = [m for m in memories if m.get("id")]
    errors = [m for m in members if m.get("memory_type") in ERROR_TYPES]
    if len(errors) >= 2 and 2 * len(errors) >= len(members):
        skill = troubleshooting(topic, members)
        if skill is not None:
            return skill
    topic = squash(topic) or topic_from(members)
    groups, by_member = _step_groups(members)
    ranked = sorted(groups, key=lambda g: (-g.support, g.first))
    # The main path is what the members share; a fix only one or two of several memories
    # made is what their particular cause called for, so it becomes a decision branch.
    floor = max(2, math.ceil(len(members) / 3)) if len(members) >= 4 else 1
    shared = [g for g in ranked if g.support >= floor]
    kept = procedure_order((shared if len(shared) >= 2 else ranked)[:MAX_STEPS], by_member)
    causes = _cause_groups(members, by_member)
    pitfalls = _pitfalls(members, by_member, causes)
    # the topic's terms ("docker · requirements.txt") are not a title: they read as a list
    if "·" in topic:
        name = clip("Working with " + ", ".join(t.strip() for t in topic.split("·") if t.strip()), 80)
    else:
        name = clip(topic[:1].upper() + topic[1:], 80) if topic else "Untitled skill"
    return {
        "name": name,
        "description": _description(name, sorted(kept, key=lambda g: (-g.support, g.first)), len(members)),
        "when_to_use": _when_to_use(topic, members, pitfalls),
        "steps": [{"text": g.text(STEP_CHARS), "evidence": list(g.members)} for g in kept],
        "pitfalls": [{"text": g.text(PITFALL_CHARS), "evidence": list(g.members)} for g in pitfalls],
        "branches": _branches(members, by_member, {id(g) for g in kept}, causes),
    }


def _step_groups(members: Sequence[dict[str, Any]]) -> tuple[list[_Group], dict[str, list[_Group]]]:
    groups: list[_Group] = []
    by_member: dict[str, list[_Group]] = {}
    for mi, m in enumerate(members):
        units = [u for u in split_actions(str(m.get("resolution") or "")) if not is_question(u)]
        actions = [u for u in units if is_actionable(u)] or units[:1]
        for pos, unit in enumerate(actions):
            group = _merge_into(groups, unit, m["id"], (mi, pos))
            mine = by_member.setdefault(m["id"], [])      # in the order the memory did them
            if group not in mine:
                mine.append(group)
    return groups, by_member


def procedure_order(steps: list[_Group], by_member: dict[str, list[_Group]]) -> list[_Group]:
    """Steps in the order the resolutions do them (a precedence vote), best supported first
    where they do not say."""
    index = {id(g): i for i, g in enumerate(steps)}
    votes: dict[tuple[int, int], int] = {}
    for sequence in by_member.values():
        seq = [index[id(g)] for g in sequence if id(g) in index]
        for i, a in enumerate(seq):
            for b in seq[i + 1:]:
                votes[(a, b)] = votes.get((a, b), 0) + 1
    before: dict[int, set[int]] = {i: set() for i in range(len(steps))}
    for (a, b), n in votes.items():
        if n > votes.get((b, a), 0):
            before[b].add(a)
    rank = sorted(range(len(steps)), key=lambda i: (-steps[i].support, steps[i].first))
    done: list[int] = []
    left = set(range(len(steps)))
    while left:
        free = [i for i in rank if i in left and not (before[i] & left)]
        # A cycle: take the step with the fewest unmet predecessors, best supported first.
        pick = free[0] if free else min((i for i in rank if i in left), key=lambda i: len(before[i] & left))
        done.append(pick)
        left.discard(pick)
    return [steps[i] for i in done]


_ADVICE, _CAUSE_KIND, _SYMPTOM = 0, 1, 2


def _cause_groups(members: Sequence[dict[str, Any]], by_member: dict[str, list[_Group]]) -> list[_Group]:
    """Every piece of advice, stated cause and symptom, near-duplicates merged (untruncated:
    the branches look up each member's most specific cause here)."""
    found: list[_Group] = []
    for i, m in enumerate(members):
        kind = m.get("memory_type")
        if kind == "correction":
            did = first_sentence(str(m.get("content") or ""), PITFALL_CHARS - 7)
            if did and tokens(did):
                _merge_into(found, f"Avoid: {did}", m["id"], (i, 0), _ADVICE)
        steps = [g.words for g in by_member.get(m["id"], [])]
        for pos, unit in enumerate(split_actions(str(m.get("resolution") or ""))):
            if is_question(unit) or tokens(unit) in steps:
                continue
            # An error's resolution opens with the agent's reading of it: any explanation is a cause.
            if (kind in ERROR_TYPES and not is_actionable(unit)) or _CAUSE.search(unit):
                _merge_into(found, unit, m["id"], (i, pos + 1), _CAUSE_KIND)
        if kind in ERROR_TYPES:
            line = first_sentence(str(m.get("content") or ""), PITFALL_CHARS)
            if tokens(line):
                _merge_into(found, line, m["id"], (i, 0), _SYMPTOM)
    return found


def _pitfalls(members: Sequence[dict[str, Any]], by_member: dict[str, list[_Group]],
              found: list[_Group] | None = None) -> list[_Group]:
    """Advice first (corrections, then stated causes), then symptoms; near-duplicates merged."""
    found = sorted(found if found is not None else _cause_groups(members, by_member),
                   key=lambda g: (g.kind, -g.support, g.first))
    symptoms = [g for g in found if g.kind == _SYMPTOM][:MAX_SYMPTOMS]
    return ([g for g in found if g.kind != _SYMPTOM][:MAX_PITFALLS - len(symptoms)] + symptoms)[:MAX_PITFALLS]


def _branches(members: Sequence[dict[str, Any]], by_member: dict[str, list[_Group]],
              kept_ids: set[int], causes: Sequence[_Group] = ()) -> list[dict[str, Any]]:
    pairs: list[dict[str, Any]] = []
    for i, m in enumerate(members):
        # The member's most specific stated cause says best when its fix applies
        # ("requirements.txt lists gunicorn only"); its context is the fallback.
        own = [g for g in causes if g.kind == _CAUSE_KIND and m["id"] in g.members and 2 * g.support < len(members)]
        cause = min(own, key=lambda g: (g.support, g.first)) if own else None
        condition = (clip(cause.variants[0], CONDITION_CHARS) if cause
                     else context_gist(str(m.get("context") or ""), CONDITION_CHARS))
        mine = [g for g in by_member.get(m["id"], []) if 2 * g.support < len(members)]
        cwords = tokens(condition)
        if len(cwords) < 2 or not mine:
            continue
        # The member's least shared step is what its context made different.
        action = min(mine, key=lambda g: (g.support, id(g) not in kept_ids, g.first))
        # Contexts that led to the same step and read alike ("the api container crashes" /
        # "the etl container crashes") are one branch.
        same = next((p for p in pairs if p["action"] is action and (
            near_duplicate(cwords, p["words"]) or same_shape(condition, p["conditions"][0]))), None)
        if same:
            same["evidence"].append(m["id"])
            same["conditions"].append(condition)
        else:
            pairs.append({"conditions": [condition], "words": cwords, "action": action, "evidence": [m["id"]],
                          "first": i})
    pairs.sort(key=lambda p: (-len(p["evidence"]), p["first"]))
    return [{"condition": _lead_lower(generalize(p["conditions"])), "action": p["action"].text(STEP_CHARS),
             "evidence": p["evidence"]} for p in pairs[:MAX_BRANCHES]]


def _lead_lower(text: str) -> str:
    """"The api container ..." reads "If the api container ..."; names keep their capital."""
    first, _, rest = text.partition(" ")
    return f"{first.lower()} {rest}".strip() if first in _ARTICLES else text


def _when_to_use(topic: str, members: Sequence[dict[str, Any]], pitfalls: list[_Group]) -> list[str]:
    out = [f"The task involves {topic}." if topic else "The task matches the memories below."]
    symptoms = [g for g in pitfalls if g.kind == _SYMPTOM]
    if symptoms:
        out.append(f"You run into: {symptoms[0].text(PITFALL_CHARS)}")
    situations = [context_gist(str(m.get("context") or ""), 400) or str(m.get("content") or "") for m in members]
    terms = common_terms(situations, exclude=tokens(topic))
    if terms:
        out.append("Typical context: " + ", ".join(terms) + ".")
    return out


def common_terms(texts: Sequence[str], *, exclude: set[str] = frozenset(), limit: int = MAX_CONTEXT_TERMS
                 ) -> list[str]:
    """Terms found in at least 40 % of the texts (and two of them), most widespread first."""
    df: dict[str, int] = {}
    surface: dict[str, tuple[str, int]] = {}
    order = 0
    for text in texts:
        for st, word in ordered_terms(text):
            df[st] = df.get(st, 0) + 1
            if st not in surface:
                surface[st] = (word, order)
                order += 1
    need = max(2, math.ceil(0.4 * len(texts)))
    common = [st for st, n in df.items() if n >= need and st not in exclude]
    common.sort(key=lambda st: (-df[st], surface[st][1]))
    return [surface[st][0] for st in common[:limit]]


def topic_from(members: Sequence[dict[str, Any]]) -> str:
    """A topic for members that came without one: their most frequent content terms."""
    terms = common_terms([str(m.get("content") or "") for m in members], limit=4)
    if not terms:
        terms = [w for _, w in ordered_terms(" ".join(str(m.get("content") or "") for m in members))][:4]
    return " ".join(terms)


def _description(name: str, best: list[_Group], n_members: int) -> str:
    """The name, then the two best supported steps: what a searcher reads first."""
    head = f"{name.rstrip('.')}: what worked across {n_members} related memories."
    if best:
        head += " " + "; ".join(g.text(STEP_CHARS).rstrip(".") for g in best[:2]) + "."
    return clip(head, DESCRIPTION_CHARS)
