-- A chat turn whose model asks for the exec tool: the server's policy asks Neovim (mnemo/approvalRequest),
-- the scripted vim.ui.select allows it once, the command runs and the answer streams in.
local H = require('helpers')

return function()
  local client = H.open('MEMORY.md')
  H.require_methods(client, { { 'mnemo/chat', {} }, { 'mnemo/newSession', { kind = 'nonsense' } } })
  local chat = require('mnemo.chat')

  local asked = {}
  vim.ui.select = function(items, opts, on_choice)
    table.insert(asked, { prompt = opts.prompt, kind = opts.kind })
    vim.defer_fn(function()
      on_choice(items[1]) -- Allow once
    end, 50)
  end

  local before = chat.state.session_id
  vim.cmd('Mnemo new')
  H.wait(10000, function()
    return chat.state.session_id ~= nil and chat.state.session_id ~= before
  end, 'a new session')

  local done
  vim.api.nvim_create_autocmd('User', {
    pattern = 'MnemoChatDone',
    once = true,
    callback = function(ev)
      done = ev.data or true
    end,
  })
  vim.cmd('Mnemo chat please list the build folder')
  if not vim.wait(30000, function()
    return done ~= nil
  end, 20) then
    local pending = client:request_sync('mnemo/approvals', {}, 5000, 0)
    error(('no answer after 30 s; vim.ui.select was called %d time(s); mnemo/approvals: %s'):format(
      #asked, vim.inspect(pending and (pending.result or pending.err))))
  end

  H.eq(1, #asked, 'approval prompts')
  H.eq('mnemo.approval', asked[1].kind, 'select kind')
  H.truthy(asked[1].prompt:find('ls build', 1, true), 'the prompt shows the exact command: ' .. asked[1].prompt)
  H.eq(1, type(done) == 'table' and done.toolCalls, 'tool calls in the reply: ' .. vim.inspect(done))
  local text = table.concat(vim.api.nvim_buf_get_lines(chat.state.buf, 0, -1, false), '\n')
  H.truthy(text:find('The build folder holds junk.txt.', 1, true), 'the answer after the tool ran:\n' .. text)
  H.truthy(not text:find('tool_call', 1, true), 'the tool call is not shown as the answer:\n' .. text)
end
