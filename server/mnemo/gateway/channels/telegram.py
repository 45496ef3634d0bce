"""Telegram adapter on python-telegram-bot: updates arrive by webhook, replies go through ``Bot``.

Config ``[gateway.channels.telegram]``: ``token_env`` (default ``TELEGRAM_BOT_TOKEN``),
``webhook_secret_env`` (default ``TELEGRAM_WEBHOOK_SECRET``: the ``secret_token`` given to
``setWebhook``, checked on every update), ``account`` (default ``default``), ``bot_username`` and
``require_mention`` (groups: answer only messages that mention the bot or reply to it; default true).
Endpoint: ``POST /channels/telegram``.
"""

from __future__ import annotations

import functools
import hmac
import json
import logging
from typing import Any

from aiohttp import web
from telegram import Bot, Message, ReplyParameters, Update
from telegram.error import TelegramError

from ..core import GatewayReply
from ..routing import Attachment, InboundMessage
from .base import Channel, ChannelError, refuse_if_limited
from .delivery import BackgroundReplies, split_text

log = logging.getLogger(__name__)
MAX_TEXT = 4096


def _attachments(msg: Message) -> list[Attachment]:
    found: list[Attachment] = []
    if msg.photo:
        largest = msg.photo[-1]
        found.append(Attachment("image", largest.file_unique_id, "", "image/jpeg", largest.file_size or 0))
    if msg.document:
        d = msg.document
        found.append(
            Attachment("file", d.file_name or d.file_unique_id, "", d.mime_type or "", d.file_size or 0)
        )
    for kind, item in (("audio", msg.audio), ("audio", msg.voice), ("video", msg.video)):
        if item is not None:
            found.append(Attachment(kind, item.file_unique_id, "", item.mime_type or "", item.file_size or 0))
    return found


def to_inbound(update: Update, account: str) -> InboundMessage | None:
    msg = update.effective_message
    if msg is None or msg.from_user is None or msg.from_user.is_bot:
        return None
    text = msg.text or msg.caption or ""
    attachments = _attachments(msg)
    if not text and not attachments:
        return None
    group = msg.chat.type != "private"
    thread = str(msg.message_thread_id) if msg.is_topic_message and msg.message_thread_id else ""
    return InboundMessage(
        channel="telegram",
        account=account,
        peer=str(msg.from_user.id),
        text=text,
        group=group,
        group_id=str(msg.chat.id) if group else "",
        thread=thread,
        parent_thread=str(msg.chat.id) if thread else "",
        attachments=attachments,
        message_id=str(msg.message_id),
        raw={"chat_id": msg.chat.id, "message_id": msg.message_id, "thread": msg.message_thread_id},
    )


class TelegramChannel(Channel):
    name = "telegram"

    def __init__(self, host: Any, config: dict[str, Any]) -> None:
        super().__init__(host, config)
        token = host.secret(self.name, config, "token", "TELEGRAM_BOT_TOKEN")
        self.webhook_secret = host.secret(self.name, config, "webhook_secret", "TELEGRAM_WEBHOOK_SECRET")
        if not token or not self.webhook_secret:
            raise ChannelError(
                "telegram needs TELEGRAM_BOT_TOKEN and TELEGRAM_WEBHOOK_SECRET (see docs/gateway.md)"
            )
        self.bot = Bot(token)
        self.account = str(config.get("account", "default"))
        self.username = str(config.get("bot_username", "")).lstrip("@").lower()
        self.require_mention = bool(config.get("require_mention", True))
        self.replies = BackgroundReplies(host, self.name)

    def mount(self, app: web.Application) -> None:
        app.router.add_post("/channels/telegram", self.receive)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "endpoint": "POST /channels/telegram", "auth": "webhook secret token"}

    def _addressed(self, update: Update, message: InboundMessage) -> bool:
        if not message.group or not self.require_mention or not self.username:
            return True
        msg = update.effective_message
        replied = (
            msg is not None
            and msg.reply_to_message is not None
            and msg.reply_to_message.from_user is not None
        )
        if replied and msg.reply_to_message.from_user.username.lower() == self.username:  # type: ignore[union-attr]
            return True
        return f"@{self.username}" in message.text.lower()

    async def receive(self, request: web.Request) -> web.Response:
        address = request.remote or "?"
        if (refused := refuse_if_limited(self.host, request)) is not None:
            return refused
        given = request.headers.get("X-Telegram-Bot-Api-Secret-Token", "")
        if not hmac.compare_digest(given.encode(), self.webhook_secret.encode()):
            self.host.auth_failed(address)
            return web.Response(status=401, text="bad secret token")
        try:
            update = Update.de_json(json.loads(await request.read()), self.bot)
        except (ValueError, KeyError, TypeError) as exc:
            return web.Response(status=400, text=f"not a Telegram update: {exc}")
        message = to_inbound(update, self.account) if update is not None else None
        if message is not None and self._addressed(update, message):
            self.replies.start(message, functools.partial(self.send, message))
        return web.Response(text="ok")

    async def send(self, message: InboundMessage, reply: GatewayReply) -> None:
        for piece in split_text(reply.text, MAX_TEXT):
            try:
                await self.bot.send_message(
                    chat_id=message.raw["chat_id"],
                    text=piece,
                    reply_parameters=ReplyParameters(message.raw["message_id"]),
                    message_thread_id=message.raw["thread"] if message.thread else None,
                )
            except TelegramError as exc:
                log.warning("telegram: reply to chat %s failed: %s", message.raw["chat_id"], exc)
                raise

    async def stop(self) -> None:
        await self.replies.drain()
