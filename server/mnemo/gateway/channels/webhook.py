"""Generic HTTP webhook channel: ``POST /hooks/<account>`` with a signed JSON body; the reply is the response.

Body: ``{"peer": "...", "text": "...", "group": false, "groupId": "", "thread": "", "attachments": []}``.
Headers: ``X-Mnemo-Timestamp`` (Unix seconds) and ``X-Mnemo-Signature: sha256=<hex>``, the
HMAC-SHA256 of ``"<timestamp>.<raw body>"`` under the webhook secret (``MNEMO_WEBHOOK_SECRET`` or
``[gateway.channels.webhook] secret``). The secret never travels; a request older than five minutes is
refused (replays). Without a secret the channel stays off.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from typing import Any

from aiohttp import web

from mnemo import wire
from mnemo.errors import MnemoError

from ..lanes import LaneFull
from ..routing import Attachment, InboundMessage
from .base import Channel, ChannelError, refuse_if_limited

MAX_SKEW_S = 300
MAX_BODY_BYTES = 256_000


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """The ``X-Mnemo-Signature`` value for a body (for senders and tests)."""
    mac = hmac.new(secret.encode("utf-8"), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def _str(payload: dict[str, Any], key: str) -> str:
    value = payload.get(key, "")
    if not isinstance(value, str | int):
        raise ChannelError(f"'{key}' must be a string")
    return str(value)


def parse_body(account: str, payload: Any) -> InboundMessage:
    if not isinstance(payload, dict):
        raise ChannelError("the body must be a JSON object")
    text, peer = _str(payload, "text"), _str(payload, "peer")
    if not text.strip() or not peer:
        raise ChannelError("'text' and 'peer' are required")
    attachments = []
    for item in payload.get("attachments", []) or []:
        if isinstance(item, dict):
            attachments.append(
                Attachment(str(item.get("kind", "file")), str(item.get("name", "")), str(item.get("url", "")))
            )
    return InboundMessage(
        channel="webhook",
        account=account,
        peer=peer,
        text=text,
        group=bool(payload.get("group", False)),
        group_id=_str(payload, "groupId"),
        thread=_str(payload, "thread"),
        parent_thread=_str(payload, "parentThread"),
        guild=_str(payload, "guild"),
        team=_str(payload, "team"),
        attachments=attachments,
        message_id=_str(payload, "messageId"),
    )


class WebhookChannel(Channel):
    name = "webhook"

    def __init__(self, host: Any, config: dict[str, Any]) -> None:
        super().__init__(host, config)
        self.secret_value = host.secret(self.name, config, "secret", "MNEMO_WEBHOOK_SECRET")
        if not self.secret_value:
            raise ChannelError(
                "the webhook channel needs a secret: set MNEMO_WEBHOOK_SECRET (or [gateway.channels.webhook] "
                "secret); it stays off until then"
            )

    def mount(self, app: web.Application) -> None:
        app.router.add_post("/hooks/{account}", self.receive)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "endpoint": "POST /hooks/<account>", "auth": "HMAC-SHA256 signature"}

    def _verify(self, request: web.Request, body: bytes) -> None:
        timestamp = request.headers.get("X-Mnemo-Timestamp", "")
        signature = request.headers.get("X-Mnemo-Signature", "")
        if not timestamp.isdigit() or abs(time.time() - int(timestamp)) > MAX_SKEW_S:
            raise PermissionError("missing or stale X-Mnemo-Timestamp")
        if not hmac.compare_digest(sign(self.secret_value, timestamp, body), signature):
            raise PermissionError("bad X-Mnemo-Signature")

    async def receive(self, request: web.Request) -> web.Response:
        address = request.remote or "?"
        if (refused := refuse_if_limited(self.host, request)) is not None:
            return refused
        if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
            return web.json_response({"error": f"body over {MAX_BODY_BYTES} bytes"}, status=413)
        body = await request.content.read(MAX_BODY_BYTES + 1)
        if len(body) > MAX_BODY_BYTES:
            return web.json_response({"error": f"body over {MAX_BODY_BYTES} bytes"}, status=413)
        try:
            self._verify(request, body)
        except PermissionError as exc:
            self.host.auth_failed(address)
            return web.json_response({"error": str(exc)}, status=401)
        try:
            message = parse_body(request.match_info["account"], json.loads(body.decode("utf-8")))
        except (ValueError, UnicodeDecodeError, ChannelError) as exc:
            return web.json_response({"error": f"bad request: {exc}"}, status=400)
        try:
            reply = await self.host.dispatch(message)
        except LaneFull as exc:
            return web.json_response({"error": str(exc)}, status=429)
        except MnemoError as exc:
            return web.json_response({"error": str(exc)}, status=500)
        return web.json_response(wire.gateway_reply(reply))
