//! Every image the cluster pulls, with the reference nodes actually pull it by. The kubeadm part is
//! spec's one kubeadm image list ([`KubeadmImages`], kubeadm's own naming rules), the same values the
//! kubeadm config is rendered from, so the list and the config cannot drift.

use crate::cni::versions;
use clusterctl_spec::image::ImageRef;
pub use clusterctl_spec::kubeadm_images::{KubeadmImages, DEFAULT_REGISTRY};
use clusterctl_spec::model::KubeProxyMode;
use clusterctl_spec::ValidCluster;
use std::collections::BTreeSet;

/// One image the cluster pulls.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ClusterImage {
    /// What uses it, e.g. `kube-apiserver`, `coredns`, `kube-vip`, `cni:calico/node`, `preload`.
    pub component: String,
    /// The upstream reference, e.g. `registry.k8s.io/coredns/coredns:v1.12.1`.
    pub source: String,
    /// The reference under the registry mirror (e.g. `harbor.example.com/library/coredns/coredns:v1.12.1`),
    /// `None` without a mirror.
    pub mirror: Option<String>,
    /// True when only control-plane nodes run it (see [`control_plane_only`]); false when every node
    /// may (kube-proxy, CoreDNS, pause, the CNI's images, preloads).
    pub control_plane_only: bool,
}

impl ClusterImage {
    /// The reference nodes pull: the mirror reference when there is one, else the source.
    pub fn pull_ref(&self) -> &str {
        self.mirror.as_deref().unwrap_or(&self.source)
    }
}

/// The components whose images only control-plane nodes run: kubeadm's control-plane static pods
/// (`kube-apiserver`, `kube-controller-manager`, `kube-scheduler`, `etcd`, kubeadm
/// cmd/kubeadm/app/phases/controlplane and etcd) and the kube-vip static pod, which `clusterctl` places
/// on control planes only. Everything else may run on any node: kube-proxy and the CNI's agents are
/// DaemonSets, CoreDNS and the CNI's operators are Deployments the scheduler may place on a worker,
/// pause is every pod's sandbox, preloads are for any workload.
pub const CONTROL_PLANE_ONLY: [&str; 5] = [
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "etcd",
    "kube-vip",
];

/// Whether `component` (an [`ClusterImage::component`], e.g. `etcd`) runs on control-plane nodes only
/// (one of [`CONTROL_PLANE_ONLY`]).
pub fn control_plane_only(component: &str) -> bool {
    CONTROL_PLANE_ONLY.contains(&component)
}

/// Every image `cluster` pulls, in a stable order: kubeadm's (apiserver, controller-manager, scheduler,
/// kube-proxy unless disabled, CoreDNS, pause, etcd), kube-vip when a VIP is set, kube-vip-cloud-provider
/// when the VIP has a `loadBalancerPool`, the CNI's pinned images
/// (none for `builtin`, `kindnet` and `none`), local-path-provisioner's when it is installed
/// ([`ValidCluster::local_path`]), then `images.preload`. Without a mirror every `mirror` is
/// `None`. Each says whether only control planes need it ([`CONTROL_PLANE_ONLY`]); a worker needs the
/// others. An unknown CNI version yields no CNI images here (render reports it as an error).
pub fn images(cluster: &ValidCluster) -> Vec<ClusterImage> {
    let k = KubeadmImages::new(cluster);
    let has_mirror = cluster.mirror().is_some();
    let kube_proxy = cluster.spec().networking.kube_proxy != KubeProxyMode::Disabled;
    let mut out: Vec<ClusterImage> = k
        .list(kube_proxy)
        .into_iter()
        .map(|(c, source, pull)| ClusterImage {
            component: c.to_string(),
            source,
            mirror: has_mirror.then_some(pull),
            control_plane_only: control_plane_only(c),
        })
        .collect();
    let mut other = |component: String, source: String| {
        let mirror = has_mirror.then(|| cluster.image(&source));
        out.push(ClusterImage {
            control_plane_only: control_plane_only(&component),
            component,
            source,
            mirror,
        });
    };
    if cluster.vip().is_some() {
        other("kube-vip".to_string(), cluster.kube_vip_image().to_string());
    }
    if let Some(i) = cluster.kube_vip_cloud_provider_image() {
        other("kube-vip-cloud-provider".to_string(), i.to_string());
    }
    if let Ok(Some(pins)) = versions::pins(cluster) {
        for (name, source) in pins.images() {
            other(format!("cni:{name}"), source);
        }
    }
    if cluster.local_path() {
        other(
            "local-path-provisioner".to_string(),
            clusterctl_spec::lab::LOCAL_PATH_IMAGE.to_string(),
        );
    }
    for p in &cluster.spec().images.preload {
        other("preload".to_string(), p.clone());
    }
    out
}

/// Registries mirrored even when no listed image comes from them (workloads pull from these).
pub(crate) const WELL_KNOWN_REGISTRIES: &[&str] =
    &["docker.io", "ghcr.io", "quay.io", "registry.k8s.io"];

/// Every source registry host to route through the mirror: the well-known ones plus the hosts of every
/// image in [`images`], sorted; never the mirror's own host.
pub(crate) fn source_registries(cluster: &ValidCluster) -> Vec<String> {
    let mut set: BTreeSet<String> = WELL_KNOWN_REGISTRIES
        .iter()
        .map(|s| s.to_string())
        .collect();
    for i in images(cluster) {
        if let Ok(r) = ImageRef::parse(&i.source) {
            set.insert(r.registry);
        }
    }
    if let Some(m) = cluster.mirror() {
        set.remove(&m.host);
    }
    set.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(name: &str) -> ValidCluster {
        let loaded = clusterctl_spec::from_profile(name)
            .unwrap_or_else(|d| panic!("profile {name}: {}", d.summary()));
        clusterctl_spec::validate(&loaded)
            .unwrap_or_else(|d| panic!("profile {name}: {}", d.summary()))
            .cluster
    }

    #[test]
    fn control_plane_only_marks_static_pod_images() {
        // ha-airgap: kube-vip VIP, Cilium, kube-proxy disabled.
        let list = images(&profile("ha-airgap"));
        let cp_only: Vec<&str> = list
            .iter()
            .filter(|i| i.control_plane_only)
            .map(|i| i.component.as_str())
            .collect();
        assert_eq!(
            cp_only,
            [
                "kube-apiserver",
                "kube-controller-manager",
                "kube-scheduler",
                "etcd",
                "kube-vip"
            ]
        );
        let everywhere: Vec<&str> = list
            .iter()
            .filter(|i| !i.control_plane_only)
            .map(|i| i.component.as_str())
            .collect();
        assert!(everywhere.contains(&"coredns"), "{everywhere:?}");
        assert!(everywhere.contains(&"pause"), "{everywhere:?}");
        assert!(
            everywhere.iter().any(|c| c.starts_with("cni:")),
            "{everywhere:?}"
        );
        assert!(!everywhere.contains(&"kube-proxy"), "kube-proxy disabled");
        for c in CONTROL_PLANE_ONLY {
            assert!(control_plane_only(c));
        }
        for c in ["kube-proxy", "coredns", "pause", "preload", "cni:cilium"] {
            assert!(!control_plane_only(c), "{c}");
        }
    }
}
