"""BM25 over the fts tables: incremental add/remove equals a fresh build; score normalisation."""

from __future__ import annotations

import collections
import math
import random
from pathlib import Path

import numpy as np
import pytest

from mnemo.index import fts, fts_build
from mnemo.index.duck import load_extension
from mnemo.index.duckdb_native import duckdb
from mnemo.index.store import ChunkRow, ChunkStore, IndexIdentity
from mnemo.search.ranking import text_score
from mnemo.text.terms import query_terms, terms_string

IDENTITY = IndexIdentity("none", "none", 0, "test")

# Words with shared porter stems (run/running/runs), CJK bigrams and digits.
VOCAB = [
    "run",
    "running",
    "runs",
    "runner",
    "database",
    "databases",
    "postgres",
    "index",
    "indexing",
    "indexed",
    "search",
    "searching",
    "memory",
    "memories",
    "note",
    "notes",
    "deploy",
    "deployed",
    "服务器",
    "数据库",
    "设计",
    "评审",
    "api",
    "v2",
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "eta",
    "theta",
    "kappa",
    "lambda",
]


def _row(key: str, text: str) -> ChunkRow:
    return ChunkRow(
        key, f"memory/{key}.md", "memory", "evergreen", None, 1, 1, "", text, terms_string(text), key
    )


def _random_text(rng: random.Random) -> str:
    return " ".join(rng.choice(VOCAB) for _ in range(rng.randint(0, 30)))


def _scores(store: ChunkStore, terms: list[str]) -> dict[str, tuple[float, float, float]]:
    keys = dict(store.con.execute("SELECT id, key FROM chunks").fetchall())
    return {keys[cid]: (s, c, t) for cid, s, c, t in fts.search(store.con, terms, limit=10_000)}


def _term_counts(con: duckdb.DuckDBPyConnection, s: str) -> list[tuple[str, str, int, int]]:
    """(chunk key, term, occurrences, chunk length): from our postings, or from the extension's
    ``terms`` (a row per occurrence) once ``create_fts_index`` has replaced them."""
    ours = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE schema_name = ? AND table_name = 'postings'", [s]
    ).fetchone()
    if ours == (1,):
        sql = (
            f"SELECT c.key, k.term, p.tf, p.len FROM {s}.postings p JOIN chunks c ON c.id = p.name "
            f"JOIN {s}.dict k ON k.termid = p.termid"
        )
    else:
        sql = (
            f"SELECT c.key, k.term, count(*), any_value(d.len) FROM {s}.terms t "
            f"JOIN {s}.docs d ON d.docid = t.docid JOIN chunks c ON c.id = d.name "
            f"JOIN {s}.dict k ON k.termid = t.termid GROUP BY ALL"
        )
    return [(key, term, int(tf), int(n)) for key, term, tf, n in con.execute(sql).fetchall()]


def _fts_tables(store: ChunkStore) -> dict[str, object]:
    con = store.con
    s = fts.SCHEMA
    return {
        "dict": sorted(con.execute(f"SELECT term, df FROM {s}.dict WHERE df > 0").fetchall()),
        "docs": sorted(
            con.execute(f"SELECT c.key, d.len FROM {s}.docs d JOIN chunks c ON c.id = d.name").fetchall()
        ),
        "terms": sorted(_term_counts(con, s)),
        "stats": con.execute(f"SELECT num_docs, round(coalesce(avgdl, 0), 9) FROM {s}.stats").fetchall(),
    }


def _fresh(path: Path, rows: list[ChunkRow], store: ChunkStore | None = None) -> ChunkStore:
    """A store whose fts tables come from one ``create_fts_index`` over ``rows`` (reusing ``store``)."""
    if store is None:
        store = ChunkStore.create(path, IDENTITY)
    store.con.execute("DELETE FROM chunks")
    store.insert_chunks(rows, None, live=False)
    fts.rebuild(store.con)
    return store


@pytest.mark.parametrize("seed", [1, 2])
def test_incremental_equals_fresh_build(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    live = ChunkStore.create(tmp_path / "live.duckdb", IDENTITY)
    fresh = ChunkStore.create(tmp_path / "fresh.duckdb", IDENTITY)
    current: dict[str, ChunkRow] = {}
    serial = 0
    try:
        for round_no in range(5):
            # Add a batch, then remove a random part of everything (sometimes nothing, once everything).
            batch = []
            for _ in range(rng.randint(1, 12)):
                serial += 1
                batch.append(_row(f"c{serial}", _random_text(rng)))
            with live.transaction():
                live.insert_chunks(batch, None, live=True)
            current.update({r.key: r for r in batch})
            if round_no == 2:
                doomed = list(current)
            else:
                doomed = [k for k in current if rng.random() < 0.35]
            ids = [
                cid for cid, key in live.con.execute("SELECT id, key FROM chunks").fetchall() if key in doomed
            ]
            with live.transaction():
                live.delete_chunks(ids)
            for k in doomed:
                del current[k]

            _fresh(tmp_path, list(current.values()), fresh)
            assert _fts_tables(live) == _fts_tables(fresh)
            for _ in range(5):
                terms = query_terms(" ".join(rng.sample(VOCAB, rng.randint(1, 4))))
                got, want = _scores(live, terms), _scores(fresh, terms)
                assert got.keys() == want.keys()
                for key, expected in want.items():
                    assert got[key] == pytest.approx(expected, rel=1e-9, abs=1e-12)
    finally:
        live.con.close()
        fresh.con.close()


def test_empty_and_unknown_queries(tmp_path: Path) -> None:
    store = _fresh(tmp_path / "x.duckdb", [_row("a", "alpha beta")])
    try:
        assert fts.search(store.con, [], limit=10) == []
        assert fts.search(store.con, ["nothingmatches"], limit=10) == []
        assert fts.search(store.con, ["alpha"], limit=10, only_ids=[]) == []
    finally:
        store.con.close()


@pytest.fixture
def corpus(tmp_path: Path) -> ChunkStore:
    filler = [_row(f"f{i}", f"common filler words about nothing number{i} alpha") for i in range(20)]
    rows = [
        _row("both", "postgres replication common"),
        _row("one", "postgres backup common"),
        _row("rare", "zanzibar common filler"),
        _row("frequent", "alpha common filler"),
        *filler,
    ]
    store = _fresh(tmp_path / "c.duckdb", rows)
    yield store
    store.con.close()


def _text_scores(store: ChunkStore, query: str) -> dict[str, float]:
    return {k: text_score(*v) for k, v in _scores(store, query_terms(query)).items()}


def test_more_query_terms_score_higher(corpus: ChunkStore) -> None:
    scores = _text_scores(corpus, "postgres replication")
    assert scores["both"] > scores["one"] > 0


def test_rarer_term_scores_higher(corpus: ChunkStore) -> None:
    scores = _text_scores(corpus, "zanzibar alpha")
    assert scores["rare"] > scores["frequent"]


def test_scores_in_unit_interval_and_not_all_one(corpus: ChunkStore) -> None:
    for query in ["common", "postgres replication", "zanzibar alpha", "common filler alpha number3"]:
        scores = _text_scores(corpus, query)
        assert scores
        assert all(0.0 < s <= 1.0 for s in scores.values()), scores
        # The reference system maps every hit to 1.0; here a best hit still reflects match strength.
        assert any(s < 1.0 for s in scores.values())
    assert max(_text_scores(corpus, "common").values()) < 1.0
    assert len(set(_text_scores(corpus, "common filler alpha number3").values())) > 2


def test_a_query_term_no_chunk_has_counts_at_the_known_terms_mean_idf(corpus: ChunkStore) -> None:
    """A chunk matching one word of a longer question covers little of it (the IDF mass counts every
    query term), but a word the notes never use weighs like the typical known one, not the rarest."""
    docs = 24
    postgres, zanzibar = fts.bm25_idf(docs, 2), fts.bm25_idf(docs, 1)
    weights = fts.query_weights(corpus.con, ["postgres", "zanzibar", "qwxyzunknown", "postgres"])
    assert weights is not None and sorted(weights.idf.values()) == pytest.approx(sorted([postgres, zanzibar]))
    assert weights.total == pytest.approx(postgres + zanzibar + (postgres + zanzibar) / 2)
    assert fts.query_weights(corpus.con, ["qwxyzunknown", "nothingelse"]) is None


def test_or_semantics(corpus: ChunkStore) -> None:
    # A chunk matching one of two query terms is still a hit.
    scores = _text_scores(corpus, "replication zanzibar")
    assert {"both", "rare"} <= scores.keys()


EXTENSION_BUILD = (
    "PRAGMA create_fts_index('chunks', 'id', 'terms', stemmer = 'porter', stopwords = 'none', "
    "ignore = '\\s+', strip_accents = 0, lower = 0, overwrite = 1)"
)
"""The extension's own build of the tables mnemo makes and fills itself (mnemo never loads it)."""


def _extension_build(store: ChunkStore) -> None:
    """The extension's own index over ``chunks``, with its ``terms`` counted into our ``postings`` (so
    that :func:`mnemo.index.fts.search` reads what the extension found)."""
    load_extension(store.con, "fts")
    store.con.execute(EXTENSION_BUILD)
    s = fts.SCHEMA
    store.con.execute(
        f"CREATE TABLE {s}.postings AS SELECT t.termid, d.name, count(*)::INTEGER AS tf, "
        f"any_value(d.len)::INTEGER AS len FROM {s}.terms t JOIN {s}.docs d ON d.docid = t.docid GROUP BY ALL"
    )


def _extension_tables(store: ChunkStore) -> dict[str, object]:
    """:func:`_fts_tables` of ``store`` after the extension's own ``create_fts_index`` (then undone)."""
    store.con.execute("BEGIN TRANSACTION")
    try:
        _extension_build(store)
        return _fts_tables(store)
    finally:
        store.con.execute("ROLLBACK")


def _bm25_by_key(store: ChunkStore, query: str) -> dict[str, float]:
    """Scores from the extension's own ``match_bm25`` macro, which reads the fts tables."""
    rows = store.con.execute(
        "SELECT key, s FROM (SELECT key, fts_main_chunks.match_bm25(id, ?) AS s FROM chunks) "
        "WHERE s IS NOT NULL",
        [query],
    ).fetchall()
    return dict(rows)


MIXED = [
    "Running runners run; the runner's runs",
    "",
    "!!! ... ???",
    "服务器集群部署 and 数据库 设计评审 服务器",
    "memory_search getHTTPResponse2 CamelCase __init__ a--b",
    "Привет мир café CAFÉ Straße ＡＰＩ ﬁle x²",
    "مَرْحَبًا بالعالم हिन्दी 𝒜lpha 𠀀𠀁",
    "generalization generalize general generally",
]


@pytest.mark.parametrize("seed", [3, 4])
def test_rebuild_equals_the_extensions_build(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    rows = [_row(f"m{i}", text) for i, text in enumerate(MIXED)]
    rows += [_row(f"r{i}", _random_text(rng)) for i in range(40)]
    store = _fresh(tmp_path / "x.duckdb", rows)
    try:
        # Stored by term (a search's few terms then sit in few row groups), each term's documents in order.
        stored = store.con.execute(f"SELECT termid, name FROM {fts.SCHEMA}.postings").fetchall()
        assert stored == sorted(stored) and len({t for t, _ in stored}) > 40
        assert _fts_tables(store) == _extension_tables(store)
        for query in ["run", "服务器", "café", "memory search", "general", "𝒜lpha"]:
            ours = _scores(store, query_terms(query))
            store.con.execute("BEGIN TRANSACTION")
            _extension_build(store)
            theirs = _scores(store, query_terms(query))  # the same scoring over the extension's tables
            own = _bm25_by_key(store, " ".join(query_terms(query)))  # its own macro too
            store.con.execute("ROLLBACK")
            assert ours and ours.keys() == theirs.keys() == own.keys(), query
            for key, score in theirs.items():
                assert ours[key] == pytest.approx(score, rel=1e-12), (query, key)
                # the extension's macro takes the IDF's `log`, which is base 10 in DuckDB; mnemo's
                # (both engines') is natural: every score is ln 10 times the macro's, the order the same
                assert ours[key][0] == pytest.approx(own[key] * math.log(10), rel=1e-9), (query, key)
    finally:
        store.con.close()


def test_rebuild_replaces_what_was_there(tmp_path: Path) -> None:
    store = _fresh(tmp_path / "x.duckdb", [_row("a", "alpha beta"), _row("b", "beta gamma")])
    try:
        with store.transaction():
            store.insert_chunks([_row("c", "gamma delta")], None, live=True)
        before = _fts_tables(store)
        store.con.execute(f"DELETE FROM {fts.SCHEMA}.docs")  # damage, as a crash might leave it
        fts.rebuild(store.con)
        assert _fts_tables(store) == before == _extension_tables(store)
        assert len(before["docs"]) == 3  # type: ignore[arg-type]
    finally:
        store.con.close()


def test_rebuild_of_no_chunks(tmp_path: Path) -> None:
    store = _fresh(tmp_path / "x.duckdb", [])
    try:
        assert _fts_tables(store) == _extension_tables(store)
        assert fts.search(store.con, ["alpha"], limit=10) == []
    finally:
        store.con.close()


@pytest.mark.parametrize("n_terms", [1, 300, 70_000, 3_000_000])
def test_document_frequencies_count_each_document_once(n_terms: int) -> None:
    rng = np.random.default_rng(n_terms)
    doc_ids = np.sort(rng.integers(0, 500, 20_000)).astype(np.int32)
    term_ids = rng.integers(0, n_terms, 20_000).astype(np.int32)
    want = np.zeros(n_terms, dtype=np.int64)
    for term, _ in set(zip(term_ids.tolist(), doc_ids.tolist(), strict=True)):
        want[term] += 1
    docs, terms = fts_build._by_term(doc_ids, term_ids, n_terms)
    assert sorted(zip(terms.tolist(), docs.tolist(), strict=True)) == list(
        zip(terms.tolist(), docs.tolist(), strict=True)
    )
    assert sorted(zip(term_ids.tolist(), doc_ids.tolist(), strict=True)) == list(
        zip(terms.tolist(), docs.tolist(), strict=True)
    )
    pair_docs, pair_terms, counts = fts_build._counted(docs, terms)
    assert np.array_equal(np.bincount(pair_terms, minlength=n_terms), want)
    occurrences = collections.Counter(zip(term_ids.tolist(), doc_ids.tolist(), strict=True))
    assert dict(
        zip(zip(pair_terms.tolist(), pair_docs.tolist(), strict=True), counts.tolist(), strict=True)
    ) == (occurrences)


def test_a_build_never_loads_the_extension_and_a_writers_first_edit_does(tmp_path: Path) -> None:
    def loaded(store: ChunkStore) -> bool:
        rows = store.con.execute(
            "SELECT loaded FROM duckdb_extensions() WHERE extension_name = 'fts'"
        ).fetchall()
        return rows == [(True,)]

    store = _fresh(tmp_path / "x.duckdb", [_row("a", "alpha beta"), _row("b", "running runs")])
    try:
        assert not loaded(store)  # created, filled and searched without it
        assert set(_scores(store, ["run"])) == {"b"}
        with store.transaction():
            store.insert_chunks([_row("c", "running gamma")], None, live=True)
        assert loaded(store)  # `stem` in SQL for the edit's tokens
        assert set(_scores(store, ["run"])) == {"b", "c"}
    finally:
        store.con.close()


def test_rebuild_without_an_fts_schema_makes_it_again(tmp_path: Path) -> None:
    store = _fresh(tmp_path / "x.duckdb", [_row("a", "alpha beta"), _row("b", "running runs")])
    try:
        want = _fts_tables(store)
        store.con.execute(f"DROP SCHEMA {fts.SCHEMA} CASCADE")
        fts.rebuild(store.con)
        assert _fts_tables(store) == want
        assert set(_scores(store, ["run"])) == {"b"}
    finally:
        store.con.close()
