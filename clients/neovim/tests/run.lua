-- Runs test files in one headless Neovim (one mnemo server for all of them, which keeps the suite fast).
--   MNEMO_TEST_SCRIPTS=test_search.lua,test_health.lua nvim --headless --noplugin -i NONE \
--     -u tests/minimal_init.lua -c 'luafile tests/run.lua'
-- Prints one line per test on stdout: RESULT {"name":…,"status":"pass"|"skip"|"fail","message":…}.
-- Exits 0 when nothing failed, 1 otherwise.
local H = require('helpers')
local here = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p:h')

local names = {}
if vim.env.MNEMO_TEST_SCRIPTS and vim.env.MNEMO_TEST_SCRIPTS ~= '' then
  names = vim.split(vim.env.MNEMO_TEST_SCRIPTS, ',', { trimempty = true })
else
  for name in vim.fs.dir(here) do
    if name:match('^test_.*%.lua$') then
      table.insert(names, name)
    end
  end
  table.sort(names)
end

local originals = { select = vim.ui.select, input = vim.ui.input }
local failed = false

for _, name in ipairs(names) do
  local started = vim.uv.hrtime()
  local result = { name = name }
  local ok, err = xpcall(function()
    H.reset()
    dofile(here .. '/' .. name)()
  end, function(e)
    if type(e) == 'table' and e.skip then
      return e
    end
    return debug.traceback(tostring(e), 2)
  end)
  vim.ui.select, vim.ui.input = originals.select, originals.input
  if ok then
    result.status = 'pass'
  elseif type(err) == 'table' and err.skip then
    result.status, result.message = 'skip', err.skip
  else
    result.status, result.message = 'fail', err
    failed = true
    H.log('FAIL ' .. name .. ': ' .. tostring(err))
    H.diagnostics()
  end
  result.seconds = (vim.uv.hrtime() - started) / 1e9
  io.stdout:write('RESULT ' .. vim.json.encode(result) .. '\n')
  io.stdout:flush()
end

vim.cmd(failed and 'cquit 1' or 'qall!')
