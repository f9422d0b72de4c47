#!/usr/bin/env bash
# Build the documentation site offline into site/ (open site/index.html; no server needed).
# Strict: a broken link, anchor, API reference or a page missing from the nav fails the build.
# Extra arguments go to `mkdocs build` (e.g. --site-dir /tmp/site). Needs the [docs] extra
# (scripts/setup.sh installs it). Nothing is fetched: no web fonts, no CDN (mkdocs.yml).
set -euo pipefail
cd "$(dirname "$0")/.."
export NO_MKDOCS_2_WARNING=1  # the theme's end-of-life banner, not a build problem
exec .venv/bin/python -m mkdocs build --strict --clean "$@"
