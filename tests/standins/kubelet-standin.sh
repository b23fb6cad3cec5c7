#!/bin/sh
# STAND-IN for the kubelet (clusterctl test tree only; see README.md). Not Kubernetes.
LOG=/var/log/clusterctl-standin
mkdir -p "$LOG"
case "${1:-}" in
  --version) echo "Kubernetes v1.34.1-standin"; exit 0 ;;
esac
echo "kubelet start $*" >> "$LOG/calls.log"
exec sleep infinity
