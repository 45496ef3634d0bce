"""Citations as search prints them (``path#L3-L9``), read back by every front.

Search results, chat answers and the agent's context cite memory as ``path#L3-L9``; people also paste
``path#L3``, ``path:12`` and ``path:12-20`` (as compilers and grep print them). ``mnemo get``, ``mnemo log``,
the LSP's ``mnemo/memoryGet`` and ``mnemo/history`` and the gateway's ``memory.get`` accept any of these
where they take a path, through :func:`get_args` / :func:`parse_citation`.

A suffix is read as a line range only when it is exactly one of those forms at the end of the text.
Memory files end in ``.md`` (or ``.jsonl``), so a real file name never ends in ``:12`` or ``#L3``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mnemo.memory.limits import MAX_LINE, InvalidInput, check_line_range

_SUFFIX = re.compile(r"(?:#L(?P<hs>\d+)(?:-L?(?P<he>\d+))?|:(?P<cs>\d+)(?:-(?P<ce>\d+))?)\Z")


@dataclass(frozen=True)
class Citation:
    """A workspace path and, when the text named lines, the 1-based inclusive range."""

    path: str
    start: int | None = None
    end: int | None = None

    @property
    def lines(self) -> int | None:
        return None if self.start is None or self.end is None else self.end - self.start + 1

    def __str__(self) -> str:
        if self.start is None:
            return self.path
        return f"{self.path}#L{self.start}" + ("" if self.end == self.start else f"-L{self.end}")


def parse_citation(text: str) -> Citation:
    """``memory/a.md#L3-L9`` -> (``memory/a.md``, 3, 9); ``a.md:12`` -> (``a.md``, 12, 12); a plain path
    -> (path, None, None). Raises :class:`InvalidInput` for a range that is empty, ends before it starts
    or is out of bounds (line 0, more than ``limits.MAX_LINE``)."""
    m = _SUFFIX.search(text)
    if m is None or m.start() == 0:
        return Citation(text)
    first = m.group("hs") or m.group("cs")
    last = m.group("he") or m.group("ce") or first
    start, end = int(first), int(last)
    if not 1 <= start <= MAX_LINE or not 1 <= end <= MAX_LINE:  # the bounds every front shares
        raise InvalidInput(f"citation {text!r}: line numbers must be between 1 and {MAX_LINE}")
    if end < start:
        raise InvalidInput(f"citation {text!r}: the range ends (line {end}) before it starts (line {start})")
    return Citation(text[: m.start()], start, end)


def get_args(path: object, from_line: object, lines: object) -> tuple[str, int | None, int | None]:
    """The ``(path, from, lines)`` to read for a ``get`` whose path may be a citation.

    The citation's range is the default: ``a.md#L3-L9`` reads lines 3 to 9. An explicit ``from`` or
    ``lines`` replaces the citation's start or length (``a.md#L3-L9`` with ``lines=20`` reads 3 to 22).
    Raises :class:`InvalidInput` for a path that is not a string and for any bound out of range."""
    if not isinstance(path, str) or not path:
        raise InvalidInput(f"'path' must be a non-empty string, got {path!r}")
    from_checked, lines_checked = check_line_range(from_line, lines)
    cited = parse_citation(path)
    return (
        cited.path,
        from_checked if from_checked is not None else cited.start,
        lines_checked if lines_checked is not None else cited.lines,
    )
