"""Tamper-evident audit log: JSONL, each entry hash-chained to the previous one and HMAC'd.

An entry is ``{"seq", "ts", "kind", "data", "prev", "hash", "hmac"}``:

* ``hash`` = sha256 of the canonical JSON (sorted keys, no spaces, UTF-8) of the entry without
  ``hash``/``hmac``; ``prev`` = the previous entry's ``hash`` (64 zeros for the first);
* ``hmac`` = HMAC-SHA256 of ``hash`` under a random 32-byte key kept outside the workspace (default
  ``platformdirs.user_data_dir("mnemo")/audit.key``, mode 0600), so that an agent able to write the
  workspace cannot rewrite the log and recompute the chain.

Each append is one ``write`` of a whole line, flushed and fsynced, under a process-level lock.
:meth:`AuditLog.verify` names the line of each entry that was edited, removed, reordered or inserted, and a
truncated (torn) last line, and (through a signed head file next to the key) whole entries cut from the end.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

Kind = Literal["tool_call", "decision", "approval", "policy_change", "risk"]
KINDS: tuple[str, ...] = ("tool_call", "decision", "approval", "policy_change", "risk")
GENESIS = "0" * 64
_LOCK = threading.Lock()


def default_key_path() -> Path:
    import platformdirs

    return Path(platformdirs.user_data_dir("mnemo")) / "audit.key"


def canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


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


class AuditLog:
    def __init__(self, path: Path, key_path: Path | None = None) -> None:
        self.path = path
        self.key_path = key_path or default_key_path()
        self._key: bytes | None = None

    @property
    def key(self) -> bytes:
        if self._key is None:
            self._key = load_or_create_key(self.key_path)
        return self._key

    def _sign(self, digest: str) -> str:
        return hmac.new(self.key, digest.encode("ascii"), hashlib.sha256).hexdigest()

    @property
    def head_path(self) -> Path:
        """The anchor next to the key: the last (seq, hash) written, so that a cut tail is detected."""
        tag = hashlib.sha256(str(self.path.resolve()).encode()).hexdigest()[:16]
        return self.key_path.with_name(f"audit-head-{tag}.json")

    def _read_head(self) -> tuple[int, str] | None:
        try:
            head = json.loads(self.head_path.read_text(encoding="utf-8"))
            seq, digest = int(head["seq"]), str(head["hash"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return (
            (seq, digest)
            if hmac.compare_digest(self._sign(f"{seq}:{digest}"), str(head.get("hmac")))
            else None
        )

    def _tail(self) -> tuple[int, str, bool]:
        """(last seq, last hash, torn) from the last parseable line; (-1, GENESIS, False) when empty."""
        try:
            with self.path.open("rb") as fh:
                size = fh.seek(0, os.SEEK_END)
                block = min(size, 65536)
                while True:
                    fh.seek(size - block)
                    data = fh.read(block)
                    lines = data.split(b"\n")[1 if block < size else 0 :]
                    for line in reversed(lines):
                        try:
                            last = json.loads(line)
                            return int(last["seq"]), str(last["hash"]), not data.endswith(b"\n")
                        except (ValueError, KeyError, TypeError):
                            continue
                    if block == size:
                        return -1, GENESIS, bool(data) and not data.endswith(b"\n")
                    block = min(size, block * 4)
        except FileNotFoundError:
            return -1, GENESIS, False

    def append(self, kind: Kind, data: dict[str, Any]) -> dict[str, Any]:
        """Append one entry and return it."""
        if kind not in KINDS:
            raise ValueError(f"unknown audit kind {kind!r}")
        with _LOCK:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            seq, prev, torn = self._tail()
            entry: dict[str, Any] = {
                "seq": seq + 1,
                "ts": round(time.time(), 6),
                "kind": kind,
                "data": data,
                "prev": prev,
            }
            entry["hash"] = hashlib.sha256(canonical(entry)).hexdigest()
            entry["hmac"] = self._sign(entry["hash"])
            line = canonical(entry) + b"\n"
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, (b"\n" if torn else b"") + line)  # a torn line stays visible to verify
                os.fsync(fd)
            finally:
                os.close(fd)
            head = {"seq": entry["seq"], "hash": entry["hash"]}
            head["hmac"] = self._sign(f"{entry['seq']}:{entry['hash']}")
            tmp = self.head_path.with_suffix(".tmp")
            tmp.write_text(json.dumps(head), encoding="utf-8")
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.head_path)
        return entry

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

    def verify(self) -> VerifyReport:
        """Check every line: JSON, hash, HMAC, seq continuity and the prev chain."""
        problems: list[str] = []
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return VerifyReport(True, 0)
        lines = raw.split(b"\n")
        torn = lines.pop() if lines else b""
        if torn:
            problems.append(f"line {len(lines) + 1}: truncated last line (torn write or cut tail)")
        count = 0
        missing: set[int] = set()
        expected_seq, expected_prev = 0, GENESIS
        for lineno, line in enumerate(lines, start=1):
            try:
                entry = json.loads(line)
                seq, prev, digest, mac = entry["seq"], entry["prev"], entry["hash"], entry["hmac"]
            except (ValueError, KeyError, TypeError):
                problems.append(f"line {lineno}: not a valid audit entry")
                continue
            count += 1
            body = {k: v for k, v in entry.items() if k not in ("hash", "hmac")}
            content_ok = hashlib.sha256(canonical(body)).hexdigest() == digest
            if not content_ok:
                problems.append(f"line {lineno} (seq {seq}): edited: content does not match its hash")
            if not hmac.compare_digest(self._sign(str(digest)), str(mac)):
                problems.append(f"line {lineno} (seq {seq}): hmac mismatch (forged or re-hashed entry)")
            if seq != expected_seq:
                if isinstance(seq, int) and seq > expected_seq:
                    what = f"entries {expected_seq}..{seq - 1} removed" if seq - 1 > expected_seq else ""
                    what = what or f"entry {expected_seq} removed"
                    problems.append(f"line {lineno} (seq {seq}): seq gap: {what}")
                else:
                    problems.append(
                        f"line {lineno} (seq {seq}): out of order or inserted (expected seq {expected_seq})"
                    )
            elif prev != expected_prev and content_ok:
                problems.append(f"line {lineno} (seq {seq}): prev mismatch: chain broken before this entry")
            if isinstance(seq, int) and seq < expected_seq and seq in missing:
                problems[-1] += f" (reordered: seq {seq} was expected before line {lineno})"
            if isinstance(seq, int) and seq > expected_seq:
                missing.update(range(expected_seq, seq))
            missing.discard(seq)
            expected_seq = max(expected_seq, seq + 1) if isinstance(seq, int) else expected_seq + 1
            expected_prev = digest
        head = self._read_head()
        if head is not None and head[0] >= expected_seq:
            problems.append(
                f"tail truncated: the log ends at seq {expected_seq - 1} but seq {head[0]} was written "
                f"(entries {expected_seq}..{head[0]} missing)"
            )
        elif head is not None and head[0] == expected_seq - 1 and head[1] != expected_prev:
            problems.append(f"last entry (seq {head[0]}) differs from the one written (replaced tail)")
        return VerifyReport(not problems, count, problems)
