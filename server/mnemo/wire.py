"""The wire format: the core's typed results as the camelCase JSON of docs/protocol.md.

Shared by the fronts (the LSP server, the gateway, the CLI's ``--json``); the core never imports it
(``tests/test_architecture.py``). One function per result type, so every front answers alike. Imports of
the core are for type checking only: loading this module loads nothing else (the LSP server imports it
before ``initialize`` is answered).
"""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mnemo.agent.archive import ArchiveReport
    from mnemo.agent.flush import FlushReport
    from mnemo.agent.grounding import Grounding
    from mnemo.agent.providers.auto import ChatSelection
    from mnemo.agent.reply import ChatReply, NewSession, SessionInfo
    from mnemo.agent.tools import ReplyCitation
    from mnemo.editor.consolidator import Proposal
    from mnemo.editor.vcs import CommitResult, HistoryEntry
    from mnemo.gateway.core import GatewayReply
    from mnemo.memory.reading import FileLines
    from mnemo.memory.status import IndexStatus
    from mnemo.memory.turns import FeedbackResult
    from mnemo.policy.approvals import ApprovalRequest
    from mnemo.search.results import ScoreParts, SearchHit, SearchOutcome
    from mnemo.security.audit import SecurityReport
    from mnemo.services import ServerStatus

Json = dict[str, Any]


# -- memory ---------------------------------------------------------------------------------------------
def score_parts(parts: ScoreParts) -> Json:
    return {
        "vector": None if parts.vector is None else round(parts.vector, 4),
        "text": round(parts.text, 4),
        "bm25": round(parts.bm25, 4),
        "decay": round(parts.decay, 4),
        "weight": parts.weight,
        "score": round(parts.score, 4),
        "mmrRank": parts.mmr_rank,
        "ageDays": parts.age_days,
        "superseded": parts.superseded,
        "boost": round(parts.boost, 4),
        "evidence": parts.evidence,
        "line": parts.line,
        "reasons": list(parts.reasons),
    }


def search_hit(hit: SearchHit) -> Json:
    return {
        "path": hit.path,
        "startLine": hit.start_line,
        "endLine": hit.end_line,
        "score": round(hit.parts.score, 4),
        "snippet": hit.snippet,
        "source": hit.source,
        "citation": hit.citation,
        "heading": hit.heading,
        "parts": score_parts(hit.parts),
    }


def search_outcome(outcome: SearchOutcome) -> Json:
    """mnemo/memorySearch, the gateway's ``memory.search``, ``mnemo search --json``."""
    return {
        "results": [search_hit(hit) for hit in outcome.results],
        "mode": outcome.mode,
        "provider": outcome.provider,
        "model": outcome.model,
        "query": outcome.query,
        "notes": list(outcome.notes),
        "weights": dict(outcome.weights),
    }


def file_lines(got: FileLines) -> Json:
    """mnemo/memoryGet, the gateway's ``memory.get``, ``mnemo get --json``."""
    return {
        "path": got.path,
        "from": got.start,
        "lines": got.lines,
        "totalLines": got.total_lines,
        "text": got.text,
    }


def index_status(status: IndexStatus) -> Json:
    """mnemo/status and mnemo/indexStatus (without ``chatModel``), ``mnemo status --json``."""
    out: Json = {
        "workspace": status.workspace,
        "index": status.index,
        "state": status.state,
        "progress": {
            "done": status.progress.done,
            "total": status.progress.total,
            "current": status.progress.current,
        },
        "message": status.message,
        "files": status.files,
        "chunks": status.chunks,
        "provider": status.provider,
        "model": status.model,
        "dims": status.dims,
        "mode": status.mode,
        "vectors": {
            "embedded": status.vectors.embedded,
            "chunks": status.vectors.chunks,
            "embedding": status.vectors.embedding,
        },
        "notes": list(status.notes),
        "configProblems": list(status.config_problems),
        "fileProblems": [{"path": p.path, "problem": p.problem} for p in status.file_problems],
    }
    if status.writer is not None:
        out["writer"] = status.writer
    if status.role is not None:
        out["role"] = status.role
    return out


def server_status(status: ServerStatus) -> Json:
    """mnemo/status: the index status and ``chatModel``."""
    return {**index_status(status.index), "chatModel": chat_model(status.chat_model)}


# -- chat -----------------------------------------------------------------------------------------------
def chat_model(selection: ChatSelection | None) -> Json | None:
    if selection is None:
        return None
    return {**asdict(selection), "note": selection.note, "line": selection.line()}


def citation(cited: ReplyCitation) -> Json:
    return {
        "citation": cited.citation,
        "path": cited.path,
        "startLine": cited.start_line,
        "endLine": cited.end_line,
        "score": round(cited.score, 4),
        "source": cited.source,
        "origin": cited.origin,
    }


def citations(cited: Sequence[ReplyCitation]) -> list[Json]:
    return [citation(c) for c in cited]


def grounding(done: Grounding | None) -> Json | None:
    if done is None:
        return None
    return {
        "mode": done.mode,
        "action": done.action,
        "reason": done.reason,
        "added": list(done.added),
        "removed": list(done.removed),
    }


def flush_report(report: FlushReport) -> Json:
    """mnemo/flush, ``mnemo flush --json``, and ``flush`` of a chat reply."""
    return {
        "sessionId": report.session_id,
        "written": list(report.written),
        "refused": list(report.refused),
        "noReply": report.no_reply,
        "kept": report.kept,
        "candidates": report.candidates,
        "skipped": report.skipped,
        "dryRun": report.dry_run,
        "target": report.target,
        "items": [{"text": k.text, "source": k.source, "turn": k.turn} for k in report.items],
        "rejected": [{"text": r.text, "reason": r.reason} for r in report.rejected],
    }


def chat_reply(reply: ChatReply) -> Json:
    """mnemo/chat, ``mnemo chat --json``."""
    return {
        "text": reply.text,
        "citations": citations(reply.citations),
        "sessionId": reply.session_id,
        "finishReason": reply.finish_reason,
        "toolCalls": reply.tool_calls,
        "compacted": reply.compacted,
        "flush": None if reply.flush is None else flush_report(reply.flush),
        "notes": list(reply.notes),
        "promptTokens": reply.prompt_tokens,
        "grounded": grounding(reply.grounding),
        "chatModel": chat_model(reply.chat_model),
    }


def session_info(info: SessionInfo) -> Json:
    return {
        "sessionId": info.session_id,
        "kind": info.kind,
        "title": info.title,
        "updated": info.updated,
        "messages": info.messages,
        "compactions": info.compactions,
    }


def sessions(found: Sequence[SessionInfo]) -> Json:
    """mnemo/sessions, ``mnemo sessions --json``."""
    return {"sessions": [session_info(s) for s in found]}


def new_session(made: NewSession) -> Json:
    """mnemo/newSession; mnemo/resetSession adds ``archived``."""
    out: Json = {"sessionId": made.session_id, "kind": made.kind, "snapshot": made.snapshot}
    if made.archived is not None:
        out["archived"] = made.archived
    return out


def gateway_reply(reply: GatewayReply) -> Json:
    """The gateway's ``chat.send`` and webhook answer."""
    return {
        "text": reply.text,
        "agent": reply.route.agent,
        "sessionKey": reply.route.session_key,
        "sessionId": reply.session_id,
        "kind": reply.route.kind,
        "matchedBy": reply.route.matched_by,
        "freshSession": reply.fresh_session,
        "citations": citations(reply.citations),
        "finishReason": reply.finish_reason,
        "notes": list(reply.notes),
        "seconds": round(reply.seconds, 3),
        "steered": reply.steered,
    }


# -- Git and security -------------------------------------------------------------------------------------
def commit_result(result: CommitResult) -> Json:
    """mnemo/commit."""
    return {
        "commit": result.sha,
        "message": result.message,
        "files": [{"path": f.path, "status": f.status} for f in result.files],
    }


def history(path: str, line: int | None, entries: Sequence[HistoryEntry]) -> Json:
    """mnemo/history."""
    return {
        "path": path,
        "line": line,
        "entries": [
            {"commit": e.sha, "date": e.date, "author": e.author, "subject": e.subject} for e in entries
        ],
    }


def security_report(report: SecurityReport) -> Json:
    """mnemo/securityAudit, ``mnemo security audit --json``."""
    return {
        "workspace": report.workspace,
        "findings": [asdict(f) for f in report.findings],
        "counts": report.counts(),
        "worst": report.worst,
        "exitCode": report.exit_code,
    }


# -- session archive --------------------------------------------------------------------------------------
def archive_report(report: ArchiveReport) -> Json:
    """mnemo/archive, the gateway's sessions.archive, ``mnemo archive --json``."""
    return {
        "dryRun": report.dry_run,
        "months": [
            {
                "path": m.path,
                "month": m.month,
                "context": m.context,
                "channel": m.channel,
                "peer": m.peer,
                "sessions": list(m.sessions),
                "messages": m.messages,
                "summary": m.summary,
                "notes": list(m.notes),
            }
            for m in report.months
        ],
        "already": report.already,
        "skipped": [{"sessionId": s, "reason": r} for s, r in report.skipped],
        "removed": list(report.removed),
    }


def session_flags(session_id: str, flags: dict[str, bool]) -> Json:
    """mnemo/markSession."""
    return {
        "sessionId": session_id,
        "private": flags.get("private", False),
        "archiveConsent": flags.get("archive", False),
    }


# -- feedback and consolidation (issue 18, points 8 and 9) -------------------------------------------------
def feedback_result(result: FeedbackResult) -> Json:
    """mnemo/feedback, the gateway's ``chat.feedback``, ``mnemo feedback --json``."""
    return {
        "sessionId": result.session_id,
        "turn": result.turn,
        "useful": result.useful,
        "signal": result.signal,
        "chunks": [
            {
                "path": c.path,
                "startLine": c.start_line,
                "endLine": c.end_line,
                "citation": f"{c.path}#L{c.start_line}-L{c.end_line}",
            }
            for c in result.chunks
        ],
    }


def consolidation(proposal: Proposal) -> Json:
    """The clusters and diff of mnemo/consolidate and ``mnemo consolidate --json`` (the LSP result adds
    the WorkspaceEdit)."""
    return {
        "clusters": [
            {
                "keep": m.keep.citation,
                "text": m.new_line,
                "how": m.how,
                "note": m.note,
                "lines": [{"citation": c.citation, "text": c.text} for c in m.lines],
            }
            for m in proposal.merges
        ],
        "model": proposal.model,
        "notes": list(proposal.notes),
        "diff": proposal.diff(),
    }


# -- approvals ------------------------------------------------------------------------------------------
def approval_request(request: ApprovalRequest) -> Json:
    """``mnemo/approvalRequest`` params, ``mnemo/approvals`` and ``approvals.list`` items."""
    out: Json = {
        "id": request.id,
        "session": request.session,
        "tool": request.tool,
        "args": request.args,
        "summary": request.summary,
        "decision": request.decision,
        "rule": request.rule,
        "reason": request.reason,
        "timeoutS": request.timeout_s,
        "alwaysPatterns": request.always_patterns,
        "expiresInS": round(max(0.0, request.created + request.timeout_s - time.time()), 1),
    }
    if request.tool == "exec":
        out["command"] = request.args.get("command", "")
    return out
