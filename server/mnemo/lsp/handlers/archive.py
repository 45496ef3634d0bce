"""``mnemo/archive`` and ``mnemo/markSession`` (:mod:`mnemo.agent.archive`), and the server's daily run:
after an index sync, at most once a day, finished months are archived (``[sessions] auto_archive``)."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any

from pygls.exceptions import JsonRpcInvalidParams

from mnemo import wire
from mnemo.errors import MnemoError
from mnemo.lsp import protocol
from mnemo.lsp.server import MnemoLanguageServer
from mnemo.memory.limits import InvalidInput

log = logging.getLogger(__name__)


class DailyArchive:
    """Runs the archive after an index sync, once a day per process (the archive's own state says whether
    any process ran it today, so the editor's server and a gateway never both do)."""

    def __init__(self, server: MnemoLanguageServer) -> None:
        self.server = server
        self.checked = ""
        self.task: asyncio.Task[None] | None = None

    def __call__(self) -> None:
        """An index listener: on the event loop, after each sync."""
        today = datetime.now(UTC).strftime("%Y-%m-%d")
        if self.checked == today or self.server.services is None or (self.task and not self.task.done()):
            return
        self.checked = today
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        services = self.server.services
        if services is None or not services.settings.sessions.auto_archive:
            return
        try:
            report = await asyncio.to_thread(services.archive, due_only=True)
        except Exception:  # the editor goes on; the next day tries again
            log.exception("the daily session archive failed")
            return
        if report is not None and report.months:
            log.info("archived %d month(s) of sessions", len(report.months))


def register(server: MnemoLanguageServer) -> None:
    server.index_listeners.append(DailyArchive(server))

    @server.feature(protocol.ARCHIVE)
    async def archive(ls: MnemoLanguageServer, params: Any) -> dict[str, Any]:
        p = protocol.ArchiveParams.parse(params)
        try:
            report = await asyncio.to_thread(ls.core.archive, p.month, dry_run=p.dry_run)
        except InvalidInput as exc:  # a month that is not YYYY-MM or not finished
            raise JsonRpcInvalidParams(str(exc)) from exc
        except MnemoError as exc:  # another process is archiving
            raise protocol.RequestFailed(str(exc)) from exc
        assert report is not None
        return wire.archive_report(report)

    @server.feature(protocol.MARK_SESSION)
    async def mark_session(ls: MnemoLanguageServer, params: Any) -> dict[str, Any]:
        p = protocol.MarkSessionParams.parse(params)
        flags = {k: v for k, v in (("private", p.private), ("archive", p.archive_consent)) if v is not None}
        store = ls.core.agent.store
        try:
            found = await asyncio.to_thread(lambda: store.mark(p.session_id, **flags))
        except MnemoError as exc:  # no such session, a bad id
            raise JsonRpcInvalidParams(str(exc)) from exc
        return wire.session_flags(p.session_id, found)
