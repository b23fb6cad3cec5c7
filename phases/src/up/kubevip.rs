//! `control-plane/kube-vip` and `control-plane/kube-vip-admin`: the kube-vip static pod on every control
//! plane. Before `kubeadm init` the first control plane's kube-vip must use `super-admin.conf` (kubeadm
//! ≥ 1.29 gives `admin.conf` its rights only once init has created the RBAC binding; kube-vip issue
//! #684, and the seed's HA procedure); once init finished it is switched back to `admin.conf` and the
//! kubelet restarted, as the seed does by hand.

use super::{UpData, ADMIN_CONF, SUPER_ADMIN_CONF};
use crate::ctx::NodeCtx;
use crate::error::PhaseError;
use crate::model::FilePurpose;

/// `content` with every `admin.conf` path replaced by `super-admin.conf`.
pub fn with_super_admin(content: &[u8]) -> Vec<u8> {
    String::from_utf8_lossy(content).replace(ADMIN_CONF, SUPER_ADMIN_CONF).into_bytes()
}

fn is_first_cp(ctx: &NodeCtx, data: &UpData) -> bool {
    data.first_cp().is_some_and(|n| n.name == ctx.node.name)
}

/// The `control-plane/kube-vip` phase.
pub fn run(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    let initialised = ctx.test(&format!("test -f {ADMIN_CONF}"))?.unwrap_or(false);
    let first = is_first_cp(ctx, data);
    for f in data.files_of(ctx.name(), FilePurpose::KubeVip) {
        let content = if first && !initialised { with_super_admin(&f.content) } else { f.content.clone() };
        if first && !initialised {
            ctx.info(&format!("{} uses {SUPER_ADMIN_CONF} until init has finished", f.path));
        }
        ctx.put_file(&f.path, f.mode, &content)?;
    }
    Ok(())
}

/// The `control-plane/kube-vip-admin` phase (first control plane, after `init`).
pub fn switch_to_admin(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    let mut changed = false;
    for f in data.files_of(ctx.name(), FilePurpose::KubeVip) {
        changed |= ctx.put_file(&f.path, f.mode, &f.content)?;
    }
    if changed {
        ctx.run_script("systemctl daemon-reload && systemctl restart kubelet")?;
    }
    Ok(())
}
