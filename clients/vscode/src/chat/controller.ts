/**
 * The chat's logic, free of `vscode` so it is unit tested in plain Node: it turns webview messages into
 * protocol requests, streams `mnemo/chatDelta` into the answer being written, keeps approval cards, and
 * owns the state the webview renders (the webview can be destroyed and rebuilt at any time).
 */
import type { Citation } from "../citations";
import {
  APPROVAL_CHOICES,
  approvalCommandText,
  Approvals,
  Chat,
  ErrorCodes,
  Exec,
  Feedback,
  Flush,
  NewSession,
  ResetSession,
  ResolveApproval,
  Sessions,
  Status,
  Steer,
  type ApprovalChoice,
  type ApprovalRequestParams,
  type ApprovalResponse,
  type ChatDelta,
  type ExecResult,
  type FlushReport,
  type Req,
} from "../protocol";
import type { ChatMessage, ChatReply, ChatState, FromWebview, ToWebview } from "./messages";

/** What the controller needs from the outside world (the language client and the editor). */
export interface ChatBackend {
  request<P, R>(type: Req<P, R>, params: P, signal?: AbortSignal): Promise<R>;
  openCitation(citation: Citation): Promise<void>;
  openLink(href: string): Promise<void>;
  /** Bring the chat view to the front (an approval is waiting). */
  reveal(): void;
  log(message: string): void;
}

interface ActiveTurn {
  messageId: string;
  sessionId?: string;
  requestId?: string | number;
  abort: AbortController;
  /** a message was steered into this turn: its answer streams on in a new bubble, deltas are the text */
  steered?: boolean;
}

interface PendingApproval {
  resolve: (response: ApprovalResponse) => void;
  timer: ReturnType<typeof setTimeout>;
}

/** The JSON-RPC error code of a failed request, if it has one. */
export function errorCode(error: unknown): number | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "number" ? code : undefined;
}

export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export function isCancellation(error: unknown): boolean {
  return (
    errorCode(error) === ErrorCodes.RequestCancelled ||
    (error instanceof Error && (error.name === "AbortError" || error.name === "Canceled"))
  );
}

export class ChatController {
  private readonly transcripts = new Map<string, ChatMessage[]>();
  private readonly state: ChatState = { sessions: [], messages: [], approvals: [], busy: false, unsupported: [] };
  private readonly pending = new Map<string, PendingApproval>();
  private active: ActiveTurn | undefined;
  /** typed while a turn ran that could not take it: sent, in order, when the turn ends */
  private readonly afterTurn: string[] = [];
  private post: ((message: ToWebview) => void) | undefined;
  private nextId = 1;

  constructor(
    private readonly backend: ChatBackend,
    private readonly now: () => number = Date.now,
  ) {
    this.transcripts.set("", this.state.messages);
  }

  /** Attach (or detach, with undefined) the webview; a new one is sent the whole state. */
  attach(post: ((message: ToWebview) => void) | undefined): void {
    this.post = post;
    this.pushState();
  }

  get snapshot(): Readonly<ChatState> {
    return this.state;
  }

  get sessionId(): string | undefined {
    return this.state.sessionId;
  }

  async handle(message: FromWebview): Promise<void> {
    switch (message.type) {
      case "ready":
        this.pushState();
        void this.refreshSessions();
        void this.refreshModel();
        return;
      case "send":
        return this.send(message.text);
      case "stop":
        this.stop();
        return;
      case "newSession":
        return this.newSession();
      case "resetSession":
        return this.resetSession();
      case "selectSession":
        this.selectSession(message.sessionId);
        return;
      case "refreshSessions":
        return this.refreshSessions();
      case "flush":
        return this.flush();
      case "runCommand":
        await this.runCommand(message.command);
        return;
      case "approve":
        return this.answerApproval(message.id, message.choice);
      case "feedback":
        return this.feedback(message.messageId, message.useful);
      case "openCitation":
        return this.backend.openCitation(message.citation);
      case "openLink":
        return this.backend.openLink(message.href);
    }
  }

  // ---- chat -------------------------------------------------------------------------------------

  async send(text: string): Promise<void> {
    const message = text.trim();
    if (message === "") return;
    if (this.active) return this.steer(message, this.active);
    this.add({ role: "user", text: message });
    const answer = this.add({ role: "assistant", text: "", streaming: true });
    const turn: ActiveTurn = { messageId: answer.id, sessionId: this.state.sessionId, abort: new AbortController() };
    this.active = turn;
    this.state.busy = true;
    this.pushState();
    try {
      const params = this.state.sessionId ? { sessionId: this.state.sessionId, message } : { message };
      const result: ChatReply = await this.backend.request(Chat, params, turn.abort.signal);
      if (result && typeof result.sessionId === "string") this.adoptSession(result.sessionId);
      if (result?.chatModel && typeof result.chatModel.line === "string") this.state.chatModel = result.chatModel;
      const shown = this.state.messages.find((m) => m.id === turn.messageId) ?? answer;
      // The final answer is authoritative: deltas can be dropped or coalesced on the way. After steering
      // it spans several bubbles, so the deltas stay.
      if (!turn.steered && typeof result?.text === "string" && result.text !== "") shown.text = result.text;
      if (Array.isArray(result?.citations)) {
        shown.citations = result.citations.map((c) => c?.citation).filter((c): c is string => typeof c === "string");
      }
      if (shown.text === "") shown.text = "*(no answer)*";
      // Only the session's latest answer can be rated: mnemo/feedback without a turn means the latest.
      for (const m of this.state.messages) m.rateable = false;
      shown.rateable = shown.role === "assistant";
    } catch (error) {
      const shown = this.state.messages.find((m) => m.id === turn.messageId) ?? answer;
      if (isCancellation(error) || turn.abort.signal.aborted) {
        shown.text += shown.text ? "\n\n*(stopped)*" : "*(stopped)*";
      } else {
        shown.role = "error";
        shown.text = this.describeError(Chat.method, error);
      }
    } finally {
      for (const m of this.state.messages) if (m.streaming) m.streaming = false;
      this.active = undefined;
      this.state.busy = false;
      this.pushState();
    }
    void this.refreshSessions();
    const next = this.afterTurn.shift();
    if (next !== undefined) await this.send(next);
  }

  /** Typing while an answer streams: `mnemo/steer` hands the message to the running turn, which answers
   * it in the same reply (in a new bubble below it). A turn that cannot take it (no session id yet, an
   * older server, or it just ended) gets it as the next `mnemo/chat`. */
  private async steer(message: string, turn: ActiveTurn): Promise<void> {
    const sessionId = turn.sessionId ?? this.state.sessionId;
    let state: string | undefined;
    if (sessionId && !this.state.unsupported.includes(Steer.method)) {
      try {
        state = (await this.backend.request(Steer, { sessionId, message }))?.state;
      } catch (error) {
        this.noteUnsupported(Steer.method, error);
      }
    }
    if (state !== "injected" && state !== "queued") {
      if (this.active) this.afterTurn.push(message);
      else await this.send(message);
      return;
    }
    this.add({ role: "user", text: message });
    if (this.active === turn) {
      const current = this.state.messages.find((m) => m.id === turn.messageId);
      if (current) current.streaming = false;
      turn.messageId = this.add({ role: "assistant", text: "", streaming: true }).id;
      turn.steered = true;
    }
    this.pushState();
  }

  stop(): void {
    this.active?.abort.abort();
  }

  /** A `mnemo/chatDelta` notification. Deltas for a turn we are not waiting on are ignored. */
  onDelta(delta: ChatDelta): void {
    const turn = this.active;
    if (!turn || typeof delta?.delta !== "string") return;
    if (turn.sessionId !== undefined && delta.sessionId !== turn.sessionId) return;
    if (turn.requestId !== undefined && delta.requestId !== undefined && delta.requestId !== turn.requestId) return;
    if (turn.sessionId === undefined && typeof delta.sessionId === "string") {
      turn.sessionId = delta.sessionId;
      this.adoptSession(delta.sessionId);
    }
    if (turn.requestId === undefined && delta.requestId !== undefined) turn.requestId = delta.requestId;
    const message = this.state.messages.find((m) => m.id === turn.messageId);
    if (!message) return;
    message.text += delta.delta;
    this.post?.({ type: "delta", messageId: message.id, text: message.text });
  }

  /** Which chat model answers (`chatModel` of mnemo/status); a server without it leaves the line out. */
  async refreshModel(): Promise<void> {
    try {
      const status = await this.backend.request(Status, {});
      const model = status?.chatModel;
      if (model && typeof model.line === "string") {
        this.state.chatModel = model;
        this.pushState();
      }
    } catch (error) {
      this.backend.log(`${Status.method} (chat model) failed: ${errorMessage(error)}`);
    }
  }

  // ---- sessions ---------------------------------------------------------------------------------

  async refreshSessions(): Promise<void> {
    if (this.state.unsupported.includes(Sessions.method)) return;
    try {
      const result = await this.backend.request(Sessions, {});
      this.state.sessions = Array.isArray(result?.sessions) ? result.sessions : [];
      this.pushState();
    } catch (error) {
      this.noteUnsupported(Sessions.method, error);
    }
  }

  async newSession(): Promise<void> {
    if (this.active) return;
    try {
      const previous = this.state.sessionId;
      const result = await this.backend.request(NewSession, previous ? { previousSessionId: previous } : {});
      this.switchTo(result.sessionId);
    } catch (error) {
      if (errorCode(error) !== ErrorCodes.MethodNotFound) {
        this.add({ role: "error", text: this.describeError(NewSession.method, error) });
        this.pushState();
        return;
      }
      // No mnemo/newSession: the server opens a session with the next message that names none.
      this.noteUnsupported(NewSession.method, error);
      this.switchTo(undefined);
    }
    void this.refreshSessions();
  }

  async resetSession(): Promise<void> {
    const sessionId = this.state.sessionId;
    if (this.active || !sessionId) return;
    try {
      await this.backend.request(ResetSession, { sessionId });
      this.state.messages.splice(0);
      this.add({ role: "note", text: "Session reset." });
    } catch (error) {
      this.add({ role: "error", text: this.describeError(ResetSession.method, error) });
    }
    this.pushState();
  }

  selectSession(sessionId: string): void {
    if (this.active || sessionId === this.state.sessionId) return;
    this.switchTo(sessionId);
  }

  /** 👍/👎 under the latest answer: `mnemo/feedback` on the session's latest turn. */
  async feedback(messageId: string, useful: boolean): Promise<void> {
    const sessionId = this.state.sessionId;
    const message = this.state.messages.find((m) => m.id === messageId);
    if (!sessionId || !message?.rateable || this.active || this.state.unsupported.includes(Feedback.method)) return;
    try {
      const result = await this.backend.request(Feedback, { sessionId, useful });
      message.rated = useful ? "up" : "down";
      const n = Array.isArray(result?.chunks) ? result.chunks.length : 0;
      this.backend.log(`feedback on turn ${result?.turn}: ${useful ? "useful" : "not useful"}, ${n} memory chunk(s)`);
    } catch (error) {
      if (errorCode(error) === ErrorCodes.MethodNotFound) this.noteUnsupported(Feedback.method, error);
      else this.add({ role: "error", text: this.describeError(Feedback.method, error) });
    }
    this.pushState();
  }

  async flush(): Promise<void> {
    const sessionId = this.state.sessionId;
    if (!sessionId) {
      this.add({ role: "note", text: "Nothing to flush yet: this session has no messages." });
      this.pushState();
      return;
    }
    try {
      const result = await this.backend.request(Flush, { sessionId });
      this.add({ role: "note", text: describeFlush(result) });
    } catch (error) {
      this.add({ role: "error", text: this.describeError(Flush.method, error) });
    }
    this.pushState();
  }

  /** `mnemo/exec`: a command through the policy gate (sandboxed; may ask for approval). */
  async runCommand(command: string): Promise<ExecResult | undefined> {
    const line = command.trim();
    if (!line) return undefined;
    this.add({ role: "note", text: `Running \`${line.replace(/`/g, "'")}\` (sandboxed)…` });
    this.pushState();
    try {
      const result = await this.backend.request(Exec, { command: line, session: this.state.sessionId ?? "vscode" });
      this.add({ role: result.ok ? "note" : "error", text: describeExec(line, result) });
      return result;
    } catch (error) {
      this.add({ role: "error", text: this.describeError(Exec.method, error) });
      return undefined;
    } finally {
      this.pushState();
    }
  }

  // ---- approvals --------------------------------------------------------------------------------

  /** The server asks (`mnemo/approvalRequest`); the promise settles with the user's choice. */
  requestApproval(params: ApprovalRequestParams, signal?: AbortSignal): Promise<ApprovalResponse> {
    return new Promise<ApprovalResponse>((resolve) => {
      const seconds = typeof params.expiresInS === "number" ? params.expiresInS : params.timeoutS;
      const timeoutMs = Math.max(0, (Number.isFinite(seconds) ? seconds : 60) * 1000);
      const card = {
        request: params,
        command: approvalCommandText(params),
        expiresAt: this.now() + timeoutMs,
      };
      this.state.approvals = this.state.approvals.filter((c) => c.request.id !== params.id).concat(card);
      // At the timeout the server denies on its own; we answer deny too so the request does not linger.
      const timer = setTimeout(() => this.settle(params.id, "deny", "expired"), timeoutMs);
      this.pending.set(params.id, { resolve, timer });
      signal?.addEventListener("abort", () => this.settle(params.id, "deny", "expired"));
      this.backend.reveal();
      this.pushState();
    });
  }

  /** A pending approval the client learnt of without a request to answer (e.g. `mnemo/approvals`). */
  showApproval(params: ApprovalRequestParams): void {
    if (this.state.approvals.some((c) => c.request.id === params.id)) return;
    const seconds = typeof params.expiresInS === "number" ? params.expiresInS : params.timeoutS;
    this.state.approvals.push({
      request: params,
      command: approvalCommandText(params),
      expiresAt: this.now() + Math.max(0, seconds * 1000),
    });
    this.backend.reveal();
    this.pushState();
  }

  /** `mnemo/approvalsChanged`: show approvals asked of someone else (listed by `mnemo/approvals`), and
   * close cards answered elsewhere (the terminal, another client). */
  async syncApprovals(): Promise<void> {
    if (this.state.unsupported.includes(Approvals.method)) return;
    let pending;
    try {
      pending = (await this.backend.request(Approvals, {})).approvals ?? [];
    } catch (error) {
      this.noteUnsupported(Approvals.method, error);
      return;
    }
    const open = new Set(pending.map((p) => p.id));
    for (const card of this.state.approvals) {
      if (!card.resolved && !open.has(card.request.id) && !this.pending.has(card.request.id)) card.resolved = "elsewhere";
    }
    for (const request of pending) if (!this.state.approvals.some((c) => c.request.id === request.id)) this.showApproval(request);
    this.pushState();
  }

  async answerApproval(id: string, choice: ApprovalChoice): Promise<void> {
    if (!APPROVAL_CHOICES.includes(choice)) return;
    const card = this.state.approvals.find((c) => c.request.id === id);
    if (!card || card.resolved) return;
    if (this.pending.has(id)) {
      this.settle(id, choice, choice);
      return;
    }
    try {
      await this.backend.request(ResolveApproval, { id, choice });
      card.resolved = choice;
    } catch (error) {
      this.add({ role: "error", text: this.describeError(ResolveApproval.method, error) });
    }
    this.pushState();
  }

  private settle(id: string, choice: ApprovalChoice, shown: ApprovalChoice | "expired"): void {
    const pending = this.pending.get(id);
    if (!pending) return;
    this.pending.delete(id);
    clearTimeout(pending.timer);
    const card = this.state.approvals.find((c) => c.request.id === id);
    if (card) card.resolved = shown;
    pending.resolve({ choice });
    this.pushState();
  }

  /** Deny whatever is still pending (the extension is shutting down). */
  dispose(): void {
    this.stop();
    for (const id of [...this.pending.keys()]) this.settle(id, "deny", "expired");
    this.post = undefined;
  }

  // ---- helpers ----------------------------------------------------------------------------------

  private adoptSession(sessionId: string): void {
    if (this.state.sessionId === sessionId) return;
    const current = this.state.messages;
    this.transcripts.delete(this.state.sessionId ?? "");
    this.transcripts.set(sessionId, current);
    this.state.sessionId = sessionId;
  }

  private switchTo(sessionId: string | undefined): void {
    this.state.sessionId = sessionId;
    const key = sessionId ?? "";
    let messages = this.transcripts.get(key);
    if (!messages || sessionId === undefined) {
      messages = [];
      this.transcripts.set(key, messages);
    }
    this.state.messages = messages;
    this.pushState();
  }

  private add(message: Omit<ChatMessage, "id">): ChatMessage {
    const full: ChatMessage = { id: `m${this.nextId++}`, ...message };
    this.state.messages.push(full);
    return full;
  }

  private noteUnsupported(method: string, error: unknown): void {
    if (errorCode(error) === ErrorCodes.MethodNotFound) {
      if (!this.state.unsupported.includes(method)) this.state.unsupported.push(method);
      this.pushState();
    } else {
      this.backend.log(`${method} failed: ${errorMessage(error)}`);
    }
  }

  private describeError(method: string, error: unknown): string {
    if (errorCode(error) === ErrorCodes.MethodNotFound) {
      this.noteUnsupported(method, error);
      return `This mnemo server does not implement \`${method}\` yet. Update mnemo (\`make install\`).`;
    }
    return `\`${method}\` failed: ${errorMessage(error)}`;
  }

  private pushState(): void {
    this.post?.({ type: "state", state: this.state });
  }
}

export function describeFlush(r: FlushReport): string {
  const written = Array.isArray(r.written) ? r.written.length : 0;
  const refused = Array.isArray(r.refused) ? r.refused.length : 0;
  if (r.noReply || (written === 0 && refused === 0)) {
    return `Memory flush: nothing new to save${r.skipped ? ` (${r.skipped})` : ""}.`;
  }
  return `Memory flushed: ${written} item(s) written${refused ? `, ${refused} refused` : ""}.`;
}

export function describeExec(command: string, r: ExecResult): string {
  const how = r.approval ? `${r.approval.replace("_", " ")}` : r.decision;
  const status = r.ok ? `exit ${r.exitCode ?? "?"}` : "not run";
  const fence = r.output.includes("```") ? "~~~~" : "```";
  return `\`${command.replace(/`/g, "'")}\` — ${status} (${how}${r.rule ? `, rule ${r.rule}` : ""})\n\n${fence}text\n${r.output.replace(/\s+$/, "")}\n${fence}`;
}

/** A short, human summary of a result object (`{flushed: 3, path: "memory/x.md"}` -> `flushed: 3, ...`). */
export function summarize(result: unknown): string {
  if (typeof result === "string") return result;
  if (result === null || typeof result !== "object") return JSON.stringify(result) ?? "";
  return Object.entries(result as Record<string, unknown>)
    .filter(([, v]) => v !== null && v !== undefined && typeof v !== "object")
    .map(([k, v]) => `${k}: ${String(v)}`)
    .join(", ");
}
