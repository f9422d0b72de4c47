#!/usr/bin/env bash
# Set up everything (idempotent; assembles both embedded models: the 1.5B `local` the demo runs
# on, and the 0.5B `local-small` that the docs, examples and `serve --model local-small` use), then run the demo:
# StateFlow and SF_Agent on demo SQL and Bash tasks with the embedded model, the results
# table, and an HTML report. Extra arguments go to `stateflow demo` (e.g. --model default=gpt-4o-mini).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --models all
exec .venv/bin/stateflow demo "$@"
