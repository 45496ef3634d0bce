"""mnemo/memorySearch and mnemo/memoryGet: params in, one core call, result out."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from pygls.exceptions import JsonRpcInvalidParams

from mnemo import citations
from mnemo.errors import MnemoError
from mnemo.limits import InvalidInput
from mnemo.lsp import protocol
from mnemo.lsp.server import MnemoLanguageServer
from mnemo.workspace.layout import WorkspacePathError

SOURCES = ("memory", "skills", "sessions")


def _get_params(params: Any) -> Any:
    """pygls turns custom params into namedtuples with ``rename=True``, so the keyword ``from`` arrives as
    ``_N`` (its position) and would be ignored: give it its name back."""
    raw = protocol.to_plain(params)
    if isinstance(raw, dict) and "from" not in raw:
        renamed = [key for key in raw if re.fullmatch(r"_\d+", key)]
        if len(renamed) == 1:
            raw["from"] = raw.pop(renamed[0])
    return raw


def register(server: MnemoLanguageServer) -> None:
    @server.feature(protocol.MEMORY_SEARCH)
    async def memory_search(ls: MnemoLanguageServer, params: Any) -> dict[str, Any]:
        p = protocol.SearchParams.parse(params)
        unknown = [s for s in p.sources or [] if s not in SOURCES]
        if unknown:  # else an unknown source would silently find nothing
            raise JsonRpcInvalidParams(f"'sources' may hold {', '.join(SOURCES)}, got {unknown!r}")
        from mnemo.embeddings import EmbeddingError  # NumPy: loaded by then, not before `initialize`

        try:
            outcome = await asyncio.to_thread(
                ls.core.memory.search,
                p.query,
                max_results=p.max_results,
                min_score=p.min_score,
                sources=p.sources,
                filters=p.filters,
            )
        except InvalidInput as exc:  # a bound the core checks (maxResults, filters)
            raise JsonRpcInvalidParams(str(exc)) from exc
        except (MnemoError, EmbeddingError) as exc:
            raise protocol.RequestFailed(str(exc)) from exc
        return outcome.as_dict()

    @server.feature(protocol.MEMORY_GET)
    async def memory_get(ls: MnemoLanguageServer, params: Any) -> dict[str, Any]:
        p = protocol.GetParams.parse(_get_params(params))
        try:
            path, from_line, lines = citations.get_args(p.path, p.from_line, p.lines)  # "a.md#L3-L9"
            return await asyncio.to_thread(ls.core.memory.get, path, from_line, lines)
        except (WorkspacePathError, InvalidInput) as exc:
            raise JsonRpcInvalidParams(str(exc)) from exc
        except OSError as exc:
            raise protocol.RequestFailed(f"{p.path}: {exc.strerror or exc}") from exc
