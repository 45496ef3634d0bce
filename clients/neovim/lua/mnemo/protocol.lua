--- The mnemo protocol as the Neovim client sees it: every custom method name, once.
--- Mirrors docs/protocol.md and server/mnemo/lsp/protocol.py; change all three together.
local M = {}

-- Memory (client -> server requests)
M.MEMORY_SEARCH = 'mnemo/memorySearch' -- {query, maxResults?, minScore?, sources?, filters?, onePerFile?} -> {results, mode, ...}
-- filters: {tags?, kinds?, since?, until?, project?, type?, channel?} (dates YYYY-MM-DD; docs/protocol.md)
M.MEMORY_GET = 'mnemo/memoryGet' -- {path, from?, lines?} -> {path, from, lines, totalLines, text}
M.STATUS = 'mnemo/status' -- {} -> status object
M.INDEX_STATUS = 'mnemo/indexStatus' -- server -> client notification: the status object
--- The status object's `state` ('released': the index was handed to another mnemo process).
M.INDEX_STATES = { 'not indexed', 'indexing', 'ready', 'error', 'released' }

-- Chat and sessions (client -> server requests)
M.CHAT = 'mnemo/chat' -- {message, sessionId?, kind?} -> {text, citations, sessionId, finishReason, notes, ...}
M.CHAT_DELTA = 'mnemo/chatDelta' -- server -> client notification: {sessionId, requestId?, delta}
M.STEER = 'mnemo/steer' -- {sessionId, message} -> {state}: 'injected' | 'queued' | 'idle' (send it with mnemo/chat)
M.SESSIONS = 'mnemo/sessions' -- {} -> {sessions}
M.NEW_SESSION = 'mnemo/newSession' -- {kind?, previousSessionId?} -> {sessionId, kind, snapshot}
M.RESET_SESSION = 'mnemo/resetSession' -- {sessionId} -> {sessionId, kind, snapshot, archived}
M.FLUSH = 'mnemo/flush' -- {sessionId, dryRun?} -> {sessionId, written, refused, noReply, kept, candidates, skipped, dryRun, items, rejected, ...}
M.CMD_FLUSH = 'mnemo.flush' -- [{sessionId, dryRun?}]

-- Approvals
M.APPROVAL_REQUEST = 'mnemo/approvalRequest' -- server -> client request: {id, tool, command?, summary, reason, rule, timeoutS, ...} -> {choice}
M.APPROVALS_CHANGED = 'mnemo/approvalsChanged' -- server -> client notification: {pending}
M.APPROVALS = 'mnemo/approvals' -- {} -> {approvals}
M.RESOLVE_APPROVAL = 'mnemo/resolveApproval' -- {id, choice} -> {resolved, message?}
M.EXEC = 'mnemo/exec' -- {command, session?, approvalTimeoutS?} -> {ok, output, decision, rule, exitCode, approval}
M.AUDIT_VERIFY = 'mnemo/auditVerify' -- {} -> {ok, entries, problems, path}
M.RISK_STATUS = 'mnemo/riskStatus' -- {} -> {level, sessions}

-- Session archive
M.ARCHIVE = 'mnemo/archive' -- {month?, dryRun?} -> {dryRun, months, already, skipped, removed}
M.MARK_SESSION = 'mnemo/markSession' -- {sessionId, private?, archiveConsent?} -> {sessionId, private, archiveConsent}

-- Feedback and consolidation
M.FEEDBACK = 'mnemo/feedback' -- {sessionId, turn?, useful} -> {sessionId, turn, useful, signal, chunks}
M.CONSOLIDATE = 'mnemo/consolidate' -- {useModel?} -> {clusters, model, notes, diff, edit}
M.CMD_CONSOLIDATE = 'mnemo.consolidate' -- [{useModel?}]: the proposal as workspace/applyEdit

-- Security
M.SECURITY_AUDIT = 'mnemo/securityAudit' -- {} -> {workspace, worst, exitCode, counts, findings}

-- Version control
M.COMMIT = 'mnemo/commit' -- {message?, force?, initRepo?} -> {commit, message, files}; secrets: RequestFailed, data.secrets
M.HISTORY = 'mnemo/history' -- {path, line?} -> {path, line, entries}
M.CMD_COMMIT = 'mnemo.commit' -- [{message?, force?, initRepo?}], as mnemo/commit
M.CMD_HISTORY = 'mnemo.history' -- [{path, line?}], as mnemo/history

-- workspace/executeCommand commands
M.CMD_REINDEX = 'mnemo.reindex' -- [{full?}] -> status object

--- Answers to mnemo/approvalRequest.
---@enum mnemo.ApprovalChoice
M.choice = {
  allow_once = 'allow_once',
  always = 'always',
  deny = 'deny',
}

--- JSON-RPC error codes the client tells apart.
M.errors = {
  method_not_found = -32601,
  invalid_params = -32602,
  request_cancelled = -32800,
  request_failed = -32803,
}

return M
