--- The mnemo protocol as the Neovim client sees it: every custom method name, once.
--- Mirrors docs/protocol.md and server/mnemo/lsp/protocol.py; change all three together.
local M = {}

-- Memory (client -> server requests)
M.MEMORY_SEARCH = 'mnemo/memorySearch' -- {query, maxResults?, minScore?, sources?} -> {results, mode, ...}
M.MEMORY_GET = 'mnemo/memoryGet' -- {path, from?, lines?} -> {path, from, lines, totalLines, text}
M.STATUS = 'mnemo/status' -- {} -> status object
M.INDEX_STATUS = 'mnemo/indexStatus' -- server -> client notification: the status object

-- Chat and sessions (client -> server requests)
M.CHAT = 'mnemo/chat' -- {sessionId?, message} -> {sessionId, ...}
M.CHAT_DELTA = 'mnemo/chatDelta' -- server -> client notification: {sessionId, requestId?, delta}
M.NEW_SESSION = 'mnemo/newSession' -- {} -> {sessionId}
M.FLUSH = 'mnemo/flush' -- {sessionId?} -> flush result

-- Approvals
M.APPROVAL_REQUEST = 'mnemo/approvalRequest' -- server -> client request: {id, tool, command, reason, rule, timeoutS}
M.RESOLVE_APPROVAL = 'mnemo/resolveApproval' -- client -> server request: {id, choice}
M.EXEC = 'mnemo/exec' -- client -> server request: run a command under the policy (may ask for approval)

-- Version control
M.COMMIT = 'mnemo/commit' -- {message?, force?} -> commit result

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
