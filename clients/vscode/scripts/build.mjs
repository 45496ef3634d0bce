// Bundles the extension (Node, CommonJS, `vscode` external) and the chat webview (browser IIFE) with
// esbuild; `--tests` bundles test/*.test.ts for `node --test`; `--production` minifies.
import * as esbuild from "esbuild";
import { readdirSync } from "node:fs";

const args = new Set(process.argv.slice(2));
const production = args.has("--production");
const watch = args.has("--watch");

const common = { bundle: true, sourcemap: !production, minify: production, logLevel: "warning", target: "es2022" };

const builds = args.has("--tests")
  ? [
      {
        ...common,
        entryPoints: readdirSync("test")
          .filter((f) => f.endsWith(".test.ts"))
          .map((f) => `test/${f}`),
        outdir: "out/test",
        platform: "node",
        format: "cjs",
        external: ["vscode"],
      },
    ]
  : [
      {
        ...common,
        entryPoints: ["src/extension.ts"],
        outfile: "dist/extension.js",
        platform: "node",
        format: "cjs",
        external: ["vscode"],
      },
      { ...common, entryPoints: ["webview/chat.ts"], outfile: "dist/webview.js", platform: "browser", format: "iife" },
    ];

if (watch) {
  for (const options of builds) await (await esbuild.context(options)).watch();
} else {
  await Promise.all(builds.map((options) => esbuild.build(options)));
}
