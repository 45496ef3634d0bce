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

export type Source = "memory" | "skills" | "sessions" | "archive";

export interface MemorySearchParams {
  query: string;
  maxResults?: number;
  minScore?: number;
  sources?: Source[];
  filters?: SearchFilters;
  /** only the best chunk of each file (default: the server's search.one_per_file) */
  onePerFile?: boolean;
}
export type FileKind =
  | "memory"
  | "topic"
  | "evergreen"
  | "daily"
  | "snapshot"
  | "skill"
  | "session"
  | "archive";
/** Restrict the candidates before ranking (docs/protocol.md, "Search filters"). */
export interface SearchFilters {
  tags?: string[];
  kinds?: FileKind[];
  since?: string; // YYYY-MM-DD
  until?: string; // YYYY-MM-DD
  project?: string;
  type?: string;
  /** session archives of this channel ("editor", "telegram", ...) */
  channel?: string;
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

/** `released`: this server handed the index to another mnemo process (docs/protocol.md, mnemo/status). */
export type IndexState = "not indexed" | "indexing" | "ready" | "error" | "released";
/** Which chat model answers (`chatModel` of mnemo/status; loads nothing). */
export interface ChatModelInfo {
  kind: "server" | "gguf" | "bundled" | "configured";
  provider: string;
  model: string;
  endpoint: string;
  model_path: string;
  auto: boolean;
  note: string;
  /** one line for the user, e.g. `chat model: qwen2.5:3b (Ollama at ..., found on loopback)` */
  line: string;
}
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
  /** chunks with a vector, all chunks, and whether the background embedding is at work */
  vectors: { embedded: number; chunks: number; embedding: boolean };
  /** for the user: an index built for another model, how far the embedding is */
  notes: string[];
  configProblems: string[];
  fileProblems: { path: string; problem: string }[];
  /** mnemo/status only (never in mnemo/indexStatus); null when it cannot be told */
  chatModel?: ChatModelInfo | null;
}

export const MemorySearch = req<MemorySearchParams, MemorySearchResult>("mnemo/memorySearch");
export const MemoryGet = req<MemoryGetParams, MemoryGetResult>("mnemo/memoryGet");
export const Status = req<Record<string, never>, IndexStatus>("mnemo/status");
export const IndexStatusNote = note<IndexStatus>("mnemo/indexStatus");

/** `workspace/executeCommand` command: re-sync the index; returns the status object. */
export const CMD_REINDEX = "mnemo.reindex";

// ---- chat (server/mnemo/lsp/handlers/chat.py) ---------------------------------------------------------

export type SessionKind = "private" | "group";

export interface ChatParams {
  sessionId?: string;
  message: string;
  kind?: SessionKind;
}
export interface FlushParams {
  sessionId: string;
  /** check every item and show the result, but write nothing */
  dryRun?: boolean;
}
export interface FlushReport {
  sessionId: string;
  written: unknown[];
  refused: unknown[];
  noReply: boolean;
  kept: number;
  candidates: number;
  skipped: string;
  dryRun?: boolean;
  target?: string;
  /** kept (in a dry run: would be kept); source: user, assistant (confirmed) or tool_result */
  items?: { text: string; source: string; turn: number }[];
  rejected?: { text: string; reason: string }[];
  [extra: string]: unknown;
}
/** A memory hit the answer drew on (`citation_of` in server/mnemo/agent/tools.py). */
export interface ChatCitation {
  /** `path#Lx-Ly` */
  citation: string;
  path: string;
  startLine: number;
  endLine: number;
  score: number;
  source: Source;
  /** how it was found: recalled into the context, or by the model's memory_search tool */
  origin: string;
}
/** The final answer; its text also streamed in as `mnemo/chatDelta` notifications before it. */
export interface ChatResult {
  text: string;
  citations: ChatCitation[];
  sessionId: string;
  finishReason?: string;
  toolCalls?: unknown[];
  compacted?: boolean;
  flush?: FlushReport | null;
  notes?: string[];
  promptTokens?: number;
}
export interface ChatDelta {
  sessionId: string;
  /** the JSON-RPC id of the `mnemo/chat` request being answered */
  requestId?: string | number;
  delta: string;
}
/** `mnemo/steer`: a message for the turn a `mnemo/chat` of the session is running. */
export interface SteerParams {
  sessionId: string;
  message: string;
}
/** injected: the running turn answers it; queued: after its compaction; idle: no turn runs, send it with mnemo/chat */
export type SteerState = "injected" | "queued" | "idle";
export interface SteerResult {
  state: SteerState;
}
export interface SessionInfo {
  sessionId: string;
  kind?: SessionKind;
  title?: string;
  updated?: string;
  messages?: number;
  compactions?: number;
}
export interface SessionsResult {
  sessions: SessionInfo[];
}
export interface NewSessionParams {
  kind?: SessionKind;
  /** saved as a memory snapshot before the new session starts */
  previousSessionId?: string;
}
export interface NewSessionResult {
  sessionId: string;
  kind: SessionKind;
  snapshot: unknown;
}
export interface SessionParams {
  sessionId: string;
}
export interface ResetSessionResult {
  sessionId: string;
  kind: SessionKind;
  snapshot: unknown;
  archived: string;
}

export const Chat = req<ChatParams, ChatResult>("mnemo/chat");
export const ChatDeltaNote = note<ChatDelta>("mnemo/chatDelta");
export const Steer = req<SteerParams, SteerResult>("mnemo/steer");
export const Sessions = req<Record<string, never>, SessionsResult>("mnemo/sessions");
export const NewSession = req<NewSessionParams, NewSessionResult>("mnemo/newSession");
export const ResetSession = req<SessionParams, ResetSessionResult>("mnemo/resetSession");
/** Save what matters from a session into memory (`sessionId` is required). */
export const Flush = req<FlushParams, FlushReport>("mnemo/flush");
/** `workspace/executeCommand`: `[{"sessionId", "dryRun"?}]`, same as mnemo/flush. */
export const CMD_FLUSH = "mnemo.flush";

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
export interface ResolveApprovalResult {
  resolved: boolean;
  message?: string;
}
export interface ApprovalsResult {
  approvals: ApprovalRequestParams[];
}
export interface ApprovalsChanged {
  pending: number;
}
export interface ExecParams {
  command: string;
  /** default "lsp" */
  session?: string;
  /** (0, 3600] */
  approvalTimeoutS?: number;
}
/** `ToolOutcome` in server/mnemo/policy/gate.py. */
export interface ExecResult {
  ok: boolean;
  /** the command's output, or why it did not run */
  output: string;
  decision: string;
  rule: string;
  exitCode: number | null;
  /** allow_once / always / deny when someone was asked, else empty */
  approval: string;
}
export interface AuditVerifyResult {
  ok: boolean;
  entries: number;
  problems: string[];
  path: string;
}

/** Server -> client request: ask the user; answered with the choice (no answer by the timeout: deny). */
export const ApprovalRequest = req<ApprovalRequestParams, ApprovalResponse>("mnemo/approvalRequest");
/** Server -> client notification: the pending approvals changed. */
export const ApprovalsChangedNote = note<ApprovalsChanged>("mnemo/approvalsChanged");
/** Client -> server: answer a pending approval out of band (e.g. one listed by `mnemo/approvals`). */
export const ResolveApproval = req<ResolveApprovalParams, ResolveApprovalResult>("mnemo/resolveApproval");
export const Approvals = req<Record<string, never>, ApprovalsResult>("mnemo/approvals");
/** Run a shell command through the policy gate (sandboxed; may ask for approval). */
export const Exec = req<ExecParams, ExecResult>("mnemo/exec");
export const AuditVerify = req<Record<string, never>, AuditVerifyResult>("mnemo/auditVerify");
export const RiskStatus = req<Record<string, never>, Record<string, unknown>>("mnemo/riskStatus");

export type Severity = "critical" | "warn" | "info";
export interface SecurityFinding {
  id: string;
  severity: Severity;
  message: string;
  fix: string;
  where: string;
}
/** `SecurityReport.as_dict()` in server/mnemo/security/audit.py; `exitCode` is what the CLI would exit with. */
export interface SecurityReport {
  workspace: string;
  worst: Severity | null;
  exitCode: number;
  counts: Record<Severity, number>;
  findings: SecurityFinding[];
}
/** `mnemo security audit` on the server's workspace; nothing is changed. */
export const SecurityAudit = req<Record<string, never>, SecurityReport>("mnemo/securityAudit");

// ---- git (server/mnemo/lsp/handlers/vcs.py) --------------------------------------------------------

export interface CommitParams {
  /** the subject; default `memory: update FILES (+a ~c -r sections)` */
  message?: string;
  /** commit even when a file holds a secret */
  force?: boolean;
  /** create the repository when there is none */
  initRepo?: boolean;
}
export interface CommitResult {
  commit: string;
  message: string;
  /** status: A (added), M (modified), D (deleted) */
  files: { path: string; status: string }[];
}
/** `data` of the RequestFailed error when a file to commit holds a secret. */
export interface CommitSecretsErrorData {
  secrets: unknown[];
}
export interface HistoryParams {
  path: string;
  /** 1-based; commits that changed that line */
  line?: number;
}
export interface HistoryResult {
  path: string;
  line?: number;
  entries: { commit: string; date: string; author: string; subject: string }[];
}
export const Commit = req<CommitParams, CommitResult>("mnemo/commit");
export const History = req<HistoryParams, HistoryResult>("mnemo/history");
/** `workspace/executeCommand` commands (`[{...params}]`), as used by code lenses and code actions. */
export const CMD_COMMIT = "mnemo.commit";
export const CMD_HISTORY = "mnemo.history";

// ---- session archive ---------------------------------------------------------------------------

export interface ArchiveParams {
  /** YYYY-MM: only this finished month, written again; default: every finished month not archived yet */
  month?: string;
  /** say what would be archived; write nothing */
  dryRun?: boolean;
}
export interface ArchivedMonth {
  path: string;
  month: string;
  context: "private" | "group";
  channel: string;
  peer: string;
  sessions: string[];
  messages: number;
  /** "extractive" or "model NAME" */
  summary: string;
  notes: string[];
}
export interface ArchiveReport {
  dryRun: boolean;
  months: ArchivedMonth[];
  already: number;
  skipped: { sessionId: string; reason: string }[];
  removed: string[];
}
export interface MarkSessionParams {
  sessionId: string;
  /** the user marks the conversation private: archived only with consent */
  private?: boolean;
  /** consent to archive it although it is marked private */
  archiveConsent?: boolean;
}
export interface SessionMarks {
  sessionId: string;
  private: boolean;
  archiveConsent: boolean;
}
export const Archive = req<ArchiveParams, ArchiveReport>("mnemo/archive");
export const MarkSession = req<MarkSessionParams, SessionMarks>("mnemo/markSession");

// ---- feedback and consolidation -----------------------------------------------------------------

export interface FeedbackParams {
  sessionId: string;
  /** 1-based turn of the session (its messages sent with mnemo/chat); default: the latest */
  turn?: number;
  useful: boolean;
}
export interface FeedbackResult {
  sessionId: string;
  turn: number;
  useful: boolean;
  /** "explicit" for this request; "tool" | "kept" | "corrected" for what the server reads itself */
  signal: string;
  chunks: { path: string; startLine: number; endLine: number; citation: string }[];
}
export interface ConsolidateParams {
  /** let the chat model merge each cluster (default true; the newest copy otherwise) */
  useModel?: boolean;
}
export interface ConsolidationCluster {
  keep: string;
  text: string;
  how: "newest" | "model";
  note: string;
  lines: { citation: string; text: string }[];
}
export interface ConsolidateResult {
  clusters: ConsolidationCluster[];
  model: string;
  notes: string[];
  diff: string;
  /** an LSP WorkspaceEdit for the user to review before it is applied */
  edit: Record<string, unknown>;
}
export const Feedback = req<FeedbackParams, FeedbackResult>("mnemo/feedback");
export const Consolidate = req<ConsolidateParams, ConsolidateResult>("mnemo/consolidate");
/** Command: the same proposal sent as workspace/applyEdit (the editor asks the user to confirm). */
export const CMD_CONSOLIDATE = "mnemo.consolidate";

/** Diagnostics mnemo publishes carry this source. */
export const DIAGNOSTIC_SOURCE = "mnemo";

/** The text shown for an approval: the exact command when there is one. */
export function approvalCommandText(p: ApprovalRequestParams): string {
  if (typeof p.command === "string" && p.command !== "") return p.command;
  if (typeof p.summary === "string" && p.summary !== "") return p.summary;
  return `${p.tool} ${JSON.stringify(p.args ?? {})}`;
}
