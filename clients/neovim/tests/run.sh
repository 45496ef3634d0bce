#!/usr/bin/env bash
# Run the Neovim plugin's headless tests by hand (pytest tests/clients/test_neovim.py does the same and
# sets up a workspace and a scripted model). Usage: run.sh WORKSPACE [test_x.lua,...]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
ws="$(cd "${1:?usage: run.sh WORKSPACE [tests]}" && pwd)"
export MNEMO_TEST_WS="$ws" MNEMO_TEST_SCRIPTS="${2:-}"
cd "$ws"
exec nvim --headless --noplugin -i NONE -u "$here/minimal_init.lua" -c "luafile $here/run.lua"
