import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { CITATION_RE, formatCitation, parseCitation } from "../src/citations";
import { chatHtml, makeNonce } from "../src/chat/html";
import { isFromWebview } from "../src/chat/messages";
import { summarize } from "../src/chat/controller";
import { approvalCommandText, type IndexStatus } from "../src/protocol";
import { missingServerMessage, resolveServerCommand } from "../src/serverCommand";
import { formatStatus } from "../src/status";
import { escapeHtml, renderMarkdown } from "../webview/render";

describe("citations", () => {
  it("parses path#Lx-Ly forms and refuses paths that leave the workspace", () => {
    assert.deepEqual(parseCitation("memory/2026-11-02.md#L3-L6"), { path: "memory/2026-11-02.md", startLine: 3, endLine: 6 });
    assert.deepEqual(parseCitation("MEMORY.md#L4"), { path: "MEMORY.md", startLine: 4, endLine: 4 });
    assert.deepEqual(parseCitation("a/b.md#L2-9"), { path: "a/b.md", startLine: 2, endLine: 9 });
    for (const bad of ["../x.md#L1", "a/../../x.md#L1", "/etc/x.md#L1", "x.txt#L1", "x.md#L0", "x.md#L5-L2", "x.md"]) {
      assert.equal(parseCitation(bad), undefined, bad);
    }
    assert.equal(formatCitation({ path: "a.md", startLine: 2, endLine: 2 }), "a.md#L2");
    assert.equal([..."see a.md#L1 and memory/b.md#L2-L3.".matchAll(CITATION_RE)].length, 2);
  });
});

describe("markdown rendering", () => {
  it("links citations in text, code spans and links", () => {
    const html = renderMarkdown("We chose **PostgreSQL** (memory/2026-11-02.md#L3-L6), see `MEMORY.md#L2` and [the runbook](memory/deploy-runbook.md#L1-L4).");
    assert.match(html, /<strong>PostgreSQL<\/strong>/);
    assert.match(html, /<a class="cite" href="#" data-path="memory\/2026-11-02.md" data-start="3" data-end="6"/);
    assert.match(html, /<code><a class="cite" href="#" data-path="MEMORY.md" data-start="2" data-end="2"/);
    assert.match(html, /data-path="memory\/deploy-runbook.md" data-start="1" data-end="4"[^>]*>the runbook<\/a>/);
  });

  it("escapes raw HTML and drops unsafe links and images", () => {
    const html = renderMarkdown('<img src=x onerror=alert(1)> hi <script>alert(1)</script>\n\n[x](javascript:alert(1)) ![p](http://e/p.png) [ok](https://example.org)');
    assert.ok(!/<img|<script/i.test(html), html);
    assert.match(html, /&lt;img src=x onerror=alert\(1\)&gt;/);
    assert.ok(!html.includes("javascript:"), html);
    assert.match(html, /data-href="https:\/\/example.org"/);
    assert.equal(escapeHtml(`<a href="x">'&`), "&lt;a href=&quot;x&quot;&gt;&#39;&amp;");
  });

  it("leaves non-citations alone", () => {
    const html = renderMarkdown("../secret.md#L1 and notes.txt#L2");
    assert.ok(!html.includes("class=\"cite\""), html);
  });
});

describe("webview message contract", () => {
  it("accepts well-formed messages and rejects the rest", () => {
    assert.ok(isFromWebview({ type: "send", text: "hi" }));
    assert.ok(isFromWebview({ type: "approve", id: "a", choice: "always" }));
    assert.ok(isFromWebview({ type: "openCitation", citation: { path: "a.md", startLine: 1, endLine: 2 } }));
    for (const bad of [null, "send", {}, { type: "send" }, { type: "approve", id: "a", choice: "yes" }, { type: "openCitation", citation: { path: "a.md", startLine: "1", endLine: 2 } }, { type: "eval" }]) {
      assert.equal(isFromWebview(bad), false, JSON.stringify(bad));
    }
  });

  it("builds HTML with a strict CSP and the nonce on the only script", () => {
    const nonce = makeNonce();
    assert.match(nonce, /^[A-Za-z0-9]{32}$/);
    const html = chatHtml({ cspSource: "vscode-resource:", nonce, scriptUri: "S.js", styleUri: "S.css" });
    assert.match(html, new RegExp(`default-src 'none'; .*script-src 'nonce-${nonce}'`));
    assert.ok(!html.includes("unsafe-inline") && !html.includes("unsafe-eval"));
    assert.equal(html.match(/<script/g)?.length, 1);
    assert.match(html, new RegExp(`<script nonce="${nonce}" src="S.js">`));
  });
});

describe("server command", () => {
  const exists = (files: string[]) => ({ isExecutable: (f: string) => files.includes(f), pathDirs: ["/usr/bin", "/opt/bin"] });
  it("finds mnemo on PATH, then in the workspace venv", () => {
    assert.equal(resolveServerCommand("mnemo", "/ws", exists(["/opt/bin/mnemo"])).command, "/opt/bin/mnemo");
    assert.equal(resolveServerCommand("", "/ws", exists(["/ws/.venv/bin/mnemo"])).command, "/ws/.venv/bin/mnemo");
    assert.equal(resolveServerCommand("./tools/mnemo", "/ws", exists(["/ws/tools/mnemo"])).command, "/ws/tools/mnemo");
    assert.equal(resolveServerCommand("/abs/mnemo", "/ws", exists([])).command, undefined);
    const missing = resolveServerCommand("mnemo", "/ws", exists([]));
    assert.equal(missing.command, undefined);
    assert.deepEqual(missing.tried, ["/usr/bin/mnemo", "/opt/bin/mnemo", "/ws/.venv/bin/mnemo"]);
    assert.match(missingServerMessage("mnemo", missing.tried), /make install.*mnemo\.server\.command/);
  });
});

describe("status bar text and summaries", () => {
  const base: IndexStatus = {
    workspace: "/ws", index: "/ws/.mnemo/index.duckdb", state: "ready", progress: { done: 4, total: 4, current: "" },
    message: "", files: 4, chunks: 11, provider: "none", model: "", dims: null, mode: "keyword",
    vectors: { embedded: 0, chunks: 0, embedding: false }, notes: [], configProblems: [], fileProblems: [],
  };
  it("shows state and progress", () => {
    assert.equal(formatStatus(base).text, "$(database) mnemo 11");
    assert.equal(formatStatus({ ...base, state: "indexing", progress: { done: 1, total: 4, current: "a.md" } }).text, "$(sync~spin) mnemo 25%");
    assert.equal(formatStatus({ ...base, state: "error", message: "disk full" }).text, "$(error) mnemo");
    assert.match(formatStatus({ ...base, fileProblems: [{ path: "big.md", problem: "too big" }] }).tooltip, /big.md: too big/);
    assert.equal(formatStatus(undefined, "stopped").text, "$(error) mnemo");
  });
  it("summarizes results and shows approvals exactly", () => {
    assert.equal(summarize({ commit: "abc123", files: ["a"], n: 2 }), "commit: abc123, n: 2");
    assert.equal(approvalCommandText({ id: "1", tool: "exec", command: "ls  -la", rule: "", reason: "", timeoutS: 1 }), "ls  -la");
    assert.equal(approvalCommandText({ id: "1", tool: "write_file", summary: "write_file a.md (3 bytes)", rule: "", reason: "", timeoutS: 1 }), "write_file a.md (3 bytes)");
  });
});
