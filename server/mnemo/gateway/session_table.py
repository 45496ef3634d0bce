"""Which transcript a session key uses now, and when a key starts a fresh one (its reset policy).

The table lives in ``<index dir>/gateway-sessions.json`` (written atomically). Losing it loses nothing:
transcripts stay in ``sessions/``; a key whose entry is gone starts at generation 0 again, which is the
same transcript as before the first reset.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from mnemo.agent.session_keys import session_id_for

from .settings import SessionPolicy

log = logging.getLogger(__name__)


@dataclass
class SessionEntry:
    key: str
    agent: str
    kind: str
    generation: int
    last: float
    """Time of the last message (epoch seconds)."""
    messages: int = 0

    @property
    def session_id(self) -> str:
        return session_id_for(self.key, self.generation)


def is_stale(policy: SessionPolicy, last: float, now: float) -> bool:
    """Whether a session last used at ``last`` should give way to a fresh one at ``now``."""
    if policy.reset == "idle":
        return now - last > policy.idle_minutes * 60
    if policy.reset == "daily":
        current = datetime.fromtimestamp(now)
        boundary = current.replace(hour=policy.reset_hour, minute=0, second=0, microsecond=0)
        if boundary > current:
            boundary -= timedelta(days=1)
        return last < boundary.timestamp()
    return False


class SessionTable:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._entries: dict[str, SessionEntry] = {}
        self._load()

    def _load(self) -> None:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
            for key, item in raw.get("sessions", {}).items():
                self._entries[key] = SessionEntry(
                    key,
                    item["agent"],
                    item["kind"],
                    int(item["generation"]),
                    float(item["last"]),
                    int(item.get("messages", 0)),
                )
        except FileNotFoundError:
            pass
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("%s is unreadable (%s); sessions start from their first transcript", self.path, exc)

    def _save(self) -> None:
        data = {
            "sessions": {
                k: {
                    "agent": e.agent,
                    "kind": e.kind,
                    "generation": e.generation,
                    "last": e.last,
                    "messages": e.messages,
                }
                for k, e in self._entries.items()
            }
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, self.path)

    def use(
        self, key: str, agent: str, kind: str, policy: SessionPolicy, now: float
    ) -> tuple[SessionEntry, bool]:
        """The entry for ``key`` after a message at ``now``; True when the policy started a fresh one."""
        with self._lock:
            entry = self._entries.get(key)
            fresh = False
            if entry is None:
                entry = SessionEntry(key, agent, kind, 0, now)
                self._entries[key] = entry
            elif entry.messages and is_stale(policy, entry.last, now):
                entry.generation += 1
                entry.messages = 0
                fresh = True
            entry.last = now
            entry.messages += 1
            self._save()
            return entry, fresh

    def reset(self, key: str) -> SessionEntry | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                entry.generation += 1
                entry.messages = 0
                self._save()
            return entry

    def get(self, key: str) -> SessionEntry | None:
        with self._lock:
            return self._entries.get(key)

    def list(self) -> list[dict[str, Any]]:
        with self._lock:
            return [
                {
                    "sessionKey": e.key,
                    "sessionId": e.session_id,
                    "agent": e.agent,
                    "kind": e.kind,
                    "generation": e.generation,
                    "last": e.last,
                    "messages": e.messages,
                }
                for e in sorted(self._entries.values(), key=lambda e: -e.last)
            ]
