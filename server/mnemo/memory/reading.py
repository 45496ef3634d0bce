"""Reading lines of a memory file for ``get`` (``mnemo get``, ``memory_get``, mnemo/memoryGet): the
editor's unsaved buffer when there is one, else the file; no index needed."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from mnemo.memory.limits import check_line_range
from mnemo.workspace.layout import Workspace, WorkspacePathError


@dataclass(frozen=True)
class FileLines:
    """Lines ``start`` .. ``start + lines - 1`` of a memory file (1-based), and how long the file is."""

    path: str
    """The workspace path of the memory file."""
    start: int
    lines: int
    """How many lines ``text`` holds."""
    total_lines: int
    text: str


LINE_END = re.compile(r"\r\n?|\n")
"""A line end as an editor (LSP) counts one."""


def editor_lines(text: str) -> list[str]:
    """The lines an editor (LSP) counts in ``text``, without their line ends: a line ends at LF, CRLF or CR
    alone (an old Mac's), and a text that ends with a line end has an empty last line (LSP's position after
    it). The positions of diagnostics and edits are 0-based indexes into this list."""
    return text.split("\n") if "\r" not in text else LINE_END.split(text)


def line_end_of(text: str) -> str:
    """The line end ``text`` uses (its first one; LF when it has none), for lines written into it."""
    m = LINE_END.search(text)
    return "\n" if m is None else m.group()


def file_lines(text: str) -> list[str]:
    """A file's lines as the chunker (and an editor: LSP) count them: ended by LF, CRLF or CR only. A form
    feed, NEL or U+2028, which ``str.splitlines`` also ends a line at, stay inside it: else a citation's
    line numbers and the lines fetched for it disagree."""
    lines = editor_lines(text)
    return lines[:-1] if lines[-1] == "" else lines  # (a last line end ends the last line)


def read_lines(
    workspace: Workspace,
    buffers: Mapping[str, str],
    path: str,
    from_line: int | None = None,
    lines: int | None = None,
) -> FileLines:
    """Lines of a memory file; ``buffers``: the texts of files open in the editor (they win over the disk)."""
    from_line, lines = check_line_range(from_line, lines)
    resolved, memory_file = workspace.resolve_memory_path(path)
    text = buffers.get(memory_file.path)
    if text is None:
        data = resolved.read_bytes()
        if b"\x00" in data[:8192]:
            raise WorkspacePathError(f"{path}: binary file, not Markdown")
        text = data.decode("utf-8-sig", errors="replace")
    all_lines = file_lines(text)
    start = max(1, from_line or 1)
    if start > max(1, len(all_lines)):
        raise WorkspacePathError(f"{path}: from={start} is past the end ({len(all_lines)} lines)")
    count = len(all_lines) - start + 1 if lines is None else max(0, lines)
    chosen = all_lines[start - 1 : start - 1 + count]
    return FileLines(memory_file.path, start, len(chosen), len(all_lines), "\n".join(chosen))
