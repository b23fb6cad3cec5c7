//! Container runtime files: containerd ([`containerd`]) or CRI-O ([`crio`]), each with the cgroup
//! driver, this version's pause image (from the mirror when there is one) and the registry mirror with
//! its CA.

pub mod containerd;
pub mod crio;

use crate::ctx::Ctx;
use crate::images;
use crate::output::{RenderError, RenderedFile};
use clusterctl_spec::image::ImageRef;
use clusterctl_spec::model::RuntimeKind;
use clusterctl_spec::ValidNode;
use std::collections::BTreeSet;

/// Registries mirrored even when no listed image comes from them (workloads pull from these).
pub const WELL_KNOWN_REGISTRIES: &[&str] = &["docker.io", "ghcr.io", "quay.io", "registry.k8s.io"];

/// Every source registry host to route through the mirror: the well-known ones plus the hosts of every
/// image in [`images::images`], sorted; never the mirror's own host.
pub(crate) fn source_registries(cx: &Ctx) -> Vec<String> {
    let mut set: BTreeSet<String> = WELL_KNOWN_REGISTRIES
        .iter()
        .map(|s| s.to_string())
        .collect();
    for i in images::images(cx.c) {
        if let Ok(r) = ImageRef::parse(&i.source) {
            set.insert(r.registry);
        }
    }
    if let Some(m) = cx.c.mirror() {
        set.remove(&m.host);
    }
    set.into_iter().collect()
}

pub(crate) fn node_files(
    cx: &Ctx,
    node: &ValidNode,
    out: &mut Vec<RenderedFile>,
) -> Result<(), RenderError> {
    match cx.c.spec().runtime.kind {
        RuntimeKind::Containerd => containerd::node_files(cx, node, out),
        RuntimeKind::Crio => crio::node_files(cx, out),
    }
}
