"""The gateway's lifetime: SIGTERM/SIGHUP stop it cleanly; a closed stdin pipe or, with --exit-with-parent,
a dead parent stops it too (no orphaned gateway after the script or editor that started it is gone)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.lsp.test_no_orphans import alive, group_members

STOP_WITHIN_S = 20.0


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env.update(XDG_STATE_HOME=str(tmp_path / "state"), PYTHONUNBUFFERED="1", MNEMO_GATEWAY_TOKEN="t" * 32)
    return env


def _start(root: Path, tmp_path: Path, *extra: str, **popen: Any) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "mnemo", "gateway", "-w", str(root), "--port", "0", "--no-sync", *extra],
        env=_env(tmp_path),
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        **popen,
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if "mnemo gateway on ws://" in line:
            return proc
        if not line and proc.poll() is not None:
            break
    proc.kill()
    pytest.fail(f"the gateway did not start: {proc.stderr.read()}")


@pytest.mark.parametrize("how", ["stdin closed", "SIGHUP", "SIGTERM"])
def test_gateway_stops_cleanly(how: str, sample_workspace: Path, tmp_path: Path) -> None:
    proc = _start(sample_workspace, tmp_path)
    try:
        assert proc.stdin is not None and proc.stderr is not None
        if how == "stdin closed":
            proc.stdin.close()
        else:
            proc.send_signal(getattr(signal, how))
        assert proc.wait(STOP_WITHIN_S) == 0
        rest = proc.stderr.read()
        assert "stopping" in rest and "Traceback" not in rest, rest
        if how == "stdin closed":
            assert "stdin was closed" in rest
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


def test_gateway_with_exit_with_parent_dies_with_its_parent(sample_workspace: Path, tmp_path: Path) -> None:
    """A wrapper starts the gateway with stdin from /dev/null (no pipe to watch) and is SIGKILLed."""
    wrapper = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys; p = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL); "
            "print(p.pid, flush=True); p.wait()",
            sys.executable,
            "-m",
            "mnemo",
            "gateway",
            "-w",
            str(sample_workspace),
            "--port",
            "0",
            "--no-sync",
            "--exit-with-parent",
        ],
        env=_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,  # the gateway's, through the wrapper
        text=True,
        start_new_session=True,
    )
    listening = threading.Event()

    def drain(stream: Any) -> None:  # read to the end: the gateway never blocks on a full pipe
        for line in stream:
            if "mnemo gateway on ws://" in line:
                listening.set()

    try:
        assert wrapper.stdout is not None
        gateway_pid = int(wrapper.stdout.readline())
        threading.Thread(target=drain, args=(wrapper.stderr,), daemon=True).start()
        # Listening means the lifeline watches the parent it saw at start. A fixed 1 s sleep had no
        # margin: on a loaded machine the imports before that take longer, and a parent killed before
        # the gateway reads it is never missed.
        assert listening.wait(60), "the gateway did not start"
        assert alive(gateway_pid)
        os.kill(wrapper.pid, signal.SIGKILL)
        wrapper.wait(10)
        deadline = time.monotonic() + STOP_WITHIN_S
        while time.monotonic() < deadline and alive(gateway_pid):
            time.sleep(0.1)
        assert not alive(gateway_pid)
        assert group_members(wrapper.pid) == []
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(wrapper.pid, signal.SIGKILL)
