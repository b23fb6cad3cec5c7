#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what the tests need (Debian packages listed in
# scripts/packages/*.list), starts the services they need (scripts/services/*.sh, e.g. dockerd), then
# builds and runs every test and every benchmark in its short mode. Run as root (CI does).
set -euo pipefail
cd "$(dirname "$0")/.."
export CI="${CI:-}"

log() { printf '[test-all %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

if [ "$(id -u)" != 0 ]; then
  echo "scripts/test-all.sh must run as root (network namespaces, dockerd, node containers)" >&2
  exit 1
fi

# 1. Debian packages.
pkgs=$(cat scripts/packages/*.list 2>/dev/null | sed 's/#.*//' | tr -s ' \n' '\n' | sort -u | tr '\n' ' ')
if [ -n "${pkgs// /}" ]; then
  missing=""
  for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
  if [ -n "$missing" ]; then
    log "installing Debian packages:$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
  fi
fi

# 2. Services (each script is idempotent and returns once its service answers).
for s in scripts/services/*.sh; do
  [ -e "$s" ] || continue
  log "service: $s"
  bash "$s"
done

# 3. Build once, then run everything.
log "running tests"
cargo test --workspace --locked --no-fail-fast -- --test-threads="${TEST_THREADS:-4}"
log "running benchmarks in short mode"
BENCH_SHORT=1 cargo test --workspace --benches --locked --no-fail-fast
log "done"
