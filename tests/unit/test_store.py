"""Index recovery: corruption, identity changes, stale building files, a process killed mid-index."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mnemo.config import load_settings
from mnemo.index.indexer import INDEX_FILE
from mnemo.index.opening import read_identity
from mnemo.index.store import ChunkStore, IndexIdentity
from mnemo.memory.service import MemoryService
from mnemo.workspace.layout import Workspace


def _service(root: Path, embedder) -> MemoryService:  # type: ignore[no-untyped-def]
    settings, problems = load_settings(root)
    ws = Workspace(root, ignore=[*settings.index.ignore, settings.index.dir])
    return MemoryService(ws, settings, embedder, problems)


def _index_path(root: Path) -> Path:
    return root / ".mnemo" / INDEX_FILE


def _check_search(memory: MemoryService) -> None:
    outcome = memory.search("PostgreSQL")
    assert outcome.results and outcome.results[0].path == "MEMORY.md"


@pytest.mark.parametrize("damage", ["garbage", "zeroed-header"])
def test_corrupt_index_is_rebuilt(sample_workspace: Path, services_factory, consistent, damage: str) -> None:  # type: ignore[no-untyped-def]
    s = services_factory(sample_workspace)
    s.memory.sync()
    counts = s.memory.status()
    s.close()
    path = _index_path(sample_workspace)
    data = path.read_bytes()
    if damage == "garbage":
        path.write_bytes(os.urandom(len(data)))
    elif damage == "truncated":
        path.write_bytes(data[: len(data) // 3])
    else:
        path.write_bytes(b"\0" * 8192 + data[8192:])
    assert read_identity(path) is None

    s2 = services_factory(sample_workspace)
    report = s2.memory.sync()
    assert report.rebuilt
    _check_search(s2.memory)
    status = s2.memory.status()
    assert (status.files, status.chunks) == (counts.files, counts.chunks)
    consistent(s2.memory.indexer.store.con)


def _flip_a_data_byte(path: Path) -> None:
    with path.open("r+b") as f:  # one byte of the first data block, after the two headers
        f.seek(8192 + 100)
        byte = f.read(1)
        f.seek(8192 + 100)
        f.write(bytes([byte[0] ^ 0xFF]))


@pytest.mark.parametrize("reader", ["command line", "writer"])
def test_a_block_with_a_bad_checksum_is_damage_not_a_lock(  # type: ignore[no-untyped-def]
    sample_workspace: Path, services_factory, reader: str
) -> None:
    """DuckDB's "checksum ... does not match ... in block at location 8192" holds "lock" (in "block"):
    every search, index and status said the index was in use by another process, for good."""
    s = services_factory(sample_workspace)
    s.memory.sync()
    s.close()
    _flip_a_data_byte(_index_path(sample_workspace))
    if reader == "writer":
        s2 = services_factory(sample_workspace)
        assert s2.memory.sync().rebuilt
        _check_search(s2.memory)
        return
    command = [sys.executable, "-m", "mnemo", "search", "-w", str(sample_workspace), "--provider", "none"]
    found = subprocess.run([*command, "PostgreSQL"], capture_output=True, text=True, timeout=120)
    assert found.returncode == 0 and "MEMORY.md" in found.stdout, found.stderr
    assert "in use" not in found.stderr


def test_a_build_waits_for_another_processs_build_of_the_same_index(sample_workspace: Path) -> None:
    """Two `mnemo index` at once on a new workspace wrote the same index.duckdb.building, unlinked each
    other's, and one ended in a FileNotFoundError traceback (2 of 5 tries in a review). A build now
    holds the index folder's build lock: here the test holds it, and the command waits for it."""
    from mnemo.index.build_file import build_lock

    folder = sample_workspace / ".mnemo"
    command = [sys.executable, "-m", "mnemo", "index", "-w", str(sample_workspace), "--provider", "none"]
    with build_lock(folder):
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(
                3
            )  # what it would need to start and build 4 notes (a fixed sleep: no result if slower)
            assert proc.poll() is None, "it did not wait for the build lock"
            assert not list(folder.glob("index.duckdb*")), "it built beside the other build"
        except BaseException:
            proc.kill()
            proc.wait(30)
            raise
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and "full rebuild" in out, err
    assert "Traceback" not in err and not list(folder.glob("*.building*"))


def test_a_folder_where_the_index_goes_is_a_clear_error(sample_workspace: Path) -> None:
    """An IsADirectoryError traceback before, and the failed build's file reopened (so left behind)."""
    folder = sample_workspace / ".mnemo"
    (folder / INDEX_FILE).mkdir(parents=True)
    command = [sys.executable, "-m", "mnemo", "index", "-w", str(sample_workspace), "--provider", "none"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "cannot put the index in place" in done.stderr and "Is a directory" in done.stderr
    assert sorted(p.name for p in folder.iterdir()) == [".gitignore", "build.lock", INDEX_FILE]


def test_open_existing_index_without_rebuild(sample_workspace: Path, services_factory) -> None:  # type: ignore[no-untyped-def]
    s = services_factory(sample_workspace)
    assert s.memory.sync().rebuilt
    s.close()
    s2 = services_factory(sample_workspace)
    report = s2.memory.sync()
    assert not report.rebuilt
    assert report.files_indexed == 0
    _check_search(s2.memory)


def test_other_model_or_dims_is_replaced_only_when_asked(  # type: ignore[no-untyped-def]
    sample_workspace: Path, hash_embedder, consistent
) -> None:
    first = _service(sample_workspace, hash_embedder(dims=16, model="hash-v1"))
    assert first.sync().rebuilt
    first.close()
    path = _index_path(sample_workspace)
    assert read_identity(path) == IndexIdentity("fake", "hash-v1", 16, first.indexer.identity().chunker)

    same = _service(sample_workspace, hash_embedder(dims=16, model="hash-v1"))
    assert not same.sync().rebuilt
    same.close()

    previous = "hash-v1"
    for embedder in (hash_embedder(dims=16, model="hash-v2"), hash_embedder(dims=24, model="hash-v3")):
        other = _service(sample_workspace, embedder)
        report = other.sync()  # a plain sync (a read's, a server's) never replaces it
        assert not report.rebuilt and report.chunks_embedded == 0
        assert other.indexer.store.identity.model == previous
        outcome = other.search("PostgreSQL")
        assert outcome.mode == "keyword" and outcome.results[0].path == "MEMORY.md"
        assert any("run `mnemo index` to rebuild for fake/" in n for n in outcome.notes)
        report = other.sync(replace="any")  # what `mnemo index` asks
        assert report.rebuilt
        assert report.chunks_embedded > 0
        assert other.indexer.store.identity.dims == embedder.dims
        consistent(other.indexer.store.con)
        _check_search(other)
        other.close()
        previous = embedder.model

    # Back to no vectors at all.
    keyword = _service(sample_workspace, __import__("mnemo.embeddings").embeddings.NoneEmbedder())
    assert keyword.sync(replace="any").rebuilt
    _check_search(keyword)
    keyword.close()


def test_an_index_of_an_older_schema_is_rebuilt_from_its_cached_vectors(  # type: ignore[no-untyped-def]
    sample_workspace: Path, hash_embedder, consistent
) -> None:
    from mnemo.index.duck import connect
    from mnemo.memory.readonly import ReadOnlyMemory, WriterNeeded

    first = _service(sample_workspace, hash_embedder(dims=16, model="hash-v1"))
    first.sync()
    embedded = first.status().vectors.embedded
    first.close()
    path = _index_path(sample_workspace)
    con = connect(path)  # as an earlier mnemo left it: its fts terms a row per occurrence, no postings
    con.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    con.execute("DROP TABLE fts_main_chunks.postings")
    con.execute("CREATE TABLE fts_main_chunks.terms(docid BIGINT, fieldid BIGINT, termid BIGINT)")
    con.close()
    assert read_identity(path) is None

    settings, _ = load_settings(sample_workspace)
    alone = ReadOnlyMemory(
        Workspace(sample_workspace), settings, lambda _: hash_embedder(dims=16, model="hash-v1")
    )
    with pytest.raises(WriterNeeded):  # a one-shot read leaves it to the writer's path
        alone.search("PostgreSQL")
    again = _service(sample_workspace, hash_embedder(dims=16, model="hash-v1"))
    report = again.sync(replace="none")  # even a read's sync: the old file cannot be searched
    assert report.rebuilt and report.chunks_embedded == 0  # every vector came from the old file's cache
    assert read_identity(path) is not None
    assert again.status().vectors.embedded == embedded
    consistent(again.indexer.store.con)
    _check_search(again)
    again.close()


def test_other_chunker_settings_rebuild_on_a_write_sync_only(  # type: ignore[no-untyped-def]
    sample_workspace: Path, services_factory
) -> None:
    s = services_factory(sample_workspace)
    s.memory.sync()
    s.close()
    (sample_workspace / "mnemo.toml").write_text("[chunking]\ntarget_tokens = 64\n", encoding="utf-8")
    s2 = services_factory(sample_workspace)
    assert not s2.memory.sync(replace="none").rebuilt  # `mnemo search`: searched as it is
    assert any("other chunking settings" in n for n in s2.memory.search("PostgreSQL").notes)
    assert s2.memory.sync().rebuilt  # the server's sync: same model, so the chunker change is applied
    assert s2.memory.indexer.store.identity.chunker.split("/")[2] == "64"
    _check_search(s2.memory)


def test_stale_building_file_is_replaced(sample_workspace: Path, services_factory, consistent) -> None:  # type: ignore[no-untyped-def]
    idx = sample_workspace / ".mnemo"
    idx.mkdir()
    building = idx / (INDEX_FILE + ".building")
    building.write_bytes(os.urandom(50_000))
    (idx / (INDEX_FILE + ".building.wal")).write_bytes(os.urandom(3_000))
    s = services_factory(sample_workspace)
    report = s.memory.sync()
    assert report.rebuilt
    assert not building.exists()
    assert not (idx / (INDEX_FILE + ".building.wal")).exists()
    assert _index_path(sample_workspace).is_file()
    _check_search(s.memory)
    consistent(s.memory.indexer.store.con)


def test_incomplete_index_is_not_used(sample_workspace: Path, services_factory) -> None:  # type: ignore[no-untyped-def]
    """A file without the 'complete' mark (a build that never finished) is rebuilt."""
    idx = sample_workspace / ".mnemo"
    idx.mkdir()
    store = ChunkStore.create(_index_path(sample_workspace), IndexIdentity("none", "none", 0, "x"))
    store.close()
    assert read_identity(_index_path(sample_workspace)) is None
    s = services_factory(sample_workspace)
    assert s.memory.sync().rebuilt
    _check_search(s.memory)


def test_failure_mid_sync_rolls_back_one_file(  # type: ignore[no-untyped-def]
    sample_workspace: Path, services_factory, consistent, monkeypatch
) -> None:
    s = services_factory(sample_workspace)
    s.memory.sync()
    for rel in ("memory/gardening.md", "memory/2026-11-02.md"):
        path = sample_workspace / rel
        path.write_text(path.read_text(encoding="utf-8") + "\n## Added\nfreshly appended zucchini\n")
    store = s.memory.indexer.store
    real = store.insert_chunks
    calls = {"n": 0}

    def failing(rows, vectors, *, live, **more):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 2:
            real(rows, vectors, live=live, **more)  # half-written, then the "crash"
            raise RuntimeError("simulated crash")
        return real(rows, vectors, live=live, **more)

    monkeypatch.setattr(store, "insert_chunks", failing)
    with pytest.raises(RuntimeError, match="simulated crash"):
        s.memory.sync()
    consistent(store.con)
    monkeypatch.undo()
    report = s.memory.sync()
    assert report.files_indexed >= 1
    consistent(store.con)
    hits = s.memory.search("zucchini", min_score=0.0).results
    assert {h.path for h in hits} == {"memory/gardening.md", "memory/2026-11-02.md"}


def test_killed_mid_index_recovers(make_workspace, services_factory, consistent, md_hashes) -> None:  # type: ignore[no-untyped-def]
    files: dict[str, str | bytes] = {
        "MEMORY.md": "# Memory\n\n- The billing service uses PostgreSQL.\n",
    }
    for i in range(3000):  # a batched build of 300 files finished within the 0.3 s below
        files[f"memory/note-{i:04d}.md"] = (
            f"# Note {i}\n\nTopic {i} mentions widget{i} and the shared word lighthouse.\n\n"
            f"## Detail\n\nMore about item {i}: calibration, inventory and review.\n"
        )
    root = make_workspace(files)
    before = md_hashes(root)
    building = root / ".mnemo" / (INDEX_FILE + ".building")
    proc = subprocess.Popen(
        [sys.executable, "-m", "mnemo", "index", "--provider", "none", "-w", str(root)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        # Started writing: the building file exists and has grown past its empty schema.
        while time.monotonic() < deadline and proc.poll() is None:
            if building.exists() and building.with_name(building.name + ".wal").exists():
                break
            time.sleep(0.01)
        time.sleep(0.3)
        still_running = proc.poll() is None
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert still_running, "the indexer finished before it could be killed; make the workspace bigger"
    assert proc.returncode == -signal.SIGKILL

    s = services_factory(root)
    report = s.memory.sync()
    assert report.rebuilt
    counts = consistent(s.memory.indexer.store.con)
    assert counts["files"] == len(list(root.joinpath("memory").glob("*.md"))) + 1 == 3001
    hits = s.memory.search("widget123", min_score=0.0).results
    assert hits and hits[0].path == "memory/note-0123.md"
    assert s.memory.search("PostgreSQL").results[0].path == "MEMORY.md"
    assert md_hashes(root) == before
    assert not building.exists()


def test_reads_never_rebuild_and_switching_back_costs_nothing(  # type: ignore[no-untyped-def]
    sample_workspace: Path, hash_embedder, consistent, capsys
) -> None:
    """`mnemo search --provider none` over an index built with vectors searches it keyword-only with a
    note; `mnemo index --provider none` replaces it; going back to the first model re-embeds nothing."""
    from mnemo.cli.main import main

    built = _service(sample_workspace, hash_embedder())
    report = built.sync()
    total = report.chunks_embedded
    assert report.rebuilt and total > 0
    built.close()
    path = _index_path(sample_workspace)
    fake = read_identity(path)
    assert fake is not None and fake.provider == "fake"

    assert main(["search", "--provider", "none", "-w", str(sample_workspace), "PostgreSQL"]) == 0
    out = capsys.readouterr().out
    assert "MEMORY.md" in out
    assert (
        "note: index built with fake/hash-v1; searching keyword-only; run `mnemo index` to rebuild for none"
        in out
    )
    assert main(["status", "--provider", "none", "-w", str(sample_workspace)]) == 0
    assert "run `mnemo index` to rebuild for none" in capsys.readouterr().out
    assert read_identity(path) == fake  # the read left it as it was: every vector kept

    assert main(["index", "--provider", "none", "-w", str(sample_workspace)]) == 0
    assert "(full rebuild)" in capsys.readouterr().out
    assert read_identity(path).provider == "none"

    back = _service(sample_workspace, hash_embedder())
    try:
        assert not back.sync().rebuilt  # a plain sync leaves the keyword index alone
        assert "rebuild for fake/hash-v1" in back.search("PostgreSQL").notes[-1]
        embedder = back.indexer.embedder
        report = back.sync(replace="any")
        assert report.rebuilt
        assert (report.chunks_embedded, report.chunks_reused) == (0, total)
        assert embedder.embedded == []  # not one text went through the model
        consistent(back.indexer.store.con)
        assert back.search("PostgreSQL").mode == "hybrid"
    finally:
        back.close()


def test_a_build_is_one_transaction_until_its_indexes(tmp_path: Path) -> None:
    from mnemo.index import build_file, fts
    from mnemo.index.writer_api import ChunkRow, FileMeta
    from mnemo.text.terms import terms_string

    def stage(store: ChunkStore, name: str, text: str) -> None:
        path = f"memory/{name}.md"
        row = ChunkRow(name, path, "memory", "evergreen", None, 1, 1, "", text, terms_string(text), name)
        store.stage_file(
            [row], None, (path, "evergreen", "memory", None, name, 1.0, 1, 1, None), [], FileMeta()
        )

    store = ChunkStore.create(tmp_path / "b.duckdb", IndexIdentity("none", "none", 0, "test"))
    try:
        for i in range(build_file.BUILD_BATCH_FILES + 1):  # one batch written, one file queued
            stage(store, f"n{i}", f"note {i} about herons")
        peer = store.reader()  # another connection: sees committed rows only
        assert peer.execute("SELECT count(*) FROM chunks").fetchone() == (0,)
        store.finish_indexes()
        assert peer.execute("SELECT count(*) FROM chunks").fetchone() == (build_file.BUILD_BATCH_FILES + 1,)
        assert len(fts.search(peer, ["herons"], limit=3)) == 3  # the fts tables are committed too
        stage(store, "late", "a late note")
        store.flush_staged()
        with store.transaction():  # commits the open build transaction first
            store.touch_files([("memory/late.md", 2.0, 2)])
        assert peer.execute("SELECT mtime FROM files WHERE path = 'memory/late.md'").fetchone() == (2.0,)
        peer.close()
    finally:
        store.con.close()
