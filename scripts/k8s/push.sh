#!/usr/bin/env bash
# Test bed only: copies every image that images.sh made for VERSION into a registry (a loopback
# `docker-registry` serving plain HTTP), under its upstream path without the registry host:
#
#   scripts/k8s/push.sh VERSION REGISTRY_HOST:PORT
#
#   registry.k8s.io/kube-apiserver:v1.34.4     -> HOST:PORT/kube-apiserver:v1.34.4
#   registry.k8s.io/coredns/coredns:v1.12.1    -> HOST:PORT/coredns/coredns:v1.12.1
#   ghcr.io/kube-vip/kube-vip:v1.0.0           -> HOST:PORT/kube-vip/kube-vip:v1.0.0
#   clusterctl.test/busybox:1                  -> HOST:PORT/busybox:1
# Needs skopeo (Debian). Builds the images first when they are missing (images.sh is a no-op when cached).
set -euo pipefail
CACHE=${CLUSTERCTL_TESTBED_CACHE:-/var/cache/clusterctl-testbed}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ $# -eq 2 ] || { echo "usage: $0 VERSION REGISTRY_HOST:PORT" >&2; exit 2; }
VERSION=$1; REG=$2
command -v skopeo >/dev/null || { echo "skopeo missing (apt-get install -y skopeo)" >&2; exit 1; }

list="$CACHE/images/$VERSION/images.txt"
[ -f "$list" ] || "$here/images.sh" "$VERSION" >/dev/null
while read -r ref dir _archive; do
  path=${ref#*/}                       # drop the registry host
  dest="docker://$REG/$path"
  printf '[k8s/push] %s -> %s\n' "$ref" "$REG/$path" >&2
  skopeo copy --quiet --dest-tls-verify=false "oci:$dir" "$dest" </dev/null
  printf '%s %s\n' "$ref" "$REG/$path"
done <"$list"
