"""Which ranked hits a search returns, and in what order: the cut-off, MMR and sources.

- cut-off: an explicit ``min_score`` from the caller is an absolute floor (as requested); otherwise the
  calibrated rule of :func:`mnemo.search.ranking.calibrated_cut` (relative to the best hit with real
  evidence, the settings' ``min_score`` as a floor that never removes that hit).
- MMR over the kept hits, keeping the newer of near-duplicates (:func:`mnemo.search.ranking.mmr_order`).
- session transcripts (``sessions/*.jsonl``) after notes, unless the search asks only for them.
- ``one_per_file``: only the best chunk of each file (before the cut-off, so ``k`` files can come back).

Each hit that moved gets a reason (``similar to #2``, ``session transcript: ranked below notes``).
:func:`order` is the same without the cut-off: what the usefulness prior (:mod:`mnemo.search.usefulness`)
runs again after it changed the scores.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

from mnemo.config import SearchSettings
from mnemo.search import lines, ranking
from mnemo.text.terms import token_set

if TYPE_CHECKING:
    from mnemo.search.results import SearchHit

SESSIONS = "sessions"
BELOW_NOTES = (SESSIONS, "archive")
"""Sources ranked after notes: transcripts and session archives quote questions word for word."""


def cut(
    hits: list[SearchHit], s: SearchSettings, *, min_score: float | None, floor: float
) -> list[SearchHit]:
    """``hits`` sorted best first -> the ones above the cut-off."""
    if min_score is not None:
        return [h for h in hits if h.parts.score >= min_score]
    keep = ranking.calibrated_cut(
        [h.parts.score for h in hits], [h.parts.evidence for h in hits], s.relative_min_score, floor
    )
    return [hits[i] for i in keep]


def diversify(hits: list[SearchHit], s: SearchSettings, k: int) -> list[SearchHit]:
    """Up to ``k`` of ``hits`` (sorted best first) in MMR order, with a reason on each hit MMR moved down."""
    if not s.mmr or len(hits) < 2:
        return hits[:k]
    # Redundancy between the lines that answer the query, not whole chunks (mnemo.search.lines).
    tokens = [h.focus.tokens if h.focus is not None else token_set(h.snippet) for h in hits]

    def similarity(i: int, j: int) -> float:
        a, b = hits[i].focus, hits[j].focus
        overlap = (
            lines.redundancy(a, b)
            if a is not None and b is not None
            else ranking.jaccard(tokens[i], tokens[j])
        )
        return overlap if overlap >= lines.REDUNDANT else 0.0

    similarity = functools.cache(similarity)  # one memo for MMR and the reasons below
    ages = [h.parts.age_days for h in hits]
    order = ranking.mmr_order([h.parts.score for h in hits], tokens, s.mmr_lambda, k, ages, similarity)
    for rank, i in enumerate(order):
        earlier = order[:rank]
        if any(j > i for j in earlier):  # a lower-scored hit was placed above it
            j = max(earlier, key=lambda j: similarity(i, j))
            overlap = similarity(i, j)
            if overlap > 0:
                hits[i].parts.reasons.append(f"similar to #{order.index(j) + 1} (overlap {overlap:.2f})")
            continue
        older = [
            j
            for j in range(i)
            if j not in earlier
            and ages[i] is not None
            and ages[j] is not None
            and ages[i] < ages[j]  # type: ignore[operator]
            and similarity(j, i) >= ranking.NEAR_DUPLICATE
        ]
        if older:
            hits[i].parts.reasons.append(f"newer version of {hits[older[0]].citation}: picked first")
    return [hits[i] for i in order]


def _given_here(reason: str) -> bool:
    """A reason :func:`order` gives (a second ordering drops the first one's before giving its own)."""
    return reason.startswith(
        ("similar to #", "session transcript: ranked below notes", "session archive: ranked")
    ) or reason.endswith(": picked first")


def best_per_file(hits: list[SearchHit]) -> list[SearchHit]:
    """The first (best) hit of each file from ``hits`` sorted best first, saying how many it stood for."""
    kept: dict[str, SearchHit] = {}
    counts: dict[str, int] = {}
    for hit in hits:
        kept.setdefault(hit.path, hit)
        counts[hit.path] = counts.get(hit.path, 0) + 1
    for path, hit in kept.items():
        if counts[path] > 1:
            hit.parts.reasons.append(f"best of {counts[path]} chunks of this file (one per file)")
    return list(kept.values())


def order(
    hits: list[SearchHit],
    s: SearchSettings,
    k: int,
    keep: Callable[[list[SearchHit]], list[SearchHit]] | None = None,
) -> list[SearchHit]:
    """Up to ``k`` of ``hits`` (sorted best first): notes by MMR, then transcripts; ``keep``: the
    cut-off applied to each part first."""
    kept = keep or (lambda part: part)
    for hit in hits:
        hit.parts.reasons[:] = [r for r in hit.parts.reasons if not _given_here(r)]
    notes = [h for h in hits if h.source not in BELOW_NOTES]
    if s.sessions_below_notes and notes and len(notes) < len(hits):
        # Each part is cut against its own best hit: a transcript that repeats the question word for word
        # must not raise the bar for the notes that answer it.
        chosen = diversify(kept(notes), s, k)
        sessions = [h for h in hits if h.source in BELOW_NOTES]
        sessions = diversify(kept(sessions), s, k - len(chosen))
        for h in sessions:
            what = "session archive" if h.source == "archive" else "session transcript"
            h.parts.reasons.append(f"{what}: ranked below notes")
        chosen += sessions
    else:
        chosen = diversify(kept(hits), s, k)
    for rank, hit in enumerate(chosen, start=1):
        hit.parts.mmr_rank = rank
    return chosen


def select(
    hits: list[SearchHit], s: SearchSettings, k: int, *, min_score: float | None, floor: float
) -> list[SearchHit]:
    if s.one_per_file:
        hits = best_per_file(hits)
    return order(hits, s, k, lambda part: cut(part, s, min_score=min_score, floor=floor))
