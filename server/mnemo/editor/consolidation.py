"""Consolidation: clusters of near-duplicate memory lines across files, and one merged line for each.

Pure: text in, clusters and line changes out (no I/O, no model; :mod:`mnemo.editor.consolidator` reads
the files and asks the model). A *memory line* is a content line of ``MEMORY.md`` or ``memory/**/*.md``
(not a heading, a fence, front matter or a line of fewer than :data:`MIN_TERMS` content words); its list
marker and a trailing ``<!-- session:… -->`` comment are kept apart from its body.

Two lines of different files are near-duplicates when their content words overlap (Jaccard) at least
``threshold``; lines inside two chunks the index finds near-duplicate by their vectors
(:func:`mnemo.editor.hygiene.near_duplicate_pairs`) need only :data:`LINKED_OVERLAP`. Clusters are the
connected groups that span at least two files.

Each cluster becomes one line: its text is the newest version (dated notes by their date, other files by
their last change) or what the chat model merged; it goes where the most durable copy is (MEMORY.md,
then a topic note, then the newest daily note) and the other copies are removed. Nothing is written
here: the result is a proposal the user reviews.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date

from mnemo.editor.memory_edits import TextEdit, delete_lines_edit
from mnemo.markdown.frontmatter import front_matter_end
from mnemo.markdown.structure import markdown_lines
from mnemo.secrets import utf16_col
from mnemo.text.terms import token_set
from mnemo.workspace.layout import MEMORY_FILES

MIN_TERMS = 3
"""Lines with fewer content words (a date, "- ok") are never clustered."""
LINKED_OVERLAP = 0.3
"""Word overlap enough for two lines inside chunks whose vectors are near-duplicates."""
_LINE = re.compile(r"^(\s*(?:[-*+]\s+(?:\[[ xX]\]\s+)?|\d+[.)]\s+)?)(.*?)(\s*<!--.*?-->\s*)?$")
_HEADING = re.compile(r"^ {0,3}#{1,6}(\s|$)")
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "from",
        "has",
        "have",
        "i",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "our",
        "so",
        "that",
        "the",
        "their",
        "this",
        "to",
        "was",
        "we",
        "were",
        "will",
        "with",
        "you",
    ]
)


@dataclass(frozen=True)
class MemoryLine:
    path: str
    line: int
    """1-based."""
    text: str
    prefix: str
    """Indentation and list marker (``- ``, ``1. ``, ``- [ ] ``)."""
    body: str
    suffix: str
    """A trailing HTML comment (a flushed fact's ``<!-- session:… turn:… -->``), with its spacing."""
    terms: frozenset[str] = field(compare=False, repr=False)
    day: date
    """When it was written: the note's date, else the file's last change."""
    rank: int
    """How durable its file is: 2 MEMORY.md, 1 another undated note, 0 a dated note."""

    @property
    def citation(self) -> str:
        return f"{self.path}#L{self.line}"


@dataclass(frozen=True)
class Merge:
    """One cluster's proposal: ``keep`` gets ``text`` as its body, the others are removed."""

    lines: tuple[MemoryLine, ...]
    keep: MemoryLine
    text: str
    how: str
    """``newest``: the newest version's text; ``model``: the chat model's merge."""
    note: str = ""
    """Why the model's merge was not used, when it was asked and failed."""

    @property
    def removed(self) -> list[MemoryLine]:
        return [m for m in self.lines if m != self.keep]

    @property
    def new_line(self) -> str:
        return self.keep.prefix + self.text + self.keep.suffix


@dataclass
class FileChange:
    replace: dict[int, str] = field(default_factory=dict)
    """1-based line -> its new text."""
    delete: set[int] = field(default_factory=set)


def content_terms(text: str) -> frozenset[str]:
    return frozenset(t for t in token_set(text) if t not in _STOPWORDS)


_LONE_CR = re.compile(r"\r(?!\n)")


def memory_lines(path: str, text: str, *, day: date, rank: int) -> list[MemoryLine]:
    """The memory lines of one file (``day``: its date or last change; ``rank``: see :class:`MemoryLine`).
    None from a file whose lines end with CR alone (an old Mac's): split at LF only, its lines would be
    one line, and a merge would delete facts it never compared."""
    out: list[MemoryLine] = []
    if _LONE_CR.search(text):
        return out
    lines = text.split("\n")
    # (a list item in fenced code or a commented-out draft is text, not a memory line)
    markdown = markdown_lines([lines[0].removeprefix("\ufeff"), *lines[1:]])
    end = front_matter_end(lines)
    for n in range(0 if end is None else end + 1, len(lines)):
        raw = lines[n]
        # A byte order mark is the line's, not its body's: kept before any new text. A CR line end is
        # neither (an editor's line has none): apply_change puts it back.
        bom = "\ufeff" if n == 0 and raw.startswith("\ufeff") else ""
        line = raw.removesuffix("\r")
        core = line[len(bom) :]
        if not markdown[n] or not core.strip() or _HEADING.match(core):
            continue
        m = _LINE.match(core)
        if m is None:
            continue
        body = m.group(2).strip()
        terms = content_terms(body)
        if len(terms) < MIN_TERMS:
            continue
        prefix, suffix = bom + m.group(1), m.group(3) or ""
        out.append(MemoryLine(path, n + 1, line, prefix, body, suffix, terms, day, rank))
    return out


def overlap(a: MemoryLine, b: MemoryLine) -> float:
    """Jaccard of the two lines' content words."""
    if not a.terms or not b.terms:
        return 0.0
    common = len(a.terms & b.terms)
    return common / (len(a.terms) + len(b.terms) - common)


def clusters(
    lines: Sequence[MemoryLine],
    threshold: float,
    linked: Iterable[tuple[Sequence[MemoryLine], Sequence[MemoryLine]]] = (),
) -> list[list[MemoryLine]]:
    """Groups of near-duplicate lines spanning two files or more, in file order; ``linked``: the lines
    of two chunks the index finds near-duplicate (compared at :data:`LINKED_OVERLAP`)."""
    index = {(m.path, m.line): i for i, m in enumerate(lines)}
    parent = list(range(len(lines)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def join(a: MemoryLine, b: MemoryLine) -> None:
        parent[root(index[(a.path, a.line)])] = root(index[(b.path, b.line)])

    postings: dict[str, list[int]] = {}
    for i, m in enumerate(lines):
        for term in m.terms:
            postings.setdefault(term, []).append(i)
    for i, m in enumerate(lines):
        seen = {j for term in m.terms for j in postings[term] if j > i and lines[j].path != m.path}
        for j in seen:
            if overlap(m, lines[j]) >= threshold:
                join(m, lines[j])
    for mine, theirs in linked:
        for a in mine:
            best = max(theirs, key=lambda b: overlap(a, b), default=None)
            if best is not None and best.path != a.path and overlap(a, best) >= LINKED_OVERLAP:
                join(a, best)
    groups: dict[int, list[MemoryLine]] = {}
    for i, m in enumerate(lines):
        groups.setdefault(root(i), []).append(m)
    found = [g for g in groups.values() if len({m.path for m in g}) > 1]
    return sorted(found, key=lambda g: (g[0].path, g[0].line))


def newest(cluster: Sequence[MemoryLine]) -> MemoryLine:
    """The latest version (by date; on the same day the more durable file, then the later line)."""
    return max(cluster, key=lambda m: (m.day, m.rank, m.path, m.line))


def home(cluster: Sequence[MemoryLine]) -> MemoryLine:
    """Where the merged line goes: the most durable copy (the newest among equals)."""
    return max(cluster, key=lambda m: (m.rank, m.day, m.path, m.line))


def durability(path: str, dated: bool) -> int:
    if path in MEMORY_FILES:
        return 2
    return 0 if dated else 1


def check_merged(merged: str, cluster: Sequence[MemoryLine]) -> str | None:
    """Why a model's merge is not usable (None: it is): one line, not empty, not much longer than the
    copies together, every content word of it found in some copy (nothing invented)."""
    text = merged.strip()
    if not text:
        return "the model gave no text"
    if "\n" in text:
        return "the model gave more than one line"
    if len(text) > 2 * sum(len(m.body) for m in cluster):
        return "the model's line is longer than the copies together"
    known = frozenset().union(*(m.terms for m in cluster))
    new = content_terms(text) - known
    if new:
        return f"the model added words no copy has: {', '.join(sorted(new)[:5])}"
    return None


def merged_body(text: str) -> str:
    """A model's answer as a line's body (no list marker, quotes or trailing comment)."""
    line = text.strip().strip('"').strip()
    m = _LINE.match(line)
    return (m.group(2) if m else line).strip()


def changes(merges: Sequence[Merge]) -> dict[str, FileChange]:
    out: dict[str, FileChange] = {}
    for merge in merges:
        if merge.new_line != merge.keep.text:
            out.setdefault(merge.keep.path, FileChange()).replace[merge.keep.line] = merge.new_line
        for m in merge.removed:
            out.setdefault(m.path, FileChange()).delete.add(m.line)
    return out


def apply_change(text: str, change: FileChange) -> str:
    """``text`` with the change's lines replaced (each keeps its CR line end) and deleted."""
    lines = text.split("\n")
    kept = [
        _same_end(change.replace[n], line) if n in change.replace else line
        for n, line in enumerate(lines, start=1)
        if n not in change.delete
    ]
    return "\n".join(kept)


def _same_end(new: str, old: str) -> str:
    return new + "\r" if old.endswith("\r") else new


def text_edits(path: str, text: str, change: FileChange) -> list[TextEdit]:
    """The same change as editor edits (0-based lines, UTF-16 columns), in document order."""
    lines = [line.removesuffix("\r") for line in text.split("\n")]  # (an editor's lines end before a CR)
    edits = [
        TextEdit(path, (n - 1, 0), (n - 1, utf16_col(lines[n - 1], len(lines[n - 1]))), new)
        for n, new in change.replace.items()
    ]
    runs: list[list[int]] = []
    for n in sorted(change.delete):  # a run of lines goes in one edit: the edits must not overlap
        if runs and runs[-1][1] == n - 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    edits += [delete_lines_edit(path, text, first, last) for first, last in runs]
    return sorted(edits, key=lambda e: (e.start, e.end))
