#!/usr/bin/env bash
# Set-up of the InterCode Bash sandbox (idempotent; seconds when already done).
#
# 1. host tools: bubblewrap (the sandbox), mmdebstrap (builds the base root), util-linux
#    (unshare/nsenter), dash; installed with apt-get when missing (needs root).
# 2. the base root: a Debian 12 tree with the tools the NL2Bash tasks use, built once by
#    mmdebstrap (~1-1.5 min, ~300 MB) into ~/.cache/stateflow/bash-root/<key>/ (key = package list).
# 3. a smoke test: one command in a sandbox.
#
# Non-root users: install bubblewrap and mmdebstrap yourself (apt-get install bubblewrap mmdebstrap uidmap),
# make sure unprivileged user namespaces are enabled (sysctl user.max_user_namespaces > 0; on Ubuntu 24.04+
# also kernel.apparmor_restrict_unprivileged_userns=0), then run this script: mmdebstrap builds the
# root in --mode=unshare (needs subuid/subgid ranges for your user in /etc/subuid and /etc/subgid).
# Set STATEFLOW_SKIP_BASH=1 to skip this component entirely.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${STATEFLOW_SKIP_BASH:-0}" = "1" ]; then
  echo "[setup_bash] skipped (STATEFLOW_SKIP_BASH=1)"
  exit 0
fi

PY=.venv/bin/python
[ -x "$PY" ] || PY=python3

missing=()
for tool in bwrap:bubblewrap mmdebstrap:mmdebstrap unshare:util-linux nsenter:util-linux dash:dash; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || missing+=("${tool##*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "[setup_bash] missing: ${missing[*]}; install them (sudo apt-get install ${missing[*]}) and re-run" >&2
    exit 1
  fi
  echo "[setup_bash] installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # Refresh package lists only when they are absent or older than a day.
  if [ -z "$(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' -mtime -1 2>/dev/null | head -1)" ]; then
    apt-get update -qq
  fi
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if root=$("$PY" -m stateflow.envs.bash --print-root 2>/dev/null); then
  echo "[setup_bash] base root cached: $root"
else
  echo "[setup_bash] building the sandbox base root with mmdebstrap (once; ~1-2 min)"
  start=$(date +%s)
  root=$("$PY" -m stateflow.envs.bash --build-root)
  echo "[setup_bash] base root built in $(( $(date +%s) - start )) s: $root"
fi

"$PY" - <<'EOF'
from stateflow.envs.bash.rootfs import locate_base_root
from stateflow.envs.bash.sandbox import Sandbox

with Sandbox([locate_base_root().path]) as box:
    result = box.run(["/bin/bash", "-c", "echo sandbox-ok"])
if result.output.strip() != b"sandbox-ok":
    raise SystemExit(f"[setup_bash] smoke test failed: {result}")
print("[setup_bash] smoke test: a command ran in the sandbox")
EOF
