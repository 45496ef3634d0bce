"""The loop guard: a reply that repeats itself stops early with finish reason "loop", trimmed, for any
provider (it wraps the stream in the agent, not in a provider)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from mnemo.agent import Agent, ScriptedProvider
from mnemo.agent.loop_guard import LOOP, LoopGuard, find_loop
from mnemo.config import AgentSettings

TODAY = date(2026, 12, 1)
WRONG = "The billing service uses CockroachDB for its database."


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        (f"{WRONG} {WRONG} {WRONG}", WRONG),  # the same sentence twice in a row
        (f"{WRONG} It scales well. {WRONG} Also fine. {WRONG} More", f"{WRONG} It scales well."),
        ("数据库是什么" * 10, "数据库是什么"),  # a Chinese echo with no spaces or punctuation
        ("ok " * 30, "ok"),
        ("Answer:\n- step one is here\n- step one is here\n", "Answer:\n- step one is here"),
    ],
)
def test_loops_are_found_and_trimmed_before_the_repeat(text: str, kept: str) -> None:
    loop = find_loop(text)
    assert loop is not None
    assert text[: loop.keep].rstrip() == kept


@pytest.mark.parametrize(
    "text",
    [
        "| a | b |\n|---|---|\n| 1 | 2 |\n" + "-" * 60 + "\n",
        "Steps:\n- run the unit tests\n- run the lint\n- run the type check\n",
        "```python\nprint('hello world')\nprint('hello world')\nprint('hello world')\n```\nThat prints it.",
        "Yes. Yes. Yes. Fine.",
        "We chose PostgreSQL for billing (MEMORY.md#L7-L7). It supports row-level security, which we need "
        "for tenants. The decision was made in the architecture review with Alice.",
    ],
)
def test_ordinary_replies_are_not_loops(text: str) -> None:
    assert find_loop(text) is None


def test_the_guard_stops_the_provider_stream_early() -> None:
    produced: list[int] = []
    provider = ScriptedProvider([" ".join([WRONG] * 50)], on_token=produced.append)
    guard = LoopGuard(provider.stream([], max_tokens=1000, temperature=0.0))
    deltas = list(guard)
    assert guard.finish_reason == LOOP
    assert guard.text == WRONG
    assert len(produced) < 30  # generation stopped: the stream was closed, not drained
    assert "".join(deltas) == guard.raw_text and len(guard.raw_text) > len(guard.text)


def test_the_guard_keeps_the_providers_finish_when_no_loop() -> None:
    provider = ScriptedProvider(["one two three four five"])
    guard = LoopGuard(provider.stream([], max_tokens=3, temperature=0.0))
    assert guard.read() == "one two three" and guard.finish_reason == "length"


def test_agent_reply_that_loops_until_the_token_limit_now_stops(
    sample_workspace: Path, services_factory: Callable[..., Any]
) -> None:
    """Reproduction: answers 2 and 3 repeated one sentence until the token limit."""
    services = services_factory(sample_workspace)
    services.memory.sync()
    produced: list[int] = []
    provider = ScriptedProvider([" ".join([WRONG] * 60)], on_token=produced.append)
    agent = Agent(sample_workspace, services.memory, provider, AgentSettings(max_tokens=512))
    deltas: list[str] = []
    reply = agent.chat("Which database does billing use?", on_delta=deltas.append, today=TODAY)
    assert reply.finish_reason == "loop"
    assert reply.text == WRONG
    assert len(produced) < 40 < 512
    event = agent.store.load(reply.session_id).events[-1]
    assert event["type"] == "assistant" and event["finish"] == "loop" and event["text"] == WRONG
    assert "".join(deltas).startswith(WRONG)
