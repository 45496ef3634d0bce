"""The pruned keyword top-k (impact-ordered postings, :mod:`mnemo.index.pg_topk`) against scoring every
posting: same scores, same chunks, over random queries on a corpus with skewed term frequencies, after
writes that move the average length and after deletes; and the migration that adds the impacts."""

from __future__ import annotations

import random
from collections.abc import Iterator

import psycopg
import pytest
from numpy import array as np_array

from mnemo.index import pg_memos, pg_schema, pg_terms, pg_topk
from mnemo.index.api import KeywordHit
from mnemo.index.pg_connect import connect
from mnemo.index.pg_store import PgStore
from mnemo.index.writer_api import ChunkRow
from mnemo.text.terms import terms_string
from tests.postgres.helpers import fresh_database

VOCABULARY = [f"w{chr(97 + i % 26)}{chr(97 + i // 26 % 26)}x" for i in range(300)]
"""Words that stem to themselves; drawn with Zipf-like weights, so a few are in most chunks."""
WEIGHTS = [1.0 / (rank + 1) for rank in range(len(VOCABULARY))]


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choices(VOCABULARY, WEIGHTS, k=words))


def _rows(rng: random.Random, n: int, lengths: tuple[int, int], start: int) -> list[ChunkRow]:
    out = []
    for i in range(start, start + n):
        text = _text(rng, rng.randint(*lengths))
        out.append(ChunkRow(f"k{i}", f"memory/n{i}.md", "memory", "evergreen", None, 1, 2, "", text,
                            terms_string(text), f"h{i}"))  # fmt: skip
    return out


@pytest.fixture
def store(pg_dsn: str, namespace: str) -> Iterator[PgStore]:
    con = connect(pg_dsn, vectors=False)
    pg_schema.migrate(con)
    with con.transaction():
        pg_schema.namespace_lock(con, namespace)
        made = pg_schema.create_generation(con, namespace, "none", "", 0, "c", live=True)
    yield PgStore(con, made)
    con.close()


def _full(con: psycopg.Connection, g: int, terms: list[str]) -> dict[int, tuple[float, float]]:
    """Every chunk's (BM25, covered IDF) from all of the terms' postings (the NumPy full scan)."""
    weights = pg_terms.query_weights(con, g, terms)
    if weights is None:
        return {}
    postings = pg_terms._read_postings(con, g, list(weights.idf), weights.avgdl)
    return {cid: (bm25, cov) for cid, bm25, cov in pg_terms._score(weights, postings, 10**9, None)}


def _check_queries(con: psycopg.Connection, g: int, rng: random.Random, count: int) -> int:
    """Compare the pruned top-k with the full scan for ``count`` random queries; returns how many
    had hits."""
    answered = 0
    for _ in range(count):
        terms = rng.sample(VOCABULARY[:120], rng.randint(1, 5)) + rng.choices(
            ["zzunknown"], k=rng.randint(0, 1)
        )
        limit = rng.choice([1, 3, 10, 25])
        full = _full(con, g, terms)
        ranked = sorted(full.items(), key=lambda item: (-item[1][0], item[0]))
        hits = pg_terms.search(con, g, terms, limit=limit)
        assert len(hits) == min(limit, len(ranked)), terms
        assert len({h.chunk_id for h in hits}) == len(hits)
        for hit, (_, (best, _)) in zip(hits, ranked, strict=False):
            assert hit.bm25 == pytest.approx(best, abs=1e-9), (
                f"{terms} limit {limit}: a score differs by rank"
            )
            assert hit.bm25 == pytest.approx(full[hit.chunk_id][0], abs=1e-9), "the chunk's own score"
            assert hit.covered == pytest.approx(full[hit.chunk_id][1], abs=1e-9)
        answered += bool(hits)
    return answered


def _small_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Prune whatever the query's size, and start from 2 postings a term, so lists are cut and the bound
    decides (not only full reads)."""
    monkeypatch.setattr(pg_terms, "SCAN_ALL_BELOW", 0)
    monkeypatch.setattr(pg_terms, "PRUNE_RAREST_SHARE", 1.0)
    monkeypatch.setattr(pg_topk, "MIN_READ", 2)
    monkeypatch.setattr(pg_topk, "FIRST_READ", 0)
    monkeypatch.setattr(pg_topk, "GROWTH", 2)


def _df(store: PgStore, term: str) -> int:
    row = store.con.execute(
        "SELECT df FROM mnemo.terms WHERE g = %s AND term = %s", [store.g, term]
    ).fetchone()
    assert row is not None
    return int(row[0])


def _read_for_top_one(store: PgStore, monkeypatch: pytest.MonkeyPatch, term: str) -> int:
    """How many chunks the top-1 of ``term`` scored exactly in its last round."""
    sizes: list[int] = []
    real = pg_topk.score_ids

    def recording(con, generation, idf, avgdl, ids):  # type: ignore[no-untyped-def]
        sizes.append(len(ids))
        return real(con, generation, idf, avgdl, ids)

    monkeypatch.setattr(pg_topk, "score_ids", recording)
    hits = pg_terms.search(store.con, store.g, [term], limit=1)
    monkeypatch.setattr(pg_topk, "score_ids", real)
    assert len(hits) == 1
    return sizes[-1]


def _avg_lengths(con: psycopg.Connection, g: int) -> tuple[float, float]:
    row = con.execute(
        "SELECT total_len::float8 / docs, min_a0 FROM mnemo.generations WHERE id = %s", [g]
    ).fetchone()
    assert row is not None
    return float(row[0]), float(row[1])


def test_pruned_top_k_equals_full_scoring_as_average_length_moves_and_chunks_go(
    store: PgStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(17)
    _small_reads(monkeypatch)
    with store.transaction():  # short chunks first: their impacts are computed for a small average
        store.insert_chunks(_rows(rng, 150, (3, 12), 0), None)
    assert _check_queries(store.con, store.g, rng, 40) >= 30
    assert _read_for_top_one(store, monkeypatch, VOCABULARY[0]) < _df(store, VOCABULARY[0]), (
        "the most common word's best chunk is found without reading its whole list"
    )
    with store.transaction():
        store.insert_chunks(_rows(rng, 250, (20, 90), 150), None)
    avgdl, min_a0 = _avg_lengths(store.con, store.g)
    assert avgdl > 2 * min_a0, "stored impacts now understate: the bound's factor exceeds 1"
    assert _check_queries(store.con, store.g, rng, 60) >= 50
    ids = [int(r[0]) for r in store.con.execute("SELECT id FROM mnemo.chunks WHERE g = %s", [store.g])]
    with store.transaction():
        store.delete_chunks(rng.sample(ids, 120))
        store.insert_chunks(_rows(rng, 40, (1, 4), 1000), None)
    assert _check_queries(store.con, store.g, rng, 60) >= 40


def test_a_top_k_too_costly_to_prune_scores_every_posting(
    store: PgStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(5)
    with store.transaction():
        store.insert_chunks(_rows(rng, 300, (5, 40), 0), None)
    weights = pg_terms.query_weights(store.con, store.g, VOCABULARY[:4])
    assert weights is not None
    _small_reads(monkeypatch)
    monkeypatch.setattr(pg_topk, "MAX_READ", 8)
    args = (store.con, store.g, weights.idf, weights.avgdl, weights.min_a0, 10)
    assert pg_topk.top_k(*args) is None, "past MAX_READ postings a term, the pruned top-k gives up"
    monkeypatch.setattr(pg_topk, "MAX_READ", 10**6)
    monkeypatch.setattr(pg_topk, "MAX_VERIFY", 1)
    assert pg_topk.top_k(*args) is None, "so it does when too many chunks would be scored by key"
    assert _check_queries(store.con, store.g, rng, 40) >= 30, "and the full scan answers instead"

    def no_pruning(*args: object) -> None:
        raise AssertionError("a query with few postings is scored from all of them")

    monkeypatch.setattr(pg_terms, "top_k", no_pruning)
    monkeypatch.setattr(pg_terms, "SCAN_ALL_BELOW", 10**9)
    assert pg_terms.search(store.con, store.g, VOCABULARY[:3], limit=5)
    monkeypatch.setattr(pg_terms, "SCAN_ALL_BELOW", 0)
    monkeypatch.setattr(pg_terms, "PRUNE_RAREST_SHARE", 0.0)
    assert pg_terms.search(store.con, store.g, VOCABULARY[:3], limit=5), "nor one of common words only"


def test_postings_are_read_in_chunk_id_order_however_the_database_returns_them(
    store: PgStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scan's binary search needs each term's ids ascending: the query asks for them in order, and
    arrays that come back otherwise are sorted with their tf and length."""
    rng = random.Random(9)
    with store.transaction():
        store.insert_chunks(_rows(rng, 200, (5, 30), 0), None)
    terms = VOCABULARY[:3]
    ordered = pg_terms._read_postings(store.con, store.g, terms, 20.0)
    monkeypatch.setattr(
        pg_terms, "_POSTINGS_SQL", pg_terms._POSTINGS_SQL.replace("p.chunk_id)", "p.chunk_id DESC)")
    )
    reversed_ = pg_terms._read_postings(store.con, store.g, terms, 20.0)
    assert set(ordered) == set(reversed_) == set(terms)
    for term in terms:
        ids, shares = ordered[term]
        assert len(ids) > 1 and bool((ids[1:] > ids[:-1]).all())
        assert ids.tolist() == reversed_[term][0].tolist()
        assert shares.tolist() == reversed_[term][1].tolist()


def test_migration_to_impacts_fills_them_for_an_existing_generation(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _small_reads(monkeypatch)
    con = connect(fresh_database(pg_dsn, "mnemo_impacts"), vectors=False)
    try:
        assert pg_schema.migrate(con, upto=1) == 0
        rng = random.Random(3)
        g = con.execute(
            "INSERT INTO mnemo.generations(namespace, live, provider, model, dims, chunker) "
            "VALUES ('old', true, 'none', '', 0, 'c') RETURNING id"
        ).fetchone()
        assert g is not None
        gid = int(g[0])
        rows = _rows(rng, 200, (2, 40), 0)
        terms = pg_terms.chunk_terms([r.terms for r in rows])
        for cid, t in enumerate(terms, start=1):  # the rows as schema version 1 wrote them
            for term, tf in t.tf.items():
                con.execute(
                    "INSERT INTO mnemo.postings(g, term, chunk_id, tf, len) VALUES (%s, %s, %s, %s, %s)",
                    [gid, term, cid, tf, t.length],
                )
            con.execute(
                "INSERT INTO mnemo.terms(g, term, df) SELECT %s, x, 1 FROM unnest(%s::text[]) x "
                "ON CONFLICT (g, term) DO UPDATE SET df = terms.df + 1",
                [gid, list(t.tf)],
            )
        total = sum(t.length for t in terms)
        con.execute(
            "UPDATE mnemo.generations SET docs = %s, total_len = %s WHERE id = %s", [len(terms), total, gid]
        )
        assert pg_schema.migrate(con) == 1
        avgdl, min_a0 = _avg_lengths(con, gid)
        assert min_a0 == pytest.approx(total / len(terms))
        bad = con.execute(
            "SELECT count(*) FROM mnemo.postings WHERE g = %s AND abs(imp - tf * 2.2 / (tf + 1.2 * "
            "(0.25 + 0.75 * len / %s::float8))) > 1e-6",
            [gid, avgdl],
        ).fetchone()
        assert bad == (0,), "every posting's impact is its BM25 tf part at the average length"
        assert con.execute("SELECT to_regclass('mnemo.postings_impact')").fetchone() != (None,)
        assert _check_queries(con, gid, rng, 30) >= 20
    finally:
        con.close()


def test_the_numpy_scan_scores_and_covers_as_a_plain_sum() -> None:
    """``_score`` adds the shares in one array by chunk id and works out the covered IDF for the chunks
    it returns only: both against a plain per-chunk sum, on ids dense and spread, with ``only_ids``."""
    rng = random.Random(5)
    for spread in (1, 10_000_000):
        postings = {}
        for term in ("a", "b", "c"):
            ids = sorted(rng.sample(range(400), rng.randint(1, 300)))
            postings[term] = (
                np_array([i * spread + 7 for i in ids]),
                np_array([rng.uniform(0.2, 2.0) for _ in ids], float),
            )
        idf = {"a": 0.3, "b": 1.7, "c": 0.9, "absent": 2.0}
        weights = pg_terms.QueryWeights(idf, sum(idf.values()), 50.0)
        plain: dict[int, list[float]] = {}
        for term, (ids_, shares) in postings.items():
            for cid, share in zip(ids_.tolist(), shares.tolist(), strict=True):
                plain.setdefault(cid, [0.0, 0.0])
                plain[cid][0] += share * idf[term]
                plain[cid][1] += idf[term]
        ranked = sorted(plain.items(), key=lambda item: (-item[1][0], item[0]))
        top = pg_terms._score(weights, postings, 10, None)
        assert [round(s, 9) for _, s, _ in top] == [round(v[0], 9) for _, v in ranked[:10]]
        for cid, bm25, covered in top:
            assert (bm25, covered) == pytest.approx(plain[cid], abs=1e-9)
        wanted = [*rng.sample(sorted(plain), 25), 3]  # 3: no posting
        some = pg_terms._score(weights, postings, 0, wanted)
        assert sorted(cid for cid, _, _ in some) == sorted(c for c in wanted if c in plain)
        for cid, bm25, covered in some:
            assert (bm25, covered) == pytest.approx(plain[cid], abs=1e-9)


def test_given_ids_are_scored_from_held_postings_as_sql_scores_them(
    store: PgStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The vector candidates' BM25 (``only_ids``): the terms whose postings the process holds at this
    version are scored from them, the others in SQL by key; the same scores and order as SQL alone. A
    write moves the version on, and SQL scores every term again."""
    rng = random.Random(9)
    with store.transaction():
        store.insert_chunks(_rows(rng, 200, (5, 40), 0), None)
    memo = pg_memos.PostingsMemo()
    terms = [*VOCABULARY[:3], "zzunknown"]
    ids = [r[0] for r in store.con.execute("SELECT id FROM mnemo.chunks WHERE g = %s ORDER BY id", [store.g])]
    some = [*ids[::3], max(ids) + 7]  # and an id with no chunk
    by_sql = pg_terms.search(store.con, store.g, terms, limit=len(some), only_ids=some, memo=memo)
    assert by_sql and memo._items == {}, "nothing held yet: scored in SQL"
    asked: list[list[str]] = []
    real_score_ids = pg_terms.score_ids

    def spy(con: psycopg.Connection, g: int, idf: dict[str, float], *rest: object) -> object:
        asked.append(sorted(idf))
        return real_score_ids(con, g, idf, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(pg_terms, "score_ids", spy)

    def same(found: list[KeywordHit]) -> None:
        assert [h.chunk_id for h in found] == [h.chunk_id for h in by_sql]
        for got, want in zip(found, by_sql, strict=True):
            assert (got.bm25, got.covered, got.total) == pytest.approx(
                (want.bm25, want.covered, want.total), abs=1e-9
            )

    pg_terms.search(store.con, store.g, terms[:1], limit=10, memo=memo)  # one term's postings held
    same(pg_terms.search(store.con, store.g, terms, limit=len(some), only_ids=some, memo=memo))
    assert asked == [sorted(VOCABULARY[1:3])], "SQL scores the terms not held only"
    pg_terms.search(store.con, store.g, terms, limit=10, memo=memo)  # every term's postings held
    asked.clear()
    same(pg_terms.search(store.con, store.g, terms, limit=len(some), only_ids=some, memo=memo))
    assert asked == [], "no round trip"
    with store.transaction():
        store.insert_chunks(_rows(rng, 5, (5, 40), 1000), None)
    pg_terms.search(store.con, store.g, terms, limit=len(some), only_ids=some, memo=memo)
    assert asked == [sorted(VOCABULARY[:3])], "a write moved the version on: SQL again"


def test_a_query_whose_common_words_are_held_is_scanned_not_pruned(
    store: PgStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pruning costs round trips; when the process holds every posting of the query's common words and
    its other words have few, those are read and every posting scored from memory instead: the same
    top, no pruning, and the rare word's list now held too."""
    rng = random.Random(11)
    with store.transaction():
        store.insert_chunks(_rows(rng, 300, (5, 40), 0), None)
    _small_reads(monkeypatch)  # every query would be pruned
    memo = pg_memos.PostingsMemo()
    common, rare = VOCABULARY[:3], VOCABULARY[150]
    assert _df(store, rare) < 20 and _df(store, common[0]) > 100
    pruned_calls: list[int] = []
    real_top_k = pg_terms.top_k

    def spy(*args: object) -> object:
        pruned_calls.append(1)
        return real_top_k(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(pg_terms, "top_k", spy)
    monkeypatch.setattr(pg_terms, "MISSING_READ", _df(store, rare))  # the rare word's list, no more
    query = [*common, rare]
    first = pg_terms.search(store.con, store.g, query, limit=10, memo=memo)
    assert pruned_calls == [1], "nothing held: pruned"
    held = pg_terms.query_weights(store.con, store.g, common)
    assert held is not None
    pg_terms._postings(store.con, store.g, held, memo)  # as a scan of the common words keeps them
    pruned_calls.clear()
    monkeypatch.setattr(pg_terms, "MISSING_READ", 0)
    pg_terms.search(store.con, store.g, query, limit=10, memo=memo)
    assert pruned_calls == [1], "more to read than MISSING_READ: pruned"
    monkeypatch.setattr(pg_terms, "MISSING_READ", _df(store, rare))
    pruned_calls.clear()
    scanned = pg_terms.search(store.con, store.g, query, limit=10, memo=memo)
    assert pruned_calls == [], "held but for a rare word: scanned"
    full = sorted(_full(store.con, store.g, query).items(), key=lambda item: (-item[1][0], item[0]))[:10]
    want = [x for _, pair in full for x in pair]
    assert [x for h in scanned for x in (h.bm25, h.covered)] == pytest.approx(want, abs=1e-9)
    assert [x for h in first for x in (h.bm25, h.covered)] == pytest.approx(want, abs=1e-9)
    weights = pg_terms.query_weights(store.con, store.g, [rare])
    assert weights is not None
    assert memo.get((store.g, next(iter(weights.idf))), weights.version) is not None, "the rare list held"


def test_the_best_by_common_words_are_kept_and_the_answer_is_every_postings(
    store: PgStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Words with more than ``COMMON_PAST`` postings are not added up for each search: the best chunks by
    a query's common words alone are kept until a write, and queries with other rare words are scored
    around them, with the same top as scoring every posting."""
    rng = random.Random(21)
    with store.transaction():
        store.insert_chunks(_rows(rng, 400, (5, 40), 0), None)
    monkeypatch.setattr(pg_terms, "COMMON_PAST", 60)  # the Zipf head of this corpus is "common"
    built: list[int] = []
    real_of = pg_terms.CommonTop.of

    def counting(*args: object) -> object:
        built.append(1)
        return real_of(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(pg_terms.CommonTop, "of", counting)
    memo = pg_memos.PostingsMemo()
    common = VOCABULARY[:3]
    assert min(_df(store, word) for word in common) > 60
    queries = [[*common, VOCABULARY[rare]] for rare in (40, 90, 150, 220)] + [common]
    for query in queries:
        found = pg_terms.search(store.con, store.g, query, limit=10, memo=memo)
        full = sorted(_full(store.con, store.g, query).items(), key=lambda item: (-item[1][0], item[0]))[:10]
        assert [h.chunk_id for h in found] == [cid for cid, _ in full]
        want = [x for _, pair in full for x in pair]
        assert [x for h in found for x in (h.bm25, h.covered)] == pytest.approx(want, abs=1e-9)
    assert built == [1], "the common words' best built once for the five queries"
    with store.transaction():
        store.insert_chunks(_rows(rng, 5, (5, 40), 1000), None)
    pg_terms.search(store.con, store.g, queries[0], limit=10, memo=memo)
    assert built == [1, 1], "a write moved the version on: built again"
