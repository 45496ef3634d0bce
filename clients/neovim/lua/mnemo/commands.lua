--- `:Mnemo {subcommand}`: one table from subcommand to function.
local client_mod = require('mnemo.client')
local protocol = require('mnemo.protocol')

local M = {}

local function info(msg)
  vim.notify(msg, vim.log.levels.INFO)
end

--- Lines describing a status object (for :Mnemo status).
---@param s table
---@return string[]
function M.status_lines(s)
  local lines = {
    ('workspace: %s'):format(s.workspace or '?'),
    ('index: %s (%s files, %s chunks)'):format(s.state or '?', s.files or '?', s.chunks or '?'),
    ('search: %s (provider %s, model %s)'):format(s.mode or '?', s.provider or '?', s.model ~= vim.NIL and s.model or '-'),
  }
  if s.message and s.message ~= '' then
    table.insert(lines, 'message: ' .. s.message)
  end
  for _, p in ipairs(s.configProblems or {}) do
    table.insert(lines, 'config: ' .. (type(p) == 'table' and vim.inspect(p) or tostring(p)))
  end
  for _, p in ipairs(s.fileProblems or {}) do
    table.insert(lines, ('file: %s: %s'):format(p.path or '?', p.problem or '?'))
  end
  return lines
end

--- A commit result in one line, whatever fields the server fills.
local function describe_commit(r)
  if type(r) ~= 'table' then
    return 'mnemo: committed'
  end
  if r.committed == false or r.ok == false then
    return 'mnemo: nothing committed' .. (r.reason and (': ' .. r.reason) or (r.message and (': ' .. r.message) or ''))
  end
  local sha = r.commit or r.sha or r.hash
  local files = type(r.files) == 'table' and #r.files or r.files
  return ('mnemo: committed %s%s%s'):format(
    sha and tostring(sha):sub(1, 12) or '',
    r.message and (' "' .. vim.split(r.message, '\n')[1] .. '"') or '',
    files and (' (' .. tostring(files) .. ' files)') or ''
  )
end

--- `mnemo/commit`. Secrets found in the change are listed in the quickfix list (`:Mnemo commit!` commits
--- anyway); a workspace outside Git is offered a new repository.
---@param params {message?: string, force?: boolean, initRepo?: boolean}
function M.commit(params)
  client_mod.request(protocol.COMMIT, params, function(r)
    info(describe_commit(r))
  end, function(err, client)
    local data = type(err.data) == 'table' and err.data or {}
    if type(data.secrets) == 'table' and #data.secrets > 0 then
      local root = client_mod.workspace(client)
      local items = {}
      for _, f in ipairs(data.secrets) do
        table.insert(items, { filename = root and (root .. '/' .. f.path) or f.path, lnum = f.line or 1,
          text = 'secret: ' .. tostring(f.rule) })
      end
      vim.fn.setqflist({}, ' ', { title = 'mnemo: secrets in the commit', items = items })
      vim.notify(client_mod.describe_error(protocol.COMMIT, err) ..
        '\n(listed in the quickfix list; :Mnemo commit! commits anyway)', vim.log.levels.ERROR)
    elseif not params.initRepo and tostring(err.message):find('initRepo', 1, true) then
      vim.ui.select({ 'Create a Git repository and commit', 'Cancel' }, {
        prompt = tostring(err.message),
        kind = 'mnemo.confirm',
      }, function(choice, idx)
        if idx == 1 then
          M.commit(vim.tbl_extend('force', params, { initRepo = true }))
        end
      end)
    else
      vim.notify(client_mod.describe_error(protocol.COMMIT, err), vim.log.levels.ERROR)
    end
  end)
end

local VERDICTS = { up = true, yes = true, ['+'] = true, down = false, no = false, ['-'] = false }

--- `:Mnemo feedback up|down [turn]`: mnemo/feedback on a turn of the chat's session (default the latest):
--- whether the memories it recalled helped.
---@param args string
function M.feedback(args)
  local verdict, turn = args:match('^(%S*)%s*(%S*)$')
  local useful = VERDICTS[verdict or '']
  if useful == nil or (turn ~= '' and not tonumber(turn)) then
    vim.notify('mnemo: usage: :Mnemo feedback up|down [turn]', vim.log.levels.ERROR)
    return
  end
  local session = require('mnemo.chat').state.session_id
  if not session then
    vim.notify('mnemo: no chat session yet (ask something with :Mnemo chat first)', vim.log.levels.ERROR)
    return
  end
  local params = { sessionId = session, useful = useful, turn = tonumber(turn) }
  client_mod.request(protocol.FEEDBACK, params, function(r)
    info(('mnemo: turn %s %s: recorded on %d memory chunk(s)'):format(
      tostring(r and r.turn), useful and 'useful' or 'not useful', #((r and r.chunks) or {})))
  end)
end

--- `:Mnemo consolidate[!]`: near-duplicate memories across files, one line each (mnemo/consolidate; with
--- !: the newest copy, no chat model). The diff is shown in a scratch window; the edit is applied to the
--- buffers (unsaved) only when confirmed.
---@param bang boolean
function M.consolidate(bang)
  client_mod.request(protocol.CONSOLIDATE, { useModel = not bang }, function(r, client)
    local clusters = type(r) == 'table' and r.clusters or {}
    if #clusters == 0 then
      info('mnemo: no near-duplicate memories across files')
      return
    end
    vim.cmd('botright new')
    local buf = vim.api.nvim_get_current_buf()
    vim.bo[buf].buftype = 'nofile'
    vim.bo[buf].bufhidden = 'wipe'
    vim.bo[buf].filetype = 'diff'
    vim.api.nvim_buf_set_lines(buf, 0, -1, false, vim.split(r.diff or '', '\n', { trimempty = true }))
    vim.bo[buf].modifiable = false
    local by = (r.model and r.model ~= '') and (', merged by ' .. r.model) or ', the newest copy kept'
    vim.ui.select({ 'Apply these changes (buffers stay unsaved)', 'Cancel' }, {
      prompt = ('mnemo: %d cluster(s) of near-duplicate memories%s'):format(#clusters, by),
      kind = 'mnemo.confirm',
    }, function(_, idx)
      if idx == 1 then
        vim.lsp.util.apply_workspace_edit(r.edit, client.offset_encoding)
        info(('mnemo: consolidated %d cluster(s); review the buffers and :wall to save'):format(#clusters))
      end
    end)
  end)
end

--- Lines describing an archive report (mnemo/archive), the first one a summary.
---@param r table
---@return string[]
function M.archive_lines(r)
  local months = type(r) == 'table' and r.months or {}
  local verb = r.dryRun and 'would archive' or 'archived'
  local lines = {
    #months == 0 and ('mnemo: no month to archive (%d already archived)'):format(r.already or 0)
      or ('mnemo: %s %d month(s) of sessions (%d already archived)'):format(verb, #months, r.already or 0),
  }
  for _, m in ipairs(months) do
    table.insert(lines, ('  %s %s: %d session(s), %d message(s), %s'):format(
      m.month or '?', m.path or '?', #(m.sessions or {}), m.messages or 0, m.summary or '?'))
  end
  for _, s in ipairs(r.skipped or {}) do
    table.insert(lines, ('  skipped %s: %s'):format(s.sessionId or '?', s.reason or '?'))
  end
  if #(r.removed or {}) > 0 then
    table.insert(lines, ('  removed %d raw transcript(s)'):format(#r.removed))
  end
  return lines
end

--- `:Mnemo archive[!] [YYYY-MM]`: the monthly session archive (mnemo/archive): every finished month not
--- archived yet, or only {month} (written again); with !: a dry run that writes nothing.
---@param args string
---@param bang boolean
function M.archive(args, bang)
  if args ~= '' and not args:match('^%d%d%d%d%-%d%d$') then
    vim.notify('mnemo: usage: :Mnemo archive[!] [YYYY-MM]', vim.log.levels.ERROR)
    return
  end
  local params = { month = args ~= '' and args or nil, dryRun = bang or nil }
  client_mod.request(protocol.ARCHIVE, next(params) and params or vim.empty_dict(), function(r)
    local lines = M.archive_lines(r)
    info(table.concat(lines, '\n'))
    vim.api.nvim_exec_autocmds('User', { pattern = 'MnemoArchiveDone', modeline = false, data = r })
  end)
end

---@alias mnemo.Subcommand fun(args: string, bang: boolean)

---@type table<string, mnemo.Subcommand>
M.subcommands = {
  chat = function(args)
    local chat = require('mnemo.chat')
    chat.open()
    if args ~= '' then
      chat.send(args)
    else
      chat.ask()
    end
  end,
  search = function(args, bang)
    require('mnemo.search').search(args, { quickfix = bang })
  end,
  cancel = function()
    require('mnemo.chat').cancel()
  end,
  new = function()
    require('mnemo.chat').new_session()
  end,
  flush = function()
    require('mnemo.chat').flush()
  end,
  feedback = function(args)
    M.feedback(args)
  end,
  consolidate = function(_, bang)
    M.consolidate(bang)
  end,
  archive = function(args, bang)
    M.archive(args, bang)
  end,
  reset = function()
    require('mnemo.chat').reset_session()
  end,
  commit = function(args, bang)
    M.commit({ message = args ~= '' and args or nil, force = bang or nil })
  end,
  status = function()
    client_mod.request(protocol.STATUS, {}, function(s, client)
      client_mod.index_status[client.id] = s
      info(table.concat(M.status_lines(s), '\n'))
    end)
  end,
  reindex = function(_, bang)
    local client, err = client_mod.ensure()
    if not client then
      vim.notify(err or 'mnemo: no client', vim.log.levels.ERROR)
      return
    end
    local command = { title = 'reindex', command = protocol.CMD_REINDEX, arguments = { { full = bang } } }
    client_mod.call(client, 'request', 'workspace/executeCommand', command, function(e, s)
      if e then
        vim.notify(client_mod.describe_error(protocol.CMD_REINDEX, e), vim.log.levels.ERROR)
      else
        info('mnemo: reindexed: ' .. tostring(s and s.state) .. ', ' .. tostring(s and s.chunks) .. ' chunks')
      end
    end)
  end,
}

--- Entry point for the :Mnemo user command.
---@param o {args: string, bang: boolean}
function M.run(o)
  local sub, rest = o.args:match('^%s*(%S+)%s*(.-)%s*$')
  sub = sub or 'chat'
  local bang = o.bang
  if sub:sub(-1) == '!' then -- `:Mnemo search! query` as well as `:Mnemo! search query`
    sub, bang = sub:sub(1, -2), true
  end
  local fn = M.subcommands[sub]
  if not fn then
    vim.notify(('mnemo: unknown subcommand %q (one of: %s)'):format(sub, table.concat(M.names(), ', ')),
      vim.log.levels.ERROR)
    return
  end
  fn(rest or '', bang)
end

---@return string[]
function M.names()
  local names = vim.tbl_keys(M.subcommands)
  table.sort(names)
  return names
end

--- Completion for :Mnemo (subcommand names).
function M.complete(arglead, cmdline)
  if cmdline:match('^%s*%S+!?%s+%S+%s') then
    return {}
  end
  return vim.tbl_filter(function(n)
    return vim.startswith(n, arglead)
  end, M.names())
end

return M
