"""The only way the agent writes memory: append to a daily note, or create a new snapshot file.

Enforced here, whatever a model asks for: ``MEMORY.md``, ``SOUL.md``, ``AGENTS.md`` and ``TOOLS.md`` are
read-only; daily notes are only ever appended to (created when missing, never truncated or rewritten);
a snapshot is always a new file; nothing is written through a symlink or outside ``memory/``.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from datetime import date
from pathlib import Path, PurePosixPath

from mnemo.errors import MnemoError
from mnemo.flock_wait import take_exclusive

PROTECTED = frozenset({"memory.md", "soul.md", "agents.md", "tools.md"})
_DAILY_RE = re.compile(r"^memory/(\d{4}-\d{2}-\d{2})\.md$")
EXCLUSIVE_WAIT_S = 60.0


class MemoryWriteRefused(MnemoError):
    """The agent tried to write somewhere it may not (the message says why)."""


def daily_path(day: date) -> str:
    return f"memory/{day.isoformat()}.md"


def slugify(text: str, words: int = 6) -> str:
    found = re.findall(r"[a-z0-9]+", text.lower())
    return "-".join(found[:words])[:60].strip("-") or "session"


def _ends_lines_with_crlf(head: bytes) -> bool:
    """Whether a file's first line ends with CR LF (``head``: its first bytes)."""
    end = head.find(b"\n")
    return end > 0 and head[end - 1 : end] == b"\r"


class MemoryWriter:
    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    @contextlib.contextmanager
    def exclusive(self, timeout_s: float = EXCLUSIVE_WAIT_S) -> Iterator[None]:
        """Hold the workspace's memory writes (an ``flock`` on ``memory/``) across a read, its checks and
        the append: two flushes at once, in threads or processes, would each find a fact new and both
        write it. MemoryWriteRefused when another writer holds it past ``timeout_s``."""
        folder = self.root / "memory"
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
        try:
            if not take_exclusive(fd, timeout_s):
                raise MemoryWriteRefused(
                    f"another process kept memory/ locked for {timeout_s:g} s; nothing was written"
                )
            yield
        finally:
            os.close(fd)  # (releases the lock)

    def check(self, rel: str) -> Path:
        """The absolute path for a writable memory file, or MemoryWriteRefused."""
        pure = PurePosixPath(rel.replace("\\", "/"))
        if pure.name.lower() in PROTECTED:
            raise MemoryWriteRefused(
                f"{rel} is read-only to the agent (MEMORY.md, SOUL.md, AGENTS.md, TOOLS.md)"
            )
        if pure.is_absolute() or ".." in pure.parts or len(pure.parts) != 2 or pure.parts[0] != "memory":
            raise MemoryWriteRefused(f"{rel}: the agent only writes memory/YYYY-MM-DD*.md files")
        if pure.suffix != ".md":
            raise MemoryWriteRefused(f"{rel}: not a Markdown file")
        directory = self.root / "memory"
        if directory.is_symlink():
            raise MemoryWriteRefused("memory/ is a symlink: the agent does not write through it")
        path = directory / pure.name
        if path.is_symlink():
            raise MemoryWriteRefused(f"{rel} is a symlink: the agent does not write through it")
        return path

    def append_daily(self, rel: str, text: str, *, heading: str = "") -> str:
        """Append ``text`` to a daily note (``memory/YYYY-MM-DD.md``); never overwrites. Returns the path."""
        if not _DAILY_RE.match(rel.replace("\\", "/")):
            raise MemoryWriteRefused(f"{rel}: the memory flush only appends to memory/YYYY-MM-DD.md")
        path = self.check(rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            prefix = f"# {path.stem}\n" if size == 0 else ""
            if size and os.pread(fd, 1, size - 1) != b"\n":
                prefix = "\n"
            body = text.replace("\r\n", "\n").rstrip()
            block = prefix + "\n" + (f"## {heading}\n" if heading else "") + body + "\n"
            if _ends_lines_with_crlf(os.pread(fd, 4096, 0)):  # a note written on Windows stays CRLF
                block = block.replace("\n", "\r\n")
            os.write(fd, block.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
        return rel

    def create_snapshot(self, day: date, slug: str, text: str) -> str:
        """Write a new ``memory/YYYY-MM-DD-<slug>.md`` (``-2``, ``-3``... when the name is taken)."""
        for n in range(1, 1000):
            rel = f"memory/{day.isoformat()}-{slug}{'' if n == 1 else f'-{n}'}.md"
            path = self.check(rel)
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                continue
            try:
                os.write(fd, text.encode("utf-8"))
                os.fsync(fd)
            finally:
                os.close(fd)
            return rel
        raise MemoryWriteRefused(f"too many snapshots named memory/{day.isoformat()}-{slug}*.md")
