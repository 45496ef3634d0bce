"""A month of one conversation key, digested for its archive: key excerpts and a summary.

**Key excerpts** are chosen by a fixed rule, so the same month always gives the same excerpts and none
is invented: every user message of the month is scored by how much of it recurs on *other days* of the
month — the sum over its content words (function words left out, :func:`~.grounding.content_words`) of
the number of days the user used that word minus one, divided by the square root of its number of
content words. The month's first user message is always taken; then the best-scored messages with at
least :data:`MIN_WORDS` content words (ties: the earlier one), at most :data:`PER_DAY` a day and
:data:`EXCERPTS` in all, shown in time order, each quoted with the start of the reply it got.

**The summary** is extractive without a model: how many messages, conversations and days, and the
recurring topics (words the user used on two days or more, most days first). With a chat model
(:func:`model_summary`) the model is given the user's messages only (never the assistant's answers: an
unconfirmed answer is not a fact) and asked for a few bullet points; each bullet is kept only when
:data:`BULLET_SUPPORT` of its content words are in the user's messages, and when none is kept the
extractive summary stands.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from mnemo.errors import MnemoError

from .grounding import content_words
from .providers import ChatMessage, ChatProvider
from .sessions import transcript_rel

log = logging.getLogger(__name__)

EXCERPTS = 8
PER_DAY = 2
MIN_WORDS = 2
TOPICS = 8
QUOTE_CHARS = 400
REPLY_CHARS = 240
BULLETS = 5
BULLET_SUPPORT = 0.6
"""Share of a model bullet's content words that must be in the user's messages for it to be kept."""
SUMMARY_TOKENS = 320
SUMMARY_PROMPT = (
    "You write the monthly archive of a user's conversations with an assistant. In at most 5 short "
    'bullet points (each line starting with "- "), say what the user talked about, asked for and '
    "decided this month, using only the user's messages below. Add nothing they do not say."
)
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")


@dataclass(frozen=True)
class Turn:
    """One user message or assistant reply of a transcript, in the month being archived."""

    session_id: str
    number: int
    """The 1-based user turn (a reply belongs to the turn of the message it answers)."""
    role: str
    text: str
    ts: str

    @property
    def day(self) -> str:
        return self.ts[:10]

    @property
    def link(self) -> str:
        return f"{transcript_rel(self.session_id)}#turn-{self.number}"


@dataclass
class Summary:
    lines: list[str]
    by: str
    """``extractive`` or ``model <name>``."""
    notes: list[str] = field(default_factory=list)


def one_line(text: str, limit: int) -> str:
    """``text`` on one line (whitespace collapsed), cut to ``limit`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _user_words(users: Sequence[Turn]) -> list[set[str]]:
    return [content_words(t.text) for t in users]


def _word_days(users: Sequence[Turn], words: Sequence[set[str]]) -> dict[str, set[str]]:
    days: dict[str, set[str]] = {}
    for turn, found in zip(users, words, strict=True):
        for word in found:
            days.setdefault(word, set()).add(turn.day)
    return days


def scores(users: Sequence[Turn]) -> list[float]:
    """Each user message's score by the rule in the module's docstring."""
    words = _user_words(users)
    days = _word_days(users, words)
    return [sum(len(days[w]) - 1 for w in found) / math.sqrt(len(found)) if found else 0.0 for found in words]


def excerpts(turns: Sequence[Turn]) -> list[tuple[Turn, Turn | None]]:
    """The key excerpts (a user message and the reply it got), in time order."""
    users = [t for t in turns if t.role == "user"]
    if not users:
        return []
    score = scores(users)
    words = _user_words(users)
    chosen = [0]
    per_day = {users[0].day: 1}
    ranked = sorted(range(1, len(users)), key=lambda i: (-score[i], i))
    for i in ranked:
        if len(chosen) >= EXCERPTS:
            break
        if len(words[i]) < MIN_WORDS or per_day.get(users[i].day, 0) >= PER_DAY:
            continue
        chosen.append(i)
        per_day[users[i].day] = per_day.get(users[i].day, 0) + 1
    return [(users[i], _reply_to(turns, users[i])) for i in sorted(chosen)]


def _reply_to(turns: Sequence[Turn], user: Turn) -> Turn | None:
    return next(
        (
            t
            for t in turns
            if t.role == "assistant" and t.session_id == user.session_id and t.number == user.number
        ),
        None,
    )


def topics(turns: Sequence[Turn]) -> list[tuple[str, int]]:
    """Words the user used on two days or more: (word, days), most days first, then most uses."""
    users = [t for t in turns if t.role == "user"]
    words = _user_words(users)
    days = _word_days(users, words)
    uses = {w: sum(w in found for found in words) for w in days}
    recurring = [(w, len(d)) for w, d in days.items() if len(d) >= 2]
    recurring.sort(key=lambda item: (-item[1], -uses[item[0]], item[0]))
    return recurring[:TOPICS]


def counts_line(turns: Sequence[Turn]) -> str:
    if not turns:
        return "No messages."
    users = sum(t.role == "user" for t in turns)
    sessions = len({t.session_id for t in turns})
    days = sorted(t.day for t in turns)
    span = f"on {days[0]}" if days[0] == days[-1] else f"from {days[0]} to {days[-1]}"
    return f"{len(turns)} message(s), {users} from the user, in {sessions} conversation(s) {span}."


def extractive_summary(turns: Sequence[Turn]) -> Summary:
    """Counts and recurring topics: nothing but what the transcripts hold."""
    lines = [counts_line(turns)]
    found = topics(turns)
    if found:
        lines.append("Recurring topics: " + ", ".join(f"{w} ({d} days)" for w, d in found) + ".")
    return Summary(lines, "extractive")


def _prompt_lines(users: Sequence[Turn], provider: ChatProvider, budget: int) -> list[str]:
    """The user's messages that fit ``budget`` tokens, best-scored first, shown in time order."""
    score = scores(users)
    kept: list[int] = []
    used = 0
    for i in sorted(range(len(users)), key=lambda i: (-score[i], i)):
        cost = provider.count_tokens(f"{users[i].day}: {one_line(users[i].text, QUOTE_CHARS)}") + 1
        if kept and used + cost > budget:
            continue
        kept.append(i)
        used += cost
    return [f"{users[i].day}: {one_line(users[i].text, QUOTE_CHARS)}" for i in sorted(kept)]


def checked_bullets(output: str, users: Sequence[Turn]) -> list[str]:
    """The model's bullets whose content words are mostly in the user's messages (at most :data:`BULLETS`)."""
    said: set[str] = set().union(*_user_words(users)) if users else set()
    kept: list[str] = []
    for raw in output.splitlines():
        text = _BULLET.sub("", raw).strip()
        words = content_words(text)
        if not words or text.endswith(":"):
            continue
        if len(words & said) / len(words) >= BULLET_SUPPORT and text not in kept:
            kept.append(one_line(text, QUOTE_CHARS))
        if len(kept) >= BULLETS:
            break
    return kept


def model_summary(
    turns: Sequence[Turn], provider: ChatProvider, cancel: threading.Event | None = None
) -> Summary:
    """The chat model's bullets over the user's messages, checked; the extractive summary when the model
    fails or none of its bullets holds up (with a note saying so)."""
    base = extractive_summary(turns)
    users = [t for t in turns if t.role == "user"]
    if not users:
        return base
    system = ChatMessage("system", SUMMARY_PROMPT)
    budget = provider.context_window - SUMMARY_TOKENS - provider.count_tokens(SUMMARY_PROMPT) - 64
    lines = _prompt_lines(users, provider, max(64, budget))
    try:
        stream = provider.stream(
            [system, ChatMessage("user", "\n".join(lines))],
            max_tokens=SUMMARY_TOKENS,
            temperature=0.0,
            cancel=cancel,
        )
        output = stream.read()
    except MnemoError as exc:
        log.warning("archive summary by %s failed: %s", provider.model, exc)
        base.notes.append(f"the chat model failed ({exc}); extractive summary")
        return base
    bullets = checked_bullets(output, users)
    if not bullets:
        base.notes.append("no bullet of the model's summary held up against the messages; extractive summary")
        return base
    return Summary([base.lines[0], *(f"- {b}" for b in bullets)], f"model {provider.model}", base.notes)
