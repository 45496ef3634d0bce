"""Raw transcripts after archiving (``[sessions] keep_raw = false``): a transcript is deleted once every
month of it is finished and archived with its turns in, and only if it is still what the run read (a turn
appended meanwhile keeps it). A month archived without a transcript's turns (a private conversation given
consent later) keeps that transcript: deleting it would lose them.
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import Any

from .sessions import SESSIONS_DIR, SessionStore

log = logging.getLogger(__name__)
LOCK_WAIT_S = 5.0
"""How long removing a raw transcript waits for a running turn of its session (then keeps it)."""


def archived_sessions(entry: object) -> set[str] | None:
    """The transcripts a month's archive was written from, as the state records them (None: not known,
    a month archived by an earlier version or found on disk)."""
    if isinstance(entry, dict) and isinstance(entry.get("sessions"), list):
        return {str(sid) for sid in entry["sessions"]}
    return None


class RawTranscripts:
    """Deletes the transcripts an archive run has made redundant."""

    def __init__(self, root: Path, store: SessionStore) -> None:
        self.root = root
        self.store = store

    def remove(self, files: dict[str, Any], done: dict[str, Any], current: str, dry_run: bool) -> list[str]:
        """Transcripts all of whose months are finished and archived with their turns in
        (``keep_raw = false``); a month archived without them (a private conversation given consent
        later) keeps them."""
        removed = []
        for stem, known in sorted(files.items()):
            months = known.get("months") or []
            if not months or max(months) >= current:
                continue
            if not all(self._holds(f"{known.get('folder')}/{m}", done, stem) for m in months):
                continue
            if not dry_run:
                if not self._unlink_unchanged(self.store.dir / f"{stem}.jsonl", known):
                    continue  # a turn came in since it was read: kept, read again next run
                del files[stem]  # iterating a sorted copy
            removed.append(f"{SESSIONS_DIR}/{stem}.jsonl")
        return removed

    def _holds(self, key: str, done: dict[str, Any], stem: str) -> bool:
        """Whether the archive ``key`` (``folder/YYYY-MM``) was written with transcript ``stem``'s turns:
        as the state recorded, or (a month archived before it recorded them) as its excerpts link it."""
        if key not in done:
            return False
        archived = archived_sessions(done[key])
        if archived is not None:
            return stem in archived
        with contextlib.suppress(OSError):
            return f"{stem}.jsonl" in (self.root / SESSIONS_DIR / f"{key}.md").read_text(encoding="utf-8")
        return False

    def _unlink_unchanged(self, path: Path, known: dict[str, Any]) -> bool:
        """Delete a transcript if it is still what the run archived (size and mtime as read, checked
        under the session's lock: a turn of this process is not writing it); False when it grew
        meanwhile, or a turn holds it (kept: the next run looks again)."""
        lock = self.store.lock(path.stem)
        if not lock.acquire(timeout=LOCK_WAIT_S):
            return False
        try:
            try:
                stat = path.stat()
            except FileNotFoundError:
                return True
            if (stat.st_size, stat.st_mtime_ns) != (known.get("size"), known.get("mtime")):
                log.info("%s changed while it was archived: kept", path.name)
                return False
            path.unlink()
            return True
        finally:
            lock.release()
