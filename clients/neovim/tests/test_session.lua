-- :Mnemo new starts a session (mnemo/newSession), :Mnemo flush saves its memories (mnemo/flush).
local H = require('helpers')

return function()
  local client = H.open('MEMORY.md')
  H.require_methods(client, {
    { 'mnemo/chat', {} }, { 'mnemo/newSession', { kind = 'nonsense' } }, { 'mnemo/flush', {} },
  })
  local chat = require('mnemo.chat')
  local before = chat.state.session_id
  vim.cmd('Mnemo new')
  H.wait(10000, function()
    return chat.state.session_id ~= nil and chat.state.session_id ~= before
  end, 'a new session')
  H.truthy(vim.api.nvim_buf_get_lines(chat.state.buf, 0, 1, false)[1]:find(chat.state.session_id, 1, true),
    'the chat header names the session')

  local done
  vim.api.nvim_create_autocmd('User', { pattern = 'MnemoChatDone', once = true, callback = function() done = true end })
  chat.send('Remember: the staging database is called stg-billing.')
  H.wait(30000, function()
    return done
  end, 'the chat answer')

  local flushed
  vim.api.nvim_create_autocmd('User', {
    pattern = 'MnemoFlushDone',
    once = true,
    callback = function(ev)
      flushed = ev.data
    end,
  })
  vim.cmd('Mnemo flush')
  H.wait(30000, function()
    return flushed ~= nil
  end, 'the flush report')
  H.eq(chat.state.session_id, flushed.sessionId, 'flushed session')
  local n = H.notifications[#H.notifications]
  H.truthy(n and n.msg:find('^mnemo: flushed'), vim.inspect(H.notifications))
end
