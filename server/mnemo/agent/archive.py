"""The session archive: each finished month of each conversation, summarised once into Markdown.

Transcripts stay JSONL (``sessions/<id>.jsonl``); an archive run adds, per conversation key and
finished month (UTC, by the events' ``ts``), ``sessions/<context>-<key>/YYYY-MM.md``
(:mod:`.archive_format`) with a summary and key excerpts linking to the turns (:mod:`.archive_summary`).
Archives are a search source of their own (``archive``) and plain files: deleting one removes it from
the index at the next sync and touches nothing else — MEMORY.md, daily notes and transcripts stay.

Incremental: ``<index dir>/archive-state.json`` records every month archived (and the day of the last
automatic run), so a finished month is summarised once, and a deleted archive is not written again
unless its month is asked for by name (``mnemo archive --month``). A transcript unchanged since the last
run whose months are all archived is not read again. Runs are serialised across processes by a lock file.

A conversation the user marked private (the session's ``private`` flag) is archived only with its
``archive`` flag (consent); ``[sessions] keep_raw = false`` deletes a transcript once all its months are
archived.
"""

from __future__ import annotations

import calendar
import contextlib
import fcntl
import json
import logging
import os
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mnemo.atomic_file import replace_text
from mnemo.config import SessionsSettings
from mnemo.errors import MnemoError
from mnemo.memory.limits import InvalidInput
from mnemo.secrets.scanner import redact_text, scan_text

from . import archive_format as fmt
from .archive_raw import RawTranscripts, archived_sessions
from .archive_summary import Summary, Turn, excerpts, extractive_summary, model_summary
from .providers import ChatProvider
from .session_keys import base_id
from .sessions import Session, SessionError, SessionStore

log = logging.getLogger(__name__)
STATE_FILE = "archive-state.json"
LOCK_FILE = "archive.lock"
_MONTH = re.compile(r"^\d{4}-(0[1-9]|1[0-2])$")


class ArchiveBusy(MnemoError):
    """Another process is archiving this workspace's sessions."""


@dataclass
class ArchivedMonth:
    path: str
    month: str
    context: str
    channel: str
    peer: str
    sessions: list[str]
    messages: int
    summary: str
    notes: list[str] = field(default_factory=list)


@dataclass
class ArchiveReport:
    dry_run: bool
    months: list[ArchivedMonth] = field(default_factory=list)
    """Archives written (or that would be, in a dry run)."""
    already: int = 0
    """Finished months of the transcripts read that an earlier run archived (kept as they are, deleted or
    not); transcripts unchanged since then are not read at all."""
    skipped: list[tuple[str, str]] = field(default_factory=list)
    """(session id, why) of transcripts not archived."""
    removed: list[str] = field(default_factory=list)
    """Transcripts deleted after archiving (``keep_raw = false``)."""

    @property
    def changed(self) -> bool:
        """Whether files were written or deleted (the index has something to pick up)."""
        return not self.dry_run and bool(self.months or self.removed)


@dataclass
class _Month:
    """The turns of one archive (a conversation key's month) gathered from its transcripts."""

    folder: str
    context: str
    origin: fmt.Origin
    turns: list[Turn] = field(default_factory=list)

    def sessions(self) -> set[str]:
        return {t.session_id for t in self.turns}


def check_month(month: str | None, current: str) -> str | None:
    if month is None:
        return None
    if not isinstance(month, str) or not _MONTH.match(month):
        raise InvalidInput(f"'month' must be written YYYY-MM (e.g. 2026-10), got {month!r}")
    if month >= current:
        raise InvalidInput(f"{month} is not finished yet: only months before {current} are archived")
    return month


def archive_turns(session: Session) -> list[Turn]:
    """The user messages and replies of a transcript, numbered by user turn."""
    out: list[Turn] = []
    number = 0
    for event in session.events:
        kind, ts = event.get("type"), event.get("ts")
        if kind not in ("user", "assistant") or not isinstance(ts, str) or not _MONTH.match(ts[:7]):
            continue
        if kind == "user":
            number += 1
        text = str(event.get("text", ""))
        if text.strip():
            out.append(Turn(session.id, max(number, 1), str(kind), text, ts))
    return out


def consent_problem(session: Session) -> str | None:
    """Why a transcript may not be archived (marked private without consent), else None."""
    flags = session.flags
    if flags.get("private") and not flags.get("archive"):
        return "marked private; archived only with consent (mnemo archive --consent ID)"
    return None


class SessionArchiver:
    """Builds the monthly archives of a workspace's transcripts (see the module's docstring)."""

    def __init__(
        self,
        root: Path,
        state_dir: Path,
        settings: SessionsSettings,
        *,
        provider: Callable[[], ChatProvider | None] | None = None,
        origins: Callable[[], Mapping[str, str]] | None = None,
    ) -> None:
        self.root = root
        self.store = SessionStore(root)
        self.state_path = state_dir / STATE_FILE
        self.lock_path = state_dir / LOCK_FILE
        self.settings = settings
        self.provider = provider
        """The chat model for summaries, asked for once per run that has a month to archive; None (or
        it gives None): extractive summaries."""
        self.origins = origins
        """Transcript id -> gateway session key (read at each run; the gateway's session table)."""
        self.cancel = threading.Event()

    # -- entry points -----------------------------------------------------------------------------
    def run(
        self, month: str | None = None, *, dry_run: bool = False, now: datetime | None = None
    ) -> ArchiveReport:
        """Archive every finished month not archived yet (``month``: that one, written again)."""
        now = now or datetime.now(UTC)
        month = check_month(month, now.strftime("%Y-%m"))
        with self._locked():
            return self._run(month, dry_run, now)

    def run_if_due(self, now: datetime | None = None) -> ArchiveReport | None:
        """The automatic run of a server: at most once a day (UTC), when ``auto_archive`` is on; None when
        it was not due, or another process is archiving."""
        now = now or datetime.now(UTC)
        today = now.strftime("%Y-%m-%d")
        if not self.settings.auto_archive or self._state().get("lastRun") == today:
            return None
        try:
            with self._locked():
                if self._state().get("lastRun") == today:  # another process ran meanwhile
                    return None
                return self._run(None, False, now)
        except ArchiveBusy:
            return None

    # -- the run ------------------------------------------------------------------------------------
    def _run(self, month: str | None, dry_run: bool, now: datetime) -> ArchiveReport:
        current = now.strftime("%Y-%m")
        state = self._state()
        done: dict[str, Any] = dict(state.get("done") or {})
        files: dict[str, Any] = dict(state.get("files") or {})
        origins = dict(self.origins()) if self.origins is not None else {}
        report = ArchiveReport(dry_run)
        months: dict[tuple[str, str], _Month] = {}
        present = list(self._transcripts())
        stems = {p.stem for p in present}
        files = {stem: known for stem, known in files.items() if stem in stems}
        for path in present:
            seen = self._gather(path, files, done, month, current, origins, months, report)
            if seen is None:
                files.pop(path.stem, None)
            else:
                files[path.stem] = seen
        todo: list[tuple[str, str, _Month]] = []
        for (folder, name), gathered in sorted(months.items()):
            rel = f"sessions/{folder}/{name}.md"
            key = f"{folder}/{name}"
            written_from = archived_sessions(done.get(key))
            gone = sorted(written_from - stems) if written_from is not None else []
            if month is None and (key in done or (self.root / rel).exists()):
                missing = sorted(gathered.sessions() - written_from) if written_from is not None else []
                if not missing:
                    report.already += 1
                    done.setdefault(key, {"at": now.isoformat(), "found": True})
                    continue
                if gone:  # written again from the transcripts present, it would lose those conversations
                    why = f"{rel} was written without it, and transcripts it holds are deleted: kept raw"
                    report.skipped.extend((sid, why) for sid in missing)
                    continue
            elif month is not None and gone:
                why = f"writing {rel} again would drop {len(gone)} conversation(s) whose transcripts are deleted"
                report.skipped.append((key, why))
                continue
            todo.append((rel, name, gathered))
        model = self._model() if todo else None
        for rel, name, gathered in todo:
            folder = gathered.folder
            archived = self._archive(rel, name, gathered, model, dry_run)
            report.months.append(archived)
            done[f"{folder}/{name}"] = {
                "at": now.isoformat(),
                "summary": archived.summary,
                "sessions": archived.sessions,  # (a transcript is deleted only once its turns are in)
            }
        if not self.settings.keep_raw:
            report.removed = RawTranscripts(self.root, self.store).remove(files, done, current, dry_run)
        if not dry_run:
            self._save({"version": 1, "lastRun": now.strftime("%Y-%m-%d"), "done": done, "files": files})
        return report

    def _model(self) -> ChatProvider | None:
        try:
            return self.provider() if self.provider is not None else None
        except MnemoError as exc:  # no usable chat model: the summaries are extractive
            log.warning("archive summaries are extractive: %s", exc)
            return None

    def _gather(
        self,
        path: Path,
        files: dict[str, Any],
        done: dict[str, Any],
        month: str | None,
        current: str,
        origins: Mapping[str, str],
        months: dict[tuple[str, str], _Month],
        report: ArchiveReport,
    ) -> dict[str, Any] | None:
        """Add a transcript's finished months to ``months``; returns what the state remembers of it."""
        stat = path.stat()
        known = files.get(path.stem)
        if (
            isinstance(known, dict)
            and known.get("size") == stat.st_size
            and known.get("mtime") == stat.st_mtime_ns
            and all(f"{known.get('folder')}/{m}" in done for m in known.get("months", ()))
            and (month is None or month not in known.get("months", ()))
        ):
            return known  # unchanged, and all its months archived: not read again
        try:
            session = self.store.load(path.stem)
        except SessionError as exc:
            log.warning("archive: %s", exc)
            return None
        turns = archive_turns(session)
        folder = fmt.archive_dir(session.id, session.kind)
        finished = sorted({t.ts[:7] for t in turns if t.ts[:7] < current})
        why = consent_problem(session)
        if why is not None:
            if any(month is None or m == month for m in finished):
                report.skipped.append((session.id, why))
            return None
        origin = fmt.origin_of(session.id, origins.get(base_id(session.id)))
        for name in finished:
            if month is None or name == month:
                slot = months.setdefault((folder, name), _Month(folder, session.kind, origin))
                slot.turns.extend(t for t in turns if t.ts[:7] == name)
        all_months = sorted({t.ts[:7] for t in turns})
        return {"size": stat.st_size, "mtime": stat.st_mtime_ns, "folder": folder, "months": all_months}

    def _archive(
        self, rel: str, name: str, gathered: _Month, model: ChatProvider | None, dry_run: bool
    ) -> ArchivedMonth:
        turns = sorted(gathered.turns, key=lambda t: (t.ts, t.session_id, t.number))
        if dry_run:  # says who would summarise; the model is not run
            summary = Summary([], "extractive" if model is None else f"model {model.model}")
        elif model is None:
            summary = extractive_summary(turns)
        else:
            summary = model_summary(turns, model, self.cancel)
        sessions = sorted({t.session_id for t in turns})
        header = fmt.MonthHeader(
            gathered.folder, name, gathered.context, gathered.origin, sessions, len(turns), _last_day(name)
        )
        if not dry_run:
            text = fmt.render(header, summary, excerpts(turns))
            # An archive is memory (searched, recalled, committed): a key typed in a chat stays in its
            # transcript, not in the archive (mnemo's own audit flagged each one as critical).
            found = scan_text(text)
            if found:
                text = redact_text(text, found)
                summary.notes.append(f"{len(found)} secret(s) redacted")
            _write_private(self.root / rel, text)
        o = gathered.origin
        return ArchivedMonth(
            rel,
            name,
            gathered.context,
            o.channel,
            o.peer or o.group,
            sessions,
            len(turns),
            summary.by,
            summary.notes,
        )

    # -- files ----------------------------------------------------------------------------------------
    def _transcripts(self) -> Iterator[Path]:
        if not self.store.dir.is_dir():
            return
        for path in sorted(self.store.dir.glob("*.jsonl")):
            if path.is_file() and not path.is_symlink():
                try:
                    self.store.path(path.stem)
                except SessionError:
                    continue
                yield path

    def _state(self) -> dict[str, Any]:
        try:
            data = json.loads(self.state_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning(
                "%s is unreadable (%s); months already archived are kept as found", self.state_path, exc
            )
            return {}
        return data if isinstance(data, dict) else {}

    def _save(self, state: dict[str, Any]) -> None:
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, ensure_ascii=False, indent=1), encoding="utf-8")
        os.replace(tmp, self.state_path)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.lock_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                raise ArchiveBusy("another mnemo process is archiving this workspace's sessions") from exc
            yield
        finally:
            os.close(fd)


def _last_day(month: str) -> str:
    year, number = int(month[:4]), int(month[5:7])
    return f"{month}-{calendar.monthrange(year, number)[1]:02d}"


def _write_private(path: Path, text: str) -> None:
    """Write ``path`` whole (a temporary file renamed over it), readable by its owner only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_text(path, text, mode=0o600)
