/** The status bar item: index state and progress (from mnemo/indexStatus). */
import * as vscode from "vscode";
import type { ServerState } from "./client";
import type { IndexStatus } from "./protocol";
import { formatStatus } from "./status";

export class IndexStatusBar implements vscode.Disposable {
  private readonly item = vscode.window.createStatusBarItem("mnemo.status", vscode.StatusBarAlignment.Left, 10);
  private status: IndexStatus | undefined;
  private server: ServerState = "starting";

  constructor() {
    this.item.name = "mnemo index";
    this.item.command = "mnemo.showStatus";
    this.render();
    this.item.show();
  }

  update(status: IndexStatus): void {
    this.status = status;
    this.render();
  }

  setServer(state: ServerState): void {
    this.server = state;
    this.render();
  }

  private render(): void {
    const { text, tooltip } = formatStatus(this.status, this.server);
    this.item.text = text;
    this.item.tooltip = tooltip;
    this.item.backgroundColor =
      this.server === "stopped" || this.status?.state === "error"
        ? new vscode.ThemeColor("statusBarItem.errorBackground")
        : undefined;
  }

  dispose(): void {
    this.item.dispose();
  }
}
