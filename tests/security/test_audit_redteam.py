"""Red-team of the audit log: attacks that passed unnoticed (or crashed ``verify``) before.

Malformed lines must give a clear problem, never a traceback
or a hang; a crash-torn line is told from tampering.
"""

from __future__ import annotations

import hashlib
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
