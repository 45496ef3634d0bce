/** The palette commands. Each is one request to the server and a way to show its answer. */
import * as vscode from "vscode";
import { archiveSessions } from "./archive";
import type { MnemoClient } from "./client";
import type { ChatController } from "./chat/controller";
import { describeFlush, errorCode, errorMessage } from "./chat/controller";
import type { ChatViewProvider } from "./chat/view";
import { openAtLines } from "./open";
import { Commit, ErrorCodes, Flush, MemorySearch, Status, type CommitParams, type CommitResult, type SearchHit } from "./protocol";

interface HitItem extends vscode.QuickPickItem {
  hit?: SearchHit;
}

export const SEARCH_DEBOUNCE_MS = 200;

function failure(method: string, error: unknown): string {
  return errorCode(error) === ErrorCodes.MethodNotFound
    ? `mnemo: this server does not implement ${method} yet; update mnemo (make install).`
    : `mnemo: ${method} failed: ${errorMessage(error)}`;
}

export function hitItem(hit: SearchHit): HitItem {
  const snippet = hit.snippet.replace(/\s+/g, " ").trim();
  return {
    label: hit.heading || hit.path,
    description: `${hit.citation}  ·  ${hit.score.toFixed(3)}`,
    detail: snippet.length > 200 ? `${snippet.slice(0, 199)}…` : snippet,
    hit,
  };
}

function searchMemory(client: MnemoClient): void {
  const pick = vscode.window.createQuickPick<HitItem>();
  pick.title = "mnemo: search memory";
  pick.placeholder = "What are you looking for? (any language)";
  pick.matchOnDescription = true;
  pick.matchOnDetail = true;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let inflight: AbortController | undefined;
  const run = async (query: string): Promise<void> => {
    inflight?.abort();
    if (!query.trim()) {
      pick.items = [];
      pick.busy = false;
      return;
    }
    const abort = new AbortController();
    inflight = abort;
    pick.busy = true;
    try {
      const result = await client.request(MemorySearch, { query, maxResults: 20 }, abort.signal);
      if (abort.signal.aborted) return;
      const items: HitItem[] = result.results.map(hitItem);
      // The filter would hide semantic hits that do not contain the typed words.
      items.forEach((item) => (item.alwaysShow = true));
      if (items.length === 0) items.push({ label: "No results", description: result.notes.join(" "), alwaysShow: true });
      pick.items = items;
    } catch (error) {
      if (!abort.signal.aborted) pick.items = [{ label: failure(MemorySearch.method, error), alwaysShow: true }];
    } finally {
      if (inflight === abort) pick.busy = false;
    }
  };
  pick.onDidChangeValue((value) => {
    if (timer) clearTimeout(timer);
    timer = setTimeout(() => void run(value), SEARCH_DEBOUNCE_MS);
  });
  pick.onDidAccept(() => {
    const hit = pick.selectedItems[0]?.hit;
    if (!hit) return;
    pick.hide();
    void openAtLines(client.workspaceRoot(), { path: hit.path, startLine: hit.startLine, endLine: hit.endLine });
  });
  pick.onDidHide(() => {
    inflight?.abort();
    if (timer) clearTimeout(timer);
    pick.dispose();
  });
  pick.show();
}

async function commitMemory(client: MnemoClient): Promise<void> {
  const message = await vscode.window.showInputBox({
    title: "mnemo: commit memory",
    prompt: "Commit subject (empty: mnemo writes one from the changed sections)",
    placeHolder: "memory: …",
  });
  if (message === undefined) return;
  const params: CommitParams = message.trim() ? { message: message.trim() } : {};
  for (;;) {
    try {
      const result: CommitResult = await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: "mnemo: committing memory" },
        () => client.request(Commit, params),
      );
      const files = result.files.map((f) => `${f.status} ${f.path}`).join(", ");
      void vscode.window.showInformationMessage(`mnemo: committed ${result.commit.slice(0, 8)} ${result.message.split("\n")[0]} (${files})`);
      return;
    } catch (error) {
      const text = errorMessage(error);
      const data = (error as { data?: { secrets?: unknown[] } }).data;
      // The server refuses a secret or a missing repository; the user may override either, knowingly.
      if (Array.isArray(data?.secrets) && !params.force) {
        const pick = await vscode.window.showWarningMessage(`mnemo: ${text}`, { modal: true }, "Commit anyway");
        if (pick !== "Commit anyway") return;
        params.force = true;
        continue;
      }
      if (/no (git )?repositor|not a git repositor|initRepo/i.test(text) && !params.initRepo) {
        const pick = await vscode.window.showWarningMessage(`mnemo: ${text}`, "Initialize repository");
        if (pick !== "Initialize repository") return;
        params.initRepo = true;
        continue;
      }
      void vscode.window.showErrorMessage(failure(Commit.method, error));
      return;
    }
  }
}

async function flushMemory(client: MnemoClient, chat: ChatController): Promise<void> {
  const sessionId = chat.sessionId;
  if (!sessionId) {
    void vscode.window.showInformationMessage("mnemo: nothing to flush yet; chat first (the flush saves a session's durable memories).");
    return;
  }
  try {
    const result = await client.request(Flush, { sessionId });
    void vscode.window.showInformationMessage(`mnemo: ${describeFlush(result)}`);
  } catch (error) {
    void vscode.window.showErrorMessage(failure(Flush.method, error));
  }
}

async function runCommand(chat: ChatController, view: ChatViewProvider): Promise<void> {
  const command = await vscode.window.showInputBox({
    title: "mnemo: run a command (sandboxed, under the approval policy)",
    prompt: "The command line; mnemo's policy decides whether it runs, asks you, or refuses",
    placeHolder: "ls memory",
  });
  if (!command?.trim()) return;
  view.reveal();
  await chat.runCommand(command);
}

async function showStatus(client: MnemoClient): Promise<void> {
  try {
    const status = await client.request(Status, {});
    client.output.appendLine(JSON.stringify(status, null, 2));
    const problems = status.configProblems.length + status.fileProblems.length;
    const pick = await vscode.window.showInformationMessage(
      `mnemo: index ${status.state}${status.message ? ` (${status.message})` : ""}: ${status.files} file(s), ` +
        `${status.chunks} chunk(s), ${status.mode} search${problems ? `, ${problems} problem(s)` : ""}.`,
      "Show details",
      "Reindex",
    );
    if (pick === "Show details") client.output.show();
    if (pick === "Reindex") await vscode.commands.executeCommand("mnemo.reindex");
  } catch (error) {
    void vscode.window.showErrorMessage(failure(Status.method, error));
  }
}

async function archive(client: MnemoClient): Promise<void> {
  await archiveSessions(client, {
    askMonth: (validate) =>
      Promise.resolve(
        vscode.window.showInputBox({
          title: "mnemo: archive sessions",
          prompt: "A finished month YYYY-MM (written again), or empty for every finished month not archived yet",
          placeHolder: "2026-10",
          validateInput: validate,
        }),
      ),
    info: (summary, details) => {
      client.output.appendLine([summary, ...details.map((d) => `  ${d}`)].join("\n"));
      void vscode.window.showInformationMessage(summary, ...(details.length ? ["Show details"] : [])).then((pick) => {
        if (pick === "Show details") client.output.show();
      });
    },
    error: (method, error) => void vscode.window.showErrorMessage(failure(method, error)),
  });
}

export function registerCommands(client: MnemoClient, chat: ChatController, view: ChatViewProvider): vscode.Disposable[] {
  return [
    vscode.commands.registerCommand("mnemo.searchMemory", () => searchMemory(client)),
    vscode.commands.registerCommand("mnemo.commitMemory", () => commitMemory(client)),
    vscode.commands.registerCommand("mnemo.flushMemory", () => flushMemory(client, chat)),
    vscode.commands.registerCommand("mnemo.newSession", async () => {
      view.reveal();
      await chat.newSession();
    }),
    vscode.commands.registerCommand("mnemo.openChat", () => view.reveal()),
    vscode.commands.registerCommand("mnemo.runCommand", () => runCommand(chat, view)),
    vscode.commands.registerCommand("mnemo.showStatus", () => showStatus(client)),
    vscode.commands.registerCommand("mnemo.archive", () => archive(client)),
    vscode.commands.registerCommand("mnemo.restartServer", () => client.restart()),
  ];
}
