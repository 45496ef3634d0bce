-- A chat turn: :Mnemo chat sends mnemo/chat, mnemo/chatDelta notifications stream into the chat buffer,
-- <CR> on a citation opens the file at the cited line, <C-c> cancels a turn.
local H = require('helpers')

local function wait_done()
  local done
  vim.api.nvim_create_autocmd('User', {
    pattern = 'MnemoChatDone',
    once = true,
    callback = function(ev)
      done = ev.data or true
    end,
  })
  return function()
    H.wait(30000, function()
      return done ~= nil
    end, 'the chat answer')
    return done
  end
end

return function()
  local client = H.open('MEMORY.md')
  -- Params without `message` answer InvalidParams when the method exists.
  H.require_methods(client, { { 'mnemo/chat', {} } })
  local chat = require('mnemo.chat')

  local deltas = 0
  local on_delta = chat.on_delta
  chat.on_delta = function(...)
    deltas = deltas + 1
    return on_delta(...)
  end
  local ok, err = pcall(function()
    local wait = wait_done()
    vim.cmd('Mnemo chat What database did we choose for billing?')
    wait()
  end)
  chat.on_delta = on_delta
  assert(ok, err)

  local buf = H.truthy(chat.state.buf, 'the chat buffer')
  local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  local text = table.concat(lines, '\n')
  H.truthy(vim.fn.win_findbuf(buf)[1], 'the chat buffer is shown in a window')
  H.eq('mnemo-chat', vim.bo[buf].filetype, 'filetype')
  H.truthy(text:find('## You\n\nWhat database did we choose for billing?', 1, true), text)
  H.truthy(text:find('We chose PostgreSQL for the billing service (MEMORY.md#L19-L19).', 1, true),
    'the answer is in the buffer:\n' .. text)
  H.truthy(not text:find('_[error', 1, true), text)
  H.truthy(deltas > 1, 'the answer streamed in several mnemo/chatDelta notifications, got ' .. deltas)
  H.truthy(chat.state.session_id, 'the session id is known')
  -- The header's second line names the chat model (chatModel of mnemo/status, or of the answer).
  local model_line = vim.api.nvim_buf_get_lines(buf, 1, 2, false)[1]
  H.truthy(model_line:find('chat model: scripted', 1, true), 'the header names the model: ' .. model_line)

  -- <CR> on the citation opens MEMORY.md at line 19.
  local win = vim.fn.win_findbuf(buf)[1]
  vim.api.nvim_set_current_win(win)
  for i, line in ipairs(lines) do
    local col = line:find('MEMORY.md#L19', 1, true)
    if col then
      vim.api.nvim_win_set_cursor(win, { i, col + 2 })
      break
    end
  end
  vim.api.nvim_feedkeys(vim.keycode('<CR>'), 'x', false)
  H.truthy(vim.api.nvim_get_current_win() ~= win, 'the citation opened in another window')
  H.truthy(vim.api.nvim_buf_get_name(0):match('/MEMORY%.md$'), 'opened ' .. vim.api.nvim_buf_get_name(0))
  H.eq(19, vim.api.nvim_win_get_cursor(0)[1], 'cursor line')

  -- A second turn continues the session; cancelling marks the turn and leaves the chat usable.
  local session = chat.state.session_id
  local wait = wait_done()
  H.truthy(chat.send('And which database did we not choose?'), 'second turn sent')
  chat.cancel()
  local data = wait()
  H.eq(-32800, type(data) == 'table' and data.code, 'the turn ended as cancelled')
  H.truthy(table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), '\n'):find('_[cancelled]_', 1, true),
    'the buffer says cancelled')
  wait = wait_done()
  chat.send('Thanks.')
  wait()
  H.eq(session, chat.state.session_id, 'the session continues')
end
