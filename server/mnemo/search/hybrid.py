"""HybridSearcher: vector + BM25 candidates, merged, decayed, weighted and diversified, with every part kept."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

import duckdb
import numpy as np

from mnemo.config import SearchSettings
from mnemo.embeddings import Embedder
from mnemo.index import fts
from mnemo.index.postings import PostingsCache
from mnemo.search import ranking
from mnemo.text.terms import cjk_share, query_terms, token_set

MEMORY_FILES = ("MEMORY.md", "memory.md")


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

    def as_dict(self) -> dict[str, Any]:
        return {
            "vector": None if self.vector is None else round(self.vector, 4),
            "text": round(self.text, 4),
            "bm25": round(self.bm25, 4),
            "decay": round(self.decay, 4),
            "weight": self.weight,
            "score": round(self.score, 4),
            "mmrRank": self.mmr_rank,
            "ageDays": self.age_days,
            "superseded": self.superseded,
        }


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

    @property
    def citation(self) -> str:
        return f"{self.path}#L{self.start_line}-L{self.end_line}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "startLine": self.start_line,
            "endLine": self.end_line,
            "score": round(self.parts.score, 4),
            "snippet": self.snippet,
            "source": self.source,
            "citation": self.citation,
            "heading": self.heading,
            "parts": self.parts.as_dict(),
        }


@dataclass
class SearchOutcome:
    results: list[SearchHit]
    mode: str  # "hybrid" or "keyword"
    provider: str
    model: str
    query: str
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "results": [hit.as_dict() for hit in self.results],
            "mode": self.mode,
            "provider": self.provider,
            "model": self.model,
            "query": self.query,
            "notes": list(self.notes),
        }


@dataclass
class _Candidate:
    chunk_id: int
    vector: float | None = None
    bm25: float = 0.0
    text: float = 0.0
    row: tuple[Any, ...] = ()
    embedding: np.ndarray | None = None


class _LazyTokens(dict[int, frozenset[str]]):
    """Token sets of candidate texts, computed only for the pairs the supersede check compares."""

    def __init__(self, texts: dict[int, str]) -> None:
        super().__init__()
        self.texts = texts

    def __missing__(self, chunk_id: int) -> frozenset[str]:
        found = self[chunk_id] = token_set(self.texts[chunk_id])
        return found


CJK_QUERY_SHARE = 0.5
"""A query whose visible characters are at least this much CJK is a CJK query."""
ENGLISH_MODEL_CJK_VECTOR_WEIGHT = 0.2
"""Automatic cjk_vector_weight with the bundled English model (benchmarks: CMRC hybrid nDCG@10)."""


def vector_literal(vector: np.ndarray) -> str:
    """A FLOAT[n] SQL literal of a float vector (only ever built from our own embeddings)."""
    values = ",".join(format(float(x), ".9g") for x in vector)
    return f"[{values}]::FLOAT[{len(vector)}]"


def vector_query(literal: str, limit: int) -> str:
    """Nearest chunks by cosine distance, in the shape DuckDB's vss rewrites to an HNSW index scan."""
    return (
        f"SELECT id, array_cosine_distance(embedding, {literal}) AS distance FROM chunks "
        f"ORDER BY distance LIMIT {int(limit)}"
    )


class HybridSearcher:
    def __init__(
        self,
        embedder: Embedder,
        settings: SearchSettings,
        embed_lock: threading.Lock,
        *,
        english_only_vectors: bool = False,
    ) -> None:
        self.embedder = embedder
        self.settings = settings
        self.embed_lock = embed_lock
        self.english_only_vectors = english_only_vectors
        """The vectors come from the bundled English-only model (automatic cjk_vector_weight)."""

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

    def search(
        self,
        con: duckdb.DuckDBPyConnection,
        query: str,
        *,
        dims: int,
        max_results: int | None = None,
        min_score: float | None = None,
        sources: Sequence[str] | None = None,
        today: date | None = None,
        postings: PostingsCache | None = None,
    ) -> SearchOutcome:
        """``postings``: the writer's in-memory BM25 postings (else the fts tables are scanned)."""
        s = self.settings
        text_search = postings.search if postings is not None else fts.search
        k = max_results or s.max_results
        if min_score is not None:
            floor = min_score
        else:
            floor = s.min_score if dims > 0 else s.keyword_min_score
        today = today or date.today()
        n = min(200, k * 4)
        mode = "hybrid" if dims > 0 else "keyword"
        outcome = SearchOutcome([], mode, self.embedder.provider, self.embedder.model if dims else "", query)
        if not query.strip():
            outcome.notes.append("empty query")
            return outcome
        cands: dict[int, _Candidate] = {}
        qvec: np.ndarray | None = None
        if dims > 0:
            with self.embed_lock:
                qvec = self.embedder.embed([query])[0]
            # The vector goes in as a literal: it is a constant the HNSW index scan can use, and
            # DuckDB converts a 384-float Python parameter far more slowly than it parses one.
            literal = vector_literal(qvec)
            rows = con.execute(vector_query(literal, n)).fetchall()
            for cid, distance in rows:
                cands[cid] = _Candidate(cid, vector=ranking.vector_score(1.0 - float(distance)))
        terms = query_terms(query)
        text_rows = text_search(con, terms, limit=n)
        for cid, bm25, covered, total in text_rows:
            cand = cands.setdefault(cid, _Candidate(cid))
            cand.bm25, cand.text = bm25, ranking.text_score(bm25, covered, total)
        if not cands:
            return outcome
        ids = list(cands)
        if dims > 0:
            text_ids = {r[0] for r in text_rows}
            for cid, bm25, covered, total in text_search(
                con, terms, limit=n, only_ids=[i for i in ids if i not in text_ids]
            ):
                cands[cid].bm25, cands[cid].text = bm25, ranking.text_score(bm25, covered, total)
        select = "id, key, path, source, kind, day, start_line, end_line, heading, text"
        if dims > 0:
            select += ", embedding"
        id_list = ", ".join(str(int(i)) for i in ids)  # inlined: a list parameter costs ~2 ms more
        for row in con.execute(f"SELECT {select} FROM chunks WHERE id IN ({id_list})").fetchall():
            cand = cands[row[0]]
            cand.row = row
            if dims > 0 and row[10] is not None:
                cand.embedding = np.asarray(row[10], dtype=np.float32)
                if cand.vector is None and qvec is not None:
                    cand.vector = ranking.vector_score(float(cand.embedding @ qvec))
        live = [c for c in cands.values() if c.row and (not sources or c.row[3] in sources)]
        hits = self._rank(live, query, today, dims, self.vector_weight(query))
        kept = [h for h in hits if h.parts.score >= floor]
        if s.mmr and len(kept) > 1:
            order = ranking.mmr_order(
                [h.parts.score for h in kept], [token_set(h.snippet) for h in kept], s.mmr_lambda, k
            )
            kept = [kept[i] for i in order]
        else:
            kept = kept[:k]
        for rank, hit in enumerate(kept, start=1):
            hit.parts.mmr_rank = rank
        outcome.results = kept
        if not kept and hits:
            outcome.notes.append(f"{len(hits)} candidate(s) scored below minScore {floor}")
        return outcome

    def _rank(
        self, cands: list[_Candidate], query: str, today: date, dims: int, vector_weight: float | None = None
    ) -> list[SearchHit]:
        s = self.settings
        if vector_weight is None:
            vector_weight = s.vector_weight
        recent = ranking.asks_about_recent(query)
        base = {
            c.chunk_id: ranking.combine(c.vector if dims > 0 else None, c.text, vector_weight, s.text_weight)
            for c in cands
        }
        tokens = _LazyTokens({c.chunk_id: c.row[9] for c in cands})
        hits: list[SearchHit] = []
        for c in cands:
            cid, key, path, source, _kind, day, start, end, heading, text = c.row[:10]
            age = ranking.age_days(day, today)
            superseded = False
            if s.decay == "supersede":
                superseded = age is not None and any(
                    o.row[5] is not None
                    and o.row[5] > day
                    and base[o.chunk_id] >= ranking.SUPERSEDER_RELEVANCE * base[cid]
                    and self._similar(c, o, tokens)
                    for o in cands
                    if o is not c
                )
                decay = ranking.supersede_decay(
                    age, s.half_life_days, superseded=superseded, recent_query=recent
                )
            elif s.decay == "multiplicative":
                decay = ranking.plain_decay(age, s.half_life_days)
            else:
                decay = 1.0
            weight = s.memory_weight if path in MEMORY_FILES else 1.0
            parts = ScoreParts(
                vector=c.vector if dims > 0 else None,
                text=c.text,
                bm25=c.bm25,
                decay=decay,
                weight=weight,
                score=base[cid] * decay * weight,
                age_days=age,
                superseded=superseded,
            )
            snippet = text if len(text) <= s.snippet_chars else text[: s.snippet_chars - 1] + "…"
            hits.append(SearchHit(cid, key, path, source, start, end, heading, snippet, parts))
        hits.sort(key=lambda h: h.parts.score, reverse=True)
        return hits

    @staticmethod
    def _similar(a: _Candidate, b: _Candidate, tokens: _LazyTokens) -> bool:
        if a.embedding is not None and b.embedding is not None:
            return float(a.embedding @ b.embedding) >= ranking.SUPERSEDE_SIMILARITY
        return ranking.jaccard(tokens[a.chunk_id], tokens[b.chunk_id]) >= 0.6
