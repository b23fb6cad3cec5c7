//! `init`: `kubeadm init --config <file> --upload-certs` on the first control plane, unless
//! `/etc/kubernetes/admin.conf` shows it was done. The bootstrap token and certificate key are generated
//! here (never by kubeadm, so that they are known before any output is shown and are redacted from it),
//! written into the init configuration (0600) and into `/var/lib/clusterctl/join.json` (0600) for the
//! joins.

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

/// The `init` phase.
pub fn run(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    if ctx.test(&format!("test -f {ADMIN_CONF}"))? == Some(true) {
        return Ok(());
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
