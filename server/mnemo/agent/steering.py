"""Steering a running turn: messages that arrive for a session while its turn runs.

A front (LSP ``mnemo/steer``, the gateway's ``chat.send`` to a busy session) calls
:meth:`mnemo.agent.Agent.steer`; the text waits in the session's inbox and the turn loop takes it at its
next safe point — before each model call, so after a tool step or after an answer — and adds it to the
transcript as a user message marked ``"steering": true``. While the turn compacts (memory flush and
summary) messages wait (``queued``) and are taken right after. A message that arrives as the turn ends is
answered by a follow-up turn in the same ``chat`` call; nothing accepted is dropped. With no turn running
the answer is ``idle`` and the caller starts a normal turn.

Thread-safe: fronts call :meth:`SteeringInbox.steer` from their own threads (or event loop) while the
turn runs on a worker thread. In-process only: another process's turn is not steered.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from mnemo.errors import MnemoError

SteerState = Literal["injected", "queued", "idle"]
"""``injected``: the running turn takes it at its next safe point; ``queued``: the turn is compacting and
takes it afterwards; ``idle``: no turn runs for that session (start one)."""
MAX_WAITING = 32
"""Steering messages one running turn may hold; more are refused (:class:`SteeringFull`)."""


class SteeringFull(MnemoError):
    """A running turn already holds ``MAX_WAITING`` steering messages."""


@dataclass
class _Run:
    waiting: list[str] = field(default_factory=list)
    compacting: bool = False


class SteeringInbox:
    """Per-session inboxes of the turns that run in this process."""

    def __init__(self, max_waiting: int = MAX_WAITING) -> None:
        self.max_waiting = max_waiting
        self._lock = threading.Lock()
        self._runs: dict[str, _Run] = {}

    def begin(self, session_id: str) -> None:
        """A turn of ``session_id`` starts: from now on it accepts steering."""
        with self._lock:
            self._runs.setdefault(session_id, _Run())

    def steer(self, session_id: str, text: str) -> SteerState:
        with self._lock:
            run = self._runs.get(session_id)
            if run is None:
                return "idle"
            if len(run.waiting) >= self.max_waiting:
                raise SteeringFull(
                    f"this turn already holds {len(run.waiting)} steering messages; wait for its answer"
                )
            run.waiting.append(text)
            return "queued" if run.compacting else "injected"

    def take(self, session_id: str) -> list[str]:
        """What waits for the running turn, oldest first (emptied); nothing while it compacts."""
        with self._lock:
            run = self._runs.get(session_id)
            if run is None or run.compacting:
                return []
            taken, run.waiting = run.waiting, []
            return taken

    def pending(self, session_id: str) -> bool:
        with self._lock:
            run = self._runs.get(session_id)
            return run is not None and bool(run.waiting)

    @contextlib.contextmanager
    def compacting(self, session_id: str) -> Iterator[None]:
        """While the turn flushes and summarises: messages are accepted as ``queued`` and wait."""
        with self._lock:
            run = self._runs.get(session_id)
            if run is not None:
                run.compacting = True
        try:
            yield
        finally:
            with self._lock:
                if run is not None:
                    run.compacting = False

    def finish(self, session_id: str) -> list[str]:
        """The turn is about to end: what arrived since its last safe point (the run stays open to answer
        it), or ``[]`` and the run is closed — atomically, so a message is either taken or ``idle``."""
        with self._lock:
            run = self._runs.get(session_id)
            if run is None:
                return []
            if run.waiting:
                taken, run.waiting = run.waiting, []
                return taken
            del self._runs[session_id]
            return []

    def end(self, session_id: str) -> list[str]:
        """Close the run whatever waits (the turn was stopped or failed); returns what was not taken."""
        with self._lock:
            run = self._runs.pop(session_id, None)
            return [] if run is None else run.waiting

    def running(self, session_id: str) -> bool:
        with self._lock:
            return session_id in self._runs
