"""How a search ranks memories: BM25 for the lexical arm, then fusion with the dense arm.

Pure logic; the SQL that gathers the candidates and their scores (both arms, one
statement, BM25 statistics kept by migration 0006) is ``ultron.db.search_arms``.

Why these choices (an offline sweep over the LoCoMo dev turns, Postgres lexemes and MiniLM
vectors, weights picked leave-one-conversation-out; ``benchmarks/retrieval.py --set ...``
measures any of them end to end):

* BM25 over Postgres ``english`` lexemes ranks turns far better than ``ts_rank`` (no idf, no
  length normalisation) and better than a plain-token BM25, because stemming and stop words
  are applied on both sides. k1 0.9 and b 0.3 (settings): a memory's length says little about
  its relevance, so it is normalised less than the textbook b 0.75 (chosen in 4 of 5
  leave-one-conversation-out folds of the offline sweep, a throw-away script).
* Field weights (BM25F): content 1, context 0.5 (the session date and previous turns help,
  but the memory's own words matter more), resolution 1.
* Fusion by normalised score, not rank: RRF gives both arms equal say, so the weaker dense
  arm drags the fused list below the lexical one; a weighted sum of scores normalised to
  the best candidate's keeps the better arm in charge and still lets a strong dense match
  in. Normalising to the candidates' minimum as well did as well on LoCoMo but made two
  near-equal memories score 1 and 0 on the dense arm. The dense weight (0.4) keeps
  LoCoMo's recall (``benchmarks/retrieval.py``: R@10 0.754 here, 0.755 with the
  minimum-normalised fusion at 0.25, separate runs) and finds the lessons set's paraphrased
  task descriptions, which share few words with their memory (R@5 0.917 against 0.881).
"""

from __future__ import annotations

import math
import random
from datetime import datetime, timezone
from typing import Any

from ultron.db.outcomes import outcome_utility
from ultron.settings import Settings

RRF_K = 60
TIER_BOOST = {"HOT": 1.2, "WARM": 1.0, "COLD": 0.8}
FUSIONS = ("minmax", "rrf")


def field_weights(settings: Settings) -> dict[str, float]:
    """tsvector weight letter -> BM25F weight (A content, B resolution, C context)."""
    return {"A": 1.0, "B": float(settings.search_resolution_weight), "C": float(settings.search_context_weight)}


def arm_settings(settings: Settings) -> dict[str, Any]:
    """What the arms search with (``ultron.db.search_arms.candidates``): the pool of memories
    the lexical arm may score, BM25's k1 and b, the BM25F field weights, the filtered set
    below which the dense arm is exact, and HNSW's ef_search."""
    return {"pool": int(settings.search_lexical_pool), "k1": float(settings.search_bm25_k1),
            "b": float(settings.search_bm25_b), "weights": field_weights(settings),
            "exact_max": int(settings.search_exact_max), "ef_search": int(settings.hnsw_ef_search)}


def _to_best(values: list[float]) -> list[float]:
    """Each score over the best one, negatives as 0: min-max with the minimum pinned at 0.
    The candidates' own minimum is not used: with few candidates it would turn a small gap
    into the whole range (two near-equal memories scored 1 and 0)."""
    hi = max(values)
    if hi <= 1e-12:  # nothing scored (no query word held, or no positive cosine)
        return [0.0 for _ in values]
    return [max(v, 0.0) / hi for v in values]


def fused_scores(candidates: list[dict[str, Any]], fusion: str, dense_weight: float) -> list[float]:
    """The fused relevance of each candidate, before boosts.

    ``minmax``: ``w * dense + (1 - w) * lexical``, each arm's score (cosine, BM25) divided by
    the best candidate's, so the best of each arm scores 1 and a score of 0 stays 0.
    ``rrf``: reciprocal-rank fusion, ``1/(60 + rank)`` summed over the arms that ranked it."""
    if not candidates:
        return []
    if fusion == "rrf":
        return [sum(1.0 / (RRF_K + c[key]) for key in ("ann_rank", "lex_rank") if c.get(key) is not None)
                for c in candidates]
    dense = _to_best([float(c["similarity"] or 0.0) for c in candidates])
    lexical = _to_best([float(c.get("bm25") or 0.0) for c in candidates])
    return [dense_weight * d + (1.0 - dense_weight) * x for d, x in zip(dense, lexical)]


def utility_factor(candidate: dict[str, Any], weight: float, explore: random.Random | None = None) -> float:
    """``1 + w * (2u - 1)``, ``u`` the utility posterior from attributed session outcomes alone
    (``ultron.db.outcomes.outcome_utility``): 1 with no evidence, within ``1 ± w`` however much
    there is; at the default w = 1 it is ``2u``, relevance times how likely the memory helps
    relative to one never judged. The posterior shrinks towards 0.5 while evidence is thin,
    because an outcome is circumstantial (a session can fail for reasons no served memory
    caused); explicit feedback keeps its own, stronger factor.

    ``explore`` (for a bundle whose session's outcome will be counted): ``u`` is drawn from the
    posterior, Beta(1 + helped, 1 + unhelped), instead of taken as its mean (Thompson
    sampling). Memories served together share every outcome, so without this the ones never
    served beside a misleading memory would never be tried and nothing could be told apart;
    the draws narrow as evidence grows, so a well-judged memory keeps its place."""
    helped = float(candidate.get("outcome_helped") or 0.0)
    unhelped = float(candidate.get("outcome_unhelped") or 0.0)
    if weight <= 0:
        return 1.0
    if explore is not None:
        return 1.0 + weight * (2.0 * explore.betavariate(1.0 + helped, 1.0 + unhelped) - 1.0)
    if helped == 0 and unhelped == 0:
        return 1.0
    return 1.0 + weight * (2.0 * outcome_utility(helped, unhelped) - 1.0)


def rank_candidates(candidates: list[dict[str, Any]], settings: Settings, limit: int,
                    explore: random.Random | None = None) -> list[dict[str, Any]]:
    """Fusion, then the tier boost, the time decay, the feedback factor the candidate query
    computed (``ultron.db.feedback.FEEDBACK_FACTOR_SQL``) and the outcome factor
    (``utility_factor``). The similarity floor drops rows that
    are neither close in meaning (cosine below ``search_min_score``) nor hold a query word."""
    now = datetime.now(timezone.utc)
    kept = [c for c in candidates
            if float(c["similarity"] or 0.0) >= settings.search_min_score or float(c.get("bm25") or 0.0) > 0]
    fused = fused_scores(kept, settings.search_fusion, settings.search_dense_weight)
    out = []
    for c, relevance in zip(kept, fused):
        matched = [name for name, key in (("vector", "ann_rank"), ("text", "lex_rank")) if c.get(key) is not None]
        last = c["last_hit_at"] or c["created_at"]
        days = max(0.0, (now - last).total_seconds() / 86400.0) if last else 0.0
        w = settings.time_decay_weight
        decay = 1 - w + w * math.exp(-settings.decay_alpha * days)
        feedback = float(c.get("feedback_factor") or 1.0)
        outcomes = utility_factor(c, settings.utility_rank_weight, explore)
        out.append({**c, "score": relevance * TIER_BOOST.get(c["tier"], 1.0) * decay * feedback * outcomes,
                    "matched": matched})
    out.sort(key=lambda c: (-c["score"], -float(c["similarity"] or 0), c["id"]))
    return out[:limit]
