"""Citations as search prints them, read back by `get`/`log` and the LSP and gateway fronts."""

from __future__ import annotations

import pytest

from mnemo.memory.citations import Citation, get_args, parse_citation
from mnemo.memory.limits import MAX_LINE, InvalidInput


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("memory/2026-11-02.md#L3-L9", Citation("memory/2026-11-02.md", 3, 9)),
        ("memory/2026-11-02.md#L3-9", Citation("memory/2026-11-02.md", 3, 9)),
        ("MEMORY.md#L7", Citation("MEMORY.md", 7, 7)),
        ("MEMORY.md:12", Citation("MEMORY.md", 12, 12)),
        ("MEMORY.md:12-20", Citation("MEMORY.md", 12, 20)),
        ("MEMORY.md", Citation("MEMORY.md")),
        (
            "sessions/2026-11-30-091500-a1b2c3.jsonl#L2-L4",
            Citation("sessions/2026-11-30-091500-a1b2c3.jsonl", 2, 4),
        ),
        # Not a citation suffix: left as a path (the workspace then refuses or finds it).
        ("memory/a.md#heading", Citation("memory/a.md#heading")),
        ("memory/a.md#L3x", Citation("memory/a.md#L3x")),
        ("#L3", Citation("#L3")),
        ("memory/v1:2.md", Citation("memory/v1:2.md")),
    ],
)
def test_parse_citation_forms(text: str, expected: Citation) -> None:
    assert parse_citation(text) == expected


def test_citation_round_trips_and_counts_lines() -> None:
    for text in ("memory/a.md#L3-L9", "MEMORY.md#L7", "MEMORY.md"):
        assert str(parse_citation(text)) == text
    assert parse_citation("a.md#L3-L9").lines == 7
    assert parse_citation("a.md:12").lines == 1
    assert parse_citation("a.md").lines is None


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("a.md#L9-L3", "ends (line 3) before it starts (line 9)"),
        ("a.md:20-12", "before it starts"),
        ("a.md#L0", "between 1 and"),
        (f"a.md#L1-L{MAX_LINE + 1}", "between 1 and"),
        ("a.md:0-3", "between 1 and"),
    ],
)
def test_bad_ranges_are_invalid_input(text: str, needle: str) -> None:
    with pytest.raises(InvalidInput) as info:
        parse_citation(text)
    assert needle in str(info.value)


def test_get_args_citation_is_the_default_and_explicit_values_replace_it() -> None:
    assert get_args("memory/a.md#L3-L9", None, None) == ("memory/a.md", 3, 7)
    assert get_args("memory/a.md:12", None, None) == ("memory/a.md", 12, 1)
    assert get_args("memory/a.md", None, None) == ("memory/a.md", None, None)
    assert get_args("memory/a.md", 2, 5) == ("memory/a.md", 2, 5)
    # explicit `from` / `lines` win, each on its own
    assert get_args("memory/a.md#L3-L9", None, 20) == ("memory/a.md", 3, 20)
    assert get_args("memory/a.md#L3-L9", 5, None) == ("memory/a.md", 5, 7)
    assert get_args("memory/a.md#L3-L9", 1, 2) == ("memory/a.md", 1, 2)


@pytest.mark.parametrize(
    ("path", "start", "lines", "needle"),
    [
        (None, None, None, "'path'"),
        ("", None, None, "'path'"),
        (3, None, None, "'path'"),
        ("a.md#L3", 0, None, "'from'"),
        ("a.md#L3", None, -1, "'lines'"),
        ("a.md#L3", "2", None, "'from'"),
    ],
)
def test_get_args_refuses_bad_values(path: object, start: object, lines: object, needle: str) -> None:
    with pytest.raises(InvalidInput) as info:
        get_args(path, start, lines)
    assert needle in str(info.value)
