"""The workspace as a document set: which files are memory, of what kind, and safe path resolution.

Kinds:
- evergreen: ``MEMORY.md`` and undated ``memory/*.md`` topics (never decayed);
- daily: ``memory/YYYY-MM-DD.md``;
- snapshot: ``memory/YYYY-MM-DD-slug.md`` (dated, decayed like daily notes);
- skill: ``skills/*/SKILL.md`` (its own search source);
- session: ``sessions/*.jsonl`` transcripts (their own search source);
- archive: ``sessions/<context>-<key>/YYYY-MM.md`` monthly session archives (their own search source,
  dated by the month's last day; ``<context>`` is private or group, see :func:`archive_context`).
"""

from __future__ import annotations

import fnmatch
import logging
import os
import re
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date
from enum import StrEnum
from operator import attrgetter
from pathlib import Path, PurePosixPath
from typing import TypeVar

from mnemo.errors import MnemoError

_NAME = attrgetter("name")
log = logging.getLogger(__name__)
_WARNED: set[str] = set()
"""Names already warned about (a sync runs at every save)."""


def unusable_name(name: str) -> str | None:
    """Why a file or folder name cannot be part of a memory path, or None: a backslash (paths are
    written with / alone: `a\\b.md` would be read as `a/b.md`, another file), a control character (a
    newline would cut the citation a search prints in two) or bytes that are not UTF-8 (no index, JSON
    or editor can hold them)."""
    if "\\" in name:
        return "it holds a backslash"
    if name.isascii():
        return "it holds a control character" if not name.isprintable() else None
    if any(unicodedata.category(c) == "Cc" for c in name):
        return "it holds a control character"
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return "it is not valid UTF-8"
    return None


def shown_path(path: str) -> str:
    """A path as it can be printed: bytes that are not UTF-8 written ``\\xff``."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _skipped(path: str, why: str) -> None:
    if path not in _WARNED:
        _WARNED.add(path)
        log.warning("%s: not indexed: %s (rename it)", shown_path(path), why)


"""A directory entry's name (the walk's sort key)."""


class FileKind(StrEnum):
    EVERGREEN = "evergreen"
    DAILY = "daily"
    SNAPSHOT = "snapshot"
    SKILL = "skill"
    SESSION = "session"
    ARCHIVE = "archive"


class WorkspacePathError(ValueError):
    """A path that is not a memory file inside the workspace (escape, symlink out, wrong type)."""


class WorkspaceNotFound(MnemoError):
    """No workspace where a command looked for one (the CLI exits 2 and says how to make one)."""


MEMORY_FILES = ("MEMORY.md", "memory.md")
"""The workspace's main memory file, either spelling (at the workspace root; the first found is read)."""
WORKSPACE_FILES = ("mnemo.toml", *MEMORY_FILES)
WORKSPACE_DIR = ".mnemo"
"""A folder holding one of these files, or a ``.mnemo/`` folder, is a workspace."""


def is_workspace(folder: Path) -> bool:
    return any((folder / name).is_file() for name in WORKSPACE_FILES) or (folder / WORKSPACE_DIR).is_dir()


def find_workspace(start: Path, ceilings: Sequence[Path] = ()) -> Path:
    """The nearest workspace at or above ``start``, as Git finds a repository; raises when there is none.

    The walk stops below any of ``ceilings`` (as GIT_CEILING_DIRECTORIES: a ceiling itself is not looked at).
    """
    here = start.resolve()
    stops = {c.resolve() for c in ceilings}
    for folder in (here, *here.parents):
        if folder in stops:
            break
        if is_workspace(folder):
            return folder
    raise WorkspaceNotFound(
        f"no mnemo workspace in {here} or any folder above it (a workspace has mnemo.toml, MEMORY.md "
        "or .mnemo/); make one with `mnemo init PATH`, or name one with --workspace PATH"
    )


def named_workspace(path: Path) -> Path:
    """A workspace given by name (``--workspace``): used as it is, but it must be an existing folder."""
    resolved = path.expanduser().resolve()
    if not resolved.is_dir():
        raise WorkspaceNotFound(f"{path}: no such folder; make a workspace there with `mnemo init {path}`")
    return resolved


_DATED = re.compile(r"^([0-9]{4})-([0-9]{2})-([0-9]{2})(?:-([^/]+))?\.md$")  # (ASCII digits: not "２０２６")
_ARCHIVE_DIR = re.compile(r"^(private|group)-[A-Za-z0-9_][A-Za-z0-9_.-]*$")
_ARCHIVE_MONTH = re.compile(r"^([0-9]{4})-(0[1-9]|1[0-2])\.md$")


def archive_context(rel_path: str) -> str | None:
    """``private`` or ``group`` for a session archive (``sessions/<context>-<key>/YYYY-MM.md``), else None."""
    parts = rel_path.split("/")
    if len(parts) != 3 or parts[0] != "sessions" or not _ARCHIVE_MONTH.match(parts[2]):
        return None
    found = _ARCHIVE_DIR.match(parts[1])
    return found.group(1) if found else None


def readable_in(rel_path: str, private: bool) -> bool:
    """Whether a chat session of that kind may see a file: MEMORY.md only in private sessions, a session
    archive only in sessions of its own context (a group's archive never in a private one, and back)."""
    if rel_path in MEMORY_FILES:
        return private
    context = archive_context(rel_path)
    return context is None or context == ("private" if private else "group")


def _archive_day(name: str) -> date | None:
    """The last day of an archive's month (``2026-10.md`` -> 2026-10-31)."""
    found = _ARCHIVE_MONTH.match(name)
    if found is None:
        return None
    import calendar  # (and its locale module: only for a session archive)

    year, month = int(found.group(1)), int(found.group(2))
    return date(year, month, calendar.monthrange(year, month)[1])


_UNKNOWN = object()
K = TypeVar("K")
CLASSIFY_CACHE_PATHS = 200_000


@dataclass(frozen=True)
class MemoryFile:
    path: str  # workspace-relative, POSIX separators
    kind: FileKind
    day: date | None  # the date in a daily or snapshot file's name

    @property
    def source(self) -> str:
        """The search source: memory, skills, sessions or archive."""
        if self.kind is FileKind.SKILL:
            return "skills"
        if self.kind is FileKind.SESSION:
            return "sessions"
        if self.kind is FileKind.ARCHIVE:
            return "archive"
        return "memory"

    @property
    def evergreen(self) -> bool:
        return self.day is None


def not_a_date(rel_path: str) -> str | None:
    """The ``YYYY-MM-DD`` a note of ``memory/`` is named with when it is no calendar date (2026-02-30,
    2026-13-01): the note is indexed as an undated one, which its author did not mean."""
    parts = rel_path.split("/")
    if len(parts) != 2 or parts[0] != "memory":
        return None
    match = _DATED.match(parts[1])
    if match is None or _dated(parts[1]) is not None:
        return None
    return "-".join(match.group(1, 2, 3))


def _dated(name: str) -> tuple[date, bool] | None:
    match = _DATED.match(name)
    if not match:
        return None
    try:
        day = date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
    except ValueError:
        return None
    return day, match.group(4) is not None


class Workspace:
    """A folder of Markdown memory owned by the user. mnemo never writes Markdown while indexing."""

    def __init__(
        self,
        root: Path,
        *,
        ignore: Sequence[str] = (),
        extra_paths: Sequence[str] = (),
        include_sessions: bool = True,
    ) -> None:
        self.root = root.resolve()
        self.ignore = tuple(ignore)
        self._ignore_re = re.compile(
            "|".join(f"(?:{fnmatch.translate(p)})" for p in self.ignore) if self.ignore else r"(?!x)x"
        )
        # Patterns with no wildcard (the defaults: node_modules, .git, ...) match only themselves.
        self._ignore_names = (
            None if any(c in p for p in self.ignore for c in "*?[") else frozenset(self.ignore)
        )
        self.extra_paths = tuple(p.strip("/") for p in extra_paths if p.strip("/"))
        self.include_sessions = include_sessions
        self._classified: dict[str, MemoryFile | None] = {}

    # -- classification -------------------------------------------------------------------------
    def classify(self, rel_path: str) -> MemoryFile | None:
        """Kind of a workspace-relative path, or None when it is not memory (or is ignored).

        A pure function of the path and the workspace's settings, remembered: a scan classifies every
        file, and a no-op sync is mostly scanning.
        """
        known = self._classified.get(rel_path, _UNKNOWN)
        if known is not _UNKNOWN:
            return known  # type: ignore[return-value]
        found = self._classify(rel_path)
        if len(self._classified) > CLASSIFY_CACHE_PATHS:
            self._classified.clear()
        self._classified[rel_path] = found
        return found

    def _classify(self, rel_path: str) -> MemoryFile | None:
        """Plain string work (no pathlib, no fnmatch)."""
        rel = rel_path.replace("\\", "/").strip("/") if "\\" in rel_path else rel_path
        if not rel or rel.startswith("/") or rel_path.startswith("/"):
            return None
        parts = rel.split("/")
        if ".." in parts or "" in parts or self.is_ignored(rel, parts):
            return None
        name = parts[-1]
        if len(parts) == 1:
            if name in MEMORY_FILES:
                return MemoryFile(rel, FileKind.EVERGREEN, None)
            return None
        if parts[0] == "memory" and name.endswith(".md"):
            dated = _dated(name) if len(parts) == 2 else None
            if dated is None:
                return MemoryFile(rel, FileKind.EVERGREEN, None)
            day, is_snapshot = dated
            return MemoryFile(rel, FileKind.SNAPSHOT if is_snapshot else FileKind.DAILY, day)
        if len(parts) == 3 and parts[0] == "skills" and name == "SKILL.md":
            return MemoryFile(rel, FileKind.SKILL, None)
        if self.include_sessions and len(parts) == 2 and parts[0] == "sessions" and name.endswith(".jsonl"):
            return MemoryFile(rel, FileKind.SESSION, None)
        if len(parts) == 3 and archive_context(rel) is not None:
            return MemoryFile(rel, FileKind.ARCHIVE, _archive_day(name))
        for extra in self.extra_paths:
            if rel.startswith(extra + "/") and name.endswith(".md"):
                return MemoryFile(rel, FileKind.EVERGREEN, None)
        return None

    def is_ignored(self, rel_path: str, parts: Sequence[str] | None = None) -> bool:
        """Hidden path components, or a match of an ignore pattern on the whole path or any component."""
        if rel_path.startswith(".") or "/." in rel_path:  # a component may start with a dot: look closer
            if parts is None:
                parts = rel_path.split("/")
            if any(p.startswith(".") and p not in (".", "..") for p in parts):
                return True
        if not self.ignore:
            return False
        if parts is None:
            parts = rel_path.split("/")
        names = self._ignore_names
        if names is not None:
            return rel_path in names or not names.isdisjoint(parts)
        match = self._ignore_re.match
        return match(rel_path) is not None or any(match(p) is not None for p in parts)

    # -- paths ----------------------------------------------------------------------------------
    def relative(self, path: Path) -> str | None:
        """Workspace-relative POSIX path of an absolute path, or None when it lies outside."""
        try:
            return path.resolve().relative_to(self.root).as_posix()
        except (ValueError, OSError):
            return None

    def rel_from_uri(self, uri: str) -> str | None:
        from urllib.parse import unquote, urlparse

        parsed = urlparse(uri)
        if parsed.scheme != "file":
            return None
        return self.relative(Path(unquote(parsed.path)))

    def uri(self, rel_path: str) -> str:
        return (self.root / rel_path).as_uri()

    def resolve_memory_path(self, rel_path: str) -> tuple[Path, MemoryFile]:
        """Resolve a user-given path to a Markdown memory file inside the workspace, or raise."""
        if not rel_path or "\x00" in rel_path:
            raise WorkspacePathError("path is empty or contains a NUL byte")
        pure = PurePosixPath(rel_path.replace("\\", "/"))
        if pure.is_absolute():
            raise WorkspacePathError(f"{rel_path}: absolute paths are not allowed; give a workspace path")
        if ".." in pure.parts:
            raise WorkspacePathError(f"{rel_path}: '..' is not allowed in memory paths")
        if pure.suffix.lower() != ".md":
            raise WorkspacePathError(f"{rel_path}: only Markdown (.md) memory files can be read")
        memory_file = self.classify(pure.as_posix())
        if memory_file is None or memory_file.kind is FileKind.SESSION:
            raise WorkspacePathError(
                f"{rel_path}: not a memory file (MEMORY.md, memory/*.md, skills/*/SKILL.md)"
            )
        candidate = self.root / pure
        resolved = candidate.resolve()
        if not resolved.is_relative_to(self.root):
            raise WorkspacePathError(f"{rel_path}: resolves outside the workspace (symlink?)")
        if candidate.is_symlink():
            raise WorkspacePathError(f"{rel_path}: symlinked memory files are not followed")
        if not resolved.is_file():
            raise WorkspacePathError(f"{rel_path}: no such memory file")
        return resolved, memory_file

    def is_memory(self, rel_path: str) -> bool:
        """``classify(rel_path) is not None``, without building the answer: a topic or daily note
        (``memory/NAME.md``, the most of any workspace) is memory unless hidden or ignored, whatever
        its name says of its kind."""
        if rel_path.startswith("memory/") and rel_path.endswith(".md"):
            name = rel_path[7:]
            if name and "/" not in name and "\\" not in name:
                return not self.is_ignored(rel_path, ("memory", name))
        return self.classify(rel_path) is not None

    # -- scanning -------------------------------------------------------------------------------
    def scan(self) -> Iterator[tuple[MemoryFile, os.stat_result]]:
        """Every memory file on disk, skipping symlinks (no escapes) and ignored paths."""
        for _, memory_file, stat in self._found(self.classify):
            yield memory_file, stat

    def stamps(self) -> dict[str, tuple[float, int]]:
        """Every memory file :meth:`scan` finds, by path: its (mtime, size), as an index records them
        (what a read-only search compares to learn whether anything changed since the index)."""
        return {rel: (stat.st_mtime, stat.st_size) for rel, _, stat in self._found(self.is_memory)}

    def _found(self, keep: Callable[[str], K | None]) -> Iterator[tuple[str, K, os.stat_result]]:
        """The paths ``keep`` answers truthily for, under the folders memory can be in, with that answer
        and their lstat."""
        roots = ["memory", "skills", *self.extra_paths, "sessions"]  # sessions/: archives, transcripts
        for top in MEMORY_FILES:
            path = self.root / top
            if path.is_file() and not path.is_symlink():
                kept = keep(top)
                if kept:
                    yield top, kept, path.stat()
                break
        seen: set[str] = set()
        for top in roots:
            base = self.root / top
            if not base.is_dir() or base.is_symlink():
                continue
            yield from self._walk(str(base), top, seen, keep)

    def _walk(
        self, folder: str, rel_folder: str, seen: set[str], keep: Callable[[str], K | None]
    ) -> Iterator[tuple[str, K, os.stat_result]]:
        """Depth-first over a folder with scandir (one lstat a file, symlinks never followed)."""
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=_NAME)
        except OSError:
            return  # deleted or unreadable while scanning
        for entry in entries:
            if entry.is_symlink():
                continue
            why = unusable_name(entry.name)
            if why is not None:
                _skipped(entry.path, why)
                continue
            rel = f"{rel_folder}/{entry.name}"
            try:
                if entry.is_dir(follow_symlinks=False):
                    if not self.is_ignored(rel):
                        yield from self._walk(entry.path, rel, seen, keep)
                    continue
                if rel in seen or not entry.is_file(follow_symlinks=False):
                    continue  # (a pipe, socket or device named like a note is not one)
                kept = keep(rel)
                if not kept:
                    continue
                seen.add(rel)
                yield rel, kept, entry.stat(follow_symlinks=False)
            except OSError:
                continue  # deleted while scanning
