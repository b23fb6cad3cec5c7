//! `addons`: the lab's cluster objects (issue 27) — local-path-provisioner as the default StorageClass
//! and the KEP-1755 `local-registry-hosting` ConfigMap of the local registry — rendered by
//! `clusterctl_render::addons` and applied through the Kubernetes API (server-side apply, field manager
//! `clusterctl`) with the CNI installs' [`apply_steps`]: a dry run plans each object, a run reports each
//! as created, configured or unchanged and counts only the first two, so a second `up` changes nothing.

use super::cni_install::apply_steps;
use super::UpData;
use crate::ctx::NodeCtx;
use crate::error::PhaseError;
use clusterctl_spec::ValidNode;

/// Digest material: the objects, as applied.
pub(crate) fn inputs(data: &UpData, _: &ValidNode) -> String {
    data.spec
        .addons
        .iter()
        .map(|s| {
            format!(
                "{}: {}\n",
                s.what,
                serde_json::Value::from(s.objects.clone())
            )
        })
        .collect()
}

/// Applies [`super::UpSpec::addons`] on the first control plane's API.
pub(crate) fn run(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    let api = data.api.get(ctx)?;
    apply_steps(ctx, api.as_deref(), &data.spec.addons)
}
