#!/usr/bin/env bash
# Set-up for the local_llm component (filled in by that component).
set -euo pipefail
