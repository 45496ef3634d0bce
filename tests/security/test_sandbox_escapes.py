"""Issue 14, reproduction 1: a command run by ``mnemo exec`` tries to get out of the bubblewrap sandbox.

Each attack runs inside the real sandbox, as the test user (root in CI), and must fail: ctypes
``umount2``/``mount`` (seen: it used to succeed and then write on the host), namespace creation, ptrace,
key rings and bpf, writes to a host folder the test owns, writes to the protected workspace entries. Each
has a benign twin that must still work (writing memory/x.md, fork, threads). Skipped, loudly, where bwrap
cannot start.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from mnemo.policy import SandboxUnavailable, run_sandboxed
from mnemo.policy import sandbox as sb
from mnemo.policy.seccomp import syscall_numbers
from tests.sandbox_support import bwrap_works as _bwrap_works

pytestmark = [
    pytest.mark.skipif(not _bwrap_works(), reason="bubblewrap unavailable: apt-get install -y bubblewrap"),
    pytest.mark.timeout(60),
]

EPERM = 1

# Runs inside the sandbox: each attempt's errno (0 = it worked), as JSON on the last line of stdout.
ATTACKS = r"""
import ctypes, json, os, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
NR = json.loads(sys.argv[1])
HOST = sys.argv[2:]
MS_REMOUNT, MS_BIND, MNT_DETACH = 32, 4096, 2

def call(fn, *args):
    ctypes.set_errno(0)
    return 0 if fn(*args) != -1 else ctypes.get_errno()

def sys_(name, *args):
    ctypes.set_errno(0)
    return 0 if libc.syscall(NR[name], *[ctypes.c_long(a) for a in args]) != -1 else ctypes.get_errno()

out = {}
out["umount2 /tmp"] = call(libc.umount2, b"/tmp", MNT_DETACH)
out["remount / rw"] = call(libc.mount, None, b"/", None, MS_REMOUNT | MS_BIND, None)
out["mount tmpfs"] = call(libc.mount, b"none", b"/mnt", b"tmpfs", 0, None)
out["pivot_root"] = sys_("pivot_root", 0, 0)
out["chroot"] = call(libc.chroot, b"/tmp")
out["unshare newns"] = call(libc.unshare, 0x00020000)
out["unshare newuser"] = call(libc.unshare, 0x10000000)
out["setns"] = call(libc.setns, os.open("/proc/self/ns/mnt", os.O_RDONLY), 0)
pid = libc.syscall(NR["clone"], ctypes.c_long(0x10000000 | 17), 0, 0, 0, 0)  # CLONE_NEWUSER | SIGCHLD
if pid == 0:
    os._exit(0)
out["clone newuser"] = 0 if pid != -1 else ctypes.get_errno()
if pid > 0:
    os.waitpid(pid, 0)
out["clone3"] = sys_("clone3", 0, 0)
out["keyctl"] = sys_("keyctl", 0, 0, 0)
out["add_key"] = sys_("add_key", 0, 0, 0, 0, 0)
out["bpf"] = sys_("bpf", 0, 0, 0)
out["perf_event_open"] = sys_("perf_event_open", 0, 0, 0, 0, 0)
out["userfaultfd"] = sys_("userfaultfd", 0)
child = subprocess.Popen(["sleep", "5"])
out["ptrace attach"] = call(libc.ptrace, ctypes.c_long(16), ctypes.c_long(child.pid), None, None)
out["ptrace traceme"] = call(libc.ptrace, ctypes.c_long(0), ctypes.c_long(0), None, None)
child.kill()
child.wait()
for path in HOST:
    try:
        with open(path, "w") as fh:
            fh.write("escaped")
        out["write " + path] = 0
    except OSError as exc:
        out["write " + path] = exc.errno
print(json.dumps(out))
"""


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    (ws / ".git" / "config").write_text("[core]\n\tbare = false\n")
    (ws / ".mnemo").mkdir()
    (ws / ".mnemo" / "audit.jsonl").write_text('{"seq": 1}\n')
    (ws / "mnemo.toml").write_text("[policy]\nnetwork = false\n")
    (ws / "MEMORY.md").write_text("# Memory\n")
    (ws / "memory").mkdir()
    return ws


@pytest.fixture
def host_dirs(tmp_path: Path) -> Iterator[list[Path]]:
    """Folders outside the workspace that the test owns: one under /tmp (hidden by the sandbox's own /tmp,
    reachable if that tmpfs is unmounted), one under /var/tmp (visible read-only)."""
    var = Path("/var/tmp") / f"mnemo-escape-{uuid.uuid4().hex}"
    var.mkdir()
    (tmp_path / "host").mkdir()
    yield [tmp_path / "host", var]
    shutil.rmtree(var, ignore_errors=True)


def _python(ws: Path) -> None:
    if run_sandboxed("command -v python3", ws, timeout_s=20).exit_code != 0:
        pytest.skip("no python3 on the sandbox's PATH")


def test_ctypes_mount_escape_and_privileged_calls_fail(ws: Path, host_dirs: list[Path]) -> None:
    _python(ws)
    (ws / "attack.py").write_text(ATTACKS)
    targets = [str(d / "pwned.txt") for d in host_dirs]
    nrs = json.dumps(syscall_numbers())
    result = run_sandboxed(f"python3 attack.py '{nrs}' {' '.join(targets)}", ws, timeout_s=30)
    assert result.exit_code == 0, result.stderr
    errnos = json.loads(result.stdout.strip().splitlines()[-1])
    writes = {k: v for k, v in errnos.items() if k.startswith("write ")}
    calls = {k: v for k, v in errnos.items() if not k.startswith("write ")}
    assert calls.pop("clone3") == 38  # ENOSYS: libc falls back to clone, whose flags the filter reads
    assert calls == dict.fromkeys(calls, EPERM)
    assert all(v != 0 for v in writes.values()), writes
    for d in host_dirs:
        assert list(d.iterdir()) == []


def test_shell_escape_attempts_fail_and_leave_the_host_alone(ws: Path, host_dirs: list[Path]) -> None:
    hidden, visible = host_dirs
    result = run_sandboxed(
        "for c in 'unshare -m true' 'unshare -U true' 'unshare -r true' 'unshare -n true'"
        " 'mount -o remount,rw /' 'umount -l /tmp' 'mount -t tmpfs none /mnt'; do"
        ' $c 2>/dev/null && echo "ESCAPED: $c"; done;'
        f" echo x > {visible}/a.txt; touch {hidden}/b.txt; mkdir {visible}/d; ln -s / {visible}/l; true",
        ws,
        timeout_s=30,
    )
    assert "ESCAPED" not in result.stdout, result.stdout
    assert "Read-only file system" in result.stderr
    assert list(visible.iterdir()) == [] and list(hidden.iterdir()) == []


def test_no_capabilities_no_new_privs_filter_on_and_not_root(ws: Path) -> None:
    status = run_sandboxed("cat /proc/self/status", ws, timeout_s=20)
    fields = dict(line.split(":", 1) for line in status.stdout.splitlines() if ":" in line)
    for cap in ("CapEff", "CapPrm", "CapBnd", "CapAmb", "CapInh"):
        assert fields[cap].strip() == "0000000000000000", cap
    assert fields["NoNewPrivs"].strip() == "1"
    assert fields["Seccomp"].strip() == "2"
    assert fields["Uid"].split()[0] != "0" and fields["Gid"].split()[0] != "0"
    assert sb._confinement_failures(status.stdout) == []


def test_protected_workspace_entries_are_read_only(ws: Path) -> None:
    before = {
        p: (ws / p).read_bytes() for p in ("MEMORY.md", "mnemo.toml", ".git/config", ".mnemo/audit.jsonl")
    }
    attempts = [
        ": > MEMORY.md", "echo x >> mnemo.toml", ": > .git/config", ": > .mnemo/audit.jsonl",
        "rm -f MEMORY.md", "mv mnemo.toml m.toml", "rm -rf .git", "mv .mnemo m", "touch .git/hooks",
        "ln -s /tmp .mnemo/link", "chmod 777 MEMORY.md",
    ]  # fmt: skip
    script = "; ".join(
        f"( {a} ) 2>/dev/null && echo 'WROTE: {a}'" for a in attempts
    )  # dash exits on a failed : >
    result = run_sandboxed(
        f"{script}; mkdir -p memory && echo note > memory/x.md && echo benign-ok", ws, timeout_s=20
    )
    assert "WROTE" not in result.stdout, result.stdout
    assert "benign-ok" in result.stdout  # the benign twin: a normal memory file is written
    assert (ws / "memory" / "x.md").read_text() == "note\n"
    assert {p: (ws / p).read_bytes() for p in before} == before
    assert sorted(p.name for p in ws.iterdir()) == [".git", ".mnemo", "MEMORY.md", "memory", "mnemo.toml"]
    assert sorted(p.name for p in (ws / ".git").iterdir()) == ["config"]


def test_missing_protected_entries_cannot_be_created(tmp_path: Path) -> None:
    ws = tmp_path / "bare"
    ws.mkdir()
    result = run_sandboxed(
        "echo '[policy]' > mnemo.toml; echo x > MEMORY.md; mkdir -p .git/hooks; echo x > .git/config;"
        " echo x > .mnemo/audit.jsonl; echo ok > notes.md",
        ws,
        timeout_s=20,
    )
    assert "Read-only file system" in result.stderr
    assert sorted(p.name for p in ws.iterdir()) == ["notes.md"]  # placeholders gone, nothing created


def test_a_granted_entry_is_writable_and_only_that_one(ws: Path) -> None:
    result = run_sandboxed(
        "echo granted >> MEMORY.md; echo x >> mnemo.toml", ws, writable=("MEMORY.md",), timeout_s=20
    )
    assert (ws / "MEMORY.md").read_text() == "# Memory\ngranted\n"
    assert (ws / "mnemo.toml").read_text() == "[policy]\nnetwork = false\n"
    assert "Read-only file system" in result.stderr


def test_symlinked_protected_entry_fails_closed(ws: Path) -> None:
    (ws / "MEMORY.md").unlink()
    (ws / "MEMORY.md").symlink_to("memory/main.md")
    with pytest.raises(SandboxUnavailable, match=r"MEMORY\.md .*symbolic link"):
        run_sandboxed("touch ran.txt", ws, timeout_s=20)
    assert not (ws / "ran.txt").exists()


def test_benign_twins_fork_threads_and_subprocesses_work(ws: Path) -> None:
    _python(ws)
    result = run_sandboxed(
        'python3 -c \'import threading, subprocess; t = threading.Thread(target=print, args=("thread",));'
        ' t.start(); t.join(); print(subprocess.run(["echo", "child"], capture_output=True, text=True).stdout)\';'
        " (echo sub) | cat; id -u",
        ws,
        timeout_s=20,
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout.split() == ["thread", "child", "sub", str(sb.SANDBOX_ID)]


def test_a_sandbox_that_cannot_be_set_up_fails_closed(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sb._bwrap()  # probed with the real filter; the next run's filter is refused by bwrap at setup
    monkeypatch.setattr(sb, "_filter", lambda: b"\x00" * 5)
    with pytest.raises(SandboxUnavailable, match=r"could not be set up: bwrap: .*seccomp"):
        run_sandboxed("touch ran.txt", ws, timeout_s=20)
    assert not (ws / "ran.txt").exists()


def test_a_probe_that_finds_less_confinement_refuses(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sb, "_filter", lambda: b"\x00" * 5)
    sb.reset_probe()
    try:
        with pytest.raises(SandboxUnavailable, match="cannot confine commands here"):
            run_sandboxed("touch ran.txt", ws, timeout_s=20)
        assert not (ws / "ran.txt").exists()
    finally:
        sb.reset_probe()
    assert os.environ.get("PATH")


AS_USER = r"""
import importlib.util, json, sys, types
from pathlib import Path
server, ws, host = sys.argv[1:4]
for name in ("mnemo", "mnemo.policy"):  # load the sandbox's modules alone, without the package's other imports
    pkg = types.ModuleType(name)
    pkg.__path__ = []
    sys.modules[name] = pkg
for name in ("seccomp", "supervise", "sandbox"):
    spec = importlib.util.spec_from_file_location(f"mnemo.policy.{name}", f"{server}/mnemo/policy/{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
sb = sys.modules["mnemo.policy.sandbox"]
try:
    status = sb.run_sandboxed("cat /proc/self/status", Path(ws), timeout_s=20)
    attack = sb.run_sandboxed(
        f"echo x > {host}/pwned.txt; echo x > MEMORY.md; unshare -U true && echo UNSHARED; echo ok > note.md", Path(ws), timeout_s=20
    )
except sb.SandboxUnavailable as exc:
    print(json.dumps({"unavailable": str(exc)}))
else:
    print(json.dumps({"failures": sb._confinement_failures(status.stdout), "stdout": attack.stdout, "stderr": attack.stderr}))
"""


def _as_nobody() -> None:
    os.setgid(sb.SANDBOX_ID)
    os.setgroups([])
    os.setuid(sb.SANDBOX_ID)


def _runs_as_nobody(python: str, server: str) -> bool:
    import subprocess

    try:
        check = [python, "-c", "import mnemo"]
        env = {"PYTHONPATH": server}
        proc = subprocess.run(
            check, env=env, preexec_fn=_as_nobody, capture_output=True, timeout=20, check=False
        )
    except OSError:
        return False
    return proc.returncode == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become an unprivileged user")
def test_as_an_unprivileged_user_the_same_confinement_holds() -> None:
    import subprocess
    import sys
    import tempfile

    server = str(Path(sb.__file__).resolve().parents[2])
    pythons = [p for p in (sys.executable, shutil.which("python3"), "/usr/bin/python3") if p]
    usable = [p for p in pythons if _runs_as_nobody(p, server)]
    if not usable:
        pytest.skip("no Python interpreter (and mnemo source) readable by an unprivileged user")
    root = Path(tempfile.mkdtemp(prefix="mnemo-user-", dir="/var/tmp"))
    try:
        ws, host = root / "ws", root / "host"
        for d in (root, ws, host):
            d.mkdir(exist_ok=True)
            os.chown(d, sb.SANDBOX_ID, sb.SANDBOX_ID)
        (ws / "MEMORY.md").write_text("# Memory\n")
        os.chown(ws / "MEMORY.md", sb.SANDBOX_ID, sb.SANDBOX_ID)
        proc = subprocess.run(
            [usable[0], "-c", AS_USER, server, str(ws), str(host)],
            preexec_fn=_as_nobody, capture_output=True, text=True, timeout=40, check=False,
            env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(root)},
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        report = json.loads(proc.stdout.strip().splitlines()[-1])
        if "unavailable" in report:  # no unprivileged user namespaces here: refused, and nothing ran
            assert sorted(p.name for p in ws.iterdir()) == ["MEMORY.md"]
            pytest.skip(f"the sandbox fails closed for an unprivileged user here: {report['unavailable']}")
        assert report["failures"] == []
        assert "UNSHARED" not in report["stdout"] and "Read-only file system" in report["stderr"]
        assert list(host.iterdir()) == []  # writable by this user on the host, not from the sandbox
        assert (ws / "MEMORY.md").read_text() == "# Memory\n"
        assert (ws / "note.md").read_text() == "ok\n"
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_what_an_editor_runs_on_the_host_cannot_be_written(tmp_path: Path) -> None:
    """An allowed command wrote .vscode/settings.json with mnemo.server.command = /bin/sh: the VS Code
    extension ran it on the host at its next start (a folder-open task would too; .venv/bin/mnemo is its
    fallback command)."""
    ws = tmp_path / "bare"
    ws.mkdir()
    (ws / ".venv" / "bin").mkdir(parents=True)
    result = run_sandboxed(
        "mkdir -p .vscode; echo '{}' > .vscode/settings.json; echo x > .venv/bin/mnemo;"
        " mkdir -p .devcontainer; echo ok > notes.md",
        ws,
        timeout_s=20,
    )
    assert "Read-only file system" in result.stderr
    assert sorted(p.name for p in ws.iterdir()) == [".venv", "notes.md"]  # placeholders gone
    assert list((ws / ".venv" / "bin").iterdir()) == []


def test_host_unix_sockets_are_out_of_reach(ws: Path) -> None:
    """A read-only bind stops writes, not a connect() to a Unix socket: a sandboxed command reached the
    index writer's socket in .mnemo/ (and told a daemon to yield), and any socket under /run."""
    import socket

    _python(ws)
    in_run = Path("/run") / f"mnemo-test-{uuid.uuid4().hex[:8]}"
    sockets = [ws / ".mnemo" / "memory.sock"]
    try:
        in_run.mkdir()
        sockets.append(in_run / "host.sock")
    except OSError:
        pass  # (/run not writable here: the workspace's socket alone)
    listeners = []
    try:
        for path in sockets:
            listener = socket.socket(socket.AF_UNIX)
            listener.bind(str(path))
            listener.listen(1)
            os.chmod(path, 0o777)
            listeners.append(listener)
        probe = "; ".join(
            f"python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect('{path}'); print('CONNECTED')\""
            for path in sockets
        )
        result = run_sandboxed(probe + "; ls -a .mnemo", ws, timeout_s=30)
        assert "CONNECTED" not in result.stdout, result.stdout
        assert "audit.jsonl" not in result.stdout  # .mnemo is an empty folder inside
        assert (ws / ".mnemo" / "audit.jsonl").read_text() == '{"seq": 1}\n'
    finally:
        for listener in listeners:
            listener.close()
        for path in sockets:
            path.unlink(missing_ok=True)
        shutil.rmtree(in_run, ignore_errors=True)


def test_a_virtualenv_linked_from_elsewhere_is_left_as_the_host_has_it(tmp_path: Path) -> None:
    """.venv protected made a workspace whose .venv is a link to a virtualenv kept elsewhere fail every
    command; outside the workspace it is read-only in the sandbox anyway. One that links into the workspace
    still fails closed."""
    ws = tmp_path / "ws"
    ws.mkdir()
    elsewhere = tmp_path / "venvs" / "project"
    (elsewhere / "bin").mkdir(parents=True)
    (ws / ".venv").symlink_to(elsewhere)
    result = run_sandboxed("echo x > .venv/bin/mnemo; echo ok > notes.md", ws, timeout_s=20)
    assert (ws / "notes.md").read_text() == "ok\n" and list((elsewhere / "bin").iterdir()) == []
    (ws / ".venv").unlink()
    (ws / "venv").mkdir()
    (ws / ".venv").symlink_to(ws / "venv")
    with pytest.raises(SandboxUnavailable, match="symbolic link"):
        run_sandboxed("touch ran.txt", ws, timeout_s=20)
    assert "mnemo" in result.stderr  # (the write failed: read-only, or hidden with /tmp)
