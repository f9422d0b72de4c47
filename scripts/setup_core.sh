#!/usr/bin/env bash
# Set-up for the core: Graphviz (PNG export of flow graphs), headless Chromium (used by the
# test that opens the HTML report) and its WebDriver, chromium-driver (Selenium drives it in the
# `stateflow ui` browser test). Debian/Ubuntu packages; skipped quietly when present.
set -euo pipefail
need=()
command -v dot >/dev/null 2>&1 || need+=(graphviz)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v chromedriver >/dev/null 2>&1 || need+=(chromium-driver)
if [ ${#need[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "[setup:core] apt-get install ${need[*]}"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  else
    echo "[setup:core] missing ${need[*]}: install them with your package manager (PNG graphs, the report test and the UI's browser test need them)" >&2
  fi
fi
