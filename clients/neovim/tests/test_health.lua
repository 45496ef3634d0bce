-- :checkhealth mnemo reports the Neovim version, the server, the workspace, the index and the models.
local H = require('helpers')

return function()
  H.open('MEMORY.md')
  vim.cmd('checkhealth mnemo')
  local text = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\n')
  for _, want in ipairs({
    'mnemo: Neovim', 'OK Neovim 0.1', 'server executable: ', 'workspace root: ' .. vim.fn.resolve(H.ws),
    'index state: ready', 'provider none', 'search mode keyword', 'chat model: scripted (openai at http',
  }) do
    H.truthy(text:find(want, 1, true), ('checkhealth output lacks %q:\n%s'):format(want, text))
  end
  H.truthy(not text:find('ERROR', 1, true), 'checkhealth reports an error:\n' .. text)
end
