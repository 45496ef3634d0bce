"""The audit log's format: canonical JSON lines, hash-chained and HMAC'd, the workspace id, the key and
the anchor that records the tail (see :mod:`mnemo.policy.audit`, which appends and verifies)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GENESIS = "0" * 64
_SUFFIX = re.compile(rb',"hash":"([0-9a-f]{64})","hmac":"([0-9a-f]{64})"\}\Z')
OLD_FORMAT = (
    "written by an older mnemo (entries not bound to their workspace and bytes), which this version "
    "cannot verify: keep it as a record under another name (e.g. audit-v1.jsonl) and a new log starts"
)


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
        except (ValueError, RecursionError):  # RecursionError: nested deeper than json can follow
            return "not a valid audit entry"
        if isinstance(loose, dict) and "hash" in loose and "hmac" in loose:
            return "reformatted: not the bytes mnemo wrote" if "ws" in loose else OLD_FORMAT
        return "not a valid audit entry"
    body = raw[: found.start()]
    try:
        entry = json.loads(body + b"}")
        seq, prev, ws = entry["seq"], entry["prev"], entry["ws"]
    except (ValueError, KeyError, TypeError, RecursionError):
        return "not a valid audit entry"
    digest, mac = found.group(1).decode(), found.group(2).decode()
    return Line(seq, prev, ws, digest, mac, hashlib.sha256(body).hexdigest() == digest)


def is_torn(raw: bytes) -> bool:
    """Whether a line that is not an entry looks like the start of one cut short by a crash mid-write: it
    begins as every line mnemo writes does and is not complete JSON."""
    if not raw.startswith(b'{"data":'):
        return False
    try:
        json.loads(raw)
    except (ValueError, RecursionError):
        return True
    return False


def tail(fd: int, size: int) -> tuple[int, str, bool]:
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
