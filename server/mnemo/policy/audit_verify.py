"""Verifying the audit log (``mnemo audit verify``, mnemo/auditVerify, the security audit): the file is
the one written (not a link, not replaced), every line's bytes, HMAC and workspace, seq continuity, the
prev chain, and the tail against the anchor. Format: :mod:`mnemo.policy.audit_format`."""

from __future__ import annotations

import hmac
import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from mnemo.policy.audit_format import GENESIS, OLD_FORMAT, Anchor, parse_line


class SignedLog(Protocol):
    """What verifying reads of :class:`mnemo.policy.audit.AuditLog`."""

    @property
    def path(self) -> Path: ...
    @property
    def head_path(self) -> Path: ...
    @property
    def workspace_id(self) -> str: ...
    def read_anchor(self) -> Anchor | None: ...
    def entry_mac(self, digest: str) -> str: ...


@dataclass
class VerifyReport:
    ok: bool
    entries: int
    """Complete, parseable entries read."""
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """Restarts recorded in the chain (a deleted log, `mnemo audit restart`): not tampering, but shown."""


def verify_log(log: SignedLog) -> VerifyReport:
    """Check the file (not a link, the one written), every line's bytes, HMAC, workspace, seq
    continuity, the prev chain, and the tail against the anchor."""
    try:
        st = os.lstat(log.path)
    except FileNotFoundError:
        return VerifyReport(True, 0)
    if stat.S_ISLNK(st.st_mode):
        target = os.readlink(log.path)
        return VerifyReport(False, 0, [f"{log.path} is a symbolic link (to {target}): refused"])
    if not stat.S_ISREG(st.st_mode):
        return VerifyReport(False, 0, [f"{log.path} is not a regular file: refused"])
    problems: list[str] = []
    try:
        anchor = log.read_anchor()
    except ValueError as exc:
        anchor = None
        problems.append(str(exc))
    if anchor is not None and (st.st_dev, st.st_ino) != (anchor.dev, anchor.ino):
        problems.append(
            f"{log.path} was replaced: it is not the file mnemo wrote (device/inode "
            f"{st.st_dev}/{st.st_ino}, recorded {anchor.dev}/{anchor.ino})"
        )
    with open(log.path, "rb") as fh:  # lstat said a regular file; O_NOFOLLOW-equivalent below
        if os.fstat(fh.fileno()).st_ino != st.st_ino:
            return VerifyReport(False, 0, [f"{log.path} changed while it was verified"])
        raw = fh.read()
    count, hashes, last = _check_lines(log, raw, problems)
    _check_tail(log, anchor, hashes, last, count, problems)
    return VerifyReport(not problems, count, problems, _restarts(raw))


def _restarts(raw: bytes) -> list[str]:
    """What the log's ``log_restarted`` entries say (shown by verify even when the chain is intact)."""
    notes: list[str] = []
    for line in raw.splitlines():
        if b'"kind":"log_restarted"' not in line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        tail = entry.get("data", {}).get("previous_tail") or {}
        lost = f"; entries up to seq {tail['seq']} of the previous log are not here" if "seq" in tail else ""
        notes.append(f"seq {entry.get('seq')}: restarted — {entry.get('data', {}).get('reason')}{lost}")
    return notes


def _check_lines(
    log: SignedLog, raw: bytes, problems: list[str]
) -> tuple[int, dict[int, str], tuple[int, str]]:
    """Per-line checks; (entries, seq -> hash, (next expected seq, last hash))."""
    lines = raw.split(b"\n")
    torn = lines.pop() if lines else b""
    if torn:
        problems.append(f"line {len(lines) + 1}: truncated last line (torn write or cut tail)")
    count, missing, foreign = 0, set[int](), []
    hashes: dict[int, str] = {}
    expected_seq, expected_prev = 0, GENESIS
    for lineno, text in enumerate(lines, start=1):
        line = parse_line(text)
        if isinstance(line, str):
            problems.append(f"line {lineno}: {line}")
            if line == OLD_FORMAT:
                break
            continue
        count += 1
        seq = line.seq
        if not line.content_ok:
            problems.append(f"line {lineno} (seq {seq}): edited: content does not match its hash")
        if not hmac.compare_digest(log.entry_mac(line.digest), line.mac):
            problems.append(f"line {lineno} (seq {seq}): hmac mismatch (forged or re-hashed entry)")
        if line.ws != log.workspace_id:
            foreign.append(lineno)
        if seq != expected_seq:
            if isinstance(seq, int) and seq > expected_seq:
                what = f"entries {expected_seq}..{seq - 1} removed" if seq - 1 > expected_seq else ""
                what = what or f"entry {expected_seq} removed"
                problems.append(f"line {lineno} (seq {seq}): seq gap: {what}")
            else:
                problems.append(
                    f"line {lineno} (seq {seq}): out of order or inserted (expected seq {expected_seq})"
                )
        elif line.prev != expected_prev and line.content_ok:
            problems.append(f"line {lineno} (seq {seq}): prev mismatch: chain broken before this entry")
        if isinstance(seq, int) and seq < expected_seq and seq in missing:
            problems[-1] += f" (reordered: seq {seq} was expected before line {lineno})"
        if isinstance(seq, int) and seq > expected_seq:
            missing.update(range(expected_seq, seq))
        if isinstance(seq, int):
            missing.discard(seq)
            hashes[seq] = line.digest
        expected_seq = max(expected_seq, seq + 1) if isinstance(seq, int) else expected_seq + 1
        expected_prev = line.digest
    if foreign:
        problems.append(
            f"{len(foreign)} entries (lines {foreign[0]}..{foreign[-1]}) were written for another "
            f"workspace, not this one ({log.workspace_id}): a log copied from elsewhere, or this "
            "workspace was moved (see docs/security.md)"
        )
    return count, hashes, (expected_seq, expected_prev)


def _check_tail(
    log: SignedLog,
    anchor: Anchor | None,
    hashes: dict[int, str],
    last: tuple[int, str],
    count: int,
    problems: list[str],
) -> None:
    expected_seq, _ = last
    if anchor is None:
        if count and not problems:
            problems.append(
                f"no recorded tail for this log ({log.head_path} is missing): its end cannot be checked"
            )
        return
    if anchor.seq >= expected_seq:
        problems.append(
            f"tail truncated: the log ends at seq {expected_seq - 1} but seq {anchor.seq} was written "
            f"(entries {expected_seq}..{anchor.seq} missing)"
        )
    elif hashes.get(anchor.seq) != anchor.hash:
        problems.append(f"last entry (seq {anchor.seq}) differs from the one written (replaced tail)")
    elif expected_seq - 1 > anchor.seq + 1:  # one more: written just before a crash, not recorded
        problems.append(
            f"entries {anchor.seq + 1}..{expected_seq - 1} follow the recorded tail (seq {anchor.seq}): "
            "they were not written to this log"
        )
