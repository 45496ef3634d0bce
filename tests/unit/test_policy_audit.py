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
    assert set(entries[0]) == {"seq", "ts", "kind", "data", "prev", "ws", "hash", "hmac"}
    assert entries[0]["ws"] == log.workspace_id
    assert stat.S_IMODE(log.key_path.stat().st_mode) == 0o600 and len(log.key_path.read_bytes()) == 32
    with pytest.raises(ValueError):
        log.append("bogus", {})  # type: ignore[arg-type]


def test_edit_detected(log: AuditLog) -> None:
    lines = _lines(log)
    lines[2] = lines[2].replace('"i":2', '"i":9')
    _write(log, lines)
    report = log.verify()
    assert not report.ok and report.problems == ["line 3 (seq 2): edited: content does not match its hash"]


def test_reserialised_entry_detected(log: AuditLog) -> None:
    lines = _lines(log)
    lines[2] = json.dumps(json.loads(lines[2])) + "\n"  # same content, other bytes
    _write(log, lines)
    problems = log.verify().problems
    assert problems == [
        "line 3: reformatted: not the bytes mnemo wrote",
        "line 4 (seq 3): seq gap: entry 2 removed",
    ]


def test_edit_with_recomputed_hash_detected_by_hmac(log: AuditLog) -> None:
    import hashlib

    lines = _lines(log)
    head, _, rest = lines[2].replace('"i":2', '"i":9').partition(',"hash":"')
    digest = hashlib.sha256(head.encode("utf-8")).hexdigest()
    lines[2] = f'{head},"hash":"{digest}"{rest[64 + 1 :]}'
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
    lines.insert(3, lines[2].replace('"i":2', '"i":"forged"'))
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


def test_torn_last_line_is_noted_and_appends_continue(log: AuditLog) -> None:
    """A crash in the middle of a write leaves part of a line and the anchor at the previous entry."""
    lines = _lines(log)
    with log.path.open("ab") as fh:
        fh.write(lines[-1][:40].encode("utf-8"))
    report = log.verify()
    assert report.ok and report.notes[0].startswith("line 7: torn last line"), report.problems
    entry = log.append("decision", {"after": "torn"})
    assert entry["seq"] == 6 and entry["prev"] == json.loads(lines[5])["hash"]
    report = log.verify()
    assert report.ok and report.notes[0].startswith("line 7: torn line"), report.problems


def test_cut_tail_refuses_appends(log: AuditLog) -> None:
    from mnemo.policy.audit import AuditLogRefused

    _write(log, _lines(log)[:4])
    with pytest.raises(AuditLogRefused, match="does not end with the entry last written"):
        log.append("decision", {})


def test_wrong_key_fails(log: AuditLog, tmp_path: Path) -> None:
    other = AuditLog(log.path, key_path=tmp_path / "other" / "audit.key")
    report = other.verify()
    assert not report.ok and sum("hmac mismatch" in p for p in report.problems) == 6
