"""A session transcript's turns, as feedback needs them: what each turn searched, when, and how it ended.

A *turn* is a user message sent with chat (``mnemo/chat``, ``chat.send``, ``mnemo chat``), numbered from
1 in the transcript; a message steered into a running turn belongs to that turn. What a turn searched is
its message (automatic recall searches it as it is) and the ``query`` of each ``memory_search`` tool call
it made; its time span runs from its message to the next turn's. Implicit signals:

- ``tool``: a tool call in the turn succeeded (useful);
- ``kept`` / ``corrected``: the next turn's message went on, or said the answer was wrong.

What a turn's answers cite (``[memory/a.md#L3-L5]``) says which recalled chunks the answer used: those get
the turn's feedback in full, the others recalled with them less (:data:`mnemo.index.feedback.UNCITED`).

Read with :mod:`json` line by line (a torn last line is skipped), never through the agent, so memory does
not load the chat stack.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mnemo.errors import MnemoError
from mnemo.index.feedback import RetrievedChunk
from mnemo.memory.citations import parse_citation
from mnemo.memory.limits import InvalidInput

SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
"""What a session id may look like (the same rule as :mod:`mnemo.agent.sessions`)."""
SEARCH_TOOL = "memory_search"
_CORRECTION = re.compile(
    r"^\W*(no\b|nope\b|wrong\b|incorrect\b|not (?:right|true|correct)\b|that'?s (?:not|wrong|incorrect)\b|"
    r"that is (?:not|wrong|incorrect)\b|you'?re wrong\b|actually,? (?:it|that)'?s? (?:not|wrong)\b|"
    r"不对|不是|错了|错误)",
    re.IGNORECASE,
)


class FeedbackError(MnemoError):
    """Feedback that cannot be recorded: no such session or turn (the message says which)."""


@dataclass(frozen=True)
class FeedbackResult:
    """What one feedback recorded: the turn it was given on and the chunks it applies to."""

    session_id: str
    turn: int
    useful: bool
    signal: str
    chunks: list[RetrievedChunk] = field(default_factory=list)


@dataclass(frozen=True)
class Turn:
    number: int
    """1-based."""
    message: str
    start: datetime
    """Local time (naive, as the ``retrievals`` table stores it) of the user's message."""
    end: datetime | None
    """When the next turn began; None for the latest turn."""
    queries: tuple[str, ...]
    """Its message and its ``memory_search`` tool queries."""
    answered: bool
    tool_ok: bool
    """A tool call of the turn succeeded."""
    next_message: str | None
    cited: tuple[tuple[str, int, int], ...] = ()
    """(path, first line, last line) of each citation in the turn's answers."""


def local_time(ts: str) -> datetime | None:
    """A transcript timestamp (UTC, ``...Z``) as naive local time; None when it does not parse."""
    try:
        when = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone().replace(tzinfo=None)


_CITED = re.compile(r"\[([^\[\]\s]+?\.md(?:#L\d+(?:-L?\d+)?|:\d+(?:-\d+)?)?)\]")


def citations_in(text: str) -> list[tuple[str, int, int]]:
    """(path, first, last) of each ``[path#Lx-Ly]`` citation in an answer (a whole file: lines 1 to any)."""
    out = []
    for m in _CITED.finditer(text):
        try:
            cited = parse_citation(m.group(1))
        except InvalidInput:
            continue
        out.append((cited.path, cited.start or 1, cited.end or 10**9))
    return out


def is_correction(text: str) -> bool:
    """Whether a message opens by saying the previous answer was wrong."""
    return bool(_CORRECTION.match(text))


def transcript_path(root: Path, session_id: str) -> Path:
    if not SESSION_ID.match(session_id):
        raise FeedbackError(f"not a session id: {session_id!r}")
    return root / "sessions" / f"{session_id}.jsonl"


def read_events(path: Path) -> list[dict[str, Any]]:
    try:
        raw = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError as exc:
        raise FeedbackError(f"no session {path.stem} (no {path.name} in sessions/)") from exc
    events = []
    for line in raw.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue  # a torn last line
        if isinstance(event, dict):
            events.append(event)
    return events


def turns(events: list[dict[str, Any]]) -> list[Turn]:
    """The turns of a transcript, oldest first."""
    found: list[dict[str, Any]] = []
    for event in events:
        kind = event.get("type")
        if kind == "user" and not event.get("steering"):
            when = local_time(str(event.get("ts", "")))
            if when is None:
                continue
            found.append({"message": str(event.get("text", "")), "start": when, "queries": [], "ok": False})
            found[-1]["queries"].append(found[-1]["message"])
            found[-1]["answered"] = False
        elif not found:
            continue
        elif kind == "assistant":
            found[-1]["answered"] = True
            found[-1].setdefault("cited", []).extend(citations_in(str(event.get("text", ""))))
        elif kind == "tool_call" and event.get("tool") == SEARCH_TOOL:
            query = (event.get("args") or {}).get("query")
            if isinstance(query, str):
                found[-1]["queries"].append(query)
        elif kind == "tool_result" and event.get("ok"):
            found[-1]["ok"] = True
    out = []
    for i, t in enumerate(found):
        later = found[i + 1] if i + 1 < len(found) else None
        out.append(
            Turn(
                i + 1,
                t["message"],
                t["start"],
                later["start"] if later else None,
                tuple(dict.fromkeys(t["queries"])),
                t["answered"],
                t["ok"],
                later["message"] if later else None,
                tuple(dict.fromkeys(t.get("cited", []))),
            )
        )
    return out


def implicit_signals(turn: Turn) -> list[tuple[str, bool]]:
    """(signal, useful) pairs a finished turn gives without the user saying so."""
    if not turn.answered:
        return []
    found: list[tuple[str, bool]] = []
    if turn.tool_ok:
        found.append(("tool", True))
    if turn.next_message is not None:
        corrected = is_correction(turn.next_message)
        found.append(("corrected", False) if corrected else ("kept", True))
    return found
