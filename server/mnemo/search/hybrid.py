"""HybridSearcher: vector + BM25 candidates, merged, decayed, weighted and diversified, with every part kept."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: a keyword one-shot search never loads NumPy
    import numpy as np

from mnemo.config import SearchSettings
from mnemo.embeddings import Embedder
from mnemo.index.api import ChunkRecord, IndexReader, KeywordHit
from mnemo.search import filters as search_filters
from mnemo.search import lines, ranking, usefulness
from mnemo.search.query_vectors import QueryVectors
from mnemo.search.results import ScoreParts, SearchHit, SearchOutcome
from mnemo.search.select import select as select_hits
from mnemo.text.terms import cjk_share, query_terms, token_set
from mnemo.workspace.layout import MEMORY_FILES


@dataclass
class _Candidate:
    chunk_id: int
    vector: float | None = None
    bm25: float = 0.0
    text: float = 0.0
    coverage: float = 0.0
    covered_idf: float = 0.0
    record: ChunkRecord | None = None

    @property
    def row(self) -> ChunkRecord:
        assert self.record is not None, "candidate without its chunk"
        return self.record


def _set_text(cand: _Candidate, hit: KeywordHit) -> None:
    bm25, covered, total = hit.bm25, hit.covered, hit.total
    cand.bm25, cand.text = bm25, ranking.text_score(bm25, covered, total)
    cand.coverage = min(1.0, covered / total) if total > 0 else 0.0
    cand.covered_idf = covered if bm25 > 0 else 0.0


CJK_QUERY_SHARE = 0.5
"""A query whose visible characters are at least this much CJK is a CJK query."""
ENGLISH_MODEL_CJK_VECTOR_WEIGHT = 0.0
"""Automatic cjk_vector_weight with the bundled English model: its vectors of Chinese text are noise, so a
mostly-CJK query is ranked by keywords alone (was 0.2; docs/benchmarks.md, ablation: all 1,578 cmrc2018-zh
questions Hit@5 0.982 -> 0.993, MRR@10 0.946 -> 0.972; recall set MRR@10 0.757 -> 0.787)."""


class HybridSearcher:
    def __init__(
        self,
        embedder: Embedder,
        settings: SearchSettings,
        *,
        english_only_vectors: bool = False,
        query_vectors: QueryVectors | None = None,
    ) -> None:
        """``query_vectors``: another searcher's cache of query embeddings, to share (same embedder)."""
        self.embedder = embedder
        self.settings = settings
        self.english_only_vectors = english_only_vectors
        """The vectors come from the bundled English-only model (automatic cjk_vector_weight)."""
        self.query_vectors = query_vectors if query_vectors is not None else QueryVectors()
        """Recent queries' embeddings: a repeated query does not run the model again."""

    def vector_weight(self, query: str) -> float:
        """The vector part's weight for ``query``: lower for a mostly-CJK query when the model is English."""
        s = self.settings
        if cjk_share(query) < CJK_QUERY_SHARE:
            return s.vector_weight
        if s.cjk_vector_weight >= 0:
            return s.cjk_vector_weight
        return (
            min(s.vector_weight, ENGLISH_MODEL_CJK_VECTOR_WEIGHT)
            if self.english_only_vectors
            else s.vector_weight
        )

    def search_with_prior(
        self,
        reader: IndexReader,
        query: str,
        *,
        k: int,
        dims: int,
        min_score: float | None = None,
        sources: Sequence[str] | None = None,
        today: date | None = None,
        filters: search_filters.SearchFilters | None = None,
    ) -> SearchOutcome:
        """:meth:`search` for ``k`` results with the usefulness prior applied (:mod:`mnemo.search.usefulness`:
        more are ranked while it is on, since it may lift one in): the writer's and the one-shot's search."""
        outcome = self.search(
            reader,
            query,
            dims=dims,
            max_results=usefulness.fetch_count(self.settings, k),
            min_score=min_score,
            sources=sources,
            today=today,
            filters=filters,
        )
        usefulness.apply_prior(reader, outcome, self.settings, k)
        return outcome

    def search(
        self,
        reader: IndexReader,
        query: str,
        *,
        dims: int,
        max_results: int | None = None,
        min_score: float | None = None,
        sources: Sequence[str] | None = None,
        today: date | None = None,
        filters: search_filters.SearchFilters | None = None,
    ) -> SearchOutcome:
        """Rank ``reader``'s chunks for ``query``; ``dims`` 0: keyword only.
        ``filters``: only chunks they allow are candidates (:mod:`mnemo.search.filters`)."""
        s = self.settings
        k = max_results or s.max_results
        floor = min_score if min_score is not None else (s.min_score if dims > 0 else s.keyword_min_score)
        today = today or date.today()
        n = min(200, k * 4)
        mode = "hybrid" if dims > 0 else "keyword"
        outcome = SearchOutcome([], mode, self.embedder.provider, self.embedder.model if dims else "", query)
        if not query.strip():
            outcome.notes.append("empty query")
            return outcome
        allowed: Sequence[int] | None = None
        if filters is not None and not filters.empty:
            allowed = reader.allowed_ids(filters)
            if not allowed:
                outcome.notes.append("no memory matches the filters")
                return outcome
        qvec = self.query_vectors.vector(self.embedder, query) if dims > 0 else None
        cands = self._candidates(reader, query, qvec, n, allowed)
        if not cands:
            return outcome
        live = [
            c for c in cands.values() if c.record is not None and (not sources or c.row.source in sources)
        ]
        vector_weight = self.vector_weight(query)
        vectors_count = dims > 0 and not (self.english_only_vectors and cjk_share(query) >= CJK_QUERY_SHARE)
        hits = self._rank(live, query, today, dims, vector_weight, vectors_count=vectors_count)
        outcome.weights = self._weights(dims, vector_weight, vectors_count, min_score)
        outcome.results = select_hits(hits, s, k, min_score=min_score, floor=floor)
        if not outcome.results and hits:
            if min_score is not None or any(h.parts.evidence for h in hits):
                outcome.notes.append(f"{len(hits)} candidate(s) scored below minScore {floor}")
            else:
                outcome.notes.append(
                    f"no relevant memory: {len(hits)} candidate(s), none shares enough keywords or meaning "
                    f"with the query (best score {hits[0].parts.score:.3f})"
                )
        return outcome

    @staticmethod
    def _candidates(
        reader: IndexReader, query: str, qvec: np.ndarray | None, n: int, allowed: Sequence[int] | None
    ) -> dict[int, _Candidate]:
        """Vector and BM25 candidates (``n`` of each) with both scores and their chunks; ``qvec`` None:
        keyword only."""
        cands: dict[int, _Candidate] = {}
        if qvec is not None:
            for near in reader.nearest(qvec, n, within=allowed):
                cands[near.chunk_id] = _Candidate(
                    near.chunk_id, vector=ranking.vector_score(1.0 - near.distance)
                )
        terms = query_terms(query)
        text_hits = reader.keyword_top(terms, n, within=allowed)
        for hit in text_hits:
            _set_text(cands.setdefault(hit.chunk_id, _Candidate(hit.chunk_id)), hit)
        if not cands:
            return cands
        ids = list(cands)
        if qvec is not None:  # vector candidates the keyword top-n missed: their BM25 too
            text_ids = {hit.chunk_id for hit in text_hits}
            for hit in reader.keyword_scores(terms, [i for i in ids if i not in text_ids]):
                _set_text(cands[hit.chunk_id], hit)
        for cid, record in reader.records(ids).items():
            cands[cid].record = record
        if qvec is not None:  # keyword candidates the vector top-n missed: their similarity too
            for cid, vector in reader.vectors([i for i in ids if cands[i].vector is None]).items():
                cands[cid].vector = ranking.vector_score(float(vector @ qvec))
        return cands

    def _weights(
        self, dims: int, vector_weight: float, vectors_count: bool, min_score: float | None
    ) -> dict[str, Any]:
        s = self.settings
        total = vector_weight + s.text_weight
        return {
            "vector": round(vector_weight / total, 4) if dims > 0 and total > 0 else 0.0,
            "text": round(s.text_weight / total, 4) if dims > 0 and total > 0 else 1.0,
            "cjkVectorWeight": dims > 0 and vector_weight != s.vector_weight,
            "vectorEvidence": vectors_count,
            "decay": s.decay,
            "halfLifeDays": s.half_life_days,
            "mmr": s.mmr_lambda if s.mmr else None,
            "memoryWeight": s.memory_weight,
            "cut": "absolute" if min_score is not None else f"relative {s.relative_min_score}",
        }

    def _rank(
        self,
        cands: list[_Candidate],
        query: str,
        today: date,
        dims: int,
        vector_weight: float | None = None,
        *,
        vectors_count: bool = True,
    ) -> list[SearchHit]:
        s = self.settings
        if vector_weight is None:
            vector_weight = s.vector_weight
        recent = ranking.asks_about_recent(query)
        base = {
            c.chunk_id: ranking.combine(c.vector if dims > 0 else None, c.text, vector_weight, s.text_weight)
            for c in cands
        }
        foci, weights = _foci(cands, query)
        supersedes = self._supersedes(cands, foci, weights, today) if s.decay == "supersede" else {}
        by_id = {c.chunk_id: c for c in cands}
        hits: dict[int, SearchHit] = {}
        undemoted: dict[int, float] = {}
        for c in cands:
            r = c.row
            cid, path, start = c.chunk_id, r.path, r.start_line
            age = ranking.age_days(r.day, today)
            newer = supersedes.get(cid)
            reasons = [f"superseded by {_cite(by_id[newer], foci)}"] if newer is not None else []
            if s.decay == "supersede":
                decay = ranking.supersede_decay(
                    age, s.half_life_days, superseded=newer is not None, recent_query=recent
                )
            elif s.decay == "multiplicative":
                decay = ranking.plain_decay(age, s.half_life_days)
            else:
                decay = 1.0
            weight = s.memory_weight if path in MEMORY_FILES else 1.0
            boost = ranking.memory_boost(base[cid] * decay, weight) if weight != 1.0 else 0.0
            if boost:
                reasons.append(f"MEMORY.md {boost:+.3f}")
            if newer is not None:
                undemoted[cid] = ranking.bounded(base[cid] * decay / ranking.SUPERSEDED_FACTOR + boost)
            parts = ScoreParts(
                vector=c.vector if dims > 0 else None,
                text=c.text,
                bm25=c.bm25,
                decay=decay,
                weight=weight,
                score=ranking.bounded(base[cid] * decay + boost),
                age_days=age,
                superseded=newer is not None,
                boost=boost,
                evidence=ranking.has_evidence(
                    c.vector if dims > 0 else None, c.coverage, c.covered_idf, vectors_count=vectors_count
                ),
                line=None if (f := foci[cid]) is None else start + f.offset,
                reasons=reasons,
            )
            text = r.text
            snippet = text if len(text) <= s.snippet_chars else text[: s.snippet_chars - 1] + "…"
            hits[cid] = SearchHit(
                cid, r.key, path, r.source, start, r.end_line, r.heading, snippet, parts, foci[cid]
            )
        for old, new in supersedes.items():
            # The newest version takes the place of the one it updates: at least the older one's score
            # before it was demoted, so the update ranks first (and keeps the older one's evidence).
            lifted, older = hits[new].parts, hits[old].parts
            if lifted.score < undemoted[old]:
                lifted.score = undemoted[old]
                lifted.reasons.append(f"newer version of {_cite(by_id[old], foci)}: takes its place")
            lifted.evidence = lifted.evidence or older.evidence
        ordered = sorted(hits.values(), key=lambda h: h.parts.score, reverse=True)
        return ordered

    @staticmethod
    def _supersedes(
        cands: list[_Candidate],
        foci: dict[int, lines.Focus | None],
        weights: dict[str, float],
        today: date,
    ) -> dict[int, int]:
        """chunk id of a dated memory -> chunk id of the newest newer one whose line answering the query
        is a later version of the same statement (:func:`mnemo.search.lines.updates`), however relevant
        the rest of its chunk is. A note dated after ``today`` supersedes nothing: it is a plan (or a
        date typed wrong), not what is true now."""
        days = {c.chunk_id: c.row.day for c in cands if c.row.day is not None and c.row.day <= today}
        dated = sorted((c for c in cands if c.chunk_id in days), key=lambda c: days[c.chunk_id], reverse=True)
        out: dict[int, int] = {}
        # Against the notes' best line: a transcript that repeats the question word for word is no yardstick.
        floor = lines.update_floor((foci[c.chunk_id] for c in cands if c.row.source != "sessions"), weights)
        for i, c in enumerate(dated):
            for o in dated[:i]:
                if days[o.chunk_id] > days[c.chunk_id] and lines.updates(
                    foci[c.chunk_id], foci[o.chunk_id], weights, floor
                ):
                    out[c.chunk_id] = o.chunk_id
                    break
        return out


def _foci(cands: list[_Candidate], query: str) -> tuple[dict[int, lines.Focus | None], dict[str, float]]:
    """Each candidate's line that answers the query, and the query terms' weights over the candidates' lines."""
    chunk_lines = {c.chunk_id: lines.content_lines(c.row.text) for c in cands}
    weights = lines.term_weights(token_set(query), chunk_lines.values())
    return {cid: lines.focus(ls, weights) for cid, ls in chunk_lines.items()}, weights


def _cite(c: _Candidate, foci: dict[int, lines.Focus | None]) -> str:
    """The candidate's answering line (``path#L4``), or its whole chunk without one."""
    f = foci.get(c.chunk_id)
    if f is not None:
        return f"{c.row.path}#L{c.row.start_line + f.offset}"
    return f"{c.row.path}#L{c.row.start_line}-L{c.row.end_line}"
