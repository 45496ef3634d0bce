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
      // without an explicit model the SDK's embed() falls back to its default (a download that hangs offline)
      if (job.mode === "hybrid") await store.embed({ model: job.model });
    },
    close: async () => await store.close(),
  };
}

// A sync that never returns (QMD's SDK embed() does, offline, after an edit) is recorded, not waited for.
const limitMs = (job.syncTimeoutS ?? 60) * 1000;
const bounded = (promise, what) =>
  Promise.race([
    promise,
    new Promise((_, reject) =>
      setTimeout(() => reject(new Error(`${what} did not return within ${limitMs / 1000} s`)), limitMs).unref(),
    ),
  ]);

const out = { load_ms: 0, search: [], noop_ms: [], edits: [] };
const t0 = now();
const sys = job.system === "openclaw" ? await openclaw() : await qmd();
out.load_ms = now() - t0;
if (job.warmup) {
  const t = now();
  await sys.search(job.warmup);
  out.warmup_ms = now() - t;
}
console.error(`driver: ${job.system} loaded in ${out.load_ms.toFixed(0)} ms; ${job.queries.length} searches`);
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
console.error("driver: no-op syncs");
try {
  for (let i = 0; i < (job.noop ?? 0); i++) {
    const t = now();
    await bounded(sys.sync(), "no-op sync");
    out.noop_ms.push(now() - t);
  }
  console.error("driver: edits");
  for (const e of job.edits ?? []) {
    const t = now();
    writeFileSync(`${job.ws}/${e.path}`, e.text);
    await bounded(sys.sync(), "sync after an edit");
    const paths = await sys.search(e.marker);
    out.edits.push({ ms: now() - t, found: paths.slice(0, 5).includes(e.path) });
  }
} catch (err) {
  out.sync_error = String(err?.message ?? err);
  console.error(`driver: ${out.sync_error}`);
  out.peak_rss_mb = process.resourceUsage().maxRSS / 1024;
  process.stdout.write("RESULT " + JSON.stringify(out) + "\n");
  process.exit(0);
}
await sys.close();
out.peak_rss_mb = process.resourceUsage().maxRSS / 1024;
process.stdout.write("RESULT " + JSON.stringify(out) + "\n");
process.exit(0);
