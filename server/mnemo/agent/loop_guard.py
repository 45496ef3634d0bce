"""Loop detection over a streamed reply, for every provider: a small model that starts repeating itself
is stopped (finish reason ``"loop"``) and the repeated tail is trimmed from the reply.

Two detectors run on the text streamed so far:

- **a repeated n-gram tail**: the last ``p`` tokens repeated back to back, at least 3 times and over at
  least :data:`MIN_SPAN` tokens (``p`` up to :data:`MAX_PERIOD`); tokens are words, single CJK
  characters and punctuation marks, so a Chinese echo without spaces is caught too;
- **a repeated sentence**: the same sentence (normalised, at least :data:`MIN_SENTENCE_TOKENS` tokens)
  a second time in a row, or a third time anywhere in the reply.

The text kept is everything before the repeated piece's second occurrence. Detection needs the repeats to be generated, so
they were already streamed; the final message (``ChatReply.text``) is the trimmed one.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from mnemo.text.terms import CJK_CHARS

LOOP = "loop"
MAX_PERIOD = 48
MIN_SPAN = 24
MIN_REPEATS = 3
MIN_SENTENCE_TOKENS = 4
_WINDOW_CHARS = 1_500  # only the tail of the reply is searched for a periodic repeat (~150+ tokens)
_TOKEN_RE = re.compile(rf"[{CJK_CHARS}]|[^\W{CJK_CHARS}]+|[^\w\s]")
_SENTENCE_END_RE = re.compile(r"[.!?]+(?=\s)|[。！？]+|\n+")


class DeltaStream(Protocol):
    """What the guard reads of a :class:`mnemo.agent.providers.ChatStream`."""

    finish_reason: str

    def __iter__(self) -> Iterator[str]: ...


@dataclass(frozen=True)
class Loop:
    keep: int
    """Characters of the reply to keep (the text up to the end of the first repetition)."""
    what: str
    """The repeated piece, for logs and tests."""


def _norm(text: str) -> str:
    return " ".join(m.group().casefold() for m in _TOKEN_RE.finditer(unicodedata.normalize("NFKC", text)))


def periodic_tail(text: str) -> Loop | None:
    """A block of tokens repeated back to back at the end of ``text`` (see the module doc).

    The block must hold a word (a run of dashes or a table rule is not a loop)."""
    start = max(0, len(text) - _WINDOW_CHARS)
    spans = [(m.start(), m.end()) for m in _TOKEN_RE.finditer(text, start)]
    toks = [text[a:b].casefold() for a, b in spans]
    n = len(toks)
    for period in range(1, min(MAX_PERIOD, n // MIN_REPEATS) + 1):
        need = max(MIN_REPEATS, -(-MIN_SPAN // period))
        if period * need > n:
            continue
        unit = toks[n - period :]
        reps = 1
        while reps * period + period <= n and toks[n - (reps + 1) * period : n - reps * period] == unit:
            reps += 1
        if reps >= need and any(t[0].isalnum() for t in unit):
            first = n - reps * period  # index of the first token of the first repetition
            return Loop(spans[first + period - 1][1], " ".join(unit))
    return None


class SentenceRepeats:
    """Fed the growing reply, finds a sentence said twice in a row or three times (outside code fences).

    Incremental: each complete sentence is looked at once. The text kept is everything before the
    sentence's second occurrence."""

    def __init__(self) -> None:
        self._seen: dict[str, list[int]] = {}  # sentence -> start offsets of its occurrences
        self._previous = ""
        self._begin = 0
        self._fenced = False

    def feed(self, text: str) -> Loop | None:
        for end_match in _SENTENCE_END_RE.finditer(text, self._begin):
            start = self._begin
            sentence = text[start : end_match.end()]
            self._begin = end_match.end()
            if sentence.count("```") % 2:
                self._fenced = not self._fenced
            key = _norm(sentence.strip())
            if not key:
                continue
            if self._fenced or "```" in sentence or len(key.split()) < MIN_SENTENCE_TOKENS:
                self._previous = key
                continue
            starts = self._seen.setdefault(key, [])
            starts.append(start + len(sentence) - len(sentence.lstrip()))
            if len(starts) >= MIN_REPEATS or key == self._previous:
                return Loop(starts[1], sentence.strip())
            self._previous = key
        return None


def find_loop(text: str) -> Loop | None:
    """A loop anywhere in a finished text (what :class:`LoopGuard` finds delta by delta)."""
    return SentenceRepeats().feed(text) or periodic_tail(text)


class LoopGuard:
    """Wraps a delta stream: passes deltas through until a loop shows, then stops the stream.

    Afterwards :attr:`text` is the trimmed reply and :attr:`finish_reason` is ``"loop"`` (or the
    stream's own reason when no loop was found). Stopping closes the underlying iterator, which ends
    generation (the provider's generator is closed, as on cancel).
    """

    def __init__(self, stream: DeltaStream) -> None:
        self._stream = stream
        self._text = ""
        self._sentences = SentenceRepeats()
        self.loop: Loop | None = None
        self._finish = ""

    def __iter__(self) -> Iterator[str]:
        source = iter(self._stream)
        try:
            for delta in source:
                self._text += delta
                yield delta
                self.loop = self._sentences.feed(self._text) or periodic_tail(self._text)
                if self.loop is not None:
                    self._finish = LOOP
                    return
        finally:
            close = getattr(source, "close", None)
            if close is not None:
                close()

    def read(self) -> str:
        for _delta in self:
            pass
        return self.text

    @property
    def raw_text(self) -> str:
        return self._text

    @property
    def text(self) -> str:
        raw = self.raw_text
        return raw[: self.loop.keep].rstrip() if self.loop is not None else raw

    @property
    def finish_reason(self) -> str:
        return self._finish or self._stream.finish_reason
