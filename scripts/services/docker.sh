#!/usr/bin/env bash
# Starts the Docker engine for the test bed (node containers) when it is not answering, and raises the
# inotify limits that many systemd node containers need (as kind documents). Idempotent: returns at once
# when `docker info` already answers. Installs nothing: docker.io comes from scripts/packages/exec.list.
set -euo pipefail

log() { printf '[docker.sh %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

# Many systemd nodes at once exhaust the default inotify limits (nodes exit at start otherwise).
sysctl -q -w fs.inotify.max_user_instances=8192 || log "warning: cannot raise fs.inotify.max_user_instances"
sysctl -q -w fs.inotify.max_user_watches=524288 || log "warning: cannot raise fs.inotify.max_user_watches"

if docker info >/dev/null 2>&1; then
  log "docker engine already answering"
  exit 0
fi

if ! command -v dockerd >/dev/null 2>&1; then
  log "dockerd not installed (package docker.io, scripts/packages/exec.list)"
  exit 1
fi

logfile=/var/log/clusterctl-dockerd.log
if ! pgrep -x dockerd >/dev/null 2>&1; then
  log "starting dockerd (log: $logfile)"
  # containerd is started by dockerd itself when no system containerd socket answers.
  # setsid: its own session and process group, so the engine outlives the shell (and job) that started it.
  setsid -f dockerd >>"$logfile" 2>&1 </dev/null
fi

for _ in $(seq 1 120); do
  if docker info >/dev/null 2>&1; then
    log "docker engine answering: $(docker version --format '{{.Server.Version}} (API {{.Server.APIVersion}})' 2>/dev/null || echo '?')"
    exit 0
  fi
  sleep 0.5
done
log "docker engine did not answer within 60 s; last log lines:"
tail -n 20 "$logfile" >&2 || true
exit 1
