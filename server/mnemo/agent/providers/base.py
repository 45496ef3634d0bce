"""The chat provider interface: streamed text deltas, a final message, cancellation and token counting."""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from mnemo.errors import MnemoError

if TYPE_CHECKING:
    from .auto import ChatSelection

MESSAGE_OVERHEAD_TOKENS = 4
"""Tokens a chat template adds around each message (role markers, separators)."""


class ProviderError(MnemoError):
    """The model could not be loaded or the endpoint answered with an error (message says which)."""


@dataclass(frozen=True)
class ChatMessage:
    role: str  # system | user | assistant
    content: str


DeltaSource = Generator[str, None, str]
"""A provider's raw stream: yields text deltas, returns the finish reason ("stop", "length", ...)."""


class ChatStream:
    """Iterate for text deltas; afterwards :attr:`text` is the final message and :attr:`finish_reason`
    says why it ended ("stop", "length", "cancelled", ...).

    ``cancel`` is checked between tokens: once it is set the stream ends (finish reason "cancelled") and
    the provider's generator is closed, which stops generation or closes the HTTP response.
    """

    def __init__(self, source: DeltaSource, cancel: threading.Event | None = None) -> None:
        self._source = source
        self._cancel = cancel
        self._parts: list[str] = []
        self.finish_reason = ""

    def __iter__(self) -> Iterator[str]:
        try:
            while True:
                if self._cancel is not None and self._cancel.is_set():
                    self.finish_reason = "cancelled"
                    return
                try:
                    delta = next(self._source)
                except StopIteration as stop:
                    self.finish_reason = stop.value or "stop"
                    return
                if delta:
                    self._parts.append(delta)
                    yield delta
        finally:
            self._source.close()

    def read(self, on_delta: Callable[[str], None] | None = None) -> str:
        """Consume the whole stream (calling ``on_delta`` for each delta) and return the final text."""
        for delta in self:
            if on_delta is not None:
                on_delta(delta)
        return self.text

    @property
    def text(self) -> str:
        return "".join(self._parts)


class ChatProvider(Protocol):
    """What the agent needs from a chat model. Implementations must be safe to call from any thread."""

    name: str
    selection: ChatSelection | None
    """How :mod:`.factory` chose this provider (said by ``mnemo chat``, status, checkhealth); None for
    one built elsewhere (a scripted model in tests)."""

    @property
    def model(self) -> str: ...

    @property
    def context_window(self) -> int: ...

    @property
    def exact_tokens(self) -> bool:
        """True when :meth:`count_tokens` uses the model's own tokenizer (not an estimate)."""
        ...

    def count_tokens(self, text: str) -> int: ...

    def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int,
        temperature: float,
        cancel: threading.Event | None = None,
    ) -> ChatStream: ...

    def close(self) -> None: ...


def count_messages(provider: ChatProvider, messages: Sequence[ChatMessage]) -> int:
    """Prompt tokens of a message list: each message's text plus the template's per-message overhead."""
    return sum(provider.count_tokens(m.content) + MESSAGE_OVERHEAD_TOKENS for m in messages)


def estimate_tokens(text: str) -> int:
    """A tokenizer-free estimate (about 4 characters a token) for endpoints that cannot count."""
    return (len(text.encode("utf-8")) + 3) // 4


class TokenCache:
    """Memoised token counts (transcript events are counted once per process, not once per turn)."""

    def __init__(self, count: Callable[[str], int], size: int = 4096) -> None:
        self._count = count
        self._size = size
        self._memo: dict[str, int] = {}
        self._lock = threading.Lock()

    def __call__(self, text: str) -> int:
        if not text:
            return 0
        with self._lock:
            hit = self._memo.get(text)
        if hit is not None:
            return hit
        value = self._count(text)
        with self._lock:
            if len(self._memo) >= self._size:
                self._memo.pop(next(iter(self._memo)))
            self._memo[text] = value
        return value
