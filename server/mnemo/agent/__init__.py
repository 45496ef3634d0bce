"""The chat agent: providers, sessions, per-turn context, tools, compaction and the memory flush.

No protocol code here: the CLI, the LSP server and the gateway are fronts on :class:`Agent`.
"""

from .agent import Agent, ChatReply
from .flush import NO_REPLY, FlushReport
from .providers import ChatMessage, ChatProvider, ProviderError, ScriptedProvider, build_provider
from .sessions import Session, SessionError, SessionStore

__all__ = [
    "NO_REPLY",
    "Agent",
    "ChatMessage",
    "ChatProvider",
    "ChatReply",
    "FlushReport",
    "ProviderError",
    "ScriptedProvider",
    "Session",
    "SessionError",
    "SessionStore",
    "build_provider",
]
