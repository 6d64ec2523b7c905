"""Fusion rules and search settings of ultron.memory.ranking (pure logic, no database)."""

from datetime import datetime, timezone

import pytest

from ultron.memory.ranking import arm_settings, fused_scores, rank_candidates
from ultron.settings import Settings, SettingsError


def _cand(i: str, sim: float, bm25: float, ann: int | None, lex: int | None, tier: str = "WARM") -> dict:
    now = datetime.now(timezone.utc)
    return {"id": i, "similarity": sim, "bm25": bm25, "ann_rank": ann, "lex_rank": lex, "tier": tier,
            "last_hit_at": now, "created_at": now, "feedback_factor": 1.0}


def test_minmax_fusion_keeps_the_strong_lexical_match_on_top():
    cands = [_cand("exact-words", 0.40, 9.0, 5, 1), _cand("vaguely-close", 0.55, 0.0, 1, None),
             _cand("both-ok", 0.50, 4.0, 2, 2)]
    settings = Settings.from_env({}, search_dense_weight=0.3)
    ranked = [c["id"] for c in rank_candidates(cands, settings, 3)]
    assert ranked[0] == "exact-words"
    rrf = [c["id"] for c in rank_candidates(cands, Settings.from_env({}, search_fusion="rrf"), 3)]
    assert rrf[0] == "both-ok"   # equal-weight ranks: the option the issue asks to keep


def test_dense_weight_one_is_the_dense_arm_and_zero_the_lexical_arm():
    cands = [_cand("a", 0.9, 1.0, 1, 2), _cand("b", 0.5, 5.0, 2, 1)]
    assert fused_scores(cands, "minmax", 1.0) == [1.0, pytest.approx(0.5 / 0.9)]
    assert fused_scores(cands, "minmax", 0.0) == [pytest.approx(0.2), 1.0]


def test_near_equal_memories_stay_near_equal_after_fusion():
    """Normalising by the candidates' own minimum turned a 0.01 cosine gap into 1 against 0."""
    cands = [_cand("a", 0.71, 4.0, 1, 1), _cand("b", 0.70, 3.9, 2, 2)]
    a, b = fused_scores(cands, "minmax", 0.4)
    assert a == pytest.approx(1.0) and b > 0.97


def test_the_floor_drops_distant_rows_without_a_query_word_only():
    cands = [_cand("far-but-worded", 0.05, 2.0, None, 1), _cand("far", 0.05, 0.0, 9, None),
             _cand("near", 0.6, 0.0, 1, None)]
    ids = {c["id"] for c in rank_candidates(cands, Settings.from_env({}), 10)}
    assert ids == {"far-but-worded", "near"}


def test_tier_boost_applies_after_fusion():
    cands = [_cand("warm", 0.5, 3.0, 1, 1, "WARM"), _cand("hot", 0.5, 3.0, 2, 2, "HOT")]
    assert rank_candidates(cands, Settings.from_env({}), 2)[0]["id"] == "hot"


@pytest.mark.parametrize("env", [{"ULTRON_SEARCH_FUSION": "sum"}, {"ULTRON_SEARCH_DENSE_WEIGHT": "1.5"},
                                 {"ULTRON_SEARCH_LEXICAL_POOL": "0"}, {"ULTRON_SEARCH_CONTEXT_WEIGHT": "-1"}])
def test_bad_search_settings_are_refused(env):
    with pytest.raises(SettingsError):
        Settings.from_env(env)


def test_search_settings_are_read_from_the_environment():
    s = Settings.from_env({"ULTRON_SEARCH_FUSION": "RRF", "ULTRON_SEARCH_DENSE_WEIGHT": "0.6",
                           "ULTRON_SEARCH_CONTEXT_WEIGHT": "0.25", "ULTRON_SEARCH_LEXICAL_POOL": "50"})
    assert (s.search_fusion, s.search_dense_weight, s.search_context_weight, s.search_lexical_pool) == (
        "rrf", 0.6, 0.25, 50)


def test_the_arms_take_their_parameters_from_the_settings():
    s = Settings.from_env({"ULTRON_SEARCH_LEXICAL_POOL": "50", "ULTRON_SEARCH_CONTEXT_WEIGHT": "0.25",
                           "ULTRON_SEARCH_RESOLUTION_WEIGHT": "2", "ULTRON_SEARCH_BM25_K1": "1.2",
                           "ULTRON_SEARCH_BM25_B": "0.75", "ULTRON_SEARCH_EXACT_MAX": "300",
                           "ULTRON_HNSW_EF_SEARCH": "64"})
    assert arm_settings(s) == {"pool": 50, "k1": 1.2, "b": 0.75, "weights": {"A": 1.0, "B": 2.0, "C": 0.25},
                               "exact_max": 300, "ef_search": 64}


def test_the_candidates_statement_keeps_casts_and_percent_signs_when_run_unprepared():
    """The statement goes to psycopg in its own parameter style; a ``::`` cast or a ``%`` in
    it must come through as written, or every search fails."""
    from sqlalchemy.dialects.postgresql import psycopg

    from ultron.db.search_arms import _pyformat

    sql = "SELECT x::float8, CAST(:q AS vector), '%' || :tag_0 FROM t WHERE a = :a1 AND b::text = 'c:d'"
    assert _pyformat(sql, psycopg.dialect()) == ("SELECT x::float8, CAST(%(q)s AS vector), '%%' || %(tag_0)s FROM t "
                              "WHERE a = %(a1)s AND b::text = 'c:d'")
