"""Discord adapter on discord.py: a bot client on Discord's gateway; replies answer the message.

Config ``[gateway.channels.discord]``: ``token_env`` (default ``DISCORD_BOT_TOKEN``) and
``require_mention`` (in servers, answer only messages that mention the bot; default true). The bot
needs the Message Content intent. Direct messages are private sessions; server channels and threads
are group sessions (routing sees the server as ``guild`` and a thread's channel as ``parent_thread``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import Any

import discord

from ..core import GatewayReply
from ..routing import Attachment, InboundMessage
from .base import Channel, ChannelError
from .delivery import BackgroundReplies, split_text

log = logging.getLogger(__name__)
MAX_TEXT = 2000


def _kind(content_type: str | None) -> str:
    major = (content_type or "").split("/", 1)[0]
    return major if major in ("image", "audio", "video") else "file"


def to_inbound(message: discord.Message, account: str) -> InboundMessage | None:
    if message.author.bot or (not message.content and not message.attachments):
        return None
    channel = message.channel
    guild = message.guild.id if message.guild else getattr(channel, "guild_id", None)
    is_thread = isinstance(channel, discord.Thread)
    return InboundMessage(
        channel="discord",
        account=account,
        peer=str(message.author.id),
        text=message.content,
        group=guild is not None,
        group_id=str(channel.id) if guild is not None else "",
        thread=str(channel.id) if is_thread else "",
        parent_thread=str(channel.parent_id) if is_thread else "",  # type: ignore[union-attr]
        guild=str(guild or ""),
        attachments=[
            Attachment(_kind(a.content_type), a.filename, a.url, a.content_type or "", a.size)
            for a in message.attachments
        ],
        message_id=str(message.id),
    )


class DiscordChannel(Channel):
    name = "discord"

    def __init__(self, host: Any, config: dict[str, Any]) -> None:
        super().__init__(host, config)
        self.token = host.secret(self.name, config, "token", "DISCORD_BOT_TOKEN")
        if not self.token:
            raise ChannelError("discord needs DISCORD_BOT_TOKEN (see docs/gateway.md)")
        intents = discord.Intents.default()
        intents.message_content = True
        self.client = discord.Client(intents=intents)
        self.client.on_message = self.on_message  # type: ignore[attr-defined]
        self.require_mention = bool(config.get("require_mention", True))
        self.bot_id = int(config.get("bot_user_id", 0) or 0)
        self.replies = BackgroundReplies(host, self.name)
        self._task: asyncio.Task[None] | None = None

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "endpoint": "Discord gateway (bot client)", "auth": "bot token"}

    async def start(self) -> None:
        self._task = asyncio.create_task(self.client.start(self.token))

    async def stop(self) -> None:
        await self.client.close()
        await self.replies.drain()
        if self._task is not None:
            self._task.cancel()

    def _addressed(self, message: discord.Message) -> bool:
        if message.guild is None and getattr(message.channel, "guild_id", None) is None:
            return True
        if not self.require_mention:
            return True
        me = self.client.user.id if self.client.user else self.bot_id
        return any(user.id == me for user in message.mentions)

    async def on_message(self, message: discord.Message) -> None:
        me = self.client.user.id if self.client.user else self.bot_id
        inbound = to_inbound(message, str(me or "default"))
        if inbound is None or not self._addressed(message):
            return
        self.replies.start(inbound, functools.partial(self.send, message))

    async def send(self, message: discord.Message, reply: GatewayReply) -> None:
        pieces = split_text(reply.text, MAX_TEXT)
        await message.reply(pieces[0], mention_author=False)
        for piece in pieces[1:]:
            await message.channel.send(piece)
