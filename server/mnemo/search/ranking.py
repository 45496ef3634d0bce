"""The parts of a hybrid score, each a small pure function so it can be tested and explained.

- text: BM25 from the fts tables, normalised into [0, 1] without reference to other hits: half is the
  IDF mass of the query terms the chunk covers (term coverage, OR semantics), half is the BM25 score
  saturated against the score of one occurrence of every query term. A stronger match scores higher;
  nothing is mapped to 1.0 just for matching.
- vector: 1 - cosine distance, clipped to [0, 1].
- decay: temporal decay for dated files (evergreen files exempt). ``supersede`` (default) never buries a
  unique match: age only nudges near-ties (at most ``TIE_WEIGHT``), a dated memory that a newer memory
  updates (decided on the lines that answer the query, :mod:`mnemo.search.lines`) is demoted, and queries that ask about recent events weigh age more (with a floor).
  ``multiplicative`` is the reference system's plain ``exp(-ln2/halfLife x age)``.
- MMR: lambda x relevance - (1 - lambda) x max redundancy with what is already chosen (the overlap of the
  lines that answer the query, :func:`mnemo.search.lines.redundancy`); of two near-duplicates it keeps the
  newer (a dated note updates an older one), never drops the update.
- MEMORY.md: a bounded boost (at most ``MEMORY_BOOST_CAP``) that orders near-ties and never beats a clearly
  better match; every score a user sees is in [0, 1].
- cut-off: calibrated, not absolute (:func:`calibrated_cut`): results within ``relative`` of the best hit
  that has real keyword or vector evidence; "no results" only when no hit has any.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Sequence
from datetime import date

TIE_WEIGHT = 0.05
"""Largest share of a score that age alone can take from a memory nobody supersedes."""
SUPERSEDED_FACTOR = 0.75
"""Multiplier for a dated memory when a newer candidate says nearly the same thing."""
SUPERSEDER_RELEVANCE = 0.9
"""MMR picks a newer near-duplicate before the older one only if it is nearly as relevant."""
RECENT_FLOOR = 0.5
"""Floor under the decay when the query asks about recent events."""

_RECENT_QUERY = re.compile(
    r"\b(latest|recent(ly)?|lately|today|yesterday|this (week|month|morning)|last (week|night|month)|"
    r"now|currently|current|newest|just)\b|最近|今天|昨天|本周|上周|现在|目前|最新",
    re.IGNORECASE,
)


def text_score(bm25: float, covered_idf: float, total_idf: float) -> float:
    if bm25 <= 0 or total_idf <= 0:
        return 0.0
    coverage = min(1.0, covered_idf / total_idf)
    saturation = bm25 / (bm25 + total_idf)
    return 0.5 * coverage + 0.5 * saturation


def vector_score(cosine_similarity: float) -> float:
    return min(1.0, max(0.0, cosine_similarity))


KEYWORD_FLOOR = 0.8
"""A chunk's hybrid score is at least this share of its text score, so a strong keyword match is never
hidden by an embedding model that does not know the query's language (MiniLM is English-only)."""


def combine(vector: float | None, text: float, vector_weight: float, text_weight: float) -> float:
    """Weighted merge with weights normalised; without vectors the text score stands alone."""
    if vector is None:
        return text
    total = vector_weight + text_weight
    if total <= 0:
        return 0.0
    weighted = (vector_weight * vector + text_weight * text) / total
    return max(weighted, KEYWORD_FLOOR * text)


def age_days(day: date | None, today: date) -> float | None:
    if day is None:
        return None
    return max(0.0, float((today - day).days))


def plain_decay(age: float | None, half_life_days: float) -> float:
    if age is None:
        return 1.0
    return math.exp(-math.log(2) / half_life_days * age)


def asks_about_recent(query: str) -> bool:
    return bool(_RECENT_QUERY.search(query))


def supersede_decay(
    age: float | None,
    half_life_days: float,
    *,
    superseded: bool,
    recent_query: bool,
) -> float:
    """Decay factor for the ``supersede`` mode (1.0 for evergreen memories)."""
    if age is None:
        return 1.0
    plain = plain_decay(age, half_life_days)
    if recent_query:
        factor = RECENT_FLOOR + (1 - RECENT_FLOOR) * plain
    else:
        factor = 1 - TIE_WEIGHT * (1 - plain)
    if superseded:
        factor *= SUPERSEDED_FACTOR
    return factor


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


NEAR_DUPLICATE = 0.5
"""Jaccard token overlap at or above which MMR treats two chunks as versions of one memory."""


def mmr_order(
    relevance: Sequence[float],
    tokens: Sequence[frozenset[str]],
    lam: float,
    k: int,
    ages: Sequence[float | None] | None = None,
    similarity: Callable[[int, int], float] | None = None,
) -> list[int]:
    """Indexes of up to ``k`` items chosen greedily by maximal marginal relevance.

    With ``ages`` (days since each item's note was written; None: undated), an item is never penalised for overlapping an *older*
    chosen item: between near-duplicates the newer version stays in the list; and when the pick has an
    unchosen newer near-duplicate nearly as relevant (``SUPERSEDER_RELEVANCE``), the newer is picked first.
    ``similarity(i, j)``: how redundant item i is once j is chosen (default: Jaccard of their tokens);
    memoised here unless it is a ``functools.cache`` already (a caller that asks again afterwards).
    """
    if similarity is None:

        def similarity(i: int, j: int) -> float:
            return jaccard(tokens[i], tokens[j])

    if not hasattr(similarity, "cache_info"):  # each round asks again about every chosen item
        similarity = functools.cache(similarity)
    remaining = list(range(len(relevance)))
    chosen: list[int] = []

    def newer(i: int, j: int) -> bool:
        if ages is None:
            return False
        a, b = ages[i], ages[j]
        return a is not None and b is not None and a < b

    # Each item's greatest similarity to a chosen one it may be penalised for (None: none yet, 0.0),
    # brought up to date as each pick is made instead of taken again over every chosen item each round.
    overlap: list[float | None] = [None] * len(relevance)
    while remaining and len(chosen) < k:
        best, best_value = remaining[0], -math.inf
        for i in remaining:
            value = lam * relevance[i] - (1 - lam) * (overlap[i] or 0.0)
            if value > best_value:
                best, best_value = i, value
        if ages is not None:
            updates = [
                i
                for i in remaining
                if newer(i, best)
                and relevance[i] >= SUPERSEDER_RELEVANCE * relevance[best]
                and similarity(best, i) >= NEAR_DUPLICATE
            ]
            if updates:
                best = min(updates, key=lambda i: (ages[i], -relevance[i]))
        chosen.append(best)
        remaining.remove(best)
        for i in remaining:
            if not newer(i, best):
                seen, now = overlap[i], similarity(i, best)
                overlap[i] = now if seen is None or now > seen else seen
    return chosen


MEMORY_BOOST_CAP = 0.03
"""Most that MEMORY.md's weight can add to (or take from) a score: enough to order near-ties, never enough
to lift a loose evergreen line over a clearly better match."""


def memory_boost(score: float, weight: float) -> float:
    """What MEMORY.md's ``weight`` adds to ``score``: ``score x (weight - 1)``, bounded by the cap."""
    return max(-MEMORY_BOOST_CAP, min(MEMORY_BOOST_CAP, score * (weight - 1.0)))


def bounded(score: float) -> float:
    return min(1.0, max(0.0, score))


KEYWORD_EVIDENCE = 0.3
"""Share of the query's IDF mass a chunk must cover for its keyword match to count as evidence."""
VECTOR_EVIDENCE = 0.3
"""Cosine similarity at or above which a vector match counts as evidence (all-MiniLM-L6-v2: unrelated
sentences score about 0.0-0.2; a paraphrase of the note about 0.35-0.7)."""


KEYWORD_EVIDENCE_IDF = 2.0
"""Or: IDF mass at least this (a matched term rarer than about one chunk in six). Long queries, and CJK
queries cut into many bigrams, rarely cover 30% of their weight even in the note that answers them."""


def has_evidence(
    vector: float | None, coverage: float, covered_idf: float = 0.0, *, vectors_count: bool = True
) -> bool:
    """Whether a hit is relevant at all: it covers enough of the query's keywords (a share of their
    weight, or one informative term), or (when the model can read the query's language) its vector is
    close enough."""
    if coverage >= KEYWORD_EVIDENCE or covered_idf >= KEYWORD_EVIDENCE_IDF:
        return True
    return vectors_count and vector is not None and vector >= VECTOR_EVIDENCE


def calibrated_cut(
    scores: Sequence[float], evidence: Sequence[bool], relative: float, floor: float
) -> list[int]:
    """Indexes (in order) of the hits to keep from ``scores`` sorted best first.

    Only hits with real evidence are kept; the anchor is the best of them (nothing is kept when none has
    any). Kept: the anchor, and every other hit with evidence that scores at least ``relative`` x the
    anchor's score and at least ``floor`` (an absolute minimum that never removes the anchor).
    """
    anchor = next((i for i, e in enumerate(evidence) if e), None)
    if anchor is None:
        return []
    cut = max(relative * scores[anchor], floor)
    return [i for i, s in enumerate(scores) if evidence[i] and (i == anchor or s >= cut)]


USEFULNESS_SHRINK = 2.0
"""Pseudo-votes that pull a chunk's usefulness towards neutral: one thumbs up makes the prior 1/3, not 1."""
USEFULNESS_MAX_WEIGHT = 0.5
"""The most ``[search] usefulness_weight`` may be: feedback moves a score by at most half of it."""


def usefulness_prior(useful: float, not_useful: float) -> float:
    """Feedback as a prior in (-1, 1): (useful - not useful) / (useful + not useful + shrink)."""
    return (useful - not_useful) / (useful + not_useful + USEFULNESS_SHRINK)


def usefulness_factor(prior: float, weight: float) -> float:
    """The multiplier a score gets: ``1 + weight x prior``, the weight bounded to [0, 0.5]."""
    return 1.0 + min(USEFULNESS_MAX_WEIGHT, max(0.0, weight)) * prior
