"""Compaction: when a session nears the context window, old turns are summarised into one entry.

Thresholds scale with the window: ``reserve = min(reserve_floor, window // 4)`` and
``soft = min(soft_threshold, window // 16)``; compaction (after the memory flush) starts when the
session's tokens reach ``window - reserve - soft``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from .context import event_message
from .providers import ChatMessage, ChatProvider
from .providers.base import MESSAGE_OVERHEAD_TOKENS
from .sessions import Session, SessionStore

SUMMARY_SYSTEM = (
    "Summarise the conversation below for your own later use: the user's goals, facts learned, decisions, "
    "open questions and anything the user asked you to remember. Short Markdown bullets; nothing else."
)


@dataclass(frozen=True)
class Thresholds:
    window: int
    reserve: int
    soft: int

    @property
    def trigger(self) -> int:
        return max(1, self.window - self.reserve - self.soft)

    @classmethod
    def scaled(cls, window: int, reserve_floor: int, soft_threshold: int) -> Thresholds:
        return cls(window, min(reserve_floor, window // 4), min(soft_threshold, window // 16))


class Compactor:
    def __init__(self, store: SessionStore, provider: ChatProvider) -> None:
        self.store = store
        self.provider = provider

    def compact(self, session: Session, *, keep_tokens: int, cancel: threading.Event | None = None) -> bool:
        """Summarise all live events but the newest ``keep_tokens`` worth (at least the last user
        message stays). Returns False when there was nothing old enough to summarise."""
        live = session.live_events()
        keep_from = len(live)
        used = 0
        for i in range(len(live) - 1, -1, -1):
            message = event_message(live[i])
            cost = (
                0
                if message is None
                else self.provider.count_tokens(message.content) + MESSAGE_OVERHEAD_TOKENS
            )
            if keep_from < len(live) and used + cost > keep_tokens:
                break
            keep_from, used = i, used + cost
        while keep_from < len(live) and live[keep_from].get("type") != "user":
            keep_from += 1  # the kept tail starts at a user turn
        if keep_from == len(live):
            keep_from = max((i for i, e in enumerate(live) if e.get("type") == "user"), default=len(live))
        old = live[:keep_from]
        if not old:
            return False
        transcript = []
        previous = session.summary()
        if previous:
            transcript.append(f"Earlier summary:\n{previous}")
        budget = max(128, self.provider.context_window // 2)
        lines: list[str] = []
        for event in reversed(old):
            message = event_message(event)
            if message is None:
                continue
            line = f"{message.role}: {' '.join(message.content.split())}"
            budget -= self.provider.count_tokens(line) + 1
            if budget < 0:
                break
            lines.append(line)
        transcript.extend(reversed(lines))
        messages = [ChatMessage("system", SUMMARY_SYSTEM), ChatMessage("user", "\n".join(transcript))]
        summary = (
            self.provider.stream(messages, max_tokens=384, temperature=0.0, cancel=cancel).read().strip()
        )
        self.store.append(
            session,
            "compaction",
            summary or "(no summary)",
            upto=int(old[-1].get("seq", 0)),
            summarised=len(old),
        )
        return True
