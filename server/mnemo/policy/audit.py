"""Tamper-evident audit log: JSONL, each entry hash-chained to the previous one, HMAC'd, bound to its
workspace and to its bytes.

A line is the canonical JSON (sorted keys, no spaces, UTF-8) of ``{"data", "kind", "prev", "seq", "ts",
"ws"}`` with ``,"hash":"<h>","hmac":"<m>"}`` in place of its closing brace, where

* ``h`` = sha256 of the exact bytes before ``,"hash"`` (verification hashes the bytes as written, never
  a re-serialisation: a reformatted line fails); ``prev`` = the previous entry's ``h`` (64 zeros first);
* ``m`` = HMAC-SHA256 of ``h`` under a random 32-byte key kept outside the workspace (default
  ``platformdirs.user_data_dir("mnemo")/audit.key``, mode 0600), so an agent able to write the workspace
  cannot rewrite the log and recompute the chain;
* ``ws`` = the workspace id: sha256 of the resolved folder holding the log, so another workspace's log
  (signed with the same user key) does not verify here. The id follows the path: a moved workspace's
  old log reports "another workspace" (archive it; a new one starts).

Next to the key, an anchor (``audit-anchor-<ws>.json``, HMAC'd) records the tail (seq and hash of the
last entry) and the log file's device and inode: a cut tail, a deleted log and a log replaced by another
file (a copy, a symlink) are caught. Appends refuse a symlink (``O_NOFOLLOW``) and a log that does not
match its anchor, so the gate refuses tool calls rather than write an unverifiable log.

Each append is one ``write`` of a whole line, flushed and fsynced, under a process lock and ``flock``.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import hmac
import json
import os
import re
import secrets
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

Kind = Literal["tool_call", "decision", "approval", "policy_change", "risk", "log_restarted"]
KINDS: tuple[str, ...] = ("tool_call", "decision", "approval", "policy_change", "risk", "log_restarted")
GENESIS = "0" * 64
_LOCK = threading.Lock()
_SUFFIX = re.compile(rb',"hash":"([0-9a-f]{64})","hmac":"([0-9a-f]{64})"\}\Z')
OLD_FORMAT = (
    "written by an older mnemo (entries not bound to their workspace and bytes), which this version "
    "cannot verify: keep it as a record under another name (e.g. audit-v1.jsonl) and a new log starts"
)


class AuditLogRefused(ValueError):
    """The log cannot be appended to safely (a symlink, replaced, cut, or without its anchor)."""


class _LogMissing(Exception):
    """The log file is gone while its anchor records entries."""


def default_key_path() -> Path:
    import platformdirs

    return Path(platformdirs.user_data_dir("mnemo")) / "audit.key"


def canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def workspace_id(log_path: Path) -> str:
    """The id entries carry: derived from the resolved folder holding the log (changes when it moves)."""
    folder = str(log_path.parent.resolve()).encode("utf-8", "surrogateescape")
    return hashlib.sha256(b"mnemo-audit-workspace\0" + folder).hexdigest()[:32]


def load_or_create_key(key_path: Path) -> bytes:
    """Read the HMAC key, creating a random one (mode 0600, folder 0700) when absent."""
    try:
        key = key_path.read_bytes()
    except FileNotFoundError:
        key_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        key = secrets.token_bytes(32)
        try:
            fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return key_path.read_bytes()
        with os.fdopen(fd, "wb") as fh:
            fh.write(key)
            fh.flush()
            os.fsync(fh.fileno())
        return key
    if len(key) < 32:
        raise ValueError(f"audit key {key_path} is shorter than 32 bytes")
    return key


@dataclass
class VerifyReport:
    ok: bool
    entries: int
    """Complete, parseable entries read."""
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """Restarts recorded in the chain (a deleted log, `mnemo audit restart`): not tampering, but shown."""


@dataclass(frozen=True)
class Anchor:
    seq: int
    hash: str
    dev: int
    ino: int


@dataclass(frozen=True)
class Line:
    """One line as written: its body, its hash and HMAC as recorded, and whether the hash fits the bytes."""

    seq: Any
    prev: Any
    ws: Any
    digest: str
    mac: str
    content_ok: bool


def parse_line(raw: bytes) -> Line | str:
    """The entry of one line, or why it is not one."""
    found = _SUFFIX.search(raw)
    if found is None:
        try:
            loose = json.loads(raw)
        except ValueError:
            return "not a valid audit entry"
        if isinstance(loose, dict) and "hash" in loose and "hmac" in loose:
            return "reformatted: not the bytes mnemo wrote" if "ws" in loose else OLD_FORMAT
        return "not a valid audit entry"
    body = raw[: found.start()]
    try:
        entry = json.loads(body + b"}")
        seq, prev, ws = entry["seq"], entry["prev"], entry["ws"]
    except (ValueError, KeyError, TypeError):
        return "not a valid audit entry"
    digest, mac = found.group(1).decode(), found.group(2).decode()
    return Line(seq, prev, ws, digest, mac, hashlib.sha256(body).hexdigest() == digest)


class AuditLog:
    def __init__(self, path: Path, key_path: Path | None = None) -> None:
        self.path = path
        self.key_path = key_path or default_key_path()
        self.workspace_id = workspace_id(path)
        self._key: bytes | None = None

    @property
    def key(self) -> bytes:
        if self._key is None:
            self._key = load_or_create_key(self.key_path)
        return self._key

    def _sign(self, what: bytes) -> str:
        return hmac.new(self.key, what, hashlib.sha256).hexdigest()

    def _entry_mac(self, digest: str) -> str:
        return self._sign(b"entry\0" + digest.encode("ascii"))

    # -- the anchor: the tail and the file's identity, next to the key -------------------------------
    @property
    def head_path(self) -> Path:
        return self.key_path.with_name(f"audit-anchor-{self.workspace_id}.json")

    def read_anchor(self) -> Anchor | None:
        """The recorded tail; None when there is none; ValueError when it is not signed by the key."""
        try:
            raw = json.loads(self.head_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise ValueError(f"the audit anchor {self.head_path} cannot be read ({exc})") from exc
        mac = raw.pop("hmac", "") if isinstance(raw, dict) else ""
        if not hmac.compare_digest(self._sign(b"anchor\0" + canonical(raw)), str(mac)):
            raise ValueError(f"the audit anchor {self.head_path} is not signed by the audit key")
        if raw.get("ws") != self.workspace_id:
            raise ValueError(f"the audit anchor {self.head_path} belongs to another workspace")
        return Anchor(int(raw["seq"]), str(raw["hash"]), int(raw["dev"]), int(raw["ino"]))

    def _write_anchor(self, anchor: Anchor) -> None:
        body = {"ws": self.workspace_id, **dataclasses.asdict(anchor)}
        body["hmac"] = self._sign(b"anchor\0" + canonical(body))
        tmp = self.head_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(body), encoding="utf-8")
        os.chmod(tmp, 0o600)
        os.replace(tmp, self.head_path)

    # -- appending -----------------------------------------------------------------------------------
    def append(self, kind: Kind, data: dict[str, Any]) -> dict[str, Any]:
        """Append one entry and return it (AuditLogRefused when the log is not the one mnemo wrote).

        A log that is gone while its anchor says entries were written (most often a user clearing
        ``.mnemo/``, which holds the rebuildable index too; the agent's sandbox cannot) does not stop
        the tools: a new log starts whose first entry records the loss (``log_restarted``, with the
        previous tail), so the gap stays in the signed chain and ``mnemo audit verify`` shows it. A
        replaced, cut or linked log is refused instead: that is not something a user does by accident."""
        if kind not in KINDS:
            raise ValueError(f"unknown audit kind {kind!r}")
        try:
            return self._append(kind, data)
        except _LogMissing:
            self.restart("the log was missing (deleted, e.g. with .mnemo/): a new one starts here")
            return self._append(kind, data)

    def _append(self, kind: Kind, data: dict[str, Any]) -> dict[str, Any]:
        with _LOCK:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            anchor = self.read_anchor()
            flags = os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
            try:
                fd = os.open(self.path, flags | (os.O_CREAT if anchor is None else 0), 0o600)
            except FileNotFoundError:
                if os.path.lexists(self.path):  # a dangling symbolic link: refused, not restarted
                    raise AuditLogRefused(self._refusal("is a broken link", anchor)) from None
                raise _LogMissing from None
            except OSError as exc:  # ELOOP: a symbolic link
                raise AuditLogRefused(self._refusal(f"cannot be opened safely ({exc})", anchor)) from exc
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                entry = self._append_locked(fd, anchor, kind, data)
            finally:
                os.close(fd)
        return entry

    def _refusal(self, what: str, anchor: Anchor | None) -> str:
        return (
            f"the audit log {self.path} {what}: run `mnemo audit verify`; to start a new log (the old one "
            "and its recorded tail are kept), run `mnemo audit restart`"
        )

    def restart(self, reason: str) -> dict[str, Any]:
        """Start a new log on the user's explicit request: the current log (whatever it is, a symlink
        included) and its anchor are renamed aside, never deleted, and the new log's first entry
        (``log_restarted``) records the previous recorded tail and where the old files went."""
        stamp = time.strftime("%Y%m%dT%H%M%S")
        try:
            anchor = self.read_anchor()
        except ValueError:
            anchor = None
        kept: dict[str, str] = {}
        with _LOCK:
            if os.path.lexists(self.path):
                aside = self.path.with_name(f"{self.path.stem}-{stamp}.retired{self.path.suffix}")
                os.rename(self.path, aside)
                kept["log"] = str(aside)
            if os.path.lexists(self.head_path):
                aside = self.head_path.with_name(f"{self.head_path.name}.retired-{stamp}")
                os.rename(self.head_path, aside)
                kept["anchor"] = str(aside)
        previous = {"seq": anchor.seq, "hash": anchor.hash} if anchor is not None else None
        return self.append("log_restarted", {"reason": reason, "previous_tail": previous, "kept": kept})

    def _append_locked(
        self, fd: int, anchor: Anchor | None, kind: Kind, data: dict[str, Any]
    ) -> dict[str, Any]:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise AuditLogRefused(self._refusal("is not a regular file", anchor))
        if anchor is not None and (st.st_dev, st.st_ino) != (anchor.dev, anchor.ino):
            raise AuditLogRefused(self._refusal("was replaced by another file", anchor))
        seq, prev, torn = _tail(fd, st.st_size)
        if anchor is None and st.st_size:
            with open(fd, "rb", closefd=False) as fh:
                first = parse_line(fh.readline().rstrip(b"\n"))
            why = (
                OLD_FORMAT if first == OLD_FORMAT else f"has entries but no recorded tail ({self.head_path})"
            )
            raise AuditLogRefused(self._refusal(why, anchor))
        if anchor is not None and (seq, prev) != (anchor.seq, anchor.hash) and seq != anchor.seq + 1:
            raise AuditLogRefused(self._refusal("does not end with the entry last written", anchor))
        body: dict[str, Any] = {
            "seq": seq + 1,
            "ts": round(time.time(), 6),
            "kind": kind,
            "data": data,
            "prev": prev,
            "ws": self.workspace_id,
        }
        head = canonical(body)[:-1]
        digest = hashlib.sha256(head).hexdigest()
        mac = self._entry_mac(digest)
        line = head + f',"hash":"{digest}","hmac":"{mac}"}}\n'.encode("ascii")
        os.write(fd, (b"\n" if torn else b"") + line)  # a torn line stays visible to verify
        os.fsync(fd)
        self._write_anchor(Anchor(body["seq"], digest, st.st_dev, st.st_ino))
        return {**body, "hash": digest, "hmac": mac}

    def entries(self) -> list[dict[str, Any]]:
        """The parseable entries, in file order (no verification)."""
        out: list[dict[str, Any]] = []
        if self.path.exists():
            for raw in self.path.read_bytes().splitlines():
                try:
                    out.append(json.loads(raw))
                except ValueError:
                    continue
        return out

    # -- verifying -----------------------------------------------------------------------------------
    def verify(self) -> VerifyReport:
        """Check the file (not a link, the one written), every line's bytes, HMAC, workspace, seq
        continuity, the prev chain, and the tail against the anchor."""
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return VerifyReport(True, 0)
        if stat.S_ISLNK(st.st_mode):
            target = os.readlink(self.path)
            return VerifyReport(False, 0, [f"{self.path} is a symbolic link (to {target}): refused"])
        if not stat.S_ISREG(st.st_mode):
            return VerifyReport(False, 0, [f"{self.path} is not a regular file: refused"])
        problems: list[str] = []
        try:
            anchor = self.read_anchor()
        except ValueError as exc:
            anchor = None
            problems.append(str(exc))
        if anchor is not None and (st.st_dev, st.st_ino) != (anchor.dev, anchor.ino):
            problems.append(
                f"{self.path} was replaced: it is not the file mnemo wrote (device/inode "
                f"{st.st_dev}/{st.st_ino}, recorded {anchor.dev}/{anchor.ino})"
            )
        with open(self.path, "rb") as fh:  # lstat said a regular file; O_NOFOLLOW-equivalent below
            if os.fstat(fh.fileno()).st_ino != st.st_ino:
                return VerifyReport(False, 0, [f"{self.path} changed while it was verified"])
            raw = fh.read()
        count, hashes, last = self._check_lines(raw, problems)
        self._check_tail(anchor, hashes, last, count, problems)
        return VerifyReport(not problems, count, problems, self._restarts(raw))

    @staticmethod
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
            lost = (
                f"; entries up to seq {tail['seq']} of the previous log are not here" if "seq" in tail else ""
            )
            notes.append(f"seq {entry.get('seq')}: restarted — {entry.get('data', {}).get('reason')}{lost}")
        return notes

    def _check_lines(self, raw: bytes, problems: list[str]) -> tuple[int, dict[int, str], tuple[int, str]]:
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
            if not hmac.compare_digest(self._entry_mac(line.digest), line.mac):
                problems.append(f"line {lineno} (seq {seq}): hmac mismatch (forged or re-hashed entry)")
            if line.ws != self.workspace_id:
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
                f"workspace, not this one ({self.workspace_id}): a log copied from elsewhere, or this "
                "workspace was moved (see docs/security.md)"
            )
        return count, hashes, (expected_seq, expected_prev)

    def _check_tail(
        self,
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
                    f"no recorded tail for this log ({self.head_path} is missing): its end cannot be checked"
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


def _tail(fd: int, size: int) -> tuple[int, str, bool]:
    """(last seq, last hash, torn) from the last entry line; (-1, GENESIS, False) when there is none."""
    block = min(size, 65536)
    while True:
        data = os.pread(fd, block, size - block)
        lines = data.split(b"\n")[1 if block < size else 0 :]
        for text in reversed(lines):
            line = parse_line(text)
            if isinstance(line, Line) and isinstance(line.seq, int):
                return line.seq, line.digest, not data.endswith(b"\n")
        if block == size:
            return -1, GENESIS, bool(data) and not data.endswith(b"\n")
        block = min(size, block * 4)
