"""The usefulness prior: feedback on the turns that used a chunk, as a bounded factor on its score.

Applied after a search ranked its results (:meth:`mnemo.memory.feedback.FeedbackBook.rerank`): each
result's score is multiplied by :func:`mnemo.search.ranking.usefulness_factor` (at most x1.5 and at least
x0.5 at the largest weight; a chunk without feedback keeps its score), then the results are ordered
again as a search orders them (MMR, transcripts after notes; :func:`mnemo.search.select.order`), without
a second cut-off: nothing without evidence was there to begin with.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from mnemo.config import SearchSettings
from mnemo.index.api import IndexReader
from mnemo.search import ranking, select

if TYPE_CHECKING:
    from mnemo.index.feedback import Tally
    from mnemo.search.results import SearchHit, SearchOutcome

OVERFETCH = 2
"""With the prior on, a search ranks this many times more results, and keeps the best after the prior."""


def fetch_count(settings: SearchSettings, k: int) -> int:
    """How many results to rank for ``k`` wanted (more with the prior on: it may lift one in)."""
    return min(200, k * OVERFETCH) if settings.usefulness_weight > 0 else k


def apply_prior(reader: IndexReader, outcome: SearchOutcome, settings: SearchSettings, k: int) -> None:
    """The usefulness prior on ``outcome`` (in place, from ``reader``'s tallies); keeps its best ``k``.
    Used after every search, by :class:`mnemo.memory.service.MemoryService` and the read-only path."""
    if settings.usefulness_weight <= 0 or not outcome.results:
        outcome.results = outcome.results[:k]
        return
    found = reader.feedback_tallies([hit.key for hit in outcome.results])
    outcome.results = rerank(outcome.results, found, settings, k)
    outcome.weights["usefulness"] = settings.usefulness_weight


def rerank(hits: list[SearchHit], votes: Mapping[str, Tally], s: SearchSettings, k: int) -> list[SearchHit]:
    """``hits`` (a search's results, in order) with the prior applied, ordered again, the best ``k``."""
    moved = False
    for hit in hits:
        found = votes.get(hit.key)
        if found is None:
            continue
        prior = ranking.usefulness_prior(found.weighted_useful, found.weighted_not_useful)
        factor = ranking.usefulness_factor(prior, s.usefulness_weight)
        if factor == 1.0:
            continue
        hit.parts.score = ranking.bounded(hit.parts.score * factor)
        hit.parts.reasons.append(f"feedback: useful {found.useful} / not {found.not_useful}, x{factor:.3f}")
        moved = True
    if not moved:
        return hits[:k]
    ranked = sorted(hits, key=lambda h: h.parts.score, reverse=True)
    return select.order(ranked, s, k)
