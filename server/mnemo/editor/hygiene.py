"""Memory hygiene: problems in memory files, computed from text (and index vectors) alone.

Pure functions: no I/O, no index access, no editor types. Ranges are 0-based lines with UTF-16 columns
(what editors use: a line ends at LF, CRLF or CR alone, :func:`mnemo.memory.reading.editor_lines`);
:class:`Problem` carries what a front end needs to show and fix each one.

Checks:
- ``secret``: a secret in the text (rule id as code; see :mod:`mnemo.secrets`);
- ``injection-budget``: MEMORY.md lines that would be cut when it is injected into a session;
- ``near-duplicate``: a chunk whose embedding is within ``threshold`` cosine of a chunk in another file
  (:func:`near_duplicate_pairs` lists every such pair, for consolidation);
- ``broken-link``: ``[text](memory/x.md)`` or ``[[x]]`` pointing at a memory file that does not exist.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence, Set
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from mnemo.index.nearest_across import nearest_across_vectors
from mnemo.markdown.structure import markdown_lines
from mnemo.memory.reading import LINE_END, editor_lines
from mnemo.secrets import SecretFinding, scan_text, utf16_col
from mnemo.workspace.layout import MEMORY_FILES

MIN_DUPLICATE_CHARS = 40
"""Chunks shorter than this (a lone heading, one word) are never reported as duplicates."""

Position = tuple[int, int]  # (0-based line, UTF-16 column)


@dataclass(frozen=True)
class Related:
    path: str
    start_line: int  # 1-based, inclusive
    end_line: int
    message: str


@dataclass(frozen=True)
class Problem:
    kind: str  # secret | injection-budget | near-duplicate | broken-link
    code: str
    message: str
    severity: str  # error | warning | information | hint
    start: Position
    end: Position
    related: tuple[Related, ...] = ()
    data: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class ChunkVector:
    path: str
    start_line: int  # 1-based, inclusive
    end_line: int
    heading: str
    text: str
    vector: np.ndarray


def _end_of(lines: Sequence[str], line: int) -> Position:
    return line, utf16_col(lines[line], len(lines[line]))


# -- secrets ---------------------------------------------------------------------------------------
def secret_problems(text: str, findings: Sequence[SecretFinding] | None = None) -> list[Problem]:
    lines = editor_lines(text)
    out = []
    for f in scan_text(text) if findings is None else findings:
        out.append(
            Problem(
                kind="secret",
                code=f.rule_id,
                message=f"possible secret ({f.description}): {f.preview}",
                severity="error",
                start=(f.line, utf16_col(lines[f.line], f.start_col)),
                end=(f.end_line, utf16_col(lines[f.end_line], f.end_col)),
                data={"start": f.start, "end": f.end, "ruleId": f.rule_id},
            )
        )
    return out


# -- injection budget ------------------------------------------------------------------------------
def injected_line_count(text: str, budget_chars: int) -> int:
    """How many whole lines of ``text`` fit in ``budget_chars`` (each line counts its line end).

    This is the truncation rule for injecting MEMORY.md: whole lines are kept while they fit."""
    used = 0
    lines = editor_lines(text)
    ends = LINE_END.findall(text)  # (one fewer than the lines)
    for i, line in enumerate(lines):
        used += len(line) + (len(ends[i]) if i < len(ends) else 0)
        if used > budget_chars:
            return i
    return len(lines)


def budget_problems(path: str, text: str, budget_chars: int) -> list[Problem]:
    if path not in MEMORY_FILES:
        return []
    lines = editor_lines(text)
    kept = injected_line_count(text, budget_chars)
    last = len(lines) - 1
    while last >= kept and not lines[last].strip():
        last -= 1  # trailing blank lines are not content lost
    if last < kept:
        return []
    return [
        Problem(
            kind="injection-budget",
            code="injection-budget",
            message=(
                f"{path} is {len(text)} characters, over the injection budget of {budget_chars} "
                f"(memory.injection_budget_chars): lines {kept + 1}-{last + 1} are not injected"
            ),
            severity="warning",
            start=(kept, 0),
            end=_end_of(lines, last),
            data={"firstCutLine": kept + 1, "lastLine": last + 1},
        )
    ]


# -- near-duplicates -------------------------------------------------------------------------------
class VectorSpace:
    """Each memory chunk long enough to compare with its most similar chunk in another file, for a pass
    over every file: worked out once, every chunk against every other, by the index on the writer's
    vectors (:meth:`mnemo.index.api.IndexReader.nearest_in_other_files`) or from given vectors
    (:meth:`of`). One file alone asks the index instead (:class:`mnemo.editor.neighbours.IndexNeighbours`)."""

    def __init__(self, pairs: Sequence[tuple[ChunkVector, ChunkVector, float]]) -> None:
        self.by_path: dict[str, list[tuple[ChunkVector, ChunkVector, float]]] = {}
        for pair in pairs:
            self.by_path.setdefault(pair[0].path, []).append(pair)

    @classmethod
    def of(cls, chunks: Sequence[ChunkVector]) -> VectorSpace:
        """The pairs of ``chunks`` long enough to compare, from their own vectors."""
        usable = [c for c in chunks if len(c.text.strip()) >= MIN_DUPLICATE_CHARS]
        paths: dict[str, int] = {}
        groups = {i: paths.setdefault(c.path, len(paths)) for i, c in enumerate(usable)}
        nearest = nearest_across_vectors({i: c.vector for i, c in enumerate(usable)}, groups)
        return cls([(usable[i], usable[j], cosine) for i, (j, cosine) in sorted(nearest.items())])

    def nearest_other(self, path: str) -> list[tuple[ChunkVector, ChunkVector, float]]:
        """(chunk of ``path``, its most similar chunk in another file, cosine) for each chunk of ``path``."""
        return list(self.by_path.get(path, ()))


class Neighbours(Protocol):
    """Who answers "each chunk of this file and its nearest chunk elsewhere": :class:`VectorSpace` for a
    workspace pass, :class:`mnemo.editor.neighbours.IndexNeighbours` for one file."""

    def nearest_other(self, path: str) -> list[tuple[ChunkVector, ChunkVector, float]]: ...


def duplicate_problems(path: str, space: Neighbours, threshold: float, text: str) -> list[Problem]:
    """Chunks of ``path`` whose nearest chunk in another file has cosine >= ``threshold``."""
    lines = editor_lines(text)
    out = []
    for chunk, other, sim in space.nearest_other(path):
        if sim < threshold or chunk.end_line > len(lines):
            continue
        where = f"{other.path}#L{other.start_line}-L{other.end_line}"
        out.append(
            Problem(
                kind="near-duplicate",
                code="near-duplicate",
                message=f"near-duplicate of {where} (similarity {sim:.2f})",
                severity="information",
                start=(chunk.start_line - 1, 0),
                end=_end_of(lines, chunk.end_line - 1),
                related=(Related(other.path, other.start_line, other.end_line, "the other copy"),),
                data={
                    "otherPath": other.path,
                    "otherStartLine": other.start_line,
                    "otherEndLine": other.end_line,
                    "startLine": chunk.start_line,
                    "endLine": chunk.end_line,
                    "similarity": round(sim, 4),
                },
            )
        )
    return out


def similarities(rows: Sequence[ChunkVector], columns: Sequence[ChunkVector]) -> np.ndarray:
    """Cosine similarity of every chunk of ``rows`` with every chunk of ``columns``."""
    a = _normalised([c.vector for c in rows])
    b = _normalised([c.vector for c in columns])
    return np.asarray(a @ b.T)


def near_duplicate_pairs(
    chunks: Sequence[ChunkVector], threshold: float
) -> list[tuple[ChunkVector, ChunkVector, float]]:
    """Every pair of chunks in different files whose cosine is at least ``threshold``, once each (what
    ``mnemo consolidate`` looks into for near-duplicate lines)."""
    usable = [c for c in chunks if len(c.text.strip()) >= MIN_DUPLICATE_CHARS]
    if len(usable) < 2:
        return []
    sims = similarities(usable, usable)
    out = []
    for i, j in zip(*np.nonzero(np.triu(sims >= threshold, k=1)), strict=True):
        if usable[i].path != usable[j].path:
            out.append((usable[i], usable[j], float(sims[i, j])))
    return out


def _normalised(vectors: Sequence[np.ndarray]) -> np.ndarray:
    """The vectors stacked as float32 rows of norm 1 (zero rows stay zero), normalised in place: one
    matrix at a time (np.linalg.norm and a division made two more, ~22 MB at 2,000 notes)."""
    m = np.array(vectors, dtype=np.float32)
    norms = np.sqrt(np.einsum("ij,ij->i", m, m))
    norms[norms == 0] = 1
    m /= norms[:, None]
    return m


# -- links -----------------------------------------------------------------------------------------
_MD_LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_WIKI_LINK = re.compile(r"\[\[([^\]\n|#]+)(?:#[^\]\n|]*)?(?:\|[^\]\n]*)?\]\]")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def resolve_link(path: str, target: str, known: Set[str]) -> str | None:
    """The workspace path a Markdown link points at, when it is a memory file link; else None."""
    target = target.split("#", 1)[0].split("?", 1)[0]
    if not target.lower().endswith(".md") or _SCHEME.match(target) or target.startswith("/"):
        return None
    from urllib.parse import unquote

    target = unquote(target)
    here = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
    from_root = posixpath.normpath(target)
    for candidate in (here, from_root):
        if candidate in known:
            return candidate
    return here


def resolve_wikilink(name: str, known: Set[str]) -> str | None:
    """The memory file a ``[[name]]`` link means (by path or by file name), or None when none exists."""
    name = name.strip()
    stem = name[:-3] if name.lower().endswith(".md") else name
    for candidate in (f"{stem}.md", f"memory/{stem}.md", f"skills/{stem}/SKILL.md"):
        if candidate in known:
            return candidate
    for candidate in known:
        if posixpath.basename(candidate)[:-3] == posixpath.basename(stem):
            return candidate
    return None


def link_problems(path: str, text: str, known: Set[str]) -> list[Problem]:
    """Links to memory files that do not exist (``known``: every memory file in the workspace)."""
    out = []
    lines = editor_lines(text)
    for n, (line, markdown) in enumerate(zip(lines, markdown_lines(lines), strict=True)):
        if not markdown or "[" not in line:  # (a link in fenced code or an HTML comment is text)
            continue
        for m in _MD_LINK.finditer(line):
            resolved = resolve_link(path, m.group(1), known)
            if resolved is not None and resolved not in known:
                out.append(_broken(n, line, m.start(1), m.end(1), m.group(1), resolved))
        for m in _WIKI_LINK.finditer(line):
            if resolve_wikilink(m.group(1), known) is None:
                out.append(_broken(n, line, m.start(1), m.end(1), m.group(1), None))
    return out


def _broken(n: int, line: str, start: int, end: int, target: str, resolved: str | None) -> Problem:
    where = f" ({resolved})" if resolved and resolved != target else ""
    return Problem(
        kind="broken-link",
        code="broken-link",
        message=f"link to a memory file that does not exist: {target}{where}",
        severity="warning",
        start=(n, utf16_col(line, start)),
        end=(n, utf16_col(line, end)),
        data={"target": target},
    )


# -- everything --------------------------------------------------------------------------------------
def file_problems(
    path: str,
    text: str,
    *,
    known: Set[str],
    budget_chars: int,
    vectors: Neighbours | None = None,
    duplicate_threshold: float = 1.01,
) -> list[Problem]:
    """All problems of one memory file, sorted by position (near-duplicates only with ``vectors``)."""
    problems = [
        *secret_problems(text),
        *budget_problems(path, text, budget_chars),
        *link_problems(path, text, known),
        *(duplicate_problems(path, vectors, duplicate_threshold, text) if vectors is not None else ()),
    ]
    return sorted(problems, key=lambda p: (p.start, p.kind))
