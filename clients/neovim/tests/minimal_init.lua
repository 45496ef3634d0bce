-- Minimal init for the headless tests: this plugin only, the server command from $MNEMO_TEST_CMD.
local plugin_root = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p:h:h')
vim.opt.runtimepath:prepend(plugin_root)
vim.opt.swapfile = false
vim.opt.shada = ''
vim.opt.more = false
package.path = plugin_root .. '/tests/?.lua;' .. package.path
vim.cmd('runtime plugin/mnemo.lua') -- --noplugin skips plugin/ scripts; load ours explicitly

local cmd = vim.env.MNEMO_TEST_CMD and vim.json.decode(vim.env.MNEMO_TEST_CMD) or { 'mnemo', 'serve' }
require('mnemo').setup({ cmd = cmd, request_timeout_ms = 20000 })
