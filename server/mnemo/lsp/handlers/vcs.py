"""mnemo/commit and mnemo/history (and the same as commands): params in, one core call, result out."""

from __future__ import annotations

import asyncio
from typing import Any

from pygls.exceptions import JsonRpcInvalidParams

from mnemo import wire
from mnemo.lsp import protocol
from mnemo.lsp.server import MnemoLanguageServer
from mnemo.memory import citations
from mnemo.memory.limits import InvalidInput
from mnemo.workspace.layout import WorkspacePathError


async def commit(ls: MnemoLanguageServer, params: Any) -> dict[str, Any]:
    from mnemo.editor.vcs import SecretsInCommit, VcsError  # loaded on first use, not before `initialize`

    p = protocol.CommitParams.parse(params)
    try:
        result = await asyncio.to_thread(
            ls.core.editor.commit, message=p.message, force=p.force, init_repo=p.init_repo
        )
    except SecretsInCommit as exc:
        findings = [{"path": path, "line": line, "rule": rule} for path, line, rule in exc.findings]
        raise protocol.RequestFailed(str(exc), data={"secrets": findings}) from exc
    except VcsError as exc:
        raise protocol.RequestFailed(str(exc)) from exc
    return wire.commit_result(result)


async def history(ls: MnemoLanguageServer, params: Any) -> dict[str, Any]:
    from mnemo.editor.vcs import VcsError

    p = protocol.HistoryParams.parse(params)
    try:
        cited = citations.parse_citation(p.path)  # "MEMORY.md#L12": line 12 unless 'line' says otherwise
        line = p.line if p.line is not None else cited.start
        entries = await asyncio.to_thread(ls.core.editor.history, cited.path, line)
    except (WorkspacePathError, InvalidInput) as exc:
        raise JsonRpcInvalidParams(str(exc)) from exc
    except VcsError as exc:
        raise protocol.RequestFailed(str(exc)) from exc
    return wire.history(cited.path, line, entries)


def register(server: MnemoLanguageServer) -> None:
    server.feature(protocol.COMMIT)(commit)
    server.feature(protocol.HISTORY)(history)

    @server.command(protocol.CMD_COMMIT)
    async def commit_command(ls: MnemoLanguageServer, *args: Any) -> dict[str, Any]:
        return await commit(ls, args[0] if args else {})

    @server.command(protocol.CMD_HISTORY)
    async def history_command(ls: MnemoLanguageServer, *args: Any) -> dict[str, Any]:
        return await history(ls, args[0] if args else {})
