/** "mnemo: Archive sessions": the monthly session archive (mnemo/archive). Free of `vscode` so the test
 * drives it with a fake backend and a fake UI; commands.ts wires it to the real ones. */
import type { ArchiveParams, ArchiveReport, Req } from "./protocol";
import { Archive } from "./protocol";

export const MONTH_RE = /^\d{4}-(0[1-9]|1[0-2])$/;

export interface ArchiveBackend {
  request<P, R>(type: Req<P, R>, params: P): Promise<R>;
}

export interface ArchiveUi {
  /** The month asked for: "" for every finished month not archived yet, undefined when dismissed. */
  askMonth(validate: (value: string) => string | undefined): Promise<string | undefined>;
  info(message: string, details: string[]): void;
  error(method: string, error: unknown): void;
}

/** The report's summary line and one line per month, skipped session and removed transcript. */
export function describeArchive(report: ArchiveReport): { summary: string; details: string[] } {
  const n = report.months.length;
  const verb = report.dryRun ? "would archive" : "archived";
  const summary =
    n === 0
      ? `mnemo: no month to archive (${report.already} already archived)`
      : `mnemo: ${verb} ${n} month(s) of sessions (${report.already} already archived)`;
  const details = [
    ...report.months.map(
      (m) => `${m.month} ${m.path}: ${m.sessions.length} session(s), ${m.messages} message(s), ${m.summary}`,
    ),
    ...report.skipped.map((s) => `skipped ${s.sessionId}: ${s.reason}`),
    ...(report.removed.length ? [`removed ${report.removed.length} raw transcript(s)`] : []),
  ];
  return { summary, details };
}

export function validateMonth(value: string): string | undefined {
  return value.trim() === "" || MONTH_RE.test(value.trim()) ? undefined : "A month written YYYY-MM, or empty";
}

/** Ask for a month, run the archive, report it. Returns the report (undefined: dismissed or failed). */
export async function archiveSessions(backend: ArchiveBackend, ui: ArchiveUi): Promise<ArchiveReport | undefined> {
  const month = await ui.askMonth(validateMonth);
  if (month === undefined) return undefined;
  const params: ArchiveParams = month.trim() ? { month: month.trim() } : {};
  try {
    const report = await backend.request(Archive, params);
    const { summary, details } = describeArchive(report);
    ui.info(summary, details);
    return report;
  } catch (error) {
    ui.error(Archive.method, error);
    return undefined;
  }
}
