-- :Mnemo archive [YYYY-MM] runs the monthly session archive (mnemo/archive) and reports it.
local H = require('helpers')

local function archive(cmd)
  local report
  vim.api.nvim_create_autocmd('User', {
    pattern = 'MnemoArchiveDone',
    once = true,
    callback = function(ev)
      report = ev.data
    end,
  })
  vim.cmd(cmd)
  H.wait(20000, function()
    return report ~= nil
  end, 'the archive report for ' .. cmd)
  return report
end

return function()
  local client = H.open('MEMORY.md')
  H.require_methods(client, { { 'mnemo/archive', { month = 'nonsense' } } })

  -- A dry run of every finished month: nothing written, the summary line is notified.
  local dry = archive('Mnemo archive!')
  H.eq(true, dry.dryRun, 'dry run')
  local n = H.notifications[#H.notifications]
  H.truthy(n and (n.msg:find('^mnemo: would archive') or n.msg:find('^mnemo: no month to archive')),
    vim.inspect(H.notifications))

  -- One finished month with no transcripts: nothing to archive, and it says so.
  local one = archive('Mnemo archive 2020-01')
  H.eq(0, #one.months, 'months archived for 2020-01')
  H.eq(false, one.dryRun, 'a real run')
  n = H.notifications[#H.notifications]
  H.truthy(n and n.msg:find('^mnemo: no month to archive'), vim.inspect(H.notifications))

  -- A month that is not finished: the server refuses it, the error is shown.
  H.notifications = {}
  vim.cmd('Mnemo archive 2999-01')
  H.wait(20000, function()
    return #H.notifications > 0
  end, 'the refusal of an unfinished month')
  n = H.notifications[1]
  H.eq(vim.log.levels.ERROR, n.level, 'refusal level')
  H.truthy(n.msg:find('not finished', 1, true), n.msg)

  -- A malformed month never reaches the server.
  H.notifications = {}
  vim.cmd('Mnemo archive October')
  H.truthy(H.notifications[1] and H.notifications[1].msg:find('usage: :Mnemo archive', 1, true),
    vim.inspect(H.notifications))

  -- The report's lines: a month, a skipped session, removed transcripts.
  local lines = require('mnemo.commands').archive_lines({
    dryRun = false, already = 1, removed = { 'a.jsonl' },
    months = { { month = '2026-10', path = 'sessions/private-editor/2026-10.md', sessions = { 'x', 'y' },
      messages = 14, summary = 'extractive' } },
    skipped = { { sessionId = 'z', reason = 'marked private' } },
  })
  H.eq('mnemo: archived 1 month(s) of sessions (1 already archived)', lines[1], 'summary line')
  H.eq('  2026-10 sessions/private-editor/2026-10.md: 2 session(s), 14 message(s), extractive', lines[2], 'month')
  H.eq('  skipped z: marked private', lines[3], 'skipped')
  H.eq('  removed 1 raw transcript(s)', lines[4], 'removed')
end
