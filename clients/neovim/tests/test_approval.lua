-- mnemo/exec asks for approval (mnemo/approvalRequest); a scripted vim.ui.select answers it.
local H = require('helpers')

local function exec(client, command)
  local done, response
  client:request('mnemo/exec', { command = command, approvalTimeoutS = 20 }, function(err, result)
    done, response = true, { err = err, result = result }
  end, 0)
  H.wait(30000, function()
    return done
  end, 'the mnemo/exec answer')
  H.truthy(not response.err, 'mnemo/exec failed: ' .. vim.inspect(response.err))
  return response.result
end

return function()
  local client = H.open('MEMORY.md')
  H.require_methods(client, { { 'mnemo/exec', {} } })

  local asked = {}
  local answer = 1
  vim.ui.select = function(items, opts, on_choice)
    table.insert(asked, { items = vim.tbl_map(opts.format_item, items), prompt = opts.prompt, kind = opts.kind })
    vim.defer_fn(function() -- answer later, as a real picker does
      on_choice(items[answer])
    end, 50)
  end

  local allowed = exec(client, 'echo approved-from-neovim')
  H.eq(1, #asked, 'approval prompts')
  H.eq({ 'Allow once', 'Always allow', 'Deny' }, asked[1].items, 'choices')
  H.eq('mnemo.approval', asked[1].kind, 'select kind')
  H.truthy(asked[1].prompt:find('echo approved-from-neovim', 1, true), 'the prompt shows the command: ' .. asked[1].prompt)
  H.eq('allow_once', allowed.approval, 'recorded answer')
  H.eq('confirm', allowed.decision, 'decision')
  H.truthy(allowed.ok and allowed.output:find('approved-from-neovim', 1, true), 'the command ran: ' .. vim.inspect(allowed))

  answer = 3
  local denied = exec(client, 'echo denied-from-neovim')
  H.eq(2, #asked, 'approval prompts')
  H.eq('deny', denied.approval, 'recorded answer')
  H.truthy(not denied.ok and not denied.output:find('denied-from-neovim\n', 1, true), 'the command did not run: ' .. vim.inspect(denied))
end
