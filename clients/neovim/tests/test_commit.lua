-- :Mnemo commit commits the workspace (mnemo/commit); a secret in the change is refused until forced.
local H = require('helpers')

local function notified(prefix)
  for _, n in ipairs(H.notifications) do
    if vim.startswith(n.msg, prefix) then
      return n
    end
  end
end

return function()
  local client = H.open('MEMORY.md')
  -- A wrong type answers InvalidParams when the method exists (and commits nothing).
  H.require_methods(client, { { 'mnemo/commit', { message = 42 } } })

  vim.api.nvim_buf_set_lines(0, -1, -1, false, { '- Neovim commits memory with :Mnemo commit.' })
  vim.cmd('silent write')
  vim.cmd('Mnemo commit note from neovim')
  H.wait(20000, function()
    return notified('mnemo: committed') or notified('mnemo: mnemo/commit failed')
  end, 'the commit notification')
  local n = H.truthy(notified('mnemo: committed'), 'commit failed: ' .. vim.inspect(H.notifications))
  -- The change holds MEMORY.md (and whatever earlier tests left: session transcripts, flushed notes).
  H.truthy(n.msg:find('"note from neovim"', 1, true) and n.msg:find('%(%d+ files%)'), n.msg)
end
