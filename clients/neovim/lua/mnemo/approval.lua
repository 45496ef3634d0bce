--- Approvals: the server asks (`mnemo/approvalRequest`) before a tool runs a command; the user answers
--- with vim.ui.select. The answer goes back in the request's response (default) or, with
--- `approval.reply = 'resolve'`, through `mnemo/resolveApproval`.
local config = require('mnemo.config')
local protocol = require('mnemo.protocol')

local M = {}

---@class mnemo.ApprovalRequest
---@field id string
---@field tool string
---@field command? string the exact command that would run (exec)
---@field summary? string what will run, for any tool (`write_file PATH (N bytes)` ...)
---@field reason? string why it needs approval
---@field rule? string the policy rule that matched
---@field timeoutS? number the server denies when nobody answers in time

M.choices = {
  { label = 'Allow once', value = protocol.choice.allow_once },
  { label = 'Always allow', value = protocol.choice.always },
  { label = 'Deny', value = protocol.choice.deny },
}

---@param req mnemo.ApprovalRequest
---@return string
function M.prompt(req)
  local what = req.command ~= nil and req.command ~= vim.NIL and req.command or req.summary
  local lines = { ('mnemo: %s wants to run:'):format(req.tool or 'a tool'), '  ' .. tostring(what) }
  if req.reason and req.reason ~= '' then
    table.insert(lines, 'reason: ' .. req.reason)
  end
  if req.rule and req.rule ~= '' then
    table.insert(lines, 'rule: ' .. req.rule)
  end
  if req.timeoutS then
    table.insert(lines, ('(denied after %ds without an answer)'):format(req.timeoutS))
  end
  return table.concat(lines, '\n')
end

---@type table<string, fun(choice: mnemo.ApprovalChoice)[]> approvals being asked now, by id
M.asking = {}
---@type table<string, boolean> approvals already answered here (not asked twice)
M.answered = {}

--- Ask the user once per approval id; `on_choice` gets 'allow_once' | 'always' | 'deny' (dismissing the
--- picker denies). A second ask for the same id waits for the first answer.
---@param req mnemo.ApprovalRequest
---@param on_choice fun(choice: mnemo.ApprovalChoice)
function M.ask(req, on_choice)
  local id = tostring(req.id)
  if M.asking[id] then
    table.insert(M.asking[id], on_choice)
    return
  end
  M.asking[id] = { on_choice }
  vim.ui.select(M.choices, {
    prompt = M.prompt(req),
    kind = 'mnemo.approval',
    format_item = function(item)
      return item.label
    end,
  }, function(item)
    local waiters = M.asking[id] or {}
    M.asking[id], M.answered[id] = nil, true
    for _, cb in ipairs(waiters) do
      cb(item and item.value or protocol.choice.deny)
    end
  end)
end

--- Handler for the server's `mnemo/approvalRequest` request. Neovim runs server-request handlers in a
--- coroutine, so the handler yields until vim.ui.select answers and returns `{choice}` as the response.
function M.handler(_, req, ctx)
  if type(req) ~= 'table' then
    return nil, vim.lsp.rpc.rpc_response_error(protocol.errors.invalid_params, 'approval request without params')
  end
  local co = coroutine.running()
  local can_wait = co ~= nil and not select(2, coroutine.running())
  if config.get().approval.reply == 'resolve' or not can_wait then
    M.ask(req, function(choice)
      M.resolve(ctx and ctx.client_id, req.id, choice)
    end)
    -- The server keeps waiting on its queue after an error answer; mnemo/resolveApproval settles it.
    return nil, vim.lsp.rpc.rpc_response_error(protocol.errors.request_failed, 'answered with ' .. protocol.RESOLVE_APPROVAL)
  end
  local answered, answer = false, nil
  local waiting = false
  M.ask(req, function(choice)
    answered, answer = true, choice
    if waiting then
      vim.schedule(function()
        local ok, err = coroutine.resume(co)
        if not ok then
          vim.notify('mnemo: approval reply failed: ' .. tostring(err), vim.log.levels.ERROR)
        end
      end)
    end
  end)
  if not answered then
    waiting = true
    coroutine.yield()
  end
  return { choice = answer }
end

--- Handler for the `mnemo/approvalsChanged` notification ({pending}): approvals the server queued without
--- asking this client (or before it could) are fetched with `mnemo/approvals`, asked, and answered with
--- `mnemo/resolveApproval`.
function M.on_changed(_, params, ctx)
  if type(params) ~= 'table' or (tonumber(params.pending) or 0) < 1 then
    return vim.NIL
  end
  local client = ctx and ctx.client_id and vim.lsp.get_client_by_id(ctx.client_id)
  if not client then
    return vim.NIL
  end
  require('mnemo.client').call(client, 'request', protocol.APPROVALS, vim.empty_dict(), function(err, result)
    if err or type(result) ~= 'table' then
      return
    end
    for _, req in ipairs(result.approvals or {}) do
      local id = tostring(req.id)
      if not M.asking[id] and not M.answered[id] then
        M.ask(req, function(choice)
          M.resolve(client.id, req.id, choice)
        end)
      end
    end
  end)
  return vim.NIL
end

--- Answer an approval through `mnemo/resolveApproval`.
---@param client_id? integer
---@param id string
---@param choice mnemo.ApprovalChoice
function M.resolve(client_id, id, choice)
  local client = client_id and vim.lsp.get_client_by_id(client_id) or require('mnemo.client').get()
  if not client then
    return
  end
  require('mnemo.client').call(client, 'request', protocol.RESOLVE_APPROVAL, { id = id, choice = choice },
    function(err)
      if err then
        vim.notify(require('mnemo.client').describe_error(protocol.RESOLVE_APPROVAL, err), vim.log.levels.ERROR)
      end
    end)
end

return M
