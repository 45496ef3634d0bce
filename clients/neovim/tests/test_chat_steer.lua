-- Steering: a message sent while a turn runs (here: waiting for an approval in its tool step) goes to
-- that turn with mnemo/steer; the scripted model sees it in its next call and answers it in the same reply.
local H = require('helpers')

local STEER = 'steer: answer in one line please'

return function()
  local client = H.open('MEMORY.md')
  H.require_methods(client, { { 'mnemo/chat', {} }, { 'mnemo/steer', {} } })
  local chat = require('mnemo.chat')

  local asked = 0
  vim.ui.select = function(items, _, on_choice)
    asked = asked + 1
    chat.send(STEER) -- a turn is in flight: this steers it
    local tries = 0
    local function approve()
      tries = tries + 1
      if (chat.state.turn and chat.state.turn.steered) or tries > 400 then
        on_choice(items[1]) -- Allow once
      else
        vim.defer_fn(approve, 25)
      end
    end
    vim.defer_fn(approve, 25)
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
  H.wait(30000, function()
    return done ~= nil
  end, 'the answer of the steered turn')

  H.eq(1, asked, 'approval prompts')
  H.truthy(chat.state.turn.steered, 'the steer was taken (injected)')
  H.eq(1, type(done) == 'table' and done.toolCalls, 'tool calls in the reply: ' .. vim.inspect(done))
  local text = table.concat(vim.api.nvim_buf_get_lines(chat.state.buf, 0, -1, false), '\n')
  H.truthy(text:find('## You (steering)\n\n' .. STEER, 1, true), 'the steering message is shown:\n' .. text)
  H.truthy(text:find('Steered: one line.', 1, true), 'the turn answered the steering:\n' .. text)
  H.truthy(type(done) == 'table' and done.text:find('Steered: one line.', 1, true), vim.inspect(done))
end
