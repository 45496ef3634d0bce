"""Steering a running turn (mnemo.agent.steering): a scripted model records every call's messages, the
turn runs on a worker thread, and the test steers it at a tool step, mid-stream, while it compacts, as
it ends, and when it is cancelled."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from mnemo.agent import Agent, ChatMessage, ChatReply, ScriptedProvider
from mnemo.agent.compaction import SUMMARY_SYSTEM
from mnemo.agent.flush import FLUSH_SYSTEM
from mnemo.agent.grounding import NO_MEMORY
from mnemo.agent.steering import SteeringFull, SteeringInbox
from mnemo.config import AgentSettings

TODAY = date(2026, 11, 3)
WAIT_S = 20
EXEC_CALL = '<tool_call>{"name": "exec", "arguments": {"command": "ls"}}</tool_call>'


def make_agent(
    services_factory: Callable[..., Any],
    root: Path,
    provider: ScriptedProvider,
    gate: Any = None,
    **settings: Any,
) -> Agent:
    services = services_factory(root)
    services.memory.sync()
    return Agent(root, services.memory, provider, AgentSettings(**settings), gate)


class Turn:
    """``agent.chat`` on a worker thread (as every front runs it); ``result()`` joins it."""

    def __init__(self, agent: Agent, message: str, session_id: str, **kwargs: Any) -> None:
        self.deltas: list[str] = []
        self.reply: ChatReply | None = None
        self.error: BaseException | None = None

        def run() -> None:
            try:
                self.reply = agent.chat(
                    message, session_id, on_delta=self.deltas.append, today=TODAY, **kwargs
                )
            except BaseException as exc:
                self.error = exc

        self.thread = threading.Thread(target=run, name="turn")
        self.thread.start()

    def result(self) -> ChatReply:
        self.thread.join(WAIT_S)
        assert not self.thread.is_alive(), "the turn did not end"
        assert self.error is None, self.error
        assert self.reply is not None
        return self.reply


class Outcome:
    ok, output, decision = True, "a.txt  b.txt", "allowed"


class PausingGate:
    """A policy gate whose tool step waits (as one waiting for an approval does) until released."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.observed: list[str] = []

    def call(self, session: str, tool: str, args: dict[str, Any]) -> Outcome:
        self.entered.set()
        assert self.release.wait(WAIT_S)
        return Outcome()

    def observe_message(self, session: str, text: str) -> int:
        self.observed.append(text)
        return 0


class Pause:
    """``on_token`` of a ScriptedProvider: the first stream stops at token ``at`` until released."""

    def __init__(self, at: int = 1) -> None:
        self.at = at
        self.entered = threading.Event()
        self.release = threading.Event()
        self.done = False

    def __call__(self, i: int) -> None:
        if i == self.at and not self.done:
            self.done = True
            self.entered.set()
            assert self.release.wait(WAIT_S)


def user_events(agent: Agent, session_id: str) -> list[dict[str, Any]]:
    return [e for e in agent.store.load(session_id).events if e["type"] == "user"]


@pytest.fixture
def gate() -> Iterator[PausingGate]:
    gate = PausingGate()
    yield gate
    gate.release.set()  # never leave a turn thread waiting


def test_steering_during_a_tool_step_reaches_the_next_model_call(
    sample_workspace: Path, services_factory: Callable[..., Any], gate: PausingGate
) -> None:
    provider = ScriptedProvider([EXEC_CALL, "Only a.txt matters."])
    agent = make_agent(services_factory, sample_workspace, provider, gate, recall_results=0)
    session_id = agent.open_session()
    turn = Turn(agent, "list the files", session_id)
    assert gate.entered.wait(WAIT_S)
    assert agent.steer(session_id, "only the first file, please") == "injected"
    assert agent.steer(session_id, "and keep it short") == "injected"
    gate.release.set()
    reply = turn.result()

    assert len(provider.calls) == 2
    second = provider.calls[1]
    assert [m.role for m in second[-3:]] == ["user", "user", "user"]
    assert second[-3].content.startswith("[observation from exec]")
    assert [m.content for m in second[-2:]] == ["only the first file, please", "and keep it short"]
    assert reply.text == "Only a.txt matters." and reply.tool_calls == 1
    events = agent.store.load(session_id).events
    assert [e["type"] for e in events][-5:] == ["tool_call", "tool_result", "user", "user", "assistant"]
    assert [e.get("steering") for e in user_events(agent, session_id)] == [None, True, True]
    assert gate.observed[-2:] == ["only the first file, please", "and keep it short"]  # the risk monitor
    assert agent.steer(session_id, "too late") == "idle"


def test_steering_while_the_answer_streams_is_answered_in_the_same_reply(
    sample_workspace: Path, services_factory: Callable[..., Any]
) -> None:
    pause = Pause(at=1)
    provider = ScriptedProvider(["Here are all the notes.", "Billing uses PostgreSQL."], on_token=pause)
    agent = make_agent(services_factory, sample_workspace, provider, recall_results=0)
    session_id = agent.open_session()
    turn = Turn(agent, "summarise my notes", session_id)
    assert pause.entered.wait(WAIT_S)
    assert agent.steer(session_id, "just billing") == "injected"
    pause.release.set()
    reply = turn.result()

    assert [m.content for m in provider.calls[1][-3:]] == [
        "summarise my notes",
        "Here are all the notes.",
        "just billing",
    ]
    assert reply.text == "Here are all the notes.\n\nBilling uses PostgreSQL."
    assert "".join(turn.deltas) == reply.text  # the answers stream apart, as the final text shows them
    types = [e["type"] for e in agent.store.load(session_id).events]
    assert types[-4:] == ["user", "assistant", "user", "assistant"]


def test_steering_while_compacting_is_queued_then_injected_after_the_summary(
    sample_workspace: Path, services_factory: Callable[..., Any]
) -> None:
    compacting = threading.Event()
    release = threading.Event()
    calls: list[str] = []

    def model(messages: Sequence[ChatMessage]) -> str:
        system = messages[0].content
        if system == FLUSH_SYSTEM:
            calls.append("flush")
            return "- The deploy failed because the config loaded late."
        if system == SUMMARY_SYSTEM:
            calls.append("summary")
            if not compacting.is_set():
                compacting.set()
                assert release.wait(WAIT_S)
            return "- earlier: deploy trouble"
        calls.append("answer")
        return "noted"

    provider = ScriptedProvider(default=model, context_window=400)
    agent = make_agent(services_factory, sample_workspace, provider, recall_results=0, max_tokens=32)
    huge = " ".join(["Remember this: the deploy failed because the config loaded late."] * 40)
    first = agent.chat(huge, today=TODAY)  # over the threshold; nothing older to summarise yet
    assert not first.compacted
    try:
        turn = Turn(agent, huge, first.session_id)
        assert compacting.wait(WAIT_S)
        assert agent.steer(first.session_id, "what failed?") == "queued"
    finally:
        release.set()
    reply = turn.result()

    assert reply.compacted
    assert calls[-2:] == ["summary", "answer"]  # the summary first, then one answer that sees the steer
    assert provider.calls[-1][-1].content == "what failed?"
    types = [e["type"] for e in agent.store.load(first.session_id).events]
    assert types.index("compaction") < len(types) - 2
    assert types[-2:] == ["user", "assistant"]
    assert user_events(agent, first.session_id)[-1]["steering"] is True


def test_a_message_arriving_as_the_turn_ends_gets_a_follow_up_turn(
    sample_workspace: Path, services_factory: Callable[..., Any]
) -> None:
    """Strict grounding answers "not in memory" without calling the model: the steer arrives in its only
    delta, after the loop's last safe point; the same chat call answers it in a follow-up turn."""
    provider = ScriptedProvider(default="The billing service uses PostgreSQL (MEMORY.md#L7-L7).")
    agent = make_agent(services_factory, sample_workspace, provider, grounding="strict")
    session_id = agent.open_session()
    states: list[str] = []

    def on_delta(delta: str) -> None:
        if delta == NO_MEMORY:
            states.append(agent.steer(session_id, "Which database does billing use?"))

    reply = agent.chat("zebra quantum lunch menu", session_id, on_delta=on_delta, today=TODAY)
    assert states == ["injected"]
    assert reply.text.startswith(NO_MEMORY + "\n\n") and "PostgreSQL" in reply.text
    assert len(provider.calls) == 1 and provider.calls[0][-1].content == "Which database does billing use?"
    assert [e.get("steering") for e in user_events(agent, session_id)] == [None, True]
    assert agent.steer(session_id, "anyone there?") == "idle"


def test_idle_when_no_turn_runs_and_commands_are_never_steered(
    sample_workspace: Path, services_factory: Callable[..., Any], gate: PausingGate
) -> None:
    provider = ScriptedProvider([EXEC_CALL, "done"])
    agent = make_agent(services_factory, sample_workspace, provider, gate, recall_results=0)
    session_id = agent.open_session()
    assert agent.steer(session_id, "hello?") == "idle"
    assert agent.steer("no-such-session", "hello?") == "idle"
    turn = Turn(agent, "list the files", session_id)
    assert gate.entered.wait(WAIT_S)
    assert agent.steer(session_id, " /new ") == "idle"  # a command: the caller sends it as a turn
    assert agent.steer("another-session", "hi") == "idle"
    gate.release.set()
    turn.result()
    assert all(not e.get("steering") for e in user_events(agent, session_id))


def test_cancel_still_stops_the_turn_and_keeps_what_was_steered(
    sample_workspace: Path, services_factory: Callable[..., Any]
) -> None:
    pause = Pause(at=1)
    provider = ScriptedProvider(["one two three four five", "never asked"], on_token=pause)
    agent = make_agent(services_factory, sample_workspace, provider, recall_results=0)
    session_id = agent.open_session()
    cancel = threading.Event()
    turn = Turn(agent, "count", session_id, cancel=cancel)
    assert pause.entered.wait(WAIT_S)
    assert agent.steer(session_id, "count to three only") == "injected"
    cancel.set()
    pause.release.set()
    reply = turn.result()

    assert reply.finish_reason == "cancelled"
    assert len(provider.calls) == 1  # no model call after the cancel, not even for the steering
    last = agent.store.load(session_id).events[-1]
    assert (last["type"], last["text"], last["steering"], last["answered"]) == (
        "user",
        "count to three only",
        True,
        False,
    )
    assert agent.steer(session_id, "still there?") == "idle"


def test_the_inbox_keeps_order_and_is_bounded() -> None:
    inbox = SteeringInbox(max_waiting=2)
    assert inbox.steer("s", "a") == "idle"
    inbox.begin("s")
    assert [inbox.steer("s", t) for t in ("a", "b")] == ["injected", "injected"]
    with pytest.raises(SteeringFull):
        inbox.steer("s", "c")
    assert inbox.take("s") == ["a", "b"] and inbox.take("s") == []
    with inbox.compacting("s"):
        assert inbox.steer("s", "c") == "queued"
        assert inbox.take("s") == []  # nothing is taken while the summary is written
    assert inbox.finish("s") == ["c"] and inbox.running("s")  # taken; the run stays open to answer it
    assert inbox.finish("s") == [] and not inbox.running("s")
    inbox.begin("s")
    inbox.steer("s", "d")
    assert inbox.end("s") == ["d"] and inbox.steer("s", "e") == "idle"
