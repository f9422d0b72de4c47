#!/usr/bin/env bash
# Set-up for tests/serve/test_agui_node.py: the official AG-UI client (@ag-ui/client, pinned)
# from the npm registry, under Debian's nodejs, in StateFlow's cache directory
# ($STATEFLOW_AGUI_NODE, default ~/.cache/stateflow/agui-node). Without it the test skips.
set -euo pipefail
command -v node >/dev/null || { apt-get install -y nodejs npm >/dev/null; }
dir="${STATEFLOW_AGUI_NODE:-${XDG_CACHE_HOME:-$HOME/.cache}/stateflow/agui-node}"
mkdir -p "$dir"
npm install --prefix "$dir" --no-audit --no-fund --silent @ag-ui/client@1.0.0
echo "[setup_agui_node] @ag-ui/client $(node -p "require('$dir/node_modules/@ag-ui/client/package.json').version") in $dir (node $(node --version))"
