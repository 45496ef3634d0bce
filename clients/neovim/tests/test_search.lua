-- :Mnemo search! fills the quickfix list; :Mnemo search picks a result with vim.ui.select and opens it.
local H = require('helpers')

return function()
  H.open('MEMORY.md')

  vim.cmd('Mnemo search! PostgreSQL')
  H.wait(10000, function()
    return #vim.fn.getqflist() > 0
  end, 'the quickfix list')
  local qf = vim.fn.getqflist({ title = 1, items = 1 })
  H.eq('mnemo: PostgreSQL', qf.title, 'quickfix title')
  local files = {}
  for _, item in ipairs(qf.items) do
    local name = vim.api.nvim_buf_get_name(item.bufnr)
    local rel = name:sub(#vim.fn.resolve(H.ws) + 2)
    files[rel] = item
    H.truthy(item.lnum >= 1 and item.end_lnum >= item.lnum, 'lnum/end_lnum: ' .. vim.inspect(item))
    H.truthy(item.text:find('score %d'), 'text has the score: ' .. item.text)
  end
  local hit = H.truthy(files['MEMORY.md'] or files['memory/2026-11-02.md'],
    'a file that mentions PostgreSQL is in the list: ' .. vim.inspect(vim.tbl_keys(files)))
  local lines = vim.fn.readfile(vim.api.nvim_buf_get_name(hit.bufnr))
  local span = table.concat(vim.list_slice(lines, hit.lnum, hit.end_lnum), '\n')
  H.truthy(span:find('PostgreSQL', 1, true), 'the cited lines mention PostgreSQL:\n' .. span)
  H.truthy(vim.bo[vim.api.nvim_get_current_buf()].buftype == 'quickfix', 'the quickfix window opened')

  -- Without the bang: vim.ui.select shows the results, the choice opens the file at its first line.
  vim.cmd('wincmd p')
  local shown
  vim.ui.select = function(items, opts, on_choice)
    shown = vim.tbl_map(opts.format_item, items)
    on_choice(items[1])
  end
  vim.cmd('Mnemo search deploy staging')
  H.wait(10000, function()
    return shown ~= nil
  end, 'vim.ui.select')
  H.truthy(shown[1]:find('#L%d+%-L%d+'), 'items show the citation: ' .. shown[1])
  local cite = shown[1]:match('(%S+%.md)#L(%d+)')
  local line = tonumber(shown[1]:match('#L(%d+)'))
  H.wait(5000, function()
    return vim.api.nvim_buf_get_name(0):sub(-#cite) == cite
  end, 'the chosen file to open: ' .. cite)
  H.eq(line, vim.api.nvim_win_get_cursor(0)[1], 'cursor line')
end
