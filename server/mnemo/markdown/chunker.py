"""Split a Markdown file into chunks for embedding and keyword search.

The file is first cut into sections at ATX headings (``#`` to ``######`` outside fenced code and HTML
comments): a heading line starts a new section and its first chunk, so every chunk has an exact heading
path. A section with no text of its own (a heading straight followed by another heading) is no chunk: its
heading line opens the next section's first chunk, which carries that section's heading path (only a heading
at the very end of a file stays a chunk of its own). A section that fits in ``target_tokens`` is one chunk.
A larger one is cut into blocks that are never split: fenced code blocks (backticks or tildes, any length;
an unclosed fence runs to the end of the file) and lines. Blocks are packed greedily; when the next block
does not fit, the chunk ends at the best boundary that keeps it at least half the target: a paragraph (blank
line) or code block boundary first, then a list item, then any line. The next chunk then starts with about
``overlap * target_tokens`` of the previous chunk's trailing whole lines.

A fenced block larger than the target is a chunk of its own, even if oversized. Two safety valves keep a
pathological file from making giant chunks: a fence over ``FENCE_MAX_FACTOR`` times the target is cut at
line boundaries like ordinary text, and a single line over the target is cut by characters into pieces
(each its own chunk, all with that line's number, their text a piece of the line).

An HTML comment that starts a line (after any indentation, as a fence may be) runs from ``<!--`` to the
first line holding ``-->``, or to the end of the file (CommonMark's HTML block of type 2): a ``#`` or fence
line inside it is text. Its lines are ordinary lines (a long comment is cut like text).

Front matter is skipped (line numbers still count it). Lines end with ``\\n``, ``\\r\\n`` or ``\\r``; chunk
text joins lines with ``\\n``. A chunk's :attr:`Chunk.key` depends on the file path, heading path and
text only, so editing one section leaves the keys of every other section's chunks unchanged.

A change here that gives other chunks raises :data:`mnemo.markdown.version.CHUNKER_VERSION` (indexes are
rebuilt).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from mnemo.markdown.frontmatter import front_matter_end
from mnemo.text.terms import CJK_CHARS, lazy_pattern

FENCE_MAX_FACTOR = 8
"""A fenced block over this many times the target is split at lines after all."""

_HEADING_RE = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE_RE = re.compile(r"[ \t]*(`{3,}|~{3,})(.*)$")
_LIST_RE = re.compile(r"[ \t]*(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)")
_CJK_SUB = lazy_pattern(globals(), "_CJK_SUB", f"[{CJK_CHARS}]+", "sub")

# Kinds of block.
_LINE, _HEADING, _FENCE, _SOLO = 0, 1, 2, 3
# Boundary strength before a block: the higher, the better a place to end a chunk.
_ANY_LINE, _LIST_ITEM, _PARAGRAPH = 1, 2, 3


@dataclass(frozen=True)
class Chunk:
    """A contiguous run of lines of one section."""

    start_line: int
    """1-based, inclusive, in the original file (front matter counted)."""
    end_line: int
    """1-based, inclusive."""
    heading_path: tuple[str, ...]
    """The enclosing headings, outermost first, without the ``#`` marks."""
    text: str
    """Lines ``start_line..end_line`` joined by ``\\n`` (a piece of the line for a split long line)."""
    content_hash: str
    """sha256 hex digest of :attr:`text`."""
    key: str
    """Stable id: depends on the path, heading path and content, not on line numbers."""


def approx_tokens(text: str) -> int:
    """A cheap token estimate: one per 4 characters, one per CJK character; at least 1 unless empty."""
    n = len(text)
    if n == 0:
        return 0
    if text.isascii():
        return (n + 3) // 4
    rest = len(_CJK_SUB("", text))
    return max(1, n - rest + (rest + 3) // 4)


def _make_chunk(path: str, start: int, end: int, heading_path: tuple[str, ...], text: str) -> Chunk:
    import hashlib  # here: OpenSSL is loaded by the first chunk, not by every importer of this module

    content_hash = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    key_src = path + "\x1f" + " > ".join(heading_path) + "\x1f" + content_hash
    key = hashlib.sha256(key_src.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return Chunk(start + 1, end + 1, heading_path, text, content_hash, key)


class _Chunker:
    def __init__(
        self, path: str, lines: list[str], target: int, overlap: float, count: Callable[[str], int]
    ) -> None:
        self.path = path
        self.lines = lines
        self.target = target
        self.overlap_tokens = overlap * target
        self.count = count
        self.out: list[Chunk] = []

    def emit(self, start: int, end: int, heading_path: tuple[str, ...]) -> None:
        self.out.append(
            _make_chunk(self.path, start, end, heading_path, "\n".join(self.lines[start : end + 1]))
        )

    def split_line(self, i: int, tokens: int, heading_path: tuple[str, ...]) -> None:
        """Cut one line longer than the target into pieces of about the target, at spaces if possible."""
        line = self.lines[i].strip()
        size = max(1, len(line) * self.target // max(tokens, 1))
        pos = 0
        while pos < len(line):
            end = min(len(line), pos + size)
            if end < len(line):
                space = line.rfind(" ", pos + size // 2, end)
                if space > pos:
                    end = space + 1
            piece = line[pos:end].strip()
            if piece:
                self.out.append(_make_chunk(self.path, i, i, heading_path, piece))
            pos = end

    def section(self, blocks: list[tuple[int, int, int, int, int]], heading_path: tuple[str, ...]) -> None:
        """Chunk one section given its blocks: (first line, last line, tokens, kind, strength)."""
        if sum(b[2] for b in blocks) <= self.target:
            self.emit(blocks[0][0], blocks[-1][1], heading_path)
            return
        target = self.target
        half = target / 2
        cs = 0  # first block of the current chunk (overlap included)
        new = 0  # first block of the current chunk that no earlier chunk holds
        size = 0  # tokens of blocks new..j-1
        j = 0
        n = len(blocks)
        while j < n:
            first, last, tokens, kind, _ = blocks[j]
            if kind == _SOLO:
                if j > new:
                    self.emit(blocks[cs][0], blocks[j - 1][1], heading_path)
                if first == last:
                    self.split_line(first, tokens, heading_path)
                else:
                    self.emit(first, last, heading_path)
                j += 1
                cs = new = j
                size = 0
                continue
            if size + tokens <= target or j == new:
                size += tokens
                j += 1
                continue
            # Blocks cs..j-1 are full: end the chunk before the block b (new < b <= j) with the strongest
            # boundary, the last of those, among those that keep the chunk at least half the target.
            best, best_strength, acc = j, -1, 0
            for b in range(new + 1, j + 1):
                acc += blocks[b - 1][2]
                if acc >= half and blocks[b][4] >= best_strength:
                    best, best_strength = b, blocks[b][4]
            self.emit(blocks[cs][0], blocks[best - 1][1], heading_path)
            # Overlap: trailing whole lines of that chunk, about overlap_tokens (not counted in the next
            # chunk's budget, so that the overlap does not shift its end off a paragraph boundary).
            start, carried = best, 0
            while start - 1 > cs and carried < self.overlap_tokens:
                prev = blocks[start - 1]
                if prev[3] != _LINE or carried + prev[2] > 1.5 * self.overlap_tokens:
                    break
                carried += prev[2]
                start -= 1
            cs, new, j = start, best, best
            size = 0
        if n > new:
            self.emit(blocks[cs][0], blocks[-1][1], heading_path)


def _comment_end(lines: list[str], start: int) -> int:
    """The last line of the HTML comment opened on line ``start``: the first holding ``-->`` (``start``
    itself included: ``<!-- x -->`` and ``<!-->`` close where they open), else the file's last line."""
    for k in range(start, len(lines)):
        if "-->" in lines[k]:
            return k
    return len(lines) - 1


def chunk_markdown(
    path: str,
    text: str,
    *,
    target_tokens: int = 256,
    overlap: float = 0.2,
    count_tokens: Callable[[str], int] = approx_tokens,
) -> list[Chunk]:
    """Split the Markdown ``text`` of the file at ``path`` into chunks, in file order."""
    if target_tokens < 1:
        raise ValueError("target_tokens must be at least 1")
    if not 0 <= overlap < 1:
        raise ValueError("overlap must be in [0, 1)")
    if not text or text.isspace():
        return []
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    fm_end = front_matter_end(lines)
    body = 0 if fm_end is None else fm_end + 1
    if body == 0 and lines[0].startswith("\ufeff"):
        lines[0] = lines[0][1:]

    chunker = _Chunker(path, lines, target_tokens, overlap, count_tokens)
    fence_max = FENCE_MAX_FACTOR * target_tokens
    comment_end = -1  # last line of the HTML comment being read (only lines starting "<" look for one)
    stack: list[tuple[int, str]] = []  # (level, text) of the enclosing headings
    heading_path: tuple[str, ...] = ()
    blocks: list[tuple[int, int, int, int, int]] = []
    strength = _PARAGRAPH
    n = len(lines)
    i = body
    while i < n:
        line = lines[i]
        if not line or line.isspace():
            strength = _PARAGRAPH
            i += 1
            continue
        head = line.lstrip()[:1]
        if head in "`~":
            m = None if i <= comment_end else _FENCE_RE.match(line)  # (in an HTML comment: text)
            if m is not None and not (m.group(1)[0] == "`" and "`" in m.group(2)):
                fence = m.group(1)
                end = i + 1
                while end < n:
                    close = lines[end].strip()
                    if close.startswith(fence) and close.strip(fence[0]) == "":
                        break
                    end += 1
                last = min(end, n - 1)
                while lines[last].isspace() or not lines[last]:
                    last -= 1
                tokens = sum(count_tokens(lines[k]) for k in range(i, last + 1))
                if tokens <= fence_max:
                    blocks.append((i, last, tokens, _FENCE if tokens <= target_tokens else _SOLO, _PARAGRAPH))
                else:  # pathological: cut it like plain lines
                    for k in range(i, last + 1):
                        if lines[k] and not lines[k].isspace():
                            t = count_tokens(lines[k])
                            blocks.append((k, k, t, _SOLO if t > target_tokens else _LINE, _ANY_LINE))
                strength = _PARAGRAPH
                i = end + 1
                continue
        elif head == "#":
            m = None if i <= comment_end else _HEADING_RE.match(line)
            if m is not None:
                if blocks and any(b[3] != _HEADING for b in blocks):
                    chunker.section(blocks, heading_path)
                    blocks = []
                level = len(m.group(1))
                while stack and stack[-1][0] >= level:
                    stack.pop()
                stack.append((level, (m.group(2) or "").strip()))
                heading_path = tuple(h for _, h in stack)
                # A heading with nothing under it yet (``# On-call`` straight before ``## Primary``)
                # is no chunk of its own: it opens the next section's first chunk.
                blocks.append((i, i, count_tokens(line), _HEADING, _PARAGRAPH))
                strength = _PARAGRAPH
                i += 1
                continue
        elif head == "<" and i > comment_end and line.lstrip().startswith("<!--"):
            comment_end = _comment_end(lines, i)  # its lines are text (this one too)
        tokens = count_tokens(line)
        if strength < _PARAGRAPH and head in "-*+0123456789" and _LIST_RE.match(line):
            strength = _LIST_ITEM
        blocks.append((i, i, tokens, _SOLO if tokens > target_tokens else _LINE, strength))
        strength = _ANY_LINE
        i += 1
    if blocks:
        chunker.section(blocks, heading_path)
    return chunker.out
