"""Edits that fix or reorganise memory: redact a secret, promote a note into MEMORY.md, drop a duplicate.

Pure: text in, :class:`TextEdit` out (0-based lines as an editor counts them, LF, CRLF or CR alone ending
one, and UTF-16 columns). Front ends apply them (the editor through a WorkspaceEdit, so the user can undo).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mnemo.markdown.structure import markdown_lines
from mnemo.memory.reading import editor_lines, line_end_of
from mnemo.secrets import scan_text, utf16_col

PLACEHOLDER = "<redacted:{rule_id}>"
_H2 = re.compile(r" {0,3}##[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_ANY_HEADING = re.compile(r" {0,3}(#{1,6})(?:[ \t]|$)")


@dataclass(frozen=True)
class TextEdit:
    path: str
    start: tuple[int, int]
    end: tuple[int, int]
    new_text: str


@dataclass(frozen=True)
class Section:
    title: str
    heading_line: int  # 0-based
    insert_line: int  # 0-based line before which promoted text goes


def redact_edits(path: str, text: str, first_line: int, last_line: int) -> list[TextEdit]:
    """Replace every secret starting on lines ``first_line..last_line`` (0-based) with a placeholder."""
    lines = editor_lines(text)
    return [
        TextEdit(
            path,
            (f.line, utf16_col(lines[f.line], f.start_col)),
            (f.end_line, utf16_col(lines[f.end_line], f.end_col)),
            PLACEHOLDER.format(rule_id=f.rule_id),
        )
        for f in scan_text(text)
        if first_line <= f.line <= last_line
    ]


def sections(memory_text: str) -> list[Section]:
    """The ``##`` sections of MEMORY.md and where new lines go in each (after its last non-blank line)."""
    lines = editor_lines(memory_text)
    markdown = markdown_lines(lines)  # (a heading in fenced code or an HTML comment is text)
    found: list[tuple[str, int]] = []
    for n, line in enumerate(lines):
        m = _H2.match(line) if markdown[n] else None
        if m:
            found.append((m.group(1), n))
    out = []
    for i, (title, start) in enumerate(found):
        end = found[i + 1][1] if i + 1 < len(found) else len(lines)
        # A deeper or shallower heading inside the span ends the section's own text only for "#".
        for n in range(start + 1, end):
            m = _ANY_HEADING.match(lines[n]) if markdown[n] else None
            if m and len(m.group(1)) == 1:
                end = n
                break
        last = end - 1
        while last > start and not lines[last].strip():
            last -= 1
        out.append(Section(title, start, last + 1))
    return out


def promote_edit(memory_path: str, memory_text: str, section_title: str, promoted: list[str]) -> TextEdit:
    """Insert ``promoted`` lines at the end of ``## section_title`` (at the end of the file when absent)."""
    lines = editor_lines(memory_text)
    eol = line_end_of(memory_text)  # (new lines end as the file's do)
    block = [line.rstrip() for line in promoted if line.strip()]
    target = next((s for s in sections(memory_text) if s.title == section_title), None)
    if target is None:
        heading = [] if not section_title else ["", f"## {section_title}"]
        return _append(memory_path, lines, heading + block, eol)
    if target.insert_line >= len(lines):
        return _append(memory_path, lines, block, eol)
    return TextEdit(memory_path, (target.insert_line, 0), (target.insert_line, 0), eol.join(block) + eol)


def _append(path: str, lines: list[str], block: list[str], eol: str) -> TextEdit:
    last = len(lines) - 1
    end = (last, utf16_col(lines[last], len(lines[last])))
    if lines[last] == "":  # the file ends with a newline: write before the final empty "line"
        return TextEdit(path, end, end, eol.join(block) + eol)
    return TextEdit(path, end, end, eol + eol.join(block))


def delete_lines_edit(path: str, text: str, start_line: int, end_line: int) -> TextEdit:
    """Remove 1-based lines ``start_line..end_line`` whole (their line end included)."""
    lines = editor_lines(text)
    if end_line < len(lines):  # a line follows the block: remove up to its start
        return TextEdit(path, (start_line - 1, 0), (end_line, 0), "")
    # The last line has no newline after it: take the newline before the block instead.
    last = len(lines) - 1
    end = (last, utf16_col(lines[last], len(lines[last])))
    if start_line <= 1:
        return TextEdit(path, (0, 0), end, "")
    prev = start_line - 2
    return TextEdit(path, (prev, utf16_col(lines[prev], len(lines[prev]))), end, "")


def duplicate_body_lines(text: str, start_line: int, end_line: int) -> tuple[int, int]:
    """The 1-based lines of a duplicate chunk to remove: its leading headings (and the blank lines
    between them) stay, since later sections may live under them; an all-heading chunk keeps all."""
    lines = editor_lines(text)
    first = start_line
    while first <= end_line and first <= len(lines):
        stripped = lines[first - 1].strip()
        if stripped and not stripped.startswith("#"):
            break
        first += 1
    return (first, end_line) if first <= end_line else (end_line + 1, end_line)


def duplicate_removal_edit(path: str, text: str, start_line: int, end_line: int) -> TextEdit | None:
    """The edit that removes a near-duplicate chunk's body (its leading headings stay); None when the
    chunk is only headings."""
    first, last = duplicate_body_lines(text, start_line, end_line)
    return None if first > last else delete_lines_edit(path, text, first, last)


def selected_lines(text: str, first_line: int, last_line: int) -> list[str]:
    """Lines ``first_line..last_line`` (0-based, inclusive) of ``text``."""
    return editor_lines(text)[first_line : last_line + 1]
