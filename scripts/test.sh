#!/usr/bin/env bash
# Set up everything (idempotent), then run the whole test suite. Extra args go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --models local-small
exec .venv/bin/python -m pytest "$@"
