--- Chat in a scratch buffer: `mnemo/chat` requests, `mnemo/chatDelta` streamed in, citations you can open.
local client_mod = require('mnemo.client')
local config = require('mnemo.config')
local protocol = require('mnemo.protocol')

local api = vim.api
local M = {}

M.filetype = 'mnemo-chat'

---@class mnemo.ChatTurn
---@field request_id? integer JSON-RPC id of the `mnemo/chat` request in flight
---@field client_id? integer
---@field received boolean a delta arrived for this turn
---@field done boolean
---@field answer_line? integer 0-based line where the answer starts in the chat buffer
---@field steered? boolean a message was steered into this turn (`mnemo/steer`): the streamed text stays
---@field after? string[] messages typed during the turn that it could not take: sent when it ends

---@class mnemo.ChatState
---@field buf? integer the chat buffer
---@field session_id? string the server's session (nil until the first answer or `:Mnemo new`)
---@field turn? mnemo.ChatTurn the turn in flight
---@field chat_model? table `chatModel` of mnemo/status (or of the last answer): which model answers
---@field model_asked? boolean mnemo/status was asked for the model line
M.state = { buf = nil, session_id = nil, turn = nil }

local HELP = 'i/a: ask  <CR>/gf: open citation  <C-c>: cancel  q: close'

local function valid_buf()
  local buf = M.state.buf
  return buf and api.nvim_buf_is_valid(buf) and buf or nil
end

--- Run `fn` with the chat buffer modifiable.
local function edit(buf, fn)
  vim.bo[buf].modifiable = true
  local ok, err = pcall(fn)
  vim.bo[buf].modifiable = false
  if not ok then
    error(err)
  end
end

--- Keep windows that show the buffer scrolled to its end.
local function follow(buf)
  local last = api.nvim_buf_line_count(buf)
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    api.nvim_win_set_cursor(win, { last, 0 })
  end
end

--- Append `text` at the end of the buffer, continuing its last line (text may hold newlines).
---@param buf integer
---@param text string
local function append_text(buf, text)
  edit(buf, function()
    local last = api.nvim_buf_line_count(buf)
    local tail = api.nvim_buf_get_lines(buf, last - 1, last, false)[1] or ''
    local parts = vim.split(text, '\n', { plain = true })
    parts[1] = tail .. parts[1]
    api.nvim_buf_set_lines(buf, last - 1, last, false, parts)
  end)
  follow(buf)
end

--- Append whole lines at the end of the buffer.
---@param buf integer
---@param lines string[]
local function append_lines(buf, lines)
  edit(buf, function()
    api.nvim_buf_set_lines(buf, -1, -1, false, lines)
  end)
  follow(buf)
end

--- The header's second line: which chat model answers (and, for the bundled demo model, its note).
---@return string
function M.model_line()
  local model = M.state.chat_model
  if type(model) ~= 'table' or type(model.line) ~= 'string' then
    return '> chat model: ' .. (M.state.model_asked and 'not reported by this server' or 'asking the server…')
  end
  local note = type(model.note) == 'string' and model.note ~= '' and (' — ' .. model.note) or ''
  return '> ' .. model.line .. note
end

local function header()
  local session = M.state.session_id and ('session ' .. M.state.session_id) or 'new session'
  return { '# mnemo chat (' .. session .. ')', M.model_line(), '<!-- ' .. HELP .. ' -->' }
end

local HEADER_LINES = #header()

local function render_header(buf)
  edit(buf, function()
    api.nvim_buf_set_lines(buf, 0, HEADER_LINES, false, header())
  end)
end

--- Take `chatModel` from a status or chat result (a table with a `line`) and show it in the header.
local function take_model(buf, model)
  if type(model) == 'table' and type(model.line) == 'string' then
    M.state.chat_model = model
  end
  if buf and api.nvim_buf_is_valid(buf) then
    render_header(buf)
  end
end

--- Ask the server which model answers (once per chat buffer).
local function ask_model(buf)
  if not client_mod.get() then
    M.state.model_asked = true -- no server yet: the first answer names the model
    return
  end
  client_mod.request(protocol.STATUS, {}, function(result)
    M.state.model_asked = true
    take_model(buf, type(result) == 'table' and result.chatModel or nil)
  end, function()
    M.state.model_asked = true
    take_model(buf, nil)
  end)
end

---@return integer buf
local function create_buffer()
  local buf = api.nvim_create_buf(false, true)
  api.nvim_buf_set_name(buf, 'mnemo://chat')
  vim.bo[buf].buftype = 'nofile'
  vim.bo[buf].bufhidden = 'hide'
  vim.bo[buf].swapfile = false
  pcall(vim.treesitter.language.register, 'markdown', M.filetype)
  vim.bo[buf].filetype = M.filetype
  if not pcall(vim.treesitter.start, buf, 'markdown') then
    vim.bo[buf].syntax = 'markdown'
  end
  api.nvim_buf_set_lines(buf, 0, -1, false, header())
  vim.bo[buf].modifiable = false
  M.state.model_asked = false
  ask_model(buf)
  local function map(lhs, rhs, desc)
    vim.keymap.set('n', lhs, rhs, { buffer = buf, nowait = true, desc = 'mnemo: ' .. desc })
  end
  map('<CR>', function()
    M.open_citation()
  end, 'open the citation under the cursor')
  map('gf', function()
    M.open_citation()
  end, 'open the citation under the cursor')
  map('i', function()
    M.ask()
  end, 'ask')
  map('a', function()
    M.ask()
  end, 'ask')
  map('<C-c>', function()
    M.cancel()
  end, 'cancel the answer in progress')
  map('q', function()
    M.close()
  end, 'close the chat window')
  return buf
end

--- The chat buffer (created on first use).
---@return integer buf
function M.buffer()
  local buf = valid_buf()
  if not buf then
    buf = create_buffer()
    M.state.buf = buf
  end
  return buf
end

--- Show the chat buffer in a window (reusing one that shows it) and return the window.
---@return integer win
function M.open()
  local buf = M.buffer()
  local win = vim.fn.win_findbuf(buf)[1]
  if win then
    api.nvim_set_current_win(win)
    return win
  end
  local opts = config.get().chat
  if opts.layout == 'tab' then
    vim.cmd('tabnew')
  elseif opts.layout == 'split' then
    vim.cmd((opts.size and tostring(opts.size) or '') .. 'split')
  elseif opts.layout == 'vsplit' then
    vim.cmd('botright ' .. (opts.size and tostring(opts.size) or '') .. 'vsplit')
  end
  win = api.nvim_get_current_win()
  api.nvim_win_set_buf(win, buf)
  vim.wo[win].wrap = true
  vim.wo[win].linebreak = true
  vim.wo[win].number = false
  vim.wo[win].relativenumber = false
  follow(buf)
  return win
end

function M.close()
  local buf = valid_buf()
  if not buf then
    return
  end
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    if #api.nvim_list_wins() > 1 then
      api.nvim_win_close(win, false)
    end
  end
end

--- Is this delta for the turn in flight? Deltas name the session (and maybe the request).
local function belongs(params, ctx)
  local turn = M.state.turn
  if not turn or turn.done then
    return false
  end
  if ctx and ctx.client_id and turn.client_id and ctx.client_id ~= turn.client_id then
    return false
  end
  if params.requestId ~= nil and params.requestId ~= vim.NIL and turn.request_id ~= nil then
    -- The server echoes the JSON-RPC id of our mnemo/chat request: late deltas of a cancelled turn differ.
    return tostring(params.requestId) == tostring(turn.request_id)
  end
  return M.state.session_id == nil or params.sessionId == nil or params.sessionId == M.state.session_id
end

--- Handler for the `mnemo/chatDelta` notification: {sessionId, requestId?, delta}.
function M.on_delta(_, params, ctx)
  local buf = valid_buf()
  if not buf or type(params) ~= 'table' or type(params.delta) ~= 'string' then
    return vim.NIL
  end
  if not belongs(params, ctx) then
    return vim.NIL
  end
  if not M.state.session_id and params.sessionId then
    M.state.session_id = params.sessionId
    render_header(buf)
  end
  M.state.turn.received = true
  append_text(buf, params.delta)
  return vim.NIL
end

--- The answer's text from a `mnemo/chat` result, whatever the server calls it.
local function result_text(result)
  if type(result) ~= 'table' then
    return nil
  end
  for _, key in ipairs({ 'text', 'reply', 'content', 'message', 'answer' }) do
    if type(result[key]) == 'string' then
      return result[key]
    end
  end
end

--- Citations the result lists that the streamed text does not already show.
local function extra_citations(buf, result)
  local cites = type(result) == 'table' and result.citations
  if type(cites) ~= 'table' or #cites == 0 then
    return {}
  end
  local text = table.concat(api.nvim_buf_get_lines(buf, 0, -1, false), '\n')
  local out = {}
  for _, c in ipairs(cites) do
    local s = type(c) == 'string' and c or (type(c) == 'table' and (c.citation or
      (c.path and c.startLine and ('%s#L%d-L%d'):format(c.path, c.startLine, c.endLine or c.startLine))))
    if s and not text:find(s, 1, true) then
      table.insert(out, '- ' .. s)
    end
  end
  return out
end

local function finish(buf, result, err)
  local turn = M.state.turn
  if not turn or turn.done then
    return
  end
  turn.done = true
  if err then
    local msg = err.code == protocol.errors.request_cancelled and '_[cancelled]_'
      or ('_[error: %s]_'):format(client_mod.describe_error(protocol.CHAT, err))
    append_lines(buf, { '', msg })
  else
    if type(result) == 'table' and result.sessionId and result.sessionId ~= M.state.session_id then
      M.state.session_id = result.sessionId
      render_header(buf)
    end
    if type(result) == 'table' and type(result.chatModel) == 'table' then
      take_model(buf, result.chatModel)
    end
    local text = result_text(result)
    if not turn.received and text then
      append_text(buf, text)
    elseif text and turn.answer_line and not turn.steered then
      -- The final text wins over the stream: a loop trimmed, or grounding quoted memory before the answer.
      local streamed = table.concat(api.nvim_buf_get_lines(buf, turn.answer_line, -1, false), '\n')
      if vim.trim(streamed) ~= vim.trim(text) then
        edit(buf, function()
          api.nvim_buf_set_lines(buf, turn.answer_line, -1, false, vim.split(text, '\n', { plain = true }))
        end)
        follow(buf)
      end
    end
    if type(result) == 'table' and type(result.notes) == 'table' and #result.notes > 0 then
      local notes = {}
      for _, n in ipairs(result.notes) do
        table.insert(notes, '> ' .. tostring(n))
      end
      append_lines(buf, { '' })
      append_lines(buf, notes)
    end
    local extra = extra_citations(buf, result)
    if #extra > 0 then
      append_lines(buf, { '', 'Sources:' })
      append_lines(buf, extra)
    end
  end
  append_lines(buf, { '' })
  vim.api.nvim_exec_autocmds('User', { pattern = 'MnemoChatDone', modeline = false, data = result or err })
  if turn.after and #turn.after > 0 then
    local queued = turn.after
    vim.schedule(function()
      M.send(table.remove(queued, 1))
      if M.state.turn and not M.state.turn.done then
        M.state.turn.after = queued
      end
    end)
  end
end

--- Send a message into the turn in flight (`mnemo/steer`): the turn answers it in the same reply. A turn
--- that cannot take it (no session yet, an older server, or it just ended) gets it as the next message.
---@param message string
function M.steer(message)
  local turn = M.state.turn
  if not turn or turn.done then
    M.send(message)
    return
  end
  local function later()
    if M.state.turn == turn and not turn.done then
      turn.after = turn.after or {}
      table.insert(turn.after, message)
    else
      M.send(message)
    end
  end
  if not M.state.session_id then
    return later()
  end
  client_mod.request(protocol.STEER, { sessionId = M.state.session_id, message = message }, function(result)
    local state = type(result) == 'table' and result.state or nil
    local buf = valid_buf()
    if (state ~= 'injected' and state ~= 'queued') or not buf then
      return later()
    end
    local lines = { '', '## You (steering)', '' }
    vim.list_extend(lines, vim.split(message, '\n', { plain = true }))
    vim.list_extend(lines, { '', '## mnemo', '' })
    append_lines(buf, lines)
    turn.steered = true
  end, function()
    later()
  end)
end

--- Send a message (`mnemo/chat`) and stream the answer into the chat buffer.
---@param message string
---@return integer? request_id
function M.send(message)
  if message == nil or vim.trim(message) == '' then
    return nil
  end
  if M.state.turn and not M.state.turn.done then
    M.steer(message) -- typing while the answer streams steers that turn
    return nil
  end
  local buf = M.buffer()
  if not vim.fn.win_findbuf(buf)[1] then
    local prev = api.nvim_get_current_win()
    M.open()
    pcall(api.nvim_set_current_win, prev)
  end
  local lines = { '', '## You', '' }
  vim.list_extend(lines, vim.split(message, '\n', { plain = true }))
  vim.list_extend(lines, { '', '## mnemo', '' })
  append_lines(buf, lines)
  local turn = { received = false, done = false, answer_line = api.nvim_buf_line_count(buf) - 1 }
  M.state.turn = turn
  local params = { message = message, sessionId = M.state.session_id }
  local request_id, client = client_mod.request(protocol.CHAT, params, function(result)
    finish(buf, result, nil)
  end, function(err)
    finish(buf, nil, err)
  end)
  if not request_id then
    turn.done = true
    append_lines(buf, { '_[not sent]_', '' })
    return nil
  end
  turn.request_id = request_id
  turn.client_id = client and client.id
  return request_id
end

--- Ask for a message with vim.ui.input and send it.
function M.ask()
  vim.ui.input({ prompt = 'mnemo> ' }, function(input)
    if input and vim.trim(input) ~= '' then
      M.send(input)
    end
  end)
end

--- Cancel the answer in flight ($/cancelRequest).
function M.cancel()
  local turn = M.state.turn
  if not turn or turn.done or not turn.request_id then
    return
  end
  local client = turn.client_id and vim.lsp.get_client_by_id(turn.client_id)
  if client then
    client_mod.call(client, 'cancel_request', turn.request_id)
  end
  local buf = valid_buf()
  if buf then
    finish(buf, nil, { code = protocol.errors.request_cancelled })
  end
end

--- Start a fresh session (`mnemo/newSession`; the server snapshots the previous one into memory first).
--- The chat buffer keeps its history, with a rule below it.
function M.new_session()
  client_mod.request(protocol.NEW_SESSION, { previousSessionId = M.state.session_id }, function(result)
    M.state.session_id = type(result) == 'table' and result.sessionId or nil
    local buf = valid_buf()
    if buf then
      render_header(buf)
      append_lines(buf, { '', '---', '' })
    end
    vim.notify('mnemo: new session ' .. tostring(M.state.session_id or ''), vim.log.levels.INFO)
  end)
end

--- Start the current session afresh under the same id (`mnemo/resetSession`; the old transcript is archived).
function M.reset_session()
  if not M.state.session_id then
    vim.notify('mnemo: no chat session yet', vim.log.levels.INFO)
    return
  end
  client_mod.request(protocol.RESET_SESSION, { sessionId = M.state.session_id }, function(result)
    local buf = valid_buf()
    if buf then
      append_lines(buf, { '', '---', '' })
    end
    vim.notify('mnemo: session reset' .. (type(result) == 'table' and result.archived and
      (' (transcript archived as ' .. result.archived .. ')') or ''), vim.log.levels.INFO)
  end)
end

--- Save the session's durable memories now (`mnemo/flush`).
function M.flush()
  if not M.state.session_id then
    vim.notify('mnemo: no chat session to flush yet', vim.log.levels.INFO)
    return
  end
  client_mod.request(protocol.FLUSH, { sessionId = M.state.session_id }, function(r)
    r = type(r) == 'table' and r or {}
    local function count(v)
      return type(v) == 'table' and #v or (tonumber(v) or 0)
    end
    vim.notify(('mnemo: flushed: %d written, %d kept, %d refused'):format(count(r.written), count(r.kept),
      count(r.refused)), vim.log.levels.INFO)
    vim.api.nvim_exec_autocmds('User', { pattern = 'MnemoFlushDone', modeline = false, data = r })
  end)
end

--- Every citation `path#Lx-Ly` (or `path#Lx`) on a line, with 1-based byte columns.
---@param line string
---@return {path: string, start_line: integer, end_line: integer, col_start: integer, col_end: integer}[]
function M.parse_citations(line)
  local found = {}
  local init = 1
  while true do
    local s, e, path, l1, l2 = line:find('([^%s%[%]%(%)<>`\'"|,;]+%.md)#L(%d+)%-?L?(%d*)', init)
    if not s then
      break
    end
    table.insert(found, {
      path = path,
      start_line = tonumber(l1),
      end_line = tonumber(l2) or tonumber(l1),
      col_start = s,
      col_end = e,
    })
    init = e + 1
  end
  return found
end

--- The citation under the cursor (or the first on the cursor line).
function M.citation_at_cursor()
  local line = api.nvim_get_current_line()
  local col = api.nvim_win_get_cursor(0)[2] + 1
  local cites = M.parse_citations(line)
  for _, c in ipairs(cites) do
    if col >= c.col_start and col <= c.col_end then
      return c
    end
  end
  return cites[1]
end

--- Open a workspace file at a line range, in another window than the chat.
---@param path string workspace-relative
---@param start_line integer
---@param end_line? integer
function M.open_location(path, start_line, end_line)
  local root = client_mod.workspace()
  local file = (root and not vim.startswith(path, '/')) and (root .. '/' .. path) or path
  local chat_win = api.nvim_get_current_win()
  local target
  for _, win in ipairs(api.nvim_tabpage_list_wins(0)) do
    if win ~= chat_win and api.nvim_win_get_config(win).relative == '' and vim.bo[api.nvim_win_get_buf(win)].buftype == '' then
      target = win
      break
    end
  end
  if target then
    api.nvim_set_current_win(target)
  elseif api.nvim_get_current_buf() == M.state.buf then
    vim.cmd('aboveleft split')
  end
  vim.cmd('edit ' .. vim.fn.fnameescape(file))
  local last = api.nvim_buf_line_count(0)
  local first = math.min(math.max(start_line, 1), last)
  api.nvim_win_set_cursor(0, { first, 0 })
  if config.get().chat.jump_to_range and end_line and end_line > first then
    vim.cmd('normal! V' .. (math.min(end_line, last) - first) .. 'j')
  end
  vim.cmd('normal! zvzz')
end

--- Open the citation under the cursor; falls back to `gf` behaviour when there is none.
function M.open_citation()
  local c = M.citation_at_cursor()
  if not c then
    vim.notify('mnemo: no citation (path#Lx-Ly) on this line', vim.log.levels.INFO)
    return
  end
  M.open_location(c.path, c.start_line, c.end_line)
end

return M
