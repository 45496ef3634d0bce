/** Opening memory files at cited lines. */
import * as vscode from "vscode";
import { parseCitation, type Citation } from "./citations";

export async function openAtLines(root: vscode.Uri | undefined, citation: Citation): Promise<void> {
  // Re-validate: the citation may come from the webview or the model's text.
  const checked = parseCitation(`${citation.path}#L${citation.startLine}-L${citation.endLine}`);
  if (!root || !checked) {
    void vscode.window.showWarningMessage(`mnemo: cannot open ${citation.path}`);
    return;
  }
  const uri = vscode.Uri.joinPath(root, ...checked.path.split("/"));
  let document: vscode.TextDocument;
  try {
    document = await vscode.workspace.openTextDocument(uri);
  } catch {
    void vscode.window.showWarningMessage(`mnemo: ${checked.path} does not exist in ${root.fsPath}`);
    return;
  }
  const last = Math.max(0, document.lineCount - 1);
  const start = Math.min(checked.startLine - 1, last);
  const end = Math.min(checked.endLine - 1, last);
  const selection = new vscode.Range(start, 0, end, document.lineAt(end).text.length);
  const editor = await vscode.window.showTextDocument(document, { selection, preview: true });
  editor.revealRange(selection, vscode.TextEditorRevealType.InCenterIfOutsideViewport);
}

export async function openLink(href: string): Promise<void> {
  if (/^(https?:|mailto:)/i.test(href)) await vscode.env.openExternal(vscode.Uri.parse(href));
}
