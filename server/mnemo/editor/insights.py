"""Why a memory line is (or is not) recalled: its chunk, retrieval history, decay and last Git change.

Everything here reads the index (a reader cursor the caller provides) and Git's blame cache; nothing
calls a model, so a hover answers in milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import duckdb

from mnemo.config import SearchSettings
from mnemo.editor.vcs import BlameLine
from mnemo.search import ranking


@dataclass(frozen=True)
class LastRetrieval:
    query: str
    when: datetime
    vector: float | None
    text: float
    decay: float
    weight: float
    score: float
    rank: int


@dataclass(frozen=True)
class LineInsight:
    path: str
    line: int  # 1-based
    start_line: int | None  # the chunk holding the line (None when not indexed)
    end_line: int | None
    heading: str
    times_retrieved: int
    last: LastRetrieval | None
    age_days: float | None  # None: evergreen
    decay_today: float
    blame: BlameLine | None

    def as_dict(self) -> dict[str, Any]:
        last = self.last
        return {
            "path": self.path,
            "line": self.line,
            "chunk": None
            if self.start_line is None
            else {"startLine": self.start_line, "endLine": self.end_line, "heading": self.heading},
            "timesRetrieved": self.times_retrieved,
            "last": None
            if last is None
            else {
                "query": last.query,
                "when": last.when.isoformat(timespec="seconds"),
                "vector": last.vector,
                "text": last.text,
                "decay": last.decay,
                "weight": last.weight,
                "score": last.score,
                "rank": last.rank,
            },
            "ageDays": self.age_days,
            "decayToday": self.decay_today,
            "git": None
            if self.blame is None
            else {
                "commit": self.blame.sha,
                "date": self.blame.date,
                "author": self.blame.author,
                "summary": self.blame.summary,
                **({"error": self.blame.error} if self.blame.error else {}),
            },
        }

    def to_markdown(self) -> str:
        out = [f"**mnemo** · `{self.path}`"]
        if self.start_line is None:
            out.append("Not indexed yet.")
        else:
            where = f"lines {self.start_line}-{self.end_line}"
            out.append(f"Chunk {where}" + (f" · {self.heading}" if self.heading else ""))
        age = "evergreen (never decays)" if self.age_days is None else f"{self.age_days:.0f} days old"
        out.append(f"Age: {age} · decay today ×{self.decay_today:.3f}")
        if self.last is None:
            out.append("Not recalled yet.")
        else:
            last = self.last
            vector = "–" if last.vector is None else f"{last.vector:.3f}"
            out.append(
                f"Recalled {self.times_retrieved} time(s); last {last.when:%Y-%m-%d %H:%M} for "
                f"“{last.query}”: score **{last.score:.3f}** (rank {last.rank}) = vector {vector}, "
                f"text {last.text:.3f}, decay ×{last.decay:.3f}, weight ×{last.weight:g}"
            )
        if self.blame is not None:
            if self.blame.error:
                out.append(f"Git: {self.blame.error}")
            elif self.blame.date:
                out.append(
                    f"Last changed {self.blame.date[:10]} in `{self.blame.sha[:8]}` {self.blame.summary}"
                )
            else:
                out.append("Line not committed yet.")
        return "\n\n".join(out)


def decay_today(day: date | None, settings: SearchSettings, today: date) -> tuple[float | None, float]:
    """(age in days or None for evergreen, the decay factor a search would apply today)."""
    age = ranking.age_days(day, today)
    if settings.decay == "off":
        return age, 1.0
    if settings.decay == "multiplicative":
        return age, ranking.plain_decay(age, settings.half_life_days)
    return age, ranking.supersede_decay(age, settings.half_life_days, superseded=False, recent_query=False)


@dataclass(frozen=True)
class ChunkStats:
    """One chunk of a file with its retrieval statistics (one query serves every hover of the file)."""

    key: str
    start_line: int
    end_line: int
    heading: str
    day: date | None
    times_retrieved: int
    last: LastRetrieval | None


def file_chunk_stats(con: duckdb.DuckDBPyConnection, path: str) -> list[ChunkStats]:
    rows = con.execute(
        "SELECT c.key, c.start_line, c.end_line, c.heading, c.day, count(r.chunk_key), "
        "arg_max([r.query, CAST(r.searched_at AS VARCHAR), CAST(r.vector AS VARCHAR), CAST(r.text AS VARCHAR), "
        "CAST(r.decay AS VARCHAR), CAST(r.weight AS VARCHAR), CAST(r.score AS VARCHAR), "
        "CAST(r.rank AS VARCHAR)], r.searched_at) "
        "FROM chunks c LEFT JOIN retrievals r ON r.chunk_key = c.key WHERE c.path = ? "
        "GROUP BY c.key, c.start_line, c.end_line, c.heading, c.day ORDER BY c.start_line",
        [path],
    ).fetchall()
    out = []
    for key, start, end, heading, day, count, last in rows:
        retrieval = None
        if count and last is not None:
            query, when, vector, text, decay, weight, score, rank = last
            retrieval = LastRetrieval(
                query,
                datetime.fromisoformat(when),
                None if vector is None else float(vector),
                float(text),
                float(decay),
                float(weight),
                float(score),
                int(rank),
            )
        out.append(ChunkStats(key, start, end, heading or "", day, int(count), retrieval))
    return out


def insight_from_stats(
    stats: list[ChunkStats],
    path: str,
    line: int,
    settings: SearchSettings,
    *,
    file_day: date | None,
    blame: BlameLine | None = None,
    today: date | None = None,
) -> LineInsight:
    """The insight for ``line`` from a file's chunk statistics (the innermost chunk holding it)."""
    today = today or date.today()
    age, decay = decay_today(file_day, settings, today)
    holding = [c for c in stats if c.start_line <= line <= c.end_line]
    if not holding:
        return LineInsight(path, line, None, None, "", 0, None, age, decay, blame)
    chunk = max(holding, key=lambda c: c.start_line)
    return LineInsight(
        path,
        line,
        chunk.start_line,
        chunk.end_line,
        chunk.heading,
        chunk.times_retrieved,
        chunk.last,
        age,
        decay,
        blame,
    )


@dataclass(frozen=True)
class ChunkLens:
    start_line: int
    end_line: int
    heading: str
    times_retrieved: int
    last_score: float | None

    @property
    def title(self) -> str:
        if not self.times_retrieved:
            return "not recalled yet"
        return f"recalled {self.times_retrieved} time{'s' if self.times_retrieved != 1 else ''}, last score {self.last_score:.2f}"


def chunk_lenses(con: duckdb.DuckDBPyConnection, path: str) -> list[ChunkLens]:
    rows = con.execute(
        "SELECT c.start_line, c.end_line, c.heading, count(r.chunk_key), arg_max(r.score, r.searched_at) "
        "FROM chunks c LEFT JOIN retrievals r ON r.chunk_key = c.key WHERE c.path = ? "
        "GROUP BY c.start_line, c.end_line, c.heading ORDER BY c.start_line",
        [path],
    ).fetchall()
    return [
        ChunkLens(s, e, h or "", int(n), None if score is None else float(score))
        for s, e, h, n, score in rows
    ]
