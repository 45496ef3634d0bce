"""mnemo's own Git is inert: a workspace's Git config can make it run nothing (issue 14, reproduction 3).

The agent can write the workspace, ``.git/config`` included; mnemo's commit, history and hover blame
run on the host, outside the sandbox. Each test writes a config that would run a command creating a
file outside the workspace, and asserts the file never appears and the key is named.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mnemo.editor.insights import LineInsight
from mnemo.editor.vcs import BlameCache, MemoryRepo, UnsafeRepositoryError
from mnemo.editor.vcs_git import InertGit, executable_key
from mnemo.workspace.layout import Workspace

CLEAN_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}


@pytest.fixture(autouse=True)
def identity(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"):
        monkeypatch.setenv(key, "Test")
    for key in ("GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"):
        monkeypatch.setenv(key, "test@example.com")


def git_config(root: Path, *args: str) -> None:
    """Write the repository's config as an agent would (plain git, not mnemo's)."""
    env = {**os.environ, **CLEAN_ENV}
    subprocess.run(["git", "config", "--file", str(root / ".git" / "config"), *args], check=True, env=env)


@pytest.fixture
def committed(tmp_path: Path) -> tuple[Path, Path, MemoryRepo]:
    """(workspace root, a host path outside it that no command may create, the memory repo)."""
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    (root / "MEMORY.md").write_text("# Memory\n- tea\n", encoding="utf-8")
    repo = MemoryRepo(Workspace(root, ignore=[".mnemo"]))
    repo.commit(init_repo=True, message="start")
    return root, tmp_path / "host-owned" / "pwned", repo


def _mnemo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mnemo", *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_fsmonitor_command_never_runs_and_is_named(committed: tuple[Path, Path, MemoryRepo]) -> None:
    root, marker, repo = committed
    marker.parent.mkdir()
    git_config(root, "core.fsmonitor", f"touch {marker}; false")
    (root / "MEMORY.md").write_text("# Memory\n- tea\n- coffee\n", encoding="utf-8")

    with pytest.raises(UnsafeRepositoryError, match=r"sets core\.fsmonitor") as info:
        repo.commit(message="x")
    assert info.value.key == "core.fsmonitor"
    with pytest.raises(UnsafeRepositoryError, match=r"core\.fsmonitor"):
        repo.history("MEMORY.md")
    with pytest.raises(UnsafeRepositoryError, match=r"core\.fsmonitor"):
        repo.history("MEMORY.md", 2)
    blamed = BlameCache(root).line("MEMORY.md", 1)
    assert blamed is not None and "core.fsmonitor" in blamed.error
    hover = LineInsight("MEMORY.md", 1, None, None, "", 0, None, None, 1.0, blamed)
    assert "refusing to run git" in hover.to_markdown() and "core.fsmonitor" in hover.to_markdown()

    for args in (["commit", "-w", str(root)], ["log", "-w", str(root), "MEMORY.md"]):
        done = _mnemo(*args)
        assert done.returncode != 0 and "core.fsmonitor" in done.stderr, done.stderr
    assert not marker.exists(), "a command from .git/config ran on the host"


def test_inert_flags_hold_even_without_the_config_check(committed: tuple[Path, Path, MemoryRepo]) -> None:
    """Defence in depth: the ``-c`` overrides alone keep fsmonitor, hooks and the pager from running."""
    root, marker, _ = committed
    marker.parent.mkdir()
    git_config(root, "core.fsmonitor", f"touch {marker}; false")
    git_config(root, "core.pager", f"touch {marker}; cat")
    hooks = root / ".git" / "hooks"
    for hook in ("pre-commit", "post-commit", "post-index-change"):
        (hooks / hook).write_text(f"#!/bin/sh\ntouch {marker}\n", encoding="utf-8")
        (hooks / hook).chmod(0o755)
    (root / "MEMORY.md").write_text("# Memory\n- changed\n", encoding="utf-8")
    git = InertGit(root)
    git("status", "--porcelain")
    git("add", "MEMORY.md")
    git("commit", "-q", "-m", "inert")
    git("log", "-p", "--max-count=1")
    assert not marker.exists()


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("core.hooksPath", ".h"),
        ("core.pager", "sh -c 'touch {marker}'"),
        ("core.sshCommand", "touch {marker}"),
        ("core.editor", "touch {marker}"),
        ("alias.st", "!touch {marker}"),
        ("include.path", "../evil.cfg"),
        ("includeIf.gitdir:/.path", "../evil.cfg"),
        ("filter.x.clean", "touch {marker}"),
        ("filter.x.process", "touch {marker}"),
        ("diff.md.textconv", "touch {marker}; cat"),
        ("diff.x.command", "touch {marker}"),
        ("merge.x.driver", "touch {marker}"),
        ("credential.helper", "!touch {marker}"),
        ("gpg.program", "touch {marker}"),
        ("uploadpack.packObjectsHook", "touch {marker}"),
        ("receivepack.x", "y"),
        ("sequence.editor", "touch {marker}"),
        ("pager.log", "touch {marker}"),
    ],
)
def test_every_executable_key_refuses_the_repository(
    committed: tuple[Path, Path, MemoryRepo], key: str, value: str
) -> None:
    root, marker, repo = committed
    marker.parent.mkdir()
    git_config(root, key, value.format(marker=marker))
    (root / ".gitattributes").write_text("*.md diff=md filter=x\n", encoding="utf-8")
    (root / "MEMORY.md").write_text("# Memory\n- changed\n", encoding="utf-8")
    with pytest.raises(UnsafeRepositoryError) as info:
        repo.commit()
    assert info.value.key.lower() == key.lower() and key.split(".")[0].lower() in str(info.value).lower()
    assert BlameCache(root).line("MEMORY.md", 1).error  # type: ignore[union-attr]
    assert not marker.exists()


def test_benign_config_still_commits(committed: tuple[Path, Path, MemoryRepo]) -> None:
    root, _, repo = committed
    for key, value in (("alias.st", "status -sb"), ("core.fsmonitor", "false"), ("user.name", "Ana")):
        git_config(root, key, value)
    (root / "MEMORY.md").write_text("# Memory\n- changed\n", encoding="utf-8")
    sha = repo.commit(message="ok").sha
    assert repo.history("MEMORY.md")[0].sha == sha
    assert BlameCache(root).line("MEMORY.md", 2).sha == sha  # type: ignore[union-attr]


def test_the_environment_and_global_config_are_not_inherited(
    committed: tuple[Path, Path, MemoryRepo], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, marker, repo = committed
    marker.parent.mkdir()
    evil = tmp_path / "evil.gitconfig"
    evil.write_text(f"[core]\n\tfsmonitor = touch {marker}; false\n\tpager = touch {marker}\n", "utf-8")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(evil))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", f"'core.fsmonitor'='touch {marker}; false'")
    monkeypatch.setenv("GIT_EXTERNAL_DIFF", f"touch {marker}")
    monkeypatch.setenv("GIT_PAGER", f"touch {marker}")
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere"))
    (root / "MEMORY.md").write_text("# Memory\n- env\n", encoding="utf-8")
    repo.commit(message="env")
    repo.history("MEMORY.md", 2)
    assert BlameCache(root).line("MEMORY.md", 2) is not None
    assert not marker.exists()


@pytest.mark.parametrize(
    ("key", "value", "refused"),
    [
        ("core.fsmonitor", "true", False),
        ("core.fsmonitor", "/usr/bin/watchman-hook", True),
        ("alias.co", "checkout", False),
        ("alias.x", " !sh", True),
        ("submodule.a.update", "!sh", True),
        ("submodule.a.update", "rebase", False),
        ("filter.Lfs.Thing.clean", "x", True),
        ("user.name", "!x", False),
        ("core.autocrlf", "true", False),
    ],
)
def test_executable_key(key: str, value: str, refused: bool) -> None:
    assert executable_key(key, value) is refused


@pytest.mark.parametrize("racy_seconds", [None, 0.0])
def test_a_config_rewritten_in_place_with_its_mtime_put_back_is_checked_again(
    committed: tuple[Path, Path, MemoryRepo], racy_seconds: float | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The config check is remembered by the files' stamps. A same-size rewrite in place (same inode)
    with its mtime put back (`touch -d`, or a write within the clock tick of the check) matched them,
    and git ran with an executable key unchecked. The ctime cannot be put back; a check within two
    seconds of a config's change is not remembered (with RACY_SECONDS = 0: the ctime alone)."""
    import time

    from mnemo.index import racy

    if racy_seconds is not None:
        monkeypatch.setattr(racy, "RACY_SECONDS", racy_seconds)
    root, marker, repo = committed
    marker.parent.mkdir()
    config = root / ".git" / "config"
    evil = f"[core]\n\tfsmonitor = touch {marker}; false\n"
    git_config(root, "alias.zz", "x" * len(evil))
    (root / "MEMORY.md").write_text("# Memory\n- tea\n- checked\n", encoding="utf-8")
    repo.commit(message="checked")
    blame = BlameCache(root)  # an editor's server keeps one: its config check is remembered by stamps
    assert blame.line("MEMORY.md", 1).error == ""  # type: ignore[union-attr]
    before = config.stat()
    text = config.read_text(encoding="utf-8")
    benign = f"[alias]\n\tzz = {'x' * len(evil)}\n"
    assert benign in text
    time.sleep(0.05)  # (a later clock tick for the ctime)
    rewritten = text.replace(benign, evil + " " * (len(benign) - len(evil) - 1) + "\n")
    assert len(rewritten.encode()) == before.st_size
    with config.open("r+", encoding="utf-8") as f:  # in place: the same inode
        f.write(rewritten)
    os.utime(config, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (config.stat().st_ino, config.stat().st_mtime_ns, config.stat().st_size) == (
        before.st_ino,
        before.st_mtime_ns,
        before.st_size,
    )
    blamed = blame.line("MEMORY.md", 1)
    assert blamed is not None and "core.fsmonitor" in blamed.error
    assert not marker.exists(), "a command from .git/config ran on the host"
