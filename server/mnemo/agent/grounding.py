"""Grounded answers (``[agent] grounding``): what the user reads about memory is checked in code against
the turn's recall, not left to the model's good will.

- **strict** (``auto`` picks it for the bundled demo model and windows up to ``COMPACT_WINDOW`` tokens):
  when no recalled line shares a content word with the question, the answer is :data:`NO_MEMORY`, and the
  model is not called. Otherwise the model answers; an answer citing a recalled note, or saying memory has
  nothing, is kept as it is. An uncited answer that repeats a recalled line gets that line's citation
  appended; one that repeats none (or only a lower-ranked, possibly superseded line) gets the best line of
  the top recalled note (recall ranks newest first) quoted with its citation before it. Citations of notes
  recall did not return (a small model copies the format's example) are removed.
- **cite**: only the citation of the repeated line is appended (a real model may answer beyond memory).
- **off**: the answer as the model gave it.

Words are :func:`mnemo.text.terms.index_terms` (words, CJK bigrams) without function words, so "the"
and "什么" never make a note relevant. Lines are read from the file (``MemoryAccess.get``), so a cited
line number is the file's.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal

from mnemo.errors import MnemoError
from mnemo.memory.citations import parse_citation
from mnemo.memory.limits import InvalidInput
from mnemo.text.terms import index_terms
from mnemo.workspace.layout import WorkspacePathError

from .tools import MemoryAccess, ReplyCitation

if TYPE_CHECKING:
    from mnemo.search.results import SearchHit

log = logging.getLogger(__name__)

Mode = Literal["strict", "cite", "off"]
NO_MEMORY = "I don't have that in memory."
SUPPORT = 0.5
"""Share of the answer's content words (strict: and of the line's) a memory line must hold to be repeated."""
NEW_WORDS = 0.75
"""Share of the words an answer adds to its question that the repeated line must hold."""
QUESTION_SUPPORT = 0.3
"""Share of the question's content words (at least one) a recalled line must hold to be relevant."""
SAYS_NONE = (
    "don't have", "do not have", "not in memory", "not in the memory", "no information", "没有", "不知道",
)  # fmt: skip
_FUNCTION_WORDS = """a an the is are was were be been am do does did doing done have has had i me my we our us you
your it its he she they them their this that these those what which who whom whose when where why how of in on at
to for from by with about as into over under and or but not no so if then than there here can could should would
will shall may might must also just any some all each both very too more most much many please tell know remember
said say use used uses using get got make made need needs one s t ll ve re d
什么 是谁 是什 么时 时候 多少 哪里 哪个 怎么 为什 的是 是多 我们 你们 他们"""
FUNCTION_WORDS = frozenset(_FUNCTION_WORDS.split())
_LIST_MARK = re.compile(r"^(?:[-*+]|\d+[.)])\s+")
_CITATION = re.compile(r"\[?([^\s\[\]()<>`'\"|,;]+?\.(?:md|jsonl))(?:#L\d+(?:-L?\d+)?|:\d+(?:-\d+)?)\]?")


@dataclass(frozen=True)
class MemoryLine:
    path: str
    number: int
    text: str
    rank: int
    """The recalled hit's place in recall (0: the top one)."""
    words: frozenset[str] = field(default=frozenset(), compare=False)
    """:func:`content_words` of ``text``, computed once (every check of a turn reads them)."""

    def __post_init__(self) -> None:
        if not self.words:
            object.__setattr__(self, "words", frozenset(content_words(self.text)))

    @property
    def citation(self) -> str:
        return f"{self.path}#L{self.number}"


@dataclass
class Grounding:
    """What grounding did to a reply (``grounded`` in ``mnemo/chat``'s result)."""

    mode: Mode
    action: Literal["no-memory", "kept", "cited", "quoted"]
    reason: str
    added: list[str] = field(default_factory=list)
    """Citations grounding added to the text."""
    removed: list[str] = field(default_factory=list)
    """Citations of notes recall did not return, removed from the text."""


def content_words(text: str) -> set[str]:
    """The words that can make a note relevant: no function words, no single Latin letters or digits."""
    return {t for t in index_terms(_CITATION.sub(" ", text)) if t not in FUNCTION_WORDS and not _short(t)}


def _short(term: str) -> bool:
    return len(term) == 1 and term.isascii()


def says_none(text: str) -> bool:
    low = text.lower()
    return any(p in low for p in SAYS_NONE)


class Grounder:
    def __init__(self, mode: Mode, memory: MemoryAccess, session_path: str = "") -> None:
        self.mode = mode
        self.memory = memory
        self.session_path = session_path
        """The current session's transcript: its lines are this conversation, not memory."""
        self._read: dict[tuple[str, int, int], list[MemoryLine]] = {}
        """Lines per recalled hit: a turn's two checks read each file once."""

    def lines(self, hits: Sequence[SearchHit]) -> list[MemoryLine]:
        """Every non-blank, non-heading line of the recalled hits, in recall order, numbered as in the file."""
        out: list[MemoryLine] = []
        for rank, hit in enumerate(h for h in hits if h.path != self.session_path):
            key = (hit.path, hit.start_line, hit.end_line)
            if key not in self._read:
                self._read[key] = self._hit_lines(hit, *key)
            out.extend(replace(line, rank=rank) for line in self._read[key])
        return out

    def _hit_lines(self, hit: SearchHit, path: str, start: int, end: int) -> list[MemoryLine]:
        try:
            text = self.memory.get(path, start, end - start + 1).text
        except (MnemoError, WorkspacePathError, InvalidInput, OSError) as exc:
            log.debug("grounding reads %s from its snippet: %s", hit.citation, exc)
            text = hit.snippet.rstrip("…")
        out: list[MemoryLine] = []
        for i, line in enumerate(text.split("\n")):  # get's lines (splitlines also ends one at U+2028)
            clean = line.strip()
            if clean.startswith(("user:", "assistant:")) and path.startswith("sessions/"):
                continue  # a question someone asked, or a model's unconfirmed answer, is not a fact
            if clean and not clean.startswith("#"):
                out.append(MemoryLine(path, start + i, clean, 0))
        return out

    def best_for_question(self, question: str, lines: list[MemoryLine]) -> MemoryLine | None:
        """The line of the top recalled note that shares the most content words with the question, at
        least :data:`QUESTION_SUPPORT` of them (None: nothing relevant; one shared word out of five, such as
        "region" for "which cloud region hosts the analytics warehouse", is a coincidence)."""
        words = content_words(question)
        need = max(1, math.ceil(QUESTION_SUPPORT * len(words) - 1e-9))
        scored = [(len(words & line.words), line) for line in lines]
        supported = [(n, line) for n, line in scored if n >= need]
        if not supported:
            return None
        top = min(line.rank for _n, line in supported)
        shared, best = max((p for p in supported if p[1].rank == top), key=lambda p: p[0])
        if shared < 2 and any(self._unknown(w) for w in words - best.words):
            return None  # one shared word ("name"), and what the question is about is nowhere in memory
        return best

    def _unknown(self, word: str) -> bool:
        """No memory holds ``word`` at all (a keyword match, not a vector neighbour; not recorded)."""
        try:
            found = self.memory.search(word, max_results=3, record=False).results
        except (MnemoError, InvalidInput):
            return False
        return not any(word in content_words(hit.snippet) for hit in found)

    def repeated(
        self, question: str, answer: str, lines: list[MemoryLine], *, whole: bool
    ) -> list[MemoryLine]:
        """The memory lines the answer repeats (best first, at most 2): most of the answer's words are the
        line's, and so are most of the words it adds to the question ("... is Alice" does not repeat "Bob is
        the on-call lead"); ``whole``: and most of the line's words are the answer's (word overlap cannot see
        that "moves from CockroachDB to PostgreSQL" denies "uses CockroachDB": strict asks for the line)."""
        words = content_words(answer)
        new = words - content_words(question)
        found: list[tuple[float, int, MemoryLine]] = []
        for line in lines:
            theirs = line.words
            shared = len(words & theirs)
            if shared < min(2, len(theirs)) or shared / max(1, len(words)) < SUPPORT:
                continue
            if new and len(new & theirs) / len(new) < NEW_WORDS:
                continue
            if not whole or shared / max(1, len(theirs)) >= SUPPORT:
                found.append((shared / max(1, len(theirs)), -line.rank, line))
        found.sort(key=lambda f: (f[0], f[1]), reverse=True)
        return [line for _s, _r, line in found[:2]]

    # -- the two checks of a turn -----------------------------------------------------------------
    def before(self, question: str, hits: Sequence[SearchHit] | None) -> Grounding | None:
        """strict: the fixed answer when recall ran and nothing it found is relevant (no model call)."""
        if self.mode != "strict" or hits is None:
            return None
        if not hits:
            return Grounding("strict", "no-memory", "memory search found nothing relevant to the question")
        if self.best_for_question(question, self.lines(hits)) is None:
            return Grounding("strict", "no-memory", "no recalled line shares enough words with the question")
        return None

    def after(
        self,
        question: str,
        answer: str,
        hits: Sequence[SearchHit] | None,
        known: Sequence[ReplyCitation],
    ) -> tuple[str, Grounding | None]:
        """The answer to show and what was done to it. ``known``: the turn's recalled and tool citations
        (a citation in the text counts when its path is one of them and its lines overlap)."""
        if self.mode == "off" or not hits or not answer.strip():
            return answer, None
        matches = list(_CITATION.finditer(answer))
        valid = [m for m in matches if _known(m, known)]
        removed: list[str] = []
        if self.mode == "strict":
            removed = [m.group(0) for m in matches if not _known(m, known)]
            for piece in removed:
                answer = answer.replace(piece, "")
            answer = re.sub(r"[ \t]+([.,;:!?。])", r"\1", answer).strip()
        if valid:
            return answer, Grounding(self.mode, "kept", "the answer cites a recalled note", removed=removed)
        lines = self.lines(hits)
        best = self.best_for_question(question, lines) if self.mode == "strict" else None
        if says_none(answer):
            if best is None:
                return answer, Grounding(
                    self.mode, "kept", "the answer says memory has nothing", removed=removed
                )
            why = "the model said memory has nothing, but recall found this line"
            return _quote(best), Grounding("strict", "quoted", why, [best.citation], removed)
        repeated = self.repeated(question, answer, lines, whole=self.mode == "strict")
        if repeated and (best is None or repeated[0].rank <= best.rank):
            added = [line.citation for line in repeated]
            why = "the answer repeats a recalled line without citing it"
            return answer + " " + " ".join(f"[{c}]" for c in added), Grounding(
                self.mode, "cited", why, added, removed
            )
        if best is None:
            return answer, Grounding(
                self.mode, "kept", "the answer repeats no recalled line", removed=removed
            )
        others = [line.citation for line in repeated if line.citation != best.citation]
        tail = answer + "".join(f" [{c}]" for c in others)
        why = (
            "the answer repeats a lower-ranked (possibly superseded) line"
            if repeated
            else "the answer cites and repeats no recalled line"
        )
        text = f"{_quote(best)}\n\n{tail}" if tail else _quote(best)
        return text, Grounding(
            "strict",
            "quoted",
            why + "; the top recalled line is quoted first",
            [best.citation, *others],
            removed,
        )


def _quote(line: MemoryLine) -> str:
    return f"> {_LIST_MARK.sub('', line.text)} [{line.citation}]"


def _known(match: re.Match[str], known: Sequence[ReplyCitation]) -> bool:
    """A citation in the text names a recalled (or tool-found) note and overlaps its lines."""
    try:
        cited = parse_citation(match.group(0).strip("[]"))
    except InvalidInput:
        return False
    for c in known:
        if c.path != cited.path:
            continue
        if cited.start is None or cited.end is None:
            return True
        if cited.start <= c.end_line and cited.end >= c.start_line:
            return True
    return False
