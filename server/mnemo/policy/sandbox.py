"""Run one exec command inside bubblewrap, with rlimits, a wall-clock timeout and capped output.

The sandbox, as root and as a user (docs/security.md, "Sandbox"):

* no privilege inside: a user namespace of its own in which the command runs as uid/gid 65534, every
  capability dropped (``--cap-drop ALL``), ``no_new_privs``, no further user namespaces
  (``--disable-userns``), and the seccomp filter of :mod:`mnemo.policy.seccomp` (no mount, umount,
  pivot_root, ptrace, keyctl, bpf, unshare, setns or namespace-creating clone): the command cannot undo its
  own mounts;
* the host's root read-only, a private ``/tmp``, ``/dev`` and ``/proc``, the real home hidden under an empty
  tmpfs (unless the workspace lies in it), the workspace the only writable place, and inside it
  :data:`PROTECTED` (``.git/``, ``.mnemo/``, ``mnemo.toml``, ``MEMORY.md``) bound read-only unless granted;
* every other namespace unshared (no network unless granted, or only ``policy.network_domains`` through
  :mod:`mnemo.policy.netproxy`; a new PID namespace), killed with its parent, a new session (no terminal
  injection), a minimal environment (no API keys); rlimits (CPU seconds, address space, file size, open
  files) set before ``exec``; at the end the whole process group is killed.

bwrap is probed once per process with all of that, and the probe checks from inside that it holds
(``CapEff`` 0, ``NoNewPrivs`` 1, ``Seccomp`` 2, a non-zero uid). When ``bwrap`` is missing, or the kernel
refuses any part of it (at the probe or when a run is set up), :class:`SandboxUnavailable` is raised with the
reason: a command is never run unsandboxed, nor with fewer protections. Install bwrap with
``apt-get install -y bubblewrap``.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from mnemo.policy.seccomp import UnsupportedArch, filter_program
from mnemo.policy.supervise import SandboxResult, rlimits, supervise

if TYPE_CHECKING:
    from mnemo.policy.netproxy import NetWiring, NetworkAllowlist, NetworkEvent

INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: sudo apt-get install -y bubblewrap; Fedora: dnf install bubblewrap)"
)
HOST_RUN_DIRS: tuple[str, ...] = (".vscode", ".venv", ".devcontainer")
"""Workspace folders whose content a host program runs outside the sandbox: the editor's settings and tasks
(VS Code runs a folder-open task, or the ``mnemo.server.command`` they name), the virtualenv whose
``bin/mnemo`` the extension falls back to, a dev container's build. Protected as mnemo's own settings."""
PROTECTED: tuple[str, ...] = (".git", ".mnemo", "mnemo.toml", "MEMORY.md", "plugins", *HOST_RUN_DIRS)
"""Workspace entries bound read-only inside the sandbox (a missing one is held by an empty placeholder);
``plugins/`` holds code the gateway loads unsandboxed (:mod:`mnemo.gateway.plugins`). ``.mnemo`` is not
even readable: an empty folder stands for it (its sockets reach the index writer)."""
_PROTECTED_IF_PRESENT = ("memory.md",)
_PROTECTED_DIRS = (".git", ".mnemo", "plugins", *HOST_RUN_DIRS)
_HIDDEN = (".mnemo",)
"""Protected entries replaced by an empty read-only folder: a read-only bind stops writes, not a
``connect()`` to a Unix socket in it (the index-sharing socket answers "yield", a re-index, feedback)."""
HIDDEN_RUN = "/run"
"""Hidden under an empty tmpfs (host sockets: D-Bus, systemd, docker, containerd); the resolver's folder
is bound back for DNS only with the whole network (``network = true``): its varlink socket resolves any
name without a network, so elsewhere it would be a way out (``<secret>.attacker.example``)."""
_RESOLVER = "/run/systemd/resolve"
SANDBOX_ID = 65534
"""The uid and gid a command runs as inside its user namespace (``nobody``), whoever runs mnemo."""
_probe: tuple[str, str] | None = None  # (bwrap path, "") when usable, ("", why) when not


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or the kernel refused part of the sandbox; nothing was run."""


@functools.lru_cache(maxsize=1)
def _filter() -> bytes:
    return filter_program()


def _seccomp_fd() -> int:
    """A pipe's read end holding the filter (bwrap reads it to the end, then closes it)."""
    read_fd, write_fd = os.pipe()
    try:
        os.write(write_fd, _filter())  # < 1 KiB: fits the pipe buffer, never blocks
    finally:
        os.close(write_fd)
    return read_fd


def _confinement_failures(status: str) -> list[str]:
    """What ``/proc/self/status`` read inside the sandbox says is missing from the confinement."""
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    none = "0000000000000000"
    want = {"CapEff": none, "CapPrm": none, "CapBnd": none, "NoNewPrivs": "1", "Seccomp": "2"}
    failures = [
        f"{k} is {fields.get(k, '?').strip()}, not {v}"
        for k, v in want.items()
        if fields.get(k, "").strip() != v
    ]
    if fields.get("Uid", "0").split()[:1] in (["0"], []):
        failures.append("the command runs as uid 0")
    return failures


def _probe_once(path: str) -> str:
    """Run the full sandbox once; '' when it starts and holds, else why not."""
    try:
        _filter()
    except UnsupportedArch as exc:
        return str(exc)
    with tempfile.TemporaryDirectory(prefix="mnemo-probe-") as tmp, _protected(Path(tmp), ()) as ro:
        fd = _seccomp_fd()
        try:
            argv = bwrap_argv("cat /proc/self/status", Path(tmp), bwrap=path, seccomp_fd=fd, read_only=ro)
            proc = subprocess.run(
                argv, capture_output=True, timeout=10, check=False, pass_fds=(fd,), env=minimal_env()
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return str(exc)
        finally:
            os.close(fd)
    if proc.returncode != 0:
        return proc.stderr.decode(errors="replace").strip() or f"exit code {proc.returncode}"
    return "; ".join(_confinement_failures(proc.stdout.decode(errors="replace")))


def _bwrap() -> str:
    global _probe
    if _probe is None:
        path = shutil.which("bwrap")
        if not path:
            _probe = ("", f"bubblewrap (bwrap) is not installed: {INSTALL_HINT}")
        else:
            why = _probe_once(path)
            _probe = (
                (path, "")
                if not why
                else ("", f"bubblewrap cannot confine commands here ({why}); {INSTALL_HINT}")
            )
    if not _probe[0]:
        raise SandboxUnavailable(_probe[1])
    return _probe[0]


def reset_probe() -> None:
    """Forget the cached bwrap probe (tests, or after installing bubblewrap)."""
    global _probe
    _probe = None


@contextlib.contextmanager
def _protected(ws: Path, writable: Collection[str]) -> Iterator[list[Path]]:
    """The workspace entries to bind read-only. A missing one gets an empty placeholder (a file, or a folder
    for ``.git``/``.mnemo``) so the command cannot create it; placeholders still empty afterwards are removed.
    A protected entry that is a symbolic link cannot be held in place: :class:`SandboxUnavailable`."""
    paths: list[Path] = []
    made: list[tuple[Path, int, bool]] = []
    try:
        for name in (*PROTECTED, *_PROTECTED_IF_PRESENT):
            if name in writable:
                continue
            path = ws / name
            if (
                path.is_symlink()
                and name in HOST_RUN_DIRS
                and not _under(str(path.resolve()), os.path.realpath(ws))
            ):
                continue  # a .venv kept elsewhere: read-only in the sandbox like the rest of the host
            if path.is_symlink():
                raise SandboxUnavailable(
                    f"{name} in the workspace is a symbolic link; it cannot be protected"
                )
            if not path.exists() and name in _PROTECTED_IF_PRESENT:
                continue
            if not path.exists():
                is_dir = name in _PROTECTED_DIRS
                try:
                    path.mkdir() if is_dir else path.touch(exist_ok=False)
                    made.append((path, path.stat().st_ino, is_dir))
                except OSError as exc:
                    raise SandboxUnavailable(f"cannot hold {name} in place: {exc}") from exc
            paths.append(path)
        yield paths
    finally:
        for path, ino, is_dir in reversed(made):
            with contextlib.suppress(OSError):  # filled in meanwhile (by mnemo itself): keep it
                st = path.lstat()
                if st.st_ino == ino and (is_dir or st.st_size == 0):
                    path.rmdir() if is_dir else path.unlink()


def bwrap_argv(
    command: str,
    workspace: Path,
    *,
    network: bool = False,
    bwrap: str = "bwrap",
    seccomp_fd: int,
    read_only: Collection[Path] = (),
    wiring: NetWiring | None = None,
) -> list[str]:
    """bwrap's command line; ``read_only`` are workspace entries bound read-only over the workspace;
    ``wiring``: the filtered network of ``policy.network_domains`` (:mod:`mnemo.policy.netproxy`)."""
    ws = str(Path(os.path.realpath(workspace)))
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    home = hidden_home(ws)
    if home is not None:
        argv += ["--tmpfs", home]  # hide the real home (keys, tokens) unless the workspace is in it
    if not _under(ws, HIDDEN_RUN):
        argv += ["--tmpfs", HIDDEN_RUN]
        if network and wiring is None and os.path.isdir(_RESOLVER):  # its socket answers any lookup
            argv += ["--ro-bind", _RESOLVER, _RESOLVER]
    argv += ["--bind", ws, ws]
    for path in read_only:  # top-level workspace entries, bound after (over) the workspace
        inside = os.path.join(ws, Path(path).name)
        if Path(path).name in _HIDDEN:
            argv += ["--tmpfs", inside, "--remount-ro", inside]
        else:
            argv += ["--ro-bind", inside, inside]
    for private in _private_dirs(ws):  # after the workspace: hidden even where the workspace holds it
        argv += ["--tmpfs", private, "--remount-ro", private]
    if wiring is not None:
        argv += wiring.binds
    argv += ["--chdir", ws, "--unshare-all", "--unshare-user", "--disable-userns"]
    argv += ["--uid", str(SANDBOX_ID), "--gid", str(SANDBOX_ID), "--cap-drop", "ALL"]
    if network and wiring is None:
        argv.append("--share-net")
    argv += [
        "--seccomp",
        str(seccomp_fd),
        "--die-with-parent",
        "--new-session",
        "--",
        *(wiring.prefix if wiring is not None else ()),
        "/bin/sh",
        "-c",
        command,
    ]
    return argv


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _private_dirs(ws: str) -> list[str]:
    """mnemo's own folders a command must neither read nor write, wherever the workspace lies: the audit
    key's (the HMAC key and the anchors of every workspace's log). The home folder is visible when the
    workspace lies in it, and writable when the workspace is the home folder itself. Only where the
    sandbox would show it (not under a hidden home or the private /tmp, unless the workspace holds it)."""
    try:
        from mnemo.policy.audit_format import default_key_path

        folder = os.path.realpath(default_key_path().parent)
    except ImportError:  # this module loaded on its own: platformdirs' answer on Linux
        data = os.environ.get("XDG_DATA_HOME") or os.path.join(Path.home(), ".local", "share")
        folder = os.path.realpath(os.path.join(data, "mnemo"))
    home = hidden_home(ws)
    covered = (home is not None and _under(folder, home)) or _under(folder, "/tmp")
    if not os.path.isdir(folder) or _under(ws, folder) or (covered and not _under(folder, ws)):
        return []
    return [folder]


def hidden_home(ws: str) -> str | None:
    """The real home folder, hidden in the sandbox unless the workspace lies in it (or holds it)."""
    home = os.path.realpath(Path.home())
    inside = (ws + "/").startswith(home + "/") or (home + "/").startswith(ws + "/")
    return None if home == "/" or inside else home


@contextlib.contextmanager
def _filtered_network(
    allowlist: NetworkAllowlist | None, on_event: Callable[[NetworkEvent], None] | None, ws: Path
) -> Iterator[NetWiring | None]:
    """The proxy of ``policy.network_domains`` for one run (None: no allowlist, nothing to start)."""
    if allowlist is None:
        yield None
        return  # (below: imported here, as this module also loads on its own in test_sandbox_escapes)
    from mnemo.policy import netproxy

    if (python := netproxy.forwarder_python(hidden_home(str(ws)))) is None:
        raise SandboxUnavailable("policy.network_domains needs a python3 the sandbox can see (/usr/bin)")
    with netproxy.confined(allowlist, on_event, python) as wiring:
        yield wiring


def minimal_env() -> dict[str, str]:
    """The environment a sandboxed command sees: no API keys or tokens from mnemo's own environment."""
    keep = ("PATH", "LANG", "LC_ALL", "TERM", "HOME", "USER", "LOGNAME", "TZ")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    return env


def run_sandboxed(
    argv_or_command: str,
    workspace: Path,
    *,
    network: bool = False,
    writable: Collection[str] = (),
    timeout_s: float = 30,
    max_output: int = 64_000,
    cpu_s: int = 60,
    mem_bytes: int = 2 * 1024**3,
    fsize_bytes: int = 256 * 1024**2,
    nofile: int = 256,
    network_domains: NetworkAllowlist | None = None,
    on_network: Callable[[NetworkEvent], None] | None = None,
) -> SandboxResult:
    """Run a shell command line in the sandbox and return what it did. Never runs it unsandboxed.

    ``writable`` names entries of :data:`PROTECTED` a policy rule grants write access to (default: none).
    ``network_domains``: the command reaches only these domains, through the filtering proxy of
    :mod:`mnemo.policy.netproxy` (``network`` is then ignored); ``on_network`` hears each connection.
    Raises :class:`SandboxUnavailable` when bwrap is missing or could not set the sandbox up.
    """
    bwrap = _bwrap()
    ws = Path(os.path.realpath(workspace))
    with _protected(ws, writable) as read_only, _filtered_network(network_domains, on_network, ws) as net:
        fd = _seccomp_fd()
        try:
            argv = bwrap_argv(
                argv_or_command,
                ws,
                network=network,
                bwrap=bwrap,
                seccomp_fd=fd,
                read_only=read_only,
                wiring=net,
            )
            start = time.monotonic()
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                preexec_fn=rlimits(cpu_s, mem_bytes, fsize_bytes, nofile),
                close_fds=True,
                pass_fds=(fd,),
                env={**minimal_env(), **(net.env if net is not None else {})},
            )
        except OSError as exc:
            raise SandboxUnavailable(f"bubblewrap failed to start: {exc}; {INSTALL_HINT}") from exc
        finally:
            os.close(fd)
        result = supervise(proc, start, timeout_s, max_output)
    if result.exit_code == 1 and not result.stdout and result.stderr.startswith("bwrap: "):
        # bwrap's own setup failed (the kernel refused a mount, namespace or the filter): nothing ran
        raise SandboxUnavailable(f"the sandbox could not be set up: {result.stderr.strip()}")
    return result
