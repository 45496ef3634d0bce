--- `mnemo/memorySearch`: pick a result with vim.ui.select, or put every result in the quickfix list.
local client_mod = require('mnemo.client')
local config = require('mnemo.config')
local protocol = require('mnemo.protocol')

local M = {}

---@class mnemo.SearchResult
---@field path string workspace-relative
---@field startLine integer 1-based
---@field endLine integer 1-based
---@field score number
---@field snippet string
---@field source string memory | skills | sessions
---@field citation string path#Lx-Ly
---@field heading? string

local function first_line(text)
  for line in (text or ''):gmatch('[^\n]+') do
    line = vim.trim(line)
    if line ~= '' then
      return line
    end
  end
  return ''
end

--- Quickfix items for search results (absolute file names under `root`).
---@param results mnemo.SearchResult[]
---@param root? string
---@return vim.quickfix.entry[]
function M.to_qf_items(results, root)
  local items = {}
  for _, r in ipairs(results) do
    table.insert(items, {
      filename = root and (root .. '/' .. r.path) or r.path,
      lnum = r.startLine,
      end_lnum = r.endLine,
      col = 1,
      text = ('%s (score %.3f)'):format(first_line(r.snippet), r.score or 0),
    })
  end
  return items
end

---@param r mnemo.SearchResult
---@return string
function M.format_item(r)
  local where = r.heading and r.heading ~= '' and r.heading or first_line(r.snippet)
  return ('%.3f  %s  %s'):format(r.score or 0, r.citation or r.path, where)
end

--- Search memory.
---@param query string
---@param opts? {quickfix?: boolean, on_done?: fun(result: table)}
function M.search(query, opts)
  opts = opts or {}
  query = vim.trim(query or '')
  if query == '' then
    vim.notify('mnemo: search needs a query (:Mnemo search {query})', vim.log.levels.WARN)
    return
  end
  local sopts = config.get().search
  local params = { query = query, maxResults = sopts.max_results, minScore = sopts.min_score }
  client_mod.request(protocol.MEMORY_SEARCH, params, function(result, client)
    local results = result and result.results or {}
    local root = client_mod.workspace(client)
    if opts.quickfix then
      vim.fn.setqflist({}, ' ', { title = 'mnemo: ' .. query, items = M.to_qf_items(results, root) })
      if #results == 0 then
        vim.notify('mnemo: nothing found for ' .. query, vim.log.levels.INFO)
      elseif sopts.open_quickfix then
        vim.cmd('botright copen')
      end
    elseif #results == 0 then
      vim.notify('mnemo: nothing found for ' .. query, vim.log.levels.INFO)
    else
      vim.ui.select(results, {
        prompt = ('mnemo (%s): %s'):format(result.mode or '?', query),
        format_item = M.format_item,
        kind = 'mnemo.search',
      }, function(choice)
        if choice then
          require('mnemo.chat').open_location(choice.path, choice.startLine, choice.endLine)
        end
      end)
    end
    if opts.on_done then
      opts.on_done(result)
    end
  end)
end

return M
