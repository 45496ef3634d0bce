"""Checks every memory-flush item in code before anything is written: memory must never get worse.

An item (one line of the flush model's output) is kept only when all of these hold, in this order:

1. it is a complete line: not the last line of an output cut by the token limit (or by a loop trimmed
   mid-line, see :mod:`mnemo.agent.loop_guard`), and it
   ends as a sentence (``. ! ? 。 ！ ？`` or a closing bracket/quote) or as a bullet phrase whose last
   word is not a connective ("and", "the", "because", ...) and whose last character is no ``, : ; -``;
2. it is not a question and not a (near) copy of one of the user's questions;
3. it was said in the conversation (most of its words are in one message) by the **user**, or it
   comes from a tool observation, or from an assistant reply the user **confirmed**: the user's next
   message starts with "yes", "correct", "right", "exactly", "confirmed", "that's right", "ok",
   "sure", "对", "是的", "没错", "好" ... An item only found in the model's own answers is rejected;
4. it is not already in memory: no line of ``MEMORY.md`` or ``memory/**/*.md`` is the same after
   normalising (case, bullets, emphasis, punctuation, the source comment) or shares
   :data:`NEAR_DUPLICATE` of its terms (Jaccard), and the index has no memory chunk whose vector is
   :data:`INDEX_DUPLICATE_COSINE` close;
5. it is not a (near) duplicate of an item kept earlier in the same flush;
6. at most ``max_items`` items are kept.

Each kept item is written as ``- <text> <!-- session:<id> turn:<n> -->``: ``n`` is the number of the
user turn (1-based) in which its source message was said.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mnemo.embeddings import EmbeddingError
from mnemo.errors import MnemoError
from mnemo.text.terms import CJK_CHARS
from mnemo.workspace.layout import MEMORY_FILES

from .tools import MemoryAccess

log = logging.getLogger(__name__)

NEAR_DUPLICATE = 0.8
"""Jaccard overlap of terms at which two lines say the same thing."""
QUESTION_COPY = 0.6
SOURCE_COVERAGE = 0.6
"""Share of an item's content terms that must appear in one message for it to be that message's."""
INDEX_DUPLICATE_COSINE = 0.92
MEMORY_BYTES_LIMIT = 20_000_000


def _wordlist(words: str) -> frozenset[str]:
    return frozenset(words.split())


_STOPWORDS = _wordlist(
    "a an the and or but of to in on at for with by from as is are was were be been it its this "
    "that these those we i you he she they our my your their me us do does did so"
)
_CONNECTIVES = _wordlist(
    "a an the and or but of to in on at for with by from as because so that which who is are was "
    "were be than then if when while into onto about"
)
_CONFIRM_RE = re.compile(
    r"^\W*(?:(?:yes|yep|yeah|correct|right|exactly|confirmed|true|indeed|that'?s (?:right|correct)|ok(?:ay)?"
    r"|sure)\b|对|是的|没错|正确|好)",
    re.I,
)
_COMMENT_RE = re.compile(r"<!--.*?-->")
_WORD_RE = re.compile(rf"[{CJK_CHARS}]+|[^\W_{CJK_CHARS}]+")
_CJK_RUN_RE = re.compile(rf"[{CJK_CHARS}]+")
_BULLET_RE = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+")
_ECHO_RE = re.compile(r"^\((?:user|assistant|thought|tool_result), importance [\d.]+\)\s*")
_COMPLETE_END = tuple(".!?。！？)]\"'`”’）")


@dataclass(frozen=True)
class Kept:
    text: str
    source: str  # user | assistant (confirmed) | tool_result
    turn: int
    seq: int

    def line(self, session_id: str) -> str:
        return f"- {self.text} <!-- session:{session_id} turn:{self.turn} -->"


@dataclass(frozen=True)
class Rejected:
    text: str
    reason: str


def normalise(text: str) -> str:
    """Text as compared for equality: no source comment, bullet, emphasis, case or punctuation."""
    text = _BULLET_RE.sub("", _COMMENT_RE.sub(" ", text))
    return " ".join(re.findall(r"\w+", text.casefold()))


def terms(text: str) -> frozenset[str]:
    """Case-folded words, and character bigrams of CJK runs (no stemming, no identifier parts)."""
    found: set[str] = set()
    for run in _WORD_RE.findall(unicodedata.normalize("NFKC", _COMMENT_RE.sub(" ", text)).casefold()):
        if _CJK_RUN_RE.fullmatch(run):
            found.update(run[i : i + 2] for i in range(max(1, len(run) - 1)))
        else:
            found.add(run)
    return frozenset(found)


def content_terms(text: str) -> frozenset[str]:
    found = terms(text)
    return (found - _STOPWORDS) or found


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def split_items(reply: str) -> list[str]:
    """The output's lines as items: bullet markers and echoed candidate prefixes removed."""
    items = []
    for raw in reply.splitlines():
        line = _ECHO_RE.sub("", _BULLET_RE.sub("", raw.strip())).strip()
        if line and line.upper() != "NO_REPLY":
            items.append(" ".join(line.split()))
    return items


def is_complete(text: str) -> bool:
    if text.startswith("#") or text.endswith((",", ":", ";", "-", "(", "—", "–", "...", "…")):
        return False
    if text.count("`") % 2 or text.count("(") > text.count(")"):
        return False  # an open code span or bracket: the line stops mid-way
    if text.endswith(_COMPLETE_END):
        return True
    words = re.findall(r"\w+", text.casefold())
    return bool(words) and words[-1] not in _CONNECTIVES


def is_question(text: str) -> bool:
    return text.rstrip().endswith(("?", "？"))


class MemoryLines:
    """Every line of MEMORY.md and memory/**/*.md, for exact and near-duplicate look-ups."""

    def __init__(self, lines: Iterable[tuple[str, str]]) -> None:
        self.exact: dict[str, str] = {}
        self.sets: list[tuple[frozenset[str], str]] = []
        self.postings: dict[str, list[int]] = {}
        for path, line in lines:
            norm = normalise(line)
            found = terms(line)
            if len(found) < 2:
                continue
            self.exact.setdefault(norm, path)
            for term in found:
                self.postings.setdefault(term, []).append(len(self.sets))
            self.sets.append((found, path))

    @classmethod
    def read(cls, root: Path) -> MemoryLines:
        files = [*(root / name for name in MEMORY_FILES), *sorted((root / "memory").glob("**/*.md"))]
        lines: list[tuple[str, str]] = []
        budget = MEMORY_BYTES_LIMIT
        for path in dict.fromkeys(files):
            if budget <= 0 or not path.is_file() or path.is_symlink():
                continue
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            budget -= len(text)
            rel = path.relative_to(root).as_posix()
            lines.extend((rel, line) for line in text.splitlines() if line.strip())
        return cls(lines)

    def duplicate_of(self, text: str) -> str | None:
        """The memory file already holding this line (or one nearly like it), else None."""
        hit = self.exact.get(normalise(text))
        if hit is not None:
            return hit
        mine = terms(text)
        shared = Counter(i for term in mine for i in self.postings.get(term, ()))
        for i, common in shared.most_common(20):
            other, path = self.sets[i]
            if common / (len(mine) + len(other) - common) >= NEAR_DUPLICATE:
                return path
        return None


def index_duplicate(memory: MemoryAccess | None, text: str) -> str | None:
    """A memory chunk (not a transcript) the index finds nearly identical to ``text``, as a citation."""
    if memory is None:
        return None
    try:
        hits = memory.search(text, max_results=3, record=False).results  # not a retrieval
    except (MnemoError, EmbeddingError, OSError) as exc:
        log.info("flush: index duplicate check skipped: %s", exc)
        return None
    mine = terms(text)
    for hit in hits:
        if hit.path.startswith("sessions/"):
            continue
        vector = hit.parts.vector
        if vector is not None and vector >= INDEX_DUPLICATE_COSINE:
            return hit.citation
        if any(jaccard(mine, terms(line)) >= NEAR_DUPLICATE for line in hit.snippet.splitlines()):
            return hit.citation
    return None


class Conversation:
    """The session's messages, to find where an item came from and whether the user confirmed it."""

    def __init__(self, events: Sequence[dict[str, Any]]) -> None:
        self.messages: list[tuple[dict[str, Any], frozenset[str], int, bool]] = []
        self.questions: list[frozenset[str]] = []
        turn = 0
        for i, event in enumerate(events):
            kind, text = event.get("type"), str(event.get("text", ""))
            if kind == "user":
                turn += 1
                if "?" in text or "？" in text:
                    asked = [q for q in re.split(r"(?<=[?？])", text) if "?" in q or "？" in q]
                    self.questions.extend(content_terms(q) for q in asked)
            if kind in ("user", "assistant", "thought", "tool_result"):
                confirmed = kind == "assistant" and confirmed_after(events, i)
                self.messages.append((event, content_terms(text), max(turn, 1), confirmed))

    def copies_question(self, text: str) -> bool:
        mine = content_terms(text)
        return any(jaccard(mine, q) >= QUESTION_COPY for q in self.questions)

    def source(self, text: str) -> tuple[str, dict[str, Any] | None, int]:
        """(verdict, source event, turn): verdict is user | tool_result | assistant | unconfirmed | none."""
        mine = content_terms(text)
        best: dict[str, tuple[float, dict[str, Any], int]] = {}
        for event, found, turn, confirmed in self.messages:
            kind = str(event["type"])
            if kind in ("assistant", "thought"):
                kind = "assistant" if confirmed else "unconfirmed"
            cover = len(mine & found) / len(mine) if mine else 0.0
            if cover >= SOURCE_COVERAGE and cover > best.get(kind, (0.0, {}, 0))[0]:
                best[kind] = (cover, event, turn)
        for kind in ("user", "assistant", "tool_result", "unconfirmed"):
            if kind in best:
                return kind, best[kind][1], best[kind][2]
        return "none", None, 0


def confirmed_after(events: Sequence[dict[str, Any]], i: int) -> bool:
    for later in events[i + 1 :]:
        if later.get("type") == "user":
            return bool(_CONFIRM_RE.match(str(later.get("text", ""))))
        if later.get("type") == "assistant":
            return False
    return False


def check_items(
    items: Sequence[str],
    conversation: Conversation,
    memory_lines: MemoryLines,
    *,
    max_items: int,
    cut: bool = False,
    memory: MemoryAccess | None = None,
) -> tuple[list[Kept], list[Rejected]]:
    """Sort the model's items into kept and rejected (with the reason), in the module doc's order."""
    kept: list[Kept] = []
    rejected: list[Rejected] = []
    for n, text in enumerate(items):
        reason = ""
        source, event, turn = "none", None, 0
        if cut and n == len(items) - 1:
            reason = "cut off: the model stopped before finishing this line"
        elif not is_complete(text):
            reason = "cut off: not a complete sentence or bullet"
        elif len(terms(text)) < 3:
            reason = "too short to be a fact"
        elif is_question(text) or conversation.copies_question(text):
            reason = "a copy of the user's question, not a fact"
        else:
            source, event, turn = conversation.source(text)
            if source == "unconfirmed":
                reason = "taken from the model's own answer, which the user did not confirm"
            elif source == "none":
                reason = "not said in this conversation"
        if not reason and any(jaccard(terms(text), terms(k.text)) >= NEAR_DUPLICATE for k in kept):
            reason = "a duplicate of an item above"
        if not reason:
            where = memory_lines.duplicate_of(text) or index_duplicate(memory, text)
            if where:
                reason = f"already in memory ({where})"
        if not reason and len(kept) >= max_items:
            reason = f"over the limit of {max_items} items per flush"
        if reason or event is None:
            rejected.append(Rejected(text, reason or "no source"))
        else:
            kept.append(Kept(text, source, turn, int(event.get("seq", 0))))
    return kept, rejected
