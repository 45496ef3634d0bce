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

from mnemo.policy.audit_format import GENESIS, OLD_FORMAT, Anchor, Line, is_torn, parse_line

_INVALID = "not a valid audit entry"
_TRACKED_GAP = 100_000
"""Removed seqs remembered (to tell a reordered entry); a larger gap is reported, not enumerated."""


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
    try:  # no link (lstat said a regular file), no FIFO swapped in meanwhile to block the read
        fd = os.open(log.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        return VerifyReport(False, 0, [f"{log.path} cannot be opened safely ({exc})"])
    with open(fd, "rb") as fh:
        if os.fstat(fh.fileno()).st_ino != st.st_ino:
            return VerifyReport(False, 0, [f"{log.path} changed while it was verified"])
        raw = fh.read()
    chain = _Chain(log, problems)
    lines = raw.split(b"\n")
    end = lines.pop()
    for lineno, text in enumerate(lines, start=1):
        chain.line(lineno, text)
    chain.finish()
    before = len(problems)
    _check_tail(log, anchor, chain.hashes, chain.next_seq, problems)
    if end:  # no newline after it: a crash mid-write, or a cut inside an entry (then the tail says so)
        if is_torn(end) and len(problems) == before:
            chain.notes.append(
                f"line {len(lines) + 1}: torn last line (mnemo stopped while writing it): not an entry"
            )
        else:
            problems.insert(before, f"line {len(lines) + 1}: truncated last line (torn write or cut tail)")
    return VerifyReport(not problems, chain.count, problems, chain.notes + _restarts(chain.trusted))


def _restarts(trusted: list[bytes]) -> list[str]:
    """What the log's signed ``log_restarted`` entries say (shown even when the chain is intact)."""
    notes: list[str] = []
    for line in trusted:
        entry = json.loads(line)
        data = entry.get("data")
        if entry.get("kind") != "log_restarted" or not isinstance(data, dict):
            continue
        tail = data.get("previous_tail")
        seq = tail.get("seq") if isinstance(tail, dict) else None
        lost = f"; entries up to seq {seq} of the previous log are not here" if seq is not None else ""
        notes.append(f"seq {entry.get('seq')}: restarted — {data.get('reason')}{lost}")
    return notes


class _Chain:
    """The per-line checks, line by line: bytes, HMAC, workspace, seq continuity and the prev chain."""

    def __init__(self, log: SignedLog, problems: list[str]) -> None:
        self.log, self.problems = log, problems
        self.notes: list[str] = []
        self.count, self.next_seq, self.prev = 0, 0, GENESIS
        self.hashes: dict[int, str] = {}
        """seq -> hash of each entry read."""
        self.trusted: list[bytes] = []
        """The lines whose bytes, HMAC and workspace check out (where restart notes are read)."""
        self.missing: set[int] = set()
        self.foreign: list[int] = []
        self.old_format = False
        self.torn: int | None = None
        """A line that looks cut short by a crash, until the next line says whether the chain goes on."""

    def line(self, lineno: int, text: bytes) -> None:
        if self.old_format:
            return
        line = parse_line(text)
        if isinstance(line, str):
            self.old_format = line == OLD_FORMAT  # (one message for the whole log)
            self._settle_torn(continues=False)
            if line == _INVALID and is_torn(text):
                self.torn = lineno
            else:
                self.problems.append(f"line {lineno}: {line}")
            return
        self._settle_torn(continues=line.seq == self.next_seq and line.prev == self.prev)
        self.count += 1
        signed = hmac.compare_digest(self.log.entry_mac(line.digest), line.mac)
        if not line.content_ok:
            self.problems.append(f"line {lineno} (seq {line.seq}): edited: content does not match its hash")
        if not signed:
            self.problems.append(f"line {lineno} (seq {line.seq}): hmac mismatch (forged or re-hashed entry)")
        if line.ws != self.log.workspace_id:
            self.foreign.append(lineno)
        elif signed and line.content_ok:
            self.trusted.append(text)
        self._sequence(lineno, line)

    def _settle_torn(self, *, continues: bool) -> None:
        if self.torn is None:
            return
        if continues:
            self.notes.append(
                f"line {self.torn}: torn line (mnemo stopped while writing it): the next entry follows on"
            )
        else:
            self.problems.append(f"line {self.torn}: {_INVALID}")
        self.torn = None

    def _sequence(self, lineno: int, line: Line) -> None:
        seq, expected = line.seq, self.next_seq
        if seq != expected:
            if isinstance(seq, int) and seq > expected:
                what = f"entries {expected}..{seq - 1} removed" if seq - 1 > expected else ""
                self.problems.append(
                    f"line {lineno} (seq {seq}): seq gap: {what or f'entry {expected} removed'}"
                )
            else:
                self.problems.append(
                    f"line {lineno} (seq {seq}): out of order or inserted (expected seq {expected})"
                )
        elif line.prev != self.prev and line.content_ok:
            self.problems.append(f"line {lineno} (seq {seq}): prev mismatch: chain broken before this entry")
        if isinstance(seq, int) and seq < expected and seq in self.missing:
            self.problems[-1] += f" (reordered: seq {seq} was expected before line {lineno})"
        if isinstance(seq, int) and expected < seq <= expected + _TRACKED_GAP:  # (a forged huge seq: not all)
            self.missing.update(range(expected, seq))
        if isinstance(seq, int):
            self.missing.discard(seq)
            self.hashes[seq] = line.digest
        self.next_seq = max(expected, seq + 1) if isinstance(seq, int) else expected + 1
        self.prev = line.digest

    def finish(self) -> None:
        self._settle_torn(continues=False)
        if self.foreign:
            self.problems.append(
                f"{len(self.foreign)} entries (lines {self.foreign[0]}..{self.foreign[-1]}) were written for "
                f"another workspace, not this one ({self.log.workspace_id}): a log copied from elsewhere, or "
                "this workspace was moved (see docs/security.md)"
            )


def _check_tail(
    log: SignedLog, anchor: Anchor | None, hashes: dict[int, str], next_seq: int, problems: list[str]
) -> None:
    if anchor is None:
        if next_seq and not problems:
            problems.append(
                f"no recorded tail for this log ({log.head_path} is missing): its end cannot be checked"
            )
        return
    if anchor.seq >= next_seq:
        problems.append(
            f"tail truncated: the log ends at seq {next_seq - 1} but seq {anchor.seq} was written "
            f"(entries {next_seq}..{anchor.seq} missing)"
        )
    elif hashes.get(anchor.seq) != anchor.hash:
        problems.append(f"last entry (seq {anchor.seq}) differs from the one written (replaced tail)")
    elif next_seq - 1 > anchor.seq + 1:  # one more: written just before a crash, not recorded
        problems.append(
            f"entries {anchor.seq + 1}..{next_seq - 1} follow the recorded tail (seq {anchor.seq}): "
            "they were not written to this log"
        )
