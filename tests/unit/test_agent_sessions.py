"""Transcripts survive a torn last line; tool calls parse tolerantly; streaming holds back tool calls;
snapshots for /new and /reset; the memory writer's refusals."""

from __future__ import annotations

import json
import logging
from datetime import date
from pathlib import Path

import pytest

from mnemo.agent.memory_writer import MemoryWriter, MemoryWriteRefused
from mnemo.agent.sessions import SessionError, SessionStore
from mnemo.agent.tool_calls import DeltaGate, parse_tool_call, split_thoughts
from mnemo.index.sources import transcript_as_text

KNOWN = {"memory_search", "exec"}


def test_torn_last_line_is_skipped_and_the_next_append_is_clean(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SessionStore(tmp_path)
    session = store.create("group")
    store.append(session, "user", "first question")
    store.append(session, "assistant", "first answer")
    data = session.path.read_bytes()
    torn = data + b'{"type": "user", "text": "cut off mid-wr'  # a crash during the next write
    session.path.write_bytes(torn)
    with caplog.at_level(logging.WARNING):
        loaded = store.load(session.id)
    assert [e["type"] for e in loaded.events] == ["session", "user", "assistant"]
    assert loaded.kind == "group" and loaded.skipped_lines == 1
    assert "torn" in caplog.text
    store.append(loaded, "user", "second question")
    again = store.load(session.id)
    assert [e["text"] for e in again.events][-1] == "second question"
    assert again.skipped_lines == 1  # the torn fragment stays on its own line, never glued to an event
    assert all(json.loads(line) for line in session.path.read_text().splitlines()[:3])
    # The index reads the same file: one text line per transcript line.
    text, broken = transcript_as_text(session.path.read_text(encoding="utf-8"))
    assert broken == 1 and "user: second question" in text


def test_session_ids_cannot_escape(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    for bad in ("../x", "a/b", "", ".hidden"):
        with pytest.raises(SessionError):
            store.path(bad)


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "memory_search", "arguments": {"query": "db"}}',
        'Sure!\n```json\n{"name": "memory_search", "arguments": {"query": "db"}}\n```\nThen I answer.',
        '<tool_call>{"name": "memory_search", "arguments": {"query": "db"}}</tool_call>',
        '<tool_call>\n{"tool": "memory_search", "args": {"query": "db"}}',
        'I will search {"name": "memory_search", "parameters": "{\\"query\\": \\"db\\"}"} now.',
        '{"function": {"name": "memory_search", "arguments": "{\\"query\\": \\"db\\"}"}}',
    ],
)
def test_tool_calls_parse_tolerantly(text: str) -> None:
    call = parse_tool_call(text, KNOWN)
    assert call is not None and call.name == "memory_search" and call.args == {"query": "db"}


def test_plain_answers_and_unknown_tools_are_not_calls() -> None:
    assert parse_tool_call("PostgreSQL, with {row-level} security.", KNOWN) is None
    assert parse_tool_call('{"name": "rm_rf", "arguments": {}}', KNOWN) is None
    thoughts, rest = split_thoughts("<think>check memory first</think>We use PostgreSQL.")
    assert thoughts == ["check memory first"] and rest == "We use PostgreSQL."


def test_delta_gate_streams_prose_and_holds_back_calls() -> None:
    out: list[str] = []
    gate = DeltaGate(out.append)
    for delta in ["Let me ", "check. <to", "ol_call>{", '"name": "exec"}', "</tool_call>"]:
        gate.feed(delta)
    gate.finish(None)
    assert "".join(out) == "Let me check. "
    out.clear()
    gate = DeltaGate(out.append)
    for delta in ["Costs ", "{5} euros", " today"]:
        gate.feed(delta)
    gate.finish("Costs {5} euros today")
    assert "".join(out) == "Costs {5} euros today"


def test_memory_writer_refuses_and_appends_only(tmp_path: Path) -> None:
    writer = MemoryWriter(tmp_path)
    for bad in ("MEMORY.md", "memory/SOUL.md", "AGENTS.md", "tools.md", "notes/x.md", "memory/../x.md"):
        with pytest.raises(MemoryWriteRefused):
            writer.check(bad)
    with pytest.raises(MemoryWriteRefused):
        writer.append_daily("memory/topic.md", "- x")
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "2026-11-03.md").write_text("# mine\nno newline at end", encoding="utf-8")
    writer.append_daily("memory/2026-11-03.md", "- kept", heading="Flush")
    assert (tmp_path / "memory" / "2026-11-03.md").read_text() == (
        "# mine\nno newline at end\n\n## Flush\n- kept\n"
    )
    # A CRLF note (written on Windows) gets CRLF lines, not a mix; its byte order mark stays.
    crlf = tmp_path / "memory" / "2026-11-04.md"
    crlf.write_bytes(b"\xef\xbb\xbf# 2026-11-04\r\n\r\n- first\r\n")
    writer.append_daily("memory/2026-11-04.md", "- second\n- third", heading="Flush")
    assert crlf.read_bytes() == (
        b"\xef\xbb\xbf# 2026-11-04\r\n\r\n- first\r\n\r\n## Flush\r\n- second\r\n- third\r\n"
    )
    first = writer.create_snapshot(date(2026, 11, 3), "chat", "one\n")
    second = writer.create_snapshot(date(2026, 11, 3), "chat", "two\n")
    assert (first, second) == ("memory/2026-11-03-chat.md", "memory/2026-11-03-chat-2.md")
    assert (tmp_path / first).read_text() == "one\n"


def test_new_and_reset_save_snapshots(sample_workspace: Path, services_factory) -> None:  # type: ignore[no-untyped-def]
    from mnemo.agent import Agent, ScriptedProvider

    services = services_factory(sample_workspace)
    services.memory.sync()
    agent = Agent(sample_workspace, services.memory, ScriptedProvider(default="fine"))
    first = agent.chat("Plan the garden party")
    made = agent.chat("/new", first.session_id)
    assert made.session_id != first.session_id
    snapshot = sample_workspace / "memory" / f"{date.today().isoformat()}-plan-the-garden-party.md"
    assert snapshot.is_file() and "Plan the garden party" in snapshot.read_text()
    agent.chat("hello again", made.session_id)
    reset = agent.reset_session(made.session_id)
    assert reset.session_id == made.session_id and reset.snapshot
    assert [e["type"] for e in agent.store.load(made.session_id).events] == ["session"]
    assert reset.archived and (sample_workspace / "sessions" / reset.archived).is_file()
