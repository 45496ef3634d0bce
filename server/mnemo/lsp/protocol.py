"""The custom LSP contract: method names and their params, validated. Mirrored by docs/protocol.md."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams

MEMORY_SEARCH = "mnemo/memorySearch"
MEMORY_GET = "mnemo/memoryGet"
STATUS = "mnemo/status"
INDEX_STATUS = "mnemo/indexStatus"
"""Server -> client notification whenever the index state changes (for status bars)."""
INDEX_STATES = ("not indexed", "indexing", "ready", "error", "released")
"""The ``state`` of mnemo/status and mnemo/indexStatus (``released``: this process handed the index to
another mnemo process, see mnemo.memory.sharing)."""

CMD_REINDEX = "mnemo.reindex"

# Policy and approvals (docs/protocol.md, "Policy and approvals")
APPROVAL_REQUEST = "mnemo/approvalRequest"
"""Server -> client request: approve a tool call; answered with ``{"choice": ...}``."""
APPROVALS_CHANGED = "mnemo/approvalsChanged"
"""Server -> client notification: the pending approvals changed (``{"pending": n}``)."""
APPROVALS = "mnemo/approvals"
RESOLVE_APPROVAL = "mnemo/resolveApproval"
EXEC = "mnemo/exec"
AUDIT_VERIFY = "mnemo/auditVerify"
RISK_STATUS = "mnemo/riskStatus"
SECURITY_AUDIT = "mnemo/securityAudit"
"""Client -> server request, no params; the result is ``wire.security_report`` (docs/protocol.md)."""

COMMIT = "mnemo/commit"
HISTORY = "mnemo/history"
CMD_COMMIT = "mnemo.commit"
CMD_HISTORY = "mnemo.history"
DIAGNOSTIC_SOURCE = "mnemo"


class RequestFailed(JsonRpcException):
    """LSP's RequestFailed: the request was valid but the server could not do it (message says why)."""

    CODE = -32803


def to_plain(value: Any) -> Any:
    """pygls hands custom params over as namedtuples; turn them back into dicts and lists."""
    if hasattr(value, "_asdict"):
        return {k: to_plain(v) for k, v in value._asdict().items()}
    if isinstance(value, dict):
        return {k: to_plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_plain(v) for v in value]
    return value


def _invalid(message: str) -> JsonRpcInvalidParams:
    return JsonRpcInvalidParams(message)


def _get(raw: dict[str, Any], key: str, kind: type | tuple[type, ...], required: bool = False) -> Any:
    value = raw.get(key)
    if value is None:
        if required:
            raise _invalid(f"'{key}' is required")
        return None
    if isinstance(value, bool) and kind in (int, float, (int, float)):
        raise _invalid(f"'{key}' must be a number, got {value!r}")
    if not isinstance(value, kind):
        raise _invalid(f"'{key}' has the wrong type: {value!r}")
    return value


@dataclass(frozen=True)
class SearchParams:
    query: str
    max_results: int | None
    min_score: float | None
    sources: list[str] | None
    filters: dict[str, Any] | None = None
    """Checked by the core (:func:`mnemo.search.filters.check_filters`)."""
    one_per_file: bool | None = None
    """Only each file's best chunk (None: ``[search] one_per_file``)."""

    @classmethod
    def parse(cls, params: Any) -> SearchParams:
        raw = to_plain(params) or {}
        if not isinstance(raw, dict):
            raise _invalid("params must be an object")
        query = _get(raw, "query", str, required=True)
        max_results = _get(raw, "maxResults", int)
        if max_results is not None and not 1 <= max_results <= 200:
            raise _invalid("'maxResults' must be between 1 and 200")
        min_score = _get(raw, "minScore", (int, float))
        sources = _get(raw, "sources", list)
        filters = _get(raw, "filters", dict)
        one_per_file = _get(raw, "onePerFile", bool)
        return cls(
            query,
            max_results,
            None if min_score is None else float(min_score),
            sources,
            filters,
            one_per_file,
        )


@dataclass(frozen=True)
class GetParams:
    path: str
    from_line: int | None
    lines: int | None

    @classmethod
    def parse(cls, params: Any) -> GetParams:
        raw = to_plain(params) or {}
        if not isinstance(raw, dict):
            raise _invalid("params must be an object")
        if "from" not in raw:  # pygls's namedtuples (rename=True) turn the keyword into ``_N``, its position
            renamed = [key for key in raw if re.fullmatch(r"_\d+", key)]
            if len(renamed) == 1:
                raw["from"] = raw.pop(renamed[0])
        from_line = _get(raw, "from", int)
        lines = _get(raw, "lines", int)
        if from_line is not None and from_line < 1:
            raise _invalid("'from' is 1-based and must be >= 1")
        if lines is not None and lines < 0:
            raise _invalid("'lines' must be >= 0")
        return cls(_get(raw, "path", str, required=True), from_line, lines)


@dataclass(frozen=True)
class CommitParams:
    message: str | None
    force: bool
    init_repo: bool

    @classmethod
    def parse(cls, params: Any) -> CommitParams:
        raw = to_plain(params) or {}
        if not isinstance(raw, dict):
            raise _invalid("params must be an object")
        return cls(
            _get(raw, "message", str), bool(_get(raw, "force", bool)), bool(_get(raw, "initRepo", bool))
        )


@dataclass(frozen=True)
class HistoryParams:
    path: str
    line: int | None

    @classmethod
    def parse(cls, params: Any) -> HistoryParams:
        raw = to_plain(params) or {}
        if not isinstance(raw, dict):
            raise _invalid("params must be an object")
        line = _get(raw, "line", int)
        if line is not None and line < 1:
            raise _invalid("'line' is 1-based and must be >= 1")
        return cls(_get(raw, "path", str, required=True), line)


@dataclass(frozen=True)
class ExecParams:
    command: str
    session: str
    approval_timeout_s: float | None

    @classmethod
    def parse(cls, params: Any) -> ExecParams:
        raw = to_plain(params) or {}
        if not isinstance(raw, dict):
            raise _invalid("params must be an object")
        command = _get(raw, "command", str, required=True)
        if not command.strip():
            raise _invalid("'command' must not be empty")
        timeout = _get(raw, "approvalTimeoutS", (int, float))
        if timeout is not None and not 0 < timeout <= 3600:
            raise _invalid("'approvalTimeoutS' must be in (0, 3600]")
        session = _get(raw, "session", str) or "lsp"
        return cls(command, session, None if timeout is None else float(timeout))


@dataclass(frozen=True)
class ResolveApprovalParams:
    id: str
    choice: str

    @classmethod
    def parse(cls, params: Any) -> ResolveApprovalParams:
        raw = to_plain(params) or {}
        if not isinstance(raw, dict):
            raise _invalid("params must be an object")
        choice = _get(raw, "choice", str, required=True)
        if choice not in ("allow_once", "always", "deny"):
            raise _invalid("'choice' must be allow_once, always or deny")
        return cls(_get(raw, "id", str, required=True), choice)


# Chat (docs/protocol.md, "Chat")
CHAT = "mnemo/chat"
CHAT_DELTA = "mnemo/chatDelta"
"""Server -> client notification: ``{"sessionId", "requestId", "delta"}`` while a reply streams."""
STEER = "mnemo/steer"
"""Client -> server request: ``{"sessionId", "message"}`` into the session's running turn -> ``{"state"}``."""
SESSIONS = "mnemo/sessions"
NEW_SESSION = "mnemo/newSession"
RESET_SESSION = "mnemo/resetSession"
FLUSH = "mnemo/flush"
CMD_FLUSH = "mnemo.flush"
SESSION_KINDS = ("private", "group")


def _object(params: Any) -> dict[str, Any]:
    raw = to_plain(params) or {}
    if not isinstance(raw, dict):
        raise _invalid("params must be an object")
    return raw


def _kind(raw: dict[str, Any]) -> str:
    kind = _get(raw, "kind", str) or "private"
    if kind not in SESSION_KINDS:
        raise _invalid(f"'kind' must be one of {', '.join(SESSION_KINDS)}, got {kind!r}")
    return str(kind)


@dataclass(frozen=True)
class ChatParams:
    message: str
    session_id: str | None
    kind: str

    @classmethod
    def parse(cls, params: Any) -> ChatParams:
        raw = _object(params)
        message = _get(raw, "message", str, required=True)
        if not message.strip():
            raise _invalid("'message' is empty")
        return cls(message, _get(raw, "sessionId", str), _kind(raw))


@dataclass(frozen=True)
class SteerParams:
    """``{"sessionId", "message"}`` for mnemo/steer."""

    session_id: str
    message: str

    @classmethod
    def parse(cls, params: Any) -> SteerParams:
        raw = _object(params)
        message = _get(raw, "message", str, required=True)
        if not message.strip():
            raise _invalid("'message' is empty")
        return cls(_get(raw, "sessionId", str, required=True), message)


@dataclass(frozen=True)
class SessionParams:
    """``{"sessionId"}`` for mnemo/resetSession and mnemo/flush; ``{"kind"?, "previousSessionId"?}``
    for mnemo/newSession."""

    session_id: str | None
    kind: str
    previous: str | None

    @classmethod
    def parse(cls, params: Any, *, require_session: bool = True) -> SessionParams:
        raw = _object(params)
        return cls(
            _get(raw, "sessionId", str, required=require_session),
            _kind(raw),
            _get(raw, "previousSessionId", str),
        )


@dataclass(frozen=True)
class FlushParams:
    """``{"sessionId", "dryRun"?}`` for mnemo/flush (and the mnemo.flush command's argument)."""

    session_id: str
    dry_run: bool

    @classmethod
    def parse(cls, params: Any) -> FlushParams:
        raw = _object(params)
        return cls(_get(raw, "sessionId", str, required=True), bool(_get(raw, "dryRun", bool)))


# Feedback and consolidation (docs/protocol.md, "Feedback and consolidation")
FEEDBACK = "mnemo/feedback"
"""Client -> server request: ``{"sessionId", "turn"?, "useful"}`` on a chat turn's recalled memories."""
CONSOLIDATE = "mnemo/consolidate"
"""Client -> server request: ``{"useModel"?}`` -> the clusters, a diff and a WorkspaceEdit to review."""
CMD_CONSOLIDATE = "mnemo.consolidate"
"""Command: propose the consolidation as a workspace/applyEdit the editor asks the user to confirm."""


@dataclass(frozen=True)
class FeedbackParams:
    """``{"sessionId", "turn"?, "useful"}`` for mnemo/feedback (``turn``: 1-based, default the latest)."""

    session_id: str
    turn: int | None
    useful: bool

    @classmethod
    def parse(cls, params: Any) -> FeedbackParams:
        raw = _object(params)
        turn = _get(raw, "turn", int)
        if turn is not None and turn < 1:
            raise _invalid("'turn' is 1-based and must be >= 1")
        useful = _get(raw, "useful", bool, required=True)
        return cls(_get(raw, "sessionId", str, required=True), turn, bool(useful))


@dataclass(frozen=True)
class ConsolidateParams:
    """``{"useModel"?}`` for mnemo/consolidate and the mnemo.consolidate command (default true: the
    chat model merges when one is configured)."""

    use_model: bool

    @classmethod
    def parse(cls, params: Any) -> ConsolidateParams:
        raw = _object(params)
        use_model = _get(raw, "useModel", bool)
        return cls(True if use_model is None else bool(use_model))


# Session archive (docs/protocol.md, "Session archive")
ARCHIVE = "mnemo/archive"
"""Client -> server request: ``{"month"?, "dryRun"?}`` -> the archive report (``wire.archive_report``)."""
MARK_SESSION = "mnemo/markSession"
"""Client -> server request: ``{"sessionId", "private"?, "archiveConsent"?}`` -> the session's marks."""


@dataclass(frozen=True)
class ArchiveParams:
    """``{"month"?, "dryRun"?}`` for mnemo/archive (the month is checked by the core)."""

    month: str | None
    dry_run: bool

    @classmethod
    def parse(cls, params: Any) -> ArchiveParams:
        raw = _object(params)
        return cls(_get(raw, "month", str), bool(_get(raw, "dryRun", bool)))


@dataclass(frozen=True)
class MarkSessionParams:
    """``{"sessionId", "private"?, "archiveConsent"?}`` for mnemo/markSession (at least one mark)."""

    session_id: str
    private: bool | None
    archive_consent: bool | None

    @classmethod
    def parse(cls, params: Any) -> MarkSessionParams:
        raw = _object(params)
        session_id = _get(raw, "sessionId", str, required=True)
        private, consent = _get(raw, "private", bool), _get(raw, "archiveConsent", bool)
        if private is None and consent is None:
            raise _invalid("give 'private' or 'archiveConsent' (or both)")
        return cls(session_id, private, consent)
