"""Audit log: chain, HMAC, and each kind of tampering reported with the right entry."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from mnemo.policy import AuditLog


@pytest.fixture
def log(tmp_path: Path) -> AuditLog:
    audit = AuditLog(tmp_path / "ws" / ".mnemo" / "audit.jsonl", key_path=tmp_path / "keys" / "audit.key")
    for i, kind in enumerate(["tool_call", "decision", "approval", "policy_change", "risk", "tool_call"]):
        audit.append(kind, {"i": i, "text": "héllo"})  # type: ignore[arg-type]
    return audit


def _lines(log: AuditLog) -> list[str]:
    return log.path.read_text(encoding="utf-8").splitlines(keepends=True)


def _write(log: AuditLog, lines: list[str]) -> None:
    log.path.write_text("".join(lines), encoding="utf-8")


def test_clean_log_verifies(log: AuditLog) -> None:
    report = log.verify()
    assert (report.ok, report.entries, report.problems) == (True, 6, [])
    entries = log.entries()
    assert [e["seq"] for e in entries] == list(range(6))
    assert entries[0]["prev"] == "0" * 64 and entries[1]["prev"] == entries[0]["hash"]
    assert set(entries[0]) == {"seq", "ts", "kind", "data", "prev", "hash", "hmac"}
    assert stat.S_IMODE(log.key_path.stat().st_mode) == 0o600 and len(log.key_path.read_bytes()) == 32
    with pytest.raises(ValueError):
        log.append("bogus", {})  # type: ignore[arg-type]


def test_edit_detected(log: AuditLog) -> None:
    lines = _lines(log)
    entry = json.loads(lines[2])
    entry["data"]["i"] = 99
    lines[2] = json.dumps(entry) + "\n"
    _write(log, lines)
    report = log.verify()
    assert not report.ok and report.problems == ["line 3 (seq 2): edited: content does not match its hash"]


def test_edit_with_recomputed_hash_detected_by_hmac(log: AuditLog) -> None:
    import hashlib

    from mnemo.policy.audit import canonical

    lines = _lines(log)
    entry = json.loads(lines[2])
    entry["data"]["i"] = 99
    body = {k: v for k, v in entry.items() if k not in ("hash", "hmac")}
    entry["hash"] = hashlib.sha256(canonical(body)).hexdigest()
    lines[2] = json.dumps(entry) + "\n"
    _write(log, lines)
    problems = log.verify().problems
    assert problems[0].startswith("line 3 (seq 2): hmac mismatch")
    assert problems[1].startswith("line 4 (seq 3): prev mismatch")


def test_delete_detected(log: AuditLog) -> None:
    lines = _lines(log)
    del lines[3]
    _write(log, lines)
    assert log.verify().problems == ["line 4 (seq 4): seq gap: entry 3 removed"]


def test_reorder_detected(log: AuditLog) -> None:
    lines = _lines(log)
    lines[1], lines[2] = lines[2], lines[1]
    _write(log, lines)
    problems = log.verify().problems
    assert problems[0] == "line 2 (seq 2): seq gap: entry 1 removed"
    assert problems[1].startswith("line 3 (seq 1): out of order or inserted") and "reordered" in problems[1]


def test_insert_detected(log: AuditLog) -> None:
    lines = _lines(log)
    forged = json.loads(lines[2])
    forged["data"] = {"i": "forged"}
    lines.insert(3, json.dumps(forged) + "\n")
    _write(log, lines)
    problems = log.verify().problems
    assert any(p.startswith("line 4 (seq 2): edited") for p in problems)
    assert any(p.startswith("line 4 (seq 2): out of order or inserted") for p in problems)


def test_truncated_tail_detected(log: AuditLog) -> None:
    lines = _lines(log)
    _write(log, lines[:4])
    report = log.verify()
    assert report.problems == [
        "tail truncated: the log ends at seq 3 but seq 5 was written (entries 4..5 missing)"
    ]


def test_torn_last_line_detected_and_appends_continue(log: AuditLog) -> None:
    lines = _lines(log)
    lines[-1] = lines[-1][:40]
    _write(log, lines)
    report = log.verify()
    assert "line 6: truncated last line" in report.problems[0]
    entry = log.append("decision", {"after": "torn"})
    assert entry["seq"] == 5 and entry["prev"] == json.loads(lines[4])["hash"]
    assert any("line 6: not a valid audit entry" in p for p in log.verify().problems)


def test_wrong_key_fails(log: AuditLog, tmp_path: Path) -> None:
    other = AuditLog(log.path, key_path=tmp_path / "other" / "audit.key")
    report = other.verify()
    assert not report.ok and sum("hmac mismatch" in p for p in report.problems) == 6
