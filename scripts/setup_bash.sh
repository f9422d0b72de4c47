#!/usr/bin/env bash
# Set-up for the bash component (filled in by that component).
set -euo pipefail
