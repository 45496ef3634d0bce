"""The web-chat channel: browsers and tools chat over the gateway's own WebSocket (``chat.send``).

Nothing to mount: the JSON-RPC front turns each ``chat.send`` into an ``InboundMessage`` on channel
``webchat`` and streams the reply as ``chat.delta`` notifications before answering the request.
"""

from __future__ import annotations

from typing import Any

from ..routing import InboundMessage
from .base import Channel


def webchat_message(params: dict[str, Any], default_peer: str, account: str = "default") -> InboundMessage:
    """A ``chat.send``'s params as a message (peer defaults to the connection's principal)."""
    return InboundMessage(
        channel="webchat",
        account=str(params.get("account") or account),
        peer=str(params.get("peer") or default_peer),
        text=str(params.get("text", "")),
        group=bool(params.get("group", False)),
        group_id=str(params.get("groupId", "")),
        thread=str(params.get("thread", "")),
    )


class WebChatChannel(Channel):
    name = "webchat"

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "endpoint": "WebSocket /rpc, method chat.send",
            "auth": "challenge-response",
        }
