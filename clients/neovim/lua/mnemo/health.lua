--- :checkhealth mnemo
local M = {}

local health = vim.health

function M.check()
  local client_mod = require('mnemo.client')

  health.start('mnemo: Neovim')
  local v = vim.version()
  local version = ('%d.%d.%d'):format(v.major, v.minor, v.patch)
  if vim.fn.has('nvim-0.10') == 1 then
    health.ok('Neovim ' .. version .. (vim.fn.has('nvim-0.11') == 1 and '' or ' (0.11 adds vim.lsp.config/enable)'))
  else
    health.error('Neovim ' .. version .. ' is too old', { 'mnemo needs Neovim 0.10 or newer' })
  end

  health.start('mnemo: server')
  local cfg = client_mod.resolved_config()
  local exe = cfg.cmd and cfg.cmd[1]
  if type(cfg.cmd) ~= 'table' then
    health.warn('cmd is a function; cannot check the executable')
  elseif exe and vim.fn.executable(exe) == 1 then
    local path = vim.fn.exepath(exe)
    local out = vim.system({ path, '--version' }, { text = true }):wait(5000)
    local ver = out.code == 0 and vim.trim(out.stdout or '') or '?'
    health.ok(('server executable: %s (%s); cmd: %s'):format(path, ver, table.concat(cfg.cmd, ' ')))
  else
    health.error(('server executable %q not found'):format(tostring(exe)), {
      'install mnemo (pip install mnemo, or make install in the repository)',
      "or point at it: vim.lsp.config('mnemo', { cmd = { '/path/to/.venv/bin/mnemo', 'serve' } })",
    })
  end

  health.start('mnemo: workspace')
  local client = client_mod.get()
  if client then
    health.ok(('client %d running, workspace root: %s'):format(client.id, tostring(client.root_dir)))
  else
    local root = client_mod.root(0)
    if root then
      health.info('no mnemo client running; workspace root for this buffer: ' .. root)
    else
      health.warn('no mnemo client running and no root marker (' ..
        table.concat(cfg.root_markers or {}, ', ') .. ') above ' .. vim.fn.getcwd(),
        { 'open a Markdown file inside a mnemo workspace (mnemo init DIR creates one)' })
    end
    health.info('index state and models are reported once a client runs (open a Markdown file)')
    return
  end

  local status, err = client_mod.request_sync(require('mnemo.protocol').STATUS, {}, 5000)
  if not status then
    health.error('mnemo/status failed: ' .. (type(err) == 'table' and (err.message or vim.inspect(err)) or tostring(err)))
    return
  end
  local index = ('index state: %s (%s files, %s chunks) at %s'):format(
    tostring(status.state), tostring(status.files), tostring(status.chunks), tostring(status.index))
  if status.state == 'ready' then
    health.ok(index)
  elseif status.state == 'error' then
    health.error(index .. ': ' .. tostring(status.message))
  elseif status.state == 'released' then
    health.info(index .. ': handed to another mnemo process, which now writes it')
  else
    local p = type(status.progress) == 'table' and status.progress or {}
    health.info(index .. (p.total and p.total > 0 and (' (%s of %s files)'):format(p.done, p.total) or ''))
  end
  local vectors = type(status.vectors) == 'table' and status.vectors or nil
  if vectors and vectors.chunks and vectors.chunks > 0 and vectors.embedded < vectors.chunks then
    health.info(('embedding in the background: %d of %d chunks have vectors'):format(vectors.embedded, vectors.chunks))
  end
  for _, note in ipairs(status.notes or {}) do
    health.warn(tostring(note))
  end
  for _, p in ipairs(status.configProblems or {}) do
    health.warn('mnemo.toml: ' .. (type(p) == 'table' and vim.inspect(p) or tostring(p)))
  end
  for _, p in ipairs(status.fileProblems or {}) do
    health.warn(('%s: %s'):format(p.path or '?', p.problem or '?'))
  end

  health.start('mnemo: models')
  local model = type(status.model) == 'string' and status.model ~= '' and status.model or '-'
  local dims = type(status.dims) == 'number' and status.dims > 0 and (', ' .. status.dims .. ' dims') or ''
  local embed = ('embeddings: provider %s, model %s%s, search mode %s'):format(tostring(status.provider),
    model, dims, tostring(status.mode))
  if status.mode == 'hybrid' then
    health.ok(embed)
  else
    health.warn(embed, { 'keyword (BM25) search only: set [embedding] provider in mnemo.toml for vector search' })
  end
  local chat = status.chatModel
  if type(chat) == 'table' and type(chat.line) == 'string' then
    if type(chat.note) == 'string' and chat.note ~= '' then
      health.warn(chat.line, { chat.note })
    else
      health.ok(chat.line)
    end
  else
    health.info('chat model: not reported by this server')
  end
end

return M
