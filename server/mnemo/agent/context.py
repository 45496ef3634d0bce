"""Per-turn context: persona, MEMORY.md (private sessions only), daily notes, skills, automatic recall
with citations, the compaction summary and the transcript tail, all measured with the model's tokenizer.

A small window (``COMPACT_WINDOW`` tokens or less: the bundled model's) gets a compact context instead:
the persona, the recalled snippets that matter (top-k under a quarter of the window) and an answer format
a small model can follow; MEMORY.md, daily notes, skills and tools are reached through recall only.

Nothing is cut silently: a file cut to fit says where in the prompt and in :attr:`TurnContext.notes`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mnemo.embeddings import EmbeddingError
from mnemo.errors import MnemoError
from mnemo.markdown.frontmatter import parse_front_matter
from mnemo.workspace.layout import MEMORY_FILES, readable_in

from .providers import ChatMessage, ChatProvider
from .providers.base import MESSAGE_OVERHEAD_TOKENS
from .sessions import Session, transcript_rel
from .tools import MemoryAccess, ReplyCitation, citation_of, format_hits

if TYPE_CHECKING:
    from mnemo.search.results import SearchHit

log = logging.getLogger(__name__)

PERSONA_FILES = ("AGENTS.md", "SOUL.md")
TOOL_FORMAT = (
    "To use a tool, answer with only this, nothing else:\n"
    '<tool_call>{"name": "memory_search", "arguments": {"query": "..."}}</tool_call>\n'
    "You will get the result and can then answer. Cite memory as path#Lx-Ly."
)
SNIPPET_CHARS = 300
RELEVANT_COSINE = 0.35
"""A recalled hit with no query term in it counts as relevant only from this vector similarity up."""
NOTHING_RECALLED = (
    "Memory search found nothing relevant to the user's question. If the answer is not in the memory "
    'shown above, say "I don\'t have that in memory" and do not invent one.'
)
COMPACT_WINDOW = 2048
"""Context windows up to this many tokens get the compact context."""
ANSWER_FORMAT = (
    "Answer in one or two short sentences, using only the memory above. Quote the memory line that "
    "answers the question and end with its citation in brackets, like [memory/notes.md#L3-L4]. If the "
    'memory above does not answer it, say "I don\'t have that in memory."'
)


@dataclass
class Recall:
    """A turn's automatic recall: searched once, reused by every context build of that turn (after a tool
    step or compaction), so each turn counts once in the retrieval statistics."""

    hits: list[SearchHit] | None
    """The relevant hits; None when recall is off or could not run."""
    notes: list[str] = field(default_factory=list)


@dataclass
class TurnContext:
    messages: list[ChatMessage]
    citations: list[ReplyCitation] = field(default_factory=list)
    prompt_tokens: int = 0
    system_tokens: int = 0
    tail_events: int = 0
    notes: list[str] = field(default_factory=list)
    recall: Recall | None = None
    """What this context recalled; pass it to the next :meth:`ContextBuilder.build` of the same turn."""


def event_message(event: dict[str, Any]) -> ChatMessage | None:
    """How a transcript event reads in the prompt (thoughts, flushes and headers are left out)."""
    kind, text = event.get("type"), str(event.get("text", ""))
    if kind == "user":
        return ChatMessage("user", text)
    if kind == "assistant":
        return ChatMessage("assistant", text)
    if kind == "tool_call":
        return ChatMessage("assistant", f"<tool_call>{text}</tool_call>")
    if kind == "tool_result":
        return ChatMessage("user", f"[observation from {event.get('tool', 'tool')}]\n{text}")
    return None


class ContextBuilder:
    def __init__(
        self,
        root: Path,
        memory: MemoryAccess,
        provider: ChatProvider,
        *,
        recall_results: int = 4,
        reply_tokens: int = 512,
        tools_text: str = "",
        short_term_days: int = 2,
    ) -> None:
        self.root = root
        self.memory = memory
        self.provider = provider
        self.recall_results = recall_results
        self.reply_tokens = reply_tokens
        self.tools_text = tools_text
        self.short_term_days = short_term_days
        """``[memory] short_term_days``: the daily notes of this many days (today first) go into every
        full context; older ones are *archived*: still in memory/ and the index, reached by search only."""

    # -- pieces -----------------------------------------------------------------------------------
    def _read(self, rel: str) -> str | None:
        path = self.root / rel
        if not path.is_file() or path.is_symlink():
            return None
        try:
            # Leading blank lines stay: a cut file's note names its lines as memory_get numbers them.
            return path.read_text(encoding="utf-8-sig", errors="replace").rstrip()
        except OSError as exc:
            log.warning("%s cannot be read: %s", rel, exc)
            return None

    def _fit(self, rel: str, text: str, budget: int, notes: list[str]) -> str:
        """The whole file when it fits ``budget`` tokens, else its first whole lines and a visible note."""
        if self.provider.count_tokens(text) <= budget:
            return text
        lines = text.split("\n")  # memory_get's lines (splitlines also ends one at U+2028)
        lo, hi = 0, len(lines)
        while lo < hi:  # the most leading lines that fit
            mid = (lo + hi + 1) // 2
            if self.provider.count_tokens("\n".join(lines[:mid])) <= budget:
                lo = mid
            else:
                hi = mid - 1
        note = f"{rel} cut to fit the context: lines {lo + 1}-{len(lines)} not shown (use memory_get)"
        notes.append(note)
        return "\n".join(lines[:lo]) + f"\n[{note}]"

    def skills(self) -> list[tuple[str, str]]:
        found = []
        for path in sorted((self.root / "skills").glob("*/SKILL.md")):
            if path.is_symlink():
                continue
            try:
                meta = parse_front_matter(path.read_text(encoding="utf-8-sig", errors="replace")).data
            except OSError:
                continue
            found.append((meta.get("name") or path.parent.name, meta.get("description", "")))
        return found

    def recall(self, query: str, private: bool, own_transcript: str = "") -> Recall:
        """The relevant memory hits for ``query`` (one search, recorded in the retrieval statistics);
        ``own_transcript``: this conversation's transcript, never recalled back into it."""
        if self.recall_results <= 0 or not query.strip():
            return Recall(None)
        try:
            hits = self.memory.search(query, max_results=self.recall_results).results
        except (MnemoError, EmbeddingError) as exc:
            return Recall(None, [f"automatic recall skipped: {exc}"])
        # MEMORY.md only in private sessions; a group's archive never in a private one, and back
        hits = [h for h in hits if readable_in(h.path, private)]
        return Recall([h for h in hits if _relevant(h) and h.path != own_transcript])

    def budgeted(self, hits: list[SearchHit], budget: int, notes: list[str]) -> list[SearchHit]:
        """The best-ranked hits whose snippets fit ``budget`` tokens together (the first one always)."""
        chosen: list[SearchHit] = []
        used = 0
        for hit in hits:
            cost = self.provider.count_tokens(format_hits([hit], SNIPPET_CHARS)) + 1
            if chosen and used + cost > budget:
                break
            chosen.append(hit)
            used += cost
        if len(chosen) < len(hits):
            notes.append(f"{len(hits) - len(chosen)} recalled snippet(s) left out to fit the context")
        return chosen

    # -- assembly ---------------------------------------------------------------------------------
    def build(
        self, session: Session, query: str, *, today: date | None = None, recall: Recall | None = None
    ) -> TurnContext:
        """The context for ``query``; ``recall``: this turn's recall from an earlier build (no new search)."""
        window = self.provider.context_window
        if recall is None:
            recall = self.recall(query, session.kind == "private", transcript_rel(session.id))
        notes: list[str] = list(recall.notes)
        if window <= COMPACT_WINDOW:
            parts, hits = self._compact_parts(recall.hits, notes)
        else:
            parts, hits = self._full_parts(session, recall.hits, today, notes)
        summary = session.summary()
        if summary:
            parts.append("Summary of the earlier conversation:\n" + summary)
        system = ChatMessage("system", "\n\n".join(parts))
        system_tokens = self.provider.count_tokens(system.content) + MESSAGE_OVERHEAD_TOKENS
        tail, tail_tokens = self.tail(session.live_events(), window - self.reply_tokens - system_tokens)
        if len(tail) < len([e for e in session.live_events() if event_message(e)]):
            notes.append("older turns left out to fit the context window")
        return TurnContext(
            [system, *tail],
            [citation_of(h, "recall") for h in hits or ()],
            system_tokens + tail_tokens,
            system_tokens,
            len(tail),
            notes,
            recall,
        )

    def _compact_parts(
        self, hits: list[SearchHit] | None, notes: list[str]
    ) -> tuple[list[str], list[SearchHit] | None]:
        """Persona, the recalled snippets that matter and the answer format: what a small model can use."""
        window = self.provider.context_window
        parts: list[str] = []
        for name in PERSONA_FILES:
            text = self._read(name)
            if text:
                parts.append(self._fit(name, text, max(32, window // 16), notes))
        if not parts:
            parts.append("You are mnemo, a concise assistant that remembers.")
        if hits:
            hits = self.budgeted(hits, max(64, window // 4), notes)
            parts.append("Memory:\n" + format_hits(hits, SNIPPET_CHARS) + "\n\n" + ANSWER_FORMAT)
        elif hits is not None:
            parts.append(NOTHING_RECALLED)
        return parts, hits

    def _full_parts(
        self, session: Session, hits: list[SearchHit] | None, today: date | None, notes: list[str]
    ) -> tuple[list[str], list[SearchHit] | None]:
        window = self.provider.context_window
        file_budget = max(64, window // 8)
        private = session.kind == "private"
        parts: list[str] = []
        persona = [self._read(name) for name in PERSONA_FILES]
        parts.extend(
            self._fit(n, t, file_budget, notes) for n, t in zip(PERSONA_FILES, persona, strict=True) if t
        )
        if not any(persona):
            parts.append("You are mnemo, a concise assistant that remembers.")
        if self.tools_text:
            parts.append("Tools:\n" + self.tools_text + "\n" + TOOL_FORMAT)
        skills = self.skills()
        if skills:
            parts.append("Skills:\n" + "\n".join(f"- {n}: {d}" for n, d in skills))
        if private:
            for name in MEMORY_FILES:
                text = self._read(name)
                if text:
                    parts.append(f"Long-term memory ({name}):\n" + self._fit(name, text, file_budget, notes))
                    break
        day = today or date.today()
        for d in (day - timedelta(days=back) for back in range(max(0, self.short_term_days))):
            rel = f"memory/{d.isoformat()}.md"
            text = self._read(rel)
            if text:
                parts.append(f"Daily note {rel}:\n" + self._fit(rel, text, file_budget // 2, notes))
        if hits:
            parts.append("Relevant memory (cite as shown):\n" + format_hits(hits, SNIPPET_CHARS))
        elif hits is not None:  # recall ran and found nothing: say so rather than let the model invent
            parts.append(NOTHING_RECALLED)
        return parts, hits

    def tail(self, events: Sequence[dict[str, Any]], budget: int) -> tuple[list[ChatMessage], int]:
        """The newest events that fit ``budget`` tokens, oldest first (the newest is always kept)."""
        chosen: list[ChatMessage] = []
        used = 0
        for event in reversed(events):
            message = event_message(event)
            if message is None:
                continue
            cost = self.provider.count_tokens(message.content) + MESSAGE_OVERHEAD_TOKENS
            if chosen and used + cost > budget:
                break
            chosen.append(message)
            used += cost
        chosen.reverse()
        return chosen, used

    def session_tokens(self, session: Session, system_tokens: int) -> int:
        """Tokens the whole live conversation would take: what the compaction threshold compares."""
        return system_tokens + sum(
            self.provider.count_tokens(m.content) + MESSAGE_OVERHEAD_TOKENS
            for m in (event_message(e) for e in session.live_events())
            if m is not None
        )


def _relevant(hit: SearchHit) -> bool:
    """A hit sharing a term with the query, or close enough in meaning (nearest neighbours always exist)."""
    vector = hit.parts.vector
    return bool(hit.parts.text) or (vector is not None and vector >= RELEVANT_COSINE)
