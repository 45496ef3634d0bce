"""Agent: one chat turn = context, (flush + compaction when due), generation with tool calls, transcript.

Used by the CLI (``mnemo chat``), the LSP server (``mnemo/chat``) and the gateway alike; it knows nothing
of any of them. Deltas go to an ``on_delta`` callback; ``cancel`` stops generation between tokens;
``steer`` hands a message to the running turn of a session (:mod:`.steering`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import date
from pathlib import Path

from mnemo.config import AgentSettings

from .compaction import Compactor, Thresholds
from .context import COMPACT_WINDOW, ContextBuilder, TurnContext
from .flush import FlushReport, MemoryFlusher
from .grounding import NO_MEMORY, Grounder, Mode
from .loop_guard import LoopGuard
from .memory_writer import MemoryWriter
from .providers import ChatProvider, ProviderError
from .providers.auto import ChatSelection
from .providers.factory import selection_of
from .reply import ChatReply, NewSession, SessionInfo, dedupe
from .sessions import Session, SessionKind, SessionStore, transcript_rel
from .steering import SteeringInbox, SteerState
from .tool_calls import DeltaGate, parse_tool_call, split_thoughts
from .tools import MemoryAccess, ToolBox, ToolGate, args_text

log = logging.getLogger(__name__)

MAX_TOOL_STEPS = 4
COMMANDS = ("/new", "/reset", "/flush")


class Agent:
    def __init__(
        self,
        root: Path,
        memory: MemoryAccess,
        provider: ChatProvider,
        settings: AgentSettings | None = None,
        gate: ToolGate | None = None,
    ) -> None:
        self.root = root.resolve()
        self.memory = memory
        self.provider = provider
        self.settings = settings or AgentSettings()
        self.store = SessionStore(self.root)
        self.tools = ToolBox(memory, self.root, gate)
        self.context = ContextBuilder(
            self.root,
            memory,
            provider,
            recall_results=self.settings.recall_results,
            reply_tokens=self.settings.max_tokens,
            tools_text=self.tools.describe(),
        )
        self.tools.plugins.listeners.append(self._tools_changed)  # plugins come and go at run time
        self.flusher = MemoryFlusher(
            self.store,
            MemoryWriter(self.root),
            provider,
            memory=memory,
            max_items=self.settings.flush_max_items,
        )
        self.compactor = Compactor(self.store, provider)
        self.steering = SteeringInbox()

    def _tools_changed(self) -> None:
        """A plugin tool was added or removed: the next turn's context lists the tools as they are now."""
        self.context.tools_text = self.tools.describe()

    def model_info(self) -> ChatSelection:
        """Which chat model answers (as chosen by the factory; loads nothing)."""
        found = selection_of(self.provider)
        if found is not None:
            return found
        try:
            model = self.provider.model
        except ProviderError as exc:
            model = f"unavailable: {exc}"
        return ChatSelection("configured", self.provider.name, model)

    def grounding_mode(self) -> Mode:
        """``[agent] grounding``; auto: strict for the bundled demo model and small windows, else off."""
        setting = self.settings.grounding
        if setting != "auto":
            return setting
        selection = selection_of(self.provider)
        small = self.provider.context_window <= COMPACT_WINDOW
        return "strict" if small or (selection is not None and selection.kind == "bundled") else "off"

    def thresholds(self) -> Thresholds:
        s = self.settings
        return Thresholds.scaled(self.provider.context_window, s.reserve_floor, s.soft_threshold)

    # -- a turn -----------------------------------------------------------------------------------
    def chat(
        self,
        message: str,
        session_id: str | None = None,
        *,
        kind: SessionKind = "private",
        on_delta: Callable[[str], None] | None = None,
        cancel: threading.Event | None = None,
        today: date | None = None,
    ) -> ChatReply:
        command = message.strip().lower()
        if command in COMMANDS and session_id:
            return self._command(command, session_id, kind, on_delta, cancel)
        session = self.store.load_or_create(session_id, kind)
        with self.store.lock(session.id):
            session = self.store.load(session.id)  # another turn may have appended meanwhile
            reply = self._steerable_turn(session, message, on_delta, cancel, today)
        reply.chat_model = self.model_info()
        return reply

    def steer(self, session_id: str, text: str) -> SteerState:
        """Hand ``text`` to the running turn of ``session_id`` (:mod:`.steering`): ``injected``, ``queued``
        (it is compacting), or ``idle`` (no turn runs, or ``/new``-like command): send it with :meth:`chat`."""
        if text.strip().lower() in COMMANDS:
            return "idle"
        return self.steering.steer(session_id, text)

    def _steerable_turn(
        self,
        session: Session,
        message: str,
        on_delta: Callable[[str], None] | None,
        cancel: threading.Event | None,
        today: date | None,
    ) -> ChatReply:
        """A turn that takes steering; what arrives as it ends is answered by a follow-up turn."""
        self.steering.begin(session.id)
        try:
            reply = self._turn(session, message, on_delta, cancel, today)
            while not (cancel is not None and cancel.is_set()):
                late = self.steering.finish(session.id)
                if not late:
                    break
                if on_delta is not None and reply.text:
                    on_delta("\n\n")
                reply.extend(self._turn(session, "\n\n".join(late), on_delta, cancel, today, steering=True))
        finally:
            for text in self.steering.end(session.id):  # stopped or failed: keep what was said
                self.store.append(session, "user", text, steering=True, answered=False)
        return reply

    def _inject(self, session: Session, texts: list[str]) -> str:
        """Steering taken at a safe point, as user messages marked ``steering``; returns the newest."""
        for text in texts:
            self.store.append(session, "user", text, steering=True)
            if self.tools.gate is not None:
                self.tools.gate.observe_message(session.id, text)
        return texts[-1]

    def _turn(
        self,
        session: Session,
        message: str,
        on_delta: Callable[[str], None] | None,
        cancel: threading.Event | None,
        today: date | None,
        steering: bool = False,
    ) -> ChatReply:
        self.store.append(session, "user", message, **({"steering": True} if steering else {}))
        if self.tools.gate is not None:  # the policy's risk monitor reads what the user says
            self.tools.gate.observe_message(session.id, message)
        reply = ChatReply("", session.id)
        context = self._maybe_compact(session, message, reply, cancel, today)
        citations = list(context.citations)
        grounder = Grounder(self.grounding_mode(), self.memory, transcript_rel(session.id))
        recalled = context.recall.hits if context.recall is not None else None
        reply.grounding = grounder.before(message, recalled)
        if reply.grounding is not None:  # nothing relevant in memory: say so, do not ask the model
            return self._fixed_answer(session, reply, context, on_delta)
        answers: list[str] = []
        while True:
            steered = self.steering.take(session.id)
            if steered:  # a safe point: steering joins the conversation before the next model call
                message = self._inject(session, steered)
                context = self.context.build(session, message, today=today, recall=context.recall)
            gate = DeltaGate(on_delta or (lambda _d: None))
            stream = LoopGuard(  # a reply that repeats itself ends with finish reason "loop"
                self.provider.stream(
                    context.messages,
                    max_tokens=self.settings.max_tokens,
                    temperature=self.settings.temperature,
                    cancel=cancel,
                )
            )
            for delta in stream:
                gate.feed(delta)
            reply.finish_reason = stream.finish_reason
            thoughts, visible = split_thoughts(stream.text)
            for thought in thoughts:
                self.store.append(session, "thought", thought)
            call = None
            if stream.finish_reason not in ("cancelled", "loop") and reply.tool_calls < MAX_TOOL_STEPS:
                call = parse_tool_call(visible, self.tools.names)
            if call is None:
                if stream.finish_reason != "cancelled":
                    shown = {c.citation for c in context.citations}
                    hits = [h for h in recalled or () if h.citation in shown]
                    visible, reply.grounding = grounder.after(message, visible, hits, citations)
                gate.finish(visible)  # an appended citation is streamed; a quote before the text is not
                answers.append(visible)
                grounded = {"grounded": reply.grounding.action} if reply.grounding else {}
                self.store.append(session, "assistant", visible, finish=stream.finish_reason, **grounded)
                if stream.finish_reason == "cancelled" or not self.steering.pending(session.id):
                    break
                if on_delta is not None and visible:
                    on_delta("\n\n")  # the answer to the steering follows
                continue
            gate.finish(None)
            reply.tool_calls += 1
            self.store.append(
                session, "tool_call", args_text(call.name, call.args), tool=call.name, args=call.args
            )
            result = self.tools.run(session.id, call.name, call.args, private=session.kind == "private")
            citations.extend(result.citations)
            self.store.append(
                session, "tool_result", result.output, tool=call.name, ok=result.ok, decision=result.decision
            )
            context = self.context.build(session, message, today=today, recall=context.recall)
        reply.text = "\n\n".join(a for a in answers if a)
        reply.citations = dedupe(citations)
        reply.notes.extend(context.notes)
        reply.prompt_tokens = context.prompt_tokens
        return reply

    def _fixed_answer(
        self,
        session: Session,
        reply: ChatReply,
        context: TurnContext,
        on_delta: Callable[[str], None] | None,
    ) -> ChatReply:
        reply.text = NO_MEMORY
        if on_delta is not None:
            on_delta(NO_MEMORY)
        self.store.append(session, "assistant", NO_MEMORY, finish="stop", grounded="no-memory")
        reply.notes.extend(context.notes)
        reply.prompt_tokens = 0
        return reply

    def _maybe_compact(
        self,
        session: Session,
        message: str,
        reply: ChatReply,
        cancel: threading.Event | None,
        today: date | None,
    ) -> TurnContext:
        """Fresh token count of the live session; at the threshold: flush first, then compact.
        The turn's recall runs here, once; later builds of the turn reuse it."""
        context = self.context.build(session, message, today=today)
        limits = self.thresholds()
        tokens = self.context.session_tokens(session, context.system_tokens)
        if tokens < limits.trigger:
            return context
        log.info("session %s: %d tokens >= %d: flush, then compaction", session.id, tokens, limits.trigger)
        with self.steering.compacting(session.id):  # steering waits until the summary is written
            if not session.flushed_this_cycle():
                reply.flush = self.flusher.flush(session, reason="compaction", today=today, cancel=cancel)
            keep = max(1, (limits.trigger - context.system_tokens) // 3)
            reply.compacted = self.compactor.compact(session, keep_tokens=keep, cancel=cancel)
        if not reply.compacted:
            return context
        return self.context.build(session, message, today=today, recall=context.recall)

    # -- sessions ---------------------------------------------------------------------------------
    def open_session(self, session_id: str | None = None, kind: SessionKind = "private") -> str:
        """The id of an existing session, or of a new one (so a front can name it before the turn)."""
        return self.store.load_or_create(session_id, kind).id

    def sessions(self) -> list[SessionInfo]:
        return [
            SessionInfo(
                s.id,
                s.kind,
                s.title(),
                s.updated(),
                sum(1 for e in s.events if e.get("type") in ("user", "assistant")),
                s.cycle,
            )
            for s in self.store.list()
        ]

    def new_session(self, kind: SessionKind = "private", previous: str | None = None) -> NewSession:
        """Start a session; the previous one (if named) is saved as a memory snapshot first."""
        snapshot = None
        if previous and self.store.exists(previous):
            with self.store.lock(previous):
                snapshot = self.flusher.snapshot(self.store.load(previous))
        session = self.store.create(kind)
        return NewSession(session.id, kind, snapshot)

    def reset_session(self, session_id: str) -> NewSession:
        """Snapshot the session, move its transcript aside, and start it afresh under the same id."""
        with self.store.lock(session_id):
            session = self.store.load(session_id)
            snapshot = self.flusher.snapshot(session)
            archived = self.store.archive(session)
            self.store.create(session.kind, session_id)
        return NewSession(session_id, session.kind, snapshot, archived.name)

    def flush(
        self, session_id: str, cancel: threading.Event | None = None, *, dry_run: bool = False
    ) -> FlushReport:
        """A flush asked for by the user (``/flush``, ``mnemo.flush``): runs whatever the cycle.

        ``dry_run``: the model runs and every item is checked, but nothing is written or recorded."""
        with self.store.lock(session_id):
            session = self.store.load(session_id)
            return self.flusher.flush(session, reason="manual", cancel=cancel, dry_run=dry_run)

    def _command(
        self,
        command: str,
        session_id: str,
        kind: SessionKind,
        on_delta: Callable[[str], None] | None,
        cancel: threading.Event | None = None,
    ) -> ChatReply:
        if command == "/flush":
            report = self.flush(session_id, cancel)
            reply = ChatReply(report.summary(), session_id, flush=report)
        elif command == "/new":
            made = self.new_session(kind, session_id)
            reply = ChatReply(made.describe(), made.session_id)
        else:
            made = self.reset_session(session_id)
            reply = ChatReply(made.describe(), session_id)
        if on_delta is not None:
            on_delta(reply.text)
        return reply

    def close(self) -> None:
        self.provider.close()
