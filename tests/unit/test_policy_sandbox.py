"""Sandbox escape tests against real bubblewrap (skipped, loudly, where bwrap cannot start)."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from mnemo.policy import SandboxUnavailable, run_sandboxed
from mnemo.policy import sandbox as sb


def _bwrap_works() -> bool:
    try:
        sb._bwrap()
    except SandboxUnavailable:
        return False
    return True


pytestmark = pytest.mark.skipif(
    not _bwrap_works(), reason="bubblewrap unavailable: apt-get install -y bubblewrap"
)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "ws").mkdir()
    return tmp_path / "ws"


def _processes_with(marker: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def test_runs_in_workspace_and_writes_there(ws: Path) -> None:
    result = run_sandboxed("pwd; echo data > out.txt", ws)
    assert (result.exit_code, result.stdout.strip()) == (0, str(ws.resolve()))
    assert (ws / "out.txt").read_text() == "data\n"
    assert not (result.truncated or result.timed_out or result.killed)


@pytest.fixture
def outside_file() -> Iterator[Path]:
    path = Path("/var/tmp") / f"mnemo-outside-{uuid.uuid4().hex}.txt"
    path.write_text("original\n")
    yield path
    path.unlink()


def test_files_outside_the_workspace_cannot_be_modified(ws: Path, outside_file: Path) -> None:
    result = run_sandboxed(f"echo evil > {outside_file}; rm -f {outside_file}; touch /usr/mnemo-x", ws)
    assert "Read-only file system" in result.stderr
    assert outside_file.read_text() == "original\n"
    assert not Path("/usr/mnemo-x").exists()
    sibling = ws.parent / "sibling.txt"
    sibling.write_text("original\n")
    run_sandboxed(f"echo evil > {sibling}", ws)
    assert sibling.read_text() == "original\n"


def test_tmp_and_home_are_private(ws: Path) -> None:
    name = f"/tmp/mnemo-private-{uuid.uuid4().hex}"
    result = run_sandboxed(f"echo x > {name} && cat {name} && ls -A ~ | wc -l", ws)
    assert result.exit_code == 0 and result.stdout.split() == ["x", "0"]
    assert not Path(name).exists()


def test_environment_is_minimal(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MNEMO_TEST_API_KEY", "sk-secret")
    assert "sk-secret" not in run_sandboxed("env", ws).stdout


@pytest.fixture
def listener() -> Iterator[int]:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(5)
    yield server.getsockname()[1]
    server.close()


def test_no_network_unless_granted(ws: Path, listener: int) -> None:
    probe = f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {listener}), timeout=3); print('connected')\""
    denied = run_sandboxed(probe, ws)
    assert denied.exit_code != 0 and "connected" not in denied.stdout
    granted = run_sandboxed(probe, ws, network=True)
    assert granted.exit_code == 0 and "connected" in granted.stdout


def test_endless_output_is_capped(ws: Path) -> None:
    result = run_sandboxed("yes mnemo", ws, max_output=10_000, timeout_s=20)
    assert result.truncated and result.killed and not result.timed_out
    assert len(result.stdout) <= 10_000


def test_sigterm_ignoring_command_is_killed(ws: Path) -> None:
    result = run_sandboxed("trap '' TERM; while :; do :; done", ws, timeout_s=1)
    assert result.timed_out and result.killed and result.exit_code != 0


def test_fork_flood_is_contained_and_group_is_gone(ws: Path) -> None:
    marker = f"{31 + uuid.uuid4().int % 1000 / 1000:.3f}"
    result = run_sandboxed(
        f"i=0; while [ $i -lt 40 ]; do sleep {marker} & i=$((i+1)); done; wait", ws, timeout_s=1
    )
    assert result.timed_out and result.killed
    assert _processes_with(f"sleep {marker}") == []


def test_detached_children_die_with_the_sandbox(ws: Path) -> None:
    marker = f"{41 + uuid.uuid4().int % 1000 / 1000:.3f}"
    result = run_sandboxed(f"setsid sleep {marker} >/dev/null 2>&1 & echo started", ws, timeout_s=20)
    assert result.stdout.strip() == "started" and not result.timed_out
    assert _processes_with(f"sleep {marker}") == []


def test_file_size_limit(ws: Path) -> None:
    result = run_sandboxed("head -c 3000000 /dev/zero > big.bin", ws, fsize_bytes=1_000_000)
    assert result.exit_code != 0
    assert (ws / "big.bin").stat().st_size <= 1_000_000


def test_missing_bwrap_fails_closed(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sb.shutil, "which", lambda name: None)
    sb.reset_probe()
    try:
        with pytest.raises(SandboxUnavailable, match="apt-get install -y bubblewrap"):
            run_sandboxed("touch ran.txt", ws)
        assert not (ws / "ran.txt").exists()
    finally:
        sb.reset_probe()
    assert os.environ.get("PATH")
