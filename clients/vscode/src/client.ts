/**
 * The server's lifecycle: finds `mnemo`, starts `mnemo serve` on stdio through vscode-languageclient,
 * owns the output and trace channels, and forwards mnemo's custom notifications and server->client
 * requests to whoever subscribed. Standard LSP (hover, code lens, diagnostics, code actions,
 * workspace/executeCommand, work-done progress) is handled by vscode-languageclient itself.
 */
import * as fs from "node:fs";
import * as vscode from "vscode";
import {
  LanguageClient,
  State,
  type LanguageClientOptions,
  type ServerOptions,
} from "vscode-languageclient/node";
import { missingServerMessage, resolveServerCommand } from "./serverCommand";
import {
  ApprovalRequest,
  ApprovalsChangedNote,
  ChatDeltaNote,
  ErrorCodes,
  IndexStatusNote,
  Status,
  type ApprovalRequestParams,
  type ApprovalResponse,
  type ChatDelta,
  type IndexStatus,
  type Req,
} from "./protocol";

export type ServerState = "starting" | "running" | "stopped";

export interface ClientHandlers {
  onIndexStatus(status: IndexStatus): void;
  onChatDelta(delta: ChatDelta): void;
  onApprovalRequest(params: ApprovalRequestParams, signal: AbortSignal): Promise<ApprovalResponse>;
  onApprovalsChanged(pending: number): void;
  onState(state: ServerState): void;
}

function isExecutable(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

export class MnemoClient implements vscode.Disposable {
  readonly output = vscode.window.createOutputChannel("mnemo", { log: true });
  readonly trace = vscode.window.createOutputChannel("mnemo trace", { log: true });
  private client: LanguageClient | undefined;
  private lastStatus: IndexStatus | undefined;
  /** the "server not found" error was shown; requests do not show it again until a restart */
  private missingReported = false;

  constructor(private readonly handlers: ClientHandlers) {}

  /** The memory workspace: `mnemo.workspace`, else the first workspace folder. */
  workspaceRoot(): vscode.Uri | undefined {
    const setting = vscode.workspace.getConfiguration("mnemo").get<string>("workspace", "").trim();
    const first = vscode.workspace.workspaceFolders?.[0]?.uri;
    if (setting) {
      if (setting.startsWith("/") || /^[A-Za-z]:[\\/]/.test(setting)) return vscode.Uri.file(setting);
      return first ? vscode.Uri.joinPath(first, setting) : vscode.Uri.file(setting);
    }
    return first;
  }

  get status(): IndexStatus | undefined {
    return this.lastStatus;
  }

  get running(): boolean {
    return this.client?.state === State.Running;
  }

  async start(): Promise<boolean> {
    if (this.client) return true;
    const config = vscode.workspace.getConfiguration("mnemo");
    const setting = config.get<string>("server.command", "mnemo");
    const args = config.get<string[]>("server.args", ["serve"]);
    const root = this.workspaceRoot();
    const resolved = resolveServerCommand(setting, root?.fsPath, {
      isExecutable,
      pathDirs: (process.env.PATH ?? "").split(process.platform === "win32" ? ";" : ":"),
    });
    if (!resolved.command) {
      const message = missingServerMessage(setting, resolved.tried);
      this.output.appendLine(message);
      this.handlers.onState("stopped");
      if (this.missingReported) return false;
      this.missingReported = true;
      void vscode.window.showErrorMessage(message, "Open Settings", "Show Log").then((pick) => {
        if (pick === "Open Settings") void vscode.commands.executeCommand("workbench.action.openSettings", "mnemo.server");
        if (pick === "Show Log") this.output.show();
      });
      return false;
    }
    this.output.appendLine(`starting ${resolved.command} ${args.join(" ")} (workspace ${root?.fsPath ?? "none"})`);

    const serverOptions: ServerOptions = {
      command: resolved.command,
      args,
      // No `transport`: with TransportKind.stdio the client would append `--stdio`; `mnemo serve` speaks
      // LSP on stdio by default.
      options: { cwd: root?.fsPath },
    };
    const clientOptions: LanguageClientOptions = {
      documentSelector: [{ scheme: "file", language: "markdown" }],
      initializationOptions: root ? { workspace: root.fsPath } : {},
      outputChannel: this.output,
      traceOutputChannel: this.trace,
      synchronize: { fileEvents: vscode.workspace.createFileSystemWatcher("**/*.md") },
      workspaceFolder: root ? vscode.workspace.getWorkspaceFolder(root) : undefined,
    };
    const client = new LanguageClient("mnemo", "mnemo", serverOptions, clientOptions);
    this.client = client;
    client.onDidChangeState((e) => {
      this.handlers.onState(e.newState === State.Running ? "running" : e.newState === State.Starting ? "starting" : "stopped");
    });
    client.onNotification(IndexStatusNote.method, (status: IndexStatus) => {
      this.lastStatus = status;
      this.handlers.onIndexStatus(status);
    });
    client.onNotification(ChatDeltaNote.method, (delta: ChatDelta) => this.handlers.onChatDelta(delta));
    client.onNotification(ApprovalsChangedNote.method, (p: { pending?: number }) =>
      this.handlers.onApprovalsChanged(typeof p?.pending === "number" ? p.pending : 0),
    );
    client.onRequest(ApprovalRequest.method, (params: ApprovalRequestParams, token: vscode.CancellationToken) => {
      const abort = new AbortController();
      token.onCancellationRequested(() => abort.abort());
      return this.handlers.onApprovalRequest(params, abort.signal);
    });
    this.handlers.onState("starting");
    try {
      await client.start();
    } catch (error) {
      this.client = undefined;
      this.handlers.onState("stopped");
      const message = `mnemo: the server failed to start: ${error instanceof Error ? error.message : String(error)}`;
      this.output.appendLine(message);
      void vscode.window.showErrorMessage(message, "Show Log").then((pick) => pick && this.output.show());
      return false;
    }
    void this.request(Status, {}).then(
      (status) => {
        this.lastStatus = status;
        this.handlers.onIndexStatus(status);
      },
      (error: unknown) => this.output.appendLine(`mnemo/status failed: ${String(error)}`),
    );
    return true;
  }

  async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (client) await client.stop().catch(() => undefined);
    this.handlers.onState("stopped");
  }

  async restart(): Promise<void> {
    this.missingReported = false;
    await this.stop();
    await this.start();
  }

  /** A typed custom request; `signal` aborts it with $/cancelRequest. */
  async request<P, R>(type: Req<P, R>, params: P, signal?: AbortSignal): Promise<R> {
    if (!this.client && !(await this.start())) {
      throw Object.assign(new Error("the mnemo server is not running (see the 'mnemo' output)"), {
        code: ErrorCodes.RequestFailed,
      });
    }
    const source = new vscode.CancellationTokenSource();
    let onAbort = (): void => source.cancel();
    // Stop means stop now: the request is cancelled on the server, and the caller does not wait for
    // the server to acknowledge it.
    const aborted = new Promise<never>((_resolve, reject) => {
      onAbort = () => {
        source.cancel();
        reject(Object.assign(new Error("cancelled"), { code: ErrorCodes.RequestCancelled }));
      };
    });
    if (signal?.aborted) onAbort();
    signal?.addEventListener("abort", onAbort);
    try {
      return await Promise.race([this.client!.sendRequest<R>(type.method, params, source.token), aborted]);
    } finally {
      signal?.removeEventListener("abort", onAbort);
      source.dispose();
    }
  }

  dispose(): void {
    void this.stop();
    this.output.dispose();
    this.trace.dispose();
  }
}
