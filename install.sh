#!/usr/bin/env bash
# Builds clusterctl (release) and installs it. Says what it did.
#   PREFIX=/usr/local ./install.sh        # binary to $PREFIX/bin/clusterctl
#   ./install.sh --cni                    # also install it as the CNI plugin /opt/cni/bin/clusterctl-cni
#   CARGO_TARGET_DIR=/tmp/t ./install.sh  # builds there (as cargo does) and installs from there
set -euo pipefail
cd "$(dirname "$0")"
PREFIX="${PREFIX:-/usr/local}"
want_cni=0
for a in "$@"; do
  case "$a" in
    --cni) want_cni=1 ;;
    -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown option $a" >&2; exit 2 ;;
  esac
done
command -v cargo >/dev/null || { echo "install.sh: cargo (stable Rust) is required" >&2; exit 1; }
echo "building clusterctl (release)…"
cargo build --release --locked -p clusterctl
# cargo builds into $CARGO_TARGET_DIR when it is set (relative paths are taken from here, as cargo does).
built="${CARGO_TARGET_DIR:-target}/release/clusterctl"
install -d "$PREFIX/bin"
install -m 0755 "$built" "$PREFIX/bin/clusterctl"
echo "installed $PREFIX/bin/clusterctl ($(stat -c %s "$PREFIX/bin/clusterctl") bytes)"
if [ "$want_cni" = 1 ]; then
  install -d /opt/cni/bin
  install -m 0755 "$built" /opt/cni/bin/clusterctl-cni
  echo "installed /opt/cni/bin/clusterctl-cni (the same binary, run as the CNI plugin)"
fi
"$PREFIX/bin/clusterctl" --version
