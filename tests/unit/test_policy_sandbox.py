"""Sandbox escape tests against real bubblewrap (skipped, loudly, where bwrap cannot start)."""

from __future__ import annotations

import os
import socket
import struct
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.sandbox_support import bwrap_works as _bwrap_works

from mnemo.policy import SandboxUnavailable, run_sandboxed, seccomp
from mnemo.policy import sandbox as sb

needs_bwrap = pytest.mark.skipif(
    not _bwrap_works(), reason="bubblewrap unavailable: apt-get install -y bubblewrap"
)


# -- the seccomp filter, run through a classic-BPF interpreter (checks the aarch64 table on any machine) --
def _run_filter(prog: bytes, nr: int, arch: int, arg0: int = 0) -> int:
    data = struct.pack("<iIQ6Q", nr, arch, 0, arg0, 0, 0, 0, 0, 0)
    insns = [struct.unpack("=HBBI", prog[i : i + 8]) for i in range(0, len(prog), 8)]
    acc, pc = 0, 0
    for _ in range(len(insns)):
        code, jt, jf, k = insns[pc]
        if code == 0x20:  # ld [k]
            acc = struct.unpack_from("<I", data, k)[0]
        elif code == 0x54:  # and #k
            acc &= k
        elif code in (0x15, 0x35):  # jeq / jge #k
            hit = acc == k if code == 0x15 else acc >= k
            pc += jt if hit else jf
        elif code == 0x06:  # ret #k
            return k
        else:
            raise AssertionError(f"unexpected opcode {code:#x}")
        pc += 1
    raise AssertionError("the filter fell off its end")


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_filter_refuses_sandbox_undoing_calls_and_allows_the_rest(machine: str) -> None:
    prog, nrs, arch = (
        seccomp.filter_program(machine),
        seccomp.syscall_numbers(machine),
        seccomp.audit_arch(machine),
    )
    eperm, enosys = seccomp.RET_ERRNO | 1, seccomp.RET_ERRNO | 38
    assert len(prog) % 8 == 0 and len(prog) // 8 < 4096
    for name in seccomp.DENIED:
        assert _run_filter(prog, nrs[name], arch) == eperm, name
    assert _run_filter(prog, nrs["clone3"], arch) == enosys
    thread_flags = 0x003D0F00  # what glibc's pthread_create passes
    assert _run_filter(prog, nrs["clone"], arch, thread_flags) == seccomp.RET_ALLOW
    assert _run_filter(prog, nrs["clone"], arch, 0x11) == seccomp.RET_ALLOW  # fork: SIGCHLD
    for flag in (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000):
        assert _run_filter(prog, nrs["clone"], arch, flag | 0x11) == eperm, hex(flag)
    assert _run_filter(prog, nrs["personality"], arch, 0xFFFFFFFF) == seccomp.RET_ALLOW
    assert _run_filter(prog, nrs["personality"], arch, 0x0040000) == eperm  # ADDR_NO_RANDOMIZE
    for benign in (0, 1, 3, 59, 63, 64, 221, 260):  # read/write/close/execve… on one arch or the other
        if benign not in nrs.values():
            assert _run_filter(prog, benign, arch) == seccomp.RET_ALLOW
    assert _run_filter(prog, 0, 0x40000003) == seccomp.RET_KILL_PROCESS  # i386 / arm32 ABI: killed


def test_filter_refuses_the_x32_abi_and_unknown_machines() -> None:
    prog = seccomp.filter_program("x86_64")
    assert _run_filter(prog, 0x40000000 | 165, seccomp.AUDIT_ARCH_X86_64) == seccomp.RET_ERRNO | 1
    with pytest.raises(seccomp.UnsupportedArch, match="riscv64"):
        seccomp.filter_program("riscv64")


def test_argv_drops_privilege_and_binds_protected_entries_after_the_workspace(tmp_path: Path) -> None:
    ws = tmp_path.resolve()
    argv = sb.bwrap_argv("true", ws, seccomp_fd=7, read_only=[ws / "MEMORY.md", ws / ".git"])
    for flag in ("--unshare-all", "--unshare-user", "--disable-userns", "--new-session", "--die-with-parent"):
        assert flag in argv
    assert argv[argv.index("--cap-drop") + 1] == "ALL" and argv[argv.index("--seccomp") + 1] == "7"
    assert argv[argv.index("--uid") + 1] == argv[argv.index("--gid") + 1] == "65534"
    ws_bind = argv.index("--bind")
    assert argv[ws_bind + 1 : ws_bind + 3] == [str(ws), str(ws)]
    ro = [argv[i + 1] for i, a in enumerate(argv) if a == "--ro-bind"]
    assert ro == ["/", str(ws / "MEMORY.md"), str(ws / ".git")]
    assert min(i for i, a in enumerate(argv) if a == "--ro-bind" and argv[i + 1] != "/") > ws_bind
    assert "--share-net" not in argv and "--share-net" in sb.bwrap_argv(
        "true", ws, network=True, seccomp_fd=7
    )


def test_probe_names_what_is_missing_from_the_confinement() -> None:
    root_status = "Uid:\t0\t0\t0\t0\nCapPrm:\t000001ffffffffff\nCapEff:\t000001ffffffffff\nNoNewPrivs:\t0\nSeccomp:\t0\n"
    failures = sb._confinement_failures(root_status)
    assert len(failures) == 6 and "uid 0" in failures[-1] and any("Seccomp is 0" in f for f in failures)
    good = "Uid:\t65534\t65534\t65534\t65534\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\n"
    assert sb._confinement_failures(good) == []


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


@needs_bwrap
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


@needs_bwrap
def test_files_outside_the_workspace_cannot_be_modified(ws: Path, outside_file: Path) -> None:
    result = run_sandboxed(f"echo evil > {outside_file}; rm -f {outside_file}; touch /usr/mnemo-x", ws)
    assert "Read-only file system" in result.stderr
    assert outside_file.read_text() == "original\n"
    assert not Path("/usr/mnemo-x").exists()
    sibling = ws.parent / "sibling.txt"
    sibling.write_text("original\n")
    run_sandboxed(f"echo evil > {sibling}", ws)
    assert sibling.read_text() == "original\n"


@needs_bwrap
def test_tmp_and_home_are_private(ws: Path) -> None:
    name = f"/tmp/mnemo-private-{uuid.uuid4().hex}"
    result = run_sandboxed(f"echo x > {name} && cat {name} && ls -A ~ | wc -l", ws)
    assert result.exit_code == 0 and result.stdout.split() == ["x", "0"]
    assert not Path(name).exists()


@needs_bwrap
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


@needs_bwrap
def test_no_network_unless_granted(ws: Path, listener: int) -> None:
    probe = f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {listener}), timeout=3); print('connected')\""
    denied = run_sandboxed(probe, ws)
    assert denied.exit_code != 0 and "connected" not in denied.stdout
    granted = run_sandboxed(probe, ws, network=True)
    assert granted.exit_code == 0 and "connected" in granted.stdout


@needs_bwrap
def test_endless_output_is_capped(ws: Path) -> None:
    result = run_sandboxed("yes mnemo", ws, max_output=10_000, timeout_s=20)
    assert result.truncated and result.killed and not result.timed_out
    assert len(result.stdout) <= 10_000


@needs_bwrap
def test_sigterm_ignoring_command_is_killed(ws: Path) -> None:
    result = run_sandboxed("trap '' TERM; while :; do :; done", ws, timeout_s=1)
    assert result.timed_out and result.killed and result.exit_code != 0


@needs_bwrap
def test_fork_flood_is_contained_and_group_is_gone(ws: Path) -> None:
    marker = f"{31 + uuid.uuid4().int % 1000 / 1000:.3f}"
    result = run_sandboxed(
        f"i=0; while [ $i -lt 40 ]; do sleep {marker} & i=$((i+1)); done; wait", ws, timeout_s=1
    )
    assert result.timed_out and result.killed
    assert _processes_with(f"sleep {marker}") == []


@needs_bwrap
def test_detached_children_die_with_the_sandbox(ws: Path) -> None:
    marker = f"{41 + uuid.uuid4().int % 1000 / 1000:.3f}"
    result = run_sandboxed(f"setsid sleep {marker} >/dev/null 2>&1 & echo started", ws, timeout_s=20)
    assert result.stdout.strip() == "started" and not result.timed_out
    assert _processes_with(f"sleep {marker}") == []


@needs_bwrap
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
