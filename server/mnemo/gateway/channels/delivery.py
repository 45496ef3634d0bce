"""What the platform adapters share: replying off the request path, and splitting long replies."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from mnemo.errors import MnemoError

from ..core import GatewayReply
from ..routing import InboundMessage
from .base import ChannelHost

log = logging.getLogger(__name__)


def split_text(text: str, limit: int) -> list[str]:
    """``text`` in pieces of at most ``limit`` characters, cut at line ends or spaces where possible."""
    text = text.strip() or "(no reply)"
    pieces: list[str] = []
    while len(text) > limit:
        cut = text.rfind("\n", 0, limit)
        if cut < limit // 2:
            cut = text.rfind(" ", 0, limit)
        if cut < limit // 2:
            cut = limit
        pieces.append(text[:cut].rstrip())
        text = text[cut:].lstrip()
    pieces.append(text)
    return pieces


class BackgroundReplies:
    """Platforms want their webhook answered at once (Slack: 3 s); the turn runs after, in a task."""

    def __init__(self, host: ChannelHost, channel: str) -> None:
        self.host = host
        self.channel = channel
        self.tasks: set[asyncio.Task[None]] = set()
        self.sent = 0
        self.failed = 0

    def start(self, message: InboundMessage, send: Callable[[GatewayReply], Awaitable[None]]) -> None:
        task = asyncio.create_task(self._run(message, send))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _run(self, message: InboundMessage, send: Callable[[GatewayReply], Awaitable[None]]) -> None:
        try:
            reply = await self.host.dispatch(message)
            if reply.steered:  # it joined the running turn: that turn's reply answers it
                return
            await send(reply)
            self.sent += 1
        except MnemoError as exc:
            self.failed += 1
            log.warning("%s: no reply to %s: %s", self.channel, message.peer, exc)
        except Exception:  # a platform error must not stop the channel
            self.failed += 1
            log.exception("%s: sending the reply failed", self.channel)

    async def drain(self) -> None:
        if self.tasks:
            await asyncio.gather(*list(self.tasks), return_exceptions=True)
