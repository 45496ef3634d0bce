--- Defaults, and the options `require('mnemo').setup(opts)` merges over them.
local M = {}

---@class mnemo.ChatConfig
---@field layout 'vsplit'|'split'|'tab'|'current' where the chat window opens
---@field size? integer width (vsplit) or height (split); nil: half the editor
---@field jump_to_range boolean select the cited lines (linewise) when opening a citation

---@class mnemo.SearchConfig
---@field max_results integer results asked for (`maxResults`)
---@field min_score? number `minScore`; nil: the server's `search.min_score`
---@field open_quickfix boolean `:Mnemo search!` opens the quickfix window

---@class mnemo.ApprovalConfig
---@field reply 'response'|'resolve' answer `mnemo/approvalRequest` in its response, or with `mnemo/resolveApproval`

---@class mnemo.Config
---@field cmd string[] how to start the server
---@field filetypes string[] buffers the server attaches to
---@field root_markers string[] files that mark a workspace root, in priority order
---@field workspace? string workspace folder (`initializationOptions.workspace`); nil: the root found by markers
---@field enable boolean `setup()` enables the server (vim.lsp.enable on 0.11, a FileType autocmd on 0.10)
---@field request_timeout_ms integer how long synchronous helpers (`:checkhealth`, tests) wait
---@field chat mnemo.ChatConfig
---@field search mnemo.SearchConfig
---@field approval mnemo.ApprovalConfig

---@type mnemo.Config
M.defaults = {
  cmd = { 'mnemo', 'serve' },
  filetypes = { 'markdown' },
  root_markers = { 'mnemo.toml', 'MEMORY.md', '.git' },
  workspace = nil,
  enable = true,
  request_timeout_ms = 10000,
  chat = { layout = 'vsplit', size = nil, jump_to_range = false },
  search = { max_results = 20, min_score = nil, open_quickfix = true },
  approval = { reply = 'response' },
}

---@type mnemo.Config
M.options = vim.deepcopy(M.defaults)

--- Merge `opts` over the defaults (deeply; lists are replaced, not merged) and keep the result.
---@param opts? table
---@return mnemo.Config
function M.set(opts)
  assert(opts == nil or type(opts) == 'table', 'mnemo.setup: opts must be a table')
  local merged = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts or {})
  for _, key in ipairs({ 'cmd', 'filetypes', 'root_markers' }) do
    assert(type(merged[key]) == 'table', ('mnemo.setup: %s must be a list'):format(key))
  end
  assert(merged.workspace == nil or type(merged.workspace) == 'string', 'mnemo.setup: workspace must be a string')
  M.options = merged
  return merged
end

---@return mnemo.Config
function M.get()
  return M.options
end

return M
