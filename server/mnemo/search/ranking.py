"""The parts of a hybrid score, each a small pure function so it can be tested and explained.

- text: BM25 from the fts tables, normalised into [0, 1] without reference to other hits: half is the
  IDF mass of the query terms the chunk covers (term coverage, OR semantics), half is the BM25 score
  saturated against the score of one occurrence of every query term. A stronger match scores higher;
  nothing is mapped to 1.0 just for matching.
- vector: 1 - cosine distance, clipped to [0, 1].
- decay: temporal decay for dated files (evergreen files exempt). ``supersede`` (default) never buries a
  unique match: age only nudges near-ties (at most ``TIE_WEIGHT``), a dated memory that a newer, similar
  memory supersedes is demoted, and queries that ask about recent events weigh age more (with a floor).
  ``multiplicative`` is the reference system's plain ``exp(-ln2/halfLife x age)``.
- MMR: lambda x relevance - (1 - lambda) x max Jaccard token overlap with what is already chosen.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from datetime import date

TIE_WEIGHT = 0.05
"""Largest share of a score that age alone can take from a memory nobody supersedes."""
SUPERSEDED_FACTOR = 0.75
"""Multiplier for a dated memory when a newer candidate says nearly the same thing."""
SUPERSEDE_SIMILARITY = 0.85
"""Cosine similarity (or token overlap without vectors) above which two memories say the same thing."""
SUPERSEDER_RELEVANCE = 0.9
"""A newer memory supersedes an older one only if it answers the query nearly as well (same-template
notes about different things are similar to each other, but not equally relevant to the query)."""
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


def mmr_order(relevance: Sequence[float], tokens: Sequence[frozenset[str]], lam: float, k: int) -> list[int]:
    """Indexes of up to ``k`` items chosen greedily by maximal marginal relevance."""
    remaining = list(range(len(relevance)))
    chosen: list[int] = []
    while remaining and len(chosen) < k:
        best, best_value = remaining[0], -math.inf
        for i in remaining:
            overlap = max((jaccard(tokens[i], tokens[j]) for j in chosen), default=0.0)
            value = lam * relevance[i] - (1 - lam) * overlap
            if value > best_value:
                best, best_value = i, value
        chosen.append(best)
        remaining.remove(best)
    return chosen
