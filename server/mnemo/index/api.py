"""What the rest of mnemo needs from an index engine: a READER for search and services (here), a WRITER
for the indexer (:mod:`mnemo.index.writer_api`, with the rows it takes). DuckDB
(:mod:`mnemo.index.reader`, :mod:`mnemo.index.store`) is the default engine; another one (PostgreSQL)
implements the same two protocols and passes the same contract tests
(``tests/unit/test_index_reader.py``). A search that only reads (``mnemo search`` alone) imports
this module and not the writer's.

Rules every engine keeps, so both rank alike (ranking stays in Python, :mod:`mnemo.search`):

- Rows are frozen dataclasses with named fields (never tuples read by position).
- Chunk ids are integers unique within one index generation; keys (:attr:`ChunkRecord.key`) are the
  chunker's stable keys and survive a rebuild, ids do not.
- Keyword scores are BM25 with k1 = 1.2, b = 0.75 over the chunk's ``terms`` (our tokenizer's words and
  CJK bigrams, whitespace-separated, Porter-stemmed), OR over the query terms; :class:`KeywordHit` also
  gives the IDF mass the chunk covers and the IDF mass of every query term (a term no chunk contains
  counts at the known terms' mean IDF). See :func:`mnemo.index.fts.search`.
- Vector distances are cosine distances (1 - cosine similarity) between unit vectors.
- A reader sees committed data only, one consistent generation for as long as it is held.

This module changes only additively (new optional methods or fields); it imports no engine.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # annotations only: a keyword one-shot search never loads NumPy
    import numpy as np

    from mnemo.index.feedback import Tally

from mnemo.workspace.layout import MEMORY_FILES  # the ``memory`` filter kind's files; re-exported


# -- what the index was built with -------------------------------------------------------------------------------
@dataclass(frozen=True)
class IndexIdentity:
    """What the index was built with. Another identity is searched as it is (keyword-only when the
    vectors are of another model) and replaced only by an explicit rebuild (``mnemo index``)."""

    provider: str
    model: str
    dims: int
    chunker: str


# -- rows ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class IndexCounts:
    """How much the index holds. ``embedded``/``pending``: chunks with / still without a vector; both 0
    in an index without vectors (keyword-only, dims 0)."""

    files: int
    chunks: int
    embedded: int = 0
    pending: int = 0

    def after_fill(self, filled: int) -> IndexCounts:
        """The counts once ``filled`` pending chunks got their vectors."""
        return IndexCounts(self.files, self.chunks, self.embedded + filled, self.pending - filled)


@dataclass(frozen=True)
class FileProblem:
    """A file indexed with a problem (too large, binary, invalid UTF-8, bad front matter)."""

    path: str
    problem: str


@dataclass(frozen=True)
class LastRetrieval:
    """The latest search that returned a chunk, with the score parts it had then."""

    query: str
    when: datetime
    vector: float | None
    text: float
    decay: float
    weight: float
    score: float
    rank: int

    @classmethod
    def from_fields(cls, fields: Sequence[object]) -> LastRetrieval:
        """From the engine's row of the retrieval (query, searched_at, vector, text, decay, weight,
        score, rank), each field as text or a value whose ``str`` parses back."""
        query, when, vector, text, decay, weight, score, rank = (
            str(v) if v is not None else None for v in fields
        )
        return cls(
            str(query),
            datetime.fromisoformat(str(when)),
            None if vector is None else float(vector),
            float(str(text)),
            float(str(decay)),
            float(str(weight)),
            float(str(score)),
            int(str(rank)),
        )


@dataclass(frozen=True)
class ChunkStats:
    """One chunk of a file with its retrieval statistics (hover insights and code lenses)."""

    key: str
    start_line: int
    end_line: int
    heading: str
    day: date | None
    times_retrieved: int
    last: LastRetrieval | None


@dataclass(frozen=True)
class ChunkRecord:
    """A chunk as search ranks it. ``embedding`` is set only when asked for (``with_vectors``) and the
    chunk has one; ``day`` is the daily note's date (None: evergreen)."""

    id: int
    key: str
    path: str
    source: str
    kind: str
    day: date | None
    start_line: int
    end_line: int
    heading: str
    text: str
    embedding: np.ndarray | None = field(default=None, compare=False)


@dataclass(frozen=True)
class VectorHit:
    """A nearest neighbour: chunk id and cosine distance to the query vector (smaller is nearer)."""

    chunk_id: int
    distance: float


@dataclass(frozen=True)
class KeywordHit:
    """A BM25 candidate: its score, the IDF mass of the query terms it contains, and the IDF mass of
    all the query's terms (the same for every hit of one query)."""

    chunk_id: int
    bm25: float
    covered: float
    total: float


class ChunkFilter(Protocol):
    """Which chunks a search may consider (:class:`mnemo.search.filters.SearchFilters` is one).

    ``kinds``: any of memory (MEMORY.md), topic (another evergreen note), evergreen, daily, snapshot,
    skill, session; ``tags``: all of them among the file's front-matter tags (lowercase); ``project``,
    ``type``: equal to the front matter's, case-insensitive; ``since``/``until``: inclusive bounds on
    the chunk's day, else the front matter's ``date`` (a file with neither is left out by a bound)."""

    @property
    def tags(self) -> tuple[str, ...]: ...
    @property
    def kinds(self) -> tuple[str, ...]: ...
    @property
    def since(self) -> date | None: ...
    @property
    def until(self) -> date | None: ...
    @property
    def project(self) -> str | None: ...
    @property
    def type(self) -> str | None: ...


# -- the reader ------------------------------------------------------------------------------------
class IndexReader(Protocol):
    """Questions about one consistent, committed generation of the index. Obtained from
    ``Indexer.reading()`` (a context manager) and valid only inside it; safe to use from the thread
    that opened it, never shared between threads."""

    @property
    def identity(self) -> IndexIdentity:
        """Provider, model, dims and chunker the index was built with (dims 0: no vectors)."""
        ...

    def counts(self) -> IndexCounts:
        """Files, chunks, and chunks with / without a vector."""
        ...

    def file_problems(self) -> list[FileProblem]:
        """Every indexed file that has a problem, sorted by path."""
        ...

    def chunk_stats(self, path: str) -> list[ChunkStats]:
        """The chunks of ``path`` ordered by start line, each with how often searches returned it and
        the latest such search (joined on the chunk key, so history survives rebuilds)."""
        ...

    def feedback_tallies(self, keys: Sequence[str]) -> dict[str, Tally]:
        """How the chat turns that used each of ``keys`` went (:mod:`mnemo.index.feedback`), for the keys
        that have feedback."""
        ...

    def records(self, ids: Sequence[int], *, with_vectors: bool = False) -> dict[int, ChunkRecord]:
        """Chunks by id (ids not in the index are left out); ``with_vectors``: their embeddings too."""
        ...

    def vectors(self, ids: Sequence[int]) -> dict[int, np.ndarray]:
        """Float32 embeddings by chunk id, for the ids that have one."""
        ...

    def chunks_of(self, path: str, *, with_vectors: bool = False) -> list[ChunkRecord]:
        """The chunks of one file, by start line (``with_vectors``: with their vectors, where they have
        one): a single file's near-duplicates without every chunk's vector."""
        ...

    def embedded_chunks(self, source: str) -> list[ChunkRecord]:
        """Every chunk of ``source`` (e.g. ``"memory"``) that has a vector, with it, ordered by path and
        start line (near-duplicate diagnostics). Empty in an index without vectors."""
        ...

    def nearest_in_other_files(
        self, source: str, comparable: Callable[[ChunkRecord], bool]
    ) -> list[tuple[ChunkRecord, ChunkRecord, float]]:
        """For each chunk of ``source`` that has a vector and that ``comparable`` keeps: the kept chunk of
        another file most similar to it by cosine, and that cosine (a chunk with none is left out), by
        path and start line. The workspace near-duplicate pass: every chunk against every other, without
        copying the writer's vectors (:mod:`mnemo.index.nearest_across`)."""
        ...

    def nearest(
        self, vector: np.ndarray, limit: int, *, within: Sequence[int] | None = None
    ) -> list[VectorHit]:
        """Up to ``limit`` chunks nearest to ``vector`` by cosine distance, nearest first; ``within``:
        only among those chunk ids (exact). Chunks without a vector are never returned."""
        ...

    def keyword_top(
        self, terms: Sequence[str], limit: int, *, within: Sequence[int] | None = None
    ) -> list[KeywordHit]:
        """The best ``limit`` chunks by BM25 for query ``terms`` (:func:`mnemo.text.terms.query_terms`),
        best first; ``within``: drawn only from those chunk ids. Empty when no term is known."""
        ...

    def keyword_scores(self, terms: Sequence[str], ids: Sequence[int]) -> list[KeywordHit]:
        """BM25 of exactly the chunks ``ids`` that contain a query term (best first, no limit)."""
        ...

    def allowed_ids(self, chunk_filter: ChunkFilter) -> Sequence[int]:
        """The ids of every chunk ``chunk_filter`` lets a search consider (for ``within``)."""
        ...


__all__ = [
    "MEMORY_FILES",
    "ChunkFilter",
    "ChunkRecord",
    "ChunkStats",
    "FileProblem",
    "IndexCounts",
    "IndexIdentity",
    "IndexReader",
    "KeywordHit",
    "LastRetrieval",
    "VectorHit",
]
