#!/usr/bin/env bash
# Set-up of the optional Docker backends (idempotent; seconds when already done).
#
# 1. the engine: installs Debian's docker.io when dockerd is missing (root only), and starts
#    dockerd in the background when no engine answers (there is no systemd on these machines).
#    The PID of a dockerd started here is recorded in $STATEFLOW_DOCKERD_PIDFILE
#    (default /run/stateflow-dockerd.pid), its log is /var/log/stateflow-dockerd.log.
#    `scripts/setup_docker.sh --stop` stops that dockerd (and only that one).
# 2. the images, built locally (no registry is used, nothing is pulled): the project's Debian root
#    imported as a base image, a MariaDB server image with the SQL datasets loaded, and the
#    NL2Bash images for the demo and fs_1..fs_4 (python -m stateflow.envs.docker_images). Images are tagged
#    with a hash of their Dockerfile and inputs, so a warm run is a lookup.
#
# The Docker backends are optional: when the engine cannot run here (no root to install it, no
# cgroups, a nested container without privileges) this prints why and exits 0 unless
# STATEFLOW_REQUIRE_DOCKER=1; everything else works and the Docker tests skip with the reason.
# Set STATEFLOW_SKIP_DOCKER=1 to skip this component entirely.
set -euo pipefail
cd "$(dirname "$0")/.."

PIDFILE="${STATEFLOW_DOCKERD_PIDFILE:-/run/stateflow-dockerd.pid}"
LOG=/var/log/stateflow-dockerd.log

say() { echo "[setup_docker] $*"; }
unavailable() {
  say "Docker backends unavailable: $*"
  if [ "${STATEFLOW_REQUIRE_DOCKER:-0}" = "1" ]; then exit 1; fi
  say "(optional: the other backends work; Docker tests will skip with this reason)"
  exit 0
}

if [ "${1:-}" = "--stop" ]; then
  if [ -f "$PIDFILE" ]; then
    pid=$(cat "$PIDFILE")
    if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "dockerd" ]; then
      say "stopping dockerd $pid"
      kill "$pid"
      for _ in $(seq 100); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
    fi
    rm -f "$PIDFILE"
  else
    say "no dockerd started by this script ($PIDFILE absent)"
  fi
  exit 0
fi

if [ "${STATEFLOW_SKIP_DOCKER:-0}" = "1" ]; then
  say "skipped (STATEFLOW_SKIP_DOCKER=1)"
  exit 0
fi

PY=.venv/bin/python
[ -x "$PY" ] || PY=python3
start=$(date +%s.%N)

engine_up() { command -v docker >/dev/null 2>&1 && timeout 10 docker info >/dev/null 2>&1; }

if ! engine_up; then
  if [ "$(id -u)" -ne 0 ] && [ -S /var/run/docker.sock ]; then
    unavailable "a Docker engine runs but user $(id -un) cannot reach /var/run/docker.sock (join the docker group)"
  fi
  if ! command -v dockerd >/dev/null 2>&1; then
    [ "$(id -u)" -eq 0 ] || unavailable "no Docker engine and not root (install docker.io, or join the docker group of a running engine)"
    say "installing docker.io"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -qq docker.io >/dev/null 2>&1; then
      apt-get update -qq && apt-get install -y -qq docker.io >/dev/null || unavailable "apt-get install docker.io failed"
    fi
  fi
  [ "$(id -u)" -eq 0 ] || unavailable "dockerd is installed but not running, and starting it needs root"
  grep -q cgroup /proc/mounts || unavailable "no cgroup file system is mounted (dockerd needs cgroups)"
  say "starting dockerd (log: $LOG)"
  # setsid: the daemon must not die with this script's session or a Ctrl-C to the test run.
  # It must not keep this script's other open files either: a dockerd that inherited the fd of a
  # `flock LOCK scripts/demo.sh` held that lock for as long as it lived (seen: every later
  # `flock` waiter blocked). So the subshell closes every fd above 2 before it becomes dockerd.
  (
    for fd in /proc/self/fd/*; do
      n=${fd##*/}
      if [ "$n" -gt 2 ]; then eval "exec $n>&-" 2>/dev/null || true; fi
    done
    exec setsid dockerd >>"$LOG" 2>&1 < /dev/null
  ) &
  echo $! > "$PIDFILE"
  for _ in $(seq 150); do
    engine_up && break
    [ -d "/proc/$(cat "$PIDFILE")" ] || break
    sleep 0.2
  done
  if ! engine_up; then
    tail -n 15 "$LOG" >&2 || true
    rm -f "$PIDFILE"
    unavailable "dockerd did not start (see above; a nested container needs --privileged)"
  fi
  say "dockerd running, pid $(cat "$PIDFILE")"
fi

say "building images (cached by a hash of their inputs)"
"$PY" -m stateflow.envs.docker_images || unavailable "building the images failed (see above)"
say "done in $(awk "BEGIN { printf \"%.1f\", $(date +%s.%N) - $start }") s"
