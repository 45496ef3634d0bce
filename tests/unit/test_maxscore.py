"""MaxScore's top k (mnemo.index.maxscore) against adding every posting."""

from __future__ import annotations

import numpy as np
import pytest

from mnemo.index import maxscore
from mnemo.index.maxscore import best_of_terms, kth_block_best


def _every_posting_added(terms: list[maxscore.Term], lo: int, span: int, k: int) -> list[tuple[int, float]]:
    dense = np.zeros(span)
    for ids, shares, weight in terms:
        dense[ids - lo] += shares * weight
    hit = np.flatnonzero(dense)
    order = np.lexsort((hit, -dense[hit]))[:k]
    return [(int(hit[i] + lo), float(dense[hit[i]])) for i in order]


def _corpus(rng: np.random.Generator, span: int, sizes: list[int], ties: bool) -> list[maxscore.Term]:
    terms = []
    for size in sizes:
        ids = np.sort(rng.choice(span, size=size, replace=False)) + 1000
        shares = np.ones(size) if ties else rng.uniform(0.2, 2.2, size)
        weight = float(np.log(1 + (span - size + 0.5) / (size + 0.5)))
        terms.append((ids.astype(np.int32), shares, weight))
    return terms


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("ties", [False, True])
def test_the_best_k_equal_those_of_every_posting_added(seed: int, ties: bool) -> None:
    rng = np.random.default_rng(seed)
    span = 200_000
    # a few rare words and several common ones, as in "The large pipeline in payments was"
    sizes = [int(rng.integers(5, 400)) for _ in range(2)] + [
        int(rng.integers(60_000, 190_000)) for _ in range(4)
    ]
    terms = _corpus(rng, span, sizes, ties)
    k = int(rng.choice([1, 5, 24, 60]))
    ids, scores = best_of_terms(terms, 1000, span, k)
    expected = _every_posting_added(terms, 1000, span, k)
    assert [int(i) for i in ids] == [cid for cid, _ in expected]
    assert scores == pytest.approx([score for _, score in expected], rel=1e-12)


def test_common_words_are_looked_up_not_added(monkeypatch: pytest.MonkeyPatch) -> None:
    """The point of it: with two rare words, the common words' postings are never added in full."""
    rng = np.random.default_rng(3)
    span = 300_000
    terms = _corpus(rng, span, [50, 120, 250_000, 280_000], ties=False)
    added: list[int] = []
    real_add = np.subtract

    def counting_subtract(ids: np.ndarray, lo: int, dtype: type) -> np.ndarray:
        added.append(len(ids))
        return real_add(ids, lo, dtype=dtype)

    monkeypatch.setattr(maxscore.np, "subtract", counting_subtract)
    ids, _ = best_of_terms(terms, 1000, span, 24)
    monkeypatch.undo()
    assert sorted(added) == [50, 120]
    assert [int(i) for i in ids] == [cid for cid, _ in _every_posting_added(terms, 1000, span, 24)]


def test_every_chunk_tied_at_the_kth_score_is_ordered_by_id() -> None:
    ids = np.arange(10, 5010, dtype=np.int32)
    terms = [(ids, np.ones(len(ids)), 1.0)]
    chosen, scores = best_of_terms(terms, 10, 5000, 7)
    assert chosen.tolist() == list(range(10, 17))
    assert scores.tolist() == [1.0] * 7


def test_the_kth_block_best_never_exceeds_the_kth_best() -> None:
    rng = np.random.default_rng(0)
    for _ in range(50):
        dense = np.where(rng.random(64 * 40) < 0.1, rng.random(64 * 40), 0.0)
        k = int(rng.integers(1, 30))
        assert kth_block_best(dense, k) <= np.sort(dense)[-k]


def test_nothing_to_rank_returns_nothing() -> None:
    empty = (np.zeros(0, np.int32), np.zeros(0), 1.0)
    assert [len(a) for a in best_of_terms([empty], 0, 10, 5)] == [0, 0]
    one = (np.array([3], np.int32), np.array([1.0]), 2.0)
    assert [a.tolist() for a in best_of_terms([one], 0, 10, 0)] == [[], []]


def test_no_place_asked_for_gives_no_position_whatever_the_scores() -> None:
    assert maxscore.best_positions(np.arange(50), np.ones(50), 0).tolist() == []


def _split(terms: list[maxscore.Term]) -> tuple[list[maxscore.Term], list[maxscore.Term]]:
    common = [t for t in terms if len(t[0]) > 20_000]
    return [t for t in terms if len(t[0]) <= 20_000], common


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("sums", ["as they come", "sorted", "in an array"])
def test_around_the_common_words_best_the_answer_is_that_of_every_posting(
    seed: int, ties: bool, sums: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Few rare matches (the last places go to chunks with common words only), or many; the same chunks
    and scores as adding every posting, the kept list built once and used for every k up to its depth;
    the rare words summed by sorting their postings or in an array of the span."""
    factor = {"as they come": maxscore.SPARSE_SPAN_FACTOR, "sorted": 10**9, "in an array": 0}[sums]
    monkeypatch.setattr(maxscore, "SPARSE_SPAN_FACTOR", factor)
    rng = np.random.default_rng(100 + seed)
    span = 150_000
    rare_sizes = [int(rng.integers(3, 40)) for _ in range(2)] if seed % 2 else [int(rng.integers(500, 9000))]
    terms = _corpus(rng, span, rare_sizes + [int(rng.integers(30_000, 140_000)) for _ in range(3)], ties)
    rare, common = _split(terms)
    top = maxscore.CommonTop.of(common, 1000, span, maxscore.depth_for(24))
    for k in (1, 10, 24):
        found = maxscore.best_with_common(rare, common, top, 1000, span, k)
        assert found is not None
        expected = _every_posting_added(terms, 1000, span, k)
        assert [int(i) for i in found[0]] == [cid for cid, _ in expected]
        assert found[1] == pytest.approx([score for _, score in expected], rel=1e-12)


def _same_as_every_posting(
    found: tuple[np.ndarray, np.ndarray] | None, terms: list[maxscore.Term], span: int, k: int
) -> None:
    assert found is not None
    assert [int(i) for i in found[0]] == [cid for cid, _ in _every_posting_added(terms, 1000, span, k)]


def test_a_kept_list_too_short_for_the_places_asked_says_so() -> None:
    rng = np.random.default_rng(7)
    span = 100_000
    terms = _corpus(rng, span, [10, 60_000, 80_000], ties=False)
    rare, common = _split(terms)
    short = maxscore.CommonTop.of(common, 1000, span, 5)
    assert not short.complete
    assert maxscore.best_with_common(rare, common, short, 1000, span, 24) is None
    every = maxscore.CommonTop.of(common, 1000, span, 10**6)  # every chunk with a common word
    assert every.complete
    found = maxscore.best_with_common(rare, common, every, 1000, span, 24)
    _same_as_every_posting(found, terms, span, 24)


def _common_words(
    seed: int, span: int, sizes: list[int], ties: bool, k: int
) -> tuple[list[maxscore.Term], maxscore.CommonTop]:
    """Common words only, and their best chunks kept for a top ``k``."""
    common = _corpus(np.random.default_rng(seed), span, sizes, ties)
    return common, maxscore.CommonTop.of(common, 1000, span, maxscore.depth_for(k))


def test_common_words_alone_are_answered_from_the_kept_list() -> None:
    terms, top = _common_words(11, 120_000, [50_000, 90_000], ties=True, k=24)
    found = maxscore.best_with_common([], terms, top, 1000, 120_000, 24)
    _same_as_every_posting(found, terms, 120_000, 24)


def test_chunks_best_by_common_words_that_also_have_a_rare_word_count_once_with_it() -> None:
    span = 100_000
    common, top = _common_words(5, span, [60_000, 70_000], ties=False, k=10)
    ids = np.sort(top.ids[:6]).astype(np.int32)  # the common words' best chunks have the rare word too
    rare = [(ids, np.full(len(ids), 0.5), 0.01)]
    found = maxscore.best_with_common(rare, common, top, 1000, span, 10)
    _same_as_every_posting(found, [*rare, *common], span, 10)
    assert found is not None and len(set(found[0].tolist())) == 10


@pytest.mark.parametrize("seed", range(6))
def test_sums_by_chunk_are_the_same_floats_sorted_or_in_an_array(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(300 + seed)
    span = 50_000
    terms = _corpus(
        rng, span, [int(rng.integers(1, 3000)) for _ in range(int(rng.integers(1, 5)))], ties=False
    )
    monkeypatch.setattr(maxscore, "SPARSE_SPAN_FACTOR", 10**9)
    sorted_ids, sorted_sums = maxscore.sums_by_id(terms, 1000, span)
    monkeypatch.setattr(maxscore, "SPARSE_SPAN_FACTOR", 0)
    dense_ids, dense_sums = maxscore.sums_by_id(terms, 1000, span)
    assert (
        sorted_ids.tolist() == dense_ids.tolist() == np.unique(np.concatenate([t[0] for t in terms])).tolist()
    )
    assert sorted_sums.tolist() == dense_sums.tolist()  # bit for bit: added in the same order


def test_chunk_ids_of_another_width_are_found_as_they_are() -> None:
    """int64 ids looked up in a term's int32 ids: searched as int32 when they fit, and an id past the
    int32 range is simply not there (not wrapped onto another chunk)."""
    ids = np.array([3, 70, 2**31 - 1], dtype=np.int32)
    wanted = np.array([70, 2**31 - 1, 4, 2**32 + 70, -(2**32) + 3], dtype=np.int64)
    at, found = maxscore.found_in(ids, wanted)
    assert found.tolist() == [True, True, False, False, False]
    assert at[:2].tolist() == [1, 2]
    at, found = maxscore.found_in(ids, wanted[:3])
    assert found.tolist() == [True, True, False] and at[:2].tolist() == [1, 2]
