/**
 * The typed message contract between the chat webview and the extension. Both sides import this file;
 * `isFromWebview` validates what arrives from the webview (it is untrusted input to the extension).
 */
import type { ApprovalChoice, ApprovalRequestParams, ChatModelInfo, ChatResult, SessionInfo } from "../protocol";
import type { Citation } from "../citations";

export type Role = "user" | "assistant" | "note" | "error";

export interface ChatMessage {
  id: string;
  role: Role;
  text: string;
  /** citations the server attached to the answer (`path#Lx-Ly`), shown as links under it */
  citations?: string[];
  /** true while deltas are still arriving */
  streaming?: boolean;
  /** the session's latest answer: 👍/👎 under it send mnemo/feedback on its turn */
  rateable?: boolean;
  /** what the user said of it, once the server recorded it */
  rated?: "up" | "down";
}

export interface ApprovalCard {
  request: ApprovalRequestParams;
  /** the exact command line or summary shown to the user */
  command: string;
  /** epoch ms when the server denies it by itself */
  expiresAt: number;
  resolved?: ApprovalChoice | "expired" | "elsewhere";
}

export interface ChatState {
  sessionId?: string;
  sessions: SessionInfo[];
  messages: ChatMessage[];
  approvals: ApprovalCard[];
  busy: boolean;
  /** methods the server said it does not implement (shown, never faked) */
  unsupported: string[];
  /** which chat model answers (`chatModel` of mnemo/status or of the last reply); unset until known */
  chatModel?: ChatModelInfo;
}

/** What grounding did to an answer (`grounded` of a mnemo/chat result; docs/protocol.md). */
export interface Grounded {
  mode: string;
  action: "no-memory" | "kept" | "cited" | "quoted";
  reason: string;
  added: string[];
  removed: string[];
}

/** A mnemo/chat result with the fields newer servers add (the model that answered, grounding). */
export type ChatReply = ChatResult & { chatModel?: ChatModelInfo | null; grounded?: Grounded | null };

/** The panel's model line: its text and the tooltip (the bundled model's note, else how it was chosen). */
export function modelLine(model: ChatModelInfo | undefined): { text: string; title: string; note: string } | undefined {
  if (!model || typeof model.line !== "string" || model.line === "") return undefined;
  const note = typeof model.note === "string" ? model.note : "";
  return { text: model.line.replace(/^chat model: /, "model: "), title: note || model.line, note };
}

/** extension -> webview */
export type ToWebview =
  | { type: "state"; state: ChatState }
  | { type: "delta"; messageId: string; text: string }
  | { type: "focusInput" };

/** webview -> extension */
export type FromWebview =
  | { type: "ready" }
  | { type: "send"; text: string }
  | { type: "stop" }
  | { type: "newSession" }
  | { type: "resetSession" }
  | { type: "selectSession"; sessionId: string }
  | { type: "refreshSessions" }
  | { type: "flush" }
  | { type: "runCommand"; command: string }
  | { type: "approve"; id: string; choice: ApprovalChoice }
  | { type: "feedback"; messageId: string; useful: boolean }
  | { type: "openCitation"; citation: Citation }
  | { type: "openLink"; href: string };

const CHOICES = new Set(["allow_once", "always", "deny"]);

function isStr(v: unknown): v is string {
  return typeof v === "string";
}

export function isFromWebview(value: unknown): value is FromWebview {
  if (typeof value !== "object" || value === null) return false;
  const m = value as Record<string, unknown>;
  switch (m.type) {
    case "ready":
    case "stop":
    case "newSession":
    case "resetSession":
    case "refreshSessions":
    case "flush":
      return true;
    case "send":
      return isStr(m.text);
    case "runCommand":
      return isStr(m.command);
    case "selectSession":
      return isStr(m.sessionId);
    case "approve":
      return isStr(m.id) && isStr(m.choice) && CHOICES.has(m.choice);
    case "feedback":
      return isStr(m.messageId) && typeof m.useful === "boolean";
    case "openCitation": {
      const c = m.citation as Record<string, unknown> | null;
      return (
        typeof c === "object" &&
        c !== null &&
        isStr(c.path) &&
        Number.isInteger(c.startLine) &&
        Number.isInteger(c.endLine)
      );
    }
    case "openLink":
      return isStr(m.href);
    default:
      return false;
  }
}
