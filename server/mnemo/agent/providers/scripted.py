"""ScriptedProvider: a fake model for testing the agent loop's logic (never used outside tests).

Each call to :meth:`stream` takes the next scripted reply (a string, or a function of the messages that
returns one) and streams it word by word. Its "tokenizer" counts whitespace-separated words.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from .base import ChatMessage, ChatStream, DeltaSource, ProviderError

if TYPE_CHECKING:
    from .auto import ChatSelection

Reply = str | Callable[[Sequence[ChatMessage]], str]


class ScriptedProvider:
    name = "scripted"
    selection: ChatSelection | None = None

    def __init__(
        self,
        replies: Sequence[Reply] = (),
        *,
        context_window: int = 4096,
        default: Reply | None = None,
        on_token: Callable[[int], None] | None = None,
    ) -> None:
        self.replies = list(replies)
        self.default = default
        self.calls: list[list[ChatMessage]] = []
        self._window = context_window
        self._on_token = on_token
        self._lock = threading.Lock()

    @property
    def model(self) -> str:
        return "scripted"

    @property
    def context_window(self) -> int:
        return self._window

    @property
    def exact_tokens(self) -> bool:
        return True

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int,
        temperature: float,
        cancel: threading.Event | None = None,
    ) -> ChatStream:
        with self._lock:
            self.calls.append(list(messages))
            if self.replies:
                reply = self.replies.pop(0)
            elif self.default is not None:
                reply = self.default
            else:
                raise ProviderError("the scripted provider ran out of replies")
        text = reply if isinstance(reply, str) else reply(messages)
        return ChatStream(self._generate(text, max_tokens), cancel)

    def _generate(self, text: str, max_tokens: int) -> DeltaSource:
        words = text.split(" ")
        for i, word in enumerate(words):
            if i >= max_tokens:
                return "length"
            if self._on_token is not None:
                self._on_token(i)
            yield word if i == 0 else " " + word
        return "stop"

    def close(self) -> None:
        pass
