/** Wiring only: the client, the chat panel, the status bar and the commands. */
import * as vscode from "vscode";
import { ChatController } from "./chat/controller";
import { ChatViewProvider } from "./chat/view";
import { MnemoClient } from "./client";
import { registerCommands } from "./commands";
import { openAtLines, openLink } from "./open";
import { IndexStatusBar } from "./statusBar";

let client: MnemoClient | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const statusBar = new IndexStatusBar();
  const chat: ChatController = new ChatController({
    request: (type, params, signal) => mnemo.request(type, params, signal),
    openCitation: (citation) => openAtLines(mnemo.workspaceRoot(), citation),
    openLink,
    reveal: () => view.reveal(),
    log: (message) => mnemo.output.appendLine(message),
  });
  const mnemo: MnemoClient = new MnemoClient({
    onIndexStatus: (status) => statusBar.update(status),
    onChatDelta: (delta) => chat.onDelta(delta),
    onApprovalRequest: (params, signal) => chat.requestApproval(params, signal),
    onApprovalsChanged: () => void chat.syncApprovals(),
    onState: (state) => statusBar.setServer(state),
  });
  client = mnemo;
  const view = new ChatViewProvider(context.extensionUri, chat, (message) => mnemo.output.appendLine(message));

  context.subscriptions.push(
    statusBar,
    mnemo,
    view,
    { dispose: () => chat.dispose() },
    vscode.window.registerWebviewViewProvider(ChatViewProvider.viewId, view, {
      webviewOptions: { retainContextWhenHidden: true },
    }),
    ...registerCommands(mnemo, chat, view),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration("mnemo.server") || e.affectsConfiguration("mnemo.workspace")) void mnemo.restart();
    }),
  );
  await mnemo.start();
}

export async function deactivate(): Promise<void> {
  await client?.stop();
  client = undefined;
}
