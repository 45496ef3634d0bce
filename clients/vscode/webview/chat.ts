/**
 * The chat webview: renders the state the extension sends and posts typed messages back. Holds no chat
 * logic: the extension's ChatController does, so nothing is lost when the panel is hidden or rebuilt.
 */
import type { ApprovalChoice } from "../src/protocol";
import { modelLine, type ApprovalCard, type ChatMessage, type ChatState, type FromWebview, type ToWebview } from "../src/chat/messages";
import { parseCitation } from "../src/citations";
import { citationLink, escapeHtml, renderMarkdown } from "./render";

function renderCitation(text: string): string {
  const c = parseCitation(text);
  return c ? citationLink(c) : `<code>${escapeHtml(text)}</code>`;
}

interface VsCodeApi {
  postMessage(message: FromWebview): void;
  getState(): { draft?: string } | undefined;
  setState(state: { draft?: string }): void;
}
declare function acquireVsCodeApi(): VsCodeApi;

const vscode = acquireVsCodeApi();
const $ = <T extends HTMLElement>(id: string): T => document.getElementById(id) as T;

const messagesEl = $<HTMLDivElement>("messages");
const approvalsEl = $<HTMLDivElement>("approvals");
const noticeEl = $<HTMLDivElement>("notice");
const input = $<HTMLTextAreaElement>("input");
const sendButton = $<HTMLButtonElement>("send");
const stopButton = $<HTMLButtonElement>("stop");
const sessionSelect = $<HTMLSelectElement>("session");
const modelEl = $<HTMLDivElement>("model");
const modelName = $<HTMLSpanElement>("model-name");
const modelNote = $<HTMLSpanElement>("model-note");

let state: ChatState | undefined;
const pendingDeltas = new Map<string, string>();
let frame = 0;

const CHOICE_LABEL: Record<ApprovalChoice | "expired" | "elsewhere", string> = {
  elsewhere: "Answered elsewhere",
  allow_once: "Allowed once",
  always: "Always allowed",
  deny: "Denied",
  expired: "Timed out (denied)",
};

function post(message: FromWebview): void {
  vscode.postMessage(message);
}

function renderMessage(m: ChatMessage): string {
  const body = m.role === "user" ? `<p>${escapeHtml(m.text).replace(/\n/g, "<br>")}</p>` : renderMarkdown(m.text);
  const sources = m.citations?.length
    ? `<div class="sources">Sources: ${m.citations.map((c) => renderCitation(c)).join(" ")}</div>`
    : "";
  const cursor = m.streaming ? '<span class="cursor" aria-hidden="true"></span>' : "";
  const rate = m.rateable && !m.streaming ? renderRating(m) : "";
  return `<div class="msg ${m.role}${m.streaming ? " streaming" : ""}" data-id="${escapeHtml(m.id)}">${body}${cursor}${sources}${rate}</div>`;
}

/** 👍/👎 under the latest answer (mnemo/feedback: whether the memories it recalled helped). */
function renderRating(m: ChatMessage): string {
  const id = escapeHtml(m.id);
  const chosen = (which: "up" | "down") => (m.rated === which ? " chosen" : "");
  return `<div class="rate">
    <button class="secondary${chosen("up")}" data-rate="up" data-msg="${id}" title="This answer helped: its recalled memories count as useful" aria-label="Helpful">👍</button>
    <button class="secondary${chosen("down")}" data-rate="down" data-msg="${id}" title="It did not: its recalled memories count as not useful" aria-label="Not helpful">👎</button>
  </div>`;
}

function renderApproval(card: ApprovalCard): string {
  const r = card.request;
  const left = Math.max(0, Math.round((card.expiresAt - Date.now()) / 1000));
  const buttons = card.resolved
    ? `<div class="resolved">${escapeHtml(CHOICE_LABEL[card.resolved])}</div>`
    : `<div class="choices">
         <button data-approval="${escapeHtml(r.id)}" data-choice="allow_once">Allow once</button>
         <button data-approval="${escapeHtml(r.id)}" data-choice="always" class="secondary"
           title="${escapeHtml((r.alwaysPatterns ?? []).join("\n") || "allow this from now on")}">Always</button>
         <button data-approval="${escapeHtml(r.id)}" data-choice="deny" class="secondary">Deny</button>
         <span class="countdown" data-expires="${card.expiresAt}">${left}s</span>
       </div>`;
  return `<div class="approval${card.resolved ? " done" : ""}" data-id="${escapeHtml(r.id)}">
    <div class="title">Approve <code>${escapeHtml(r.tool)}</code>?</div>
    <pre class="command"></pre>
    <div class="why">${escapeHtml(r.reason)}${r.rule ? ` <span class="rule">(rule: ${escapeHtml(r.rule)})</span>` : ""}</div>
    ${buttons}
  </div>`;
}

function render(): void {
  if (!state) return;
  const stick = messagesEl.scrollHeight - messagesEl.scrollTop - messagesEl.clientHeight < 40;
  messagesEl.innerHTML = state.messages.length
    ? state.messages.map(renderMessage).join("")
    : '<div class="empty">Ask about your memory. Answers cite <code>file#Lx-Ly</code>; click a citation to open it.</div>';
  approvalsEl.innerHTML = state.approvals.map(renderApproval).join("");
  // The command goes in as text, never as HTML: it is shown exactly as it will run.
  approvalsEl.querySelectorAll<HTMLElement>(".approval").forEach((el, i) => {
    const pre = el.querySelector("pre.command");
    if (pre) pre.textContent = state!.approvals[i].command;
  });
  noticeEl.textContent = state.unsupported.length
    ? `This server does not implement: ${state.unsupported.join(", ")}.`
    : "";
  noticeEl.hidden = state.unsupported.length === 0;
  // Which model answers, as text (never HTML); the bundled model's note as a line and a tooltip.
  const model = modelLine(state.chatModel);
  modelEl.hidden = !model;
  modelName.textContent = model?.text ?? "";
  modelNote.textContent = model?.note ?? "";
  modelEl.title = model?.title ?? "";

  const options = state.sessions.map(
    (s) => `<option value="${escapeHtml(s.sessionId)}">${escapeHtml(s.title || s.sessionId)}</option>`,
  );
  if (state.sessionId && !state.sessions.some((s) => s.sessionId === state!.sessionId)) {
    options.unshift(`<option value="${escapeHtml(state.sessionId)}">${escapeHtml(state.sessionId)}</option>`);
  }
  if (!state.sessionId) options.unshift('<option value="">(new session)</option>');
  sessionSelect.innerHTML = options.join("");
  sessionSelect.value = state.sessionId ?? "";

  sendButton.textContent = state.busy ? "Steer" : "Send"; // while an answer streams: into that turn
  stopButton.hidden = !state.busy;
  if (stick) messagesEl.scrollTop = messagesEl.scrollHeight;
}

function flushDeltas(): void {
  frame = 0;
  for (const [id, text] of pendingDeltas) {
    const el = messagesEl.querySelector<HTMLElement>(`.msg[data-id="${CSS.escape(id)}"]`);
    const message = state?.messages.find((m) => m.id === id);
    if (message) message.text = text;
    if (el && message) el.outerHTML = renderMessage(message);
  }
  pendingDeltas.clear();
  messagesEl.scrollTop = messagesEl.scrollHeight;
}

window.addEventListener("message", (event: MessageEvent<ToWebview>) => {
  const message = event.data;
  switch (message.type) {
    case "state":
      state = message.state;
      pendingDeltas.clear();
      render();
      break;
    case "delta":
      pendingDeltas.set(message.messageId, message.text);
      if (!frame) frame = requestAnimationFrame(flushDeltas);
      break;
    case "focusInput":
      input.focus();
      break;
  }
});

function send(): void {
  const text = input.value.trim();
  if (!text) return;
  post({ type: "send", text });
  input.value = "";
  vscode.setState({ draft: "" });
}

sendButton.addEventListener("click", send);
stopButton.addEventListener("click", () => post({ type: "stop" }));
$("new").addEventListener("click", () => post({ type: "newSession" }));
$("reset").addEventListener("click", () => post({ type: "resetSession" }));
$("flush").addEventListener("click", () => post({ type: "flush" }));
sessionSelect.addEventListener("focus", () => post({ type: "refreshSessions" }));
sessionSelect.addEventListener("change", () => {
  if (sessionSelect.value) post({ type: "selectSession", sessionId: sessionSelect.value });
});
input.addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    send();
  }
});
input.addEventListener("input", () => vscode.setState({ draft: input.value }));

document.addEventListener("click", (e) => {
  const target = e.target as HTMLElement | null;
  const link = target?.closest<HTMLAnchorElement>("a");
  if (link) {
    e.preventDefault();
    if (link.dataset.path) {
      post({
        type: "openCitation",
        citation: { path: link.dataset.path, startLine: Number(link.dataset.start), endLine: Number(link.dataset.end) },
      });
    } else if (link.dataset.href) {
      post({ type: "openLink", href: link.dataset.href });
    }
    return;
  }
  const rate = target?.closest<HTMLButtonElement>("button[data-rate]");
  if (rate?.dataset.msg) {
    post({ type: "feedback", messageId: rate.dataset.msg, useful: rate.dataset.rate === "up" });
    return;
  }
  const button = target?.closest<HTMLButtonElement>("button[data-approval]");
  if (button?.dataset.approval && button.dataset.choice) {
    post({ type: "approve", id: button.dataset.approval, choice: button.dataset.choice as ApprovalChoice });
  }
});

setInterval(() => {
  approvalsEl.querySelectorAll<HTMLElement>(".countdown").forEach((el) => {
    el.textContent = `${Math.max(0, Math.round((Number(el.dataset.expires) - Date.now()) / 1000))}s`;
  });
}, 1000);

// A draft kept from before the panel was hidden comes back; text typed before this script ran is kept.
const draft = vscode.getState()?.draft;
if (draft) input.value = draft;
document.body.dataset.ready = "true"; // the listeners above are attached (the end-to-end run waits for it)
post({ type: "ready" });
