"""Grounded answers (``[agent] grounding``) with the scripted provider: each rule, through Agent.chat."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from mnemo import wire
from mnemo.agent import Agent, ScriptedProvider
from mnemo.agent.grounding import NO_MEMORY, Grounder, content_words
from mnemo.config import AgentSettings
from mnemo.errors import MnemoError
from mnemo.search.results import ScoreParts, SearchHit

TODAY = date(2026, 12, 1)
FILES: dict[str, str | bytes] = {
    "MEMORY.md": (
        "# Memory\n\n## Decisions\n- Billing database: CockroachDB, for multi-region writes.\n"
        "- Frontend framework: Svelte.\n\n## People\n- Alice leads the payments team.\n"
    ),
    "memory/2026-11-20.md": (
        "# 2026-11-20\n\n## Decisions\n- Billing moves from CockroachDB to PostgreSQL 16: row-level security "
        "matters more than multi-region writes.\n- The staging cluster moved from Frankfurt to Dublin.\n"
    ),
    "memory/gardening.md": "# Gardening\n\n- Tomatoes need full sun; basil grows well next to them.\n",
}


@pytest.fixture
def workspace(make_workspace: Callable[..., Path]) -> Path:
    return make_workspace(FILES)


def agent_with(
    services_factory: Callable[..., Any], root: Path, replies: list[str], **settings: Any
) -> tuple[Agent, ScriptedProvider, list[str]]:
    services = services_factory(root)
    services.memory.sync()
    provider = ScriptedProvider(replies, context_window=settings.pop("window", 2048))
    deltas: list[str] = []
    agent = Agent(root, services.memory, provider, AgentSettings(**settings))
    return agent, provider, deltas


def last_event(agent: Agent, session_id: str) -> dict[str, Any]:
    return agent.store.load(session_id).events[-1]


def test_auto_is_strict_for_small_windows_and_off_for_large_ones(
    workspace: Path, services_factory: Callable[..., Any]
) -> None:
    small, _p, _d = agent_with(services_factory, workspace, [], window=2048)
    large, _p, _d = agent_with(services_factory, workspace, [], window=8192)
    assert small.grounding_mode() == "strict" and large.grounding_mode() == "off"
    forced, _p, _d = agent_with(services_factory, workspace, [], window=8192, grounding="strict")
    assert forced.grounding_mode() == "strict"


def test_strict_nothing_relevant_answers_without_calling_the_model(
    workspace: Path, services_factory: Callable[..., Any]
) -> None:
    agent, provider, deltas = agent_with(services_factory, workspace, ["The password is hunter2."])
    # "the" and "of" match notes, but no content word does: nothing relevant.
    reply = agent.chat("What is the Wi-Fi password of the office?", on_delta=deltas.append, today=TODAY)
    assert reply.text == NO_MEMORY and "".join(deltas) == NO_MEMORY
    assert provider.calls == []  # the model was never asked
    assert reply.grounding is not None and reply.grounding.action == "no-memory"
    grounded = wire.chat_reply(reply)["grounded"]
    assert grounded["mode"] == "strict" and grounded["reason"]
    assert reply.citations == []
    event = last_event(agent, reply.session_id)
    assert event["type"] == "assistant" and event["text"] == NO_MEMORY and event["grounded"] == "no-memory"


def test_strict_uncited_answer_repeating_a_line_gets_its_citation_streamed(
    workspace: Path, services_factory: Callable[..., Any]
) -> None:
    agent, _provider, deltas = agent_with(
        services_factory, workspace, ["Tomatoes need full sun, and basil grows well next to them."]
    )
    reply = agent.chat("What do tomatoes need?", on_delta=deltas.append, today=TODAY)
    assert reply.text == (
        "Tomatoes need full sun, and basil grows well next to them. [memory/gardening.md#L3]"
    )
    assert "".join(deltas) == reply.text  # the citation is streamed after the answer
    assert reply.grounding is not None and reply.grounding.action == "cited"
    assert reply.grounding.added == ["memory/gardening.md#L3"]
    assert last_event(agent, reply.session_id)["text"] == reply.text


def test_strict_invented_answer_gets_the_top_recalled_line_quoted_first(
    workspace: Path, services_factory: Callable[..., Any]
) -> None:
    agent, _provider, deltas = agent_with(
        services_factory, workspace, ["Staging runs on the moon. [memory/notes.md#L3-L4]"]
    )
    reply = agent.chat("Where does the staging cluster run?", on_delta=deltas.append, today=TODAY)
    quote = "> The staging cluster moved from Frankfurt to Dublin. [memory/2026-11-20.md#L5]"
    assert reply.text == quote + "\n\nStaging runs on the moon."
    assert reply.grounding is not None and reply.grounding.action == "quoted"
    assert reply.grounding.removed == ["[memory/notes.md#L3-L4]"]  # the format's example, not a note
    assert "".join(deltas) != reply.text  # the quote is in the final text only (clients show `text`)


def test_strict_prefers_the_newest_line_over_a_superseded_one(
    workspace: Path, services_factory: Callable[..., Any]
) -> None:
    agent, _provider, _deltas = agent_with(
        services_factory, workspace, ["Billing uses CockroachDB for multi-region writes."]
    )
    hits = agent.memory.search("Why did billing move to PostgreSQL?").results
    assert hits[0].path == "memory/2026-11-20.md"  # recall ranks the update first
    reply = agent.chat("Why did billing move to PostgreSQL?", today=TODAY)
    assert reply.text.startswith("> Billing moves from CockroachDB to PostgreSQL 16")
    assert "[memory/2026-11-20.md#L4]" in reply.text
    assert reply.grounding is not None and reply.grounding.action == "quoted"


def test_cited_answer_is_untouched(workspace: Path, services_factory: Callable[..., Any]) -> None:
    answer = "Billing moved to PostgreSQL 16 for row-level security [memory/2026-11-20.md#L4-L4]."
    agent, _provider, deltas = agent_with(services_factory, workspace, [answer])
    reply = agent.chat("Why did billing move to PostgreSQL?", on_delta=deltas.append, today=TODAY)
    assert reply.text == answer and "".join(deltas) == answer
    assert reply.grounding is not None and reply.grounding.action == "kept"


def test_strict_shows_the_recalled_line_when_the_model_says_memory_has_nothing(
    workspace: Path, services_factory: Callable[..., Any]
) -> None:
    agent, _provider, _deltas = agent_with(services_factory, workspace, ["I don't have that in memory."])
    reply = agent.chat("Why did billing move to PostgreSQL?", today=TODAY)
    assert reply.text.startswith("> Billing moves from CockroachDB to PostgreSQL 16")
    assert reply.text.endswith("[memory/2026-11-20.md#L4]")
    assert reply.grounding is not None and reply.grounding.action == "quoted"


def test_a_swapped_name_is_not_cited_as_the_line_it_contradicts(
    workspace: Path, services_factory: Callable[..., Any]
) -> None:
    agent, _provider, _deltas = agent_with(
        services_factory, workspace, ["Bob leads the payments team."], grounding="cite", window=8192
    )
    reply = agent.chat("Who leads the payments team?", today=TODAY)
    assert (
        reply.text == "Bob leads the payments team."
    )  # "Bob" is not in the line: no citation vouches for it
    assert reply.grounding is not None and reply.grounding.action == "kept"


def test_a_citation_of_lines_recall_did_not_return_does_not_count(
    workspace: Path, services_factory: Callable[..., Any]
) -> None:
    agent, _provider, _deltas = agent_with(
        services_factory, workspace, ["Tomatoes love rain [memory/gardening.md#L40-L41]."]
    )
    reply = agent.chat("What do tomatoes need?", today=TODAY)
    assert "#L40" not in reply.text and reply.text.startswith("> Tomatoes need full sun")
    assert reply.grounding is not None and reply.grounding.removed == ["[memory/gardening.md#L40-L41]"]


def test_one_shared_word_out_of_many_is_a_coincidence(
    workspace: Path, services_factory: Callable[..., Any]
) -> None:
    agent, provider, _deltas = agent_with(services_factory, workspace, ["In eu-west-1."])
    reply = agent.chat("Which cloud region hosts the analytics warehouse?", today=TODAY)  # "multi-region"
    assert reply.text == NO_MEMORY and provider.calls == []


def test_off_mode_leaves_every_answer_as_the_model_gave_it(
    workspace: Path, services_factory: Callable[..., Any]
) -> None:
    invented = "Staging runs on the moon. [memory/notes.md#L3-L4]"
    agent, provider, _d = agent_with(
        services_factory, workspace, [invented, "The password is hunter2."], grounding="off"
    )
    assert agent.chat("Where does the staging cluster run?", today=TODAY).text == invented
    reply = agent.chat("What is the Wi-Fi password of the office?", today=TODAY)
    assert reply.text == "The password is hunter2." and len(provider.calls) == 2
    assert reply.grounding is None and wire.chat_reply(reply)["grounded"] is None


def test_cite_mode_appends_but_never_replaces(workspace: Path, services_factory: Callable[..., Any]) -> None:
    agent, provider, _d = agent_with(
        services_factory,
        workspace,
        ["Tomatoes need full sun.", "Paris is the capital of France."],
        grounding="cite",
        window=8192,
    )
    first = agent.chat("What do tomatoes need?", today=TODAY)
    assert first.text == "Tomatoes need full sun. [memory/gardening.md#L3]"
    general = agent.chat("What is the capital of France?", today=TODAY)  # no memory: the model answers
    assert general.text == "Paris is the capital of France." and len(provider.calls) == 2


def test_the_reply_names_the_chat_model(workspace: Path, services_factory: Callable[..., Any]) -> None:
    agent, _provider, _d = agent_with(services_factory, workspace, [])
    reply = wire.chat_reply(agent.chat("What is the Wi-Fi password of the office?", today=TODAY))
    assert reply["chatModel"]["model"] == "scripted" and reply["chatModel"]["line"]


def test_function_words_never_make_a_line_relevant() -> None:
    assert content_words("What is the Wi-Fi password of the office?") >= {"password", "office"}
    assert not content_words("what is the of which 是什么")
    assert "负责" in content_words("谁负责移动端应用？")


class NoFiles:
    """Memory whose files cannot be read: grounding falls back to the hits' snippets."""

    def search(self, query: str, *, max_results: int | None = None, record: bool = True) -> Any:
        raise AssertionError("grounding never searches")

    def get(self, path: str, from_line: int | None = None, lines: int | None = None) -> Any:
        raise MnemoError(f"{path}: gone")


def recalled(path: str, start: int, end: int, snippet: str) -> SearchHit:
    """A recall hit as the search returns it (only its place and snippet matter to grounding)."""
    return SearchHit(
        0, "key", path, "sessions", start, end, "", snippet, ScoreParts(None, 0.5, 1.0, 1.0, 1.0, 0.5)
    )


def test_the_question_itself_recalled_from_a_transcript_is_not_evidence() -> None:
    asked = "Say hello in one short sentence."
    hits = [
        recalled("sessions/s1.jsonl", 1, 2, f"user: {asked}\nassistant: Hello there, friend."),
        recalled("sessions/s0.jsonl", 1, 1, f"user: {asked}"),
    ]
    grounder = Grounder("strict", NoFiles(), "sessions/s1.jsonl")  # s1: the conversation under way
    found = grounder.before(asked, hits)
    assert found is not None and found.action == "no-memory"
    # An earlier session's answer is a model's unconfirmed words, not memory (as for the flush).
    earlier = grounder.before("Say hello", [replace(hits[0], path="sessions/s0.jsonl")])
    assert earlier is not None and earlier.action == "no-memory"


def test_one_generic_shared_word_about_something_memory_never_mentions_is_no_memory(
    make_workspace,
    services_factory,  # type: ignore[no-untyped-def]
) -> None:
    # Seen with the bundled model: vector recall brought this line for "what is my cat's name?", it
    # shares "name", and the model answered "Mira" under the quote.
    from mnemo.agent.grounding import MemoryLine

    root = make_workspace(
        {
            "MEMORY.md": "# Memory\n\n- Coffee: dark roast, no sugar.\n",
            "memory/deploy-runbook.md": "# Deploy\n\nEvergreen topic note (no date in the file name).\n",
        }
    )
    memory = services_factory(root).memory
    memory.sync()
    grounder = Grounder("strict", memory)
    recalled = [
        MemoryLine("memory/deploy-runbook.md", 3, "Evergreen topic note (no date in the file name).", 0)
    ]
    assert grounder.best_for_question("what is my cat's name?", recalled) is None  # "cat": nowhere in memory
    assert grounder.best_for_question("what is the deploy file name?", recalled) is not None  # 2 shared
    assert grounder.best_for_question("what is the topic's name?", recalled) is not None  # both known


def test_a_models_answer_in_another_transcript_is_not_evidence(
    make_workspace,
    services_factory,  # type: ignore[no-untyped-def]
) -> None:
    # Seen: "The cat's name is Mira", invented in one chat, came back as memory in the next.
    root = make_workspace({"MEMORY.md": "# Memory\n\n- Coffee: dark roast, no sugar.\n"})
    memory = services_factory(root).memory
    grounder = Grounder("strict", memory)
    hit = recalled(
        "sessions/old.jsonl", 1, 2, "user: what is my cat's name?\nassistant: The cat's name is Mira."
    )
    assert grounder.lines([hit]) == []


def test_a_line_with_a_line_separator_inside_keeps_the_lines_after_it_numbered_as_get_does(
    make_workspace,
    services_factory,  # type: ignore[no-untyped-def]
) -> None:
    # memory_get ends a line at LF (CRLF, CR) only; str.splitlines also ends one at U+2028, a form feed or
    # NEL, so every line after such a character was cited one line too far down.
    root = make_workspace(
        {"memory/ops.md": "# Ops\n\n- Pager rota:\u2028weekly.\n- Backups run at 02:00 UTC on Sundays.\n"}
    )
    memory = services_factory(root).memory
    memory.sync()
    hit = recalled("memory/ops.md", 1, 4, "")
    lines = {line.text: line.number for line in Grounder("strict", memory).lines([hit])}
    assert lines["- Backups run at 02:00 UTC on Sundays."] == 4
    assert memory.get("memory/ops.md", 4, 1).text.startswith("- Backups")
