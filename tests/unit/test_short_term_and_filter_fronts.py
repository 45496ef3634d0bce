"""Issue 18: the short-term window of daily notes ([memory] short_term_days) with the scripted model, and
search filters from the CLI and the agent's memory_search tool."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

from tests.unit.test_cli import mnemo

from mnemo.agent import Agent, ScriptedProvider
from mnemo.config import AgentSettings

TODAY = date(2026, 11, 3)
DAILIES = {
    "MEMORY.md": "# Memory\n\n- Coffee: dark roast.\n",
    "memory/2026-11-03.md": "# 2026-11-03\n\n- TODAYNOTE: billing call with Alice.\n",
    "memory/2026-11-02.md": "# 2026-11-02\n\n- YESTERDAYNOTE: billing decisions reviewed.\n",
    "memory/2026-11-01.md": "# 2026-11-01\n\n- OLDERNOTE: billing decisions about invoices.\n",
}


def _system(provider: ScriptedProvider) -> str:
    return provider.calls[0][0].content


def _agent(services_factory: Callable[..., Any], root: Path, provider: ScriptedProvider) -> Agent:
    services = services_factory(root)
    services.memory.sync()
    return Agent(root, services.memory, provider, AgentSettings(recall_results=0))


def test_context_loads_today_and_yesterday_only(make_workspace, services_factory) -> None:  # type: ignore[no-untyped-def]
    root = make_workspace(DAILIES)
    provider = ScriptedProvider(["ok"])
    agent = _agent(services_factory, root, provider)
    agent.chat("hello", today=TODAY)
    system = _system(provider)
    assert "TODAYNOTE" in system and "YESTERDAYNOTE" in system
    assert "OLDERNOTE" not in system  # archived: left the automatic context...
    found = agent.memory.search("OLDERNOTE invoices").results
    assert [h.path for h in found] == ["memory/2026-11-01.md"]  # ...still in the index


def test_short_term_days_setting(make_workspace, services_factory) -> None:  # type: ignore[no-untyped-def]
    root = make_workspace(DAILIES, toml="[memory]\nshort_term_days = 3\n")
    services = services_factory(root)
    assert services.settings.memory.short_term_days == 3
    agent = services.agent  # the composition root passes [memory] short_term_days to the context
    assert agent.context.short_term_days == 3
    for days, seen in ((3, {"TODAYNOTE", "YESTERDAYNOTE", "OLDERNOTE"}), (1, {"TODAYNOTE"}), (0, set())):
        provider = ScriptedProvider(["ok"])
        other = _agent(services_factory, root, provider)
        other.context.short_term_days = days
        other.chat("hello", today=TODAY)
        system = _system(provider)
        assert {m for m in ("TODAYNOTE", "YESTERDAYNOTE", "OLDERNOTE") if m in system} == seen, days


def test_memory_search_tool_takes_filters(make_workspace, services_factory) -> None:  # type: ignore[no-untyped-def]
    root = make_workspace(DAILIES)
    args = {"query": "billing decisions", "filters": {"until": "2026-11-01"}}
    call = json.dumps({"name": "memory_search", "arguments": args})
    bad = json.dumps({"name": "memory_search", "arguments": {**args, "filters": {"since": "Nov"}}})
    provider = ScriptedProvider([f"<tool_call>{call}</tool_call>", f"<tool_call>{bad}</tool_call>", "done"])
    agent = _agent(services_factory, root, provider)
    agent.chat("what did we decide?", today=TODAY)
    observation = provider.calls[1][-1].content
    assert "memory/2026-11-01.md" in observation and "memory/2026-11-02.md" not in observation
    refused = provider.calls[2][-1].content
    assert "YYYY-MM-DD" in refused


def test_cli_search_filter_flags(tmp_path: Path) -> None:
    ws = tmp_path / "notes"
    assert mnemo("init", str(ws)).returncode == 0
    base = ("search", "--json", "--provider", "none", "-w", str(ws))
    daily = mnemo(*base, "--kind", "daily", "--since", "2026-11-01", "PostgreSQL billing")
    assert daily.returncode == 0, daily.stderr
    assert {h["path"] for h in json.loads(daily.stdout)["results"]} == {"memory/2026-11-02.md"}
    both = mnemo(*base, "--kind", "memory", "--kind", "daily", "PostgreSQL billing")
    assert {h["path"] for h in json.loads(both.stdout)["results"]} == {"MEMORY.md", "memory/2026-11-02.md"}
    none = mnemo(*base, "--tag", "nothing-has-this", "PostgreSQL billing")
    assert json.loads(none.stdout)["results"] == []
    bad = mnemo(*base, "--since", "October", "PostgreSQL billing")
    assert bad.returncode == 2 and "YYYY-MM-DD" in bad.stderr, bad.stderr
