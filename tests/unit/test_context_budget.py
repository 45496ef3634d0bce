"""A context sized to the model: a small window gets the recalled snippets that matter (top-k under a
token budget) and an answer format, not the whole MEMORY.md, daily notes, skills and tools."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

from mnemo.agent import Agent, ScriptedProvider
from mnemo.agent.context import ANSWER_FORMAT, COMPACT_WINDOW, NOTHING_RECALLED
from mnemo.config import AgentSettings

TODAY = date(2026, 11, 3)
NOTES = {
    f"memory/billing-{i:02d}.md": f"# Billing note {i}\n\n"
    + f"Billing invoice run {i}: the billing service retried payment batch {i} after a timeout. " * 4
    for i in range(10)
}


def agent_for(
    services_factory: Callable[..., Any], root: Path, window: int, **settings: Any
) -> tuple[Agent, ScriptedProvider]:
    services = services_factory(root)
    services.memory.sync()
    provider = ScriptedProvider(default="ok", context_window=window)
    settings.setdefault(
        "grounding", "off"
    )  # these check the prompt; strict would skip the model (test_grounding)
    return Agent(root, services.memory, provider, AgentSettings(**settings)), provider


def memory_block(system: str) -> str:
    return system.split("Memory:\n", 1)[1].split("\n\n" + ANSWER_FORMAT, 1)[0]


def test_a_small_window_gets_top_k_snippets_under_a_budget(
    sample_workspace: Path, services_factory: Callable[..., Any], write_tree: Callable[..., None]
) -> None:
    write_tree(sample_workspace, NOTES)
    (sample_workspace / "memory" / f"{TODAY.isoformat()}.md").write_text("# today\n- standup at 10\n")
    agent, provider = agent_for(services_factory, sample_workspace, 1024, recall_results=10)
    assert provider.context_window <= COMPACT_WINDOW
    ranked = [h.citation for h in agent.memory.search("billing payment batch", max_results=10).results]
    reply = agent.chat("billing payment batch", today=TODAY)
    system = provider.calls[0][0].content
    # Not the whole files: MEMORY.md, the daily notes, skills and the tool list are left to recall.
    for absent in ("Long-term memory", "Daily note", "standup at 10", "Skills:", "Tools:", "<tool_call>"):
        assert absent not in system, absent
    assert ANSWER_FORMAT in system
    block = memory_block(system)
    assert provider.count_tokens(block) <= 1024 // 4
    shown = [c.citation for c in reply.citations]
    assert 1 <= len(shown) < len(ranked) == 10  # the budget, not recall_results, stopped it
    assert shown == ranked[: len(shown)]  # the best-ranked ones, in rank order
    assert all(f"[{c}]" in block for c in shown)
    assert any("recalled snippet(s) left out" in n for n in reply.notes)
    assert reply.prompt_tokens <= 1024 - agent.settings.max_tokens


def test_a_small_window_still_says_when_memory_has_nothing(
    sample_workspace: Path, services_factory: Callable[..., Any]
) -> None:
    agent, provider = agent_for(services_factory, sample_workspace, 1024)
    reply = agent.chat("zebra quantum lunch menu", today=TODAY)
    system = provider.calls[0][0].content
    assert reply.citations == [] and NOTHING_RECALLED in system and ANSWER_FORMAT not in system


def test_a_small_window_keeps_memory_md_out_of_group_sessions(
    sample_workspace: Path, services_factory: Callable[..., Any]
) -> None:
    agent, provider = agent_for(services_factory, sample_workspace, 1024)
    reply = agent.chat("billing PostgreSQL row-level security", kind="group", today=TODAY)
    assert all(c.path != "MEMORY.md" for c in reply.citations)
    assert "row-level security" not in provider.calls[0][0].content


def test_a_large_window_keeps_the_full_context(
    sample_workspace: Path, services_factory: Callable[..., Any]
) -> None:
    agent, provider = agent_for(services_factory, sample_workspace, 8192)
    agent.chat("billing database?", today=TODAY)
    system = provider.calls[0][0].content
    assert "Long-term memory (MEMORY.md)" in system and "Tools:" in system and ANSWER_FORMAT not in system


def test_a_cut_file_names_the_first_line_left_out_as_memory_get_counts_it(tmp_path: Path) -> None:
    from mnemo.agent.context import ContextBuilder

    # Two blank lines first and a U+2028 inside line 4: memory_get counts both, str.splitlines and
    # strip() did not, so the note sent the model to the wrong lines.
    text = "\n\n# Memory\n- Pager rota:\u2028weekly.\n" + "".join(
        f"- fact {i} " * 8 + "\n" for i in range(40)
    )
    (tmp_path / "MEMORY.md").write_text(text, encoding="utf-8")
    builder = ContextBuilder(tmp_path, None, ScriptedProvider(default="ok"))  # type: ignore[arg-type]
    notes: list[str] = []
    read = builder._read("MEMORY.md")
    assert read is not None
    kept = builder._fit("MEMORY.md", read, 200, notes)
    first_left_out = int(notes[0].split("lines ", 1)[1].split("-", 1)[0])
    kept_lines = kept.rsplit("\n[", 1)[0].split("\n")
    assert kept_lines[-1] == text.split("\n")[first_left_out - 2]  # the line before it is the last kept
    assert int(notes[0].split("-", 2)[1].split(" ", 1)[0]) == len(text.rstrip("\n").split("\n"))
