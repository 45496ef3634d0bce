import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { archiveSessions, describeArchive, validateMonth, type ArchiveUi } from "../src/archive";
import { ErrorCodes, type ArchiveReport, type Req } from "../src/protocol";

const REPORT: ArchiveReport = {
  dryRun: false,
  already: 2,
  removed: ["2026-10-03-120000-abc123.jsonl"],
  months: [
    {
      path: "sessions/private-editor/2026-10.md",
      month: "2026-10",
      context: "private",
      channel: "editor",
      peer: "",
      sessions: ["2026-10-03-120000-abc123", "2026-10-04-090000-def456"],
      messages: 14,
      summary: "extractive",
      notes: [],
    },
  ],
  skipped: [{ sessionId: "2026-10-09-081500-d4e5f6", reason: "marked private; archived only with consent" }],
};

/** A UI that answers the month prompt with `month` and records what is shown. */
function fakeUi(month: string | undefined) {
  const shown: { info: { summary: string; details: string[] }[]; errors: string[]; rejected: string[] } = {
    info: [],
    errors: [],
    rejected: [],
  };
  const ui: ArchiveUi = {
    askMonth: (validate) => {
      for (const bad of ["October", "2026-13", "26-10"]) if (validate(bad)) shown.rejected.push(bad);
      return Promise.resolve(month);
    },
    info: (summary, details) => void shown.info.push({ summary, details }),
    error: (method, error) => void shown.errors.push(`${method}: ${(error as Error).message}`),
  };
  return { ui, shown };
}

function fakeBackend(answer: (params: unknown) => Promise<unknown>) {
  const calls: { method: string; params: unknown }[] = [];
  return {
    calls,
    backend: {
      request<P, R>(type: Req<P, R>, params: P): Promise<R> {
        calls.push({ method: type.method, params });
        return answer(params) as Promise<R>;
      },
    },
  };
}

describe("archive sessions command", () => {
  it("describes a report: months, skipped sessions, removed transcripts", () => {
    const { summary, details } = describeArchive(REPORT);
    assert.equal(summary, "mnemo: archived 1 month(s) of sessions (2 already archived)");
    assert.deepEqual(details, [
      "2026-10 sessions/private-editor/2026-10.md: 2 session(s), 14 message(s), extractive",
      "skipped 2026-10-09-081500-d4e5f6: marked private; archived only with consent",
      "removed 1 raw transcript(s)",
    ]);
    const dry = describeArchive({ ...REPORT, dryRun: true });
    assert.match(dry.summary, /^mnemo: would archive 1 month/);
    const none = describeArchive({ dryRun: false, already: 3, months: [], skipped: [], removed: [] });
    assert.deepEqual(none, { summary: "mnemo: no month to archive (3 already archived)", details: [] });
  });

  it("validates the month: YYYY-MM or empty", () => {
    assert.equal(validateMonth(""), undefined);
    assert.equal(validateMonth("2026-10"), undefined);
    for (const bad of ["2026-1", "2026-00", "2026-13", "Oct", "2026-10-01"]) assert.ok(validateMonth(bad), bad);
  });

  it("sends mnemo/archive with the month and shows the summary", async () => {
    const { backend, calls } = fakeBackend(() => Promise.resolve(REPORT));
    const { ui, shown } = fakeUi(" 2026-10 ");
    const report = await archiveSessions(backend, ui);
    assert.deepEqual(calls, [{ method: "mnemo/archive", params: { month: "2026-10" } }]);
    assert.equal(report, REPORT);
    assert.deepEqual(shown.rejected, ["October", "2026-13", "26-10"]);
    assert.equal(shown.info.length, 1);
    assert.match(shown.info[0].summary, /archived 1 month/);
    assert.equal(shown.info[0].details.length, 3);
  });

  it("archives every finished month when the month is left empty, and nothing when dismissed", async () => {
    const { backend, calls } = fakeBackend(() => Promise.resolve({ ...REPORT, months: [] }));
    await archiveSessions(backend, fakeUi("").ui);
    assert.deepEqual(calls, [{ method: "mnemo/archive", params: {} }]);
    const dismissed = await archiveSessions(backend, fakeUi(undefined).ui);
    assert.equal(dismissed, undefined);
    assert.equal(calls.length, 1);
  });

  it("shows the server's refusal as an error", async () => {
    const refusal = Object.assign(new Error("2099-01 is not finished yet"), { code: ErrorCodes.InvalidParams });
    const { backend } = fakeBackend(() => Promise.reject(refusal));
    const { ui, shown } = fakeUi("2099-01");
    assert.equal(await archiveSessions(backend, ui), undefined);
    assert.deepEqual(shown.errors, ["mnemo/archive: 2099-01 is not finished yet"]);
    assert.equal(shown.info.length, 0);
  });
});
