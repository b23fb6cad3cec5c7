//! The `kube-vip-cloud-provider` phase of `up` (first control plane, after the joins), only when the VIP
//! has a `loadBalancerPool`: server-side applies the allocator of LoadBalancer Service addresses —
//! its RBAC, the `kubevip` ConfigMap with the file's pools and its Deployment
//! (`clusterctl_render::lb_pool`) — through the Kubernetes API, each object reported `created`,
//! `configured` or `unchanged` ([`super::cni_install::apply_steps`]). Recorded with the objects' digest,
//! so a changed pool or image applies again and an unchanged file skips it.

use super::UpData;
use crate::ctx::NodeCtx;
use crate::error::PhaseError;
use clusterctl_render::cni::install::{ApplyStep, Wait};
use clusterctl_spec::ValidNode;

/// Digest material: the objects as applied (a changed pool or image runs the phase again).
pub(crate) fn inputs(data: &UpData, _: &ValidNode) -> String {
    data.spec
        .lb_objects
        .iter()
        .map(|o| crate::util::sha256_hex(o.to_string().as_bytes()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The phase: one apply step of the allocator's objects.
pub(crate) fn run(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    if data.spec.lb_objects.is_empty() {
        return Ok(());
    }
    let step = ApplyStep {
        what: "kube-vip-cloud-provider (LoadBalancer addresses from loadBalancerPool)".to_string(),
        objects: data.spec.lb_objects.clone(),
        wait: Wait::Nothing,
    };
    let api = data.api.get(ctx)?;
    super::cni_install::apply_steps(ctx, api.as_deref(), &[step])
}
