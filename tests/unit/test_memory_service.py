"""MemoryService: unsaved buffers are searchable at once, get() windows and refusals, status."""

from __future__ import annotations

from pathlib import Path

import pytest

from mnemo.errors import IndexUnavailable
from mnemo.workspace.layout import WorkspacePathError


def test_search_sees_unsaved_buffer_without_waiting(
    sample_workspace: Path, services_factory, md_hashes
) -> None:  # type: ignore[no-untyped-def]
    s = services_factory(sample_workspace)
    s.memory.sync()
    hashes = md_hashes(sample_workspace)
    assert s.memory.search("quokka").results == []
    text = (sample_workspace / "memory" / "gardening.md").read_text(
        encoding="utf-8"
    ) + "\nA quokka ate the basil.\n"
    # A debounce far longer than the test: only the search itself can apply the edit.
    s.memory.schedule_buffer("memory/gardening.md", text, delay_s=3600)
    assert s.memory.has_pending()
    hits = s.memory.search("quokka").results
    assert hits and hits[0].path == "memory/gardening.md"
    assert not s.memory.has_pending()
    # get() reads the buffer, not the disk; the disk is untouched.
    assert "quokka" in s.memory.get("memory/gardening.md").text
    assert md_hashes(sample_workspace) == hashes
    # A new buffer for a file that does not exist on disk yet.
    s.memory.schedule_buffer("memory/new-topic.md", "# New\n\nmarmalade recipe\n", delay_s=3600)
    assert s.memory.search("marmalade").results[0].path == "memory/new-topic.md"
    # Closing the buffer (None) goes back to the disk text.
    s.memory.schedule_buffer("memory/gardening.md", None, delay_s=3600)
    assert s.memory.search("quokka").results == []
    # Non-memory paths are ignored.
    s.memory.schedule_buffer("README.md", "quokka", delay_s=3600)
    assert not s.memory.has_pending()


def test_saving_one_note_keeps_another_buffers_unsaved_text(sample_workspace: Path, services_factory) -> None:  # type: ignore[no-untyped-def]
    """A save (or close, or a watched change) of one note synced the workspace, which read the disk's text
    of every note indexed from a buffer: another open note's unsaved text left the index until its next
    keystroke."""
    s = services_factory(sample_workspace)
    s.memory.sync()
    s.memory.schedule_buffer("MEMORY.md", "# Memory\n\n- wombat facts\n", delay_s=3600)
    s.memory.apply_pending()
    gardening = sample_workspace / "memory" / "gardening.md"
    gardening.write_text(gardening.read_text(encoding="utf-8") + "\nSaved: quince jam.\n", encoding="utf-8")
    s.memory.schedule_buffer("memory/gardening.md", None, delay_s=3600)  # saved: read the disk
    s.memory.apply_pending()
    assert s.memory.search("quince jam").results[0].path == "memory/gardening.md"
    assert [hit.path for hit in s.memory.search("wombat").results][:1] == ["MEMORY.md"]
    texts = s.memory.indexer.store.con.execute("SELECT text FROM chunks WHERE path = 'MEMORY.md'").fetchall()
    assert "wombat" in str(texts)


def test_buffer_survives_a_sync(sample_workspace: Path, services_factory) -> None:  # type: ignore[no-untyped-def]
    s = services_factory(sample_workspace)
    s.memory.sync()
    s.memory.schedule_buffer("MEMORY.md", "# Memory\n\n- wombat facts\n", delay_s=3600)
    s.memory.apply_pending()
    s.memory.sync()  # the disk has not changed; the open buffer still wins
    assert s.memory.search("wombat").results[0].path == "MEMORY.md"


def test_search_before_index_is_built(sample_workspace: Path, services_factory) -> None:  # type: ignore[no-untyped-def]
    s = services_factory(sample_workspace)
    with pytest.raises(IndexUnavailable, match="mnemo index"):
        s.memory.search("anything")


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("../secret.md", r"'\.\.' is not allowed"),
        ("/etc/hosts.md", "absolute"),
        ("mnemo.toml", "only Markdown"),
        ("README.md", "not a memory file"),
        ("memory/nope.md", "no such memory file"),
        ("memory/escape.md", "outside the workspace"),
    ],
)
def test_get_refuses_paths_outside_memory(
    sample_workspace: Path, services_factory, path: str, message: str
) -> None:  # type: ignore[no-untyped-def]
    outside = sample_workspace.parent / "secret.md"
    outside.write_text("secret\n", encoding="utf-8")
    (sample_workspace / "memory" / "escape.md").symlink_to(outside)
    (sample_workspace / "README.md").write_text("# readme\n", encoding="utf-8")
    s = services_factory(sample_workspace)
    with pytest.raises(WorkspacePathError, match=message):
        s.memory.get(path)


def test_get_line_windows(make_workspace, services_factory) -> None:  # type: ignore[no-untyped-def]
    lines = [f"line {i}" for i in range(1, 11)]
    root = make_workspace({"memory/ten.md": "\n".join(lines) + "\n", "memory/bin.md": b"\x00\x01"})
    s = services_factory(root)
    whole = s.memory.get("memory/ten.md")
    assert whole.text.splitlines() == lines and whole.total_lines == 10 and whole.start == 1
    window = s.memory.get("memory/ten.md", 3, 4)
    assert window.text == "line 3\nline 4\nline 5\nline 6"
    assert (window.start, window.lines, window.path) == (3, 4, "memory/ten.md")
    tail = s.memory.get("memory/ten.md", 9, 100)
    assert tail.text == "line 9\nline 10" and tail.lines == 2
    from mnemo.memory.limits import InvalidInput

    with pytest.raises(InvalidInput):  # from is 1-based: 0 is an error, not silently line 1
        s.memory.get("memory/ten.md", 0, 1)
    with pytest.raises(InvalidInput):
        s.memory.get("memory/ten.md", 4, 0)
    with pytest.raises(WorkspacePathError, match="past the end"):
        s.memory.get("memory/ten.md", 11)
    with pytest.raises(WorkspacePathError, match="binary"):
        s.memory.get("memory/bin.md")


def test_status_fields(sample_workspace: Path, services_factory) -> None:  # type: ignore[no-untyped-def]
    (sample_workspace / "mnemo.toml").write_text('[search]\nmax_results = "many"\n', encoding="utf-8")
    (sample_workspace / "memory" / "bad.md").write_bytes(b"\x00")
    s = services_factory(sample_workspace)
    before = s.memory.status()
    assert before.state == "not indexed" and before.files == 0
    s.memory.sync()
    st = s.memory.status()
    assert st.state == "ready"
    assert st.workspace == str(sample_workspace.resolve())
    assert st.index.endswith("index.duckdb")
    assert st.files == 6  # five sample notes + bad.md
    assert st.chunks == s.memory.indexer.store.counts().chunks > 0
    assert (st.provider, st.mode, st.dims, st.model) == ("none", "keyword", 0, "none")
    assert st.progress.total == 6
    assert len(st.config_problems) == 1 and "search.max_results" in st.config_problems[0]
    assert [p.path for p in st.file_problems] == ["memory/bad.md"]


def test_index_of_another_model_is_read_not_written(  # type: ignore[no-untyped-def]
    sample_workspace: Path, hash_embedder, consistent
) -> None:
    """A service whose embedder differs from the index's (a flag, a setting) searches it keyword-only,
    says so in search and status, never writes to it; `replace="any"` rebuilds and applies the buffers."""
    from mnemo.config import load_settings
    from mnemo.embeddings import NoneEmbedder
    from mnemo.memory.service import MemoryService
    from mnemo.workspace.layout import Workspace

    def service(embedder):  # type: ignore[no-untyped-def]
        settings, problems = load_settings(sample_workspace)
        ws = Workspace(sample_workspace, ignore=[*settings.index.ignore, settings.index.dir])
        return MemoryService(ws, settings, embedder, problems)

    built = service(hash_embedder())
    built.sync()
    built.close()
    memory = service(NoneEmbedder())
    try:
        (sample_workspace / "memory" / "gardening.md").write_text(
            "# Gardening\n\nquince jelly\n", encoding="utf-8"
        )
        report = memory.sync()  # the server's default sync: another model is not replaced
        assert not report.rebuilt and report.files_stale == 1
        store = memory.indexer.store
        rows = consistent(store.con)
        memory.schedule_buffer("MEMORY.md", "# Memory\n\n- wombat facts\n", delay_s=3600)
        outcome = memory.search("PostgreSQL")
        note = "index built with fake/hash-v1; searching keyword-only; run `mnemo index` to rebuild for none"
        assert outcome.mode == "keyword" and outcome.results[0].path == "MEMORY.md" and note in outcome.notes
        assert memory.search("wombat").results == []  # the buffer waits for the rebuild
        assert consistent(store.con) == rows and store.identity.provider == "fake"
        status = memory.status()
        assert (status.mode, status.model, status.notes) == ("keyword", "hash-v1", [note])
        assert memory.sync(replace="any").rebuilt
        assert memory.search("wombat").results[0].path == "MEMORY.md"
        assert memory.search("quince").results[0].path == "memory/gardening.md"
        assert memory.status().notes == []
    finally:
        memory.close()


def test_an_unknown_source_is_an_error_on_every_front(sample_workspace: Path, services_factory) -> None:  # type: ignore[no-untyped-def]
    from mnemo.memory.limits import InvalidInput

    s = services_factory(sample_workspace)
    s.memory.sync()
    with pytest.raises(InvalidInput, match="sources"):
        s.memory.search("billing", sources=["notes"])  # the gateway and the agent reach this, not only LSP
    assert s.memory.search("billing", sources=["memory"]).results
