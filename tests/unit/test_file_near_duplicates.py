"""One file's near-duplicates from the index's nearest neighbours: the same answer as the workspace pass,
without reading every chunk's vector."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import write_files

from mnemo.config import load_settings
from mnemo.editor.service import EditorService
from mnemo.memory.service import MemoryService
from mnemo.workspace.layout import Workspace

SHARED = "The billing service stores invoices in PostgreSQL with row-level security per tenant."
NOTES: dict[str, str | bytes] = {
    "MEMORY.md": f"# Memory\n\n## Decisions\n- {SHARED}\n",
    "memory/2026-11-02.md": f"# 2026-11-02\n\n## Meetings\n- {SHARED}\n\n## Garden\n- Tomatoes need full sun.\n",
    "memory/gardening.md": (
        "# Gardening\n\nTomatoes need full sun and regular watering; prune the suckers weekly.\n"
    ),
    "memory/short.md": "# Short\n\nok\n",
}


def _editor(root: Path, hash_embedder: Any) -> tuple[MemoryService, EditorService]:
    write_files(root, NOTES)
    (root / "mnemo.toml").write_text("[memory]\nduplicate_threshold = 0.6\n", encoding="utf-8")
    settings, problems = load_settings(root)
    workspace = Workspace(root, ignore=[*settings.index.ignore, settings.index.dir])
    memory = MemoryService(workspace, settings, hash_embedder(dims=64), problems)
    memory.sync(vectors="wait")
    return memory, EditorService(memory, settings)


def _duplicates(problems: list[Any]) -> list[tuple[int, str]]:
    return sorted((p.start[0], p.data["otherPath"]) for p in problems if p.code == "near-duplicate")


def test_a_files_near_duplicates_match_the_workspace_pass(tmp_path: Path, hash_embedder: Any) -> None:
    memory, editor = _editor(tmp_path, hash_embedder)
    try:
        whole = editor.diagnose_workspace()
        for rel, problems in whole.items():
            text = (tmp_path / rel).read_text(encoding="utf-8")
            assert _duplicates(editor.diagnose(rel, text)) == _duplicates(problems), rel
        assert _duplicates(whole["MEMORY.md"]) == [(0, "memory/2026-11-02.md")]
        assert _duplicates(whole["memory/2026-11-02.md"]) == [(0, "MEMORY.md")]
        assert _duplicates(whole["memory/gardening.md"]) == []
    finally:
        memory.close()


def test_a_single_file_diagnose_never_reads_every_chunks_vector(
    tmp_path: Path, hash_embedder: Any, monkeypatch: Any
) -> None:
    """Diagnosing an edited file built the whole workspace's vector matrix (22 MB at 2,000 notes, for
    every edit); it now asks the index for each chunk's nearest neighbours."""
    memory, editor = _editor(tmp_path, hash_embedder)
    try:
        asked: list[str] = []
        from mnemo.index import reader as duck_reader

        real = duck_reader.DuckReader.nearest_in_other_files

        def spy(self: Any, source: str, comparable: Any) -> Any:
            asked.append(source)
            return real(self, source, comparable)

        monkeypatch.setattr(duck_reader.DuckReader, "nearest_in_other_files", spy)
        found = editor.diagnose_buffer("MEMORY.md", (tmp_path / "MEMORY.md").read_text(encoding="utf-8"))
        assert _duplicates(found) == [(0, "memory/2026-11-02.md")]
        assert asked == []
        editor.diagnose_workspace()
        assert asked == ["memory"]  # the workspace pass still reads them, once
    finally:
        memory.close()


def test_past_its_limit_the_workspace_pass_leaves_near_duplicates_to_opened_files(
    tmp_path: Path, hash_embedder: Any, monkeypatch: Any
) -> None:
    """A team's shared index of 100,000 notes would make the pass compare every vector with every other
    at each sync (minutes, and every vector in memory); past PASS_VECTORS it does not, and a file still
    gets its near-duplicates when it is opened or edited."""
    from mnemo.editor import service as editor_service
    from mnemo.index import reader as duck_reader

    memory, editor = _editor(tmp_path, hash_embedder)
    try:
        asked: list[str] = []
        real = duck_reader.DuckReader.nearest_in_other_files
        monkeypatch.setattr(
            duck_reader.DuckReader,
            "nearest_in_other_files",
            lambda self, source, comparable: asked.append(source) or real(self, source, comparable),
        )
        monkeypatch.setattr(editor_service, "PASS_VECTORS", 2)  # the sample holds more
        whole = editor.diagnose_workspace()
        assert set(whole) >= {"MEMORY.md", "memory/2026-11-02.md"}
        assert all(_duplicates(problems) == [] for problems in whole.values()) and asked == []
        found = editor.diagnose_buffer("MEMORY.md", (tmp_path / "MEMORY.md").read_text(encoding="utf-8"))
        assert _duplicates(found) == [(0, "memory/2026-11-02.md")]
        monkeypatch.setattr(editor_service, "PASS_VECTORS", 100)
        assert _duplicates(editor.diagnose_workspace()["MEMORY.md"]) == [(0, "memory/2026-11-02.md")]
    finally:
        memory.close()
