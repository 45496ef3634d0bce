import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ChatController, type ChatBackend } from "../src/chat/controller";
import { chatHtml } from "../src/chat/html";
import { modelLine } from "../src/chat/messages";
import { ErrorCodes, type ChatModelInfo, type Req } from "../src/protocol";

const BUNDLED: ChatModelInfo = {
  kind: "bundled",
  provider: "local",
  model: "SmolLM2-135M-Instruct",
  endpoint: "",
  model_path: "/x/SmolLM2-135M-Instruct.Q4_1.gguf",
  auto: true,
  note: "a small demo model (SmolLM2-135M): short answers, often wrong; for a real one run Ollama",
  line: "chat model: SmolLM2-135M-Instruct (bundled, local llama.cpp; no loopback server answered)",
};
const OLLAMA: ChatModelInfo = {
  ...BUNDLED,
  kind: "server",
  provider: "openai",
  model: "qwen2.5:3b",
  note: "",
  line: "chat model: qwen2.5:3b (Ollama at http://127.0.0.1:11434/v1, found on loopback)",
};

function backend(handlers: Record<string, () => Promise<unknown>>, logs: string[] = []): ChatBackend {
  return {
    request<P, R>(type: Req<P, R>): Promise<R> {
      const handler = handlers[type.method];
      if (!handler) return Promise.reject(Object.assign(new Error("nope"), { code: ErrorCodes.MethodNotFound }));
      return handler() as Promise<R>;
    },
    openCitation: () => Promise.resolve(),
    openLink: () => Promise.resolve(),
    reveal: () => undefined,
    log: (m) => void logs.push(m),
  };
}

const flush = () => new Promise((r) => setImmediate(r));

describe("chat panel: which model answers", () => {
  it("asks mnemo/status when the panel is ready and keeps its chatModel", async () => {
    const c = new ChatController(backend({ "mnemo/status": async () => ({ state: "ready", chatModel: BUNDLED }), "mnemo/sessions": async () => ({ sessions: [] }) }));
    await c.handle({ type: "ready" });
    await flush();
    assert.deepEqual(c.snapshot.chatModel, BUNDLED);
    assert.deepEqual(c.snapshot.unsupported, []);
  });

  it("takes the model a reply names (the auto provider may have found a server since)", async () => {
    const c = new ChatController(
      backend({
        "mnemo/status": async () => ({ state: "ready", chatModel: BUNDLED }),
        "mnemo/sessions": async () => ({ sessions: [] }),
        "mnemo/chat": async () => ({ sessionId: "s1", text: "I don't have that in memory.", citations: [], chatModel: OLLAMA }),
      }),
    );
    await c.handle({ type: "ready" });
    await flush();
    await c.handle({ type: "send", text: "hi" });
    assert.equal(c.snapshot.chatModel?.model, "qwen2.5:3b");
  });

  it("an older server without chatModel shows no line and no error", async () => {
    const logs: string[] = [];
    const c = new ChatController(backend({ "mnemo/sessions": async () => ({ sessions: [] }) }, logs));
    await c.handle({ type: "ready" });
    await flush();
    assert.equal(c.snapshot.chatModel, undefined);
    assert.deepEqual(c.snapshot.unsupported, [], "no notice for a missing status field");
    assert.equal(modelLine(c.snapshot.chatModel), undefined);
  });

  it("the line names the model; the bundled model's note is the tooltip and a second line", () => {
    const bundled = modelLine(BUNDLED);
    assert.equal(bundled?.text, "model: SmolLM2-135M-Instruct (bundled, local llama.cpp; no loopback server answered)");
    assert.equal(bundled?.note, BUNDLED.note);
    assert.equal(bundled?.title, BUNDLED.note);
    const server = modelLine(OLLAMA);
    assert.equal(server?.note, "");
    assert.equal(server?.title, OLLAMA.line);
  });

  it("the panel has a place for the model line", () => {
    const html = chatHtml({ cspSource: "vscode-resource:", nonce: "n", scriptUri: "s.js", styleUri: "c.css" });
    assert.match(html, /<div id="model" class="model" hidden><span id="model-name"><\/span><span id="model-note" class="model-note"><\/span><\/div>/);
  });
});
