"""Carrying cluster identity from one batch run to the next.

A skill is attached to a cluster id, so a re-clustering that renamed every cluster
would orphan every skill. Each new cluster therefore takes over the id of the previous
cluster it shares the most members with (one-to-one, greedy by overlap), and what a
previous cluster loses to a merge is recorded so its skill is superseded, not lost.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Collection, Mapping, Sequence

#: A previous cluster counts as merged into a survivor when at least this share of its
#: members went there; one whose members mostly scattered or became noise just dissolves.
MERGE_SHARE = 0.5
#: Member-set Jaccard below which a kept cluster counts as materially changed (new topic).
TOPIC_STABLE_JACCARD = 0.7


@dataclass(frozen=True)
class Matching:
    """The outcome for each new cluster (by index) and each previous cluster (by id)."""

    #: per new cluster: the previous id it keeps, or None for a brand-new cluster
    ids: list[str | None]
    #: previous id -> the previous id of the surviving cluster it merged into
    absorbed: dict[str, str] = field(default_factory=dict)
    #: previous ids with no successor at all
    dissolved: list[str] = field(default_factory=list)

    def absorbed_into(self, survivor: str) -> list[str]:
        return sorted(old for old, into in self.absorbed.items() if into == survivor)


def _key(members: Collection[str]) -> str:
    """A label-independent name for a new cluster: HDBSCAN's numbering is arbitrary."""
    return min(members) if members else ""


def match_clusters(new: Sequence[Collection[str]], previous: Mapping[str, Collection[str]]) -> Matching:
    """Greedy one-to-one matching by member overlap, largest overlap first.

    Ties are broken by the previous id, then by the new cluster's smallest member id, so
    the result never depends on HDBSCAN's label order or on dict order."""
    owner: dict[str, str] = {}
    for old_id, members in previous.items():
        for m in members:
            owner[m] = old_id
    overlaps: dict[tuple[int, str], int] = {}
    for i, members in enumerate(new):
        for m in members:
            old_id = owner.get(m)
            if old_id is not None:
                overlaps[(i, old_id)] = overlaps.get((i, old_id), 0) + 1
    keys = [_key(members) for members in new]
    ids: list[str | None] = [None] * len(new)
    taken: set[str] = set()
    for (i, old_id), _n in sorted(overlaps.items(), key=lambda kv: (-kv[1], kv[0][1], keys[kv[0][0]])):
        if ids[i] is None and old_id not in taken:
            ids[i] = old_id
            taken.add(old_id)

    absorbed: dict[str, str] = {}
    dissolved: list[str] = []
    for old_id in sorted(previous):
        if old_id in taken:
            continue
        size = len(previous[old_id])
        best = sorted(((n, keys[i], i) for (i, o), n in overlaps.items() if o == old_id),
                      key=lambda t: (-t[0], t[1]))
        if best and size and best[0][0] >= MERGE_SHARE * size and ids[best[0][2]] is not None:
            absorbed[old_id] = ids[best[0][2]]  # type: ignore[assignment]
        else:
            dissolved.append(old_id)
    return Matching(ids, absorbed, dissolved)


@dataclass(frozen=True)
class SkillState:
    """The skill bookkeeping a cluster row carries (written by the skill hub)."""

    skill_slug: str | None = None
    superseded_slugs: tuple[str, ...] = ()
    attempt_member_ids: tuple[str, ...] = ()
    attempt_status: str | None = None
    attempt_reason: str | None = None
    attempted_at: datetime | None = None


def merge_skill_state(survivor: SkillState, absorbed: Sequence[SkillState]) -> SkillState:
    """The survivor's skill state after absorbing other clusters.

    The absorbed clusters' skills are superseded by the survivor's, except when the
    survivor has no skill and exactly one absorbed cluster has one: then that skill
    simply carries on here (with its crystallisation record, so it re-crystallises on
    new members instead of starting over)."""
    with_skill = [a for a in absorbed if a.skill_slug]
    if not with_skill:
        return survivor
    if survivor.skill_slug is None and len(with_skill) == 1:
        heir = with_skill[0]
        slugs = _unique(list(survivor.superseded_slugs) + list(heir.superseded_slugs), exclude=heir.skill_slug)
        return SkillState(heir.skill_slug, slugs, heir.attempt_member_ids, heir.attempt_status,
                          heir.attempt_reason, heir.attempted_at)
    extra: list[str] = []
    for a in with_skill:
        extra += [a.skill_slug or "", *a.superseded_slugs]
    slugs = _unique(list(survivor.superseded_slugs) + extra, exclude=survivor.skill_slug)
    return SkillState(survivor.skill_slug, slugs, survivor.attempt_member_ids, survivor.attempt_status,
                      survivor.attempt_reason, survivor.attempted_at)


def _unique(slugs: list[str], exclude: str | None) -> tuple[str, ...]:
    out: list[str] = []
    for s in slugs:
        if s and s != exclude and s not in out:
            out.append(s)
    return tuple(out)


def jaccard(a: Collection[str], b: Collection[str]) -> float:
    sa, sb = set(a), set(b)
    return len(sa & sb) / len(sa | sb) if sa or sb else 1.0


def materially_changed(old_members: Collection[str], new_members: Collection[str], *, merged: bool,
                       topic: str) -> bool:
    """Whether a kept cluster needs a new topic: no topic yet, a merge, or a member set
    that moved far enough (Jaccard < TOPIC_STABLE_JACCARD) that the old label may no longer fit."""
    return not topic or merged or jaccard(old_members, new_members) < TOPIC_STABLE_JACCARD
