//! From a validated cluster file to what a bundle carries: the image list (taken from
//! `clusterctl_render::images`, the same plan `up` uses, plus kubeadm's images of every
//! `airgap.extraVersions` entry), the platforms, and the packages of `airgap.packages`.

use crate::error::{AirgapError, Result};
use crate::oci::Platform;
use crate::pull::ImageRequest;
use crate::reference::ImageRef;
use clusterctl_render::images::KubeadmImages;
use clusterctl_spec::model::KubeProxyMode;
use clusterctl_spec::ValidCluster;
use serde::Serialize;

/// One line of `clusterctl airgap images`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ListedImage {
    /// What uses it (`kube-apiserver`, `coredns`, `kube-vip`, `preload`, `upgrade v1.35.0: etcd`…).
    pub component: String,
    /// Upstream reference.
    pub source: String,
    /// Reference nodes pull (mirror reference, or the source without a mirror).
    pub pull: String,
}

/// Every image the cluster needs, in render order, then the extra versions' kubeadm images
/// (duplicates by source dropped).
pub fn list_images(cluster: &ValidCluster) -> Vec<ListedImage> {
    let mut out: Vec<ListedImage> = clusterctl_render::images(cluster)
        .into_iter()
        .map(|i| ListedImage {
            pull: i.pull_ref().to_string(),
            component: i.component,
            source: i.source,
        })
        .collect();
    let base = KubeadmImages::new(cluster);
    let kube_proxy = cluster.spec().networking.kube_proxy != KubeProxyMode::Disabled;
    for v in cluster.extra_versions() {
        let k = KubeadmImages {
            version_tag: v.tag(),
            etcd_tag: v.etcd.to_string(),
            dns_tag: v.coredns.to_string(),
            pause_tag: v.pause.to_string(),
            ..base.clone()
        };
        for (component, source, pull) in k.list(kube_proxy) {
            out.push(ListedImage {
                component: format!("{} {component}", v.tag()),
                source,
                pull,
            });
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    out.retain(|i| seen.insert(i.source.clone()));
    out
}

/// The pull requests for `images`. Errors: a reference that does not parse.
pub fn requests(images: &[ListedImage]) -> Result<Vec<ImageRequest>> {
    images
        .iter()
        .map(|i| {
            Ok(ImageRequest {
                source: ImageRef::parse(&i.source)?,
                mirror: ImageRef::parse(&i.pull)?,
            })
        })
        .collect()
}

/// `airgap.platforms` parsed (default `linux/amd64`). Errors: an entry that is not `os/arch[/variant]`.
pub fn platforms(cluster: &ValidCluster) -> Result<Vec<Platform>> {
    let list = cluster
        .spec()
        .airgap
        .as_ref()
        .map(|a| a.platforms.clone())
        .unwrap_or_else(clusterctl_spec::model::default_platforms);
    list.iter()
        .map(|p| {
            Platform::parse(p).ok_or_else(|| AirgapError::Manifest {
                what: "airgap.platforms".into(),
                reason: format!("{p:?} is not os/arch[/variant]"),
            })
        })
        .collect()
}
