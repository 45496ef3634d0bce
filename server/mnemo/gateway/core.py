"""GatewayCore: a normalised message in, the agent's reply out — routing, session policy, lanes.

Knows nothing of WebSockets or HTTP: channels and the JSON-RPC front call :meth:`GatewayCore.handle`,
and deliver the :class:`GatewayReply` back where the message came from.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from mnemo.agent.steering import SteeringFull, SteerState
from mnemo.agent.tools import ReplyCitation
from mnemo.errors import MnemoError

from .lanes import Lanes
from .routing import InboundMessage, Route, Router
from .session_table import SessionTable
from .settings import GatewaySettings

if TYPE_CHECKING:
    from mnemo.agent.archive import ArchiveReport

log = logging.getLogger(__name__)


class MessageTooLarge(MnemoError):
    """A message longer than ``max_message_chars``."""

    def __init__(self, length: int, limit: int) -> None:
        self.length, self.limit = length, limit
        super().__init__(
            f"the message is {length} characters; this gateway accepts at most {limit} "
            "(gateway.max_message_chars)"
        )


class ChatResult(Protocol):
    """What the gateway reads of a turn's reply (:class:`mnemo.agent.agent.ChatReply`)."""

    @property
    def text(self) -> str: ...
    @property
    def citations(self) -> list[ReplyCitation]: ...
    @property
    def finish_reason(self) -> str: ...
    @property
    def notes(self) -> list[str]: ...
    @property
    def tool_calls(self) -> int:
        """Tools run in the turn (with :attr:`flush`: whether files may have been written)."""
        ...

    @property
    def flush(self) -> object | None: ...


class ChatAgent(Protocol):
    """What the gateway needs of :class:`mnemo.agent.Agent` (a scripted agent in load tests)."""

    def chat(
        self,
        message: str,
        session_id: str | None = None,
        *,
        kind: Any = "private",
        on_delta: Callable[[str], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> ChatResult: ...

    def steer(self, session_id: str, text: str) -> SteerState:
        """Hand ``text`` to the session's running turn; ``idle`` when none runs."""
        ...


@dataclass
class GatewayReply:
    text: str
    route: Route
    session_id: str
    fresh_session: bool = False
    citations: list[ReplyCitation] = field(default_factory=list)
    finish_reason: str = "stop"
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    steered: SteerState | None = None
    """Set when the message went into the session's running turn (``[gateway] steering``): its answer
    comes with that turn's reply, this one has no text."""


class GatewayCore:
    def __init__(self, settings: GatewaySettings, agent: ChatAgent, table: SessionTable) -> None:
        self.settings = settings
        self.agent = agent
        self.table = table
        self.router = Router(settings)
        self.lanes = Lanes(settings.max_concurrent, settings.queue_limit)
        self.handled = 0
        self.after_turn: Callable[[ChatResult], None] | None = None
        """Called in the worker thread with the agent's reply (e.g. to re-index files its tools wrote)."""
        self.archive: Callable[[str | None, bool], ArchiveReport | None] | None = None
        """The session archive, ``(month, dry_run)`` (``Services.archive``): ``sessions.archive`` runs it."""

    async def handle(
        self,
        message: InboundMessage,
        *,
        on_delta: Callable[[str], None] | None = None,
        force_group: bool = False,
    ) -> GatewayReply:
        """Route ``message``, queue it in its session's lane, run the turn, return the reply."""
        if len(message.text) > self.settings.max_message_chars:
            raise MessageTooLarge(len(message.text), self.settings.max_message_chars)
        route = self.router.resolve(message, force_group=force_group)
        steered = self._steer(message, route)
        if steered is not None:
            self.handled += 1
            return steered
        started = time.perf_counter()
        cancel = threading.Event()

        def turn() -> GatewayReply:
            return self._turn(message, route, on_delta, cancel)

        try:
            reply = await asyncio.wait_for(
                self.lanes.run(route.session_key, turn), timeout=self.settings.turn_timeout_s
            )
        except (TimeoutError, asyncio.CancelledError):
            cancel.set()  # the worker stops between tokens; the transcript keeps what was said
            raise
        reply.seconds = time.perf_counter() - started
        self.handled += 1
        return reply

    def _steer(self, message: InboundMessage, route: Route) -> GatewayReply | None:
        """With ``steering`` on, a message for a session whose turn runs, with nothing waiting in its lane,
        joins that turn (order kept: it cannot overtake a queued message); None: queue it as usual."""
        if not self.settings.steering or not self.lanes.steerable(route.session_key):
            return None
        entry = self.table.get(route.session_key)
        if entry is None:
            return None
        try:
            state = self.agent.steer(entry.session_id, _with_attachments(message))
        except SteeringFull:  # the turn holds enough: wait in the lane (bounded by queue_limit)
            return None
        if state == "idle":  # the turn ended meanwhile, or a command such as /new: the lane takes it
            return None
        return GatewayReply("", route, entry.session_id, steered=state)

    def _turn(
        self,
        message: InboundMessage,
        route: Route,
        on_delta: Callable[[str], None] | None,
        cancel: threading.Event,
    ) -> GatewayReply:
        policy = self.settings.agent(route.agent).sessions
        text = message.text
        if text.strip().lower() == "/new":
            entry = (
                self.table.reset(route.session_key)
                or self.table.use(route.session_key, route.agent, route.kind, policy, time.time())[0]
            )
            session_id = entry.session_id
            reply_text = "Started a new conversation."
            if on_delta:
                on_delta(reply_text)
            return GatewayReply(reply_text, route, session_id, fresh_session=True)
        entry, fresh = self.table.use(route.session_key, route.agent, route.kind, policy, time.time())
        text = _with_attachments(message)
        result = self.agent.chat(text, entry.session_id, kind=route.kind, on_delta=on_delta, cancel=cancel)
        if self.after_turn is not None:
            try:
                self.after_turn(result)
            except Exception:  # the reply is still good; the index catches up at the next sync
                log.exception("after-turn hook failed")
        return GatewayReply(
            result.text,
            route,
            entry.session_id,
            fresh_session=fresh,
            citations=list(result.citations),
            finish_reason=result.finish_reason,
            notes=list(result.notes),
        )

    def stats(self) -> dict[str, Any]:
        return {"handled": self.handled, **self.lanes.stats()}

    def close(self) -> None:
        self.lanes.close()


def _with_attachments(message: InboundMessage) -> str:
    if not message.attachments:
        return message.text
    listed = ", ".join(f"{a.kind} {a.name or a.url}".strip() for a in message.attachments)
    return f"{message.text}\n\n[attachments: {listed}]"
