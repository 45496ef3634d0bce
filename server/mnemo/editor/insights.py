"""Why a memory line is (or is not) recalled: its chunk, retrieval history, decay and last Git change.

Everything here reads the index (an :class:`~mnemo.index.api.IndexReader` the caller holds) and Git's
blame cache; nothing calls a model, so a hover answers in milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from mnemo.config import SearchSettings
from mnemo.editor.vcs import BlameLine
from mnemo.index.api import ChunkStats, IndexReader, LastRetrieval
from mnemo.search import ranking


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
    useful: int = 0
    """Feedback from the chat turns that recalled the chunk (:mod:`mnemo.memory.feedback`)."""
    not_useful: int = 0

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
        if self.useful or self.not_useful:
            out.append(f"Feedback from chats that recalled it: useful {self.useful} / not {self.not_useful}")
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
class FeedbackStats(ChunkStats):
    """A chunk's statistics with its feedback tally."""

    useful: int = 0
    not_useful: int = 0


def file_chunk_stats(reader: IndexReader, path: str) -> list[ChunkStats]:
    """The file's chunks with their retrieval statistics (and feedback, for chunks that have some)."""
    stats = reader.chunk_stats(path)
    tallies = reader.feedback_tallies([c.key for c in stats])
    out: list[ChunkStats] = []
    for c in stats:
        t = tallies.get(c.key)
        if t is None:
            out.append(c)
            continue
        fields = (c.key, c.start_line, c.end_line, c.heading, c.day, c.times_retrieved, c.last)
        out.append(FeedbackStats(*fields, t.useful, t.not_useful))
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
    votes = (chunk.useful, chunk.not_useful) if isinstance(chunk, FeedbackStats) else (0, 0)
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
        *votes,
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


def chunk_lenses(reader: IndexReader, path: str) -> list[ChunkLens]:
    return [
        ChunkLens(c.start_line, c.end_line, c.heading, c.times_retrieved, c.last.score if c.last else None)
        for c in reader.chunk_stats(path)
    ]
