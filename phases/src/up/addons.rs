//! `addons`: the lab's cluster objects (issue 27) — local-path-provisioner as the default StorageClass
//! and the KEP-1755 `local-registry-hosting` ConfigMap of the local registry — rendered by
//! `clusterctl_render::addons` and applied through the Kubernetes API (server-side apply, field manager
//! `clusterctl`). A dry run plans one line per group of objects (naming them; the lab's default plan
//! stays short), a run reports each object as created, configured or unchanged and counts only the
//! first two, so a second `up` changes nothing.

use super::UpData;
use crate::ctx::{Change, NodeCtx, PlanKind};
use crate::error::PhaseError;
use clusterctl_render::cni::install::{self, ApplyStep};
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
    for step in &data.spec.addons {
        apply_group(ctx, api.as_deref(), step)?;
    }
    Ok(())
}

/// One group: a single planned change naming every object; applied object by object.
fn apply_group(
    ctx: &mut NodeCtx,
    api: Option<&dyn clusterctl_kubeapi::ClusterApi>,
    step: &ApplyStep,
) -> Result<(), PhaseError> {
    let names: Vec<String> = step.objects.iter().map(install::object_name).collect();
    let what = format!("server-side apply {}: {}", step.what, names.join(", "));
    // The perform reports and counts what the server did (nothing for an unchanged object).
    let apply = Change::new(PlanKind::Api, &what).reports_itself();
    ctx.change(apply, |ctx| {
        let Some(api) = api else {
            return Err(ctx.local_error(format!(
                "{what}: no client for the Kubernetes API of the first control plane"
            )));
        };
        for (o, name) in step.objects.iter().zip(&names) {
            let one = format!("server-side apply {name}");
            let applied = api
                .apply(o)
                .map_err(|e| ctx.local_error_in(format_args!("Kubernetes API: {one}"), &e))?;
            if applied.changed() {
                ctx.changes += 1;
            }
            ctx.reporter()
                .change(&ctx.phase, ctx.name(), &format!("api: {one}: {applied}"));
        }
        Ok(())
    })?;
    Ok(())
}
