--- mnemo for Neovim: memory search, chat, approvals and commits over the mnemo language server.
---
--- ```lua
--- require('mnemo').setup({ cmd = { 'mnemo', 'serve' } })
--- ```
local M = {}

--- Merge `opts` over the defaults (see `:help mnemo-config`) and register the language server.
---@param opts? mnemo.Config|table
function M.setup(opts)
  local options = require('mnemo.config').set(opts)
  require('mnemo.client').setup(options)
  return M
end

--- Search memory; `quickfix = true` fills the quickfix list instead of prompting.
---@param query string
---@param opts? {quickfix?: boolean}
function M.search(query, opts)
  return require('mnemo.search').search(query, opts)
end

--- Send a chat message (opens the chat window).
---@param message string
function M.chat(message)
  local chat = require('mnemo.chat')
  chat.open()
  return chat.send(message)
end

--- Index state for a status line.
---@return string
function M.statusline()
  return require('mnemo.client').statusline()
end

return M
