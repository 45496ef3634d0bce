"""Session transcripts: ``<workspace>/sessions/<id>.jsonl``, one typed event a line.

Event types: ``session`` (the header: kind private|group), ``user``, ``assistant``, ``tool_call``,
``tool_result`` (an observation), ``thought``, ``compaction``, ``flush`` and ``flags`` (the user's marks on
the session: ``private``, ``archive`` consent; the last value of each wins, see :attr:`Session.flags`). Every event has ``type``,
``text`` (what the search index reads, see :func:`mnemo.index.sources.transcript_as_text`), ``ts`` and
``seq``. An append is one ``write`` of a whole line followed by fsync, so a crash leaves at most one
torn last line; loading skips it with a warning, and the next append starts on a fresh line.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from mnemo.errors import MnemoError

log = logging.getLogger(__name__)

SESSIONS_DIR = "sessions"
EVENT_TYPES = (
    "session",
    "user",
    "assistant",
    "tool_call",
    "tool_result",
    "thought",
    "compaction",
    "flush",
    "flags",
)
FLAG_NAMES = ("private", "archive")
"""``private``: the user marked the conversation private; ``archive``: consent to archive it anyway."""
CONVERSATION_TYPES = ("user", "assistant", "tool_call", "tool_result", "thought")
SessionKind = Literal["private", "group"]
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


def transcript_rel(session_id: str) -> str:
    """A session's transcript as a workspace path (what citations and recall name)."""
    return f"{SESSIONS_DIR}/{session_id}.jsonl"


def session_id_of(rel_path: str) -> str | None:
    """The session whose transcript ``rel_path`` is (``sessions/<id>.jsonl``), or None."""
    prefix = SESSIONS_DIR + "/"
    if not rel_path.startswith(prefix) or not rel_path.endswith(".jsonl"):
        return None
    session_id = rel_path[len(prefix) : -len(".jsonl")]
    return session_id if _ID_RE.match(session_id) else None


class SessionError(MnemoError):
    """A bad session id or a transcript that cannot be written."""


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class Session:
    id: str
    path: Path
    kind: SessionKind = "private"
    events: list[dict[str, Any]] = field(default_factory=list)
    skipped_lines: int = 0

    # -- views --------------------------------------------------------------------------------------
    def last_index(self, event_type: str) -> int:
        """Index in :attr:`events` of the last event of a type, or -1."""
        for i in range(len(self.events) - 1, -1, -1):
            if self.events[i].get("type") == event_type:
                return i
        return -1

    @property
    def cycle(self) -> int:
        """Compaction cycle: how many compactions the session has had."""
        return sum(1 for e in self.events if e.get("type") == "compaction")

    def flushed_this_cycle(self) -> bool:
        return self.last_index("flush") > self.last_index("compaction")

    def live_events(self) -> list[dict[str, Any]]:
        """Conversation events the last compaction did not summarise (its ``upto`` is the last seq it did)."""
        i = self.last_index("compaction")
        upto = int(self.events[i].get("upto", -1)) if i >= 0 else -1
        return [e for e in self.events if e.get("type") in CONVERSATION_TYPES and int(e.get("seq", 0)) > upto]

    def summary(self) -> str:
        i = self.last_index("compaction")
        return str(self.events[i].get("text", "")) if i >= 0 else ""

    def title(self) -> str:
        for event in self.events:
            if event.get("type") == "user":
                return " ".join(str(event.get("text", "")).split())[:80]
        return ""

    def updated(self) -> str:
        return str(self.events[-1].get("ts", "")) if self.events else ""

    @property
    def flags(self) -> dict[str, bool]:
        """The user's marks (:data:`FLAG_NAMES`), each as its last ``flags`` event set it."""
        found: dict[str, bool] = {}
        for event in self.events:
            if event.get("type") == "flags":
                found.update({k: bool(event[k]) for k in FLAG_NAMES if isinstance(event.get(k), bool)})
        return found


class SessionStore:
    """Creates, loads and appends to transcripts. Appends to one session are serialised in-process."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.dir = root / SESSIONS_DIR
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()

    def lock(self, session_id: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(session_id, threading.Lock())

    def path(self, session_id: str) -> Path:
        if not _ID_RE.match(session_id) or session_id.endswith(".jsonl"):
            raise SessionError(f"bad session id {session_id!r}: letters, digits, '.', '_' and '-' only")
        return self.dir / f"{session_id}.jsonl"

    def new_id(self) -> str:
        return f"{datetime.now().strftime('%Y-%m-%d-%H%M%S')}-{secrets.token_hex(3)}"

    def create(self, kind: SessionKind = "private", session_id: str | None = None) -> Session:
        session_id = session_id or self.new_id()
        session = Session(session_id, self.path(session_id), kind)
        if session.path.exists():
            raise SessionError(f"session {session_id} already exists")
        self.append(session, "session", "", kind=kind)
        return session

    def exists(self, session_id: str) -> bool:
        return self.path(session_id).is_file()

    def load(self, session_id: str) -> Session:
        path = self.path(session_id)
        try:
            data = path.read_bytes()
        except FileNotFoundError as exc:
            raise SessionError(f"no session {session_id}") from exc
        except OSError as exc:
            raise SessionError(f"cannot read {path}: {exc.strerror or exc}") from exc
        session = Session(session_id, path)
        for lineno, raw in enumerate(data.split(b"\n"), start=1):
            if not raw.strip():
                continue
            try:
                event = json.loads(raw.decode("utf-8"))
                if not isinstance(event, dict) or event.get("type") not in EVENT_TYPES:
                    raise ValueError("not a transcript event")
            except (ValueError, UnicodeDecodeError):
                session.skipped_lines += 1
                log.warning("%s:%d: skipping a torn or malformed transcript line", path, lineno)
                continue
            session.events.append(event)
        for event in session.events:
            if event.get("type") == "session" and event.get("kind") in ("private", "group"):
                session.kind = event["kind"]
                break
        return session

    def load_or_create(self, session_id: str | None, kind: SessionKind = "private") -> Session:
        if session_id and self.exists(session_id):
            return self.load(session_id)
        return self.create(kind, session_id)

    def append(self, session: Session, event_type: str, text: str, **fields: Any) -> dict[str, Any]:
        """Append one event durably: a single write of the whole line, then fsync."""
        if event_type not in EVENT_TYPES:
            raise ValueError(f"unknown event type {event_type!r}")
        event: dict[str, Any] = {
            "type": event_type,
            "text": text,
            "ts": _now(),
            "seq": int(session.events[-1].get("seq", len(session.events))) + 1 if session.events else 0,
            **fields,
        }
        line = (json.dumps(event, ensure_ascii=False) + "\n").encode("utf-8")
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(session.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                if _ends_torn(fd):
                    line = b"\n" + line  # never glue a new event onto a torn one
                os.write(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise SessionError(f"cannot append to {session.path}: {exc.strerror or exc}") from exc
        session.events.append(event)
        return event

    def set_flags(self, session: Session, **flags: bool) -> dict[str, bool]:
        """Mark the session (``private=True``, ``archive=True``...); returns its flags after the mark."""
        unknown = sorted(set(flags) - set(FLAG_NAMES))
        if unknown:
            raise SessionError(
                f"unknown session flag(s) {', '.join(unknown)}; known: {', '.join(FLAG_NAMES)}"
            )
        self.append(session, "flags", "", **{k: bool(v) for k, v in flags.items()})
        return session.flags

    def mark(self, session_id: str, **flags: bool) -> dict[str, bool]:
        """:meth:`set_flags` on the session as it is on disk now, after a running turn's appends in
        this process, never between them (the LSP's markSession and `mnemo archive --mark-private`)."""
        with self.lock(session_id):
            return self.set_flags(self.load(session_id), **flags)

    def list(self) -> Iterator[Session]:
        if not self.dir.is_dir():
            return
        for path in sorted(self.dir.glob("*.jsonl")):
            if _ID_RE.match(path.stem) and not path.is_symlink():
                try:
                    yield self.load(path.stem)
                except SessionError as exc:
                    log.warning("%s", exc)

    def archive(self, session: Session) -> Path:
        """Move a transcript aside (``<id>-reset-<time>.jsonl``) so its id can start afresh."""
        target = self.dir / f"{session.id}-reset-{datetime.now().strftime('%H%M%S%f')}.jsonl"
        os.replace(session.path, target)
        return target


def _ends_torn(fd: int) -> bool:
    size = os.fstat(fd).st_size
    if size == 0:
        return False
    return os.pread(fd, 1, size - 1) != b"\n"
