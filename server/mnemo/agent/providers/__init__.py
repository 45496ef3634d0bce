"""Chat model providers behind one interface (:class:`ChatProvider`)."""

from .base import (
    ChatMessage,
    ChatProvider,
    ChatStream,
    ProviderError,
    count_messages,
    estimate_tokens,
)
from .factory import build_provider
from .scripted import ScriptedProvider

__all__ = [
    "ChatMessage",
    "ChatProvider",
    "ChatStream",
    "ProviderError",
    "ScriptedProvider",
    "build_provider",
    "count_messages",
    "estimate_tokens",
]
