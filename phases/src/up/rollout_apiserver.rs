//! `rollout/apiserver` (control planes, one at a time): the API server's files placed, a new serving
//! certificate when the current one lacks a certSAN, the static pod regenerated, and the node's API
//! server healthy again before the next control plane starts.
//!
//! Only what every kubeadm node has is used on the node: `kubeadm`, `kubectl` with
//! `/etc/kubernetes/admin.conf` (the health wait: `get --raw /livez` against the node's own advertise
//! address, which every serving certificate kubeadm makes carries) and `crictl` (to see the new
//! kube-apiserver container replace the old one; kubeadm's preflight requires it). Certificates are
//! read from the node and parsed here ([`crate::pki`]), not with `openssl` there.
//!
//! A failed rollout leaves the node serving: the new certificate is made in a staging directory
//! (copies of the cluster CA, 0700, removed afterwards) and checked for every certSAN before it
//! replaces the live pair; the previous manifest and certificate pair are kept under
//! [`BACKUP`] (0700), and when the regenerated API server does not become healthy they are put back
//! and waited for, the phase failing with what happened. The phase is recorded only when it
//! succeeded, so the next `up` tries again.

use super::rollout::{
    baseline, cert_sans, place_config, rollout_config, APISERVER_CERT, APISERVER_MANIFEST,
    ROLLOUT_CONFIG,
};
use super::{UpData, ADMIN_CONF};
use crate::ctx::NodeCtx;
use crate::error::PhaseError;
use crate::up::placed;
use clusterctl_exec::Cmd;
use std::time::Duration;

/// The API server's serving key.
const APISERVER_KEY: &str = "/etc/kubernetes/pki/apiserver.key";
/// Where the previous manifest and serving pair are kept during a rollout (0700).
pub(crate) const BACKUP: &str = "/etc/kubernetes/kubeadm/rollout-backup";
/// Where kubeadm makes a new serving pair (copies of `ca.crt`/`ca.key`; 0700, removed afterwards).
const STAGE: &str = "/etc/kubernetes/kubeadm/rollout-pki";
/// The rollout configuration with `certificatesDir` pointed at [`STAGE`] (0600).
const CERTS_CONFIG: &str = "/etc/kubernetes/kubeadm/rollout-certs.yaml";
/// How long the regenerated API server has to answer `/livez`: 5 minutes, or `--ready-timeout` when
/// shorter (at least 20 s).
fn healthy_within(data: &UpData) -> u64 {
    data.spec.ready_timeout.as_secs().clamp(20, 300)
}

fn kubeadm(ctx: &mut NodeCtx, args: &str) -> Result<(), PhaseError> {
    let mut c = Cmd::new(format!("kubeadm {args}"));
    c.timeout = Some(Duration::from_secs(300));
    ctx.run(c)?;
    Ok(())
}

/// The certSANs of the file that the serving certificate on the node lacks; empty when it has them
/// all, or offline, or when there is no certificate (kubeadm makes one with the control plane).
fn missing_sans(ctx: &mut NodeCtx, data: &UpData) -> Result<Vec<String>, PhaseError> {
    let Some(Some(pem)) = ctx.read_file(APISERVER_CERT)? else {
        return Ok(Vec::new());
    };
    let have = crate::pki::sans(&pem)
        .map_err(|e| ctx.local_error_in(format!("reading {APISERVER_CERT}"), &e))?;
    Ok(cert_sans(data)
        .into_iter()
        .filter(|s| !crate::pki::san_present(&have, s))
        .collect())
}

/// The id of the running kube-apiserver container (`crictl`), `None` offline or when none runs.
fn running_container(ctx: &mut NodeCtx) -> Result<Option<String>, PhaseError> {
    let id = ctx.read_labelled(
        "if command -v crictl >/dev/null 2>&1; then crictl ps --state running --name '^kube-apiserver$' -q 2>/dev/null | head -n1; fi",
        Some("find the running kube-apiserver container"),
    )?;
    Ok(id.filter(|s| !s.is_empty()))
}

/// The sha256 of the API server manifest, `None` offline or when absent.
fn manifest_digest(ctx: &mut NodeCtx) -> Result<Option<String>, PhaseError> {
    Ok(ctx
        .file_digest(APISERVER_MANIFEST)?
        .flatten()
        .map(|(d, _)| d))
}

/// `rollout/apiserver` (control planes, serial): files, certificate when a certSAN is missing, static
/// pod regenerated, `/livez` answered by the new API server before the next control plane; on a
/// failure after the live files changed, the previous ones put back.
pub(crate) fn apiserver(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    if baseline(ctx, data)? {
        return Ok(());
    }
    if ctx.test(&format!("test -f {ADMIN_CONF}"))? == Some(false) {
        return Err(ctx.check_error(vec![format!(
            "{ADMIN_CONF} is missing: this control plane was not set up by kubeadm"
        )]));
    }
    let files = super::encryption::fill(ctx, data, data.files_of(ctx.name(), placed::OTHER))?;
    for f in files {
        ctx.put_file(&f.path, f.mode, &f.content)?;
    }
    place_config(ctx, data)?;
    let missing = missing_sans(ctx, data)?;
    let before = manifest_digest(ctx)?;
    let running = running_container(ctx)?;
    backup(ctx, !missing.is_empty())?;
    if !missing.is_empty() {
        ctx.info(&format!(
            "the API server certificate lacks certSAN(s) {}",
            missing.join(", ")
        ));
        new_certificate(ctx, data)?;
    }
    let result = kubeadm(
        ctx,
        &format!("init phase control-plane apiserver --config {ROLLOUT_CONFIG}"),
    )
    .and_then(|()| {
        // The phase runs because its inputs changed: the flags (a new manifest, which the kubelet
        // restarts the pod for) or only what the API server reads from files (an audit policy, a CA
        // at the same path), which it reads at start: then the container is restarted here.
        if manifest_digest(ctx)? == before {
            restart(ctx, running.as_deref())?;
        }
        wait_healthy(ctx, data, running.as_deref(), healthy_within(data))
    });
    match result {
        Ok(()) => Ok(()),
        Err(e) => Err(roll_back(ctx, data, e)),
    }
}

/// Keeps the manifest (and, when a new certificate comes, the serving pair) under [`BACKUP`].
fn backup(ctx: &mut NodeCtx, pair: bool) -> Result<(), PhaseError> {
    let pair = if pair {
        format!("cp -p {APISERVER_CERT} {BACKUP}/apiserver.crt && cp -p {APISERVER_KEY} {BACKUP}/apiserver.key")
    } else {
        format!("rm -f {BACKUP}/apiserver.crt {BACKUP}/apiserver.key")
    };
    ctx.run_script(&format!(
        "set -e; umask 077; mkdir -p {BACKUP}; chmod 0700 {BACKUP}; cp -p {APISERVER_MANIFEST} {BACKUP}/kube-apiserver.yaml; {pair}"
    ))?;
    Ok(())
}

/// A new serving pair made by kubeadm in [`STAGE`], checked for every certSAN, then moved over the
/// live pair; the staging directory (with its CA copies) removed whatever happens.
fn new_certificate(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    let made = stage_certificate(ctx, data);
    let installed = made.and_then(|()| {
        ctx.run_script(&format!(
            "set -e; cp -p {STAGE}/apiserver.key {APISERVER_KEY}.new && cp -p {STAGE}/apiserver.crt {APISERVER_CERT}.new && mv {APISERVER_KEY}.new {APISERVER_KEY} && mv {APISERVER_CERT}.new {APISERVER_CERT}"
        ))
        .map(|_| ())
    });
    let cleaned = ctx.run_script(&format!("rm -rf {STAGE} {CERTS_CONFIG}"));
    installed?;
    cleaned.map(|_| ())
}

fn stage_certificate(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    ctx.run_script(&format!(
        "set -e; umask 077; rm -rf {STAGE}; mkdir -m 0700 {STAGE}; cp -p /etc/kubernetes/pki/ca.crt /etc/kubernetes/pki/ca.key {STAGE}/"
    ))?;
    let node = ctx.node.clone();
    let cfg = rollout_config(data, &node).map_err(|e| ctx.local_error_from(&e))?;
    ctx.put_file(
        CERTS_CONFIG,
        0o600,
        with_certificates_dir(&cfg, STAGE).as_bytes(),
    )?;
    kubeadm(
        ctx,
        &format!("init phase certs apiserver --config {CERTS_CONFIG}"),
    )?;
    if ctx.mode.dry_run {
        // No kubeadm ran (it was planned): there is no staged certificate to check, even when probing.
        return Ok(());
    }
    let staged = format!("{STAGE}/apiserver.crt");
    let Some(Some(pem)) = ctx.read_file(&staged)? else {
        return if ctx.can_query() {
            Err(ctx.check_error(vec![format!("kubeadm made no {staged}")]))
        } else {
            Ok(())
        };
    };
    let have =
        crate::pki::sans(&pem).map_err(|e| ctx.local_error_in(format!("reading {staged}"), &e))?;
    let still: Vec<String> = cert_sans(data)
        .into_iter()
        .filter(|s| !crate::pki::san_present(&have, s))
        .collect();
    if !still.is_empty() {
        return Err(ctx.check_error(vec![format!(
            "the certificate kubeadm made lacks certSAN(s) {}: the live one was left in place",
            still.join(", ")
        )]));
    }
    Ok(())
}

/// The rollout configuration `cfg` with the ClusterConfiguration's `certificatesDir` set to `dir`.
pub(crate) fn with_certificates_dir(cfg: &str, dir: &str) -> String {
    cfg.split("---\n")
        .map(|d| {
            if d.lines().any(|l| l == "kind: ClusterConfiguration") {
                let kept: String = d
                    .lines()
                    .filter(|l| !l.starts_with("certificatesDir:"))
                    .map(|l| format!("{l}\n"))
                    .collect();
                format!("{kept}certificatesDir: {dir}\n")
            } else {
                d.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("---\n")
}

/// Stops the running kube-apiserver container so the kubelet starts it again, reading its files anew
/// (the manifest itself did not change).
fn restart(ctx: &mut NodeCtx, running: Option<&str>) -> Result<(), PhaseError> {
    if let Some(id) = running {
        ctx.run_script(&format!(
            "crictl stop {}",
            clusterctl_exec::shell::quote_word(id)
        ))?;
    }
    Ok(())
}

/// Puts the previous manifest and serving pair back from [`BACKUP`] and waits for the API server;
/// the returned error says so, with `cause` as its source.
fn roll_back(ctx: &mut NodeCtx, data: &UpData, cause: PhaseError) -> PhaseError {
    if ctx.mode.dry_run {
        return cause;
    }
    let restored = ctx.run_script(&format!(
        "set -e; if [ -f {BACKUP}/apiserver.crt ]; then cp -p {BACKUP}/apiserver.key {APISERVER_KEY}; cp -p {BACKUP}/apiserver.crt {APISERVER_CERT}; fi; \
         if [ -f {BACKUP}/kube-apiserver.yaml ] && ! cmp -s {BACKUP}/kube-apiserver.yaml {APISERVER_MANIFEST}; then cp -p {BACKUP}/kube-apiserver.yaml {APISERVER_MANIFEST}; fi"
    ));
    let what = match restored.and_then(|_| wait_healthy(ctx, data, None, healthy_within(data))) {
        Ok(()) => format!(
            "the API server did not come up with the new settings; its previous manifest and certificate were put back from {BACKUP} and it serves again (fix the file and run `up` again)"
        ),
        Err(e) => format!(
            "the API server did not come up with the new settings, and putting the previous manifest and certificate back from {BACKUP} did not bring it back either ({e}); see `journalctl -u kubelet` and `crictl ps -a` on the node"
        ),
    };
    ctx.local_error_in(what, &cause)
}

/// The script waiting up to `within` seconds until the API server on this node answers `ok` on
/// `/livez` through `kubectl` with admin.conf at `https://HOST:PORT` — and, when `replaced` names the
/// container that ran before, until another kube-apiserver container runs (so the old one's answer
/// does not count).
pub(crate) fn healthy_script(host: &str, port: u64, replaced: Option<&str>, within: u64) -> String {
    let replaced = clusterctl_exec::shell::quote_word(replaced.unwrap_or(""));
    format!(
        "command -v kubectl >/dev/null 2>&1 || {{ echo 'kubectl is not on this node (kubeadm nodes carry it): cannot check the API server' >&2; exit 2; }}\n\
         K=\"kubectl --kubeconfig {ADMIN_CONF} --server https://{host}:{port} --request-timeout=5s\"\n\
         old={replaced}\n\
         end=$(( $(date +%s) + {within} ))\n\
         sleep 1\n\
         while :; do\n\
         \x20 new=yes\n\
         \x20 if [ -n \"$old\" ] && command -v crictl >/dev/null 2>&1; then\n\
         \x20   id=$(crictl ps --state running --name '^kube-apiserver$' -q 2>/dev/null | head -n1)\n\
         \x20   if [ -z \"$id\" ] || [ \"$id\" = \"$old\" ]; then new=no; fi\n\
         \x20 fi\n\
         \x20 r=$($K get --raw /livez 2>&1 | tail -n1)\n\
         \x20 if [ \"$new\" = yes ] && [ \"$r\" = ok ]; then echo \"https://{host}:{port}/livez: ok\"; exit 0; fi\n\
         \x20 if [ \"$(date +%s)\" -ge \"$end\" ]; then\n\
         \x20   echo \"https://{host}:{port}/livez did not answer ok within {within}s (a new kube-apiserver container running: $new; last answer: $r)\" >&2; exit 1\n\
         \x20 fi\n\
         \x20 sleep 2\n\
         done"
    )
}

/// Waits until the node's API server answers `ok` on `/livez` ([`healthy_script`]).
fn wait_healthy(
    ctx: &mut NodeCtx,
    data: &UpData,
    replaced: Option<&str>,
    within: u64,
) -> Result<(), PhaseError> {
    let address = crate::reach::address_text(&ctx.node);
    let host = if address.contains(':') {
        format!("[{address}]")
    } else {
        address
    };
    let port = super::rollout::bind_port(data);
    let url = format!("https://{host}:{port}/livez");
    let label = format!("wait until {url} answers ok");
    // Not a change: a dry run restarted nothing, so it plans the wait instead of waiting.
    if ctx.mode.dry_run {
        ctx.info(&label);
        return Ok(());
    }
    let mut c = Cmd::new(healthy_script(&host, port, replaced, within));
    c.timeout = Some(Duration::from_secs(within + 30));
    match ctx.query_labelled(c.clone(), Some(&label))? {
        Some(o) if !o.success() => Err(ctx.command_error(&c, &o)),
        _ => {
            ctx.reporter().change(
                &ctx.phase,
                ctx.name(),
                &format!("API server healthy ({url})"),
            );
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certificates_dir_is_set_in_the_cluster_configuration_only() {
        let cfg = "kind: InitConfiguration\nfoo: 1\n---\nkind: ClusterConfiguration\ncertificatesDir: /etc/kubernetes/pki\napiServer: {}\n---\nkind: KubeletConfiguration\n";
        let out = with_certificates_dir(cfg, STAGE);
        assert_eq!(
            out,
            format!("kind: InitConfiguration\nfoo: 1\n---\nkind: ClusterConfiguration\napiServer: {{}}\ncertificatesDir: {STAGE}\n---\nkind: KubeletConfiguration\n")
        );
    }

    #[test]
    fn the_health_wait_uses_kubectl_not_curl() {
        let s = healthy_script("10.0.0.2", 6443, Some("abc"), 300);
        assert!(s.contains(
            "kubectl --kubeconfig /etc/kubernetes/admin.conf --server https://10.0.0.2:6443"
        ));
        assert!(s.contains("get --raw /livez") && s.contains("old=abc"));
        assert!(!s.contains("curl") && !s.contains("wget") && !s.contains("openssl"));
    }
}
