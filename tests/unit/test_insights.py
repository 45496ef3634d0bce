"""Line insights and lenses from the index: chunk, retrieval history (persisted, kept over rebuilds), decay."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

from mnemo.config import SearchSettings
from mnemo.editor.insights import decay_today


def test_insight_after_search_and_across_rebuild(sample_workspace: Path, services_factory: Any) -> None:
    services = services_factory(sample_workspace)
    services.memory.sync()
    services.memory.search("PostgreSQL row-level security", today=date(2026, 11, 30))
    editor = services.editor
    line = (sample_workspace / "MEMORY.md").read_text(encoding="utf-8").split("\n").index(
        "- The billing service uses PostgreSQL with row-level security."
    ) + 1
    found = editor.insight("MEMORY.md", line)
    assert found is not None and found.times_retrieved == 1
    assert found.last is not None and found.last.query == "PostgreSQL row-level security"
    assert found.last.weight == 1.5 and found.last.rank == 1 and found.age_days is None
    assert "Decisions" in found.heading and "score **" in found.to_markdown()
    lenses = editor.lenses("MEMORY.md")
    assert [lens.title.startswith("recalled 1 time,") for lens in lenses].count(True) == 1
    # Statistics are history: a full rebuild and a restart keep them.
    services.memory.sync(full=True)
    services.close()
    again = services_factory(sample_workspace)
    again.memory.sync()
    assert again.editor.insight("MEMORY.md", line).times_retrieved == 1
    daily = again.editor.insight("memory/2026-11-02.md", 4, today=date(2026, 12, 2))
    assert daily.age_days == 30.0 and 0 < daily.decay_today < 1 and daily.last is None
    assert again.editor.insight("notes.txt", 1) is None


def test_decay_today_modes() -> None:
    s = SearchSettings(decay="multiplicative", half_life_days=30)
    assert decay_today(date(2026, 1, 1), s, date(2026, 1, 31)) == (30.0, 0.5)
    assert decay_today(None, s, date(2026, 1, 31)) == (None, 1.0)
    assert decay_today(date(2026, 1, 1), SearchSettings(decay="off"), date(2026, 1, 31))[1] == 1.0
