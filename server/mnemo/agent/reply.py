"""What a chat turn and the session calls return: typed results, serialised by each front (mnemo.wire)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .flush import FlushReport
from .grounding import Grounding
from .providers.auto import ChatSelection
from .tools import ReplyCitation


@dataclass
class ChatReply:
    text: str
    session_id: str
    citations: list[ReplyCitation] = field(default_factory=list)
    finish_reason: str = "stop"
    tool_calls: int = 0
    compacted: bool = False
    flush: FlushReport | None = None
    notes: list[str] = field(default_factory=list)
    prompt_tokens: int = 0
    grounding: Grounding | None = None
    chat_model: ChatSelection | None = None

    def extend(self, later: ChatReply) -> None:
        """Fold in a follow-up turn (steering that arrived as this turn ended)."""
        self.text = "\n\n".join(t for t in (self.text, later.text) if t)
        self.citations = dedupe([*self.citations, *later.citations])
        self.finish_reason, self.grounding = later.finish_reason, later.grounding
        self.tool_calls += later.tool_calls
        self.compacted, self.flush = self.compacted or later.compacted, self.flush or later.flush
        self.notes.extend(later.notes)
        self.prompt_tokens = later.prompt_tokens


@dataclass(frozen=True)
class SessionInfo:
    """One stored conversation, as ``mnemo/sessions`` and ``mnemo sessions`` list it."""

    session_id: str
    kind: str
    title: str
    updated: str
    """ISO 8601 time of its last event."""
    messages: int
    """User and assistant messages."""
    compactions: int


@dataclass(frozen=True)
class NewSession:
    """A session started by ``/new`` or ``/reset`` (:meth:`mnemo.agent.Agent.new_session`, ``reset_session``)."""

    session_id: str
    kind: str
    snapshot: str | None
    """Where the previous conversation was saved as a memory snapshot (None: nothing to save)."""
    archived: str | None = None
    """``reset_session`` only: the file name the old transcript was moved to."""

    def describe(self) -> str:
        saved = f"; previous conversation saved to {self.snapshot}" if self.snapshot else ""
        return f"new session {self.session_id}{saved}"


def dedupe(citations: list[ReplyCitation]) -> list[ReplyCitation]:
    """The citations in order, each ``path#Lx-Ly`` once."""
    seen: set[str] = set()
    out = []
    for c in citations:
        if c.citation not in seen:
            seen.add(c.citation)
            out.append(c)
    return out
