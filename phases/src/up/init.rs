//! `init`: `kubeadm init --config <file> --upload-certs` on the first control plane, unless an earlier
//! init finished. The bootstrap token and certificate key are generated here (never by kubeadm, so that
//! they are known before any output is shown and are redacted from it), written into the init
//! configuration (0600) and into `/var/lib/clusterctl/join.json` (0600) for the joins.
//!
//! Whether an earlier init finished is judged by what kubeadm does last, not by the first file it
//! writes: `admin.conf` comes from its `kubeconfig` phase, long before `wait-control-plane`,
//! `upload-config`, `upload-certs`, `bootstrap-token` (which also creates the `cluster-info`
//! ConfigMap) and the `addon` phase (CoreDNS, kube-proxy). One read-only query on the node
//! ([`state_script`]) asks the API server, through the node's own address, for the `kubeadm-config` and
//! `cluster-info` ConfigMaps, the CoreDNS Deployment and (unless kube-proxy is disabled) the kube-proxy
//! DaemonSet:
//!
//! - all there: done, nothing runs;
//! - the API server answers but some are missing (an `up` stopped inside `kubeadm init` after the
//!   control plane started): the rest is finished by kubeadm's own idempotent phases with a fresh token
//!   and certificate key — `kubeadm init phase upload-config all`, `upload-certs --upload-certs`,
//!   `mark-control-plane`, `bootstrap-token`, `kubelet-finalize all`, `addon all` (each `--config` the
//!   init configuration), so the token and key the joins use are the ones the cluster registered;
//! - `admin.conf` but the API server does not answer: when the kubelet is configured and the etcd and
//!   API server manifests are written, the static pods are starting — the kubelet is started when it
//!   does not run (kubeadm's `kubelet-start` stops it before writing its configuration and starts it
//!   after: an init stopped in between leaves it stopped), then `init` waits for the API server (up to
//!   [`API_WAIT`]) and goes on as above; otherwise a half-done init (below);
//! - no `admin.conf`, but what init writes before it (the CA, the control-plane static pods, etcd's data)
//!   is there: a half-done init, which would fail again on its own leftovers (kubeadm's preflight refuses
//!   existing manifests and a non-empty `/var/lib/etcd`). It is reset first: `kubeadm reset --config
//!   /etc/kubernetes/kubeadm/reset.yaml` (the rendered v1beta4 `ResetConfiguration`, which says
//!   `force: true`: real kubeadm refuses `-f` next to `--config`; plain `kubeadm reset -f` when none
//!   was rendered), then the kube-vip manifest, which reset removes with the other
//!   static pods, is put back before init runs again.
//!
//! No node can have joined before init finished (joins run after `init`, and need the token the
//! `bootstrap-token` phase registers), so a reset never removes a member of a working cluster.

use super::{UpData, ADMIN_CONF};
use crate::ctx::NodeCtx;
use crate::error::PhaseError;
use crate::kubeadm::{new_certificate_key, new_token, patch_init, JoinSecrets};
use crate::up::placed;
use crate::util::now_secs;
use clusterctl_exec::shell::quote_word;
use clusterctl_exec::Cmd;
use std::time::Duration;

/// Where the join secrets are kept on the first control plane (0600, root).
pub(crate) const JOIN_SECRETS_PATH: &str = "/var/lib/clusterctl/join.json";

/// The init configuration path on the node (the rendered one's path).
pub(crate) fn init_config(data: &UpData, node: &str) -> Option<clusterctl_render::RenderedFile> {
    data.files_of(node, placed::KUBEADM_INIT).into_iter().next()
}

/// What `kubeadm init` leaves behind before it writes `admin.conf`: any of these means a half-done
/// init (kubeadm's `certs`, `control-plane`, `etcd` phases run before `kubeconfig admin`).
pub(crate) const HALF_INIT_CHECK: &str = "test -e /etc/kubernetes/pki/ca.key \
 -o -e /etc/kubernetes/manifests/kube-apiserver.yaml \
 -o -e /etc/kubernetes/manifests/etcd.yaml \
 -o -d /var/lib/etcd/member";

/// How long `init` waits for the API server of an earlier, interrupted `kubeadm init` whose static pods
/// are starting (kubeadm's own `wait-control-plane` allows 4 minutes).
pub(crate) const API_WAIT: Duration = Duration::from_secs(240);

/// The kubeadm phases that finish an init whose control plane runs, in kubeadm's order (each run with
/// `--config <init configuration>`). All of them create or update, so they are safe to run again.
pub(crate) const FINISH_PHASES: &[&str] = &[
    "upload-config all",
    "upload-certs --upload-certs",
    "mark-control-plane",
    "bootstrap-token",
    "kubelet-finalize all",
    "addon all",
];

/// How far an earlier `kubeadm init` on this node got ([`state_script`]'s answer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum InitState {
    /// Nothing of an init: run it.
    Fresh,
    /// Leftovers of an init stopped before `admin.conf`: reset, then init.
    Half,
    /// `admin.conf` but the API server does not answer; whether the kubelet is configured
    /// (`/var/lib/kubelet/config.yaml`) and the etcd and API server manifests are written.
    Down {
        /// The kubelet and the static pod manifests are in place (the control plane is starting).
        starting: bool,
        /// The kubelet unit is active.
        kubelet_active: bool,
    },
    /// The API server answers; what kubeadm creates last that is missing (empty: init finished).
    Up {
        /// Missing objects, e.g. `cluster-info`, `coredns`.
        missing: Vec<String>,
    },
}

/// The read-only query of how far an init got: one line, `fresh`, `half`, `down starting=0|1
/// kubelet=<systemctl is-active>` or `up missing=<names>`. The API server is asked at `https://<address>:6443` (the node's own address
/// is in its certificate; the control-plane endpoint may be a VIP nobody holds yet).
pub(crate) fn state_script(address: &str, kube_proxy: bool) -> String {
    let host = if address.contains(':') {
        format!("[{address}]")
    } else {
        address.to_string()
    };
    let proxy = if kube_proxy {
        "$K -n kube-system get daemonset kube-proxy >/dev/null 2>&1 || m=\"$m kube-proxy\"\n"
    } else {
        ""
    };
    format!(
        "A={ADMIN_CONF}\n\
         if [ ! -f $A ]; then if {HALF_INIT_CHECK}; then echo half; else echo fresh; fi; exit 0; fi\n\
         K=\"kubectl --kubeconfig $A --server https://{host}:6443 --request-timeout=5s\"\n\
         if ! $K get --raw /readyz >/dev/null 2>&1; then\n\
         s=0; [ -f /var/lib/kubelet/config.yaml ] && [ -f /etc/kubernetes/manifests/etcd.yaml ] && [ -f /etc/kubernetes/manifests/kube-apiserver.yaml ] && s=1\n\
         echo \"down starting=$s kubelet=$(systemctl is-active kubelet 2>/dev/null)\"; exit 0; fi\n\
         m=\n\
         $K -n kube-system get configmap kubeadm-config >/dev/null 2>&1 || m=\"$m kubeadm-config\"\n\
         $K -n kube-public get configmap cluster-info >/dev/null 2>&1 || m=\"$m cluster-info\"\n\
         $K -n kube-system get deployment coredns >/dev/null 2>&1 || m=\"$m coredns\"\n\
         {proxy}echo \"up missing=$m\""
    )
}

/// Parses [`state_script`]'s output (anything else: [`InitState::Fresh`]).
pub(crate) fn parse_state(out: &str) -> InitState {
    let line = out.lines().last().unwrap_or("").trim();
    if line == "half" {
        InitState::Half
    } else if let Some(rest) = line.strip_prefix("down ") {
        let field = |k: &str| {
            rest.split_whitespace()
                .find_map(|w| w.strip_prefix(k))
                .unwrap_or("")
        };
        InitState::Down {
            starting: field("starting=") == "1",
            kubelet_active: field("kubelet=") == "active",
        }
    } else if let Some(m) = line.strip_prefix("up missing=") {
        InitState::Up {
            missing: m.split_whitespace().map(String::from).collect(),
        }
    } else {
        InitState::Fresh
    }
}

/// Resets a half-done `kubeadm init` or `kubeadm join` (with the rendered reset configuration when
/// there is one) and puts the node's kube-vip manifest back (see the module documentation; `join`
/// calls it too).
pub(super) fn reset_half(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    let reset = data
        .files_of(ctx.name(), placed::KUBEADM_RESET)
        .into_iter()
        .next();
    let mut cmd = match &reset {
        Some(f) => {
            ctx.put_file(&f.path, f.mode, &f.content)?;
            Cmd::new(format!("kubeadm reset --config {}", quote_word(&f.path)))
        }
        None => Cmd::new("kubeadm reset -f"),
    };
    cmd.timeout = Some(Duration::from_secs(300));
    ctx.run(cmd)?;
    for f in data.files_of(ctx.name(), placed::KUBE_VIP) {
        ctx.put_file(&f.path, f.mode, &f.content)?;
    }
    Ok(())
}

/// Generates a bootstrap token and certificate key, registers them for redaction, writes them into the
/// init configuration (0600) and `join.json` (0600). Returns the init configuration's path.
fn fresh_secrets(ctx: &mut NodeCtx, data: &UpData) -> Result<String, PhaseError> {
    let Some(cfg) = init_config(data, ctx.name()) else {
        return Err(ctx.local_error(
            "no kubeadm init configuration was rendered for the first control plane",
        ));
    };
    let token = new_token().map_err(|e| ctx.local_error_in("generating a bootstrap token", &e))?;
    let key = new_certificate_key()
        .map_err(|e| ctx.local_error_in("generating a certificate key", &e))?;
    ctx.secrets().add(&token);
    ctx.secrets().add(&key);
    let text = patch_init(&String::from_utf8_lossy(&cfg.content), &token, &key)
        .map_err(|e| ctx.local_error_from(&e))?;
    ctx.put_file(&cfg.path, 0o600, text.as_bytes())?;
    let now = now_secs();
    let secrets = JoinSecrets {
        token,
        token_created: now,
        certificate_key: key,
        key_uploaded: now,
        ca_cert_hash: String::new(),
    };
    let json = serde_json::to_vec(&secrets).map_err(|e| ctx.local_error_from(&e))?;
    ctx.put_file(JOIN_SECRETS_PATH, 0o600, &json)?;
    if let Ok(mut slot) = data.join.lock() {
        *slot = None; // re-read with the CA cert hash by the first join
    }
    Ok(cfg.path)
}

/// True when the rendered init configuration runs kube-proxy (a `KubeProxyConfiguration` is rendered
/// only then).
fn runs_kube_proxy(data: &UpData, node: &str) -> bool {
    init_config(data, node)
        .map(|f| String::from_utf8_lossy(&f.content).contains("kind: KubeProxyConfiguration"))
        .unwrap_or(true)
}

/// Asks how far an earlier init got (`Fresh` offline).
fn state(ctx: &mut NodeCtx, data: &UpData) -> Result<InitState, PhaseError> {
    let script = state_script(
        &crate::reach::address_text(&ctx.node),
        runs_kube_proxy(data, ctx.name()),
    );
    Ok(ctx
        .read_labelled(&script, Some("how far an earlier kubeadm init got (admin.conf, API server, kubeadm-config, cluster-info, CoreDNS, kube-proxy)"))?
        .map(|o| parse_state(&o))
        .unwrap_or(InitState::Fresh))
}

/// Finishes an init whose control plane runs with kubeadm's remaining phases ([`FINISH_PHASES`]) and a
/// fresh token and certificate key.
fn finish(ctx: &mut NodeCtx, data: &UpData, missing: &[String]) -> Result<(), PhaseError> {
    let why = format!(
        "an earlier kubeadm init stopped after the control plane started (missing: {}): finishing it with kubeadm's remaining phases",
        missing.join(", ")
    );
    ctx.announce(&why);
    let path = fresh_secrets(ctx, data)?;
    for phase in FINISH_PHASES {
        let mut cmd = Cmd::new(format!(
            "kubeadm init phase {phase} --config {}",
            quote_word(&path)
        ));
        cmd.timeout = Some(Duration::from_secs(300));
        ctx.run(cmd)?;
    }
    Ok(())
}

/// The `init` phase.
pub(crate) fn run(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    let mut st = state(ctx, data)?;
    let starting = |s: &InitState| matches!(s, InitState::Down { starting: true, .. });
    if let InitState::Down {
        starting: true,
        kubelet_active,
    } = st
    {
        let why = "an earlier kubeadm init stopped while its control plane was starting: waiting for the API server";
        ctx.info(why);
        if !kubelet_active {
            // kubeadm's kubelet-start stops the kubelet, writes its configuration and starts it again.
            ctx.run_script("systemctl start kubelet")?;
        }
        if ctx.can_query() {
            ctx.reporter().change(&ctx.phase, ctx.name(), why);
            let deadline = std::time::Instant::now() + API_WAIT;
            loop {
                std::thread::sleep(Duration::from_secs(2));
                st = state(ctx, data)?;
                if !starting(&st) || std::time::Instant::now() > deadline {
                    break;
                }
            }
            if starting(&st) {
                return Err(ctx.check_error(vec![format!(
                    "the API server of an earlier kubeadm init on this node did not answer within {}s (its static pods are in place and the kubelet is configured); see `journalctl -u kubelet` and `crictl ps -a` on the node",
                    API_WAIT.as_secs()
                )]));
            }
        }
    }
    match st {
        InitState::Up { missing } if missing.is_empty() => return Ok(()),
        InitState::Up { missing } => return finish(ctx, data, &missing),
        InitState::Half | InitState::Down { .. } => {
            let why = "a kubeadm init failed half-way here before (certificates or static pods, no answering control plane): reset first";
            ctx.announce(why);
            reset_half(ctx, data)?;
        }
        InitState::Fresh => {}
    }
    let path = fresh_secrets(ctx, data)?;
    let mut cmd = Cmd::new(format!(
        "kubeadm init --config {} --upload-certs",
        quote_word(&path)
    ));
    cmd.timeout = Some(Duration::from_secs(600));
    ctx.run(cmd)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_how_far_an_init_got() {
        assert_eq!(parse_state("fresh\n"), InitState::Fresh);
        assert_eq!(parse_state("half"), InitState::Half);
        assert_eq!(
            parse_state("down starting=1 kubelet=inactive"),
            InitState::Down {
                starting: true,
                kubelet_active: false
            }
        );
        assert_eq!(
            parse_state("down starting=0 kubelet=active"),
            InitState::Down {
                starting: false,
                kubelet_active: true
            }
        );
        assert_eq!(
            parse_state("up missing= cluster-info coredns"),
            InitState::Up {
                missing: vec!["cluster-info".into(), "coredns".into()]
            }
        );
        assert_eq!(
            parse_state("up missing="),
            InitState::Up { missing: vec![] }
        );
        let s = state_script("10.0.0.1", true);
        assert!(s.contains("--server https://10.0.0.1:6443") && s.contains("daemonset kube-proxy"));
        let s = state_script("fd00::1", false);
        assert!(s.contains("https://[fd00::1]:6443") && !s.contains("kube-proxy"));
    }
}
