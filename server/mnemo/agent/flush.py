"""The pre-compaction memory flush: a silent turn that saves what is worth keeping to today's daily note.

Silent: its prompt and reply are never streamed or shown; only a ``flush`` event records what happened.
Candidates from the live transcript are scored for importance (errors and lessons; decisions; explicit
"remember this"); questions and the model's unconfirmed answers are never offered. The model answers
with bullet items or ``NO_REPLY`` (its output passes the loop guard). Every item is then checked in code
(:mod:`mnemo.agent.flush_guard`: complete, no question, said by the user, new, at most N) and only the
kept ones are appended, each with its source turn, through :class:`MemoryWriter` (append-only daily
note, protected files refused), whatever the reply asks for. An empty or invalid output writes nothing
and the report says why; a dry run checks everything and writes nothing.
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from .flush_guard import (
    Conversation,
    Kept,
    MemoryLines,
    Rejected,
    check_items,
    confirmed_after,
    is_question,
    split_items,
)
from .loop_guard import LoopGuard
from .memory_writer import MemoryWriter, MemoryWriteRefused, daily_path, slugify
from .providers import ChatMessage, ChatProvider
from .sessions import Session, SessionStore
from .tool_calls import parse_tool_call, split_thoughts
from .tools import MemoryAccess

log = logging.getLogger(__name__)

NO_REPLY = "NO_REPLY"
SNAPSHOT_MESSAGES = 15
_BASE = {"thought": 3.0, "user": 2.0, "assistant": 2.0, "tool_result": 1.0, "tool_call": 0.5}
_BONUSES: tuple[tuple[re.Pattern[str], float], ...] = (
    (re.compile(r"\b(remember (this|that)|don'?t forget|note (this|that)|keep in mind)\b", re.I), 5.0),
    (
        re.compile(
            r"\b(error|failed|fails|failure|exception|bug|broke|lesson|learned|mistake|fix(ed)?)\b", re.I
        ),
        2.5,
    ),
    (re.compile(r"\b(decided|decision|we chose|chose|agreed|will use|going with|settled on)\b", re.I), 2.5),
    (re.compile(r"\b(prefer|always|never|deadline|due|todo|must)\b", re.I), 1.0),
)
FLUSH_SYSTEM = (
    "You are saving durable memories before old conversation turns are summarised away. From the "
    "candidate items below, write the facts, decisions, lessons and requests the user stated that are "
    "worth remembering: one short, complete sentence per Markdown bullet ('- ...'), most important first, "
    "each at most once. No questions. Write nothing else. If nothing is worth keeping, answer exactly "
    f"{NO_REPLY}."
)


@dataclass(frozen=True)
class Candidate:
    text: str
    kind: str
    score: float


@dataclass
class FlushReport:
    session_id: str
    written: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    no_reply: bool = False
    kept: int = 0
    candidates: int = 0
    skipped: str = ""
    dry_run: bool = False
    target: str = ""
    items: list[Kept] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)

    def summary(self) -> str:
        """One line for a person: what was (or would be) written, or why nothing was."""
        verb = "would keep" if self.dry_run else "kept"
        dropped = f"; rejected {len(self.rejected)}" if self.rejected else ""
        if self.items and (self.written or self.dry_run):
            return f"{verb} {len(self.items)} item(s) in {self.target}{dropped}"
        why = self.skipped or (self.refused[0] if self.refused else "nothing to keep")
        return f"nothing written: {why}{dropped}"


def score_item(kind: str, text: str) -> float:
    score = _BASE.get(kind, 0.0)
    for pattern, bonus in _BONUSES:
        if pattern.search(text):
            score += bonus
    return score


def candidates(events: list[dict[str, Any]], limit: int = 24) -> list[Candidate]:
    """Items (sentences of transcript events) ranked by importance; duplicates dropped. Questions and
    the model's unconfirmed answers are never offered (the guard would reject them anyway)."""
    found: dict[str, Candidate] = {}
    for i, event in enumerate(events):
        kind = str(event.get("type", ""))
        if kind not in _BASE or kind == "tool_call":
            continue
        if kind in ("assistant", "thought") and not confirmed_after(events, i):
            continue
        for piece in re.split(r"(?<=[.!?])\s+|(?<=[。！？])|\n+", str(event.get("text", ""))):
            piece = " ".join(piece.split()).lstrip("-* ")
            if len(piece) < 12 or is_question(piece):
                continue
            piece = piece[:300]
            candidate = Candidate(piece, kind, score_item(kind, piece))
            if piece not in found or found[piece].score < candidate.score:
                found[piece] = candidate
    ranked = sorted(found.values(), key=lambda c: -c.score)
    return [c for c in ranked if c.score >= 2.0][:limit]


class MemoryFlusher:
    def __init__(
        self,
        store: SessionStore,
        writer: MemoryWriter,
        provider: ChatProvider,
        *,
        memory: MemoryAccess | None = None,
        max_items: int = 5,
    ) -> None:
        self.store = store
        self.writer = writer
        self.provider = provider
        self.memory = memory
        self.max_items = max_items

    def _offer(self, session: Session, report: FlushReport) -> list[str]:
        found = candidates(session.live_events())
        report.candidates = len(found)
        budget = max(64, self.provider.context_window // 4)
        offered: list[str] = []
        used = 0
        for c in found:
            cost = self.provider.count_tokens(c.text) + 2
            if used + cost > budget:
                break
            offered.append(f"- {c.text}")
            used += cost
        return offered

    def _generate(self, offered: list[str], cancel: threading.Event | None) -> tuple[str, str, bool]:
        """The model's silent answer (never streamed anywhere), its finish reason, and whether its last
        line was cut (the token limit, or a loop trimmed in the middle of a line)."""
        messages = [
            ChatMessage("system", FLUSH_SYSTEM),
            ChatMessage("user", "Candidate items:\n" + "\n".join(offered)),
        ]
        guard = LoopGuard(self.provider.stream(messages, max_tokens=256, temperature=0.0, cancel=cancel))
        text = guard.read()
        cut = guard.finish_reason == "length"
        if guard.loop is not None:
            raw, keep = guard.raw_text, guard.loop.keep
            cut = not (raw[:keep].endswith("\n") or raw[keep:].startswith("\n"))
        return text, guard.finish_reason, cut

    def flush(
        self,
        session: Session,
        *,
        reason: str = "compaction",
        today: date | None = None,
        cancel: threading.Event | None = None,
        dry_run: bool = False,
    ) -> FlushReport:
        """Run the silent flush turn; check every item; append the kept ones (unless ``dry_run``).

        A ``flush`` event (the cycle's marker) is recorded in any case except a dry run."""
        report = FlushReport(session.id, dry_run=dry_run, target=daily_path(today or date.today()))
        offered = self._offer(session, report)
        reply, finish, cut = NO_REPLY, "stop", False
        if offered:
            reply, finish, cut = self._generate(offered, cancel)
        else:
            report.skipped = "nothing in the conversation scored as worth keeping"
        _thoughts, reply = split_thoughts(reply)
        if finish == "cancelled":
            report.skipped = "cancelled"
        elif not reply.strip():
            report.skipped = "the model's output was empty"
        elif reply.strip().upper().startswith(NO_REPLY):
            report.no_reply = True
            report.skipped = report.skipped or "the model found nothing worth keeping (NO_REPLY)"
        else:
            self._check_and_write(session, report, reply, cut=cut)
        if not dry_run:
            self._record(session, report, reason)
        return report

    def _check_and_write(self, session: Session, report: FlushReport, reply: str, *, cut: bool) -> None:
        call = parse_tool_call(reply, {"write_file", "append_file", "append_memory", "edit_file"})
        path, content = report.target, reply
        if call is not None:
            path = str(call.args.get("path", report.target))
            content = str(call.args.get("content", call.args.get("text", "")))
        try:
            if path != report.target:
                self.writer.check(path)  # protected files and escapes refused first, by name
                raise MemoryWriteRefused(f"{path}: the memory flush only appends to {report.target}")
            items = split_items(content)
            if not items:
                report.skipped = "invalid model output: no items"
                return
            with self.writer.exclusive():  # what is in memory stays so until the items are appended
                self._check_and_append(session, report, items, cut=cut)
        except MemoryWriteRefused as exc:
            log.warning("memory flush: %s", exc)
            report.refused.append(str(exc))

    def _check_and_append(
        self, session: Session, report: FlushReport, items: list[str], *, cut: bool
    ) -> None:
        report.items, report.rejected = check_items(
            items,
            Conversation(session.events),
            MemoryLines.read(self.writer.root),
            max_items=self.max_items,
            cut=cut,
            memory=self.memory,
        )
        report.kept = len(report.items)
        if not report.items:
            report.skipped = "every item was rejected"
        elif not report.dry_run:
            heading = f"Flushed from session {session.id} ({datetime.now().strftime('%H:%M')})"
            body = "\n".join(k.line(session.id) for k in report.items)
            report.written.append(self.writer.append_daily(report.target, body, heading=heading))

    def _record(self, session: Session, report: FlushReport, reason: str) -> None:
        self.store.append(
            session,
            "flush",
            NO_REPLY if report.no_reply else report.summary(),
            reason=reason,
            cycle=session.cycle,
            written=report.written,
            refused=report.refused,
            rejected=len(report.rejected),
        )

    def snapshot(self, session: Session, *, today: date | None = None) -> str | None:
        """Save the last messages as ``memory/YYYY-MM-DD-<slug>.md`` (for /new and /reset)."""
        messages = [e for e in session.events if e.get("type") in ("user", "assistant")][-SNAPSHOT_MESSAGES:]
        if not messages:
            return None
        day = today or date.today()
        lines = [f"# Session {session.id}", "", f"Snapshot of the last {len(messages)} message(s).", ""]
        for event in messages:
            text = " ".join(str(event.get("text", "")).split())
            lines.append(f"- **{event['type']}**: {text}")
        return self.writer.create_snapshot(day, slugify(session.title()), "\n".join(lines) + "\n")
