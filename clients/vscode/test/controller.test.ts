import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ChatController, type ChatBackend } from "../src/chat/controller";
import type { ToWebview } from "../src/chat/messages";
import { ErrorCodes, type ApprovalRequestParams, type Req } from "../src/protocol";

interface Call {
  method: string;
  params: unknown;
  signal?: AbortSignal;
}

/** A backend whose requests the test answers by hand. */
function fakeBackend(handlers: Record<string, (params: unknown, signal?: AbortSignal) => Promise<unknown>> = {}) {
  const calls: Call[] = [];
  const opened: unknown[] = [];
  let reveals = 0;
  const backend: ChatBackend = {
    request<P, R>(type: Req<P, R>, params: P, signal?: AbortSignal): Promise<R> {
      calls.push({ method: type.method, params, signal });
      const handler = handlers[type.method];
      if (!handler) {
        return Promise.reject(Object.assign(new Error(`Unhandled method ${type.method}`), { code: ErrorCodes.MethodNotFound }));
      }
      return handler(params, signal) as Promise<R>;
    },
    openCitation: (c) => {
      opened.push(c);
      return Promise.resolve();
    },
    openLink: () => Promise.resolve(),
    reveal: () => void reveals++,
    log: () => undefined,
  };
  return { backend, calls, opened, reveals: () => reveals };
}

function deferred<T>() {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

function recorder(controller: ChatController) {
  const posted: ToWebview[] = [];
  controller.attach((m) => posted.push(structuredClone(m)));
  return posted;
}

const flush = () => new Promise((r) => setImmediate(r));

describe("ChatController chat", () => {
  it("streams deltas into the answer, then takes the final text and the session id", async () => {
    const answer = deferred<unknown>();
    const { backend, calls } = fakeBackend({ "mnemo/chat": () => answer.promise, "mnemo/sessions": async () => ({ sessions: [] }) });
    const c = new ChatController(backend);
    const posted = recorder(c);
    const sending = c.handle({ type: "send", text: "  what database?  " });
    assert.deepEqual(calls[0].params, { message: "what database?" });
    assert.equal(c.snapshot.busy, true);

    c.onDelta({ sessionId: "s1", delta: "We chose " });
    c.onDelta({ sessionId: "s1", delta: "PostgreSQL (memory/2026-11-02.md#L3-L6)." });
    const deltas = posted.filter((m) => m.type === "delta");
    assert.equal(deltas.length, 2);
    assert.deepEqual(deltas[1], { type: "delta", messageId: "m2", text: "We chose PostgreSQL (memory/2026-11-02.md#L3-L6)." });
    assert.equal(c.sessionId, "s1", "the first delta names the new session");

    answer.resolve({ sessionId: "s1", text: "We chose PostgreSQL (memory/2026-11-02.md#L3-L6).", citations: [{ citation: "memory/2026-11-02.md#L3-L6", path: "memory/2026-11-02.md", startLine: 3, endLine: 6, score: 0.5, source: "memory", origin: "recall" }] });
    await sending;
    const last = posted.filter((m) => m.type === "state").at(-1);
    assert.ok(last && last.type === "state");
    assert.equal(last.state.busy, false);
    assert.deepEqual(
      last.state.messages.map((m) => [m.role, m.text, !!m.streaming]),
      [
        ["user", "what database?", false],
        ["assistant", "We chose PostgreSQL (memory/2026-11-02.md#L3-L6).", false],
      ],
    );
    assert.deepEqual(last.state.messages[1].citations, ["memory/2026-11-02.md#L3-L6"]);

    // The next message names the session.
    const second = c.handle({ type: "send", text: "and why?" });
    assert.deepEqual(calls.filter((x) => x.method === "mnemo/chat")[1].params, { sessionId: "s1", message: "and why?" });
    c.onDelta({ sessionId: "other", delta: "not for us" });
    assert.equal(c.snapshot.messages.at(-1)?.text, "", "deltas of another session are ignored");
    calls.length = 0;
    void second;
  });

  it("typing while an answer streams steers the running turn; its answer streams into a new bubble", async () => {
    const answer = deferred<unknown>();
    const { backend, calls } = fakeBackend({
      "mnemo/chat": () => answer.promise,
      "mnemo/steer": async () => ({ state: "injected" }),
      "mnemo/sessions": async () => ({ sessions: [] }),
    });
    const c = new ChatController(backend);
    const sending = c.handle({ type: "send", text: "deploy notes?" });
    c.onDelta({ sessionId: "s1", requestId: 1, delta: "Looking" });
    await c.handle({ type: "send", text: "only staging" });
    assert.deepEqual(calls.find((x) => x.method === "mnemo/steer")?.params, { sessionId: "s1", message: "only staging" });
    assert.equal(calls.filter((x) => x.method === "mnemo/chat").length, 1, "no second turn");
    c.onDelta({ sessionId: "s1", requestId: 1, delta: "Staging: migrations first." });
    answer.resolve({ sessionId: "s1", text: "Looking\n\nStaging: migrations first.", citations: [] });
    await sending;
    assert.deepEqual(
      c.snapshot.messages.map((m) => [m.role, m.text, !!m.streaming]),
      [
        ["user", "deploy notes?", false],
        ["assistant", "Looking", false],
        ["user", "only staging", false],
        ["assistant", "Staging: migrations first.", false],
      ],
    );
  });

  it("a message the turn cannot take (idle) is sent as the next turn", async () => {
    const first = deferred<unknown>();
    const { backend, calls } = fakeBackend({
      "mnemo/chat": (p) => ((p as { message: string }).message === "one" ? first.promise : Promise.resolve({ sessionId: "s1", text: "two done" })),
      "mnemo/steer": async () => ({ state: "idle" }),
      "mnemo/sessions": async () => ({ sessions: [] }),
    });
    const c = new ChatController(backend);
    const sending = c.handle({ type: "send", text: "one" });
    c.onDelta({ sessionId: "s1", delta: "..." });
    await c.handle({ type: "send", text: "two" });
    first.resolve({ sessionId: "s1", text: "one done" });
    await sending;
    assert.deepEqual(
      calls.filter((x) => x.method === "mnemo/chat").map((x) => x.params),
      [{ message: "one" }, { sessionId: "s1", message: "two" }],
    );
    assert.deepEqual(c.snapshot.messages.map((m) => m.text), ["one", "one done", "two", "two done"]);
  });

  it("ignores deltas when no request is waiting, and empty messages", async () => {
    const { backend, calls } = fakeBackend();
    const c = new ChatController(backend);
    c.onDelta({ sessionId: "s", delta: "stray" });
    await c.handle({ type: "send", text: "   " });
    assert.equal(calls.length, 0);
    assert.equal(c.snapshot.messages.length, 0);
  });

  it("stop aborts the request and marks the answer stopped", async () => {
    const { backend, calls } = fakeBackend({
      "mnemo/chat": (_p, signal) =>
        new Promise((_res, rej) =>
          signal?.addEventListener("abort", () => rej(Object.assign(new Error("cancelled"), { code: ErrorCodes.RequestCancelled }))),
        ),
      "mnemo/sessions": async () => ({ sessions: [] }),
    });
    const c = new ChatController(backend);
    const sending = c.handle({ type: "send", text: "long question" });
    c.onDelta({ sessionId: "s1", delta: "partial" });
    await c.handle({ type: "stop" });
    await sending;
    assert.equal(calls[0].signal?.aborted, true);
    assert.equal(c.snapshot.busy, false);
    assert.equal(c.snapshot.messages.at(-1)?.text, "partial\n\n*(stopped)*");
  });

  it("says so when the server does not implement mnemo/chat (never fakes an answer)", async () => {
    const { backend } = fakeBackend();
    const c = new ChatController(backend);
    await c.handle({ type: "send", text: "hello" });
    const answer = c.snapshot.messages.at(-1)!;
    assert.equal(answer.role, "error");
    assert.match(answer.text, /does not implement `mnemo\/chat`/);
    assert.ok(c.snapshot.unsupported.includes("mnemo/chat"));
  });

  it("reports other errors with the method and reason", async () => {
    const { backend } = fakeBackend({
      "mnemo/chat": () => Promise.reject(Object.assign(new Error("chat model missing"), { code: ErrorCodes.RequestFailed })),
      "mnemo/sessions": async () => ({ sessions: [] }),
    });
    const c = new ChatController(backend);
    await c.handle({ type: "send", text: "hello" });
    assert.equal(c.snapshot.messages.at(-1)?.text, "`mnemo/chat` failed: chat model missing");
  });
});

describe("ChatController sessions and flush", () => {
  it("lists, creates, switches and resets sessions, keeping each transcript", async () => {
    let n = 0;
    const { backend, calls } = fakeBackend({
      "mnemo/sessions": async () => ({ sessions: [{ sessionId: "a", title: "first" }, { sessionId: "b" }] }),
      "mnemo/newSession": async () => ({ sessionId: `new${++n}` }),
      "mnemo/resetSession": async () => ({}),
      "mnemo/chat": async (p) => ({ sessionId: (p as { sessionId: string }).sessionId, text: "ok" }),
    });
    const c = new ChatController(backend);
    await c.handle({ type: "ready" });
    await flush();
    assert.deepEqual(c.snapshot.sessions.map((s) => s.sessionId), ["a", "b"]);

    await c.handle({ type: "newSession" });
    assert.equal(c.sessionId, "new1");
    assert.deepEqual(calls.find((x) => x.method === "mnemo/newSession")?.params, {});
    await c.handle({ type: "send", text: "in new1" });
    assert.equal(c.snapshot.messages.length, 2);

    c.selectSession("a");
    assert.equal(c.sessionId, "a");
    assert.equal(c.snapshot.messages.length, 0);
    c.selectSession("new1");
    assert.equal(c.snapshot.messages.length, 2, "switching back shows the transcript again");

    await c.handle({ type: "resetSession" });
    assert.deepEqual(calls.find((x) => x.method === "mnemo/resetSession")?.params, { sessionId: "new1" });
    assert.deepEqual(c.snapshot.messages.map((m) => m.role), ["note"]);

    await c.handle({ type: "newSession" });
    assert.deepEqual(calls.filter((x) => x.method === "mnemo/newSession")[1].params, { previousSessionId: "new1" });
  });

  it("without mnemo/newSession, starts afresh and lets the server open the session", async () => {
    const { backend } = fakeBackend({ "mnemo/chat": async () => ({ sessionId: "s9", text: "hi" }) });
    const c = new ChatController(backend);
    await c.handle({ type: "send", text: "x" });
    assert.equal(c.sessionId, "s9");
    await c.handle({ type: "newSession" });
    assert.equal(c.sessionId, undefined);
    assert.equal(c.snapshot.messages.length, 0);
    assert.ok(c.snapshot.unsupported.includes("mnemo/newSession"));
  });

  it("flushes the current session and notes the result", async () => {
    const { backend, calls } = fakeBackend({
      "mnemo/chat": async () => ({ sessionId: "s1", text: "hi" }),
      "mnemo/flush": async () => ({ sessionId: "s1", written: [{}, {}], refused: [], noReply: false, kept: 2, candidates: 5, skipped: "" }),
      "mnemo/sessions": async () => ({ sessions: [] }),
    });
    const c = new ChatController(backend);
    await c.handle({ type: "flush" });
    assert.equal(c.snapshot.messages.at(-1)?.text, "Nothing to flush yet: this session has no messages.");
    await c.handle({ type: "send", text: "x" });
    await c.handle({ type: "flush" });
    assert.deepEqual(calls.find((x) => x.method === "mnemo/flush")?.params, { sessionId: "s1" });
    assert.equal(c.snapshot.messages.at(-1)?.text, "Memory flushed: 2 item(s) written.");
  });
});

describe("ChatController approvals", () => {
  const request: ApprovalRequestParams = {
    id: "ap1",
    session: "s1",
    tool: "exec",
    args: { command: "rm -rf build/ && echo '<b>done</b>'" },
    command: "rm -rf build/ && echo '<b>done</b>'",
    summary: "rm -rf build/ && echo '<b>done</b>'",
    decision: "confirm",
    rule: "confirm:rm",
    reason: "deletes files",
    timeoutS: 60,
  };

  it("shows a card with the exact command and answers the server's request with the choice", async () => {
    const f = fakeBackend();
    const c = new ChatController(f.backend);
    const posted = recorder(c);
    const answer = c.requestApproval(request);
    assert.equal(f.reveals(), 1, "the panel is brought to the front");
    const state = posted.filter((m) => m.type === "state").at(-1);
    assert.ok(state && state.type === "state");
    assert.equal(state.state.approvals[0].command, "rm -rf build/ && echo '<b>done</b>'");

    await c.handle({ type: "approve", id: "ap1", choice: "allow_once" });
    assert.deepEqual(await answer, { choice: "allow_once" });
    assert.equal(c.snapshot.approvals[0].resolved, "allow_once");
    // A second click does nothing.
    await c.handle({ type: "approve", id: "ap1", choice: "deny" });
    assert.equal(c.snapshot.approvals[0].resolved, "allow_once");
  });

  it("denies at the timeout and when the server cancels the request", async () => {
    const c = new ChatController(fakeBackend().backend);
    const timedOut = c.requestApproval({ ...request, id: "t", timeoutS: 0.01, expiresInS: undefined });
    assert.deepEqual(await timedOut, { choice: "deny" });
    assert.equal(c.snapshot.approvals.find((a) => a.request.id === "t")?.resolved, "expired");

    const abort = new AbortController();
    const cancelled = c.requestApproval({ ...request, id: "x" }, abort.signal);
    abort.abort();
    assert.deepEqual(await cancelled, { choice: "deny" });
  });

  it("answers an approval it was only shown with mnemo/resolveApproval", async () => {
    const f = fakeBackend({ "mnemo/resolveApproval": async () => ({ resolved: true }) });
    const c = new ChatController(f.backend);
    c.showApproval(request);
    await c.handle({ type: "approve", id: "ap1", choice: "always" });
    assert.deepEqual(f.calls.at(-1), { method: "mnemo/resolveApproval", params: { id: "ap1", choice: "always" }, signal: undefined });
    assert.equal(c.snapshot.approvals[0].resolved, "always");
  });

  it("dispose denies what is pending", async () => {
    const c = new ChatController(fakeBackend().backend);
    const pending = c.requestApproval(request);
    c.dispose();
    assert.deepEqual(await pending, { choice: "deny" });
  });
});

describe("ChatController commands and approvals listed by the server", () => {
  it("runs a command through mnemo/exec and shows its output", async () => {
    const f = fakeBackend({
      "mnemo/exec": async () => ({ ok: true, output: "hello\n", decision: "confirm", rule: "confirm:echo", exitCode: 0, approval: "allow_once" }),
    });
    const c = new ChatController(f.backend);
    await c.handle({ type: "runCommand", command: "echo hello" });
    assert.deepEqual(f.calls[0].params, { command: "echo hello", session: "vscode" });
    assert.equal(c.snapshot.messages.at(-1)?.text, "`echo hello` — exit 0 (allow once, rule confirm:echo)\n\n```text\nhello\n```");
  });

  it("shows approvals pending elsewhere and closes those answered elsewhere", async () => {
    let pending = [{ id: "p1", tool: "exec", command: "make deploy", rule: "r", reason: "why", timeoutS: 30 }];
    const f = fakeBackend({ "mnemo/approvals": async () => ({ approvals: pending }) });
    const c = new ChatController(f.backend);
    await c.syncApprovals();
    assert.equal(c.snapshot.approvals[0].command, "make deploy");
    assert.equal(f.reveals(), 1);
    pending = [];
    await c.syncApprovals();
    assert.equal(c.snapshot.approvals[0].resolved, "elsewhere");
  });
});

describe("ChatController citations", () => {
  it("passes citation clicks to the editor", async () => {
    const f = fakeBackend();
    const c = new ChatController(f.backend);
    await c.handle({ type: "openCitation", citation: { path: "memory/a.md", startLine: 3, endLine: 6 } });
    assert.deepEqual(f.opened, [{ path: "memory/a.md", startLine: 3, endLine: 6 }]);
  });
});

describe("ChatController feedback", () => {
  it("rates only the latest answer, with mnemo/feedback on the session's latest turn", async () => {
    const { backend, calls } = fakeBackend({
      "mnemo/chat": async () => ({ text: "PostgreSQL.", citations: [], sessionId: "s1" }),
      "mnemo/sessions": async () => ({ sessions: [] }),
      "mnemo/feedback": async () => ({ sessionId: "s1", turn: 2, useful: false, signal: "explicit", chunks: [{}] }),
    });
    const c = new ChatController(backend);
    await c.send("first");
    await c.send("second");
    const answers = c.snapshot.messages.filter((m) => m.role === "assistant");
    assert.deepEqual(answers.map((m) => m.rateable), [false, true]);
    await c.handle({ type: "feedback", messageId: answers[0].id, useful: true }); // not the latest: ignored
    assert.equal(calls.filter((x) => x.method === "mnemo/feedback").length, 0);
    await c.handle({ type: "feedback", messageId: answers[1].id, useful: false });
    assert.deepEqual(calls.find((x) => x.method === "mnemo/feedback")?.params, { sessionId: "s1", useful: false });
    assert.equal(c.snapshot.messages.find((m) => m.id === answers[1].id)?.rated, "down");
  });

  it("notes a server without mnemo/feedback once and stops asking", async () => {
    const { backend, calls } = fakeBackend({
      "mnemo/chat": async () => ({ text: "ok", citations: [], sessionId: "s1" }),
      "mnemo/sessions": async () => ({ sessions: [] }),
    });
    const c = new ChatController(backend);
    await c.send("q");
    const answer = c.snapshot.messages.find((m) => m.role === "assistant")!;
    await c.handle({ type: "feedback", messageId: answer.id, useful: true });
    await c.handle({ type: "feedback", messageId: answer.id, useful: true });
    assert.equal(calls.filter((x) => x.method === "mnemo/feedback").length, 1);
    assert.ok(c.snapshot.unsupported.includes("mnemo/feedback"));
    assert.equal(answer.rated, undefined);
  });
});
