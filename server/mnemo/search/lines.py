"""The line of a chunk that answers the query: supersede and MMR decisions at the grain of one statement.

A chunk of a daily note holds several unrelated lines ("- Reviewed Dana's pull request", "- Decision: the
billing database will be MongoDB", "- Lunch with Hiro"), so two chunks compared whole are similar when their
filler is, and dissimilar when only their answers agree. The decisions that ask "do these two hits say the
same thing?" therefore compare each chunk's *focus*: its content line (not a heading) that covers the most
query-term weight, the weight of a term being its IDF over the candidates' lines (``log(1 + N / df)``: "the"
and "we" count little, "billing" and "offsite" much).

- supersede (:func:`updates`): a newer focus line updates an older one when it covers every query term the
  older covers, the older answers the query at all (``ANSWERING`` x the best line's weight) and the lines
  themselves share words (``LINE_OVERLAP``). Strict containment, because the term that tells two entities
  apart ("beacon" in "who leads on-call for Beacon") is as frequent among the candidates as "the".
  "Final decision: we are moving the billing database to PostgreSQL" updates "Decision: the billing
  database will be MongoDB"; for "what did we decide about the payments database" a newer billing decision
  (no "payments") does not, nor does the Atlas on-call line (no "offsite") for "where is the Atlas team
  offsite". How relevant the whole chunks are does not matter: filler lines around the update must not
  keep it below the version it replaces.
- MMR (:func:`redundancy`): a hit is redundant with a chosen one by the overlap of their focus lines, and
  not at all when it covers a query term the chosen one does not ("Atlas public API: ... 300 requests a
  minute" after "Delta public API: ... 400 requests a minute", for a question about Atlas). Two notes whose
  answers differ are not penalised for sharing a template of filler lines; repeated filler is.
- A chunk whose best line is tied with another (two lines each holding the one query word) has an
  ambiguous focus: it takes part in no update (which of its lines would the newer one replace?).

A chunk with no line sharing a query term has no focus, unless it is a single line (that line then); it
is in no update except as a near-identical single line (``SAME_LINE``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mnemo.search.ranking import jaccard
from mnemo.text.terms import token_set

ANSWERING = 0.5
"""Share of the best line's query-term weight an older line must cover for an update to replace it."""
LINE_OVERLAP = 0.2
"""Token Jaccard of two focus lines at or above which they can be versions of one statement ("Decision: the
billing database will be MongoDB" / "Final decision: we are moving the billing database to PostgreSQL": 0.24,
camel-case parts counted)."""
REDUNDANT = 0.5
"""MMR counts an overlap only from here: repeated lines are redundant, two passages on one topic are not."""
LINE_CACHE = 32_768
"""Lines whose terms are remembered across searches (the same notes come back again and again)."""
CHUNK_CACHE = 4_096
"""Chunks whose content lines are remembered across searches."""
SAME_LINE = 0.6
"""Token Jaccard above which two lines that share no query term still say the same thing."""


@dataclass(frozen=True)
class Focus:
    offset: int
    """The (first) best line's index in the chunk text (0-based)."""
    matched: frozenset[str]
    """The query terms the best line(s) contain."""
    tokens: frozenset[str]
    """Every term of the (first) best line."""
    ties: tuple[frozenset[str], ...] = ()
    """Every term of each other line that covers as much query-term weight (the chunk's answer is ambiguous)."""

    @property
    def ambiguous(self) -> bool:
        return bool(self.ties)


@functools.lru_cache(maxsize=LINE_CACHE)
def _line_terms(line: str) -> frozenset[str]:
    return token_set(line)


@functools.lru_cache(maxsize=CHUNK_CACHE)
def content_lines(text: str) -> tuple[tuple[int, frozenset[str]], ...]:
    """(offset, terms) of each non-blank, non-heading line of a chunk (kept for recent chunks: a search
    asks for some 45 candidates' lines, and the same chunks come back search after search)."""
    out = []
    for i, line in enumerate(text.split("\n")):  # (a chunk's lines: not splitlines, which ends one at U+2028)
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            out.append((i, _line_terms(stripped)))
    return tuple(out)


def term_weights(
    query: frozenset[str], chunks: Iterable[Sequence[tuple[int, frozenset[str]]]]
) -> dict[str, float]:
    """IDF of each query term over all the candidates' lines (terms no line contains are left out)."""
    df = dict.fromkeys(query, 0)
    n = 0
    for lines in chunks:
        for _, terms in lines:
            n += 1
            for t in query & terms:
                df[t] += 1
    return {t: math.log(1 + n / d) for t, d in df.items() if d}


def focus(lines: Sequence[tuple[int, frozenset[str]]], weights: dict[str, float]) -> Focus | None:
    """The line covering the most query-term weight (with the lines tied with it); a lone line stands as it is."""
    query = frozenset(weights)
    scored = []
    best = 0.0
    for offset, terms in lines:
        common = terms & query
        covered = sum(map(weights.__getitem__, common)) if common else 0.0
        best = max(best, covered)
        scored.append((covered, offset, terms, common))
    if best <= 0:
        if len(lines) == 1:
            return Focus(lines[0][0], frozenset(), lines[0][1])
        return None
    tied = [(offset, terms, common) for covered, offset, terms, common in scored if covered >= best - 1e-9]
    offset, terms, _ = tied[0]
    matched = frozenset().union(*(common for _, _, common in tied))
    return Focus(offset, matched, terms, tuple(t for _, t, _ in tied[1:]))


def redundancy(a: Focus, b: Focus) -> float:
    """How much of what ``a`` says about the query ``b`` already says (MMR): 0 when ``a`` covers a query term
    ``b`` does not, else the token overlap of their lines (the least one of ``a``'s tied lines has)."""
    if not a.matched <= b.matched:
        return 0.0
    mine, theirs = (a.tokens, *a.ties), (b.tokens, *b.ties)
    return min(max(jaccard(x, y) for y in theirs) for x in mine)


def mass(f: Focus | None, weights: dict[str, float]) -> float:
    """The query-term weight a focus line covers."""
    return 0.0 if f is None else sum(weights[t] for t in f.matched)


def updates(old: Focus | None, new: Focus | None, weights: dict[str, float], floor: float = 0.0) -> bool:
    """Whether ``new``'s line can be a later version of ``old``'s (see the module docstring); ``old``'s line
    must cover at least ``floor`` of query-term weight (it answers the query at all)."""
    if old is None or new is None or old.ambiguous or new.ambiguous:
        return False
    if not old.matched:
        return jaccard(old.tokens, new.tokens) >= SAME_LINE
    return (
        old.matched <= new.matched
        and mass(old, weights) >= floor
        and jaccard(old.tokens, new.tokens) >= LINE_OVERLAP
    )


def update_floor(foci: Iterable[Focus | None], weights: dict[str, float]) -> float:
    """The least query-term weight a line must cover to take part in an update: ``ANSWERING`` x the best."""
    return ANSWERING * max((mass(f, weights) for f in foci), default=0.0)
