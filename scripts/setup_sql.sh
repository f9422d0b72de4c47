#!/usr/bin/env bash
# Set-up for the sql component (filled in by that component).
set -euo pipefail
