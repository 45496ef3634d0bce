"""Where a conversation's monthly archive lives, who it was with, and its Markdown.

The archive of a month is ``sessions/<context>-<key>/YYYY-MM.md``: ``<context>`` is the transcript's
kind (``private`` or ``group``, so a path alone says which chat sessions may see it, see
:func:`mnemo.workspace.layout.readable_in`); ``<key>`` is ``editor`` for the editor's and the terminal's
sessions (one archive per workspace), and for a gateway session its id without the generation (the
conversation of one channel and peer or group, across resets). The channel, account, peer or group come
from the gateway's session key when it is known (:func:`parse_session_key`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from mnemo.search.filters import channel_tag

from .archive_summary import QUOTE_CHARS, REPLY_CHARS, Summary, Turn, one_line
from .session_keys import Origin, gateway_base, parse_session_key

EDITOR = "editor"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def archive_dir(session_id: str, kind: str) -> str:
    """``<context>-<key>``: the folder under ``sessions/`` of this transcript's archives."""
    return f"{kind}-{gateway_base(session_id) or EDITOR}"


def origin_of(session_id: str, session_key: str | None) -> Origin:
    """The origin of a transcript: the editor, a gateway conversation by its key, or an unknown one."""
    if gateway_base(session_id) is None:
        return Origin(EDITOR)
    return parse_session_key(session_key) if session_key else Origin("gateway")


@dataclass
class MonthHeader:
    """What the front matter and the title of one archive say."""

    folder: str
    month: str
    context: str
    origin: Origin
    sessions: list[str]
    messages: int
    last_day: str


def _quoted(value: str) -> str:
    return json.dumps(_CONTROL.sub(" ", value), ensure_ascii=False)


def front_matter(h: MonthHeader, summary: Summary) -> list[str]:
    o = h.origin
    tag = channel_tag(o.channel)
    lines = ["---", "kind: archive", f"context: {h.context}", f"channel: {_quoted(o.channel)}"]
    for name, value in (
        ("account", o.account),
        ("peer", o.peer),
        ("group", o.group),
        ("thread", o.thread),
        ("agent", o.agent),
        ("session_key", o.session_key),
    ):
        if value:
            lines.append(f"{name}: {_quoted(value)}")
    lines += [
        f"month: {h.month}",
        f"date: {h.last_day}",
        f"tags: [archive, {tag}]",
        f"sessions: {len(h.sessions)}",
        f"messages: {h.messages}",
        f"summary: {_quoted(summary.by)}",
        "---",
    ]
    return lines


def title(h: MonthHeader) -> str:
    o = h.origin
    who = o.peer or (o.group + (f" thread {o.thread}" if o.thread else ""))
    return f"# Sessions {h.month} · {o.channel}" + (f" · {who}" if who else "") + f" ({h.context})"


def render(h: MonthHeader, summary: Summary, picked: Sequence[tuple[Turn, Turn | None]]) -> str:
    """The archive's Markdown. Quoted lines start with ``user:`` or ``assistant:``: grounding never takes
    them for facts (a question asked, an unconfirmed answer), as with transcripts."""
    lines = [*front_matter(h, summary), "", title(h), "", "## Summary", "", *summary.lines, ""]
    lines += ["## Key excerpts", ""]
    for user, reply in picked:
        link = user.link
        lines += [
            f"### {user.day} · turn {user.number}",
            "",
            f"[{link}](../{link.removeprefix('sessions/')})",
        ]
        lines.append(f"user: {one_line(user.text, QUOTE_CHARS)}")
        if reply is not None:
            lines.append(f"assistant: {one_line(reply.text, REPLY_CHARS)}")
        lines.append("")
    if not picked:
        lines += ["No user messages this month.", ""]
    return "\n".join(lines)
