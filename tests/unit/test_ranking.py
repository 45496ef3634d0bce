"""The parts of a hybrid score: text normalisation, weights, decay, MMR and the MEMORY.md weight."""

from __future__ import annotations

import math
import threading
from datetime import date, timedelta

import pytest

from mnemo.config import SearchSettings
from mnemo.embeddings import NoneEmbedder
from mnemo.search import ranking
from mnemo.search.hybrid import HybridSearcher, _Candidate


# -- text ---------------------------------------------------------------------------------------
def test_text_score_monotonic_in_bm25_and_coverage() -> None:
    total = 5.0
    by_bm25 = [ranking.text_score(b, 2.5, total) for b in (0.1, 0.5, 1, 2, 5, 10, 50)]
    assert by_bm25 == sorted(by_bm25) and len(set(by_bm25)) == len(by_bm25)
    by_cover = [ranking.text_score(3.0, c, total) for c in (0.5, 1, 2.5, 4, 5)]
    assert by_cover == sorted(by_cover) and len(set(by_cover)) == len(by_cover)
    assert all(0 <= s < 1 for s in by_bm25 + by_cover)


def test_text_score_edges() -> None:
    assert ranking.text_score(0.0, 1.0, 1.0) == 0.0
    assert ranking.text_score(2.0, 1.0, 0.0) == 0.0
    assert ranking.text_score(1e9, 9.0, 3.0) <= 1.0  # coverage is capped


def test_vector_score_clipped() -> None:
    assert ranking.vector_score(-0.3) == 0.0
    assert ranking.vector_score(1.2) == 1.0
    assert ranking.vector_score(0.42) == 0.42


# -- combine ------------------------------------------------------------------------------------
def test_combine_normalises_weights() -> None:
    # 0.7/0.3 and 7/3 are the same mix.
    a = ranking.combine(0.9, 0.2, 0.7, 0.3)
    b = ranking.combine(0.9, 0.2, 7.0, 3.0)
    assert a == pytest.approx(b) == pytest.approx(0.7 * 0.9 + 0.3 * 0.2)
    # Weights that do not sum to 1 still give a score in [0, 1].
    assert ranking.combine(1.0, 1.0, 0.9, 0.9) == pytest.approx(1.0)
    assert ranking.combine(0.5, 0.5, 0.0, 0.0) == 0.0


def test_combine_without_vector_is_text() -> None:
    assert ranking.combine(None, 0.37, 0.7, 0.3) == 0.37


def test_keyword_floor() -> None:
    # A strong keyword match with a useless vector keeps KEYWORD_FLOOR of its text score.
    assert ranking.combine(0.0, 0.9, 0.7, 0.3) == pytest.approx(ranking.KEYWORD_FLOOR * 0.9)
    # When the weighted mix is higher, the mix wins.
    assert ranking.combine(0.9, 0.5, 0.7, 0.3) == pytest.approx(0.7 * 0.9 + 0.3 * 0.5)


# -- decay --------------------------------------------------------------------------------------
def test_age_days() -> None:
    today = date(2026, 11, 30)
    assert ranking.age_days(None, today) is None
    assert ranking.age_days(date(2026, 11, 20), today) == 10.0
    assert ranking.age_days(date(2026, 12, 5), today) == 0.0  # the future is not negative age


def test_plain_decay_halves_at_half_life() -> None:
    assert ranking.plain_decay(0, 30) == 1.0
    assert ranking.plain_decay(30, 30) == pytest.approx(0.5)
    assert ranking.plain_decay(60, 30) == pytest.approx(0.25)
    assert ranking.plain_decay(7, 7) == pytest.approx(0.5)
    assert ranking.plain_decay(None, 30) == 1.0


def test_supersede_never_buries_a_unique_match() -> None:
    for age in (0, 30, 365, 5000):
        factor = ranking.supersede_decay(age, 30, superseded=False, recent_query=False)
        assert factor >= 1 - ranking.TIE_WEIGHT
    assert ranking.supersede_decay(365, 30, superseded=False, recent_query=False) >= 0.95
    older = ranking.supersede_decay(100, 30, superseded=False, recent_query=False)
    newer = ranking.supersede_decay(10, 30, superseded=False, recent_query=False)
    assert newer > older  # age still orders near-ties


def test_superseded_is_demoted() -> None:
    plain = ranking.supersede_decay(10, 30, superseded=False, recent_query=False)
    superseded = ranking.supersede_decay(10, 30, superseded=True, recent_query=False)
    assert superseded == pytest.approx(plain * ranking.SUPERSEDED_FACTOR)
    assert superseded < plain


def test_recent_queries_weigh_age_with_a_floor() -> None:
    normal = ranking.supersede_decay(60, 30, superseded=False, recent_query=False)
    recent = ranking.supersede_decay(60, 30, superseded=False, recent_query=True)
    assert recent < normal
    assert recent == pytest.approx(ranking.RECENT_FLOOR + (1 - ranking.RECENT_FLOOR) * 0.25)
    assert ranking.supersede_decay(10_000, 30, superseded=False, recent_query=True) >= ranking.RECENT_FLOOR


@pytest.mark.parametrize(
    ("query", "recent"),
    [
        ("what did we decide recently", True),
        ("latest deploy", True),
        ("最近的会议", True),
        ("what database did we pick", False),
        ("justice", False),  # "just" only as a word
    ],
)
def test_asks_about_recent(query: str, recent: bool) -> None:
    assert ranking.asks_about_recent(query) is recent


def test_evergreen_exempt() -> None:
    assert ranking.supersede_decay(None, 30, superseded=True, recent_query=True) == 1.0
    assert ranking.plain_decay(None, 1) == 1.0


# -- MMR ----------------------------------------------------------------------------------------
def test_jaccard() -> None:
    a, b = frozenset("abc"), frozenset("bcd")
    assert ranking.jaccard(a, b) == pytest.approx(0.5)
    assert ranking.jaccard(a, frozenset()) == 0.0


def test_mmr_prefers_diverse_second() -> None:
    dup = frozenset({"postgres", "billing", "database", "chosen"})
    other = frozenset({"deploy", "staging", "migration"})
    relevance = [0.9, 0.88, 0.8]
    tokens = [dup, dup, other]
    assert ranking.mmr_order(relevance, tokens, 0.7, 3) == [0, 2, 1]
    # lambda = 1: pure relevance.
    assert ranking.mmr_order(relevance, tokens, 1.0, 3) == [0, 1, 2]
    assert ranking.mmr_order(relevance, tokens, 0.7, 1) == [0]
    assert ranking.mmr_order([], [], 0.7, 3) == []


# -- through the searcher's ranking step ---------------------------------------------------------
TODAY = date(2026, 11, 30)


def _cand(cid: int, path: str, day: date | None, text: str, score: float) -> _Candidate:
    kind = "evergreen" if day is None else "daily"
    c = _Candidate(cid, vector=None, bm25=1.0, text=score)
    c.row = (cid, f"k{cid}", path, "memory", kind, day, 1, 2, "", text)
    return c


def _rank(cands: list[_Candidate], query: str = "q", **settings: object):  # type: ignore[no-untyped-def]
    searcher = HybridSearcher(NoneEmbedder(), SearchSettings(**settings), threading.Lock())  # type: ignore[arg-type]
    return {h.path: h.parts for h in searcher._rank(cands, query, TODAY, 0)}


def test_memory_weight_only_for_memory_md() -> None:
    parts = _rank(
        [
            _cand(1, "MEMORY.md", None, "alpha", 0.5),
            _cand(2, "memory/topic.md", None, "beta", 0.5),
            _cand(3, "memory/MEMORY.md", None, "gamma", 0.5),
        ],
        memory_weight=1.5,
    )
    assert parts["MEMORY.md"].weight == 1.5
    assert parts["MEMORY.md"].score == pytest.approx(0.5 + ranking.MEMORY_BOOST_CAP)  # bounded, not x1.5
    assert parts["memory/topic.md"].weight == 1.0
    assert parts["memory/MEMORY.md"].weight == 1.0


def test_old_unique_hit_keeps_its_score() -> None:
    old = TODAY - timedelta(days=365)
    parts = _rank([_cand(1, "memory/old.md", old, "the unique answer about zebras", 0.6)])
    p = parts["memory/old.md"]
    assert not p.superseded
    assert p.age_days == 365
    assert p.score >= 0.95 * 0.6


def test_newer_similar_memory_supersedes_older() -> None:
    text = "the billing service uses postgres with row level security"
    parts = _rank(
        [
            _cand(1, "memory/2026-01-01.md", date(2026, 1, 1), text, 0.6),
            _cand(2, "memory/2026-11-01.md", date(2026, 11, 1), text + " now", 0.6),
            _cand(3, "memory/2025-06-01.md", date(2025, 6, 1), "completely different words here", 0.6),
        ]
    )
    assert parts["memory/2026-01-01.md"].superseded
    assert not parts["memory/2026-11-01.md"].superseded
    assert not parts["memory/2025-06-01.md"].superseded  # older but unique
    assert parts["memory/2026-11-01.md"].score > parts["memory/2026-01-01.md"].score


def test_evergreen_not_decayed_and_multiplicative_mode() -> None:
    day = TODAY - timedelta(days=30)
    cands = [_cand(1, "memory/topic.md", None, "a", 0.5), _cand(2, "memory/2026-10-31.md", day, "b", 0.5)]
    sup = _rank(cands)
    assert sup["memory/topic.md"].decay == 1.0
    mult = _rank(cands, decay="multiplicative", half_life_days=30.0)
    assert mult["memory/topic.md"].decay == 1.0
    assert mult["memory/2026-10-31.md"].decay == pytest.approx(0.5)
    off = _rank(cands, decay="off")
    assert off["memory/2026-10-31.md"].decay == 1.0
    assert math.isclose(sup["memory/2026-10-31.md"].decay, 1 - ranking.TIE_WEIGHT * 0.5)


# -- issue 20: cut-offs, bounded MEMORY.md weight, updates ----------------------------------------
def test_calibrated_cut_never_hides_the_only_answer() -> None:
    # The reported cases: the right note scored 0.246 / 0.291 / 0.334, under the old absolute 0.35.
    for score in (0.246, 0.291, 0.334):
        assert ranking.calibrated_cut([score], [True], 0.5, 0.0) == [0]
        assert ranking.calibrated_cut([score], [True], 0.5, 0.35) == [0], "the floor never drops the anchor"
    # Relative to the best hit with evidence; hits without evidence never come back.
    assert ranking.calibrated_cut([0.8, 0.5, 0.39, 0.3], [True, True, True, True], 0.5, 0.0) == [0, 1]
    assert ranking.calibrated_cut([0.6, 0.3, 0.28], [False, True, True], 0.5, 0.0) == [1, 2]
    # "no results" only when nothing relevant exists.
    assert ranking.calibrated_cut([0.4, 0.2], [False, False], 0.5, 0.0) == []


def test_evidence_keyword_or_vector() -> None:
    assert ranking.has_evidence(None, 0.5)
    assert ranking.has_evidence(None, 0.1, covered_idf=3.0)  # one informative term of a long query
    assert not ranking.has_evidence(None, 0.1, covered_idf=0.5)
    assert ranking.has_evidence(0.45, 0.0)
    assert not ranking.has_evidence(0.2, 0.0)
    # A CJK query with the English-only model: its vectors are not evidence.
    assert not ranking.has_evidence(0.6, 0.0, vectors_count=False)


def test_memory_md_weight_is_a_bounded_boost() -> None:
    # Reported: MEMORY.md "uses PostgreSQL" (base 0.348, x1.5 -> 0.522) beat the pgbouncer note (0.477).
    memory_line = 0.522 / 1.5
    assert memory_line + ranking.memory_boost(memory_line, 1.5) < 0.477
    # It still orders a near-tie.
    assert 0.46 + ranking.memory_boost(0.46, 1.5) > 0.47
    assert ranking.memory_boost(0.9, 1.5) == ranking.MEMORY_BOOST_CAP
    assert ranking.memory_boost(0.9, 0.5) == -ranking.MEMORY_BOOST_CAP
    assert ranking.memory_boost(0.5, 1.0) == 0.0


def test_scores_users_see_stay_in_unit_interval() -> None:
    parts = _rank([_cand(1, "MEMORY.md", None, "alpha", 0.99)], memory_weight=100.0)
    assert 0.0 <= parts["MEMORY.md"].score <= 1.0  # a hover once showed 1.148
    assert ranking.bounded(1.148) == 1.0 and ranking.bounded(-0.1) == 0.0


def test_mmr_keeps_the_newer_of_near_duplicates() -> None:
    old = frozenset({"decision", "billing", "database", "cockroachdb", "will", "be"})
    new = frozenset({"decision", "billing", "database", "postgresql", "will", "be"})
    other = frozenset({"deploy", "staging", "failed"})
    relevance = [0.60, 0.57, 0.50]
    # Without ages (the reported bug): the newer version is pushed below the unrelated note.
    assert ranking.mmr_order(relevance, [old, new, other], 0.7, 3) == [0, 2, 1]
    # With ages: the newer version is picked first and the older one is what MMR pushes down.
    order = ranking.mmr_order(relevance, [old, new, other], 0.7, 2, ages=[120.0, 10.0, 50.0])
    assert order[0] == 1 and 1 in order
    # Not nearly as relevant: no swap.
    assert ranking.mmr_order([0.9, 0.3, 0.5], [old, new, other], 0.7, 1, ages=[120.0, 10.0, 50.0]) == [0]


def test_newer_version_takes_the_place_of_the_one_it_updates() -> None:
    text = "decision: the billing database will be postgres with row level security"
    parts = _rank(
        [
            _cand(1, "memory/2026-06-01.md", date(2026, 6, 1), text, 0.60),
            _cand(2, "memory/2026-11-12.md", date(2026, 11, 12), text + " final", 0.56),
        ]
    )
    old, new = parts["memory/2026-06-01.md"], parts["memory/2026-11-12.md"]
    assert old.superseded and old.reasons[0].startswith("superseded by memory/2026-11-12.md#L")
    assert new.score > old.score
    age = ranking.age_days(date(2026, 6, 1), TODAY)
    assert new.score >= 0.60 * ranking.supersede_decay(age, 30, superseded=False, recent_query=False) - 1e-9
    assert any("newer version of memory/2026-06-01.md" in r for r in new.reasons)
