// In-process driver for the peers (OpenClaw memory search, QMD): loads the installed package once, then times
// searches, no-op re-indexes and edit -> searchable, all inside one Node process.
//   node driver.mjs JOB.json   ->   one line "RESULT {json}" on stdout
// JOB: {system: "openclaw"|"qmd", pkg, mode: "keyword"|"hybrid", ws, k, warmup, queries: [str],
//       noop: n, edits: [{path, text, marker}]}  (qmd also needs dbPath and configPath)
import { readFileSync, writeFileSync } from "node:fs";

const job = JSON.parse(readFileSync(process.argv[2], "utf8"));
const now = () => performance.now();

async function openclaw() {
  const { loadConfig } = await import(job.pkg + "/dist/plugin-sdk/config-runtime.js");
  const host = await import(job.pkg + "/dist/plugin-sdk/memory-host-search.js");
  const cfg = loadConfig();
  const res = await host.getActiveMemorySearchManager({ cfg, agentId: "main", purpose: "cli" });
  if (!res.manager) throw new Error(`no memory manager: ${res.error}`);
  const m = res.manager;
  return {
    search: async (q) => (await m.search(q, { maxResults: job.k, minScore: 0 })).map((r) => r.path),
    sync: async () => {
      if (typeof m.sync !== "function") throw new Error("memory manager has no sync()");
      await m.sync({ reason: "bench", force: false });
    },
    close: async () => {
      await m.close?.();
      await host.closeActiveMemorySearchManagers(cfg);
    },
  };
}

async function qmd() {
  const { createStore } = await import(job.pkg + "/dist/index.js");
  const store = await createStore({ dbPath: job.dbPath, configPath: job.configPath });
  const strip = (f) => f.replace(/^qmd:\/\/[^/]+\//, "");
  const search =
    job.mode === "hybrid"
      ? async (q) =>
          (
            await store.search({
              queries: [
                { type: "lex", query: q },
                { type: "vec", query: q },
              ],
              rerank: false,
              limit: job.k,
            })
          ).map((r) => strip(r.file))
      : async (q) => (await store.searchLex(q, { limit: job.k })).map((r) => strip(r.filepath ?? r.file));
  return {
    search,
    sync: async () => {
      await store.update();
      if (job.mode === "hybrid") await store.embed();
    },
    close: async () => await store.close(),
  };
}

const out = { load_ms: 0, search: [], noop_ms: [], edits: [] };
const t0 = now();
const sys = job.system === "openclaw" ? await openclaw() : await qmd();
out.load_ms = now() - t0;
if (job.warmup) {
  const t = now();
  await sys.search(job.warmup);
  out.warmup_ms = now() - t;
}
for (const q of job.queries) {
  const t = now();
  let paths = [];
  let error;
  try {
    paths = await sys.search(q);
  } catch (err) {
    error = String(err?.message ?? err);
  }
  out.search.push({ ms: now() - t, paths, ...(error ? { error } : {}) });
}
for (let i = 0; i < (job.noop ?? 0); i++) {
  const t = now();
  await sys.sync();
  out.noop_ms.push(now() - t);
}
for (const e of job.edits ?? []) {
  const t = now();
  writeFileSync(`${job.ws}/${e.path}`, e.text);
  await sys.sync();
  const paths = await sys.search(e.marker);
  out.edits.push({ ms: now() - t, found: paths.slice(0, 5).includes(e.path) });
}
await sys.close();
out.peak_rss_mb = process.resourceUsage().maxRSS / 1024;
process.stdout.write("RESULT " + JSON.stringify(out) + "\n");
process.exit(0);
