/** The chat side panel: a webview view whose HTML has a strict CSP; the ChatController holds the state. */
import * as vscode from "vscode";
import { chatHtml, makeNonce } from "./html";
import { isFromWebview } from "./messages";
import type { ChatController } from "./controller";

export class ChatViewProvider implements vscode.WebviewViewProvider, vscode.Disposable {
  static readonly viewId = "mnemo.chat";
  private view: vscode.WebviewView | undefined;
  private readonly disposables: vscode.Disposable[] = [];

  constructor(
    private readonly extensionUri: vscode.Uri,
    private readonly controller: ChatController,
    private readonly log: (message: string) => void,
  ) {}

  resolveWebviewView(view: vscode.WebviewView): void {
    this.view = view;
    const webview = view.webview;
    webview.options = {
      enableScripts: true,
      localResourceRoots: [vscode.Uri.joinPath(this.extensionUri, "dist"), vscode.Uri.joinPath(this.extensionUri, "media")],
    };
    webview.html = chatHtml({
      cspSource: webview.cspSource,
      nonce: makeNonce(),
      scriptUri: webview.asWebviewUri(vscode.Uri.joinPath(this.extensionUri, "dist", "webview.js")).toString(),
      styleUri: webview.asWebviewUri(vscode.Uri.joinPath(this.extensionUri, "media", "chat.css")).toString(),
    });
    this.disposables.push(
      webview.onDidReceiveMessage((message: unknown) => {
        if (!isFromWebview(message)) {
          this.log(`chat: ignored a malformed message from the webview: ${JSON.stringify(message)}`);
          return;
        }
        this.controller.handle(message).catch((error: unknown) => this.log(`chat: ${String(error)}`));
      }),
      view.onDidDispose(() => {
        this.view = undefined;
        this.controller.attach(undefined);
      }),
    );
    // The webview announces itself with "ready"; until then messages would be lost.
    this.controller.attach((message) => void webview.postMessage(message));
  }

  /** Show the panel (an approval is waiting, or the user asked for it). */
  reveal(): void {
    if (this.view) this.view.show(true);
    else void vscode.commands.executeCommand(`${ChatViewProvider.viewId}.focus`);
  }

  dispose(): void {
    for (const d of this.disposables) d.dispose();
  }
}
