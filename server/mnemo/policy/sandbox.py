"""Run one exec command inside bubblewrap, with rlimits, a wall-clock timeout and capped output.

The sandbox: read-only root, the workspace bound read-write, a private ``/tmp``, ``/dev`` and ``/proc`` of
its own, the real home hidden under an empty tmpfs (unless the workspace lies in it), a minimal
environment (no API keys), every namespace unshared (no network unless granted, a new PID namespace), killed with its parent,
a new session (no terminal injection). rlimits (CPU seconds, address space, file size, open files) are
set in the child before ``exec``. At the end the whole process group is killed (SIGTERM, then SIGKILL).

When ``bwrap`` is missing or cannot start (probed once per process), :class:`SandboxUnavailable` is raised:
a command is never run unsandboxed. Install it with ``apt-get install -y bubblewrap``.
"""

from __future__ import annotations

import contextlib
import os
import resource
import selectors
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: sudo apt-get install -y bubblewrap; Fedora: dnf install bubblewrap)"
)
_probe: tuple[str, str] | None = None  # (bwrap path, "") when usable, ("", why) when not


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or cannot create namespaces here; nothing was run."""


@dataclass(frozen=True)
class SandboxResult:
    exit_code: int
    stdout: str
    stderr: str
    truncated: bool
    """Output went past ``max_output`` bytes (per stream): it was cut and the command stopped."""
    timed_out: bool
    killed: bool
    """The process group had to be killed (timeout, or it was still alive at the end)."""
    duration_s: float


def _bwrap() -> str:
    global _probe
    if _probe is None:
        path = shutil.which("bwrap")
        if not path:
            _probe = ("", f"bubblewrap (bwrap) is not installed: {INSTALL_HINT}")
        else:
            try:
                proc = subprocess.run(
                    [path, "--ro-bind", "/", "/", "--unshare-all", "--die-with-parent", "true"],
                    capture_output=True,
                    timeout=10,
                    check=False,
                )
                ok = proc.returncode == 0
                why = proc.stderr.decode(errors="replace").strip()
            except (OSError, subprocess.TimeoutExpired) as exc:
                ok, why = False, str(exc)
            _probe = (path, "") if ok else ("", f"bubblewrap cannot start here ({why}); {INSTALL_HINT}")
    if not _probe[0]:
        raise SandboxUnavailable(_probe[1])
    return _probe[0]


def reset_probe() -> None:
    """Forget the cached bwrap probe (tests, or after installing bubblewrap)."""
    global _probe
    _probe = None


def bwrap_argv(command: str, workspace: Path, *, network: bool = False, bwrap: str = "bwrap") -> list[str]:
    ws = str(Path(os.path.realpath(workspace)))
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    home = os.path.realpath(Path.home())
    if home != "/" and not (ws + "/").startswith(home + "/") and not (home + "/").startswith(ws + "/"):
        argv += ["--tmpfs", home]  # hide the real home (keys, tokens) unless the workspace is in it
    argv += ["--bind", ws, ws, "--chdir", ws, "--unshare-all"]
    if network:
        argv.append("--share-net")
    argv += ["--die-with-parent", "--new-session", "--", "/bin/sh", "-c", command]
    return argv


def minimal_env() -> dict[str, str]:
    """The environment a sandboxed command sees: no API keys or tokens from mnemo's own environment."""
    keep = ("PATH", "LANG", "LC_ALL", "TERM", "HOME", "USER", "LOGNAME", "TZ")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    return env


def _limits(cpu_s: int, mem_bytes: int, fsize_bytes: int, nofile: int) -> Callable[[], None]:
    def apply() -> None:
        for which, value in (
            (resource.RLIMIT_CPU, cpu_s),
            (resource.RLIMIT_AS, mem_bytes),
            (resource.RLIMIT_FSIZE, fsize_bytes),
            (resource.RLIMIT_NOFILE, nofile),
        ):
            resource.setrlimit(which, (value, value))

    return apply


def _kill_group(pgid: int, proc: subprocess.Popen[bytes], grace_s: float = 0.5) -> bool:
    """SIGTERM the group, then SIGKILL what is left; True when something had to be signalled."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    return True


def _drain(sel: selectors.BaseSelector, until: float) -> None:
    """Read and discard until every writer of the pipes is gone (bounded)."""
    while sel.get_map() and time.monotonic() < until:
        for key, _ in sel.select(timeout=0.1):
            if not os.read(key.fd, 65536):
                sel.unregister(key.fileobj)
    sel.close()


def run_sandboxed(
    argv_or_command: str,
    workspace: Path,
    *,
    network: bool = False,
    timeout_s: float = 30,
    max_output: int = 64_000,
    cpu_s: int = 60,
    mem_bytes: int = 2 * 1024**3,
    fsize_bytes: int = 256 * 1024**2,
    nofile: int = 256,
) -> SandboxResult:
    """Run a shell command line in the sandbox and return what it did. Never runs it unsandboxed."""
    argv = bwrap_argv(argv_or_command, workspace, network=network, bwrap=_bwrap())
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=_limits(cpu_s, mem_bytes, fsize_bytes, nofile),
            close_fds=True,
            env=minimal_env(),
        )
    except OSError as exc:
        raise SandboxUnavailable(f"bubblewrap failed to start: {exc}; {INSTALL_HINT}") from exc
    pgid = proc.pid
    buffers: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
    truncated = timed_out = False
    sel = selectors.DefaultSelector()
    assert proc.stdout is not None and proc.stderr is not None
    sel.register(proc.stdout, selectors.EVENT_READ, "stdout")
    sel.register(proc.stderr, selectors.EVENT_READ, "stderr")
    deadline = start + timeout_s
    while sel.get_map():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            timed_out = True
            break
        for key, _ in sel.select(timeout=min(remaining, 0.5)):
            chunk = os.read(key.fd, 65536)
            if not chunk:
                sel.unregister(key.fileobj)
                continue
            buf = buffers[key.data]
            room = max_output - len(buf)
            if len(chunk) > room:
                truncated = True
            buf += chunk[: max(room, 0)]
        if truncated:
            break
    killed = False
    if timed_out or truncated:
        killed = _kill_group(pgid, proc)
    try:
        exit_code = proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
    except subprocess.TimeoutExpired:
        timed_out = True
        killed = _kill_group(pgid, proc) or killed
        exit_code = proc.wait()
    killed = _kill_group(pgid, proc, grace_s=0.1) or killed  # stragglers that kept the group alive
    _drain(sel, until=time.monotonic() + 5.0)  # EOF: the PID namespace is torn down, its processes gone
    proc.stdout.close()
    proc.stderr.close()
    return SandboxResult(
        exit_code=exit_code,
        stdout=buffers["stdout"].decode("utf-8", errors="replace"),
        stderr=buffers["stderr"].decode("utf-8", errors="replace"),
        truncated=truncated,
        timed_out=timed_out,
        killed=killed,
        duration_s=time.monotonic() - start,
    )
