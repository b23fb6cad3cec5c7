//! `init`: `kubeadm init --config <file> --upload-certs` on the first control plane, unless
//! `/etc/kubernetes/admin.conf` shows it was done. The bootstrap token and certificate key are generated
//! here (never by kubeadm, so that they are known before any output is shown and are redacted from it),
//! written into the init configuration (0600) and into `/var/lib/clusterctl/join.json` (0600) for the
//! joins.
//!
//! A `kubeadm init` that failed half-way (no `admin.conf`, but what init writes before it — the CA,
//! the control-plane static pods, etcd's data — is there) would fail again on its own leftovers
//! (kubeadm's preflight refuses existing manifests and a non-empty `/var/lib/etcd`). Such a node is
//! reset first: `kubeadm reset -f --config /etc/kubernetes/kubeadm/reset.yaml` (the rendered
//! v1beta4 `ResetConfiguration`; plain `kubeadm reset -f` when none was rendered), then the kube-vip
//! manifest, which reset removes with the other static pods, is put back before init runs again.

use super::{UpData, ADMIN_CONF};
use crate::ctx::NodeCtx;
use crate::error::PhaseError;
use crate::kubeadm::{new_certificate_key, new_token, patch_init, JoinSecrets};
use crate::model::FilePurpose;
use crate::util::{now_secs, sh_quote};
use clusterctl_exec::Cmd;
use std::time::Duration;

/// Where the join secrets are kept on the first control plane (0600, root).
pub const JOIN_SECRETS_PATH: &str = "/var/lib/clusterctl/join.json";

/// The init configuration path on the node (the rendered one's path).
pub fn init_config(data: &UpData, node: &str) -> Option<crate::model::NodeFile> {
    data.files_of(node, FilePurpose::KubeadmInit)
        .into_iter()
        .next()
}

/// What `kubeadm init` leaves behind before it writes `admin.conf`: any of these means a half-done
/// init (kubeadm's `certs`, `control-plane`, `etcd` phases run before `kubeconfig admin`).
pub const HALF_INIT_CHECK: &str = "test -e /etc/kubernetes/pki/ca.key \
 -o -e /etc/kubernetes/manifests/kube-apiserver.yaml \
 -o -e /etc/kubernetes/manifests/etcd.yaml \
 -o -d /var/lib/etcd/member";

/// Resets a half-done init and puts the kube-vip manifest back (see the module documentation).
fn reset_half_init(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    let reset = data
        .files_of(ctx.name(), FilePurpose::KubeadmReset)
        .into_iter()
        .next();
    let mut cmd = match &reset {
        Some(f) => {
            ctx.put_file(&f.path, f.mode, &f.content)?;
            Cmd::new(format!("kubeadm reset -f --config {}", sh_quote(&f.path)))
        }
        None => Cmd::new("kubeadm reset -f"),
    };
    cmd.timeout = Some(Duration::from_secs(300));
    ctx.run(cmd)?;
    for f in data.files_of(ctx.name(), FilePurpose::KubeVip) {
        ctx.put_file(&f.path, f.mode, &f.content)?;
    }
    Ok(())
}

/// The `init` phase.
pub fn run(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    if ctx.test(&format!("test -f {ADMIN_CONF}"))? == Some(true) {
        return Ok(());
    }
    if ctx.test(HALF_INIT_CHECK)? == Some(true) {
        let why = "a kubeadm init failed half-way here before (certificates or static pods, no admin.conf): reset first";
        ctx.info(why);
        if !ctx.mode.dry_run {
            ctx.reporter().change(&ctx.phase, ctx.name(), why);
        }
        reset_half_init(ctx, data)?;
    }
    let Some(cfg) = init_config(data, ctx.name()) else {
        return Err(ctx.local_error(
            "no kubeadm init configuration was rendered for the first control plane",
        ));
    };
    let token =
        new_token().map_err(|e| ctx.local_error(format!("generating a bootstrap token: {e}")))?;
    let key = new_certificate_key()
        .map_err(|e| ctx.local_error(format!("generating a certificate key: {e}")))?;
    ctx.secrets().add(&token);
    ctx.secrets().add(&key);
    let text = patch_init(&String::from_utf8_lossy(&cfg.content), &token, &key)
        .map_err(|e| ctx.local_error(e))?;
    ctx.put_file(&cfg.path, 0o600, text.as_bytes())?;
    let now = now_secs();
    let secrets = JoinSecrets {
        token,
        token_created: now,
        certificate_key: key,
        key_uploaded: now,
        ca_cert_hash: String::new(),
    };
    let json = serde_json::to_vec(&secrets).map_err(|e| ctx.local_error(e))?;
    ctx.put_file(JOIN_SECRETS_PATH, 0o600, &json)?;
    let mut cmd = Cmd::new(format!(
        "kubeadm init --config {} --upload-certs",
        sh_quote(&cfg.path)
    ));
    cmd.timeout = Some(Duration::from_secs(600));
    ctx.run(cmd)?;
    if let Ok(mut slot) = data.join.lock() {
        *slot = None; // re-read with the CA cert hash by the first join
    }
    Ok(())
}
