"""A sandboxed command can neither read nor replace the audit key or the anchors (red-team of the audit
log): with the workspace in the home folder, the usual layout, the sandbox leaves the home visible, so the
key's folder is hidden on its own; with the home folder as the workspace, it was even writable."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from mnemo.policy import run_sandboxed
from mnemo.policy import sandbox as sb
from mnemo.policy.audit import AuditLog
from tests.sandbox_support import bwrap_works as _bwrap_works


@pytest.fixture
def home_outside_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A home folder outside /tmp (the sandbox's /tmp is private, which would hide it by accident)."""
    base = Path(tempfile.mkdtemp(prefix="mnemo-redteam-", dir="/var/tmp"))
    monkeypatch.setenv("HOME", str(base / "home"))
    monkeypatch.setenv("XDG_DATA_HOME", str(base / "home" / ".local" / "share"))
    yield base / "home"
    shutil.rmtree(base, ignore_errors=True)


@pytest.mark.skipif(not _bwrap_works(), reason="bubblewrap unavailable")
@pytest.mark.parametrize("where", ["notes", "."])
def test_a_sandboxed_command_cannot_read_or_replace_the_key(home_outside_tmp: Path, where: str) -> None:
    """The usual layout, a workspace in the home folder (which the sandbox then leaves visible), and the
    home folder itself as the workspace (the key's folder inside the writable workspace)."""
    ws = (home_outside_tmp / where).resolve()
    ws.mkdir(parents=True, exist_ok=True)
    log = AuditLog(ws / ".mnemo" / "audit.jsonl")
    log.append("decision", {})
    key = log.key_path
    result = run_sandboxed(
        f"cat {key} | wc -c; echo x > {key}; echo y > {log.head_path}; ls -A {key.parent}", ws
    )
    assert result.stdout.split()[0] == "0", result.stdout + result.stderr
    assert "audit" not in result.stdout, result.stdout
    assert len(key.read_bytes()) == 32 and log.verify().ok


def test_the_key_folder_is_hidden_after_the_workspace_bind(home_outside_tmp: Path) -> None:
    """Checked on the command line too, for machines without bubblewrap."""
    ws = home_outside_tmp / "notes"
    ws.mkdir(parents=True)
    log = AuditLog(ws / ".mnemo" / "audit.jsonl")
    log.append("decision", {})
    argv = sb.bwrap_argv("true", ws, seccomp_fd=3)
    folder = str(log.key_path.parent.resolve())
    at = argv.index(folder)
    assert argv[at - 1] == "--tmpfs" and argv[at + 1 : at + 3] == ["--remount-ro", folder]
    assert at > argv.index("--bind")
