"""The agent's tools: memory_search, memory_get, read_file (workspace only), and write_file/exec, which
only ever run through the policy gate (``mnemo.policy.gate.ToolGate``)."""

from __future__ import annotations

import json
import logging
import posixpath
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Protocol

from mnemo.agent.tool_plugins import Outcome as GateOutcome
from mnemo.agent.tool_plugins import PluginTools, ToolContext, plugin_runner
from mnemo.embeddings import EmbeddingError
from mnemo.errors import MnemoError
from mnemo.memory.citations import get_args
from mnemo.memory.limits import InvalidInput
from mnemo.search.filters import check_filters
from mnemo.workspace.layout import WorkspacePathError, readable_in

if TYPE_CHECKING:
    from mnemo.memory.reading import FileLines
    from mnemo.search.results import SearchHit, SearchOutcome

log = logging.getLogger(__name__)

READ_FILE_MAX_BYTES = 64_000
OBSERVATION_MAX_CHARS = 6_000


class MemoryAccess(Protocol):
    """What the agent needs of memory: :class:`mnemo.memory.service.MemoryService`, or
    :class:`mnemo.memory.sharing.SharedMemory` in a process that is not the index writer."""

    def search(
        self, query: str, *, max_results: int | None = None, record: bool = True, filters: Any = None
    ) -> SearchOutcome:
        """``record=False``: an internal look-up, not counted in the retrieval statistics; ``filters``: a
        JSON object of :mod:`mnemo.search.filters` (tags, kinds, since, until, project, type)."""
        ...

    def get(self, path: str, from_line: int | None = None, lines: int | None = None) -> FileLines: ...


class ToolGate(Protocol):
    """What the agent needs from ``mnemo.policy.gate.ToolGate``."""

    def call(
        self,
        session: str,
        tool: str,
        args: dict[str, Any],
        *,
        run: Callable[[], tuple[str, bool]] | None = None,
    ) -> GateOutcome:
        """``run``: a plugin tool, run by the gate in place of a built-in one once the policy allows it."""
        ...

    def observe_message(self, session: str, text: str) -> int:
        """The user's message, read by the session's risk monitor; returns the session's risk level."""
        ...


@dataclass(frozen=True)
class ReplyCitation:
    """A memory range a reply cites, found by the turn's recall or by a tool (``citations`` of mnemo/chat)."""

    citation: str
    """``path#Lstart-Lend``."""
    path: str
    start_line: int
    end_line: int
    score: float
    source: str
    origin: str
    """``recall`` (the turn's automatic recall) or ``tool`` (memory_search)."""


@dataclass
class ToolResult:
    ok: bool
    output: str
    citations: list[ReplyCitation] = field(default_factory=list)
    decision: str = ""


TOOL_SPECS: dict[str, str] = {
    "memory_search": '{"query": "what to look for", "maxResults": 4, "filters": {"since": "2025-10-01", '
    '"kinds": ["daily"], "tags": ["billing"]}}: hybrid search over memory, with citations; filters optional',
    "memory_get": '{"path": "memory/2026-11-02.md", "from": 1, "lines": 20}: read lines of a memory file',
    "read_file": '{"path": "notes/todo.txt"}: read a text file inside the workspace',
    "write_file": '{"path": "notes/x.md", "content": "..."}: write a file (needs approval by policy)',
    "exec": '{"command": "ls -la"}: run a shell command in the sandbox (needs approval by policy)',
}


def citation_of(hit: SearchHit, origin: str) -> ReplyCitation:
    return ReplyCitation(
        hit.citation, hit.path, hit.start_line, hit.end_line, hit.parts.score, hit.source, origin
    )


def format_hits(hits: Sequence[SearchHit], snippet_chars: int = 400) -> str:
    if not hits:
        return "no results"
    blocks = []
    for hit in hits:
        snippet = " ".join(hit.snippet.split())[:snippet_chars]
        blocks.append(f"[{hit.citation}] {snippet}")
    return "\n".join(blocks)


class ToolBox:
    """Runs one tool call. Never raises for a bad call: the error is the observation the model sees."""

    def __init__(self, memory: MemoryAccess, root: Path, gate: ToolGate | None = None) -> None:
        self.memory = memory
        self.root = root.resolve()
        self.gate = gate
        self._tools: dict[str, Callable[[str, dict[str, Any], bool], ToolResult]] = {
            "memory_search": self._memory_search,
            "memory_get": self._memory_get,
            "read_file": self._read_file,
            "write_file": self._gated("write_file"),
            "exec": self._gated("exec"),
        }
        self.plugins = PluginTools(reserved=self._tools)
        """Tools added at run time (:mod:`mnemo.gateway.plugins`); every call goes through the gate."""

    @property
    def names(self) -> set[str]:
        return set(self._tools) | self.plugins.names()

    def describe(self) -> str:
        builtin = [f"- {name} {spec}" for name, spec in TOOL_SPECS.items()]
        return "\n".join(builtin + self.plugins.describe())

    def run(self, session_id: str, name: str, args: dict[str, Any], *, private: bool = True) -> ToolResult:
        """Run a tool; in a group session (``private=False``) MEMORY.md is never read or returned."""
        tool = self._tools.get(name) or self._plugin(name)
        if tool is None:
            return ToolResult(False, f"unknown tool {name!r}; tools: {', '.join(sorted(self.names))}")
        try:
            result = tool(session_id, args, private)
        except (MnemoError, EmbeddingError, WorkspacePathError, OSError, ValueError, TypeError) as exc:
            result = ToolResult(False, f"{name} failed: {exc}")
        if len(result.output) > OBSERVATION_MAX_CHARS:
            result.output = result.output[:OBSERVATION_MAX_CHARS] + "\n[output cut]"
        return result

    # -- tools ------------------------------------------------------------------------------------
    def _memory_search(self, session_id: str, args: dict[str, Any], private: bool) -> ToolResult:
        query = args.get("query")
        if not isinstance(query, str) or not query.strip():
            return ToolResult(False, "memory_search needs a 'query' string")
        max_results = args.get("maxResults", 4)
        max_results = max_results if isinstance(max_results, int) and 1 <= max_results <= 20 else 4
        filters = args.get("filters")
        try:
            extra: dict[str, Any] = {"filters": filters} if check_filters(filters) is not None else {}
        except InvalidInput as exc:
            return ToolResult(False, f"memory_search: {exc}")
        hits = self.memory.search(query, max_results=max_results, **extra).results
        hits = [h for h in hits if readable_in(h.path, private)]  # MEMORY.md, the other context's archives
        return ToolResult(True, format_hits(hits), [citation_of(h, "tool") for h in hits])

    def _memory_get(self, session_id: str, args: dict[str, Any], private: bool) -> ToolResult:
        start, lines = args.get("from"), args.get("lines")
        try:  # the model often passes the citations its recall showed it: path#L3-L9, path:12
            path, first, count = get_args(
                args.get("path"),
                start if isinstance(start, int) else None,
                lines if isinstance(lines, int) else None,
            )
        except InvalidInput as exc:
            return ToolResult(False, f"memory_get: {exc}")
        if not readable_in(posixpath.normpath(path.replace("\\", "/")).strip("/"), private):
            return ToolResult(False, _refused(path, private))
        got = self.memory.get(path, first, count)
        citation = f"{got.path}#L{got.start}-L{got.start + max(0, got.lines - 1)}"
        return ToolResult(True, f"[{citation}]\n{got.text}")

    def _read_file(self, session_id: str, args: dict[str, Any], private: bool) -> ToolResult:
        rel = args.get("path")
        if not isinstance(rel, str) or not rel:
            return ToolResult(False, "read_file needs a 'path' string")
        path = self.resolve_inside(rel)
        if not readable_in(path.relative_to(self.root).as_posix(), private):
            return ToolResult(False, _refused(rel, private))
        data = path.read_bytes()[: READ_FILE_MAX_BYTES + 1]
        if b"\x00" in data[:8192]:
            return ToolResult(False, f"{rel}: binary file")
        text = data[:READ_FILE_MAX_BYTES].decode("utf-8", errors="replace")
        cut = "\n[file cut]" if len(data) > READ_FILE_MAX_BYTES else ""
        return ToolResult(True, text + cut)

    def resolve_inside(self, rel: str) -> Path:
        """A workspace path that stays inside the workspace (no '..', no absolute path, no symlink out)."""
        pure = PurePosixPath(rel.replace("\\", "/"))
        if pure.is_absolute() or ".." in pure.parts or "\x00" in rel:
            raise WorkspacePathError(f"{rel}: only paths inside the workspace can be read")
        path = (self.root / pure).resolve()
        if not path.is_relative_to(self.root):
            raise WorkspacePathError(f"{rel}: resolves outside the workspace")
        if not path.is_file():
            raise WorkspacePathError(f"{rel}: no such file")
        return path

    def _plugin(self, name: str) -> Callable[[str, dict[str, Any], bool], ToolResult] | None:
        """A plugin tool as a gated call: the gate decides, asks, audits, then runs it."""
        tool = self.plugins.get(name)
        if tool is None:
            return None

        def runner(session: str, args: dict[str, Any], private: bool) -> Callable[[], tuple[str, bool]]:
            assert self.gate is not None  # _gated refuses first without one
            return plugin_runner(tool, args, ToolContext(session, self.root, private, self.gate))

        return self._gated(name, runner)

    def _gated(
        self,
        name: str,
        runner: Callable[[str, dict[str, Any], bool], Callable[[], tuple[str, bool]]] | None = None,
    ) -> Callable[[str, dict[str, Any], bool], ToolResult]:
        def run(session_id: str, args: dict[str, Any], private: bool) -> ToolResult:
            if self.gate is None:
                return ToolResult(
                    False,
                    f"{name} needs the policy gate: it is not configured in this server, so {name} is "
                    "refused (memory_search, memory_get and read_file still work)",
                    decision="refused",
                )
            if runner is None:
                outcome = self.gate.call(session_id, name, args)
            else:
                outcome = self.gate.call(session_id, name, args, run=runner(session_id, args, private))
            return ToolResult(bool(outcome.ok), str(outcome.output), decision=str(outcome.decision))

        return run


def _refused(path: str, private: bool) -> str:
    """Why a file is not readable in this session (:func:`mnemo.workspace.layout.readable_in`)."""
    if private:
        return f"{path} is a group conversation's archive: not readable in a private session"
    return f"{path} is private: not readable in a group session"


def args_text(name: str, args: dict[str, Any]) -> str:
    return f"{name} {json.dumps(args, ensure_ascii=False)}"
