#!/usr/bin/env bash
# Test bed only: where scripts/k8s/build.sh put the programs for a Kubernetes version. Builds nothing.
#
#   scripts/k8s/paths.sh VERSION            one line per program: NAME PATH (only programs that exist)
#   scripts/k8s/paths.sh VERSION PROGRAM    the path alone; exit 1 when it is not built
#   scripts/k8s/paths.sh VERSION --env      the component versions chosen for VERSION (KEY=VALUE lines)
#
# e2e.test, ginkgo and agnhost are the conformance suite (build.sh's `conformance` group); ginkgo is keyed by the
# version k8s.io/kubernetes@VERSION's go.mod requires. cni-plugins is a directory (a CNI bin dir); flannel-manifest and cilium-chart are upstream files. A program recorded as unbuildable (kube-vip) has a FAILED
# file beside where its binary would be, and is left out.
set -euo pipefail
CACHE=${CLUSTERCTL_TESTBED_CACHE:-/var/cache/clusterctl-testbed}
[ $# -ge 1 ] || { echo "usage: $0 VERSION [PROGRAM|--env]" >&2; exit 2; }
VERSION=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=cni-versions.sh
. "$here/cni-versions.sh"
envfile="$CACHE/versions/$VERSION.env"

if [ "${2:-}" = --env ]; then
  [ -f "$envfile" ] || { echo "no $envfile: run scripts/k8s/build.sh $VERSION first" >&2; exit 1; }
  grep -v '^#' "$envfile"; exit 0
fi

ver_of() {
  case "$1" in
    kubeadm|kubelet|kube-apiserver|kube-controller-manager|kube-scheduler|kube-proxy|kubectl|e2e.test|agnhost) echo "$VERSION"; return ;;
    # build.sh's default (keyed by its own version, not VERSION's).
    kube-vip-cloud-provider) echo "${KUBE_VIP_CLOUD_PROVIDER_VERSION:-v0.0.12}"; return ;;
    local-path-provisioner) echo "${LOCAL_PATH_PROVISIONER_VERSION:-v0.0.30}"; return ;;
    kwok) echo "${KWOK_VERSION:-v0.8.0}"; return ;;
    kube-network-policies) echo "${KUBE_NETWORK_POLICIES_VERSION:-v0.8.0}"; return ;;
    ginkgo)
      local mod="$CACHE/go/mod/cache/download/k8s.io/kubernetes/@v/$VERSION.mod"
      [ -f "$mod" ] && awk '$1=="github.com/onsi/ginkgo/v2" {print $2; exit} $1=="require" && $2=="github.com/onsi/ginkgo/v2" {print $3; exit}' "$mod"
      return ;;
  esac
  [ -f "$envfile" ] || return 0
  (
    # shellcheck disable=SC1090
    . "$envfile"
    case "$1" in
      etcd|etcdctl|etcdutl) echo "$ETCD_VERSION" ;; coredns) echo "$COREDNS_VERSION" ;;
      crictl) echo "$CRICTL_VERSION" ;; kube-vip) echo "$KUBE_VIP_VERSION" ;;
      containerd|containerd-shim-runc-v2|ctr) echo "$CONTAINERD_VERSION" ;;
      runc) echo "$RUNC_VERSION" ;; cni-plugins) echo "$CNI_PLUGINS_VERSION" ;;
    esac
  )
}
path_of() {
  case "$1" in
    helm|flanneld|flannel-cni) local f; f=$(cni_path "$1"); [ -x "$f" ] && echo "$f"; return ;;
    flannel-manifest|cilium-chart|kindnet-manifest) local f; f=$(cni_path "$1"); [ -f "$f" ] && echo "$f"; return ;;
  esac
  local v; v=$(ver_of "$1"); [ -n "$v" ] || return 1
  if [ "$1" = cni-plugins ]; then
    [ -x "$CACHE/bin/cni-plugins/$v/bridge" ] && echo "$CACHE/bin/cni-plugins/$v"
  else
    [ -x "$CACHE/bin/$1/$v/$1" ] && echo "$CACHE/bin/$1/$v/$1"
  fi
}

if [ $# -ge 2 ]; then path_of "$2"; exit $?; fi
for p in kubeadm kubelet kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubectl \
         etcd etcdctl etcdutl coredns crictl kube-vip kube-vip-cloud-provider containerd containerd-shim-runc-v2 ctr runc \
         cni-plugins helm flanneld flannel-cni flannel-manifest cilium-chart kindnet-manifest e2e.test ginkgo agnhost \
         local-path-provisioner; do
  if f=$(path_of "$p"); then printf '%s %s\n' "$p" "$f"; fi
done
