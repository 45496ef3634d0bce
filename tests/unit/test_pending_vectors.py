"""Searchable before the vectors are done: the keyword side is committed first, vectors follow in batches.

A slow model is simulated by an embedder behind a gate: syncs return while it is closed, searches answer
by keyword, status says how far embedding is; batches are committed, so a restart resumes without
embedding a committed chunk again; cancelling stops embedding between two texts.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest
from tests.conftest import HashEmbedder

from mnemo.cli.main import main
from mnemo.config import load_settings
from mnemo.index import pending
from mnemo.index.duck import connect
from mnemo.memory.service import MemoryService
from mnemo.workspace.layout import Workspace

GATE_TIMEOUT_S = 30.0


@pytest.fixture(autouse=True)
def _hnsw_at_any_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """The HNSW index at any size (as a large workspace has one): these tests follow its life while vectors
    are pending; tests/unit/test_exact_vectors.py covers the in-memory search of a small workspace."""
    from mnemo.index import pending as pending_module

    monkeypatch.setattr(pending_module, "EXACT_SEARCH_BYTES", 0)


class GatedEmbedder(HashEmbedder):
    """HashEmbedder whose chunk embeddings wait for ``gate`` (queries too); ``allow`` lets n texts through."""

    def __init__(self) -> None:
        super().__init__(dims=32)
        self.gate = threading.Event()
        self.passes = threading.Semaphore(0)
        self.calls = 0
        self.cancel: threading.Event | None = None
        """When set, the text in hand is finished (as a real model finishes its text) instead of waiting."""

    def allow(self, n: int) -> None:
        for _ in range(n):
            self.passes.release()

    def embed(self, texts):  # type: ignore[no-untyped-def]
        self.calls += 1
        deadline = time.monotonic() + GATE_TIMEOUT_S
        while not self.gate.is_set() and not self.passes.acquire(blocking=False):
            if self.cancel is not None and self.cancel.is_set():
                break
            assert time.monotonic() < deadline, "the test never opened the gate"
            self.gate.wait(0.02)
        return super().embed(texts)


def notes(n: int) -> dict[str, str]:
    files = {"MEMORY.md": "# Memory\n\n- The billing service uses PostgreSQL.\n"}
    for i in range(n):
        files[f"memory/2026-01-{i % 28 + 1:02d}-n{i}.md"] = (
            f"# Note {i}\n\nThis note is about item{i}word and the lighthouse.\n"
        )
    files["memory/gardening.md"] = "# Gardening\n\nTomatoes need full sun and zucchini needs space.\n"
    return files


def service(root: Path, embedder: HashEmbedder) -> MemoryService:
    settings, problems = load_settings(root)
    ws = Workspace(root, ignore=[*settings.index.ignore, settings.index.dir])
    return MemoryService(ws, settings, embedder, problems)


def sync_in_thread(memory: MemoryService, **kwargs: object):  # type: ignore[no-untyped-def]
    """Run a sync that must return while the model is blocked (fails instead of hanging)."""
    out: dict[str, object] = {}
    thread = threading.Thread(target=lambda: out.setdefault("report", memory.sync(**kwargs)), daemon=True)
    thread.start()
    thread.join(20)
    assert not thread.is_alive(), "the sync waited for the model"
    return out["report"]


def test_keyword_search_answers_before_any_vector(make_workspace) -> None:  # type: ignore[no-untyped-def]
    root = make_workspace(notes(6))
    embedder = GatedEmbedder()
    memory = service(root, embedder)
    try:
        memory.embed_in_background()
        report = sync_in_thread(memory)
        assert report.rebuilt and report.chunks_pending == report.files_seen == 8
        outcome = memory.search("PostgreSQL")
        assert outcome.results[0].path == "MEMORY.md"
        assert outcome.mode == "keyword"  # no vector to compare a query vector with: the model is not asked
        assert any("0 of 8 chunks embedded" in note for note in outcome.notes), outcome.notes
        status = memory.status()
        assert status.mode == "hybrid" and status.vectors.embedded == 0
        assert status.vectors.chunks == 8 and status.vectors.embedding is True
        assert any("embedding continues in the background" in note for note in status.notes)

        embedder.allow(3)  # MEMORY.md and the two newest notes
        seen: list[tuple[int, int]] = []
        embedder.gate.set()
        assert memory.wait_for_vectors(lambda e, t: seen.append((e, t)))
        assert seen[-1] == (8, 8)
        status = memory.status()
        assert (status.vectors.embedded, status.vectors.chunks, status.vectors.embedding) == (8, 8, False)
        assert status.notes == []
        outcome = memory.search("PostgreSQL")
        assert outcome.mode == "hybrid" and outcome.results[0].parts.vector is not None
        assert not any("embedded" in note for note in outcome.notes)
    finally:
        embedder.gate.set()
        memory.close()


def test_newest_and_evergreen_notes_are_embedded_first(make_workspace) -> None:  # type: ignore[no-untyped-def]
    root = make_workspace(
        {
            "memory/topic.md": "# Topic\n\nundated topic text\n",
            "memory/2025-01-01.md": "# Old\n\nold dated text\n",
            "MEMORY.md": "# Memory\n\nevergreen text\n",
            "memory/2026-05-01.md": "# New\n\nnew dated text\n",
        }
    )
    embedder = HashEmbedder()
    memory = service(root, embedder)
    try:
        report = memory.sync(vectors="later")
        assert report.chunks_pending == 4 and embedder.embedded == []
        memory.sync()  # "wait": embeds what is pending, in priority order
        order = [text.split("\n")[-1] for text in embedder.embedded]
        assert order == ["evergreen text", "new dated text", "old dated text", "undated topic text"]
    finally:
        memory.close()


def test_partial_vectors_rank_pending_chunks_by_their_keyword_score(make_workspace) -> None:  # type: ignore[no-untyped-def]
    root = make_workspace(notes(4))
    embedder = HashEmbedder(dims=32)
    memory = service(root, embedder)
    try:
        memory.sync(vectors="later")
        step = pending.embed_step(memory.indexer.writable_store, embedder, limit=1)
        assert step is not None and (step.filled, step.pending, step.total) == (1, 5, 6)
        outcome = memory.search("zucchini")  # gardening.md: undated, so still pending
        assert outcome.mode == "hybrid"
        assert any("hybrid, 1 of 6 chunks embedded" in note for note in outcome.notes), outcome.notes
        top = outcome.results[0]
        assert top.path == "memory/gardening.md" and top.parts.vector is None
        # Its score is its keyword score, as in keyword mode: not pushed down for the missing vector part.
        assert top.parts.score == pytest.approx(top.parts.text, abs=0.06)
        embedded = memory.search("PostgreSQL").results[0]  # MEMORY.md was embedded first
        assert embedded.path == "MEMORY.md" and embedded.parts.vector is not None
    finally:
        memory.close()


@pytest.mark.parametrize("defer_from", [pending.DEFER_INDEX_MIN, 10])
def test_restart_resumes_without_embedding_committed_batches_again(
    make_workspace, consistent, monkeypatch, defer_from
) -> None:  # type: ignore[no-untyped-def]
    """(``defer_from=10``: the process stops while the HNSW index is dropped; the next builds it.)"""
    monkeypatch.setattr(pending, "DEFER_INDEX_MIN", defer_from)
    root = make_workspace(notes(pending.EMBED_BATCH + 20))
    first_model = HashEmbedder(dims=32)
    first = service(root, first_model)
    report = first.sync(vectors="later")
    total = report.chunks_pending
    assert total == pending.EMBED_BATCH + 22
    step = first.indexer.embed_step()  # one committed batch, then the process "stops"
    assert step is not None and step.filled == pending.EMBED_BATCH
    first.close()

    second_model = HashEmbedder(dims=32)
    second = service(root, second_model)
    try:
        report = second.sync()
        assert report.chunks_embedded == total - pending.EMBED_BATCH and report.chunks_pending == 0
        assert not set(first_model.embedded) & set(second_model.embedded)
        assert second.vector_counts() == (total, total)
        consistent(second.indexer.store.con)
        assert pending.has_vector_index(second.indexer.store.con)
    finally:
        second.close()


def test_many_pending_vectors_are_filled_without_the_hnsw_index_then_it_is_built(  # type: ignore[no-untyped-def]
    make_workspace, consistent, monkeypatch
) -> None:
    """With the index live, every checkpoint wrote the whole index again and each batch rewrote its rows:
    a new workspace's file grew to 3x its compacted size. Many pending vectors are filled in place with
    the index dropped; the batch that fills the last builds it once."""
    from mnemo.index import repair

    monkeypatch.setattr(pending, "DEFER_INDEX_MIN", 10)
    root = make_workspace(notes(pending.EMBED_BATCH + 20))
    memory = service(root, HashEmbedder(dims=32))
    try:
        total = memory.sync(vectors="later").chunks_pending
        con = memory.indexer.store.con
        assert not pending.has_vector_index(con)  # the build left it for the last vector
        assert repair.symptoms(con, 32) == []  # waiting for vectors is not damage
        step = memory.indexer.embed_step()
        assert step is not None and step.filled == pending.EMBED_BATCH and step.pending == total - step.filled
        assert not pending.has_vector_index(con)
        found = memory.search("item3word lighthouse")  # an exact scan of the vectors there are
        assert found.results and found.results[0].path == "memory/2026-01-04-n3.md"
        while memory.indexer.embed_step() is not None:  # (by hand: the service's counts are not told)
            pass
        counts = memory.indexer.store.counts()
        assert (counts.embedded, counts.pending) == (total, 0)
        assert pending.has_vector_index(con) and repair.symptoms(con, 32) == []
        consistent(con)
        probe = "[" + ",".join("0.1" for _ in range(32)) + "]::FLOAT[32]"
        query = f"SELECT id FROM chunks ORDER BY array_cosine_distance(embedding, {probe}) LIMIT 5"
        assert "HNSW" in con.execute("EXPLAIN " + query).fetchall()[0][1].upper()
        assert len(con.execute(query).fetchall()) == 5
    finally:
        memory.close()


def test_cancel_stops_between_texts_and_the_next_wake_resumes(make_workspace) -> None:  # type: ignore[no-untyped-def]
    root = make_workspace(notes(10))
    embedder = GatedEmbedder()
    memory = service(root, embedder)
    cancel = threading.Event()
    try:
        embedder.cancel = cancel
        memory.embed_in_background(cancel)
        sync_in_thread(memory)
        embedder.allow(2)
        cancel.set()
        assert memory.vectors.thread.wait_idle(10), "embedding did not stop after cancel"
        embedded, total = memory.vector_counts()
        # what was embedded before the cancel is committed; the text in hand then is finished
        assert total == 12 and embedded <= 3
        assert memory.status().vectors.embedding is False
        cancel.clear()
        embedder.gate.set()
        sync_in_thread(memory)  # the next sync (a restart's, a re-index) wakes it again
        assert memory.wait_for_vectors()
        assert memory.vector_counts() == (12, 12)
    finally:
        embedder.gate.set()
        memory.close()


def test_close_ends_the_embedding_thread_promptly(make_workspace) -> None:  # type: ignore[no-untyped-def]
    root = make_workspace(notes(10))
    embedder = GatedEmbedder()
    memory = service(root, embedder)
    memory.embed_in_background()
    sync_in_thread(memory)
    embedder.allow(1)
    closer = threading.Thread(target=memory.close, daemon=True)
    closer.start()
    embedder.gate.set()  # the text in hand finishes; no further text is started
    closer.join(10)
    assert not closer.is_alive()
    assert embedder.calls <= 3


def test_hnsw_index_skips_pending_rows_and_takes_filled_ones(make_workspace, consistent) -> None:  # type: ignore[no-untyped-def]
    root = make_workspace(notes(3))
    embedder = HashEmbedder(dims=32)
    memory = service(root, embedder)
    memory.sync(vectors="later")
    memory.close()
    path = root / ".mnemo" / "index.duckdb"
    probe = embedder.embed(["PostgreSQL"])[0]
    literal = "[" + ",".join(format(float(x), ".9g") for x in probe) + "]::FLOAT[32]"
    query = f"SELECT id FROM chunks ORDER BY array_cosine_distance(embedding, {literal}) LIMIT 10"
    con = connect(path)
    try:
        assert con.execute(query).fetchall() == []  # the HNSW index holds no pending (NULL) vector
    finally:
        con.close()
    again = service(root, HashEmbedder(dims=32))
    try:
        again.sync()
        con = again.indexer.store.con
        assert len(con.execute(query).fetchall()) == 5
        consistent(con)
        plan = con.execute("EXPLAIN " + query).fetchall()[0][1]
        assert "HNSW" in plan.upper()
    finally:
        again.close()
    assert not (root / ".mnemo" / "index.duckdb.wal").exists()


def test_cli_index_no_wait_then_status_and_search(make_workspace, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    import mnemo.services

    root = make_workspace(notes(3))
    monkeypatch.setattr(mnemo.services, "build_embedder", lambda _settings: HashEmbedder(dims=32))
    assert main(["index", "--no-wait", "-w", str(root)]) == 0
    out = capsys.readouterr().out
    assert "searchable after" in out and "5 chunk(s) wait for vectors" in out
    assert main(["status", "-w", str(root)]) == 0
    assert "hybrid, 0 of 5 chunks embedded" in capsys.readouterr().out
    assert main(["search", "--no-sync", "-w", str(root), "PostgreSQL"]) == 0
    out = capsys.readouterr().out
    assert "MEMORY.md" in out and "run `mnemo index` to embed them" in out
    assert main(["index", "--wait", "-w", str(root)]) == 0
    assert "embedded 5 chunk(s)" in capsys.readouterr().out
    assert main(["status", "-w", str(root)]) == 0
    out = capsys.readouterr().out
    assert "mode       hybrid\n" in out


def test_vectors_for_leaves_unknown_texts_pending(make_workspace) -> None:  # type: ignore[no-untyped-def]
    root = make_workspace({"MEMORY.md": "# M\n\nx\n"})
    memory = service(root, HashEmbedder(dims=8))
    try:
        memory.sync()
        store = memory.indexer.store
        known = store.con.execute("SELECT heading, text FROM chunks").fetchone()
        text = f"{known[0]}\n{known[1]}" if known[0] else known[1]
        found = pending.vectors_for(store, [text, "never seen"], None)
        assert found.pending == [False, True] and found.cached == 1 and found.embedded == 0
        assert np.count_nonzero(found.matrix[1]) == 0
    finally:
        memory.close()


def test_listeners_hear_when_background_embedding_has_caught_up(make_workspace) -> None:  # type: ignore[no-untyped-def]
    # Editor diagnostics that need vectors (near-duplicates) are recomputed then.
    root = make_workspace(notes(3))
    embedder = GatedEmbedder()
    memory = service(root, embedder)
    caught_up = threading.Event()
    counts: list[tuple[int, int]] = []
    memory.on_vectors_ready(lambda: (counts.append(memory.vector_counts()), caught_up.set()))
    try:
        memory.embed_in_background()
        sync_in_thread(memory)
        assert not caught_up.wait(0.3)  # the model is blocked: nothing is ready yet
        embedder.gate.set()
        assert caught_up.wait(GATE_TIMEOUT_S)
        assert counts[-1] == (5, 5)
        caught_up.clear()
        (root / "memory" / "new.md").write_text("# New\n\nA later note about kites.\n", encoding="utf-8")
        memory.sync()
        assert caught_up.wait(GATE_TIMEOUT_S)  # again for the chunks a later sync left pending
        assert counts[-1] == (6, 6)
    finally:
        embedder.gate.set()
        memory.close()


def test_read_ahead_batches_keep_the_order_and_see_new_and_deleted_chunks(tmp_path: Path) -> None:
    """The writer reads pending chunks ahead (one ordered scan for several batches): batches still come
    in priority order, a chunk inserted meanwhile that comes first is next, and a deleted one is never
    handed out."""
    from mnemo.index.store import ChunkRow, ChunkStore, IndexIdentity

    def row(key: str, path: str, day: str | None) -> ChunkRow:
        return ChunkRow(key, path, "memory", "daily" if day else "evergreen", day, 1, 1, "", key, key, key)

    store = ChunkStore.create(tmp_path / "index.duckdb.building", IndexIdentity("test", "m", 4, "c"))
    try:
        rows = [row(f"d{i:02d}", f"memory/2026-01-{i + 1:02d}.md", f"2026-01-{i + 1:02d}") for i in range(20)]
        store.insert_chunks(rows, np.zeros((20, 4), np.float32), live=False, pending=[True] * 20)
        store.finish_indexes()
        newest_first = [f"d{i:02d}" for i in range(19, -1, -1)]
        assert [c.key for c in store.pending_batch(3)] == newest_first[:3]
        assert [c.key for c in store.pending_batch(3)] == newest_first[3:6]  # from what was read ahead
        with store.transaction():  # MEMORY.md comes before any daily note; d13 goes away
            store.insert_chunks(
                [row("m", "MEMORY.md", None)], np.zeros((1, 4), np.float32), live=True, pending=[True]
            )
            store.delete_chunks(
                [c for (c,) in store.con.execute("SELECT id FROM chunks WHERE key = 'd13'").fetchall()]
            )
        # (the six handed out above were not filled: they are still pending, and come again in order)
        assert [c.key for c in store.pending_batch(4)] == ["m", "d19", "d18", "d17"]
        assert "d13" not in [c.key for c in store.pending_batch(30)]
    finally:
        store.con.close()


def test_the_cache_is_looked_up_once_a_read_ahead_and_a_repeated_text_embedded_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The embedding cache has no index: its lookup was half of a fill's time at 100,000 notes. It is
    read with the pending chunks, for READ_AHEAD batches at once; a text cached by one batch serves a
    later batch with the same text; a rollback forgets what it had remembered."""
    from mnemo.index.store import ChunkRow, ChunkStore, IndexIdentity

    texts = [f"text {i % 12}" for i in range(60)]  # 12 texts, each 5 times
    store = ChunkStore.create(tmp_path / "index.duckdb.building", IndexIdentity("hash", "m", 16, "c"))
    try:
        rows = [ChunkRow(f"k{i:02d}", f"memory/n{i:02d}.md", "memory", "evergreen", None, 1, 1, "", t, t, f"h{i}")
                for i, t in enumerate(texts)]  # fmt: skip
        store.insert_chunks(rows, np.zeros((60, 16), np.float32), live=False, pending=[True] * 60)
        store.finish_indexes()
        # filled where the index is used, as after a build (filled on the building file's own
        # single-threaded connection instead, DuckDB's vss crashed at this test's 11th commit)
        store.swap_into(tmp_path / "index.duckdb")
        embedder = HashEmbedder(dims=16)
        known = {pending.PendingChunk(0, "", "text 0").digest: embedder.embed(["text 0"])[0]}
        with store.transaction():
            store.cache_embeddings(known)  # one text cached before the fill
        lookups: list[int] = []
        real = store.cache_lookup
        monkeypatch.setattr(store, "cache_lookup", lambda hashes: lookups.append(len(hashes)) or real(hashes))
        embedded: list[str] = []
        original = embedder.embed
        monkeypatch.setattr(embedder, "embed", lambda batch: embedded.extend(batch) or original(batch))
        monkeypatch.setattr(pending, "READ_AHEAD", 4)
        steps = 0
        while pending.embed_step(lambda: store, embedder, limit=3) is not None:
            steps += 1
        assert steps == 20
        assert len(lookups) == 5, "one lookup for each read-ahead of 4 batches of 3, not one a batch"
        assert sorted(embedded) == sorted({t for t in texts if t != "text 0"}), "each new text once"
        got = dict(store.con.execute("SELECT text, embedding FROM chunks").fetchall())
        for text in set(texts):
            assert np.allclose(got[text], original([text])[0], atol=1e-6)
        assert store.con.execute("SELECT count(*) FROM chunks WHERE embedding IS NULL").fetchone() == (0,)

        store._read_ahead.take(store.con, 1, store.cache_lookup)  # nothing pending: an empty read-ahead
        digest = pending.PendingChunk(0, "", "text 1").digest
        store._read_ahead._digests.add(digest)
        with pytest.raises(RuntimeError), store.transaction():
            store.cache_embeddings({digest: np.ones(16, np.float32)})
            raise RuntimeError("rolled back")
        assert store._read_ahead.cached([digest]) is None, "a rollback drops what was remembered"
    finally:
        store.con.close()


def test_the_embedding_cache_answers_any_key_written_into_its_query(
    tmp_path: Path,
) -> None:
    from mnemo.index.store import ChunkStore, IndexIdentity

    store = ChunkStore.create(tmp_path / "index.duckdb.building", IndexIdentity("test", "m", 4, "c"))
    try:
        vector = np.arange(4, dtype=np.float32)
        with store.transaction():
            store.cache_embeddings({"ab12": vector, "it's": vector + 1})
        got = store.cached_embeddings(["ab12", "ffff"])
        assert list(got) == ["ab12"] and np.array_equal(got["ab12"], vector)
        odd = store.cached_embeddings(["it's", "ab12"])  # a quote in a key is doubled in the SQL
        assert set(odd) == {"it's", "ab12"} and np.array_equal(odd["it's"], vector + 1)
    finally:
        store.con.close()


def test_the_writers_counts_follow_fills_edits_and_rollbacks_without_counting_again(
    tmp_path: Path,
) -> None:
    from mnemo.index.reader import DuckReader
    from mnemo.index.store import ChunkRow, ChunkStore, IndexIdentity
    from mnemo.index.writer_api import PendingChunk

    def row(key: str) -> ChunkRow:
        return ChunkRow(key, f"memory/{key}.md", "memory", "evergreen", None, 1, 1, "", key, key, key)

    def counted() -> object:
        return DuckReader(store.con, store.identity).counts()  # no memo: counted now

    store = ChunkStore.create(tmp_path / "index.duckdb.building", IndexIdentity("test", "m", 4, "c"))
    try:
        store.insert_chunks(
            [row(f"k{i}") for i in range(6)], np.zeros((6, 4), np.float32), live=False, pending=[True] * 6
        )
        store.finish_indexes()
        assert store.counts() == counted() and store.counts().pending == 6
        batch = store.pending_batch(2)
        with store.transaction():
            store.fill_vectors(batch, np.ones((2, 4), np.float32))
        assert store.counts() == counted() and (store.counts().embedded, store.counts().pending) == (2, 4)
        with store.transaction():  # filled twice: the second fill finds nothing pending
            store.fill_vectors(batch, np.ones((2, 4), np.float32))
        assert store.counts() == counted()
        try:
            with store.transaction():
                store.fill_vectors(store.pending_batch(2), np.ones((2, 4), np.float32))
                raise RuntimeError("rolled back")
        except RuntimeError:
            pass
        assert store.counts() == counted() and store.counts().pending == 4
        with store.transaction():
            store.insert_chunks([row("new")], np.ones((1, 4), np.float32), live=True)
            store.delete_chunks([batch[0].id])
            store.upsert_file("memory/new.md", "evergreen", "memory", None, "d", 1.0, 1, 1, None)
        assert store.counts() == counted() and store.counts().files == 1
        gone = PendingChunk(10_000, "nope", "nothing")  # not in the index: nothing is filled
        with store.transaction():
            store.fill_vectors([gone], np.ones((1, 4), np.float32))
        assert store.counts() == counted()
    finally:
        store.con.close()
