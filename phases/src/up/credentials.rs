//! The join credentials, fetched by the first join that needs them through the first control plane:
//! read from `/var/lib/clusterctl/join.json` (0600); a fresh bootstrap token (`kubeadm token create`)
//! when the 24-hour one is about to expire, a fresh certificate key (`kubeadm init phase upload-certs
//! --upload-certs` with a new `certificateKey` in the init configuration) when the 2-hour upload is,
//! and the CA cert hash computed as kubeadm documents it (sha256 of the CA's DER public key). Every
//! secret is registered for redaction before anything that could print it runs.

use super::init::{init_config, JOIN_SECRETS_PATH};
use super::UpData;
use crate::ctx::NodeCtx;
use crate::error::PhaseError;
use crate::kubeadm::{new_certificate_key, patch_init, JoinSecrets};
use crate::util::now_secs;
use clusterctl_exec::shell::quote_word;
use clusterctl_exec::Cmd;

/// Placeholder secrets shown in an offline dry-run.
pub(crate) fn placeholders() -> JoinSecrets {
    JoinSecrets {
        token: "<bootstrap-token>".into(),
        token_created: 0,
        certificate_key: "<certificate-key>".into(),
        key_uploaded: 0,
        ca_cert_hash: "sha256:<ca-cert-hash>".into(),
    }
}

/// The cluster CA certificate, whose public key's sha256 is kubeadm's `--discovery-token-ca-cert-hash`
/// (read from the node and hashed here: `openssl` is not on every node).
pub(crate) const CA_CERT: &str = "/etc/kubernetes/pki/ca.crt";

/// Secrets valid for a join (`control_plane`: the certificate key must be valid too), creating fresh
/// ones on the first control plane when needed. `joining` receives the plan entries of the steps run on
/// the first control plane. `Ok(None)` offline.
pub(crate) fn get(
    joining: &mut NodeCtx,
    data: &UpData,
    control_plane: bool,
) -> Result<Option<JoinSecrets>, PhaseError> {
    let Ok(mut slot) = data.join.lock() else {
        return Err(joining.local_error("internal lock poisoned"));
    };
    let now = now_secs();
    if let Some(s) = slot.as_ref() {
        if s.token_fresh(now) && (!control_plane || s.key_fresh(now)) && !s.ca_cert_hash.is_empty()
        {
            return Ok(Some(s.clone()));
        }
    }
    let phase = format!("{}/credentials", joining.phase);
    let result = super::on_first_cp(joining, data, phase, |_, cp| {
        refresh(cp, data, slot.clone(), control_plane, now)
    });
    let fresh = result?;
    *slot = fresh.clone();
    Ok(fresh)
}

fn refresh(
    cp: &mut NodeCtx,
    data: &UpData,
    known: Option<JoinSecrets>,
    control_plane: bool,
    now: u64,
) -> Result<Option<JoinSecrets>, PhaseError> {
    let stored = match known {
        Some(s) => Some(s),
        None => match cp.read_file(JOIN_SECRETS_PATH)? {
            None => return offline(cp, control_plane),
            Some(bytes) => bytes.and_then(|b| serde_json::from_slice::<JoinSecrets>(&b).ok()),
        },
    };
    let mut s = stored.unwrap_or(JoinSecrets {
        token: String::new(),
        token_created: 0,
        certificate_key: String::new(),
        key_uploaded: 0,
        ca_cert_hash: String::new(),
    });
    cp.secrets().add(&s.token);
    cp.secrets().add(&s.certificate_key);
    let mut changed = false;
    if !s.token_fresh(now) {
        let out = cp.run(Cmd::new(
            "kubeadm token create --ttl 24h0m0s 2>/dev/null | tail -n 1",
        ))?;
        let token = match out {
            Some(o) => o.stdout_str(),
            None => "<new-bootstrap-token>".into(), // dry-run with --probe
        };
        if out_is_real(&token) && (token.len() != 23 || !token.contains('.')) {
            return Err(cp.local_error("`kubeadm token create` did not print a bootstrap token"));
        }
        cp.secrets().add(&token);
        s.token = token;
        s.token_created = now;
        changed = true;
    }
    if control_plane && !s.key_fresh(now) {
        let Some(cfg) = init_config(data, &cp.node.name) else {
            return Err(cp.local_error(
                "no kubeadm init configuration was rendered for the first control plane",
            ));
        };
        let key = new_certificate_key()
            .map_err(|e| cp.local_error_in("generating a certificate key", &e))?;
        cp.secrets().add(&key);
        let text = patch_init(&String::from_utf8_lossy(&cfg.content), &s.token, &key)
            .map_err(|e| cp.local_error_from(&e))?;
        cp.put_file(&cfg.path, 0o600, text.as_bytes())?;
        cp.run(Cmd::new(format!(
            "kubeadm init phase upload-certs --upload-certs --config {}",
            quote_word(&cfg.path)
        )))?;
        s.certificate_key = key;
        s.key_uploaded = now;
        changed = true;
    }
    if s.ca_cert_hash.is_empty() {
        let Some(Some(pem)) = cp.read_file(CA_CERT)? else {
            return Err(cp.local_error(format!(
                "{CA_CERT} is missing: no CA to compute the join's CA cert hash from"
            )));
        };
        s.ca_cert_hash = crate::pki::spki_sha256(&pem)
            .map_err(|e| cp.local_error_in(format!("the CA cert hash of {CA_CERT}"), &e))?;
        changed = true;
    }
    if changed {
        let json = serde_json::to_vec(&s).map_err(|e| cp.local_error_from(&e))?;
        cp.put_file(JOIN_SECRETS_PATH, 0o600, &json)?;
    }
    Ok(Some(s))
}

fn out_is_real(s: &str) -> bool {
    !s.starts_with('<')
}

fn offline(cp: &mut NodeCtx, control_plane: bool) -> Result<Option<JoinSecrets>, PhaseError> {
    cp.info("read the join credentials; create a fresh bootstrap token when it expires within the hour (kubeadm token create)");
    if control_plane {
        cp.info("upload the certificates with a fresh certificate key when the last upload is older than 1h50m (kubeadm init phase upload-certs --upload-certs)");
    }
    Ok(None)
}
