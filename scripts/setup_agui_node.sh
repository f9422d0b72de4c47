#!/usr/bin/env bash
# Set-up for tests/serve/test_agui_node.py: Debian's nodejs and npm, then the official AG-UI
# client (@ag-ui/client, pinned) from the npm registry into StateFlow's cache directory
# ($STATEFLOW_AGUI_NODE, default ~/.cache/stateflow/agui-node). Without them the test skips.
set -euo pipefail
need=()
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)
if [ ${#need[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "[setup:agui_node] apt-get install ${need[*]}"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  else
    echo "[setup:agui_node] missing ${need[*]}: install them to run the @ag-ui/client test" >&2
    exit 0
  fi
fi
dir="${STATEFLOW_AGUI_NODE:-${XDG_CACHE_HOME:-$HOME/.cache}/stateflow/agui-node}"
mkdir -p "$dir"
npm install --prefix "$dir" --no-audit --no-fund --silent @ag-ui/client@1.0.0
echo "[setup:agui_node] @ag-ui/client $(node -p "require('$dir/node_modules/@ag-ui/client/package.json').version") in $dir (node $(node --version))"
