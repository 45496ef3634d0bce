--- The mnemo language server, for `vim.lsp.config` / `vim.lsp.enable('mnemo')` (Neovim 0.11+).
--- On Neovim 0.10, `require('mnemo').setup()` reads this file and starts it with `vim.lsp.start`.
--- Override any field with `vim.lsp.config('mnemo', { cmd = { '/path/to/mnemo', 'serve' } })`.
local protocol = require('mnemo.protocol')
local defaults = require('mnemo.config').defaults -- written once, there

---@type vim.lsp.Config
return {
  cmd = vim.deepcopy(defaults.cmd),
  filetypes = vim.deepcopy(defaults.filetypes),
  root_markers = vim.deepcopy(defaults.root_markers),
  handlers = {
    -- Each handler loads its module on first use.
    [protocol.APPROVAL_REQUEST] = function(...)
      return require('mnemo.approval').handler(...)
    end,
    [protocol.APPROVALS_CHANGED] = function(...)
      return require('mnemo.approval').on_changed(...)
    end,
    [protocol.CHAT_DELTA] = function(...)
      return require('mnemo.chat').on_delta(...)
    end,
    [protocol.INDEX_STATUS] = function(...)
      return require('mnemo.client').on_index_status(...)
    end,
  },
}
