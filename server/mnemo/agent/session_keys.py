"""Gateway session keys and transcript ids: built and read in this one place.

A session key names a gateway conversation:

* direct messages: ``agent:<id>:main`` (dm_scope ``main``), ``agent:<id>:dm:<peer>`` (``per-peer``) or
  ``agent:<id>:<channel>:<account>:dm:<peer>`` (``per-channel-peer``, the default);
* groups: ``agent:<id>:<channel>:<account>:group:<group>`` and ``…:thread:<thread>`` inside a thread.

The gateway's router builds them (:func:`dm_key`, :func:`group_key`), a key becomes a transcript id
through :func:`session_id_for` (``gw-<readable key>-<digest>[-<generation>]``: safe characters plus a
hash), and the session archive reads them back (:func:`parse_session_key`, :func:`gateway_base`).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

DmScope = str
"""``main``, ``per-peer`` or ``per-channel-peer`` (the gateway settings' ``sessions.dm_scope``)."""

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_RESET = re.compile(r"-reset-\d+$")
"""The suffix :meth:`mnemo.agent.sessions.SessionStore.archive` gives a transcript moved aside."""
_GATEWAY = re.compile(r"^gw-(.+-[0-9a-f]{10})(?:-\d+)?$")
"""A gateway transcript id: ``gw-<readable key>-<digest>[-<generation>]``."""


@dataclass(frozen=True)
class Origin:
    """Who a conversation was with, as the archive's front matter says."""

    channel: str
    peer: str = ""
    group: str = ""
    account: str = ""
    agent: str = ""
    thread: str = ""
    session_key: str = ""


def dm_key(agent: str, scope: DmScope, channel: str, account: str, peer: str) -> str:
    """The key of a direct conversation under ``scope``."""
    if scope == "main":
        return f"agent:{agent}:main"
    if scope == "per-peer":
        return f"agent:{agent}:dm:{peer}"
    return f"agent:{agent}:{channel}:{account}:dm:{peer}"


def group_key(agent: str, channel: str, account: str, group: str, thread: str = "") -> str:
    """The key of a group conversation (a thread inside it has its own)."""
    key = f"agent:{agent}:{channel}:{account}:group:{group}"
    return key + (f":thread:{thread}" if thread else "")


def parse_session_key(key: str) -> Origin:
    """A session key as an :class:`Origin` (an unknown shape: channel ``gateway``)."""
    parts = key.split(":")
    if len(parts) < 3 or parts[0] != "agent":
        return Origin("gateway", session_key=key)
    agent, rest = parts[1], parts[2:]
    if rest == ["main"]:
        return Origin("all", agent=agent, session_key=key)
    if rest[0] == "dm":
        return Origin("all", peer=":".join(rest[1:]), agent=agent, session_key=key)
    if len(rest) >= 4 and rest[2] == "dm":
        return Origin(rest[0], peer=":".join(rest[3:]), account=rest[1], agent=agent, session_key=key)
    if len(rest) >= 4 and rest[2] == "group":
        group, _, thread = ":".join(rest[3:]).partition(":thread:")
        return Origin(rest[0], group=group, account=rest[1], agent=agent, thread=thread, session_key=key)
    return Origin("gateway", agent=agent, session_key=key)


def session_id_for(session_key: str, generation: int = 0) -> str:
    """A transcript id for a session key: readable, safe as a file name, unique by a hash of the key."""
    digest = hashlib.sha256(session_key.encode("utf-8")).hexdigest()[:10]
    readable = _UNSAFE.sub("-", session_key.removeprefix("agent:")).strip("-.")[:80] or "session"
    suffix = f"-{generation}" if generation else ""
    return f"gw-{readable}-{digest}{suffix}"


def base_id(session_id: str) -> str:
    """The transcript id without the suffix a reset gave it."""
    return _RESET.sub("", session_id)


def gateway_base(session_id: str) -> str | None:
    """A gateway transcript's id without ``gw-``, its generation and any reset suffix (the conversation
    across resets); None for another transcript (the editor's, the terminal's)."""
    found = _GATEWAY.match(base_id(session_id))
    return found.group(1) if found else None
