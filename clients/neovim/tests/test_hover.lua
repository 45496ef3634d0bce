-- Hover on a MEMORY.md line comes through Neovim's built-in client (vim.lsp.buf.hover).
local H = require('helpers')

return function()
  local client = H.open('MEMORY.md')
  if not client.server_capabilities.hoverProvider then
    H.skip('the server does not offer textDocument/hover yet (no hoverProvider capability)')
  end
  local lnum = H.truthy(H.find_line('PostgreSQL'), 'MEMORY.md mentions PostgreSQL')
  vim.api.nvim_win_set_cursor(0, { lnum, 8 })
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  local r = client:request_sync('textDocument/hover', params, 10000, 0)
  H.truthy(r and not r.err, 'hover failed: ' .. vim.inspect(r))
  H.truthy(r.result and r.result.contents, 'hover returned no contents: ' .. vim.inspect(r))
  local lines = vim.lsp.util.convert_input_to_markdown_lines(r.result.contents)
  local text = vim.trim(table.concat(lines, '\n'))
  H.truthy(text ~= '', 'hover contents are empty')

  -- The same through the user-facing function: a floating window with that text.
  vim.lsp.buf.hover()
  local float
  H.wait(10000, function()
    for _, win in ipairs(vim.api.nvim_list_wins()) do
      if vim.api.nvim_win_get_config(win).relative ~= '' then
        float = win
        return true
      end
    end
  end, 'the hover window')
  local shown = table.concat(vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(float), 0, -1, false), '\n')
  H.truthy(vim.trim(shown) ~= '', 'the hover window is empty')
end
