//! Pure, deterministic rendering: a `ValidCluster` (plus per-node facts) becomes every file each node
//! needs — kubeadm, kind, kube-vip, audit, authentication, runtime, sysctl/modules and CNI files — and
//! the list of images the cluster pulls. Same input, byte-identical output; no I/O.
//!
//! Entry points: [`render`] (files per node and for the cluster) and [`images`] (every image the cluster
//! pulls, with its mirror reference). Both read the same tables ([`images::KubeadmImages`] from spec, the CNI pins
//! in [`cni::versions`]), so the kubeadm config and the image list cannot drift apart.
//!
//! Secrets are never rendered: kubeadm join tokens, discovery CA hashes and certificate keys appear as
//! the placeholders in [`placeholders`], which the phases substitute on the node at run time; registry
//! credentials appear only as file paths.

pub mod addons;
pub mod apiserver;
pub mod cni;
mod ctx;
pub(crate) mod facts;
pub mod host;
pub mod images;
pub mod kind;
pub mod kubeadm;
pub(crate) mod kubelet;
pub(crate) mod kubevip;
pub mod lb_pool;
pub(crate) mod output;
pub mod placeholders;
pub mod proxy;
pub(crate) mod runtime;
mod templates;
mod yaml;

pub use facts::{CgroupVersion, Facts, NodeFacts};
pub use images::{images, ClusterImage};
pub use output::{Purpose, RenderError, Rendered, RenderedFile};

use clusterctl_spec::{KubeadmApi, ValidCluster};

/// Renders every file of `cluster`: per node (keyed by node name, every node present even when it gets
/// no file) and cluster-wide (add-on manifests and values applied once, the kind config).
///
/// Per-node paths are absolute paths on the node; cluster-wide paths are relative
/// (e.g. `cni/calico-installation.yaml`, `kind-config.yaml`). Within each list files are sorted by path.
/// Errors: [`RenderError`] for a combination validation lets through but render cannot express (e.g. a
/// CNI version without a pinned image table) or a serialization failure.
pub fn render(cluster: &ValidCluster, facts: &Facts) -> Result<Rendered, RenderError> {
    render_with_api(cluster, facts, cluster.kubeadm_api())
}

/// Like [`render`] but with the kubeadm config API forced. The supported version table starts at 1.31
/// (v1beta4 only), so this is how the v1beta3 shapes stay tested; not for production use.
#[doc(hidden)]
pub fn render_with_api(
    cluster: &ValidCluster,
    facts: &Facts,
    api: KubeadmApi,
) -> Result<Rendered, RenderError> {
    let cx = ctx::Ctx::new(cluster, facts, api)?;
    let mut out = Rendered::default();
    for node in cluster.nodes() {
        let mut files = Vec::new();
        host::node_files(&cx, node, &mut files)?;
        runtime::node_files(&cx, node, &mut files)?;
        proxy::node_files(&cx, &mut files);
        kubeadm::node_files(&cx, node, &mut files)?;
        if node.is_control_plane() {
            apiserver::node_files(&cx, node, &mut files)?;
            kubevip::node_files(&cx, node, &mut files)?;
        }
        cni::node_files(&cx, node, &mut files)?;
        files.sort_by(|a, b| a.path.cmp(&b.path));
        out.per_node.insert(node.name.clone(), files);
    }
    let mut cluster_files = Vec::new();
    cni::cluster_files(&cx, &mut cluster_files)?;
    kind::cluster_files(&cx, &mut cluster_files)?;
    cluster_files.sort_by(|a, b| a.path.cmp(&b.path));
    out.cluster = cluster_files;
    Ok(out)
}
