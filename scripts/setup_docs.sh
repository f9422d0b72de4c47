#!/usr/bin/env bash
# Set-up for the documentation site (scripts/docs.sh): the one third-party script the site ships
# instead of loading it from a CDN (iframe-worker's shim, pinned, sha512-checked, from the npm
# registry) into StateFlow's cache. The Python packages come with the [docs] extra (setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python scripts/docs_assets.py >/dev/null
echo "[setup_docs] site assets present: $(.venv/bin/python scripts/docs_assets.py --check)"
