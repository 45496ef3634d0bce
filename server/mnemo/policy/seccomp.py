"""The seccomp filter of the exec sandbox, built here as a classic-BPF program (no libseccomp).

bubblewrap loads it with ``--seccomp FD`` (and sets ``no_new_privs`` first) just before it runs the command.
The filter refuses with ``EPERM`` the system calls a sandboxed command could use to undo its own sandbox or
reach the kernel's privileged corners: mount and the new mount API, ``umount2``, ``pivot_root``, ``chroot``,
``unshare``, ``setns``, ``clone`` with any namespace flag, ``ptrace`` and ``process_vm_*``, the key
rings, ``bpf``, ``perf_event_open``, kernel modules and ``kexec``, ``open_by_handle_at``, ``userfaultfd``,
swap, reboot, clock setting, ``personality`` other than the plain Linux ones. ``clone3`` answers ``ENOSYS``:
its flags sit behind a pointer the filter cannot read, and libc then falls back to ``clone``. Everything
else is allowed. A system call made with another ABI than the machine's (i386 or x32 on x86_64, arm32 on
aarch64) kills the process: no table of numbers is kept for those.

Only x86_64 and aarch64 have tables; elsewhere :func:`filter_program` raises :class:`UnsupportedArch` and
the sandbox refuses to start (it never runs a command without the filter).
"""

from __future__ import annotations

import errno
import platform
import struct

# linux/filter.h, linux/bpf_common.h
_LD_W_ABS = 0x00 | 0x00 | 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x05 | 0x10 | 0x00  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x05 | 0x30 | 0x00  # BPF_JMP | BPF_JGE | BPF_K
_AND_K = 0x04 | 0x50 | 0x00  # BPF_ALU | BPF_AND | BPF_K
_RET_K = 0x06 | 0x00  # BPF_RET | BPF_K

# linux/seccomp.h
RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000
RET_ALLOW = 0x7FFF0000

# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6] (little-endian)
_OFF_NR, _OFF_ARCH, _OFF_ARG0_LO = 0, 4, 16

AUDIT_ARCH_X86_64 = 0xC000003E
AUDIT_ARCH_AARCH64 = 0xC00000B7
_X32_SYSCALL_BIT = 0x40000000

CLONE_NAMESPACES = (
    0x00020000  # CLONE_NEWNS
    | 0x02000000  # CLONE_NEWCGROUP
    | 0x04000000  # CLONE_NEWUTS
    | 0x08000000  # CLONE_NEWIPC
    | 0x10000000  # CLONE_NEWUSER
    | 0x20000000  # CLONE_NEWPID
    | 0x40000000  # CLONE_NEWNET
)
_PERSONALITY_OK = (0x0000, 0x0008, 0xFFFFFFFF)  # PER_LINUX, PER_LINUX32, query

DENIED = (
    "mount", "umount2", "pivot_root", "chroot", "unshare", "setns",
    "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
    "ptrace", "process_vm_readv", "process_vm_writev",
    "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd", "open_by_handle_at",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "swapon", "swapoff", "reboot", "settimeofday", "clock_settime", "clock_adjtime", "acct", "quotactl",
    "vhangup", "lookup_dcookie",
)  # fmt: skip
"""Refused with EPERM whatever their arguments."""

_X86_64 = {
    "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, "unshare": 272, "setns": 308,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "mount_setattr": 442, "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311,
    "keyctl": 250, "add_key": 248, "request_key": 249, "bpf": 321, "perf_event_open": 298,
    "userfaultfd": 323, "open_by_handle_at": 304, "kexec_load": 246, "kexec_file_load": 320,
    "init_module": 175, "finit_module": 313, "delete_module": 176, "swapon": 167, "swapoff": 168,
    "reboot": 169, "settimeofday": 164, "clock_settime": 227, "clock_adjtime": 305, "acct": 163,
    "quotactl": 179, "vhangup": 153, "lookup_dcookie": 212,
    "iopl": 172, "ioperm": 173, "uselib": 134,
    "clone": 56, "clone3": 435, "personality": 135,
}  # fmt: skip
_AARCH64 = {
    "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51, "unshare": 97, "setns": 268,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "mount_setattr": 442, "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271,
    "keyctl": 219, "add_key": 217, "request_key": 218, "bpf": 280, "perf_event_open": 241,
    "userfaultfd": 282, "open_by_handle_at": 265, "kexec_load": 104, "kexec_file_load": 294,
    "init_module": 105, "finit_module": 273, "delete_module": 106, "swapon": 224, "swapoff": 225,
    "reboot": 142, "settimeofday": 170, "clock_settime": 112, "clock_adjtime": 266, "acct": 89,
    "quotactl": 60, "vhangup": 58, "lookup_dcookie": 18,
    "clone": 220, "clone3": 435, "personality": 92,
}  # fmt: skip
_TABLES = {"x86_64": (AUDIT_ARCH_X86_64, _X86_64), "aarch64": (AUDIT_ARCH_AARCH64, _AARCH64)}
_MACHINE_ALIASES = {"amd64": "x86_64", "arm64": "aarch64"}
_X86_ONLY = ("iopl", "ioperm", "uselib")


class UnsupportedArch(RuntimeError):
    """No system call table for this machine: the sandbox cannot build its filter."""


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)  # struct sock_filter


def _errno(err: int) -> bytes:
    return _insn(_RET_K, RET_ERRNO | (err & 0xFFFF))


def _deny_with_arg0(nr: int, mask: int, allowed: tuple[int, ...]) -> list[bytes]:
    """``nr`` passes when ``args[0] & mask`` (low 32 bits) is one of ``allowed``; otherwise EPERM."""
    body = [_insn(_LD_W_ABS, _OFF_ARG0_LO)]
    if mask != 0xFFFFFFFF:
        body.append(_insn(_AND_K, mask))
    for i, value in enumerate(allowed):
        body.append(_insn(_JEQ_K, value, jt=len(allowed) - i, jf=0))
    body += [_errno(errno.EPERM), _insn(_RET_K, RET_ALLOW)]
    return [_insn(_JEQ_K, nr, jt=0, jf=len(body)), *body]


def _machine(machine: str | None) -> str:
    name = (machine or platform.machine()).lower()
    name = _MACHINE_ALIASES.get(name, name)
    if name not in _TABLES:
        raise UnsupportedArch(f"no seccomp system call table for {name!r} (x86_64 and aarch64 only)")
    return name


def syscall_numbers(machine: str | None = None) -> dict[str, int]:
    """The numbers of the system calls the filter handles, on ``machine`` (default: this one)."""
    return dict(_TABLES[_machine(machine)][1])


def audit_arch(machine: str | None = None) -> int:
    """The ``AUDIT_ARCH_*`` value the filter accepts on ``machine`` (default: this one)."""
    return _TABLES[_machine(machine)][0]


def filter_program(machine: str | None = None) -> bytes:
    """The filter as bubblewrap reads it: an array of ``struct sock_filter`` in native byte order."""
    name = _machine(machine)
    arch, table = _TABLES[name]
    prog = [
        _insn(_LD_W_ABS, _OFF_ARCH),
        _insn(_JEQ_K, arch, jt=1, jf=0),
        _insn(_RET_K, RET_KILL_PROCESS),
        _insn(_LD_W_ABS, _OFF_NR),
    ]
    if name == "x86_64":  # the x32 ABI shares the arch value: refuse all of it
        prog += [_insn(_JGE_K, _X32_SYSCALL_BIT, jt=0, jf=1), _errno(errno.EPERM)]
    for call in DENIED + (_X86_ONLY if name == "x86_64" else ()):
        prog += [_insn(_JEQ_K, table[call], jt=0, jf=1), _errno(errno.EPERM)]
    prog += [_insn(_JEQ_K, table["clone3"], jt=0, jf=1), _errno(errno.ENOSYS)]
    prog += _deny_with_arg0(table["clone"], CLONE_NAMESPACES, (0,))
    prog += _deny_with_arg0(table["personality"], 0xFFFFFFFF, _PERSONALITY_OK)
    prog.append(_insn(_RET_K, RET_ALLOW))
    return b"".join(prog)
