"""Postings read behind a pruned keyword search (mnemo.index.pg_prefetch): the search answers from the
heads of its words' lists, a thread of the engine reads the words' postings into the process's memo at
the version its own snapshot sees, and the next search scans them from memory with the same answer;
after a write the held postings are of an old version, and it starts again. Nothing is asked past
``HOLD_AFTER_PRUNE``; a failed read loses nothing; closing stops the thread."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from mnemo.index import pg_terms
from mnemo.index.api import KeywordHit
from mnemo.index.pg_connect import ReaderPool
from mnemo.index.pg_indexer import PgIndexer
from mnemo.index.pg_memos import PostingsMemo
from mnemo.index.pg_prefetch import PostingsPrefetch
from tests.conftest import write_files
from tests.postgres.helpers import synced_indexer

QUERY = ["ledger", "quota", "kernel"]


@pytest.fixture
def indexer(
    tmp_path: Path, pg_dsn: str, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[PgIndexer]:
    monkeypatch.setattr(pg_terms, "SCAN_ALL_BELOW", 0)  # this small index's queries count as large:
    monkeypatch.setattr(pg_terms, "PRUNE_RAREST_SHARE", 1.0)  # pruned unless the process holds
    monkeypatch.setattr(pg_terms, "MISSING_READ", 0)  # every posting of their words
    with synced_indexer(tmp_path, pg_dsn, namespace, notes=60) as built:
        yield built


@pytest.fixture
def pruned(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """The queries the pruned top-k answered, as they were asked."""
    calls: list[tuple[str, ...]] = []
    real_top_k = pg_terms.top_k

    def spy(con: psycopg.Connection, g: int, idf: dict[str, float], *args: object) -> object:
        calls.append(tuple(sorted(idf)))
        return real_top_k(con, g, idf, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(pg_terms, "top_k", spy)
    return calls


def _top(indexer: PgIndexer, query: list[str] = QUERY) -> list[tuple[int, float, float]]:
    with indexer.reading() as reader:
        assert reader is not None
        hits: list[KeywordHit] = reader.keyword_top(query, 5)
    return [(h.chunk_id, round(h.bm25, 9), round(h.covered, 9)) for h in hits]


def _held(indexer: PgIndexer) -> bool:
    """Whether the process holds every stem of QUERY at the version the live generation is at."""
    with indexer.reading() as reader:
        assert reader is not None
        weights = pg_terms.query_weights(reader.con, reader.g, QUERY)
        assert weights is not None
        return all(indexer.postings.get((reader.g, t), weights.version) is not None for t in weights.idf)


def _prefetch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "mnemo-postings-prefetch"]


def _no_query_left_running(dsn: str) -> bool:
    """No backend still runs the held query, within 10 s: a closed connection's backend exits on its
    own time and shows its last query meanwhile (idle, not running)."""
    deadline = time.monotonic() + 10
    with psycopg.connect(dsn, autocommit=True) as con:
        while True:
            running = con.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE state = 'active' AND query LIKE 'SELECT pg_sleep(120)%'"
            ).fetchone()
            if running == (0,):
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)


def test_a_pruned_searchs_words_are_read_behind_it_and_the_next_search_scans_them(
    indexer: PgIndexer, pruned: list[tuple[str, ...]], tmp_path: Path
) -> None:
    first = _top(indexer)
    assert len(pruned) == 1 and len(first) == 5, "nothing held: pruned"
    assert indexer.prefetch.wait_idle(30) and _held(indexer), "read behind the search"
    assert _top(indexer) == first and len(pruned) == 1, "scanned from memory: the same top, not pruned"

    write_files(tmp_path, {"memory/ledgers.md": "# Ledgers\n\nledger ledger ledger quota kernel\n"})
    indexer.sync()  # a write: the held postings are of the version before it
    assert not _held(indexer)
    after = _top(indexer)
    assert len(pruned) == 2, "the new version's postings not held: pruned again"
    assert indexer.prefetch.wait_idle(30) and _held(indexer), "read again, at the new version"
    assert _top(indexer) == after and len(pruned) == 2

    indexer.close()
    assert _prefetch_threads() == [], "closing stops the thread"


def test_a_pruned_search_with_more_postings_missing_than_the_bound_asks_nothing(
    indexer: PgIndexer, pruned: list[tuple[str, ...]], monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[tuple[int, tuple[str, ...]]] = []
    monkeypatch.setattr(indexer.prefetch, "want", lambda g, stems: asked.append((g, stems)))
    _top(indexer)
    assert len(pruned) == 1 and len(asked) == 1, "within the bound: asked, with every stem lacking"
    with indexer.reading() as reader:
        assert reader is not None
        weights = pg_terms.query_weights(reader.con, reader.g, QUERY)
    assert weights is not None and asked[0] == (reader.g, tuple(sorted(weights.idf)))
    monkeypatch.setattr(pg_terms, "HOLD_AFTER_PRUNE", int(sum(weights.df.values())) - 1)
    _top(indexer)
    assert len(pruned) == 2 and len(asked) == 1, "one posting too many: pruned, nothing asked"


@pytest.mark.parametrize(
    "failure",
    [psycopg.OperationalError("server closed the connection"), RuntimeError("a bug")],
    ids=["database", "bug"],
)
def test_a_failed_read_behind_a_search_loses_nothing_and_the_next_ask_is_read(
    pg_dsn: str, indexer: PgIndexer, failure: Exception
) -> None:
    memo = PostingsMemo()
    failures = [failure]

    class FailingOnce(ReaderPool):
        @contextlib.contextmanager
        def snapshot(self) -> Iterator[psycopg.Connection]:
            if failures:
                raise failures.pop()
            with super().snapshot() as con:
                yield con

    prefetch = PostingsPrefetch(lambda: FailingOnce(pg_dsn), memo)
    store = indexer.store
    assert store is not None
    weights = pg_terms.query_weights(store.con, store.g, QUERY)
    assert weights is not None
    stems = tuple(sorted(weights.idf))
    try:
        prefetch.want(store.g, stems)
        assert prefetch.wait_idle(30) and not failures
        assert all(memo.get((store.g, t), weights.version) is None for t in stems), "the read failed"
        prefetch.want(store.g, stems)
        assert prefetch.wait_idle(30)
        held = {t: memo.get((store.g, t), weights.version) for t in stems}
        expected = pg_terms._read_postings(store.con, store.g, list(stems), weights.avgdl)
        for term, postings in held.items():
            assert postings is not None
            assert postings[0].tolist() == expected[term][0].tolist()
            assert postings[1].tolist() == pytest.approx(expected[term][1].tolist(), abs=1e-12)
    finally:
        prefetch.close()
    assert _prefetch_threads() == []


def test_closing_cancels_a_read_whose_query_had_not_reached_the_server(
    pg_dsn: str, indexer: PgIndexer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race CI met: close() cancelled between the thread taking its connection and sending the
    query, so the cancel hit nothing and close() waited out its timeout for a long read."""
    started = threading.Event()

    def late(con: psycopg.Connection, *_: object) -> int:
        started.set()
        time.sleep(0.5)  # the first cancel comes now, before the query
        con.execute("SELECT pg_sleep(120)")
        return 0

    monkeypatch.setattr(pg_terms, "hold_postings", late)
    prefetch = PostingsPrefetch(lambda: ReaderPool(pg_dsn), PostingsMemo())
    prefetch.want(1, ("ledger",))
    assert started.wait(30)
    prefetch.close(timeout=10)
    assert _prefetch_threads() == [], "the read was cancelled once its query had started"
    assert _no_query_left_running(pg_dsn), "no query left running on the server"


def test_closing_cancels_the_read_under_way(
    pg_dsn: str, indexer: PgIndexer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A one-shot command that searched once must not wait for a read behind it to exit."""
    started = threading.Event()

    def slow(con: psycopg.Connection, *_: object) -> int:
        started.set()
        con.execute("SELECT pg_sleep(120)")
        return 0

    monkeypatch.setattr(pg_terms, "hold_postings", slow)
    prefetch = PostingsPrefetch(lambda: ReaderPool(pg_dsn), PostingsMemo())
    prefetch.want(1, ("ledger",))
    prefetch.want(1, ("quota",))  # waiting behind it: dropped
    assert started.wait(30)
    prefetch.close(timeout=30)
    assert _prefetch_threads() == [], "the read was cancelled, not waited for"
    assert prefetch.wait_idle(0), "nothing left to do"
    assert _no_query_left_running(pg_dsn), "no query left running on the server"
