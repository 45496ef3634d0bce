"""Git for memory: only memory files, section summary, secret refusal, force, init, history."""

from __future__ import annotations

import os
from pathlib import Path

import git
import pytest

from mnemo.editor.vcs import BlameCache, MemoryRepo, SecretsInCommit, VcsError, describe, parse_porcelain
from mnemo.workspace.layout import Workspace

SECRET = "ghp_aB3dE5gH7jK9mN1pQ3sT5vX7zA9cD1fG3hJ5"


@pytest.fixture(autouse=True)
def identity(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"):
        monkeypatch.setenv(key, "Test")
    for key in ("GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"):
        monkeypatch.setenv(key, "test@example.com")


def workspace(root: Path, files: dict[str, str]) -> Workspace:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return Workspace(root, ignore=[".mnemo"])


def test_describe_sections() -> None:
    change = describe("# M\n## A\nx\n## B\ny\n", "# M\n## A\nx2\n## C\nz\n", "MEMORY.md")
    assert (change.status, change.added, change.changed, change.removed) == (
        "M",
        ["# M > ## C"],
        ["# M > ## A"],
        ["# M > ## B"],
    )


def test_commit_requires_confirmed_init_and_commits_memory_only(tmp_path: Path) -> None:
    ws = workspace(
        tmp_path,
        {
            "MEMORY.md": "# Memory\n## Prefs\n- tea\n",
            "memory/2026-11-02.md": "# Day\n",
            ".mnemo/index.duckdb": "binary",
            "notes.txt": "not memory",
            "sessions/s1.jsonl": "{}\n",
        },
    )
    repo = MemoryRepo(ws)
    with pytest.raises(VcsError, match="not in a Git repository"):
        repo.commit()
    result = repo.commit(init_repo=True)
    g = git.Repo(tmp_path)
    assert sorted(g.git.ls_files().split()) == ["MEMORY.md", "memory/2026-11-02.md"]
    assert result.message.startswith("memory: update MEMORY.md, memory/2026-11-02.md (+3 sections)")
    with pytest.raises(VcsError, match="nothing to commit"):
        repo.commit()
    assert MemoryRepo(ws, include_sessions=True).commit().files[0].path == "sessions/s1.jsonl"


def test_secret_refusal_lists_file_line_rule_and_force_commits(tmp_path: Path) -> None:
    ws = workspace(tmp_path, {"MEMORY.md": "# M\n"})
    git.Repo.init(tmp_path)
    (tmp_path / "other.txt").write_text("staged by the user\n", encoding="utf-8")
    git.Repo(tmp_path).git.add("other.txt")
    repo = MemoryRepo(ws)
    repo.commit(message="start")
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "k.md").write_text(f"# K\n\n- {SECRET}\n", encoding="utf-8")
    with pytest.raises(SecretsInCommit) as info:
        repo.commit()
    assert info.value.findings == [("memory/k.md", 3, "github-pat")]
    assert "memory/k.md:3 github-pat" in str(info.value)
    result = repo.commit(force=True, message="with key")
    g = git.Repo(tmp_path)
    assert g.head.commit.hexsha == result.sha
    assert "other.txt" not in g.git.ls_tree("-r", "--name-only", "HEAD").split(), "user-staged files stay out"
    # Deleting a memory file is committed too.
    (tmp_path / "memory" / "k.md").unlink()
    assert [(f.path, f.status) for f in repo.commit().files] == [("memory/k.md", "D")]


def test_history_of_file_and_line_and_blame(tmp_path: Path) -> None:
    ws = workspace(tmp_path, {"MEMORY.md": "# M\n- a\n- b\n"})
    repo = MemoryRepo(ws)
    first = repo.commit(init_repo=True, message="one")
    (tmp_path / "MEMORY.md").write_text("# M\n- a\n- b2\n", encoding="utf-8")
    second = repo.commit(message="two")
    assert [e.sha for e in repo.history("MEMORY.md")] == [second.sha, first.sha]
    assert [e.sha for e in repo.history("MEMORY.md", 2)] == [first.sha]
    blame = BlameCache(tmp_path)
    assert blame.line("MEMORY.md", 3).sha == second.sha  # type: ignore[union-attr]
    assert blame.line("MEMORY.md", 2).summary == "one"  # type: ignore[union-attr]
    assert blame.line("MEMORY.md", 99) is None
    assert parse_porcelain("") == []


def _git(root: Path, *args: str) -> str:
    import subprocess

    done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)
    return done.stdout + done.stderr


def test_a_workspace_in_a_folder_of_a_larger_repository_commits_and_shows_history(tmp_path: Path) -> None:
    """Pathspecs were written from the repository's top but read from the workspace folder git runs in:
    commit found "nothing to commit", log printed nothing and log of a line asked for notes/notes/..."""
    _git(tmp_path, "init", "-q")
    (tmp_path / "README.md").write_text("the user's repository\n", encoding="utf-8")
    ws = workspace(tmp_path / "notes", {"MEMORY.md": "# M\n- a\n- b\n"})
    repo = MemoryRepo(ws)
    first = repo.commit(message="one")
    (tmp_path / "notes" / "MEMORY.md").write_text("# M\n- a\n- b2\n", encoding="utf-8")
    second = repo.commit(message="two")
    assert _git(tmp_path, "ls-files").split() == ["notes/MEMORY.md"]  # (not the user's README)
    assert [e.sha for e in repo.history("MEMORY.md")] == [second.sha, first.sha]
    assert [e.sha for e in repo.history("MEMORY.md", 3)] == [second.sha, first.sha]
    assert [e.sha for e in repo.history("MEMORY.md", 2)] == [first.sha]


def test_a_deletion_or_rename_staged_by_git_is_committed(tmp_path: Path) -> None:
    ws = workspace(tmp_path, {"MEMORY.md": "# M\n", "memory/c.md": "# C\n", "memory/d.md": "# D\n"})
    repo = MemoryRepo(ws)
    repo.commit(init_repo=True)
    _git(tmp_path, "rm", "-q", "memory/c.md")
    _git(tmp_path, "mv", "memory/d.md", "memory/e.md")
    repo.commit(message="cleanup")  # `git add` of the gone paths failed: "did not match any files"
    assert sorted(_git(tmp_path, "ls-files").split()) == ["MEMORY.md", "memory/e.md"]
    assert _git(tmp_path, "status", "--porcelain") == ""


@pytest.mark.parametrize("operation", ["merge", "rebase"])
def test_nothing_is_staged_or_committed_in_a_conflict(tmp_path: Path, operation: str) -> None:
    """A commit during a conflicted merge staged the conflict markers (git then took it as resolved); in
    a rebase it committed them."""
    ws = workspace(tmp_path, {"MEMORY.md": "# M\n- the office is in Paris\n"})
    repo = MemoryRepo(ws)
    repo.commit(init_repo=True, message="base")
    main = _git(tmp_path, "branch", "--show-current").strip()
    _git(tmp_path, "checkout", "-q", "-b", "other")
    (tmp_path / "MEMORY.md").write_text("# M\n- the office is in Lyon\n", encoding="utf-8")
    repo.commit(message="lyon")
    _git(tmp_path, "checkout", "-q", main)
    (tmp_path / "MEMORY.md").write_text("# M\n- the office is in Nice\n", encoding="utf-8")
    repo.commit(message="nice")
    if operation == "merge":
        _git(tmp_path, "merge", "-q", "other")
    else:
        _git(tmp_path, "checkout", "-q", "other")
        _git(tmp_path, "rebase", "-q", main)
    assert "<<<<<<<" in (tmp_path / "MEMORY.md").read_text(encoding="utf-8")
    head = _git(tmp_path, "rev-parse", "HEAD")
    with pytest.raises(VcsError, match="in progress"):
        repo.commit(message="in the middle")
    assert _git(tmp_path, "ls-files", "--unmerged").strip()  # still a conflict for the user to resolve
    assert _git(tmp_path, "rev-parse", "HEAD") == head


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the repository another owner")
def test_a_repository_of_another_owner_is_refused_by_git_then_trusted_by_safe_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """git's "dubious ownership" refusal read as "no repository": --init then made a nested repository
    inside the user's, and the user's safe.directory was never read (the global config is not)."""
    from mnemo.editor import vcs_git

    top = tmp_path / "repo"
    top.mkdir()
    _git(top, "init", "-q")
    ws = workspace(top / "notes", {"MEMORY.md": "# M\n- a\n"})
    for folder, dirs, files in os.walk(top):
        for name in [folder, *(os.path.join(folder, n) for n in dirs + files)]:
            os.lchown(name, 12345, 12345)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")

    def forget_global_config() -> None:  # (read once a process)
        for cached in ("_safe_directories", "_user_identity"):
            getattr(vcs_git, cached).cache_clear() if hasattr(vcs_git, cached) else None

    try:
        forget_global_config()
        with pytest.raises(VcsError, match="dubious ownership"):
            MemoryRepo(ws).commit(init_repo=True)
        assert not (top / "notes" / ".git").exists()  # no repository made inside the user's
        (home / ".gitconfig").write_text(f"[safe]\n\tdirectory = {top}\n", encoding="utf-8")
        forget_global_config()
        MemoryRepo(ws).commit(message="trusted")
        assert "notes/MEMORY.md" in _git(top, "-c", f"safe.directory={top}", "ls-files")
    finally:
        forget_global_config()
