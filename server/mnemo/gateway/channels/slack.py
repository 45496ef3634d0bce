"""Slack adapter on slack-sdk: Events API requests verified by signature, replies by ``chat.postMessage``.

Config ``[gateway.channels.slack]``: ``signing_secret_env`` (default ``SLACK_SIGNING_SECRET``),
``bot_token_env`` (default ``SLACK_BOT_TOKEN``), ``api_url`` (default Slack's). Endpoint:
``POST /channels/slack`` (set it as the app's Request URL; subscribe to ``message.im``,
``app_mention`` and, for channels the bot should read, ``message.channels``). The request is answered at
once (Slack wants 3 s); the reply follows in the thread. Slack's retries are acknowledged and dropped.
"""

from __future__ import annotations

import functools
import json
import logging
from collections import deque
from typing import Any

from aiohttp import web
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient

from ..core import GatewayReply
from ..routing import Attachment, InboundMessage
from .base import Channel, ChannelError, refuse_if_limited
from .delivery import BackgroundReplies, split_text

log = logging.getLogger(__name__)
MAX_TEXT = 3900
IGNORED_SUBTYPES = {"bot_message", "message_changed", "message_deleted", "channel_join", "channel_leave"}


def to_inbound(payload: dict[str, Any]) -> InboundMessage | None:
    event = payload.get("event") or {}
    if event.get("type") not in ("message", "app_mention") or event.get("bot_id"):
        return None
    if event.get("subtype") in IGNORED_SUBTYPES or not event.get("user"):
        return None
    files = [
        Attachment(
            "image" if str(f.get("mimetype", "")).startswith("image/") else "file",
            str(f.get("name", "")),
            str(f.get("url_private", "")),
            str(f.get("mimetype", "")),
            int(f.get("size", 0) or 0),
        )
        for f in event.get("files", []) or []
    ]
    text = str(event.get("text", ""))
    if not text.strip() and not files:
        return None
    group = event.get("channel_type") != "im"
    thread = str(event.get("thread_ts") or "")
    return InboundMessage(
        channel="slack",
        account=str(payload.get("api_app_id") or "default"),
        peer=str(event["user"]),
        text=text,
        group=group,
        group_id=str(event.get("channel", "")) if group else "",
        thread=thread,
        parent_thread=str(event.get("channel", "")) if thread else "",
        team=str(payload.get("team_id") or event.get("team") or ""),
        attachments=files,
        message_id=str(event.get("ts", "")),
        raw={"channel": event.get("channel"), "ts": event.get("ts"), "thread_ts": event.get("thread_ts")},
    )


class SlackChannel(Channel):
    name = "slack"

    def __init__(self, host: Any, config: dict[str, Any]) -> None:
        super().__init__(host, config)
        signing = host.secret(self.name, config, "signing_secret", "SLACK_SIGNING_SECRET")
        token = host.secret(self.name, config, "bot_token", "SLACK_BOT_TOKEN")
        if not signing or not token:
            raise ChannelError("slack needs SLACK_SIGNING_SECRET and SLACK_BOT_TOKEN (see docs/gateway.md)")
        self.verifier = SignatureVerifier(signing)
        self.client = AsyncWebClient(
            token=token, base_url=str(config.get("api_url", "https://slack.com/api/"))
        )
        self.replies = BackgroundReplies(host, self.name)
        self._seen: deque[str] = deque(maxlen=1000)

    def mount(self, app: web.Application) -> None:
        app.router.add_post("/channels/slack", self.receive)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "endpoint": "POST /channels/slack", "auth": "Slack request signature"}

    async def receive(self, request: web.Request) -> web.Response:
        address = request.remote or "?"
        if (refused := refuse_if_limited(self.host, request)) is not None:
            return refused
        body = await request.read()
        if not self.verifier.is_valid_request(body, dict(request.headers)):
            self.host.auth_failed(address)
            return web.Response(status=401, text="bad signature")
        try:
            payload = json.loads(body)
        except ValueError:
            return web.Response(status=400, text="not JSON")
        if payload.get("type") == "url_verification":
            return web.json_response({"challenge": payload.get("challenge", "")})
        event_id = str(payload.get("event_id", ""))
        if request.headers.get("X-Slack-Retry-Num") or (event_id and event_id in self._seen):
            return web.Response(text="ok")  # already being answered
        self._seen.append(event_id)
        message = to_inbound(payload) if payload.get("type") == "event_callback" else None
        if message is not None:
            self.replies.start(message, functools.partial(self.send, message))
        return web.Response(text="ok")

    async def send(self, message: InboundMessage, reply: GatewayReply) -> None:
        thread_ts = message.raw.get("thread_ts") or (message.raw.get("ts") if message.group else None)
        for piece in split_text(reply.text, MAX_TEXT):
            await self.client.chat_postMessage(
                channel=message.raw["channel"], text=piece, thread_ts=thread_ts
            )

    async def stop(self) -> None:
        await self.replies.drain()
