#!/usr/bin/env bash
# End to end in a real VS Code: code-server (Node 24) with the packaged extension, driven by
# playwright-core in Debian's Chromium, over a copy of workspace-template (keyword search: provider none).
# Exit codes: 0 pass, 1 fail, 77 skipped (a tool is missing; the reason is printed).
# Env: MNEMO_BIN (default <repo>/.venv/bin/mnemo), MNEMO_E2E_CACHE (~/.cache/mnemo-e2e),
#      MNEMO_E2E_SCREENSHOTS (default <repo>/docs/images), MNEMO_E2E_KEEP=1 keeps .e2e/ for inspection.
set -euo pipefail

HERE="$(cd "$(dirname "$0")/.." && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
CACHE="${MNEMO_E2E_CACHE:-$HOME/.cache/mnemo-e2e}"
NODE24="$CACHE/node-v24/bin/node"
CODE_SERVER="$CACHE/code-server/node_modules/.bin/code-server"
CHROMIUM="${MNEMO_E2E_CHROMIUM:-/usr/bin/chromium}"
MNEMO_BIN="${MNEMO_BIN:-$REPO/.venv/bin/mnemo}"
SHOTS="${MNEMO_E2E_SCREENSHOTS:-$REPO/docs/images}"

skip() { echo "SKIP: $*"; exit 77; }
[ -x "$NODE24" ] || skip "Node 24 missing ($NODE24); run clients/vscode/scripts/e2e-setup.sh"
[ -x "$CODE_SERVER" ] || skip "code-server missing ($CODE_SERVER); run clients/vscode/scripts/e2e-setup.sh"
[ -x "$CHROMIUM" ] || skip "Chromium missing ($CHROMIUM); apt-get install chromium (or run e2e-setup.sh)"
[ -x "$MNEMO_BIN" ] || skip "mnemo missing ($MNEMO_BIN); run make install"
[ -d "$HERE/node_modules/playwright-core" ] || skip "clients/vscode/node_modules missing; run npm ci in clients/vscode"

cd "$HERE"
npm run --silent package >/dev/null

RUN="$HERE/.e2e"
rm -rf "$RUN" && mkdir -p "$RUN/user/User" "$RUN/ext" "$SHOTS"
WS="$RUN/workspace"
cp -r "$REPO/workspace-template" "$WS"
# Keyword search only: no embedding model to load, so indexing takes a second.
sed -i 's/^\[embedding\]$/[embedding]\nprovider = "none"/' "$WS/mnemo.toml"
grep -q '^provider = "none"' "$WS/mnemo.toml" || printf '\n[embedding]\nprovider = "none"\n' >>"$WS/mnemo.toml"
git -C "$WS" init -q -b main
git -C "$WS" -c user.name=e2e -c user.email=e2e@example.invalid add -A
git -C "$WS" -c user.name=e2e -c user.email=e2e@example.invalid commit -q -m "initial memory"
git -C "$WS" config user.name "mnemo e2e"
git -C "$WS" config user.email "e2e@example.invalid"

# Which methods the server has (the steps of features that have not landed are skipped, never faked).
"$(dirname "$MNEMO_BIN")/python" - >"$RUN/server-features.json" <<'PY'
import json, logging
logging.disable(logging.CRITICAL)
from mnemo.lsp.setup import create_server
fm = create_server().protocol.fm
print(json.dumps({"features": sorted(fm.features), "commands": sorted(fm.commands)}))
PY

cat >"$RUN/user/User/settings.json" <<JSON
{
  "mnemo.server.command": "$MNEMO_BIN",
  "mnemo.server.args": ["serve", "-v", "--log-file", "$RUN/server.log"],
  "workbench.startupEditor": "none",
  "workbench.colorTheme": "Dark Modern",
  "workbench.tips.enabled": false,
  "security.workspace.trust.enabled": false,
  "telemetry.telemetryLevel": "off",
  "extensions.autoCheckUpdates": false,
  "extensions.ignoreRecommendations": true,
  "git.enabled": false,
  "editor.hover.delay": 200,
  "editor.minimap.enabled": false,
  "chat.disableAIFeatures": true,
  "workbench.secondarySideBar.defaultVisibility": "hidden"
}
JSON
printf 'bind-addr: 127.0.0.1:0\nauth: none\ncert: false\n' >"$RUN/config.yaml"

export PATH="$(dirname "$NODE24"):$PATH"
CS_ARGS=(--config "$RUN/config.yaml" --user-data-dir "$RUN/user" --extensions-dir "$RUN/ext")
"$CODE_SERVER" "${CS_ARGS[@]}" --install-extension "$HERE/dist/mnemo.vsix" >"$RUN/install.log" 2>&1 ||
  { cat "$RUN/install.log"; echo "FAIL: could not install the VSIX"; exit 1; }

PORT="$("$NODE24" -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')"
setsid "$CODE_SERVER" "${CS_ARGS[@]}" --bind-addr "127.0.0.1:$PORT" --auth none --disable-telemetry \
  --disable-update-check --disable-workspace-trust --disable-getting-started-override "$WS" \
  >"$RUN/code-server.log" 2>&1 &
CS_PID=$!
cleanup() {
  kill -TERM -- "-$CS_PID" 2>/dev/null || true
  sleep 1
  kill -KILL -- "-$CS_PID" 2>/dev/null || true
  [ "${MNEMO_E2E_KEEP:-0}" = 1 ] || rm -rf "$RUN/user" "$RUN/ext"
}
trap cleanup EXIT

for _ in $(seq 1 120); do
  curl -fsS "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1 && break
  kill -0 "$CS_PID" 2>/dev/null || { cat "$RUN/code-server.log"; echo "FAIL: code-server exited"; exit 1; }
  sleep 0.5
done

E2E_URL="http://127.0.0.1:$PORT" E2E_WORKSPACE="$WS" E2E_SCREENSHOTS="$SHOTS" E2E_RUN="$RUN" \
E2E_CHROMIUM="$CHROMIUM" E2E_FEATURES="$RUN/server-features.json" \
  "$NODE24" "$HERE/scripts/e2e.mjs"
