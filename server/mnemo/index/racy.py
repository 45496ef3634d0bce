"""Racily clean files: an index skips a file whose (mtime, size) are as it recorded them, so it must never
record a stamp that a later write could repeat.

A file system stamps a write with a clock that ticks coarsely (a few milliseconds on Linux, two seconds
on FAT). A note read in the same tick as its last write can be written again in that tick: with the same
size (one digit edited: "Postgres 15" -> "Postgres 16") its stat does not change, and the index would keep
the old text for good. Git calls such files "racily clean" and Mercurial records no mtime for them.

Here too: a file read less than :data:`RACY_SECONDS` after its mtime is recorded with :data:`UNSETTLED`
in place of its mtime (the value an editor buffer's text is recorded with: "not the disk's state"). Such
a stamp never matches the disk, so the next look at the file compares its bytes with the digest the index
holds: the writer re-reads it (and records its real mtime once the file has settled), a read-only search
hashes it itself (:func:`stale_paths`). Only files written in the last seconds pay that read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

RACY_SECONDS = 2.0
"""A write this close before the read may share its mtime with a later one (FAT's tick is 2 s)."""

UNSETTLED = -1.0
"""The mtime recorded for a file whose stamp cannot be trusted: compare its content to know."""

Stamp = tuple[float, int]
"""(mtime, size) as :meth:`mnemo.workspace.layout.Workspace.stamps` reads them."""


def settled(mtime: float, read_at: float) -> bool:
    """A file whose stat said ``mtime`` and whose content was read after ``read_at`` (``time.time()``
    taken before the read) cannot be written again within the same tick: its stamp stands for that
    content (what a cache keyed by mtime and size may rely on)."""
    return read_at - mtime >= RACY_SECONDS


def recorded_mtime(mtime: float, read_at: float) -> float:
    """The mtime an index records for such a file: :data:`UNSETTLED` unless it has :func:`settled`."""
    return mtime if settled(mtime, read_at) else UNSETTLED


def stale_paths(
    recorded: Mapping[str, Stamp],
    on_disk: Mapping[str, Stamp],
    digests: Callable[[Iterable[str]], Mapping[str, str]],
    root: Path,
    max_bytes: int,
) -> set[str]:
    """Files added, changed or removed since the index recorded them: a stat each, and the content of
    those recorded :data:`UNSETTLED` with their size unchanged (``digests`` gives their recorded
    digests)."""
    stale = set(recorded.keys() ^ on_disk.keys())
    unsure: list[str] = []
    for path, stamp in on_disk.items():
        known = recorded.get(path)
        if known is None or known == stamp:
            continue
        if known[0] == UNSETTLED and known[1] == stamp[1]:
            unsure.append(path)
        else:
            stale.add(path)
    if unsure:
        from mnemo.index.sources import content_digest  # (hashlib and the reader: only for these files)

        expected = digests(unsure)
        stale.update(path for path in unsure if content_digest(root / path, max_bytes) != expected.get(path))
    return stale


def settled_since(recorded: Mapping[str, Stamp], on_disk: Mapping[str, Stamp], now: float) -> list[str]:
    """Files recorded :data:`UNSETTLED` whose mtime on disk is now old enough to be recorded (a writer's
    next sync does it, and a stat is enough for them from then on)."""
    return [
        path
        for path, (mtime, _) in on_disk.items()
        if path in recorded and recorded[path][0] == UNSETTLED and now - mtime >= RACY_SECONDS
    ]
