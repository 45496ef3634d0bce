--- Helpers for the headless tests (run.lua runs them). A test is a file returning a function; it passes
--- when the function returns, is skipped by H.skip(reason), and fails on any error.
local H = {}

H.ws = assert(vim.env.MNEMO_TEST_WS, 'MNEMO_TEST_WS is not set')
H.notifications = {} ---@type {msg: string, level: integer?}[]

local function out(stream, text)
  stream:write(text .. '\n')
  stream:flush()
end

function H.log(...)
  local parts = {}
  for i = 1, select('#', ...) do
    local v = select(i, ...)
    parts[#parts + 1] = type(v) == 'string' and v or vim.inspect(v)
  end
  out(io.stderr, table.concat(parts, ' '))
end

-- Record notifications (they are also what a user sees).
vim.notify = function(msg, level)
  table.insert(H.notifications, { msg = msg, level = level })
  H.log('notify:', msg)
end

local function diagnostics()
  H.log('--- notifications:', H.notifications)
  H.log('--- messages:', vim.fn.execute('messages'))
  for _, c in ipairs(vim.lsp.get_clients({ name = 'mnemo' })) do
    H.log('--- client', c.id, 'root', c.root_dir, 'initialized', c.initialized)
  end
  local log = vim.lsp.get_log_path()
  if vim.fn.filereadable(log) == 1 then
    local lines = vim.fn.readfile(log)
    H.log('--- lsp.log (last 40 lines):\n' .. table.concat(vim.list_slice(lines, math.max(1, #lines - 39)), '\n'))
  end
end

H.diagnostics = diagnostics

--- Skip the current test: `reason` says what is missing.
function H.skip(reason)
  error({ skip = reason }, 0)
end

--- Wait until `cond()` is truthy; fail naming `what` otherwise.
function H.wait(ms, cond, what)
  if not vim.wait(ms, cond, 20) then
    error('timed out waiting for ' .. what, 2)
  end
end

--- Back to one window on an empty buffer, between tests.
function H.reset()
  vim.cmd('silent! only!')
  vim.cmd('silent! enew!')
  vim.fn.setqflist({}, 'r')
  H.notifications = {}
end

--- Open a workspace file, wait for the mnemo client to attach and the index to be ready.
---@param rel? string
---@return vim.lsp.Client
function H.open(rel)
  vim.cmd('edit ' .. vim.fn.fnameescape(H.ws .. '/' .. (rel or 'MEMORY.md')))
  local client
  H.wait(20000, function()
    client = vim.lsp.get_clients({ name = 'mnemo', bufnr = 0 })[1]
    return client and client.initialized
  end, 'the mnemo client to attach and initialize')
  if H.ready then
    return client
  end
  H.wait(30000, function()
    local r = client:request_sync('mnemo/status', {}, 5000, 0)
    return r and r.result and r.result.state == 'ready'
  end, 'the index to be ready')
  H.ready = true
  return client
end

--- Does the server know `method`? A request it does not know answers MethodNotFound (-32601).
--- `params` should be invalid or harmless: the request really runs when the method exists.
---@return boolean
function H.supports(client, method, params)
  local r = client:request_sync(method, params or {}, 10000, 0)
  return not (r and r.err and r.err.code == -32601)
end

--- Skip unless the server implements every method in `methods` ({method, probe params}).
function H.require_methods(client, methods)
  local missing = {}
  for _, m in ipairs(methods) do
    if not H.supports(client, m[1], m[2]) then
      table.insert(missing, m[1])
    end
  end
  if #missing > 0 then
    H.skip('the server does not implement ' .. table.concat(missing, ', ') .. ' yet (MethodNotFound)')
  end
end

--- The line number (1-based) of the first line containing `text` in the current buffer.
function H.find_line(text)
  for i, line in ipairs(vim.api.nvim_buf_get_lines(0, 0, -1, false)) do
    if line:find(text, 1, true) then
      return i
    end
  end
end

function H.eq(expected, actual, what)
  if not vim.deep_equal(expected, actual) then
    error(('%s: expected %s, got %s'):format(what or 'value', vim.inspect(expected), vim.inspect(actual)), 2)
  end
end

function H.truthy(value, what)
  if not value then
    error(what or 'expected a truthy value', 2)
  end
  return value
end

return H
