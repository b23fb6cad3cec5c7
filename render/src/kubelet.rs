//! The kubelet's `KubeletConfiguration` (`kubelet.config.k8s.io/v1beta1`, kubernetes/kubernetes
//! staging/src/k8s.io/kubelet/config/v1beta1/types.go) and kube-proxy's `KubeProxyConfiguration`
//! (`kubeproxy.config.k8s.io/v1alpha1`, staging/src/k8s.io/kube-proxy/config/v1alpha1/types.go), both
//! shipped inside the kubeadm init config. Durations are Go duration strings; quantities strings.

use crate::ctx::Ctx;
use crate::facts::CgroupVersion;
use crate::output::RenderError;
use crate::yaml;
use clusterctl_spec::model::{CgroupDriver, KubeProxyMode, NodeEnvironment};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct KubeletConfiguration {
    api_version: &'static str,
    kind: &'static str,
    cgroup_driver: &'static str,
    container_runtime_endpoint: &'static str,
    cluster_domain: String,
    #[serde(rename = "clusterDNS")]
    cluster_dns: Vec<String>,
    rotate_certificates: bool,
    static_pod_path: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_pods: Option<u32>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    system_reserved: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    kube_reserved: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    eviction_hard: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    shutdown_grace_period: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    shutdown_grace_period_critical_pods: Option<String>,
    #[serde(rename = "imageMinimumGCAge", skip_serializing_if = "Option::is_none")]
    image_minimum_gc_age: Option<String>,
    #[serde(rename = "imageMaximumGCAge", skip_serializing_if = "Option::is_none")]
    image_maximum_gc_age: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    fail_cgroup_v1: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resolv_conf: Option<String>,
}

/// `failCgroupV1`: the file's value; else `false` when Kubernetes ≥ 1.35 and some node's facts say
/// cgroup v1 (so the kubelet starts there); else unset.
pub(crate) fn fail_cgroup_v1(cx: &Ctx) -> Option<bool> {
    if let Some(v) = cx.c.spec().kubelet.fail_cgroup_v1 {
        return Some(v);
    }
    let any_v1 =
        cx.c.nodes()
            .iter()
            .any(|n| cx.facts.node(&n.name).cgroup == CgroupVersion::V1);
    (cx.c.kubernetes_version().minor >= 35 && any_v1).then_some(false)
}

/// The KubeletConfiguration document.
pub(crate) fn kubelet_configuration(cx: &Ctx) -> Result<String, RenderError> {
    let spec = cx.c.spec();
    let k = &spec.kubelet;
    let cfg = KubeletConfiguration {
        api_version: "kubelet.config.k8s.io/v1beta1",
        kind: "KubeletConfiguration",
        cgroup_driver: match spec.runtime.cgroup_driver {
            CgroupDriver::Systemd => "systemd",
            CgroupDriver::Cgroupfs => "cgroupfs",
        },
        container_runtime_endpoint: cx.cri_socket,
        cluster_domain: spec.networking.dns_domain.clone(),
        cluster_dns: vec![cx.c.dns_service_ip().to_string()],
        rotate_certificates: true,
        static_pod_path: "/etc/kubernetes/manifests",
        max_pods: k.max_pods,
        system_reserved: k.system_reserved.clone(),
        kube_reserved: k.kube_reserved.clone(),
        eviction_hard: k.eviction_hard.clone(),
        shutdown_grace_period: k.shutdown_grace_period.clone(),
        shutdown_grace_period_critical_pods: k.shutdown_grace_period_critical_pods.clone(),
        image_minimum_gc_age: k.image_minimum_gc_age.clone(),
        image_maximum_gc_age: k.image_maximum_gc_age.clone(),
        fail_cgroup_v1: fail_cgroup_v1(cx),
        resolv_conf: k.resolv_conf.clone(),
    };
    yaml::doc("KubeletConfiguration", &cfg)
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct KubeProxyConfiguration {
    api_version: &'static str,
    kind: &'static str,
    mode: &'static str,
    #[serde(rename = "clusterCIDR")]
    cluster_cidr: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    conntrack: Option<Conntrack>,
}

/// `KubeProxyConfigurationConntrack`: only what clusterctl sets.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Conntrack {
    /// 0 leaves `nf_conntrack_max` alone (it is host-wide and read-only in an unprivileged container).
    max_per_core: i32,
}

/// The KubeProxyConfiguration document (only when kube-proxy is enabled). With `nodeEnvironment:
/// unprivileged-container`, `conntrack.maxPerCore: 0`: kube-proxy otherwise fails to start with "open
/// /proc/sys/net/netfilter/nf_conntrack_max: permission denied".
pub(crate) fn kube_proxy_configuration(cx: &Ctx) -> Result<String, RenderError> {
    let mode = match cx.c.spec().networking.kube_proxy {
        KubeProxyMode::Ipvs => "ipvs",
        KubeProxyMode::Nftables => "nftables",
        KubeProxyMode::Iptables | KubeProxyMode::Disabled => "iptables",
    };
    let cfg = KubeProxyConfiguration {
        api_version: "kubeproxy.config.k8s.io/v1alpha1",
        kind: "KubeProxyConfiguration",
        mode,
        cluster_cidr: cx.c.pod_subnet().to_string(),
        conntrack: (cx.c.spec().node_environment == NodeEnvironment::UnprivilegedContainer)
            .then_some(Conntrack { max_per_core: 0 }),
    };
    yaml::doc("KubeProxyConfiguration", &cfg)
}
