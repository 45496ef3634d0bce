"""Memory that learns what helped (issue 18, point 8): feedback on chat turns, recorded per retrieved chunk
in the index next to the retrieval statistics, and the bounded usefulness prior in ranking.

Real parts: the Agent (with the scripted model) writes real transcripts and runs real recall searches
through a real MemoryService over DuckDB (keyword mode).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mnemo.agent import Agent, ScriptedProvider
from mnemo.config import AgentSettings
from mnemo.editor.insights import FeedbackStats, file_chunk_stats
from mnemo.editor.service import EditorService
from mnemo.memory import turns
from mnemo.memory.turns import FeedbackError
from mnemo.search import ranking

BILLING = "Which database does the billing service use?"
GARDEN = "How much sun do tomatoes need?"


def _agent(services: Any, root: Path, *replies: str) -> Agent:
    provider = ScriptedProvider(list(replies), default="Noted.")
    return Agent(root, services.memory, provider, AgentSettings(grounding="off", recall_results=4))


def _tally(services: Any, path: str, needle: str) -> tuple[int, int]:
    """(useful, not useful) of the chunk of ``path`` whose text holds ``needle``."""
    with services.memory.indexer.reading() as reader:
        for chunk in file_chunk_stats(reader, path):  # what a hover shows
            text = "\n".join(
                (services.workspace.root / path)
                .read_text()
                .splitlines()[chunk.start_line - 1 : chunk.end_line]
            )
            if needle in text:
                return (chunk.useful, chunk.not_useful) if isinstance(chunk, FeedbackStats) else (0, 0)
    raise AssertionError(f"no chunk of {path} holds {needle!r}")


@pytest.fixture
def services(sample_workspace: Path, services_factory: Callable[..., Any]) -> Any:
    built = services_factory(sample_workspace)
    built.memory.sync()
    return built


def test_a_thumbs_up_is_recorded_on_every_chunk_the_turn_recalled(services: Any) -> None:
    agent = _agent(services, services.workspace.root)
    reply = agent.chat(BILLING)
    result = services.memory.feedback.record(reply.session_id, None, True)
    assert result.turn == 1 and result.signal == "explicit" and result.useful
    cited = {c.path for c in result.chunks}
    assert "MEMORY.md" in cited, cited  # the billing decision was recalled
    assert _tally(services, "MEMORY.md", "PostgreSQL") == (1, 0)
    assert _tally(services, "memory/gardening.md", "Tomatoes") == (0, 0)  # not recalled: untouched


def test_a_second_thumbs_on_the_same_answer_replaces_the_first(services: Any) -> None:
    agent = _agent(services, services.workspace.root)
    reply = agent.chat(BILLING)
    services.memory.feedback.record(reply.session_id, 1, True)
    services.memory.feedback.record(reply.session_id, 1, False)
    assert _tally(services, "MEMORY.md", "PostgreSQL") == (0, 1)


def test_each_turn_gets_only_its_own_searches(services: Any) -> None:
    agent = _agent(services, services.workspace.root)
    first = agent.chat(BILLING)
    agent.chat(GARDEN, first.session_id)
    on_first = services.memory.feedback.record(first.session_id, 1, False)
    assert "memory/gardening.md" not in {c.path for c in on_first.chunks}
    on_second = services.memory.feedback.record(first.session_id, 2, True)
    assert "memory/gardening.md" in {c.path for c in on_second.chunks}
    assert _tally(services, "memory/gardening.md", "Tomatoes") == (1, 0)


def test_a_memory_search_tool_call_counts_for_its_turn_and_its_success_is_harvested(
    services: Any,
) -> None:
    tool = '<tool_call>{"name": "memory_search", "arguments": {"query": "tomatoes sun watering"}}</tool_call>'
    agent = _agent(services, services.workspace.root, tool, "Full sun.")
    reply = agent.chat("Anything about my garden plans?")
    harvested = services.memory.feedback.harvest(reply.session_id)
    assert [(r.turn, r.signal, r.useful) for r in harvested] == [(1, "tool", True)]
    assert "memory/gardening.md" in {c.path for c in harvested[0].chunks}
    assert services.memory.feedback.harvest(reply.session_id) == []  # recorded once


def test_harvest_reads_a_correction_in_the_next_message(services: Any) -> None:
    agent = _agent(services, services.workspace.root)
    first = agent.chat(BILLING)
    agent.chat("No, that's wrong: it moved to CockroachDB.", first.session_id)
    agent.chat("thanks", first.session_id)
    found = {(r.turn, r.signal, r.useful) for r in services.memory.feedback.harvest(first.session_id)}
    assert found == {(1, "corrected", False), (2, "kept", True)}
    assert _tally(services, "MEMORY.md", "PostgreSQL") == (0, 1)


def test_unknown_sessions_and_turns_are_refused_plainly(services: Any) -> None:
    agent = _agent(services, services.workspace.root)
    reply = agent.chat(BILLING)
    with pytest.raises(FeedbackError, match="turns 1-1, not 3"):
        services.memory.feedback.record(reply.session_id, 3, True)
    with pytest.raises(FeedbackError, match="no session"):
        services.memory.feedback.record("no-such-session", None, True)
    with pytest.raises(FeedbackError, match="not a session id"):
        services.memory.feedback.record("../MEMORY", None, True)


def test_feedback_survives_a_full_rebuild(services: Any) -> None:
    agent = _agent(services, services.workspace.root)
    reply = agent.chat(BILLING)
    services.memory.feedback.record(reply.session_id, None, True)
    report = services.memory.sync(full=True)
    assert report.rebuilt
    assert _tally(services, "MEMORY.md", "PostgreSQL") == (1, 0)


def test_feedback_survives_a_salvage_after_a_duckdb_internal_error(services: Any) -> None:
    agent = _agent(services, services.workspace.root)
    reply = agent.chat(BILLING)
    services.memory.feedback.record(reply.session_id, None, False)
    services.memory.indexer.recover()  # what an internal DuckDB error leads to: the file rewritten from its rows
    assert _tally(services, "MEMORY.md", "PostgreSQL") == (0, 1)


def test_the_hover_shows_the_tally(services: Any) -> None:
    agent = _agent(services, services.workspace.root)
    for verdict in (True, True, False):
        reply = agent.chat(BILLING)
        services.memory.feedback.record(reply.session_id, None, verdict)
    editor = EditorService(services.memory, services.settings)
    line = (
        (services.workspace.root / "MEMORY.md")
        .read_text()
        .splitlines()
        .index("- The billing service uses PostgreSQL with row-level security.")
    )
    insight = editor.insight("MEMORY.md", line + 1)
    assert insight is not None and (insight.useful, insight.not_useful) == (2, 1)
    assert "useful 2 / not 1" in insight.to_markdown()


def test_the_prior_is_off_by_default_and_bounded_when_on(services: Any) -> None:
    memory = services.memory
    plain = [h.citation for h in memory.search("billing database", record=False).results]
    assert memory.settings.search.usefulness_weight == 0.0
    agent = _agent(services, services.workspace.root)
    top = plain[0]
    for _ in range(4):  # four thumbs down on every turn that recalled the top hit
        reply = agent.chat("billing database")
        memory.feedback.record(reply.session_id, None, False)
    off = memory.search("billing database", record=False)
    assert [h.citation for h in off.results] == plain  # off: feedback changes nothing
    memory.settings.search.usefulness_weight = 0.5
    on = memory.search("billing database", record=False)
    scores = {h.citation: h.parts.score for h in on.results}
    before = {h.citation: h.parts.score for h in off.results}
    moved = [c for c in scores if scores[c] != before.get(c)]
    assert moved and all(scores[c] >= 0.5 * before[c] - 1e-9 for c in moved)  # at most halved
    assert any("feedback: useful 0 / not" in r for h in on.results for r in h.parts.reasons)
    assert on.weights["usefulness"] == 0.5
    assert top in scores


def test_prior_and_factor_are_bounded() -> None:
    assert ranking.usefulness_prior(0, 0) == 0.0
    assert 0 < ranking.usefulness_prior(1, 0) < 0.5  # one vote is shrunk towards neutral
    assert -1 < ranking.usefulness_prior(0, 1000) < -0.99
    assert ranking.usefulness_factor(1.0, 5.0) == 1.5  # the weight is capped at 0.5
    assert ranking.usefulness_factor(-1.0, 0.5) == 0.5
    assert ranking.usefulness_factor(0.7, 0.0) == 1.0


def test_a_liked_chunk_overtakes_a_disliked_one_with_the_prior_on(
    make_workspace: Callable[..., Path], services_factory: Callable[..., Any]
) -> None:
    only = {  # a question that recalls only that file
        "memory/deploy-a.md": "Kubernetes job",
        "memory/deploy-b.md": "smoke tests",
    }
    root = make_workspace(
        {
            "memory/deploy-a.md": "# Deploy\n\nThe deploy script runs database migrations (Kubernetes job).\n",
            "memory/deploy-b.md": "# Deploy\n\nThe deploy script runs database migrations, then smoke tests.\n",
        }
    )
    services = services_factory(root)
    services.memory.sync()
    memory = services.memory
    query = "deploy script database migrations"
    first = [h.path for h in memory.search(query, record=False).results]
    assert sorted(first) == sorted(only)
    agent = _agent(services, root)
    session = None
    for path, useful in ((first[0], False), (first[1], True)):
        reply = agent.chat(only[path], session)
        session = reply.session_id
        recorded = memory.feedback.record(session, None, useful)
        assert [c.path for c in recorded.chunks] == [path]
    assert [h.path for h in memory.search(query, record=False).results] == first  # off by default
    memory.settings.search.usefulness_weight = 0.5
    again = memory.search(query, record=False).results
    assert [h.path for h in again] == [first[1], first[0]]
    assert again[0].parts.mmr_rank == 1


def test_corrections_are_read_from_the_start_of_a_message() -> None:
    assert turns.is_correction("No, it was MySQL")
    assert turns.is_correction("that's wrong")
    assert turns.is_correction("不对，是周二")
    assert not turns.is_correction("Now tell me about the deploy")
    assert not turns.is_correction("I know that")


def test_cli_records_feedback_and_harvests(services: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from mnemo.cli.main import main

    root = services.workspace.root
    agent = _agent(services, root)
    first = agent.chat(BILLING)
    agent.chat("no, that is wrong", first.session_id)
    services.close()
    assert main(["feedback", "-w", str(root), first.session_id, "--turn", "1", "--useful"]) == 0
    out = capsys.readouterr().out
    assert f"session {first.session_id} turn 1: useful (explicit)" in out and "MEMORY.md#L" in out
    assert main(["feedback", "-w", str(root), first.session_id, "--harvest", "--json"]) == 0
    harvested = json.loads(capsys.readouterr().out)
    assert [(r["turn"], r["signal"], r["useful"]) for r in harvested] == [(1, "corrected", False)]
    assert main(["feedback", "-w", str(root), first.session_id, "--turn", "9", "--not-useful"]) == 1
    assert "turns 1-2, not 9" in capsys.readouterr().err


def test_harvest_is_repaired_and_retried_as_any_other_write(
    services: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import duckdb

    tool = '<tool_call>{"name": "memory_search", "arguments": {"query": "tomatoes sun watering"}}</tool_call>'
    reply = _agent(services, services.workspace.root, tool, "Full sun.").chat("Anything about my garden?")
    book = services.memory.feedback
    real, calls = book.harvest, []

    def failing_once(session_id: str) -> Any:
        calls.append(session_id)
        if len(calls) == 1:
            raise duckdb.InternalException("injected: the database was invalidated")
        return real(session_id)

    monkeypatch.setattr(book, "harvest", failing_once)
    repairs = services.memory.recovery.count
    harvested = services.memory.harvest_feedback(reply.session_id)
    assert [(r.turn, r.signal) for r in harvested] == [(1, "tool")]
    assert len(calls) == 2 and services.memory.recovery.count == repairs + 1


def test_tally_weights_are_doubles_not_decimals() -> None:
    """A bare 0.5 in SQL is a DECIMAL: its sums came back as Python Decimals, and DuckDB's client loaded
    the decimal module into every search that read a tally."""
    from mnemo.index import feedback
    from mnemo.index.duckdb_native import duckdb

    con = duckdb.connect()
    try:
        feedback.ensure(con)
        kinds = con.execute(
            f"SELECT typeof(sum({feedback.weight_sql()})), typeof(coalesce(sum({feedback.weight_sql()}), 0)) "
            "FROM feedback"
        ).fetchone()
    finally:
        con.close()
    assert kinds == ("DOUBLE", "DOUBLE")
