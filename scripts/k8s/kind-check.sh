#!/usr/bin/env bash
# Test bed only (never shipped): builds scripts/k8s/kind-check.go, a small program of ours that loads a
# kind Cluster config with kind's own loader and validation and generates, per node, the kubeadm config
# kind would write with the config's kubeadmConfigPatches applied (see the .go file). Prints its path.
#
#   scripts/k8s/kind-check.sh            (kind version: $KIND_VERSION, default below)
#
# kind's loader is internal to its module (sigs.k8s.io/kind/pkg/internal/...), so the program is built as
# a package placed inside a temporary copy of the kind module, downloaded from the Go module proxy into
# the test-bed Go cache; nothing of kind is kept in the repository. The binary is cached by kind version
# and by the sha256 of kind-check.go:
#   $CACHE/bin/kind-check/<kind version>-<sha256[0:12]>/kind-check
# A second run finds it and runs no go command.
set -euo pipefail
CACHE=${CLUSTERCTL_TESTBED_CACHE:-/var/cache/clusterctl-testbed}
# The kind release clusterctl's kind config targets (render/src/kind.rs KIND_VERSION): the newest the
# module proxy serves; from v0.32.0 kind generates kubeadm v1beta4 for Kubernetes >= 1.36, v1beta3 below.
KIND_VERSION=${KIND_VERSION:-v0.33.0}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src="$here/kind-check.go"
log() { printf '[k8s/kind-check %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

key="$KIND_VERSION-$(sha256sum "$src" | cut -c1-12)"
dest="$CACHE/bin/kind-check/$key"
if [ -x "$dest/kind-check" ]; then echo "$dest/kind-check"; exit 0; fi

command -v go >/dev/null || { log "error: go not found"; exit 1; }
export GOMODCACHE="$CACHE/go/mod" GOCACHE="$CACHE/go/build"
export GOPROXY=https://proxy.golang.org GOTOOLCHAIN=local GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0
mkdir -p "$CACHE/lock" "$dest"
exec {fd}>"$CACHE/lock/kind-check.lock"
flock "$fd"
if [ -x "$dest/kind-check" ]; then echo "$dest/kind-check"; exit 0; fi

dir=$(go mod download -json "sigs.k8s.io/kind@$KIND_VERSION" | python3 -c '
import json,sys
d=json.load(sys.stdin)
if d.get("Error"): sys.exit("go mod download sigs.k8s.io/kind: %s" % d["Error"])
print(d["Dir"])')
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r "$dir" "$tmp/kind"
chmod -R u+w "$tmp/kind"
mkdir -p "$tmp/kind/pkg/cluster/clusterctlcheck"
cp "$src" "$tmp/kind/pkg/cluster/clusterctlcheck/main.go"
t0=$SECONDS
log "building kind-check against sigs.k8s.io/kind@$KIND_VERSION"
( cd "$tmp/kind" && go build -trimpath -ldflags "-s -w" -o "$dest/.kind-check.tmp" ./pkg/cluster/clusterctlcheck )
mv -f "$dest/.kind-check.tmp" "$dest/kind-check"
printf '%s %s %s %ss nproc=%s\n' "$(date -u +%FT%TZ)" kind-check "$key" "$((SECONDS - t0))" "$(nproc)" >>"$CACHE/times.log"
log "built kind-check $key in $((SECONDS - t0))s"
echo "$dest/kind-check"
