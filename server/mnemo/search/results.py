"""What a search returns: the outcome, its hits and each hit's score parts.

Apart from the searcher (:mod:`mnemo.search.hybrid`) so that whoever only reads results (the command
line printing a running server's answer, :mod:`mnemo.memory.codec`) loads no ranking code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mnemo.search.lines import Focus


@dataclass
class ScoreParts:
    vector: float | None
    text: float
    bm25: float
    decay: float
    weight: float
    score: float
    mmr_rank: int = 0
    age_days: float | None = None
    superseded: bool = False
    boost: float = 0.0
    """What MEMORY.md's weight added (bounded by ``ranking.MEMORY_BOOST_CAP``)."""
    evidence: bool = True
    """Real keyword or vector evidence (hits without it are never returned by the calibrated cut)."""
    line: int | None = None
    """The chunk's line that answers the query (its focus, :mod:`mnemo.search.lines`), when one does."""
    reasons: list[str] = field(default_factory=list)
    """Why the hit moved: superseded by / supersedes, similar to #n, boost, ranked below notes."""


@dataclass
class SearchHit:
    chunk_id: int
    key: str
    path: str
    source: str
    start_line: int
    end_line: int
    heading: str
    snippet: str
    parts: ScoreParts
    focus: Focus | None = None
    """The line that answers the query (MMR compares these, not whole chunks)."""

    @property
    def citation(self) -> str:
        return f"{self.path}#L{self.start_line}-L{self.end_line}"


@dataclass
class SearchOutcome:
    results: list[SearchHit]
    mode: str  # "hybrid" or "keyword"
    provider: str
    model: str
    query: str
    notes: list[str] = field(default_factory=list)
    weights: dict[str, Any] = field(default_factory=dict)
    """The weights this search actually used (vector/text after the CJK rule, decay, MMR, cut-off)."""
