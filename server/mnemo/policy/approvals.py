"""Approvals: who answers a ``confirm`` decision, and how long the gate waits (no answer means deny).

* :class:`ApprovalRequest`: what the user is asked (the command exactly as it will run, the rule, why).
* :class:`Approver`: ``ask(request) -> "allow_once" | "always" | "deny"``; blocking, and it must give up
  after ``request.timeout_s`` with ``"deny"``.
* :class:`ApprovalQueue`: pending requests that any front can list and resolve; it is an Approver itself,
  and "askers" (the LSP server's ``mnemo/approvalRequest``) are shown each request as it is submitted.
* :class:`TerminalApprover`: asks on stderr, reads the answer from stdin; ``assume_yes`` (``--yes``)
  approves confirm-level requests once and never anything else.
"""

from __future__ import annotations

import select
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TextIO, cast

Choice = Literal["allow_once", "always", "deny"]
CHOICES: tuple[str, ...] = ("allow_once", "always", "deny")


def parse_choice(value: Any) -> Choice:
    """A valid choice, or ValueError naming the valid ones."""
    if value not in CHOICES:
        raise ValueError(f"choice must be one of {', '.join(CHOICES)}, not {value!r}")
    return cast(Choice, value)


@dataclass
class ApprovalRequest:
    session: str
    tool: str
    args: dict[str, Any]
    summary: str
    """What will run, shown exactly: the command line for exec, ``write_file PATH (N bytes)`` ..."""
    decision: str
    """The verdict that asked for approval (``confirm``)."""
    rule: str
    reason: str
    timeout_s: float
    always_patterns: list[str] = field(default_factory=list)
    """The allow-rule patterns that "always" would add to mnemo.toml (empty: "always" acts as once)."""
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    created: float = field(default_factory=time.time)
    resolution: str = ""
    """Filled in by the approver: who answered (``client``, ``resolve``, ``terminal``, ``--yes``,
    ``timeout``, ``error``)."""


class Approver(Protocol):
    def ask(self, request: ApprovalRequest) -> Choice:
        """Block until answered or ``request.timeout_s`` passed (then ``"deny"``)."""
        ...


@dataclass
class _Pending:
    request: ApprovalRequest
    done: threading.Event = field(default_factory=threading.Event)
    choice: Choice = "deny"
    withdraw: list[Callable[[], object]] = field(default_factory=list)


Asker = Callable[[ApprovalRequest], Callable[[], object] | None]
"""Shows a request to someone (e.g. sends it to the editor); returns how to withdraw it, or None."""


class ApprovalQueue:
    """Pending approvals, resolvable from any thread; an unanswered request is denied at its timeout."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[str, _Pending] = {}
        self._listeners: list[Any] = []
        self._askers: list[Asker] = []

    def on_change(self, listener: Any) -> None:
        """Call ``listener()`` (from any thread) whenever a request is added or leaves the queue."""
        self._listeners.append(listener)

    def _changed(self) -> None:
        for listener in list(self._listeners):
            listener()

    def add_asker(self, asker: Asker) -> None:
        """Show every request submitted from now on to ``asker`` too (answers come back via resolve);
        its withdraw function runs when the request is answered elsewhere or times out."""
        self._askers.append(asker)

    def _submit(self, request: ApprovalRequest) -> _Pending:
        item = _Pending(request)
        with self._lock:
            self._pending[request.id] = item
        for asker in list(self._askers):
            withdraw = asker(request)
            if withdraw is None:
                continue
            with self._lock:  # answered while this asker showed it: withdraw its dialog at once
                answered = item.done.is_set()
                if not answered:
                    item.withdraw.append(withdraw)
            if answered:
                withdraw()
        self._changed()
        return item

    def pending(self) -> list[ApprovalRequest]:
        with self._lock:
            return [p.request for p in sorted(self._pending.values(), key=lambda p: p.request.created)]

    def resolve(self, request_id: str, choice: Choice, by: str = "resolve") -> bool:
        """Answer a pending request; False when it is unknown or already answered (or timed out)."""
        with self._lock:
            item = self._pending.pop(request_id, None)
            if item is None:
                return False
            item.choice = choice
            item.request.resolution = by
            item.done.set()
            withdraws = list(item.withdraw)
        for withdraw in withdraws:
            withdraw()
        self._changed()
        return True

    def _wait(self, item: _Pending, timeout_s: float) -> Choice:
        """Block until ``item`` is resolved; ``"deny"`` (resolution ``timeout``) when time runs out.

        It waits on the item itself, not on a lookup by id: an answer can come (and take the item off
        the queue) before this thread gets here, and that answer stands."""
        if item.done.wait(max(0.0, timeout_s)):
            return item.choice
        if self.resolve(item.request.id, "deny", by="timeout"):
            return "deny"
        return item.choice  # resolved in the instant between the wait and the timeout

    def ask(self, request: ApprovalRequest) -> Choice:
        return self._wait(self._submit(request), request.timeout_s)


class TerminalApprover:
    """Asks on ``err`` and reads one line from ``inp``: ``o``nce / ``a``lways / ``d``eny (default deny)."""

    def __init__(self, *, assume_yes: bool = False, inp: TextIO | None = None, err: TextIO | None = None):
        self.assume_yes = assume_yes
        self.inp = inp or sys.stdin
        self.err = err or sys.stderr

    def ask(self, request: ApprovalRequest) -> Choice:
        if self.assume_yes and request.decision == "confirm":
            request.resolution = "--yes"
            self.err.write(f"mnemo: approved by --yes: {request.summary}\n")
            return "allow_once"
        self.err.write(
            f"\nmnemo wants to run {request.tool}:\n    {request.summary}\n"
            f"  {request.decision} by {request.rule}: {request.reason}\n"
            f"  [o] allow once  [a] always allow  [d] deny  (deny in {request.timeout_s:g}s) > "
        )
        self.err.flush()
        line = self._readline(request.timeout_s)
        if line is None:
            request.resolution = "timeout"
            self.err.write("\nmnemo: no answer, denied\n")
            return "deny"
        request.resolution = "terminal"
        answer = line.strip().lower()
        if answer in ("o", "once", "y", "yes", "allow", "allow_once"):
            return "allow_once"
        if answer in ("a", "always"):
            return "always"
        return "deny"

    def _readline(self, timeout_s: float) -> str | None:
        try:
            fileno = self.inp.fileno()
        except (AttributeError, OSError, ValueError):
            fileno = -1
        if fileno >= 0:
            ready, _, _ = select.select([fileno], [], [], max(0.0, timeout_s))
            if not ready:
                return None
        line = self.inp.readline()
        return line if line else None  # EOF: nobody can answer
