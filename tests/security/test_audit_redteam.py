"""Red-team of the audit log: attacks that passed unnoticed (or crashed ``verify``) before.

Malformed lines must give a clear problem, never a traceback or a hang; a crash-torn line is told from
tampering; concurrent appenders do not refuse each other.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mnemo.policy.audit import AuditLog


@pytest.fixture
def log(tmp_path: Path) -> AuditLog:
    audit = AuditLog(tmp_path / "ws" / ".mnemo" / "audit.jsonl", key_path=tmp_path / "keys" / "audit.key")
    for i in range(3):
        audit.append("tool_call", {"i": i})
    return audit


def _add(log: AuditLog, raw: bytes) -> None:
    with log.path.open("ab") as fh:
        fh.write(raw)


# -- 5. malformed lines: a clear problem, never a traceback or a hang ---------------------------------
def test_deeply_nested_json_line_is_a_problem_not_a_crash(log: AuditLog) -> None:
    _add(log, b"[" * 200_000 + b"\n")
    report = log.verify()
    assert report.problems == ["line 4: not a valid audit entry"]


def test_a_forged_restart_line_neither_crashes_nor_adds_a_note(log: AuditLog) -> None:
    _add(log, b'{"kind":"log_restarted","data":5}\n[{"kind":"log_restarted"}]\n')
    _add(log, b'{"kind":"log_restarted","data":{"reason":"fake","previous_tail":7}}\n')
    report = log.verify()
    assert not report.ok and report.notes == []
    assert report.problems[:3] == [f"line {n}: not a valid audit entry" for n in (4, 5, 6)]


def test_a_huge_seq_is_reported_quickly(log: AuditLog) -> None:
    body = b'{"data":{},"kind":"decision","prev":"' + b"0" * 64 + b'","seq":100000000000,"ts":1,"ws":"x"'
    digest = hashlib.sha256(body).hexdigest().encode()
    _add(log, body + b',"hash":"' + digest + b'","hmac":"' + b"0" * 64 + b'"}\n')
    started = time.monotonic()
    report = log.verify()
    assert time.monotonic() - started < 5
    assert any("seq gap: entries 3..99999999999 removed" in p for p in report.problems), report.problems


def test_non_utf8_nul_and_huge_lines_are_problems(log: AuditLog) -> None:
    _add(log, b"\xff\xfe\x00garbage\n" + b"x" * 5_000_000 + b"\n")
    report = log.verify()
    assert report.problems[:2] == ["line 4: not a valid audit entry", "line 5: not a valid audit entry"]


# -- 5. a crash-torn line is told from tampering ------------------------------------------------------
def test_a_crash_torn_last_line_is_a_note_not_tampering(log: AuditLog) -> None:
    """A crash mid-write leaves a prefix of the next line; the anchor still names the last whole entry."""
    line = log.path.read_bytes().splitlines()[-1]
    _add(log, line[:50])
    report = log.verify()
    assert report.ok and report.problems == [], report.problems
    assert report.notes == ["line 4: torn last line (mnemo stopped while writing it): not an entry"]
    log.append("decision", {"after": "crash"})
    report = log.verify()
    assert report.ok and report.entries == 4, report.problems
    assert report.notes == ["line 4: torn line (mnemo stopped while writing it): the next entry follows on"]


def test_a_cut_in_the_middle_of_the_last_entry_is_tampering(log: AuditLog) -> None:
    lines = log.path.read_bytes().splitlines(keepends=True)
    log.path.write_bytes(b"".join(lines[:-1]) + lines[-1][:50])
    report = log.verify()
    assert not report.ok and any("tail truncated" in p for p in report.problems), report.problems


def test_garbage_between_entries_is_still_tampering(log: AuditLog) -> None:
    lines = log.path.read_bytes().splitlines(keepends=True)
    log.path.write_bytes(lines[0] + b'{"data":{"forged":1}}\n' + b"".join(lines[1:]))
    assert log.verify().problems == ["line 2: not a valid audit entry"]


# -- 3./4. replay, splice, rollback: held already, kept so -------------------------------------------
def test_a_replayed_entry_is_reported(log: AuditLog) -> None:
    lines = log.path.read_bytes().splitlines(keepends=True)
    log.path.write_bytes(b"".join(lines) + lines[-1])
    assert any("out of order or inserted" in p for p in log.verify().problems)


def test_a_line_spliced_in_from_a_retired_log_is_reported(log: AuditLog) -> None:
    retired = log.path.read_bytes().splitlines(keepends=True)
    log.restart("test")
    for i in range(3):
        log.append("decision", {"i": i})
    lines = log.path.read_bytes().splitlines(keepends=True)
    log.path.write_bytes(b"".join(lines[:2]) + retired[2] + b"".join(lines[3:]))  # same seq, same ws, signed
    assert any("prev mismatch" in p for p in log.verify().problems)


def test_a_rollback_in_place_is_reported(log: AuditLog) -> None:
    old = log.path.read_bytes()
    log.append("decision", {"later": True})
    log.path.write_bytes(old)  # same inode
    assert log.verify().problems == [
        "tail truncated: the log ends at seq 2 but seq 3 was written (entries 3..3 missing)"
    ]


# -- concurrency: appenders waiting on the lock must not refuse each other ----------------------------
_APPEND = """
import sys
from pathlib import Path
from mnemo.policy.audit import AuditLog
AuditLog(Path(sys.argv[1]), Path(sys.argv[2])).append("decision", {"who": sys.argv[3]})
"""


@pytest.mark.parametrize("fresh", [False, True])
def test_processes_queued_on_the_lock_all_append(tmp_path: Path, fresh: bool) -> None:
    """Each process read the anchor before it waited for the lock; they must read it again after."""
    import fcntl

    path, key = tmp_path / "ws" / ".mnemo" / "audit.jsonl", tmp_path / "keys" / "audit.key"
    log = AuditLog(path, key)
    if not fresh:
        log.append("decision", {"who": "first"})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "server")}
    with path.open("rb") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _APPEND, str(path), str(key), str(n)], env=env, stderr=subprocess.PIPE
            )
            for n in range(3)
        ]
        time.sleep(3)  # all three have read the anchor and wait on the lock
    errors = [p.communicate(timeout=60)[1].decode() for p in procs]
    assert all(p.returncode == 0 for p in procs), errors
    report = log.verify()
    assert report.ok and report.entries == (3 if fresh else 4), report.problems
