"""The agent loop with the ScriptedProvider: tools, streaming, compaction and flush order, cancellation."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from mnemo.agent import Agent, ChatMessage, ScriptedProvider
from mnemo.agent.compaction import SUMMARY_SYSTEM, Thresholds
from mnemo.agent.context import NOTHING_RECALLED
from mnemo.agent.flush import FLUSH_SYSTEM, NO_REPLY
from mnemo.config import AgentSettings

TODAY = date(2026, 11, 3)


def make_agent(
    services_factory: Callable[..., Any], root: Path, provider: ScriptedProvider, **settings: Any
) -> Agent:
    services = services_factory(root)
    services.memory.sync()
    return Agent(root, services.memory, provider, AgentSettings(**settings))


def types_of(agent: Agent, session_id: str) -> list[str]:
    return [e["type"] for e in agent.store.load(session_id).events]


def test_tool_call_then_answer_streams_only_the_answer(
    sample_workspace: Path, services_factory: Callable[..., Any]
) -> None:
    provider = ScriptedProvider(
        [
            'Let me look. <tool_call>{"name": "memory_search", "arguments": {"query": "billing database"}}'
            "</tool_call>",
            "The billing service uses PostgreSQL (MEMORY.md#L7-L7).",
        ]
    )
    agent = make_agent(services_factory, sample_workspace, provider, recall_results=0)
    deltas: list[str] = []
    reply = agent.chat("Which database does billing use?", on_delta=deltas.append, today=TODAY)
    assert reply.text == "The billing service uses PostgreSQL (MEMORY.md#L7-L7)."
    assert "".join(deltas).endswith(reply.text)
    assert "tool_call" not in "".join(deltas) and "{" not in "".join(deltas)
    assert reply.tool_calls == 1
    assert types_of(agent, reply.session_id) == ["session", "user", "tool_call", "tool_result", "assistant"]
    # The second model call saw the observation, with its citation.
    observation = provider.calls[1][-1]
    assert observation.role == "user" and "PostgreSQL" in observation.content
    assert any(c.path == "MEMORY.md" and c.origin == "tool" for c in reply.citations)
    # Transcript lines are what the index reads (type + text).
    events = agent.store.load(reply.session_id).events
    assert events[2]["tool"] == "memory_search" and events[2]["args"] == {"query": "billing database"}


def test_recall_and_context_pieces(sample_workspace: Path, services_factory: Callable[..., Any]) -> None:
    (sample_workspace / "memory" / f"{TODAY.isoformat()}.md").write_text("# today\n- standup at 10\n")
    (sample_workspace / "SOUL.md").write_text("Be warm.\n")
    provider = ScriptedProvider(["ok"])
    agent = make_agent(services_factory, sample_workspace, provider)
    reply = agent.chat("billing database?", today=TODAY)
    system = provider.calls[0][0].content
    assert "Be warm." in system
    assert "deploy: Deploy the app to staging" in system  # skills list from front matter
    assert "standup at 10" in system and "2026-11-02" in system  # today's and yesterday's notes
    assert "row-level security" in system  # MEMORY.md in a private session
    assert reply.citations and reply.citations[0].origin == "recall"
    assert f"[{reply.citations[0].citation}]" in system


def test_group_session_never_sees_memory_md(
    sample_workspace: Path, services_factory: Callable[..., Any]
) -> None:
    provider = ScriptedProvider(
        ['<tool_call>{"name": "memory_get", "arguments": {"path": "MEMORY.md"}}</tool_call>', "done"]
    )
    agent = make_agent(services_factory, sample_workspace, provider)
    reply = agent.chat("coffee preferences and billing PostgreSQL", kind="group", today=TODAY)
    system = provider.calls[0][0].content
    assert "dark roast" not in system and "Long-term memory" not in system
    assert all(c.path != "MEMORY.md" for c in reply.citations)
    assert "private" in provider.calls[1][-1].content


def test_exec_without_gate_is_refused_and_with_gate_goes_through_it(
    sample_workspace: Path, services_factory: Callable[..., Any]
) -> None:
    call = '<tool_call>{"name": "exec", "arguments": {"command": "ls"}}</tool_call>'
    provider = ScriptedProvider([call, "no"])
    agent = make_agent(services_factory, sample_workspace, provider, recall_results=0)
    agent.chat("list files", today=TODAY)
    assert "exec needs the policy gate" in provider.calls[1][-1].content

    class Outcome:
        ok, output, decision = True, "a.txt", "allowed"

    class Gate:
        def __init__(self) -> None:
            self.seen: list[tuple[str, str, dict[str, Any]]] = []

        def call(self, session: str, tool: str, args: dict[str, Any]) -> Outcome:
            self.seen.append((session, tool, args))
            return Outcome()

        def observe_message(self, session: str, text: str) -> int:
            return 0

    gate = Gate()
    provider2 = ScriptedProvider([call, "there is a.txt"])
    agent2 = Agent(sample_workspace, agent.memory, provider2, AgentSettings(recall_results=0), gate)
    reply = agent2.chat("list files", today=TODAY)
    assert gate.seen == [(reply.session_id, "exec", {"command": "ls"})]
    assert "a.txt" in provider2.calls[1][-1].content
    result = agent2.store.load(reply.session_id).events[3]
    assert result["decision"] == "allowed" and result["ok"] is True


def test_cancel_stops_between_tokens(sample_workspace: Path, services_factory: Callable[..., Any]) -> None:
    cancel = threading.Event()

    def on_token(i: int) -> None:
        if i == 3:
            cancel.set()

    provider = ScriptedProvider(["one two three four five six seven"], on_token=on_token)
    agent = make_agent(services_factory, sample_workspace, provider, recall_results=0)
    reply = agent.chat("count", cancel=cancel, today=TODAY)
    assert reply.finish_reason == "cancelled"
    assert reply.text == "one two three four"  # the token in flight when cancel was set, then no more
    assert agent.store.load(reply.session_id).events[-1]["finish"] == "cancelled"


def scripted_roles(log: list[str], flush_reply: str = "- The team decided to use PostgreSQL.") -> Any:
    def reply(messages: Sequence[ChatMessage]) -> str:
        system = messages[0].content
        if system == FLUSH_SYSTEM:
            log.append("flush")
            return flush_reply
        if system == SUMMARY_SYSTEM:
            log.append("summary")
            return "- earlier: talked about databases"
        log.append("answer")
        return "noted"

    return reply


LONG = " ".join(["We decided to use PostgreSQL for billing because of row-level security."] * 6)


def test_flush_runs_before_compaction_and_appends_to_the_daily_note(
    sample_workspace: Path, services_factory: Callable[..., Any], md_hashes: Any
) -> None:
    daily = sample_workspace / "memory" / f"{TODAY.isoformat()}.md"
    daily.write_text("# earlier\n- existing line\n", encoding="utf-8")
    log: list[str] = []
    provider = ScriptedProvider(default=scripted_roles(log), context_window=1200)
    agent = make_agent(services_factory, sample_workspace, provider, recall_results=0, max_tokens=64)
    protected = {k: v for k, v in md_hashes(sample_workspace).items() if k in ("MEMORY.md",)}
    limits = agent.thresholds()
    assert limits == Thresholds(1200, 300, 75)
    session_id = None
    for _ in range(12):
        reply = agent.chat(LONG, session_id, today=TODAY)
        session_id = reply.session_id
        if reply.compacted:
            break
    assert reply.compacted and reply.flush is not None
    assert log[-3:] == ["flush", "summary", "answer"], log
    kinds = types_of(agent, reply.session_id)
    assert kinds.index("flush") < kinds.index("compaction")
    text = daily.read_text(encoding="utf-8")
    assert text.startswith("# earlier\n- existing line\n")  # appended, never overwritten
    assert "- The team decided to use PostgreSQL." in text
    assert {k: v for k, v in md_hashes(sample_workspace).items() if k in protected} == protected
    # After compaction the live transcript is short again; the summary is in the next prompt.
    agent.chat("and then?", session_id, today=TODAY)
    assert "earlier: talked about databases" in provider.calls[-1][0].content
    assert agent.store.load(session_id).live_events()[0]["type"] == "user"


def test_flush_runs_once_per_compaction_cycle(
    sample_workspace: Path, services_factory: Callable[..., Any]
) -> None:
    log: list[str] = []
    provider = ScriptedProvider(default=scripted_roles(log), context_window=400)
    agent = make_agent(services_factory, sample_workspace, provider, recall_results=0, max_tokens=32)
    huge = " ".join(["Remember this: the deploy failed because the config loaded late."] * 40)
    first = agent.chat(huge, today=TODAY)  # over the threshold, but nothing older to summarise
    assert first.flush is not None and not first.compacted
    second = agent.chat(huge, first.session_id, today=TODAY)  # same cycle: no second flush
    assert second.flush is None and second.compacted
    assert log.count("flush") == 1
    third = agent.chat(huge, first.session_id, today=TODAY)  # a new cycle: flush again
    assert third.flush is not None
    assert log.count("flush") == 2


def test_no_reply_writes_nothing(
    sample_workspace: Path, services_factory: Callable[..., Any], md_hashes: Any
) -> None:
    log: list[str] = []
    provider = ScriptedProvider(default=scripted_roles(log, flush_reply=NO_REPLY), context_window=400)
    agent = make_agent(services_factory, sample_workspace, provider, recall_results=0, max_tokens=32)
    before = md_hashes(sample_workspace)
    reply = agent.chat(" ".join(["We decided on PostgreSQL."] * 80), today=TODAY)
    assert reply.flush is not None and reply.flush.no_reply and reply.flush.written == []
    assert md_hashes(sample_workspace) == before
    assert not (sample_workspace / "memory" / f"{TODAY.isoformat()}.md").exists()
    flush_event = next(e for e in agent.store.load(reply.session_id).events if e["type"] == "flush")
    assert flush_event["text"] == NO_REPLY


@pytest.mark.parametrize(
    "path", ["MEMORY.md", "SOUL.md", "AGENTS.md", "TOOLS.md", "memory/../MEMORY.md", "../x.md", "memory.md"]
)
def test_flush_never_writes_a_protected_file(
    sample_workspace: Path, services_factory: Callable[..., Any], md_hashes: Any, path: str
) -> None:
    for name in ("SOUL.md", "AGENTS.md", "TOOLS.md"):
        (sample_workspace / name).write_text(f"# {name}\n", encoding="utf-8")
    before = md_hashes(sample_workspace)
    hostile = (
        f'<tool_call>{{"name": "write_file", "arguments": {{"path": "{path}", "content": "- pwned"}}}}'
        "</tool_call>"
    )
    provider = ScriptedProvider([hostile])
    agent = make_agent(services_factory, sample_workspace, provider)
    session = agent.store.create()
    agent.store.append(session, "user", "Remember this: we decided the deploy runs on Fridays.")
    report = agent.flush(session.id)
    assert report.refused and not report.written
    assert md_hashes(sample_workspace) == before
    assert not (sample_workspace.parent / "x.md").exists()


def test_empty_recall_tells_the_model_to_say_it_does_not_know(
    sample_workspace: Path, services_factory: Callable[..., Any]
) -> None:
    provider = ScriptedProvider(default="I don't have that in memory.")
    agent = make_agent(services_factory, sample_workspace, provider)
    nothing = agent.chat("zebra quantum lunch menu", today=TODAY)
    assert nothing.citations == []
    assert NOTHING_RECALLED in provider.calls[-1][0].content
    found = agent.chat("Which database does billing use?", today=TODAY)
    assert found.citations and NOTHING_RECALLED not in provider.calls[-1][0].content
    quiet = make_agent(services_factory, sample_workspace, provider, recall_results=0)
    quiet.chat("zebra quantum lunch menu", today=TODAY)  # recall off: the model may search itself
    assert NOTHING_RECALLED not in provider.calls[-1][0].content


def test_flush_command_reports_what_was_kept_and_rejected(
    sample_workspace: Path, services_factory: Callable[..., Any]
) -> None:
    def reply(messages: Sequence[ChatMessage]) -> str:
        if messages[0].content == FLUSH_SYSTEM:
            return "- The deploy runs on Fridays after review.\n- Which day do we deploy?"
        return "noted"

    agent = make_agent(services_factory, sample_workspace, ScriptedProvider(default=reply), recall_results=0)
    first = agent.chat("Remember this: the deploy runs on Fridays after review.", today=TODAY)
    flushed = agent.chat("/flush", first.session_id)
    assert flushed.flush is not None and flushed.flush.kept == 1
    assert flushed.text == f"kept 1 item(s) in {flushed.flush.target}; rejected 1"


def test_weak_nearest_neighbours_do_not_count_as_recall(tmp_path: Path) -> None:
    from mnemo.agent.context import ContextBuilder
    from mnemo.agent.sessions import SessionStore
    from mnemo.search.results import ScoreParts, SearchHit, SearchOutcome

    def hit(path: str, text: float, vector: float | None) -> SearchHit:
        parts = ScoreParts(vector, text, 0.0, 1.0, 1.0, 0.3)
        return SearchHit(0, "key", path, "memory", 1, 1, "", f"in {path}", parts)

    class Memory:
        def __init__(self) -> None:
            self.hits: list[SearchHit] = []

        def search(self, query: str, *, max_results: int | None = None) -> SearchOutcome:
            return SearchOutcome(self.hits, "hybrid", "local", "model", query)

        def get(self, path: str, from_line: int | None = None, lines: int | None = None) -> Any:
            raise AssertionError("not read")

    memory = Memory()
    builder = ContextBuilder(tmp_path, memory, ScriptedProvider())
    session = SessionStore(tmp_path).create()
    memory.hits = [hit("memory/a.md", 0.0, 0.12)]
    weak = builder.build(session, "zebra?")
    assert weak.citations == [] and NOTHING_RECALLED in weak.messages[0].content
    assert "memory/a.md" not in weak.messages[0].content
    memory.hits = [hit("memory/a.md", 0.0, 0.12), hit("memory/b.md", 0.0, 0.6), hit("memory/c.md", 0.4, None)]
    strong = builder.build(session, "zebra?")
    assert [c.path for c in strong.citations] == ["memory/b.md", "memory/c.md"]
    assert NOTHING_RECALLED not in strong.messages[0].content


@pytest.mark.parametrize("path", ["MEMORY.md#L1-L3", "./MEMORY.md", "memory/../MEMORY.md:2"])
def test_group_session_cannot_reach_memory_md_through_a_citation_or_a_detour(
    sample_workspace: Path, services_factory: Callable[..., Any], path: str
) -> None:
    call = json.dumps({"name": "memory_get", "arguments": {"path": path}})
    provider = ScriptedProvider([f"<tool_call>{call}</tool_call>", "done"])
    agent = make_agent(services_factory, sample_workspace, provider, recall_results=0)
    agent.chat("coffee", kind="group", today=TODAY)
    tool_result = provider.calls[1][-1].content
    assert "private" in tool_result and "dark roast" not in tool_result


def test_memory_get_tool_reads_the_cited_lines(
    sample_workspace: Path, services_factory: Callable[..., Any]
) -> None:
    call = json.dumps({"name": "memory_get", "arguments": {"path": "memory/gardening.md#L3-L3"}})
    provider = ScriptedProvider([f"<tool_call>{call}</tool_call>", "done"])
    agent = make_agent(services_factory, sample_workspace, provider, recall_results=0)
    agent.chat("tomatoes", today=TODAY)
    tool_result = provider.calls[1][-1].content
    assert "[memory/gardening.md#L3-L3]" in tool_result and "Tomatoes need full sun" in tool_result
    assert "Basil" not in tool_result


def _recall_counts(services: Any, rel: str) -> dict[int, int]:
    """The code lenses' "recalled N times" per chunk start line of ``rel``."""
    return {lens.start_line: lens.times_retrieved for lens in services.editor.lenses(rel)}


def test_recall_counts_rise_by_one_per_turn_even_with_tool_steps(
    sample_workspace: Path, services_factory: Callable[..., Any]
) -> None:
    """The context is rebuilt after each tool step, but the turn's recall search runs (and counts) once."""
    services = services_factory(sample_workspace)
    services.memory.sync()
    get = '<tool_call>{"name": "memory_get", "arguments": {"path": "memory/gardening.md"}}</tool_call>'
    read = '<tool_call>{"name": "read_file", "arguments": {"path": "skills/deploy/SKILL.md"}}</tool_call>'
    provider = ScriptedProvider([get, read, "PostgreSQL.", get, "PostgreSQL again."])
    agent = Agent(sample_workspace, services.memory, provider, AgentSettings(recall_results=4))
    before = _recall_counts(services, "MEMORY.md")
    assert before and set(before.values()) == {0}
    first = agent.chat("Which database does the billing service use?", today=TODAY)
    assert first.tool_calls == 2 and len(provider.calls) == 3  # the context was built three times
    recalled = [c for c in first.citations if c.origin == "recall" and c.path == "MEMORY.md"]
    assert recalled, first.citations
    line = recalled[0].start_line
    after_one = _recall_counts(services, "MEMORY.md")
    assert after_one[line] == 1, after_one
    second = agent.chat("Which database does the billing service use?", first.session_id, today=TODAY)
    assert second.tool_calls == 1
    assert _recall_counts(services, "MEMORY.md")[line] == 2


def test_the_flush_guards_duplicate_check_is_not_a_retrieval(
    sample_workspace: Path, services_factory: Callable[..., Any]
) -> None:
    from mnemo.agent.flush_guard import index_duplicate

    services = services_factory(sample_workspace)
    services.memory.sync()
    found = index_duplicate(services.memory, "The billing service uses PostgreSQL with row-level security.")
    assert found is not None and found.startswith("MEMORY.md#")  # the check ran and found the chunk
    assert set(_recall_counts(services, "MEMORY.md").values()) == {0}
    services.memory.search("billing service PostgreSQL")  # a user's search still counts
    assert max(_recall_counts(services, "MEMORY.md").values()) == 1


def test_recall_never_brings_this_conversations_own_transcript_back(
    sample_workspace: Path, services_factory: Callable[..., Any]
) -> None:
    provider = ScriptedProvider(["Noted.", "Noted again.", "Still noted."])
    agent = make_agent(services_factory, sample_workspace, provider, grounding="off")
    first = agent.chat("my locker code word is quokkaberry", today=TODAY)
    other = agent.chat("the quokkaberry locker is on floor three", today=TODAY)  # another session
    agent.memory.sync()  # both transcripts are indexed now
    reply = agent.chat("what is the quokkaberry locker code word?", first.session_id, today=TODAY)
    recalled = {c.path for c in reply.citations if c.origin == "recall"}
    assert f"sessions/{first.session_id}.jsonl" not in recalled  # this conversation is not memory
    assert f"sessions/{other.session_id}.jsonl" in recalled  # another one is
