/**
 * The mnemo protocol, client side: every custom method with its params and result, defined once.
 * Mirrors docs/protocol.md and server/mnemo/lsp/protocol.py; change them together.
 *
 * Nothing here imports `vscode`, so the webview bundle and the unit tests can use the types too.
 */

/** A request: its method name with phantom params/result types (`Req<P, R>`). */
export interface Req<P, R> {
  readonly method: string;
  /** Type carriers only; never read at run time. */
  readonly _params?: P;
  readonly _result?: R;
}
/** A notification: its method name with a phantom params type. */
export interface Note<P> {
  readonly method: string;
  readonly _params?: P;
}
const req = <P, R>(method: string): Req<P, R> => ({ method });
const note = <P>(method: string): Note<P> => ({ method });

/** JSON-RPC error codes the server uses (docs/protocol.md "Errors"). */
export const ErrorCodes = {
  MethodNotFound: -32601,
  InvalidParams: -32602,
  RequestFailed: -32803,
  RequestCancelled: -32800,
} as const;

// ---- memory ------------------------------------------------------------------------------------

export type Source = "memory" | "skills" | "sessions";

export interface MemorySearchParams {
  query: string;
  maxResults?: number;
  minScore?: number;
  sources?: Source[];
}
export interface ScoreParts {
  vector: number | null;
  text: number;
  bm25: number;
  decay: number;
  weight: number;
  score: number;
  mmrRank: number;
  ageDays: number | null;
  superseded: boolean;
}
export interface SearchHit {
  path: string;
  startLine: number;
  endLine: number;
  score: number;
  snippet: string;
  source: Source;
  citation: string;
  heading: string;
  parts?: ScoreParts;
}
export interface MemorySearchResult {
  results: SearchHit[];
  mode: "hybrid" | "keyword";
  provider: string;
  model: string;
  query: string;
  notes: string[];
}

export interface MemoryGetParams {
  path: string;
  from?: number;
  lines?: number;
}
export interface MemoryGetResult {
  path: string;
  from: number;
  lines: number;
  totalLines: number;
  text: string;
}

export type IndexState = "not indexed" | "indexing" | "ready" | "error";
export interface IndexStatus {
  workspace: string;
  index: string;
  state: IndexState;
  progress: { done: number; total: number; current: string };
  message: string;
  files: number;
  chunks: number;
  provider: string;
  model: string;
  dims: number | null;
  mode: "hybrid" | "keyword";
  configProblems: string[];
  fileProblems: { path: string; problem: string }[];
}

export const MemorySearch = req<MemorySearchParams, MemorySearchResult>("mnemo/memorySearch");
export const MemoryGet = req<MemoryGetParams, MemoryGetResult>("mnemo/memoryGet");
export const Status = req<Record<string, never>, IndexStatus>("mnemo/status");
export const IndexStatusNote = note<IndexStatus>("mnemo/indexStatus");

/** `workspace/executeCommand` command: re-sync the index; returns the status object. */
export const CMD_REINDEX = "mnemo.reindex";

// ---- chat ----------------------------------------------------------------------------------------

export interface ChatParams {
  sessionId?: string;
  message: string;
}
/** The final answer; the text also streamed in as `mnemo/chatDelta` notifications before it. */
export interface ChatResult {
  sessionId: string;
  requestId?: string;
  text?: string;
  citations?: string[];
  [extra: string]: unknown;
}
export interface ChatDelta {
  sessionId: string;
  requestId?: string;
  delta: string;
}
export interface SessionInfo {
  id: string;
  title?: string;
  updated?: string;
  messages?: number;
  [extra: string]: unknown;
}
export interface SessionsResult {
  sessions: SessionInfo[];
}
export interface NewSessionResult {
  sessionId: string;
  [extra: string]: unknown;
}
export interface SessionParams {
  sessionId: string;
}
export interface FlushParams {
  sessionId?: string;
}
export interface FlushResult {
  [extra: string]: unknown;
}

export const Chat = req<ChatParams, ChatResult>("mnemo/chat");
export const ChatDeltaNote = note<ChatDelta>("mnemo/chatDelta");
export const Sessions = req<Record<string, never>, SessionsResult>("mnemo/sessions");
export const NewSession = req<Record<string, never>, NewSessionResult>("mnemo/newSession");
export const ResetSession = req<SessionParams, unknown>("mnemo/resetSession");
export const Flush = req<FlushParams, FlushResult>("mnemo/flush");

// ---- approvals -----------------------------------------------------------------------------------

export type ApprovalChoice = "allow_once" | "always" | "deny";
export const APPROVAL_CHOICES: readonly ApprovalChoice[] = ["allow_once", "always", "deny"];

/** `ApprovalRequest.to_dict()` in server/mnemo/policy/approvals.py. */
export interface ApprovalRequestParams {
  id: string;
  session?: string;
  tool: string;
  args?: Record<string, unknown>;
  /** What will run, shown exactly: the command line for exec, `write_file PATH (N bytes)`, ... */
  summary?: string;
  /** Present when tool is `exec`: the command line, shown exactly. */
  command?: string;
  decision?: string;
  rule: string;
  reason: string;
  timeoutS: number;
  alwaysPatterns?: string[];
  expiresInS?: number;
}
export interface ApprovalResponse {
  choice: ApprovalChoice;
}
export interface ResolveApprovalParams {
  id: string;
  choice: ApprovalChoice;
}
export interface ApprovalsResult {
  approvals: ApprovalRequestParams[];
}

/** Server -> client request: ask the user; answered with the choice. */
export const ApprovalRequest = req<ApprovalRequestParams, ApprovalResponse>("mnemo/approvalRequest");
/** Client -> server: answer a pending approval out of band (e.g. one listed by `mnemo/approvals`). */
export const ResolveApproval = req<ResolveApprovalParams, unknown>("mnemo/resolveApproval");
export const Approvals = req<Record<string, never>, ApprovalsResult>("mnemo/approvals");

// ---- git -------------------------------------------------------------------------------------------

export interface CommitParams {
  message?: string;
}
export interface CommitResult {
  commit?: string;
  message?: string;
  files?: string[];
  [extra: string]: unknown;
}
export const Commit = req<CommitParams, CommitResult>("mnemo/commit");

/** The text shown for an approval: the exact command when there is one. */
export function approvalCommandText(p: ApprovalRequestParams): string {
  if (typeof p.command === "string" && p.command !== "") return p.command;
  if (typeof p.summary === "string" && p.summary !== "") return p.summary;
  return `${p.tool} ${JSON.stringify(p.args ?? {})}`;
}
