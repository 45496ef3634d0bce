"""Incremental indexing: only changed chunks are re-embedded; bad input is reported, never fatal."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tests.conftest import record_classified, settle

from mnemo.config import load_settings
from mnemo.index import racy, sources
from mnemo.memory.service import MemoryService
from mnemo.workspace.layout import Workspace

NOTE = (
    "# Project\n\n## Alpha\n\nAlpha section talks about apples and orchards.\n\n"
    "## Beta\n\nBeta section talks about bicycles and gears.\n\n"
    "## Gamma\n\nGamma section talks about guitars and chords.\n"
)


def _service(root: Path, embedder) -> MemoryService:  # type: ignore[no-untyped-def]
    settings, problems = load_settings(root)
    ws = Workspace(root, ignore=[*settings.index.ignore, settings.index.dir])
    return MemoryService(ws, settings, embedder, problems)


def _chunks(memory: MemoryService, path: str) -> dict[str, int]:
    """heading -> chunk id."""
    rows = memory.indexer.store.con.execute(
        "SELECT heading, id FROM chunks WHERE path = ?", [path]
    ).fetchall()
    return dict(rows)


def test_paragraph_edit_reembeds_only_that_chunk(make_workspace, hash_embedder, consistent) -> None:  # type: ignore[no-untyped-def]
    root = make_workspace({"memory/project.md": NOTE, "memory/other.md": "# Other\n\nunrelated\n"})
    embedder = hash_embedder()
    memory = _service(root, embedder)
    first = memory.sync()
    assert first.chunks_embedded == 4  # Alpha (with its empty parent heading), Beta, Gamma, Other
    before = _chunks(memory, "memory/project.md")
    embedder.embedded.clear()

    path = root / "memory" / "project.md"
    path.write_text(NOTE.replace("bicycles and gears", "bicycles, gears and chains"), encoding="utf-8")
    report = memory.sync()
    assert report.files_indexed == 1
    assert report.chunks_embedded == 1
    assert report.chunks_reused == 2
    assert len(embedder.embedded) == 1 and "chains" in embedder.embedded[0]
    after = _chunks(memory, "memory/project.md")
    assert after.keys() == before.keys()
    changed = {h for h in before if before[h] != after[h]}
    assert changed == {"Project > Beta"}
    consistent(memory.indexer.store.con)
    assert memory.search("chains", min_score=0.0).results[0].heading == "Project > Beta"

    # Reverting the edit reuses the cached embedding: nothing is embedded again.
    path.write_text(NOTE, encoding="utf-8")
    assert memory.sync().chunks_embedded == 0
    memory.close()


def test_inserting_lines_moves_chunks_without_reembedding(make_workspace, hash_embedder) -> None:  # type: ignore[no-untyped-def]
    root = make_workspace({"memory/project.md": NOTE})
    memory = _service(root, hash_embedder())
    memory.sync()
    lines_before = dict(memory.indexer.store.con.execute("SELECT heading, start_line FROM chunks").fetchall())
    (root / "memory" / "project.md").write_text(
        NOTE.replace("# Project\n", "# Project\n\nintro\n"), encoding="utf-8"
    )
    report = memory.sync()
    assert report.chunks_embedded == 2  # the top chunk, now with text of its own, and Alpha without it
    lines_after = dict(memory.indexer.store.con.execute("SELECT heading, start_line FROM chunks").fetchall())
    assert lines_after["Project > Gamma"] == lines_before["Project > Gamma"] + 2
    memory.close()


def test_keyword_mode_edit_keeps_other_chunk_ids(make_workspace, services_factory, consistent) -> None:  # type: ignore[no-untyped-def]
    root = make_workspace({"memory/project.md": NOTE})
    s = services_factory(root)
    s.memory.sync()
    before = _chunks(s.memory, "memory/project.md")
    (root / "memory" / "project.md").write_text(NOTE.replace("guitars", "violins"), encoding="utf-8")
    s.memory.sync()
    after = _chunks(s.memory, "memory/project.md")
    assert {h for h in before if before[h] != after[h]} == {"Project > Gamma"}
    assert s.memory.search("violins").results[0].heading == "Project > Gamma"
    assert s.memory.search("guitars").results == []
    consistent(s.memory.indexer.store.con)


def test_deleting_a_file_removes_its_chunks(sample_workspace: Path, services_factory, consistent) -> None:  # type: ignore[no-untyped-def]
    s = services_factory(sample_workspace)
    s.memory.sync()
    assert s.memory.search("tomatoes").results
    (sample_workspace / "memory" / "gardening.md").unlink()
    report = s.memory.sync()
    assert report.files_removed == 1
    con = s.memory.indexer.store.con
    assert con.execute("SELECT count(*) FROM chunks WHERE path = 'memory/gardening.md'").fetchone() == (0,)
    assert s.memory.search("tomatoes").results == []
    consistent(con)


def test_mtime_only_change_does_not_rechunk(sample_workspace: Path, services_factory, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    s = services_factory(sample_workspace)
    s.memory.sync()
    ids = dict(s.memory.indexer.store.con.execute("SELECT key, id FROM chunks").fetchall())
    path = sample_workspace / "memory" / "gardening.md"
    st = path.stat()
    os.utime(path, (st.st_atime - 100, st.st_mtime - 100))  # (a future mtime is not trusted)
    import mnemo.index.file_rows as indexer_module  # where a file is chunked

    def no_chunking(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("an mtime-only change must not re-chunk")

    monkeypatch.setattr(indexer_module, "chunk_markdown", no_chunking)
    report = s.memory.sync()
    assert report.files_indexed == 0
    assert dict(s.memory.indexer.store.con.execute("SELECT key, id FROM chunks").fetchall()) == ids
    mtime = s.memory.indexer.store.file_states()["memory/gardening.md"].mtime
    assert mtime == path.stat().st_mtime  # the new mtime is recorded, so the next sync skips it
    monkeypatch.undo()
    assert s.memory.sync().files_indexed == 0


def test_touched_and_removed_files_are_written_in_one_transaction(
    make_workspace, hash_embedder, consistent
) -> None:  # type: ignore[no-untyped-def]
    """A checkout or a copy gives every file a new mtime with the same content: their stamps are written
    together, not a commit each (2,000 touched notes took 3.7 s where a full rebuild takes ~1 s)."""
    notes = {f"memory/n{i:02d}.md": f"# Note {i}\n\nabout topic{i} and lighthouses\n" for i in range(30)}
    root = make_workspace(notes)
    memory = _service(root, hash_embedder())
    memory.sync()
    store = memory.indexer.store
    for name in notes:
        st = (root / name).stat()
        os.utime(root / name, (st.st_atime - 50, st.st_mtime - 50))
    for name in list(notes)[:5]:
        (root / name).unlink()
    commits = []
    begin = store.transaction

    def counted():  # type: ignore[no-untyped-def]
        commits.append(1)
        return begin()

    store.transaction = counted  # type: ignore[method-assign]
    report = memory.sync()
    assert report.files_indexed == 0 and report.files_removed == 5
    assert len(commits) == 1
    states = store.file_states()
    assert sorted(states) == sorted(list(notes)[5:])
    assert all(states[name].mtime == (root / name).stat().st_mtime for name in states)
    consistent(store.con)
    removed = set(list(notes)[:5])
    assert not {hit.path for hit in memory.search("topic3 lighthouses", min_score=0.0).results} & removed
    assert memory.search("topic12", min_score=0.0).results[0].path == "memory/n12.md"
    commits.clear()
    assert memory.sync().files_indexed == 0 and commits == []  # stamps current: nothing read or written


def test_an_unchanged_sync_reads_no_table_and_classifies_no_file(make_workspace, hash_embedder) -> None:  # type: ignore[no-untyped-def]
    """A sync runs at every editor save and at every search through a daemon: with nothing changed on
    disk it costs the stat of each file. The files' states are kept by the store between its writes,
    and only a file that is read again is classified (28 -> 14 ms of CPU at 2,000 notes)."""
    notes = {f"memory/n{i:02d}.md": f"# Note {i}\n\nabout topic{i}\n" for i in range(12)}
    root = make_workspace(notes)
    settle(root)
    memory = _service(root, hash_embedder())
    memory.sync()
    store = memory.indexer.store
    classified = record_classified(memory.indexer.workspace)
    kept = store.file_states()
    assert memory.sync().files_indexed == 0
    assert classified == [] and store.file_states() is kept  # nothing read, nothing classified
    (root / "memory/n03.md").write_text("# Note 3\n\nabout lighthouses now\n", encoding="utf-8")
    report = memory.sync()
    assert report.files_indexed == 1 and classified == ["memory/n03.md"]
    states = store.file_states()
    assert states is not kept and states["memory/n03.md"].mtime == racy.UNSETTLED  # until it settles
    assert memory.search("lighthouses", min_score=0.0).results[0].path == "memory/n03.md"


def test_the_kept_file_states_never_outlive_a_rolled_back_write(make_workspace, hash_embedder) -> None:  # type: ignore[no-untyped-def]
    root = make_workspace({"memory/a.md": "# A\n\napples\n"})
    settle(root)
    memory = _service(root, hash_embedder())
    memory.sync()
    store = memory.indexer.store
    before = dict(store.file_states())
    with pytest.raises(RuntimeError), store.transaction():
        store.upsert_file("memory/ghost.md", "evergreen", "memory", None, "d", 1.0, 1, 0, None)
        assert "memory/ghost.md" in store.file_states()  # the transaction sees its own row
        raise RuntimeError("a failure mid-write")
    assert dict(store.file_states()) == before  # read again after the rollback
    kept = store.file_states()
    with store.transaction():  # (vectors, caches, statistics: no files or file_meta row written)
        store.con.execute("SELECT count(*) FROM chunks").fetchone()
    assert store.file_states() is kept
    with store.transaction():
        store.touch_files([("memory/a.md", 123.0, 7)])
    assert (store.file_states()["memory/a.md"].mtime, store.file_states()["memory/a.md"].size) == (123.0, 7)
    assert memory.sync().files_indexed == 0  # the disk's stamps differ: read, same content, touched back
    assert store.file_states()["memory/a.md"].mtime == (root / "memory/a.md").stat().st_mtime


# -- bad input ----------------------------------------------------------------------------------
GOOD = {
    "MEMORY.md": "# Memory\n\n- The billing service uses PostgreSQL.\n",
    "memory/fine.md": "# Fine\n\nA perfectly ordinary note about lighthouses.\n",
}


def _problems(report) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return dict(report.problems)


def _after_sync_checks(s, root: Path, hashes: dict[str, str], md_hashes, consistent) -> None:  # type: ignore[no-untyped-def]
    consistent(s.memory.indexer.store.con)
    assert s.memory.search("lighthouses").results[0].path == "memory/fine.md"
    assert md_hashes(root) == hashes


def test_bad_files_are_reported(make_workspace, services_factory, md_hashes, consistent) -> None:  # type: ignore[no-untyped-def]
    root = make_workspace(
        {
            **GOOD,
            "memory/binary.md": b"PK\x03\x04\x00\x00 binary zip \x00\xff",
            "memory/latin1.md": "# Café\n\nnaïve résumé about espresso\n".encode("latin-1"),
            "memory/empty.md": "",
            "memory/big.md": "# Big\n\n" + "word " * 2_000 + "\n",
            "memory/frontmatter.md": "---\ntitle: [unclosed\n: nokey\n\n# Body\n\nfront matter body about kites\n",
            "sessions/chat.jsonl": '{"role": "user", "text": "hello about kayaks"}\nnot json\n',
        },
        toml="[index]\nmax_file_bytes = 5000\n",
    )
    settle(root)
    hashes = md_hashes(root)
    s = services_factory(root)
    report = s.memory.sync()
    problems = _problems(report)
    assert "binary" in problems["memory/binary.md"]
    assert "invalid UTF-8" in problems["memory/latin1.md"] and "U+FFFD" in problems["memory/latin1.md"]
    assert "max_file_bytes" in problems["memory/big.md"]
    assert "malformed transcript" in problems["sessions/chat.jsonl"]
    assert "front matter" in problems["memory/frontmatter.md"]
    assert "memory/empty.md" not in problems and "memory/fine.md" not in problems
    # The status shows the same problems.
    status = {p.path: p.problem for p in s.memory.status().file_problems}
    assert status == problems
    # Every file has a row (so it is not re-read on every sync), bad ones without chunks.
    files = dict(s.memory.indexer.store.con.execute("SELECT path, chunks FROM files").fetchall())
    assert files["memory/binary.md"] == 0 and files["memory/big.md"] == 0 and files["memory/empty.md"] == 0
    assert files["memory/latin1.md"] > 0
    assert s.memory.search("espresso").results[0].path == "memory/latin1.md"
    assert s.memory.search("kayaks", min_score=0.0).results[0].path == "sessions/chat.jsonl"
    assert s.memory.search("kites", min_score=0.0).results[0].path == "memory/frontmatter.md"
    _after_sync_checks(s, root, hashes, md_hashes, consistent)

    # A second sync re-reads nothing and the problems are still visible in the status.
    again = s.memory.sync()
    assert again.files_indexed == 0
    assert {p.path for p in s.memory.status().file_problems} == set(problems)


def test_large_file_under_default_limit_with_long_line(
    make_workspace, services_factory, md_hashes, consistent
) -> None:  # type: ignore[no-untyped-def]
    long_line = ("zebra" + "x" * 95 + " ") * 40_000  # ~4 MB on one line, under the 5 MB default
    root = make_workspace({**GOOD, "memory/huge.md": "# Huge\n\n" + long_line + "\n"})
    hashes = md_hashes(root)
    s = services_factory(root)
    report = s.memory.sync()
    assert "memory/huge.md" not in _problems(report)
    n = s.memory.indexer.store.con.execute(
        "SELECT count(*), max(length(text)) FROM chunks WHERE path = 'memory/huge.md'"
    ).fetchone()
    assert n[0] > 1 and n[1] < 10_000  # cut into pieces, no giant chunk
    _after_sync_checks(s, root, hashes, md_hashes, consistent)


def test_ten_megabyte_file_over_limit(make_workspace, services_factory, md_hashes, consistent) -> None:  # type: ignore[no-untyped-def]
    root = make_workspace(GOOD, toml="[index]\nmax_file_bytes = 1000000\n")
    with open(root / "memory" / "ten.md", "wb") as fh:
        fh.truncate(10_000_000)  # sparse: 10 MB of NUL without writing them
    hashes = md_hashes(root)
    s = services_factory(root)
    report = s.memory.sync()
    assert "10.0 MB" in _problems(report)["memory/ten.md"]
    _after_sync_checks(s, root, hashes, md_hashes, consistent)


def test_file_deleted_during_indexing(
    make_workspace, services_factory, md_hashes, consistent, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    root = make_workspace({**GOOD, "memory/vanishing.md": "# Gone\n\nsoon gone\n"})
    real = sources.read_memory_file

    def delete_then_read(path: Path, kind, max_bytes):  # type: ignore[no-untyped-def]
        if path.name == "vanishing.md":
            path.unlink()
        return real(path, kind, max_bytes)

    import mnemo.index.disk_sync as sync_module  # where a sync reads a file

    monkeypatch.setattr(sync_module, "read_memory_file", delete_then_read)
    s = services_factory(root)
    report = s.memory.sync()
    assert "deleted while indexing" in _problems(report)["memory/vanishing.md"]
    monkeypatch.undo()
    hashes = md_hashes(root)
    _after_sync_checks(s, root, hashes, md_hashes, consistent)
    # The next sync forgets the file.
    report = s.memory.sync()
    assert report.files_removed == 1
    paths = {r[0] for r in s.memory.indexer.store.con.execute("SELECT path FROM files").fetchall()}
    assert "memory/vanishing.md" not in paths
    consistent(s.memory.indexer.store.con)


def test_fixing_a_bad_file_clears_its_problem(make_workspace, services_factory) -> None:  # type: ignore[no-untyped-def]
    root = make_workspace({**GOOD, "memory/binary.md": b"\x00\x01\x02"})
    s = services_factory(root)
    assert "memory/binary.md" in _problems(s.memory.sync())
    (root / "memory" / "binary.md").write_text("# Fixed\n\nnow readable about harbours\n", encoding="utf-8")
    report = s.memory.sync()
    assert report.problems == []
    assert s.memory.status().file_problems == []
    assert s.memory.search("harbours").results[0].path == "memory/binary.md"


@pytest.mark.parametrize(
    "text", ["\ufeff# BOM\n\nbom note about pelicans\n", "# CRLF\r\n\r\ncrlf note about pelicans\r\n"]
)
def test_bom_and_crlf(make_workspace, services_factory, text: str) -> None:  # type: ignore[no-untyped-def]
    root = make_workspace({"memory/x.md": text.encode("utf-8")})
    s = services_factory(root)
    assert s.memory.sync().problems == []
    hit = s.memory.search("pelicans").results[0]
    assert hit.path == "memory/x.md" and (hit.start_line, hit.end_line) == (1, 3)


def test_a_full_build_written_in_batches_matches_file_by_file_indexing(  # type: ignore[no-untyped-def]
    make_workspace, hash_embedder, consistent
) -> None:
    from mnemo.index.build_file import BUILD_BATCH_FILES

    files: dict[str, str | bytes] = {
        f"memory/topic-{i:03d}.md": f"# Topic {i}\n\nNote number {i} about subject{i}.\n\n## More\n- item {i}\n"
        for i in range(BUILD_BATCH_FILES * 2 + 7)
    }
    files["memory/2026-11-02.md"] = "# 2026-11-02\n\n- dated note about the zebrafinch\n"
    files["memory/bad.md"] = b"\xff\xfe not utf-8 \x00 binary"
    root = make_workspace(files)
    memory = _service(root, hash_embedder())
    report = memory.sync()
    assert report.rebuilt and report.files_indexed == len(files)
    counts = consistent(memory.indexer.store.con)
    assert counts["files"] == len(files)
    con = memory.indexer.store.con
    day = con.execute("SELECT day, kind FROM files WHERE path = 'memory/2026-11-02.md'").fetchone()
    assert str(day[0]) == "2026-11-02"
    problem = con.execute("SELECT problem FROM files WHERE path = 'memory/bad.md'").fetchone()[0]
    assert problem
    dims = con.execute("SELECT count(*) FROM chunks WHERE embedding IS NULL").fetchone()[0]
    assert dims == 0, "every chunk of a batched build has its vector"
    for query, path in (("subject513", "memory/topic-513.md"), ("zebrafinch", "memory/2026-11-02.md")):
        hits = memory.search(query, max_results=20, min_score=0.0).results
        assert [h.path for h in hits if h.parts.bm25 > 0] == [path], "BM25 finds each batch's rows"
    # Incremental edits on top of a batched build keep the index consistent.
    (root / "memory" / "topic-000.md").write_text("# Topic 0\n\nchanged\n", encoding="utf-8")
    memory.sync()
    consistent(memory.indexer.store.con)
    memory.close()


def test_many_changed_files_commit_in_batches_and_a_cancel_keeps_the_committed_ones(
    make_workspace, hash_embedder, consistent
) -> None:  # type: ignore[no-untyped-def]
    """A pull that changes many notes: one transaction and one BM25 update a file cost ~33 ms a file
    (300 notes: ~10 s of CPU). They are written LIVE_BATCH_FILES a transaction; the BM25 tables are
    updated once a batch and stay exact; a cancel rolls back only the batch it interrupts."""
    from mnemo.errors import SearchCancelled
    from mnemo.index.disk_sync import LIVE_BATCH_FILES

    count = 2 * LIVE_BATCH_FILES + 6
    notes = {f"memory/n{i:03d}.md": f"# Note {i}\n\nabout topic{i} and lighthouses\n" for i in range(count)}
    root = make_workspace(notes)
    settle(root)
    memory = _service(root, hash_embedder())
    memory.sync()
    store = memory.indexer.store
    begins: list[int] = []
    begin = store._begin

    def counted() -> None:
        if store._batch_thread is not None:  # (not the vectors' fills that follow in the background)
            begins.append(1)
        begin()

    store._begin = counted  # type: ignore[method-assign]
    for name in notes:
        (root / name).write_text(notes[name].replace("lighthouses", "submarines"), encoding="utf-8")
    cancel = __import__("threading").Event()

    def progress(done: int, total: int, path: str) -> None:
        if done == LIVE_BATCH_FILES + 3:  # inside the second batch
            cancel.set()

    with pytest.raises(SearchCancelled):
        memory.sync(progress=progress, cancel=cancel)
    assert len(begins) == 2  # the first batch committed, the second rolled back
    consistent(store.con)

    def new_notes() -> int:
        row = store.con.execute(
            "SELECT count(DISTINCT path) FROM chunks WHERE text LIKE '%submarines%'"
        ).fetchone()
        return int(row[0])

    assert new_notes() == LIVE_BATCH_FILES  # exactly the committed batch's notes are new
    begins.clear()
    report = memory.sync()
    assert report.files_indexed == count - LIVE_BATCH_FILES
    assert len(begins) == 2  # the other LIVE_BATCH_FILES + 6 files: two batches
    consistent(store.con)
    assert new_notes() == count
    assert memory.search("submarines topic7", min_score=0.0).results[0].path == "memory/n007.md"
    memory.close()
