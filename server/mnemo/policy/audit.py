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

Each append is one ``write`` of a whole line, flushed and fsynced, under a process lock and ``flock``;
the anchor is read and rewritten under that ``flock`` (read before it, processes queued on the lock
refused each other: the tail had moved on).

The line format, the key and the anchor live in :mod:`.audit_format`; verification in
:mod:`.audit_verify`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import hmac
import json
import os
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from mnemo.policy.audit_format import (
    GENESIS,
    OLD_FORMAT,
    Anchor,
    Line,
    canonical,
    default_key_path,
    load_or_create_key,
    parse_line,
    tail,
    workspace_id,
)
from mnemo.policy.audit_verify import VerifyReport, verify_log

__all__ = [
    "GENESIS",
    "KINDS",
    "OLD_FORMAT",
    "Anchor",
    "AuditLog",
    "AuditLogRefused",
    "Kind",
    "Line",
    "VerifyReport",
    "canonical",
    "load_or_create_key",
    "parse_line",
    "workspace_id",
]

Kind = Literal["tool_call", "decision", "approval", "policy_change", "risk", "log_restarted"]
KINDS: tuple[str, ...] = ("tool_call", "decision", "approval", "policy_change", "risk", "log_restarted")
_LOCK = threading.Lock()


class AuditLogRefused(ValueError):
    """The log cannot be appended to safely (a symlink, replaced, cut, or without its anchor)."""


class _LogMissing(Exception):
    """The log file is gone while its anchor records entries."""


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

    def entry_mac(self, digest: str) -> str:
        """The HMAC an entry with hash ``digest`` carries."""
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
        """Under the ``flock``, read the anchor and append. The anchor is read after the lock is taken:
        processes queued on it would otherwise hold a tail that others have since moved on."""
        with _LOCK:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            for _ in range(3):  # the log renamed aside (`mnemo audit restart`) while this one waited
                fd = self._open()
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                    if self._is_current(fd):
                        return self._append_locked(fd, self.read_anchor(), kind, data)
                finally:
                    os.close(fd)
        raise AuditLogRefused(self._refusal("keeps being replaced while it is written", None))

    def _open(self) -> int:
        """The log, opened for appending without following a link; created only when no tail is recorded
        (_LogMissing when the anchor says entries were written to a log now gone)."""
        flags = os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            try:
                return os.open(self.path, flags)
            except FileNotFoundError:
                if os.path.lexists(self.path):  # a dangling symbolic link: refused, not restarted
                    raise AuditLogRefused(self._refusal("is a broken link", None)) from None
                if self.read_anchor() is not None:
                    raise _LogMissing from None
                return os.open(self.path, flags | os.O_CREAT, 0o600)
        except OSError as exc:  # ELOOP: a symbolic link
            raise AuditLogRefused(self._refusal(f"cannot be opened safely ({exc})", None)) from exc

    def _is_current(self, fd: int) -> bool:
        try:
            now = os.lstat(self.path)
        except FileNotFoundError:
            return False
        st = os.fstat(fd)
        return (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino)

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
        kept: dict[str, str] = {}
        with _LOCK, self._locked_if_regular():  # an append in flight finishes first, on the old log
            try:
                anchor = self.read_anchor()
            except ValueError:
                anchor = None
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

    @contextlib.contextmanager
    def _locked_if_regular(self) -> Iterator[None]:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:  # missing, or a link: nothing to wait for
            yield
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _append_locked(
        self, fd: int, anchor: Anchor | None, kind: Kind, data: dict[str, Any]
    ) -> dict[str, Any]:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise AuditLogRefused(self._refusal("is not a regular file", anchor))
        if anchor is not None and (st.st_dev, st.st_ino) != (anchor.dev, anchor.ino):
            raise AuditLogRefused(self._refusal("was replaced by another file", anchor))
        seq, prev, torn = tail(fd, st.st_size)
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
        mac = self.entry_mac(digest)
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

    def verify(self) -> VerifyReport:
        """Check the file (not a link, the one written), every line's bytes, HMAC, workspace, seq
        continuity, the prev chain, and the tail against the anchor (:mod:`.audit_verify`)."""
        return verify_log(self)
