"""The parts of a hybrid score: text normalisation, weights, decay, MMR and the MEMORY.md weight."""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Callable
from datetime import date, timedelta
from typing import Any

import pytest

from mnemo.config import SearchSettings
from mnemo.embeddings import NoneEmbedder
from mnemo.index.api import ChunkRecord
from mnemo.search import lines, ranking, select
from mnemo.search.hybrid import HybridSearcher, _Candidate
from mnemo.search.results import ScoreParts, SearchHit
from mnemo.text.terms import token_set


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
    c.record = ChunkRecord(cid, f"k{cid}", path, "memory", kind, day, 1, 2, "", text)
    return c


def _rank(cands: list[_Candidate], query: str = "q", **settings: object):  # type: ignore[no-untyped-def]
    searcher = HybridSearcher(NoneEmbedder(), SearchSettings(**settings))  # type: ignore[arg-type]
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


def test_mmr_asks_each_pairs_similarity_once_and_orders_as_before() -> None:
    """Every round of MMR needs each remaining item's overlap with every chosen one: remembered, a pair
    is computed once (24 candidates, 6 picks: at most 24 x 6 questions instead of ~440)."""
    words = [f"w{i}" for i in range(30)]
    tokens = [frozenset(words[i % 7 : i % 7 + 4 + i % 3]) for i in range(24)]
    relevance = [1.0 - i * 0.02 for i in range(24)]
    asked: list[tuple[int, int]] = []

    def similarity(i: int, j: int) -> float:
        asked.append((i, j))
        return ranking.jaccard(tokens[i], tokens[j])

    order = ranking.mmr_order(relevance, tokens, 0.7, 6, similarity=similarity)
    assert order == ranking.mmr_order(relevance, tokens, 0.7, 6)  # the default: plain Jaccard
    assert len(asked) == len(set(asked)) <= 24 * 6
    assert len(set(order)) == 6 and order[0] == 0


def _mmr_taken_again_each_round(
    relevance: list[float],
    lam: float,
    k: int,
    ages: list[float | None],
    similarity: Callable[[int, int], float],
) -> list[int]:
    """MMR as first written: each round, each item's overlap is the max over every chosen item."""

    def newer(i: int, j: int) -> bool:
        a, b = ages[i], ages[j]
        return a is not None and b is not None and a < b

    remaining, chosen = list(range(len(relevance))), []
    while remaining and len(chosen) < k:
        best, best_value = remaining[0], -math.inf
        for i in remaining:
            overlap = max((similarity(i, j) for j in chosen if not newer(i, j)), default=0.0)
            value = lam * relevance[i] - (1 - lam) * overlap
            if value > best_value:
                best, best_value = i, value
        updates = [
            i
            for i in remaining
            if newer(i, best)
            and relevance[i] >= ranking.SUPERSEDER_RELEVANCE * relevance[best]
            and similarity(best, i) >= ranking.NEAR_DUPLICATE
        ]
        if updates:
            best = min(updates, key=lambda i: (ages[i], -relevance[i]))  # type: ignore[arg-type, return-value]
        chosen.append(best)
        remaining.remove(best)
    return chosen


@pytest.mark.parametrize("seed", range(40))
def test_mmr_kept_up_to_date_orders_as_mmr_taken_again_each_round(seed: int) -> None:
    """The overlaps are brought up to date at each pick: the same order as taking the max over every
    chosen item each round, with ages, undated items, ties and (for any similarity given) negative values."""
    rng = random.Random(seed)
    n = rng.randint(0, 30)
    relevance = [round(rng.random(), 1) for _ in range(n)]
    ages: list[float | None] = [None if rng.random() < 0.2 else float(rng.randint(0, 5)) for _ in range(n)]
    table = {(i, j): round(rng.uniform(-0.2, 1.0), 1) for i in range(n) for j in range(n)}

    def similarity(i: int, j: int) -> float:
        return table[i, j]

    for k in (1, 3, 8, 40):
        expected = _mmr_taken_again_each_round(relevance, 0.7, k, ages, similarity)
        assert ranking.mmr_order(relevance, [frozenset()] * n, 0.7, k, ages, similarity) == expected


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


# -- issue 20: supersede and MMR decided on the line that answers the query ----------------------
def _daily(cid: int, day: date, fact: str, score: float, filler: tuple[str, ...] = ()) -> _Candidate:
    text = "\n".join(
        [f"# {day.isoformat()}", "", "## Decisions", "", *(f"- {f}" for f in filler), f"- {fact}"]
    )
    c = _cand(cid, f"memory/{day.isoformat()}.md", day, text, score)
    c.record = dataclasses.replace(c.row, start_line=1, end_line=text.count("\n") + 1)
    return c


BILLING_QUERY = "what did we decide about the billing database"
OLD_BILLING = "Decision: the billing database will be MongoDB (billing)."
NEW_BILLING = "Final decision: we are moving the billing database to PostgreSQL (billing)."
NEW_PAYMENTS = "Final decision: we are moving the payments database to MySQL (payments)."


def _foci(texts: list[str], query: str) -> list[lines.Focus | None]:
    chunk_lines = [lines.content_lines(t) for t in texts]
    weights = lines.term_weights(token_set(query), chunk_lines)
    return [lines.focus(ls, weights) for ls in chunk_lines]


def test_focus_is_the_line_that_answers_the_query() -> None:
    text = "# 2026-06-26\n\n## Decisions\n\n- Lunch with Ines; talked about hiring.\n- " + OLD_BILLING
    f = _foci([text, "- unrelated filler about lunch"], BILLING_QUERY)[0]
    assert f is not None and f.offset == 5 and {"billing", "database"} <= f.matched and not f.ambiguous
    # Two lines holding the same query words: an ambiguous focus, which takes part in no update.
    (g, h) = _foci(
        ["- 账单服务上线失败：迁移脚本。\n- 账单服务的日志量太大。", "- 账单服务的日志量太大。"], "账单的部署"
    )
    assert g is not None and g.ambiguous
    weights = {"账单": 1.0}
    assert not lines.updates(g, h, weights)
    # No line shares a query word: no focus, unless the chunk is one line.
    assert _foci(["- lunch\n- hiring"], "billing database")[0] is None


def test_updates_compares_the_answering_lines_not_the_chunks() -> None:
    old, new, payments = _foci(["- " + OLD_BILLING, "- " + NEW_BILLING, "- " + NEW_PAYMENTS], BILLING_QUERY)
    weights = lines.term_weights(
        token_set(BILLING_QUERY), [lines.content_lines(t) for t in (OLD_BILLING, NEW_BILLING, NEW_PAYMENTS)]
    )
    assert lines.updates(old, new, weights)
    # Another entity's decision lacks "billing": it updates nothing about billing.
    assert not lines.updates(old, payments, weights)
    # Reported: "who leads on-call for Beacon" - the Comet lead line shares every word but "beacon".
    q = "who leads on-call for Beacon"
    beacon, comet = _foci(
        [
            "- Bruno is now the on-call lead for the Beacon team.",
            "- Lena is now the on-call lead for the Comet team.",
        ],
        q,
    )
    w = lines.term_weights(token_set(q), [lines.content_lines("- on-call beacon for")])
    assert not lines.updates(beacon, comet, w)


def test_newer_version_wins_although_its_chunk_is_less_relevant() -> None:
    # Daily-note chunks mix unrelated lines: the update's chunk scores lower as a whole (0.42 vs 0.45).
    old = _daily(
        1, date(2026, 6, 26), OLD_BILLING, 0.45, ("Interviewed a backend candidate; strong on databases.",)
    )
    new = _daily(
        2, date(2026, 7, 19), NEW_BILLING, 0.42, ("Paired with Hiro on flaky tests in the pipeline.",)
    )
    other = _daily(3, date(2026, 11, 22), NEW_PAYMENTS, 0.44, ("Sprint planning ran long.",))
    parts = _rank([old, new, other], BILLING_QUERY)
    o, n, p = parts["memory/2026-06-26.md"], parts["memory/2026-07-19.md"], parts["memory/2026-11-22.md"]
    assert o.superseded and o.reasons[0] == "superseded by memory/2026-07-19.md#L6"
    assert n.score > o.score and "takes its place" in n.reasons[0]
    assert not n.superseded and not p.reasons, "the newer payments decision does not update the billing one"
    assert n.line == 6 and o.line == 6


def test_mmr_does_not_penalise_a_line_that_names_what_the_query_asks() -> None:
    q = "how many calls can one client make to Atlas per minute"
    atlas, delta = _foci(
        [
            "- Atlas public API: clients are throttled at 300 requests a minute per key.",
            "- Delta public API: clients are throttled at 400 requests a minute per key.",
        ],
        q,
    )
    assert atlas is not None and delta is not None
    assert lines.redundancy(atlas, delta) == 0.0  # Atlas covers "atlas"
    assert lines.redundancy(delta, atlas) > 0.5  # Delta says nothing the Atlas line does not


def _hit(cid: int, score: float, line: str, query: str) -> SearchHit:
    (f,) = _foci([line], query)
    parts = ScoreParts(vector=None, text=score, bm25=1.0, decay=1.0, weight=1.0, score=score)
    return SearchHit(cid, f"k{cid}", f"memory/{cid}.md", "memory", 1, 1, "", line, parts, f)


def test_mmr_counts_only_real_redundancy() -> None:
    q = "how long do tomatoes take to ripen"
    settings = SearchSettings(mmr=True, mmr_lambda=0.7)
    # Two passages on one topic, each worth reading (token overlap about 0.3): kept in score order.
    topic = [
        _hit(1, 0.60, "Tomatoes take 60 to 85 days to ripen after planting, depending on the variety.", q),
        _hit(2, 0.58, "Most tomatoes ripen within six to eight weeks once the flowers are pollinated.", q),
        _hit(3, 0.55, "Peppers and tomatoes take a long season; start them indoors.", q),
    ]
    assert [h.chunk_id for h in select.diversify(topic, settings, 3)] == [1, 2, 3]
    # A repeated line is redundant: the copy drops below a different answer.
    repeated = [
        _hit(1, 0.60, "Tomatoes take 60 to 85 days to ripen after planting.", q),
        _hit(2, 0.59, "Tomatoes take 60 to 85 days to ripen after planting!", q),
        _hit(3, 0.50, "Cherry tomatoes ripen faster, in about 50 days.", q),
    ]
    assert [h.chunk_id for h in select.diversify(repeated, settings, 3)] == [1, 3, 2]


def test_diversify_works_out_each_pairs_redundancy_once_reasons_included(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """MMR and the reasons given after it ask about the same pairs: one memo serves both."""
    q = "how long do tomatoes take to ripen"
    repeated = [
        _hit(1, 0.60, "Tomatoes take 60 to 85 days to ripen after planting.", q),
        _hit(2, 0.59, "Tomatoes take 60 to 85 days to ripen after planting!", q),
        _hit(3, 0.50, "Cherry tomatoes ripen faster, in about 50 days.", q),
    ]
    asked: list[tuple[int, int]] = []
    real = lines.redundancy

    def counted(a: Any, b: Any) -> float:
        asked.append((id(a), id(b)))
        return real(a, b)

    monkeypatch.setattr(lines, "redundancy", counted)
    order = select.diversify(repeated, SearchSettings(mmr=True, mmr_lambda=0.7), 3)
    assert [h.chunk_id for h in order] == [1, 3, 2] and order[2].parts.reasons
    assert len(asked) == len(set(asked)), "a pair's redundancy worked out twice"
