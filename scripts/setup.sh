#!/usr/bin/env bash
# One-shot, idempotent set-up of everything StateFlow needs on a fresh Debian/Ubuntu machine:
# a virtualenv in .venv with the package (editable) and its test tools, then each component's
# own set-up (MariaDB server, PostgreSQL server binaries, bash sandbox tools, embedded local model runtime, Docker engine and
# images for the optional Docker backends, the documentation site's offline assets, Node and the official AG-UI client
# for its protocol test).
#
# Usage: scripts/setup.sh [--models local-small|local|all|none]
#   --models  which embedded models to assemble (default: local-small; the demo asks for local)
set -euo pipefail
cd "$(dirname "$0")/.."

MODELS="local-small"
while [ $# -gt 0 ]; do
  case "$1" in
    --models) MODELS="$2"; shift 2 ;;
    --models=*) MODELS="${1#*=}"; shift ;;
    *) echo "setup.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
export STATEFLOW_SETUP_MODELS="$MODELS"

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv"
  "$PY" -m venv .venv
fi
echo "[setup] installing stateflow (editable) and test tools"
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[dev,sql,bash,docker,report,otel,ray,postgres,ui,stats,docs,mcp,serve]" 2>&1 | grep -v "^WARNING: Location" || true

for component in core sql postgres bash local_llm docker docs agui_node; do
  echo "[setup] component: $component"
  bash "scripts/setup_${component}.sh"
done
echo "[setup] done"
