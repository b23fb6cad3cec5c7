# Test bed only: the versions of what the third-party CNI tests build or serve (sourced by build.sh and
# paths.sh; each overridable from the environment). `cni_path PROGRAM` prints where build.sh puts it.
HELM_VERSION=${HELM_VERSION:-v3.18.4}
FLANNEL_VERSION=${FLANNEL_VERSION:-v0.28.4}
FLANNEL_CNI_PLUGINS_VERSION=${FLANNEL_CNI_PLUGINS_VERSION:-v0.9.1}
CILIUM_CHART_VERSION=${CILIUM_CHART_VERSION:-v1.20.2}
# The kind release whose default CNI manifest (kindnet) the kindnet test applies: the one clusterctl's kind
# config targets (render/src/kind/mod.rs KIND_VERSION, the same default as scripts/k8s/kind-check.sh).
KIND_VERSION=${KIND_VERSION:-v0.33.0}

cni_path() {
  case "$1" in
    helm) echo "$CACHE/bin/helm/$HELM_VERSION/helm" ;;
    flanneld) echo "$CACHE/bin/flanneld/$FLANNEL_VERSION/flanneld" ;;
    flannel-cni) echo "$CACHE/bin/flannel-cni/$FLANNEL_CNI_PLUGINS_VERSION/flannel-cni" ;;
    flannel-manifest) echo "$CACHE/bin/flannel-manifest/$FLANNEL_VERSION/kube-flannel.yml" ;;
    cilium-chart) echo "$CACHE/bin/cilium-chart/$CILIUM_CHART_VERSION/cilium.tgz" ;;
    kindnet-manifest) echo "$CACHE/bin/kindnet-manifest/$KIND_VERSION/default-cni.yaml" ;;
  esac
}
