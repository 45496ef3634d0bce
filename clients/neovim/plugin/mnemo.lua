-- mnemo: defines :Mnemo; everything else loads on first use.
if vim.g.loaded_mnemo == 1 then
  return
end
vim.g.loaded_mnemo = 1

vim.api.nvim_create_user_command('Mnemo', function(o)
  require('mnemo.commands').run(o)
end, {
  nargs = '*',
  bang = true,
  desc = 'mnemo: chat | search[!] {query} | commit[!] [message] | flush | new | reset | status | cancel | reindex[!]',
  complete = function(arglead, cmdline)
    return require('mnemo.commands').complete(arglead, cmdline)
  end,
})
