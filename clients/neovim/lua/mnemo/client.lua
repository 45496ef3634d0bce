--- The mnemo LSP client's lifecycle: configuration, starting on demand, requests, index status.
local config = require('mnemo.config')
local protocol = require('mnemo.protocol')

local M = {}

M.name = 'mnemo'

local has_011 = vim.fn.has('nvim-0.11') == 1

---@type table<integer, table> last `mnemo/indexStatus` (or `mnemo/status`) object per client id
M.index_status = {}

--- Call a client method on 0.11 (`client:request`) and 0.10 (`client.request`) alike.
---@param client vim.lsp.Client
---@param name string
local function call(client, name, ...)
  if has_011 then
    return client[name](client, ...)
  end
  return client[name](...)
end
M.call = call

--- The config that `lsp/mnemo.lua` on the runtimepath returns.
---@return vim.lsp.Config
function M.base_config()
  local file = vim.api.nvim_get_runtime_file('lsp/mnemo.lua', false)[1]
  return file and dofile(file) or {}
end

--- What `setup(opts)` changes in the server config.
---@param opts mnemo.Config
---@return vim.lsp.Config
function M.overrides(opts)
  local o = { cmd = opts.cmd, filetypes = opts.filetypes, root_markers = opts.root_markers }
  if opts.workspace then
    local root = vim.fs.normalize(vim.fn.fnamemodify(opts.workspace, ':p')):gsub('/$', '')
    o.root_dir = root
    o.init_options = { workspace = root }
  end
  return o
end

--- The resolved server config: `vim.lsp.config.mnemo` on 0.11, lsp/mnemo.lua + setup options on 0.10.
---@return vim.lsp.ClientConfig
function M.resolved_config()
  local cfg ---@type table?
  if has_011 and vim.lsp.config then
    local ok, c = pcall(function()
      return vim.lsp.config[M.name]
    end)
    cfg = ok and c and vim.deepcopy(c) or nil
  end
  if not cfg then
    cfg = vim.tbl_deep_extend('force', M.base_config(), M.overrides(config.get()))
  end
  cfg.name = M.name
  return cfg
end

--- The workspace root for a buffer or path: `workspace` from setup, else the nearest root marker.
---@param source? integer|string buffer number or path (default: current buffer)
---@return string?
function M.root(source)
  local opts = config.get()
  if opts.workspace then
    return (vim.fs.normalize(vim.fn.fnamemodify(opts.workspace, ':p')):gsub('/$', ''))
  end
  return vim.fs.root(source or 0, M.resolved_config().root_markers or opts.root_markers)
end

--- Register the server with Neovim. 0.11: vim.lsp.config + vim.lsp.enable; 0.10: a FileType autocmd.
---@param opts mnemo.Config
function M.setup(opts)
  if has_011 and vim.lsp.config then
    vim.lsp.config(M.name, M.overrides(opts))
    if opts.enable then
      vim.lsp.enable(M.name)
    end
    return
  end
  if not opts.enable then
    return
  end
  local group = vim.api.nvim_create_augroup('mnemo.lsp', { clear = true })
  local function start(bufnr)
    if vim.bo[bufnr].buftype ~= '' then
      return
    end
    local cfg = M.resolved_config()
    cfg.root_dir = cfg.root_dir or M.root(bufnr)
    vim.lsp.start(cfg, { bufnr = bufnr })
  end
  vim.api.nvim_create_autocmd('FileType', {
    group = group,
    pattern = opts.filetypes,
    callback = function(ev)
      start(ev.buf)
    end,
  })
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(buf) and vim.tbl_contains(opts.filetypes, vim.bo[buf].filetype) then
      start(buf)
    end
  end
end

--- The running mnemo client: the one attached to `bufnr`, else the one whose root holds the current
--- folder, else any.
---@param bufnr? integer
---@return vim.lsp.Client?
function M.get(bufnr)
  local attached = vim.lsp.get_clients({ name = M.name, bufnr = bufnr or vim.api.nvim_get_current_buf() })
  if attached[1] then
    return attached[1]
  end
  local all = vim.lsp.get_clients({ name = M.name })
  local cwd = vim.fn.getcwd()
  for _, c in ipairs(all) do
    if c.root_dir and (cwd == c.root_dir or vim.startswith(cwd, c.root_dir .. '/')) then
      return c
    end
  end
  return all[1]
end

--- The running client, or a new one started for the current buffer's workspace (or the current folder).
--- Waits until it is initialized.
---@return vim.lsp.Client?, string? err
function M.ensure()
  local client = M.get()
  if not client then
    local cfg = M.resolved_config()
    cfg.root_dir = cfg.root_dir or M.root(0) or vim.fn.getcwd()
    if vim.fn.executable(cfg.cmd[1]) ~= 1 then
      return nil, ('mnemo: server executable %q not found (set cmd in setup() or vim.lsp.config)'):format(cfg.cmd[1])
    end
    local id ---@type integer?
    if has_011 then
      id = vim.lsp.start(cfg, { attach = false })
    else
      id = vim.lsp.start_client(cfg)
    end
    client = id and vim.lsp.get_client_by_id(id) or nil
    if not client then
      return nil, 'mnemo: could not start the server'
    end
  end
  if not client.initialized then
    vim.wait(config.get().request_timeout_ms, function()
      return client.initialized or call(client, 'is_stopped')
    end, 20)
  end
  if not client.initialized then
    return nil, 'mnemo: the server did not initialize (see :LspLog)'
  end
  return client
end

--- A readable message for an LSP error.
---@param method string
---@param err table|string
---@return string
function M.describe_error(method, err)
  if type(err) ~= 'table' then
    return ('mnemo: %s failed: %s'):format(method, tostring(err))
  end
  if err.code == protocol.errors.method_not_found then
    return ('mnemo: this server does not support %s (update mnemo)'):format(method)
  end
  if err.code == protocol.errors.request_cancelled then
    return ('mnemo: %s cancelled'):format(method)
  end
  return ('mnemo: %s failed: %s'):format(method, err.message or vim.inspect(err))
end

--- Send a request to the mnemo server; `on_result(result, client)` runs on success, errors are notified
--- unless `on_error` handles them.
---@param method string
---@param params table?
---@param on_result fun(result: any, client: vim.lsp.Client)
---@param on_error? fun(err: table, client: vim.lsp.Client)
---@return integer? request_id, vim.lsp.Client? client
function M.request(method, params, on_result, on_error)
  local client, err = M.ensure()
  if not client then
    vim.notify(err or 'mnemo: no client', vim.log.levels.ERROR)
    return nil, nil
  end
  local ok, request_id = call(client, 'request', method, params or vim.empty_dict(), function(e, result)
    if e then
      if on_error then
        on_error(e, client)
      else
        vim.notify(M.describe_error(method, e), vim.log.levels.ERROR)
      end
      return
    end
    on_result(result, client)
  end)
  if not ok then
    vim.notify(('mnemo: could not send %s (is the server running?)'):format(method), vim.log.levels.ERROR)
    return nil, client
  end
  return request_id, client
end

--- Send a request and wait for the answer (for :checkhealth and scripts).
---@param method string
---@param params table?
---@param timeout_ms? integer
---@return any result, table|string|nil err
function M.request_sync(method, params, timeout_ms)
  local client, err = M.ensure()
  if not client then
    return nil, err
  end
  local response, e = call(client, 'request_sync', method, params or vim.empty_dict(),
    timeout_ms or config.get().request_timeout_ms)
  if not response then
    return nil, e or 'timeout'
  end
  return response.result, response.err
end

--- The workspace folder of a client (what citations are relative to).
---@param client? vim.lsp.Client
---@return string?
function M.workspace(client)
  client = client or M.get()
  if not client then
    return M.root(0)
  end
  local status = M.index_status[client.id]
  return (status and status.workspace) or client.root_dir or (client.config and client.config.root_dir)
end

--- Handler for the `mnemo/indexStatus` notification: remembered per client and announced as the
--- `User MnemoIndexStatus` autocmd (data: the status object) for status lines.
function M.on_index_status(_, result, ctx)
  if type(result) == 'table' and ctx and ctx.client_id then
    M.index_status[ctx.client_id] = result
    vim.api.nvim_exec_autocmds('User', { pattern = 'MnemoIndexStatus', modeline = false, data = result })
  end
  return vim.NIL
end

--- A short description of the index state for a status line ('' when no client runs).
---@return string
function M.statusline()
  local client = M.get()
  local s = client and M.index_status[client.id]
  if not s then
    return ''
  end
  if s.state == 'indexing' and s.progress then
    return ('mnemo: indexing %d/%d'):format(s.progress.done or 0, s.progress.total or 0)
  end
  return 'mnemo: ' .. tostring(s.state)
end

return M
