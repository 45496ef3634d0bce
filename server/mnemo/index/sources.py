"""Reading memory files safely: size limits, binary files, invalid UTF-8, session transcripts."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from mnemo.workspace.layout import FileKind

_BINARY_PROBE = 8192
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


@dataclass(frozen=True)
class SourceText:
    """The text to index for one file, or why there is none."""

    text: str | None
    digest: str
    problem: str | None = None


def _mb(size: int) -> str:
    if size >= 100_000:
        return f"{size / 1_000_000:.1f} MB"
    return f"{size:,} bytes"


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def content_digest(path: Path, max_bytes: int) -> str | None:
    """The digest :func:`read_memory_file` gives the file now (without decoding it), or None when it
    cannot be read."""
    data = read_memory_bytes(path, max_bytes)
    return _digest(data) if isinstance(data, bytes) else (data.digest or None)


def decode_memory_bytes(data: bytes, kind: FileKind) -> SourceText:
    digest = _digest(data)
    if b"\x00" in data[:_BINARY_PROBE]:
        return SourceText(None, digest, "binary file (contains NUL bytes): not indexed")
    problem = None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        text = data.decode("utf-8-sig", errors="replace")
        problem = f"invalid UTF-8 at byte {exc.start}: indexed with U+FFFD in place of the bad bytes"
    if kind is FileKind.SESSION:
        text, broken = transcript_as_text(text)
        if broken:
            problem = f"{broken} malformed transcript line(s) skipped"
    return SourceText(text, digest, problem)


def read_memory_file(path: Path, kind: FileKind, max_bytes: int) -> SourceText:
    """Read a file for indexing. Never raises for bad content; an unreadable file gives a problem."""
    data = read_memory_bytes(path, max_bytes)
    return decode_memory_bytes(data, kind) if isinstance(data, bytes) else data


def read_memory_bytes(path: Path, max_bytes: int) -> bytes | SourceText:
    """A memory file's bytes, or the SourceText that says why they are not indexed (never raises)."""
    try:
        # Never blocks (a FIFO named like a note would wait for a writer forever), never follows a
        # symlink swapped in after the walk; what is read is checked on the open file itself.
        with os.fdopen(os.open(path, _READ_FLAGS), "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                return SourceText(None, "", "not a regular file (a pipe or a device?): not indexed")
            if st.st_size > max_bytes:
                return SourceText(
                    None,
                    f"size:{st.st_size}",
                    f"file is {_mb(st.st_size)}, over index.max_file_bytes ({_mb(max_bytes)}): not indexed",
                )
            return f.read()
    except FileNotFoundError:
        return SourceText(None, "", "file was deleted while indexing")
    except OSError as exc:
        return SourceText(None, "", f"cannot be read: {exc.strerror or exc}")


def _event_text(event: object) -> str:
    if not isinstance(event, dict):
        return ""
    kind = str(event.get("type") or event.get("role") or "")
    content = event.get("text", event.get("content", ""))
    if isinstance(content, list):
        content = " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    if not isinstance(content, str) or not content.strip():
        return ""
    return f"{kind}: {' '.join(content.split())}" if kind else " ".join(content.split())


def transcript_as_text(jsonl: str) -> tuple[str, int]:
    """One text line per transcript line, so chunk line numbers are transcript line numbers."""
    out: list[str] = []
    broken = 0
    for line in jsonl.split("\n"):
        if not line.strip():
            out.append("")
            continue
        try:
            out.append(_event_text(json.loads(line)))
        except ValueError:
            broken += 1
            out.append("")
    return "\n".join(out), broken
