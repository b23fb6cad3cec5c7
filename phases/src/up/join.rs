//! `join/control-plane` (one node at a time, so etcd grows one member at a time) and `join/worker` (in
//! parallel): `kubeadm join --config <file>` unless `/etc/kubernetes/kubelet.conf` shows the node has
//! joined. The rendered `JoinConfiguration` carries the node's labels and taints at registration
//! (`nodeRegistration.kubeletExtraArgs` `node-labels`, `nodeRegistration.taints`); the discovery token,
//! CA cert hash and certificate key are filled in here and the file is written 0600.

use super::{credentials, UpData, KUBELET_CONF};
use crate::ctx::NodeCtx;
use crate::error::PhaseError;
use crate::kubeadm::patch_join;
use crate::model::FilePurpose;
use crate::util::sh_quote;
use clusterctl_exec::Cmd;
use std::time::Duration;

/// The join phases.
pub fn run(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    if ctx.test(&format!("test -f {KUBELET_CONF}"))? == Some(true) {
        return Ok(());
    }
    let Some(cfg) = data
        .files_of(ctx.name(), FilePurpose::KubeadmJoin)
        .into_iter()
        .next()
    else {
        return Err(ctx.local_error(format!(
            "no kubeadm join configuration was rendered for node {}",
            ctx.name()
        )));
    };
    let cp = ctx.node.is_control_plane();
    let secrets = credentials::get(ctx, data, cp)?.unwrap_or_else(credentials::placeholders);
    let text = patch_join(
        &String::from_utf8_lossy(&cfg.content),
        &secrets,
        cp,
        &data.spec.endpoint,
    )
    .map_err(|e| ctx.local_error(e))?;
    ctx.put_file(&cfg.path, 0o600, text.as_bytes())?;
    let mut cmd = Cmd::new(format!("kubeadm join --config {}", sh_quote(&cfg.path)));
    cmd.timeout = Some(Duration::from_secs(600));
    ctx.run(cmd)?;
    Ok(())
}
