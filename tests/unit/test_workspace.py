"""Workspace layout: kinds of memory file, ignore rules, scanning and safe path resolution."""

from __future__ import annotations

import os
from datetime import date
from pathlib import Path

import pytest

from mnemo.workspace.layout import (
    FileKind,
    Workspace,
    WorkspaceNotFound,
    WorkspacePathError,
    find_workspace,
    named_workspace,
)


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path, ignore=["node_modules", ".mnemo", "*.tmp.md"], extra_paths=["notes/"])


@pytest.mark.parametrize(
    ("path", "kind", "day", "source"),
    [
        ("MEMORY.md", FileKind.EVERGREEN, None, "memory"),
        ("memory.md", FileKind.EVERGREEN, None, "memory"),
        ("memory/topic.md", FileKind.EVERGREEN, None, "memory"),
        ("memory/deep/nested/topic.md", FileKind.EVERGREEN, None, "memory"),
        ("memory/2026-11-01.md", FileKind.DAILY, date(2026, 11, 1), "memory"),
        ("memory/2026-11-01-team-offsite.md", FileKind.SNAPSHOT, date(2026, 11, 1), "memory"),
        ("memory/2026-13-45.md", FileKind.EVERGREEN, None, "memory"),  # not a date
        ("memory/2026-02-30-slug.md", FileKind.EVERGREEN, None, "memory"),
        ("memory/\uff12\uff10\uff12\uff16-11-01.md", FileKind.EVERGREEN, None, "memory"),  # full-width digits
        ("memory/\u0662\u0660\u0662\u0666-\u0661\u0661-\u0660\u0661.md", FileKind.EVERGREEN, None, "memory"),
        ("memory/sub/2026-11-01.md", FileKind.EVERGREEN, None, "memory"),  # dated only at the top
        ("skills/deploy/SKILL.md", FileKind.SKILL, None, "skills"),
        ("sessions/2026-11-01-chat.jsonl", FileKind.SESSION, None, "sessions"),
        ("notes/idea.md", FileKind.EVERGREEN, None, "memory"),  # extra path
    ],
)
def test_classify_kinds(ws: Workspace, path: str, kind: FileKind, day: date | None, source: str) -> None:
    mf = ws.classify(path)
    assert mf is not None
    assert (mf.path, mf.kind, mf.day, mf.source) == (path, kind, day, source)
    assert mf.evergreen is (day is None)


@pytest.mark.parametrize(
    "path",
    [
        "README.md",
        "memory/notes.txt",
        "memory/2026-11-01.txt",
        "skills/deploy/README.md",
        "skills/SKILL.md",
        "skills/a/b/SKILL.md",
        "sessions/chat.md",
        "sessions/deep/chat.jsonl",
        "other/idea.md",
        "notesx/idea.md",
        "memory/node_modules/pkg.md",  # ignored component
        "memory/draft.tmp.md",  # ignored glob
        "memory/.hidden.md",  # dot files are ignored
        "memory/.obsidian/x.md",
        "/etc/MEMORY.md",
        "../MEMORY.md",
        "memory/../MEMORY.md",
    ],
)
def test_not_memory(ws: Workspace, path: str) -> None:
    assert ws.classify(path) is None


PATHS = [
    "MEMORY.md",
    "memory/topic.md",
    "memory/2026-11-01.md",
    "memory/2026-02-30.md",  # not a day: an evergreen topic
    "memory/2026-11-01-slug.md",
    "memory/.md",
    "memory/.hidden.md",
    "memory/node_modules",
    "memory/node_modules.md",
    "memory/draft.tmp.md",
    "memory/sub/deep.md",
    "memory/a\\b.md",
    "memory/",
    "memory/x.MD",
    "memory/notes.txt",
    "memory//x.md",
    "memory/../x.md",
    "node_modules/memory/x.md",
    "skills/a/SKILL.md",
    "sessions/private-a/2026-10.md",
    "notes/extra.md",
    ".mnemo/x.md",
]
IGNORES = [
    (),
    ("node_modules", ".git", ".mnemo", ".venv"),  # the defaults: names only
    ("node_modules", "*.tmp.md"),
    ("memory",),
    ("memory/topic.md", "x.md"),
    ("[a-z]*.md",),
]


@pytest.mark.parametrize("ignore", IGNORES)
def test_is_memory_answers_as_classify_does(tmp_path: Path, ignore: tuple[str, ...]) -> None:
    fast = Workspace(tmp_path, ignore=ignore, extra_paths=["notes"])
    for path in PATHS:
        assert fast.is_memory(path) is (fast.classify(path) is not None), path


@pytest.mark.parametrize("ignore", IGNORES)
def test_names_only_ignores_match_as_their_patterns_do(tmp_path: Path, ignore: tuple[str, ...]) -> None:
    import fnmatch

    ws = Workspace(tmp_path, ignore=ignore)
    for path in PATHS:
        parts = path.split("/")
        hidden = any(p.startswith(".") and p not in (".", "..") for p in parts)
        matched = any(fnmatch.fnmatchcase(x, pattern) for pattern in ignore for x in (path, *parts))
        assert ws.is_ignored(path) is (hidden or matched), path


def test_stamps_are_what_scan_finds(tmp_path: Path) -> None:
    for rel in (
        "MEMORY.md",
        "memory/a.md",
        "memory/2026-11-01.md",
        "memory/node_modules/x.md",
        "skills/s/SKILL.md",
    ):
        _touch(tmp_path, rel)
    (tmp_path / "memory" / "b.md").write_text("longer text\n", encoding="utf-8")
    ws = Workspace(tmp_path, ignore=["node_modules"])
    scanned = {mf.path: (st.st_mtime, st.st_size) for mf, st in ws.scan()}
    assert ws.stamps() == scanned and len(scanned) == 5
    os.utime(tmp_path / "memory" / "a.md", ns=(1_000_000_000, 1_000_000_000))  # same size, another mtime
    assert ws.stamps()["memory/a.md"] == (1.0, 4) != scanned["memory/a.md"]


def test_sessions_can_be_excluded(tmp_path: Path) -> None:
    assert Workspace(tmp_path, include_sessions=False).classify("sessions/a.jsonl") is None


def _touch(root: Path, rel: str, text: str = "# x\n") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_scan_finds_each_kind_and_honours_ignores(tmp_path: Path) -> None:
    for rel in [
        "MEMORY.md",
        "memory/topic.md",
        "memory/2026-11-01.md",
        "memory/2026-11-01-slug.md",
        "skills/x/SKILL.md",
        "notes/extra.md",
        "memory/node_modules/dep.md",
        "memory/.git/x.md",
        "memory/readme.txt",
        "README.md",
        ".mnemo/junk.md",
    ]:
        _touch(tmp_path, rel)
    (tmp_path / "sessions").mkdir()
    (tmp_path / "sessions" / "s1.jsonl").write_text('{"role": "user", "text": "hi"}\n', encoding="utf-8")
    ws = Workspace(tmp_path, ignore=["node_modules", ".git", ".mnemo"], extra_paths=["notes"])
    found = {mf.path: mf.kind for mf, _ in ws.scan()}
    assert found == {
        "MEMORY.md": FileKind.EVERGREEN,
        "memory/topic.md": FileKind.EVERGREEN,
        "memory/2026-11-01.md": FileKind.DAILY,
        "memory/2026-11-01-slug.md": FileKind.SNAPSHOT,
        "skills/x/SKILL.md": FileKind.SKILL,
        "notes/extra.md": FileKind.EVERGREEN,
        "sessions/s1.jsonl": FileKind.SESSION,
    }


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    out = tmp_path / "outside"
    out.mkdir()
    (out / "secret.md").write_text("# secret\nthe launch codes\n", encoding="utf-8")
    return out


@pytest.fixture
def linked_ws(tmp_path: Path, outside: Path) -> Workspace:
    root = tmp_path / "ws"
    _touch(root, "memory/real.md")
    os.symlink(outside / "secret.md", root / "memory" / "escape.md")
    os.symlink(outside, root / "memory" / "escdir")
    os.symlink(root / "memory" / "real.md", root / "memory" / "inner-link.md")
    os.symlink(outside / "secret.md", root / "MEMORY.md")
    return Workspace(root)


def test_scan_skips_symlinks(linked_ws: Workspace) -> None:
    assert [mf.path for mf, _ in linked_ws.scan()] == ["memory/real.md"]


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("memory/escape.md", "outside the workspace"),
        ("memory/escdir/secret.md", "outside the workspace"),
        ("MEMORY.md", "outside the workspace"),
        ("memory/inner-link.md", "symlink"),
    ],
)
def test_resolve_refuses_symlinks(linked_ws: Workspace, path: str, reason: str) -> None:
    with pytest.raises(WorkspacePathError, match=reason):
        linked_ws.resolve_memory_path(path)


def test_resolve_accepts_a_real_file(linked_ws: Workspace) -> None:
    resolved, mf = linked_ws.resolve_memory_path("memory/real.md")
    assert resolved == linked_ws.root / "memory" / "real.md"
    assert mf.kind is FileKind.EVERGREEN
    # Windows separators are accepted too.
    assert linked_ws.resolve_memory_path("memory\\real.md")[0] == resolved


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("../outside/secret.md", "'..' is not allowed"),
        ("memory/../../outside/secret.md", "'..' is not allowed"),
        ("memory/..\\..\\x.md", "'..' is not allowed"),
        ("/etc/passwd.md", "absolute paths are not allowed"),
        ("memory/notes.txt", r"only Markdown \(\.md\)"),
        ("sessions/a.jsonl", r"only Markdown"),
        ("README.md", "not a memory file"),
        ("memory/missing.md", "no such memory file"),
        ("", "empty"),
        ("memory/a\x00.md", "NUL"),
    ],
)
def test_resolve_refuses_bad_paths(linked_ws: Workspace, path: str, message: str) -> None:
    with pytest.raises(WorkspacePathError, match=message):
        linked_ws.resolve_memory_path(path)


def test_relative_and_uri(tmp_path: Path) -> None:
    ws = Workspace(tmp_path)
    uri = ws.uri("memory/a b.md")
    assert ws.rel_from_uri(uri) == "memory/a b.md"
    assert ws.rel_from_uri("untitled:Untitled-1") is None
    assert ws.relative(tmp_path.parent / "elsewhere.md") is None


# -- discovery ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("marker", ["mnemo.toml", "MEMORY.md", ".mnemo/"])
def test_find_workspace_walks_up_to_a_marker(tmp_path: Path, marker: str) -> None:
    root = tmp_path / "notes"
    deep = root / "memory" / "projects" / "q4"
    deep.mkdir(parents=True)
    if marker.endswith("/"):
        (root / marker).mkdir()
    else:
        (root / marker).write_text("", encoding="utf-8")
    assert find_workspace(deep, [tmp_path]) == root.resolve()
    assert find_workspace(root, [tmp_path]) == root.resolve()


def test_find_workspace_takes_the_nearest_and_ignores_lookalikes(tmp_path: Path) -> None:
    outer, inner = tmp_path / "outer", tmp_path / "outer" / "inner"
    (inner / "sub").mkdir(parents=True)
    (outer / "MEMORY.md").write_text("# outer\n", encoding="utf-8")
    (inner / "mnemo.toml").write_text("", encoding="utf-8")
    assert find_workspace(inner / "sub", [tmp_path]) == inner.resolve()
    # A folder named MEMORY.md or a file named .mnemo marks nothing.
    lookalike = tmp_path / "lookalike"
    (lookalike / "MEMORY.md").mkdir(parents=True)
    (lookalike / ".mnemo").mkdir()
    (lookalike / ".mnemo").rmdir()
    (lookalike / ".mnemo").write_text("", encoding="utf-8")
    with pytest.raises(WorkspaceNotFound):
        find_workspace(lookalike, [tmp_path])


def test_no_workspace_says_how_to_make_one_and_creates_nothing(tmp_path: Path) -> None:
    empty = tmp_path / "empty" / "deeper"
    empty.mkdir(parents=True)
    with pytest.raises(WorkspaceNotFound) as info:
        find_workspace(empty, [tmp_path])
    assert "mnemo init PATH" in str(info.value) and str(empty.resolve()) in str(info.value)
    assert list((tmp_path / "empty").rglob("*")) == [empty]
    # The ceiling itself is not looked at (as GIT_CEILING_DIRECTORIES).
    (tmp_path / "MEMORY.md").write_text("", encoding="utf-8")
    with pytest.raises(WorkspaceNotFound):
        find_workspace(empty, [tmp_path])
    assert find_workspace(empty, [tmp_path.parent]) == tmp_path.resolve()


def test_named_workspace_must_exist(tmp_path: Path) -> None:
    assert named_workspace(tmp_path) == tmp_path.resolve()  # named: used as it is, marker or not
    with pytest.raises(WorkspaceNotFound, match="mnemo init"):
        named_workspace(tmp_path / "missing")
    assert not (tmp_path / "missing").exists()
