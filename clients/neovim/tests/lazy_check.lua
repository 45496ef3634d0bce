-- Run with `nvim --clean --cmd 'set rtp^=clients/neovim'`: plugin/ is sourced, nothing else of mnemo is.
local function fail(msg)
  io.stderr:write('FAIL: ' .. msg .. '\n')
  vim.cmd('cquit 1')
end
local ok, err = pcall(function()
  assert(vim.fn.exists(':Mnemo') == 2, ':Mnemo is not defined')
  for name in pairs(package.loaded) do
    assert(not name:match('^mnemo'), 'loaded at startup: ' .. name)
  end
  -- lsp/mnemo.lua is what vim.lsp.config('mnemo') resolves to.
  local cfg = vim.lsp.config.mnemo
  assert(cfg, 'vim.lsp.config.mnemo is nil')
  assert(vim.deep_equal(cfg.cmd, { 'mnemo', 'serve' }), vim.inspect(cfg.cmd))
  assert(vim.deep_equal(cfg.filetypes, { 'markdown' }), vim.inspect(cfg.filetypes))
  assert(vim.deep_equal(cfg.root_markers, { 'mnemo.toml', 'MEMORY.md', '.git' }), vim.inspect(cfg.root_markers))
  for _, m in ipairs({ 'mnemo/approvalRequest', 'mnemo/approvalsChanged', 'mnemo/chatDelta', 'mnemo/indexStatus' }) do
    assert(type(cfg.handlers[m]) == 'function', 'no handler for ' .. m)
  end
  -- setup() merges over the defaults and reaches vim.lsp.config.
  require('mnemo').setup({ cmd = { '/opt/mnemo/bin/mnemo', 'serve' }, chat = { layout = 'split' }, enable = false })
  local opts = require('mnemo.config').get()
  assert(opts.chat.layout == 'split' and opts.search.max_results == 20, vim.inspect(opts))
  assert(vim.lsp.config.mnemo.cmd[1] == '/opt/mnemo/bin/mnemo', vim.inspect(vim.lsp.config.mnemo.cmd))
  -- Subcommand completion and citation parsing.
  local names = require('mnemo.commands').complete('s', 'Mnemo s')
  assert(vim.deep_equal(names, { 'search', 'status' }), vim.inspect(names))
  local cites = require('mnemo.chat').parse_citations('see memory/2026-11-02.md#L3-L6 and MEMORY.md#L19, (memory/中文笔记.md#L1-L3)')
  assert(#cites == 3, vim.inspect(cites))
  assert(cites[1].path == 'memory/2026-11-02.md' and cites[1].start_line == 3 and cites[1].end_line == 6, vim.inspect(cites[1]))
  assert(cites[2].path == 'MEMORY.md' and cites[2].end_line == 19, vim.inspect(cites[2]))
  assert(cites[3].path == 'memory/中文笔记.md', vim.inspect(cites[3]))
  -- doc/mnemo.txt builds help tags (in a copy: the repository stays clean).
  local tmp = vim.fn.tempname()
  vim.fn.mkdir(tmp .. '/doc', 'p')
  local doc = vim.api.nvim_get_runtime_file('doc/mnemo.txt', false)[1]
  vim.fn.writefile(vim.fn.readfile(doc), tmp .. '/doc/mnemo.txt')
  vim.cmd('helptags ' .. vim.fn.fnameescape(tmp .. '/doc'))
  local tags = table.concat(vim.fn.readfile(tmp .. '/doc/tags'), '\n')
  for _, tag in ipairs({ 'mnemo.txt', ':Mnemo', 'mnemo-config', 'mnemo-approvals', 'mnemo-health' }) do
    assert(tags:find(tag .. '\t', 1, true), 'help tag missing: ' .. tag)
  end
end)
if not ok then
  fail(tostring(err))
else
  vim.cmd('qall!')
end
