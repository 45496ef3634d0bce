"""mnemo/memorySearch and mnemo/memoryGet: params in, one core call, result out."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from pygls.exceptions import JsonRpcInvalidParams

from mnemo import wire
from mnemo.errors import MnemoError
from mnemo.lsp import protocol
from mnemo.lsp.server import MnemoLanguageServer
from mnemo.memory import citations
from mnemo.memory.limits import InvalidInput
from mnemo.workspace.layout import WorkspacePathError


def register(server: MnemoLanguageServer) -> None:
    @server.feature(protocol.MEMORY_SEARCH)
    async def memory_search(ls: MnemoLanguageServer, params: Any) -> dict[str, Any]:
        p = protocol.SearchParams.parse(params)
        from mnemo.embeddings import EmbeddingError  # NumPy: loaded by then, not before `initialize`

        cancelled = threading.Event()  # $/cancelRequest: a search still waiting for its turn is skipped
        try:
            outcome = await asyncio.to_thread(
                ls.core.memory.search,
                p.query,
                max_results=p.max_results,
                min_score=p.min_score,
                sources=p.sources,
                filters=p.filters,
                one_per_file=p.one_per_file,
                cancelled=cancelled,
            )
        except asyncio.CancelledError:
            cancelled.set()
            raise
        except InvalidInput as exc:  # a bound the core checks (maxResults, filters, sources)
            raise JsonRpcInvalidParams(str(exc)) from exc
        except (MnemoError, EmbeddingError) as exc:
            raise protocol.RequestFailed(str(exc)) from exc
        return wire.search_outcome(outcome)

    @server.feature(protocol.MEMORY_GET)
    async def memory_get(ls: MnemoLanguageServer, params: Any) -> dict[str, Any]:
        p = protocol.GetParams.parse(params)
        try:
            path, from_line, lines = citations.get_args(p.path, p.from_line, p.lines)  # "a.md#L3-L9"
            return wire.file_lines(await asyncio.to_thread(ls.core.memory.get, path, from_line, lines))
        except (WorkspacePathError, InvalidInput) as exc:
            raise JsonRpcInvalidParams(str(exc)) from exc
        except OSError as exc:
            raise protocol.RequestFailed(f"{p.path}: {exc.strerror or exc}") from exc
