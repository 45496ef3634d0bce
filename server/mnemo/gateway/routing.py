"""Normalised channel messages, and routing them to an agent and a session key.

Every channel turns its payloads into an :class:`InboundMessage`. The router tries the configured routes
by the most specific field they match — peer, parent thread, guild, team, account, channel, in that
order — and falls back to the default agent. The session key names the conversation; its format,
and the transcript id it becomes, are :mod:`mnemo.agent.session_keys`'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mnemo.agent.session_keys import dm_key, group_key

from .settings import ROUTE_FIELDS, GatewaySettings, RouteRule


@dataclass
class Attachment:
    kind: str
    """image, file, audio, video, link."""
    name: str = ""
    url: str = ""
    mime: str = ""
    size: int = 0


@dataclass
class InboundMessage:
    """One message from a channel, whatever the channel."""

    channel: str
    text: str
    peer: str
    """Who wrote it (the sender's id on that channel)."""
    account: str = "default"
    """Which of our accounts (bot, workspace, webhook) received it."""
    group: bool = False
    group_id: str = ""
    """The group, channel or chat id for group messages."""
    thread: str = ""
    parent_thread: str = ""
    """The thread's parent (a Discord thread's channel, a Slack thread's root message)."""
    guild: str = ""
    team: str = ""
    attachments: list[Attachment] = field(default_factory=list)
    message_id: str = ""
    raw: dict[str, Any] = field(default_factory=dict, repr=False)
    """The payload as received, for the channel's reply (never sent to the model)."""

    def field_value(self, name: str) -> str:
        if name == "parent_thread":
            return self.parent_thread or self.thread
        return str(getattr(self, name) or "")

    def as_dict(self) -> dict[str, Any]:
        return {
            "channel": self.channel,
            "account": self.account,
            "peer": self.peer,
            "group": self.group,
            "groupId": self.group_id,
            "thread": self.thread,
            "parentThread": self.parent_thread,
            "guild": self.guild,
            "team": self.team,
            "text": self.text,
            "attachments": [a.__dict__ for a in self.attachments],
            "messageId": self.message_id,
        }


@dataclass(frozen=True)
class Route:
    agent: str
    session_key: str
    matched_by: str
    """The route field that decided ("peer", …, "channel") or "default"."""
    kind: str
    """private or group: group sessions never load MEMORY.md."""


class Router:
    def __init__(self, settings: GatewaySettings) -> None:
        self.settings = settings
        self._rules: list[RouteRule] = sorted(settings.routes, key=RouteRule.specificity)

    def resolve(self, message: InboundMessage, *, force_group: bool = False) -> Route:
        agent, matched_by = self.settings.default_agent, "default"
        for rule in self._rules:
            if all(message.field_value(k) == v for k, v in rule.match.items()):
                agent = rule.agent
                matched_by = ROUTE_FIELDS[rule.specificity()]
                break
        group = message.group or force_group
        return Route(
            agent, self.session_key(agent, message, group), matched_by, "group" if group else "private"
        )

    def session_key(self, agent: str, m: InboundMessage, group: bool) -> str:
        if group:
            return group_key(agent, m.channel, m.account, m.group_id or m.peer, m.thread)
        return dm_key(agent, self.settings.agent(agent).sessions.dm_scope, m.channel, m.account, m.peer)
