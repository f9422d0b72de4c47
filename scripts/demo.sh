#!/usr/bin/env bash
# Set up everything (idempotent; assembles the 1.5B `local` model), then run the demo:
# StateFlow and SF_Agent on demo SQL and Bash tasks with the embedded model, the results
# table, and an HTML report. Extra arguments go to `stateflow demo` (e.g. --model default=gpt-4o-mini).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --models local
exec .venv/bin/stateflow demo "$@"
