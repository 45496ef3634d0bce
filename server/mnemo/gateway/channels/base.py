"""The channel plugin interface, and how plugins are found.

A channel turns its platform's payloads into :class:`~mnemo.gateway.routing.InboundMessage`, hands them to
:meth:`ChannelHost.dispatch`, and sends the reply back where the message came from. Channels mount their
HTTP endpoints on the gateway's aiohttp application (webhooks) or run their own client (long polling,
platform WebSockets) between :meth:`Channel.start` and :meth:`Channel.stop`.

Built in: ``webchat`` (the gateway's own WebSocket, method ``chat.send``) and ``webhook`` (signed HTTP
POSTs). Optional: ``telegram``, ``slack`` and ``discord`` on their official client libraries (``pip install
'mnemo[channels]'``). Third-party plugins register a :class:`Channel` subclass under the entry point group
``mnemo.channels``.
"""

from __future__ import annotations

import importlib
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, Protocol

from aiohttp import web

from mnemo.errors import MnemoError

from ..auth import RateLimited
from ..core import GatewayReply
from ..routing import InboundMessage

log = logging.getLogger(__name__)

BUILT_IN = {
    "webchat": "mnemo.gateway.channels.webchat:WebChatChannel",
    "webhook": "mnemo.gateway.channels.webhook:WebhookChannel",
    "telegram": "mnemo.gateway.channels.telegram:TelegramChannel",
    "slack": "mnemo.gateway.channels.slack:SlackChannel",
    "discord": "mnemo.gateway.channels.discord:DiscordChannel",
}
ENTRY_POINT_GROUP = "mnemo.channels"


class ChannelError(MnemoError):
    """A channel that cannot start (missing library, missing secret) or a payload it cannot read."""


class ChannelHost(Protocol):
    """What a channel may ask of the gateway."""

    async def dispatch(
        self, message: InboundMessage, *, on_delta: Callable[[str], None] | None = None
    ) -> GatewayReply: ...

    def secret(self, channel: str, config: dict[str, Any], key: str, env_default: str) -> str: ...

    def check_address(self, address: str) -> None:
        """Raises when ``address`` has failed authentication too often (rate limit)."""

    def auth_failed(self, address: str) -> None: ...


class Channel(ABC):
    name: str = ""

    def __init__(self, host: ChannelHost, config: dict[str, Any]) -> None:
        self.host = host
        self.config = config

    def mount(self, app: web.Application) -> None:  # noqa: B027 - optional hook
        """Add HTTP routes (webhooks) to the gateway's application."""

    async def start(self) -> None:  # noqa: B027 - optional hook
        """Start a client of the platform (long polling, WebSocket); webhooks need nothing here."""

    async def stop(self) -> None:  # noqa: B027 - optional hook
        """Stop what :meth:`start` started."""

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """What ``channels.list`` shows: endpoints and state, never secrets."""


def refuse_if_limited(host: ChannelHost, request: web.Request) -> web.Response | None:
    """A 429 response when the request's address has failed authentication too often, else None."""
    try:
        host.check_address(request.remote or "?")
    except RateLimited as exc:
        return web.json_response(
            {"error": str(exc)}, status=429, headers={"Retry-After": str(int(exc.retry_after_s) + 1)}
        )
    return None


def load_channel_class(name: str) -> type[Channel]:
    """The class of built-in channel ``name``; plugin channels (the ``mnemo.channels`` entry point group,
    the workspace's plugins/ folder) are loaded by :mod:`mnemo.gateway.plugins`."""
    target = BUILT_IN.get(name)
    if target is None:
        raise ChannelError(
            f"unknown channel {name!r} (built in: {', '.join(BUILT_IN)}; plugins: the {ENTRY_POINT_GROUP} "
            "entry point group or plugins/, see docs/gateway.md)"
        )
    module_name, _, class_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ChannelError(
            f"channel {name!r} needs its client library ({exc.name}); install it with "
            "pip install 'mnemo[channels]'"
        ) from exc
    loaded = getattr(module, class_name)
    assert issubclass(loaded, Channel)
    return loaded
