"""IndexSearch: the index part of the memory service's search, over one reader of the writer's index.

:class:`mnemo.memory.service.MemoryService` checks the query, applies pending edits and opens the index;
this takes the search's turn at the gate (:mod:`mnemo.memory.search_gate`: a few at once, the others in
order of arrival), holds one reader for the whole ranking, decides whether the query is compared with
vectors (not while none are embedded, nor with an index of another model's width) and says why in the
outcome's notes. A search cancelled while it waits for its turn raises
:class:`~mnemo.errors.SearchCancelled` instead of running.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

from mnemo.config import SearchSettings
from mnemo.embeddings import Embedder
from mnemo.errors import SearchCancelled
from mnemo.index.engine import IndexEngine
from mnemo.memory.background_vectors import PendingVectors
from mnemo.memory.notes import KEYWORD_ONLY_NOTE
from mnemo.memory.search_gate import SearchGate, search_slots
from mnemo.memory.status import IndexState, not_built
from mnemo.search.filters import SearchFilters
from mnemo.search.hybrid import HybridSearcher
from mnemo.search.results import SearchOutcome


@dataclass(frozen=True)
class CheckedSearch:
    """What :meth:`mnemo.memory.service.MemoryService.search` was asked, its input checked."""

    query: str
    max_results: int | None
    min_score: float | None
    sources: Sequence[str] | None
    today: date | None
    filters: SearchFilters | None
    one_per_file: bool | None
    """Only each file's best chunk (None: ``[search] one_per_file``)."""
    cancelled: threading.Event | None
    """Set by a caller that no longer wants the answer: a search still waiting for its turn is dropped."""


class IndexSearch:
    def __init__(
        self,
        embedder: Embedder,
        settings: SearchSettings,
        indexer: IndexEngine,
        vectors: PendingVectors,
        index_state: IndexState,
        *,
        english_only_vectors: bool,
    ) -> None:
        """``english_only_vectors``: the model is the bundled English-only one (CJK queries lean on BM25,
        ``cjk_vector_weight``)."""
        self.settings = settings
        self.indexer = indexer
        self.vectors = vectors
        self.index_state = index_state
        self.searcher = HybridSearcher(embedder, settings, english_only_vectors=english_only_vectors)
        self.gate = SearchGate(search_slots(settings.searches_at_once))
        """Searches let in at once, the others in order of arrival."""

    def run(self, ask: CheckedSearch, notes: list[str]) -> SearchOutcome:
        """Rank the open index for ``ask``; ``notes`` go first in the outcome's."""
        with self.gate:  # searches in order of arrival, a few at once
            if ask.cancelled is not None and ask.cancelled.is_set():
                raise SearchCancelled("search cancelled before its turn")
            with self.indexer.reading() as reader:
                if reader is None:
                    raise not_built(self.index_state)
                identity = reader.identity
                dims, mismatch = self.indexer.vector_dims(), self.indexer.mismatch_note()
                embedded, total = self.vectors.counts(reader) if dims > 0 else (0, 0)
                if dims > 0 and embedded < total:
                    notes.append(self.vectors.note(embedded, total))
                    if embedded == 0:  # nothing to compare a query vector with yet
                        dims = 0
                with self.vectors.searching():  # the embedding thread lets the query's embedding go first
                    outcome = self._searcher(ask.one_per_file).search_with_prior(
                        reader,
                        ask.query,
                        k=ask.max_results or self.settings.max_results,
                        dims=dims,
                        min_score=ask.min_score,
                        sources=ask.sources,
                        today=ask.today,
                        filters=ask.filters,
                    )
        outcome.notes.extend(notes)
        if mismatch:  # an index built for another model: searched as it is, never rebuilt by a read
            outcome.notes.append(mismatch)
        elif identity.dims == 0:
            outcome.notes.append(KEYWORD_ONLY_NOTE)
        return outcome

    def _searcher(self, one_per_file: bool | None) -> HybridSearcher:
        """The searcher, with ``one_per_file`` when a search asks otherwise than the settings (the
        settings as they are now, the query embeddings of the one searcher)."""
        if one_per_file is None or one_per_file == self.settings.one_per_file:
            return self.searcher
        return HybridSearcher(
            self.searcher.embedder,
            dataclasses.replace(self.settings, one_per_file=one_per_file),
            english_only_vectors=self.searcher.english_only_vectors,
            query_vectors=self.searcher.query_vectors,
        )
