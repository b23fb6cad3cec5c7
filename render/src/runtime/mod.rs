//! Container runtime files: containerd ([`containerd`]) or CRI-O ([`crio`]), each with the cgroup
//! driver, this version's pause image (from the mirror when there is one) and the registry mirror with
//! its CA.

pub(crate) mod containerd;
pub(crate) mod crio;

use crate::ctx::Ctx;
use crate::output::{RenderError, RenderedFile};
use clusterctl_spec::model::RuntimeKind;
use clusterctl_spec::ValidNode;

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
