"""Search filters: which chunks a search may consider, by file kind, front matter and date.

A filter restricts the *candidates* before anything is ranked: the allowed chunk ids are read first
(:meth:`mnemo.index.api.IndexReader.allowed_ids`), and both the vector and the keyword
candidate lists are drawn from them alone, so a filter never empties a top-k that had matches further
down. Ranking is unchanged.

- ``kinds``: any of :data:`KINDS` (``memory`` is MEMORY.md, ``topic`` another evergreen note under
  ``memory/``, ``evergreen`` both);
- ``tags``: every one given must be among the file's front-matter tags (case-insensitive);
- ``project``, ``type``: the front-matter field equals it (case-insensitive);
- ``since``/``until``: inclusive bounds on the note's date: a daily note's date from its name, else the
  front matter's ``date``; a file without either is left out when a bound is given (a session archive is
  dated by the last day of its month);
- ``channel``: session archives of that channel (``editor``, ``telegram``...): the archive's
  ``channel:<name>`` tag (:func:`channel_tag`), added to ``tags``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date

from mnemo.memory.limits import InvalidInput, check_day

KINDS = ("memory", "topic", "evergreen", "daily", "snapshot", "skill", "session", "archive")
MAX_VALUES = 50
"""Most tags or kinds one filter may list."""
_FIELDS = ("tags", "kinds", "since", "until", "project", "type", "channel")


@dataclass(frozen=True)
class SearchFilters:
    tags: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    since: date | None = None
    until: date | None = None
    project: str | None = None
    type: str | None = None

    @property
    def empty(self) -> bool:
        return self == SearchFilters()


def _strings(name: str, value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise InvalidInput(f"filters.{name} must be a list of strings, got {value!r}")
    if len(value) > MAX_VALUES:
        raise InvalidInput(f"filters.{name} may list at most {MAX_VALUES} values, got {len(value)}")
    out = tuple(dict.fromkeys(v.strip().lstrip("#").strip().lower() for v in value if v.strip()))
    return out


def _string(name: str, value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"filters.{name} must be a string, got {value!r}")
    return value.strip() or None


def channel_tag(channel: str) -> str:
    """The front-matter tag a session archive of ``channel`` carries (``channel:telegram``)."""
    return "channel:" + re.sub(r"[\s,\[\]#]+", "-", channel.strip().lower())


def check_filters(value: object) -> SearchFilters | None:
    """A ``filters`` parameter (a JSON object, a :class:`SearchFilters` or None) checked; None when it
    filters nothing. Raises :class:`~mnemo.memory.limits.InvalidInput` with the field at fault."""
    if value is None or isinstance(value, SearchFilters):
        return None if value is None or value.empty else value
    if not isinstance(value, Mapping):
        raise InvalidInput(f"'filters' must be an object, got {value!r}")
    unknown = sorted(set(value) - set(_FIELDS))
    if unknown:
        raise InvalidInput(f"unknown filter(s) {', '.join(unknown)}; known: {', '.join(_FIELDS)}")
    kinds = _strings("kinds", value.get("kinds"))
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        raise InvalidInput(f"unknown kind(s) {', '.join(bad)} in filters.kinds; known: {', '.join(KINDS)}")
    channel = _string("channel", value.get("channel"))
    found = SearchFilters(
        tags=_strings("tags", value.get("tags")) + ((channel_tag(channel),) if channel else ()),
        kinds=kinds,
        since=check_day("filters.since", value.get("since")),
        until=check_day("filters.until", value.get("until")),
        project=_string("project", value.get("project")),
        type=_string("type", value.get("type")),
    )
    if found.since and found.until and found.since > found.until:
        raise InvalidInput(f"filters.since ({found.since}) is after filters.until ({found.until})")
    return None if found.empty else found
