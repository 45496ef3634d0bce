"""The pre-compaction memory flush: a silent turn that saves what is worth keeping to today's daily note.

Silent: its prompt and reply are never streamed or shown; only a ``flush`` event records what happened.
Candidates from the live transcript are scored for importance (thoughts over raw observations; errors
and lessons; decisions; explicit "remember this") and the best are offered to the model, which answers
with the items to keep or ``NO_REPLY``. Writes go through :class:`MemoryWriter` (append-only daily note,
protected files refused), whatever the reply asks for.
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from .memory_writer import MemoryWriter, MemoryWriteRefused, daily_path, slugify
from .providers import ChatMessage, ChatProvider
from .sessions import Session, SessionStore
from .tool_calls import parse_tool_call, split_thoughts

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
    "candidate items below, write the facts, decisions, lessons and requests worth remembering as short "
    "Markdown bullet points ('- ...'), most important first. Write nothing else. If nothing is worth "
    f"keeping, answer exactly {NO_REPLY}."
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

    def as_dict(self) -> dict[str, Any]:
        return {
            "sessionId": self.session_id,
            "written": self.written,
            "refused": self.refused,
            "noReply": self.no_reply,
            "kept": self.kept,
            "candidates": self.candidates,
            "skipped": self.skipped,
        }


def score_item(kind: str, text: str) -> float:
    score = _BASE.get(kind, 0.0)
    for pattern, bonus in _BONUSES:
        if pattern.search(text):
            score += bonus
    return score


def candidates(events: list[dict[str, Any]], limit: int = 24) -> list[Candidate]:
    """Items (sentences of transcript events) ranked by importance; duplicates dropped."""
    found: dict[str, Candidate] = {}
    for event in events:
        kind = str(event.get("type", ""))
        if kind not in _BASE or kind == "tool_call":
            continue
        for piece in re.split(r"(?<=[.!?])\s+|\n+", str(event.get("text", ""))):
            piece = " ".join(piece.split()).lstrip("-* ")
            if len(piece) < 12:
                continue
            piece = piece[:300]
            candidate = Candidate(piece, kind, score_item(kind, piece))
            if piece not in found or found[piece].score < candidate.score:
                found[piece] = candidate
    ranked = sorted(found.values(), key=lambda c: -c.score)
    return [c for c in ranked if c.score >= 2.0][:limit]


def _bullets(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return "\n".join(line if line.startswith(("- ", "* ")) else f"- {line}" for line in lines)


class MemoryFlusher:
    def __init__(self, store: SessionStore, writer: MemoryWriter, provider: ChatProvider) -> None:
        self.store = store
        self.writer = writer
        self.provider = provider

    def flush(
        self,
        session: Session,
        *,
        reason: str = "compaction",
        today: date | None = None,
        cancel: threading.Event | None = None,
    ) -> FlushReport:
        """Run the silent flush turn and record a ``flush`` event (the cycle's marker) in any case."""
        report = FlushReport(session.id)
        day = today or date.today()
        found = candidates(session.live_events())
        report.candidates = len(found)
        budget = max(64, self.provider.context_window // 4)
        offered: list[str] = []
        used = 0
        for c in found:
            cost = self.provider.count_tokens(c.text) + 2
            if used + cost > budget:
                break
            offered.append(f"- ({c.kind}, importance {c.score:g}) {c.text}")
            used += cost
        reply = NO_REPLY
        if offered:
            messages = [
                ChatMessage("system", FLUSH_SYSTEM),
                ChatMessage("user", "Candidate items:\n" + "\n".join(offered)),
            ]
            stream = self.provider.stream(messages, max_tokens=256, temperature=0.0, cancel=cancel)
            reply = stream.read()  # silent: no delta goes anywhere
        else:
            report.skipped = "nothing scored as worth keeping"
        _thoughts, reply = split_thoughts(reply)
        target = daily_path(day)
        if not reply.strip() or reply.strip().upper().startswith(NO_REPLY):
            report.no_reply = True
        else:
            call = parse_tool_call(reply, {"write_file", "append_file", "append_memory", "edit_file"})
            path, content = target, reply
            if call is not None:
                path = str(call.args.get("path", target))
                content = str(call.args.get("content", call.args.get("text", "")))
            try:
                if path != target:
                    self.writer.check(path)  # protected files and escapes refused first, by name
                    raise MemoryWriteRefused(f"{path}: the memory flush only appends to {target}")
                bullets = _bullets(content)
                if bullets:
                    heading = f"Flushed from session {session.id} ({datetime.now().strftime('%H:%M')})"
                    report.written.append(self.writer.append_daily(target, bullets, heading=heading))
                    report.kept = bullets.count("\n") + 1
            except MemoryWriteRefused as exc:
                log.warning("memory flush: %s", exc)
                report.refused.append(str(exc))
        self.store.append(
            session,
            "flush",
            NO_REPLY
            if report.no_reply
            else f"kept {report.kept} item(s) in {', '.join(report.written) or '-'}",
            reason=reason,
            cycle=session.cycle,
            written=report.written,
            refused=report.refused,
        )
        return report

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
