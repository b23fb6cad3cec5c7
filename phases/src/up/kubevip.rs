//! `control-plane/kube-vip` and `control-plane/kube-vip-admin`: the kube-vip static pod on every control
//! plane. Before `kubeadm init` the first control plane's kube-vip must use `super-admin.conf` (kubeadm
//! ≥ 1.29 gives `admin.conf` its rights only once init has created the RBAC binding; kube-vip issue
//! #684, and the seed's HA procedure); once init finished it is switched back to `admin.conf` and the
//! kubelet restarted, as the seed does by hand.

use super::{UpData, ADMIN_CONF, SUPER_ADMIN_CONF};
use crate::ctx::NodeCtx;
use crate::error::PhaseError;
use crate::up::placed;

/// `content` with the kubeconfig hostPath (`path: /etc/kubernetes/admin.conf`) pointing at
/// `super-admin.conf`, as the seed's `sed` does; the mount path inside the pod stays `admin.conf`.
pub(crate) fn with_super_admin(content: &[u8]) -> Vec<u8> {
    String::from_utf8_lossy(content)
        .replace(
            &format!("path: {ADMIN_CONF}"),
            &format!("path: {SUPER_ADMIN_CONF}"),
        )
        .into_bytes()
}

/// `content` with the kubeconfig hostPath pointing at `admin.conf` (whichever the renderer chose).
pub(crate) fn with_admin(content: &[u8]) -> Vec<u8> {
    String::from_utf8_lossy(content)
        .replace(
            &format!("path: {SUPER_ADMIN_CONF}"),
            &format!("path: {ADMIN_CONF}"),
        )
        .into_bytes()
}

fn is_first_cp(ctx: &NodeCtx, data: &UpData) -> bool {
    data.first_cp().is_some_and(|n| n.name == ctx.node.name)
}

/// The `control-plane/kube-vip` phase.
pub(crate) fn run(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    let initialised = ctx.test(&format!("test -f {ADMIN_CONF}"))?.unwrap_or(false);
    let first = is_first_cp(ctx, data);
    for f in data.files_of(ctx.name(), placed::KUBE_VIP) {
        let content = if first && !initialised {
            with_super_admin(&f.content)
        } else {
            with_admin(&f.content)
        };
        if first && !initialised {
            ctx.info(&format!(
                "{} uses {SUPER_ADMIN_CONF} until init has finished",
                f.path
            ));
        }
        ctx.put_file(&f.path, f.mode, &content)?;
    }
    Ok(())
}

/// The `control-plane/kube-vip-admin` phase (first control plane, after `init`).
pub(crate) fn switch_to_admin(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    let mut changed = false;
    for f in data.files_of(ctx.name(), placed::KUBE_VIP) {
        changed |= ctx.put_file(&f.path, f.mode, &with_admin(&f.content))?;
    }
    if changed {
        ctx.run_script("systemctl daemon-reload && systemctl restart kubelet")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_host_path_switches() {
        let m = b"    - mountPath: /etc/kubernetes/admin.conf\n  - hostPath:\n      path: /etc/kubernetes/admin.conf\n";
        let s = String::from_utf8(with_super_admin(m)).unwrap_or_default();
        assert_eq!(s, "    - mountPath: /etc/kubernetes/admin.conf\n  - hostPath:\n      path: /etc/kubernetes/super-admin.conf\n");
        assert_eq!(with_admin(s.as_bytes()), m.to_vec());
    }
}
