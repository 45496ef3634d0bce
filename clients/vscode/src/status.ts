/** Index status -> status bar text. Pure, unit tested. */
import type { IndexStatus } from "./protocol";

export interface StatusText {
  text: string;
  tooltip: string;
}

export function formatStatus(s: IndexStatus | undefined, serverState: "starting" | "running" | "stopped" = "running"): StatusText {
  if (serverState === "stopped") return { text: "$(error) mnemo", tooltip: "mnemo: the server is not running" };
  if (!s || serverState === "starting") return { text: "$(loading~spin) mnemo", tooltip: "mnemo: starting" };
  const lines = [
    `mnemo — ${s.state}${s.message ? `: ${s.message}` : ""}`,
    `workspace: ${s.workspace}`,
    `${s.files} file(s), ${s.chunks} chunk(s); ${s.mode} search (${s.provider}${s.model ? ` ${s.model}` : ""})`,
    ...s.configProblems.map((p) => `config: ${p}`),
    ...s.fileProblems.map((p) => `${p.path}: ${p.problem}`),
  ];
  const tooltip = lines.join("\n");
  switch (s.state) {
    case "indexing": {
      const { done, total } = s.progress;
      const pct = total > 0 ? ` ${Math.floor((100 * done) / total)}%` : "";
      return { text: `$(sync~spin) mnemo${pct}`, tooltip };
    }
    case "ready":
      return {
        text: `$(database) mnemo ${s.chunks}${s.configProblems.length + s.fileProblems.length ? " $(warning)" : ""}`,
        tooltip,
      };
    case "error":
      return { text: "$(error) mnemo", tooltip };
    default:
      return { text: "$(circle-outline) mnemo", tooltip };
  }
}
