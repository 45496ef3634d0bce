"""Bounds on what a caller may ask of the memory engine, checked once in the core for every front.

The CLI, the LSP server, the gateway and the agent's tools all reach :class:`~mnemo.memory.service.
MemoryService`; its ``search`` and ``get`` call these checks, so a negative line count or an absurd
result count is the same clear error everywhere (each front maps :class:`InvalidInput` to its own
"invalid params" answer). A query longer than ``search.max_query_chars`` is not an error: it is cut, and a
note in the result says so (a pasted log should still find something, quickly).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import date

from mnemo.errors import MnemoError

MAX_RESULTS = 200
"""Most results one search may return (as ``search.max_results``' range in mnemo.toml)."""
MAX_LINE = 10_000_000
"""Largest ``from`` and ``lines`` for ``get``: no readable memory file has more lines."""
SOURCES = ("memory", "skills", "sessions", "archive")
"""What a search may be limited to (``sources``)."""


class InvalidInput(MnemoError):
    """A parameter out of its range (the CLI exits 2, the LSP and the gateway answer InvalidParams)."""


def _whole_number(name: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"'{name}' must be a whole number, got {value!r}")
    if not low <= value <= high:
        raise InvalidInput(f"'{name}' must be between {low} and {high}, got {value}")
    return value


def check_max_results(max_results: object) -> int | None:
    """``None`` (the setting's default) or a whole number from 1 to :data:`MAX_RESULTS`."""
    return None if max_results is None else _whole_number("maxResults", max_results, 1, MAX_RESULTS)


def check_sources(sources: Sequence[str] | None) -> None:
    """``None`` or names from :data:`SOURCES` only (else an unknown source would silently find nothing)."""
    unknown = [s for s in sources or () if s not in SOURCES]
    if unknown:
        raise InvalidInput(f"'sources' may hold {', '.join(SOURCES)}, got {unknown!r}")


def check_search(
    query: str, max_results: object, sources: Sequence[str] | None, max_query_chars: int
) -> tuple[str, int | None, list[str]]:
    """A search's query (cut by :func:`cut_query`), its checked ``max_results`` and the notes so far;
    raises :class:`InvalidInput` for a bad ``max_results`` or ``sources`` (``filters``: check_filters)."""
    checked = check_max_results(max_results)
    check_sources(sources)
    query, cut = cut_query(query, max_query_chars)
    return query, checked, [cut] if cut else []


def check_line_range(from_line: object, lines: object) -> tuple[int | None, int | None]:
    """``from`` (1-based first line) and ``lines`` (how many): each ``None`` or 1 to :data:`MAX_LINE`."""
    return (
        None if from_line is None else _whole_number("from", from_line, 1, MAX_LINE),
        None if lines is None else _whole_number("lines", lines, 1, MAX_LINE),
    )


_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def check_day(name: str, value: object) -> date | None:
    """``None`` or a calendar date written ``YYYY-MM-DD`` (a search filter's ``since``/``until``)."""
    if value is None:
        return None
    if isinstance(value, str) and _DAY.fullmatch(value):  # (fromisoformat takes 2026-W09-1, 20260301..)
        try:
            return date.fromisoformat(value)
        except ValueError:
            pass
    raise InvalidInput(f"'{name}' must be a date written YYYY-MM-DD (e.g. 2025-10-01), got {value!r}")


def cut_query(query: str, max_chars: int) -> tuple[str, str | None]:
    """The query, cut to ``max_chars`` characters, and a note when it was cut (else None)."""
    if len(query) <= max_chars:
        return query, None
    note = (
        f"the query was cut to its first {max_chars} of {len(query)} characters "
        "(search.max_query_chars in mnemo.toml)"
    )
    return query[:max_chars], note
