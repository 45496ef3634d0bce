"""Which lines of a note are Markdown to the editor's features: not inside fenced code or an HTML comment.

MEMORY.md's sections (where a promoted memory goes), the lines consolidation compares and merges, the
links hygiene checks and the sections a commit message sums up all read a note's structure; a ``##``,
a list item or a link inside fenced code or a commented-out draft is text, not structure. They share
this one reading, as CommonMark has it:

- a fence opens on a line of three or more backticks or tildes, indented up to three spaces (a backtick
  fence's info string holds no backtick), and closes on a line of the same character, at least as long,
  with nothing after it but spaces; an unclosed fence runs to the end of the text;
- an HTML comment that opens a line (``<!--``, indented up to three spaces, outside a fence) runs to the
  first line holding ``-->``, that line included, or to the end of the text (an HTML block of type 2).

The delimiters' lines are not Markdown either. (The chunker keeps its own reading, which decides the
index's chunks: changing it means a new ``CHUNKER_VERSION``.)
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)$")
_COMMENT = re.compile(r" {0,3}<!--")


def markdown_lines(lines: Sequence[str]) -> list[bool]:
    """For each line (without its line end; a trailing CR is tolerated), whether it is Markdown: False
    inside fenced code or an HTML comment, their delimiter lines included."""
    out: list[bool] = []
    fence = ""  # the open fence's marker ("" when none is open)
    in_comment = False
    for line in lines:
        if in_comment:
            in_comment = "-->" not in line
            out.append(False)
            continue
        found = _FENCE.match(line)
        if fence:
            if found and found.group(1)[0] == fence[0] and len(found.group(1)) >= len(fence):
                fence = "" if not found.group(2).strip() else fence
            out.append(False)
            continue
        if found and not (found.group(1)[0] == "`" and "`" in found.group(2)):
            fence = found.group(1)
            out.append(False)
            continue
        opened = _COMMENT.match(line)
        if opened:
            in_comment = "-->" not in line[opened.end() :]
        out.append(not opened)
    return out
