#!/usr/bin/env bash
# Set-up for PostgresCheckpointer's tests: the PostgreSQL server binaries (Debian's `postgresql`).
# Idempotent and quick when initdb and postgres are already installed. Nothing is started here and
# no system cluster is used: the test session starts a private throwaway server in a temp dir
# (tests/core/checkpoint/pg_server.py), as the `postgres` system user when run as root.
set -euo pipefail

find_bindir() {
  # Debian keeps the server binaries out of PATH, per major version; take the newest.
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
  if [ -n "$dir" ] && [ -x "$dir/initdb" ] && [ -x "$dir/postgres" ]; then echo "$dir"; return 0; fi
  if command -v initdb >/dev/null 2>&1 && command -v postgres >/dev/null 2>&1; then
    dirname "$(command -v initdb)"; return 0
  fi
  return 1
}

if bindir=$(find_bindir); then
  echo "[setup_postgres] PostgreSQL present: $("$bindir/postgres" --version)"
  exit 0
fi

if command -v apt-get >/dev/null 2>&1; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
      echo "[setup_postgres] postgresql is missing and installing it needs root (apt-get install postgresql)." >&2
      echo "[setup_postgres] Alternative: set STATEFLOW_PG_BINDIR to a directory holding initdb and postgres." >&2
      exit 1
    fi
  fi
  echo "[setup_postgres] installing postgresql with apt (about 20 s)"
  # Debian's package creates a system cluster and would start it where systemd runs; the tests never use it.
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends postgresql >/dev/null
  bindir=$(find_bindir)
  echo "[setup_postgres] installed: $("$bindir/postgres" --version)"
  exit 0
fi

echo "[setup_postgres] initdb/postgres not found and apt-get is unavailable: install PostgreSQL (>= 12) with" >&2
echo "[setup_postgres] your package manager, or set STATEFLOW_PG_BINDIR to its bin directory." >&2
exit 1
