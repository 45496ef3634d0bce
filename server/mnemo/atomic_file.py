"""Replacing a file whole, so that a reader (and a crash) sees the old text or the new one, never a part.

The new text goes to a temporary file beside the target (created exclusively, with the target's mode),
is flushed to the disk, and is renamed over the target; then the folder's entry is flushed too. A failed
write (a full disk, a quota, a signal) leaves the target as it was and removes the temporary file.
"""

from __future__ import annotations

import contextlib
import os
import stat
import uuid
from pathlib import Path


def replace_text(path: Path, text: str, *, mode: int | None = None) -> None:
    """Write ``text`` (UTF-8, exactly as given: no newline translation) as the whole of ``path``.

    ``mode``: the new file's permissions; default: those of the file it replaces (for a new one, what
    ``open`` would give: 0o666 less the umask). Raises OSError, with ``path`` untouched."""
    data = text.encode("utf-8")
    if mode is None:
        with contextlib.suppress(FileNotFoundError):
            mode = stat.S_IMODE(os.stat(path).st_mode)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(tmp, flags, 0o666 if mode is None else 0o600)  # (a new file: the umask applies)
    try:
        try:
            if mode is not None:
                os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _sync_folder(path.parent)


def _sync_folder(folder: Path) -> None:
    """Flush the folder's entries (the rename) to the disk; a filesystem that cannot is left as it is."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
