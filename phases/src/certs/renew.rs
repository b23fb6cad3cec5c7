//! `certs renew`'s one entry point, [`run`]: every control plane reached first (nothing changes when
//! one is not), then ONE CONTROL PLANE AT A TIME in upgrade order (the first, then the others):
//! `certs/renew` runs `kubeadm certs renew all` (or each named certificate) on it, and
//! `certs/restart` restarts the static pods that load the renewed files ([`super::components_for`]:
//! etcd, then the API server, controller manager and scheduler) by stopping each one's running
//! container (`crictl stop`; the kubelet starts it again from the unchanged manifest), waiting after
//! each until a new container runs and the node's own API server answers `/readyz` through kubectl
//! with `admin.conf` (tools every kubeadm node has) before the next — so no two control planes are
//! restarting at once. Last, `certs/kubeconfig` refreshes the user's kubeconfig entry of the cluster
//! from the first control plane's renewed `admin.conf` (`up`'s merge,
//! [`crate::up::kubeconfig::refresh`]). Every change goes through `NodeCtx`, so `--dry-run` changes
//! nothing; no phase is recorded (a renewal is asked for, not converged to).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clusterctl_exec::{shell::quote_word, Cmd, Transport};
use clusterctl_spec::{ValidCluster, ValidNode};

use crate::ctx::{Mode, NodeCtx, PlanEntry, Secrets};
use crate::engine::{Engine, Options as EngineOptions, Phase, Targets};
use crate::error::{PhaseError, RunError};
use crate::reach::{self, ReachError};
use crate::report::Reporter;
use crate::up::ADMIN_CONF;

/// What `certs renew` is asked to do.
#[derive(Debug, Clone, Default)]
pub struct RenewOptions {
    /// kubeadm's names of the certificates to renew ([`super::renewable`]); empty: `all`.
    pub names: Vec<String>,
    /// The kubeconfig whose `clusterctl-<cluster>` entry is refreshed (`None`: as `up` writes it).
    pub kubeconfig: Option<PathBuf>,
    /// The known_hosts file for SSH nodes (`None`: `~/.ssh/known_hosts`).
    pub known_hosts: Option<PathBuf>,
    /// Report every check and the output of every command.
    pub verbose: bool,
    /// Change nothing: the nodes are read only, every change is planned.
    pub dry_run: bool,
}

/// Why nothing was renewed.
#[derive(Debug, thiserror::Error)]
pub enum RenewError {
    /// A name `kubeadm certs renew` does not take.
    #[error("`{name}` is not a certificate kubeadm renews; the names are: all, {}", super::renewable().join(", "))]
    UnknownName {
        /// The name given.
        name: String,
    },
    /// A control plane could not be reached (nothing was changed).
    #[error("control plane(s) not reached, nothing changed: {}", .0.iter().map(|(n, e)| format!("{n}: {e}")).collect::<Vec<_>>().join("; "))]
    Unreachable(BTreeMap<String, ReachError>),
}

impl RenewError {
    /// True for a refused input (exit 2), false for a failure (exit 1).
    pub fn refused(&self) -> bool {
        matches!(self, RenewError::UnknownName { .. })
    }
}

/// What the renewal did, or planned (dry run).
#[derive(Debug)]
pub struct RenewReport {
    /// The control planes in the order they were renewed.
    pub order: Vec<ValidNode>,
    /// What was renewed: `all`, or the names.
    pub renewed: Vec<String>,
    /// The static pods restarted on each control plane, in order.
    pub restarted: Vec<&'static str>,
    /// Every check, command and local write, in the order they ran or were planned.
    pub plan: Vec<PlanEntry>,
    /// Changes made (or planned).
    pub changes: usize,
    /// The phase errors, when one failed (later control planes were not touched), and its node.
    pub stopped: Option<(RunError, Option<String>)>,
}

/// What the phases share.
struct RenewData {
    cluster: String,
    names: Vec<String>,
    components: Vec<&'static str>,
    server: String,
    tls_name: Option<String>,
    kubeconfig: Option<PathBuf>,
}

/// Renews (see the module documentation). Errors: an unknown name (refused), a control plane not
/// reached; a failed phase is [`RenewReport::stopped`].
pub fn run(
    cluster: &ValidCluster,
    opts: &RenewOptions,
    reporter: Arc<dyn Reporter>,
) -> Result<RenewReport, RenewError> {
    let known = super::renewable();
    if let Some(bad) = opts.names.iter().find(|n| !known.contains(&n.as_str())) {
        return Err(RenewError::UnknownName { name: bad.clone() });
    }
    let names: Vec<&str> = if opts.names.is_empty() {
        known
    } else {
        opts.names.iter().map(String::as_str).collect()
    };
    let first = cluster.first_control_plane().name.clone();
    // The first control plane, then the others in file order.
    let mut order: Vec<ValidNode> = cluster
        .nodes()
        .iter()
        .filter(|n| n.is_control_plane())
        .cloned()
        .collect();
    order.sort_by_key(|n| n.name != first);
    let refs: Vec<&ValidNode> = order.iter().collect();
    let reached = reach::reach(cluster, &refs, opts.known_hosts.as_deref());
    if !reached.errors.is_empty() {
        return Err(RenewError::Unreachable(reached.errors));
    }
    let local = crate::node_containers::local_api(cluster, false);
    let ep = cluster.endpoint();
    let data = RenewData {
        cluster: cluster.name().to_string(),
        names: if opts.names.is_empty() {
            vec!["all".to_string()]
        } else {
            opts.names.clone()
        },
        components: super::components_for(&names),
        server: local
            .as_ref()
            .map(|l| l.server.clone())
            .unwrap_or_else(|| format!("https://{}:{}", ep.host, ep.port)),
        tls_name: local.map(|l| l.tls_server_name),
        kubeconfig: opts.kubeconfig.clone(),
    };
    reporter.note(&format!(
        "certs renew: cluster `{}`: {} on one control plane at a time: {}; static pods restarted after each: {}",
        data.cluster,
        data.names.join(", "),
        order.iter().map(|n| n.name.as_str()).collect::<Vec<_>>().join(" → "),
        if data.components.is_empty() { "none".to_string() } else { data.components.join(", ") }
    ));
    Ok(phases(
        cluster,
        opts,
        &data,
        order,
        &reached.transports,
        reporter,
    ))
}

fn phase(name: &'static str, run: crate::engine::PhaseFn<RenewData>) -> Phase<RenewData> {
    Phase {
        name,
        targets: Targets::All,
        serial: true,
        record: false,
        required: false,
        inputs: |d, _| d.names.join(","),
        run,
    }
}

/// Each control plane's renew and restart, one engine per node in `order`, then the kubeconfig on
/// the first; stops at the first failure.
fn phases(
    cluster: &ValidCluster,
    opts: &RenewOptions,
    data: &RenewData,
    order: Vec<ValidNode>,
    transports: &BTreeMap<String, Arc<dyn Transport>>,
    reporter: Arc<dyn Reporter>,
) -> RenewReport {
    let engine_opts = EngineOptions {
        cluster: cluster.name().to_string(),
        mode: Mode {
            verbose: opts.verbose,
            dry_run: opts.dry_run,
            // The nodes are reached anyway: show what the checks find.
            probe: opts.dry_run,
            ..Mode::default()
        },
        parallel: 1,
        skip: vec![],
        only: vec![],
        cache: None,
    };
    let mut report = RenewReport {
        order: order.clone(),
        renewed: data.names.clone(),
        restarted: data.components.clone(),
        plan: Vec::new(),
        changes: 0,
        stopped: None,
    };
    let node_phases = [phase("certs/renew", renew), phase("certs/restart", restart)];
    let kubeconfig = [phase("certs/kubeconfig", kubeconfig)];
    let last = order.len();
    for (i, node) in order.iter().chain(order.first()).enumerate() {
        let one: BTreeMap<_, _> = transports
            .get(&node.name)
            .map(|t| (node.name.clone(), t.clone()))
            .into_iter()
            .collect();
        let engine = Engine::new(
            vec![node.clone()],
            one,
            engine_opts.clone(),
            reporter.clone(),
            Secrets::default(),
        );
        let list: &[Phase<RenewData>] = if i < last { &node_phases } else { &kubeconfig };
        let (s, r) = engine.run(list, data);
        report.changes += s.total_changes();
        report.plan.extend(s.plan);
        if let Err(e) = r {
            report.stopped = Some((e, Some(node.name.clone())));
            break;
        }
    }
    report
}

fn long(script: String, secs: u64) -> Cmd {
    let mut c = Cmd::new(script);
    c.timeout = Some(Duration::from_secs(secs));
    c
}

/// `certs/renew`: `kubeadm certs renew all`, or one `kubeadm certs renew NAME` per name.
fn renew(ctx: &mut NodeCtx, data: &RenewData) -> Result<(), PhaseError> {
    if ctx.test(&format!("test -f {ADMIN_CONF}"))? == Some(false) {
        return Err(ctx.check_error(vec![format!(
            "{ADMIN_CONF} is missing: this node is not a kubeadm control plane (run `clusterctl up` first)"
        )]));
    }
    for name in &data.names {
        ctx.run(long(
            format!("kubeadm certs renew {}", quote_word(name)),
            300,
        ))?;
    }
    Ok(())
}

/// `certs/restart`: each component's container stopped and waited for ([`restart_script`]), in
/// order; a component without a manifest on the node (external etcd) is skipped.
fn restart(ctx: &mut NodeCtx, data: &RenewData) -> Result<(), PhaseError> {
    for c in &data.components {
        let manifest = format!("/etc/kubernetes/manifests/{c}.yaml");
        if ctx.test(&format!("test -f {manifest}"))? == Some(false) {
            ctx.info(&format!("no {manifest}: {c} is not a static pod here"));
            continue;
        }
        // Placed as a file and run as `sh FILE`, so the progress shows one short line per component.
        let path = format!("{SCRIPT_DIR}/restart-{c}.sh");
        ctx.put_file(
            &path,
            0o700,
            restart_script(c, RESTART_TIMEOUT_SECS).as_bytes(),
        )?;
        let out = ctx.run(long(format!("sh {path}"), RESTART_TIMEOUT_SECS + 30))?;
        if let Some(o) = out {
            let said = o.stdout_str();
            ctx.reporter().change(
                &ctx.phase,
                ctx.name(),
                said.lines().last().unwrap_or_default(),
            );
        }
    }
    Ok(())
}

/// Where the restart scripts are placed on a control plane.
const SCRIPT_DIR: &str = "/var/lib/clusterctl/certs";

/// `certs/kubeconfig` (first control plane): the user's kubeconfig entry from its renewed admin.conf.
fn kubeconfig(ctx: &mut NodeCtx, data: &RenewData) -> Result<(), PhaseError> {
    crate::up::kubeconfig::refresh(
        ctx,
        &data.cluster,
        &data.server,
        data.tls_name.as_deref(),
        data.kubeconfig.as_ref(),
    )
}

/// How long [`restart_script`] waits for a component to be back.
const RESTART_TIMEOUT_SECS: u64 = 300;

/// The script restarting static pod `component` on a control plane so that it loads renewed
/// certificates: its running container stopped with `crictl stop` (the kubelet starts a new one from
/// the manifest), then, every 2 s until `timeout` seconds, a new running container of that name (a
/// different id) and the node's own API server's `/readyz` answering `ok` through kubectl with
/// `admin.conf` (server `https://127.0.0.1:<--secure-port>`, certificate checked for the name
/// `kubernetes` every kubeadm API server certificate carries). Exits 1 naming what is missing.
pub(crate) fn restart_script(component: &str, timeout: u64) -> String {
    format!(
        "set -u\n\
         c={component}\n\
         old=$(crictl ps -q --state running --name \"^$c\\$\" | head -n1)\n\
         [ -n \"$old\" ] || {{ echo \"no running $c container on this node\" >&2; exit 1; }}\n\
         port=$(sed -n 's/.*--secure-port=\\([0-9][0-9]*\\).*/\\1/p' /etc/kubernetes/manifests/kube-apiserver.yaml | head -n1)\n\
         ready() {{ kubectl --kubeconfig {ADMIN_CONF} --server \"https://127.0.0.1:${{port:-6443}}\" --tls-server-name kubernetes --request-timeout=5s get --raw /readyz 2>&1 | tail -n1; }}\n\
         crictl stop \"$old\" >/dev/null\n\
         end=$(( $(date +%s) + {timeout} ))\n\
         while :; do\n\
         \x20 new=$(crictl ps -q --state running --name \"^$c\\$\" | head -n1)\n\
         \x20 r=$(ready)\n\
         \x20 if [ -n \"$new\" ] && [ \"$new\" != \"$old\" ] && [ \"$r\" = ok ]; then\n\
         \x20   echo \"$c restarted, API server ready\"; exit 0\n\
         \x20 fi\n\
         \x20 if [ \"$(date +%s)\" -ge \"$end\" ]; then\n\
         \x20   echo \"$c not back within {timeout}s: running container ${{new:-none}} (stopped $old); API /readyz: $r\" >&2; exit 1\n\
         \x20 fi\n\
         \x20 sleep 2\n\
         done\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_restart_script_is_valid_sh_and_waits_for_a_new_container_and_readyz() {
        let script = restart_script("kube-apiserver", 300);
        let out = std::process::Command::new("sh")
            .args(["-n", "-c", &script])
            .output()
            .expect("sh");
        assert!(out.status.success(), "{script}\n{out:?}");
        for part in [
            "c=kube-apiserver\n",
            "crictl stop \"$old\"",
            "[ \"$new\" != \"$old\" ]",
            "--tls-server-name kubernetes",
            "get --raw /readyz",
            "within 300s",
        ] {
            assert!(script.contains(part), "{part}: {script}");
        }
        assert!(!script.contains("curl"), "real nodes have no curl");
    }

    #[test]
    fn unknown_names_are_refused_before_anything_is_reached() {
        let c = crate::up::from_file::test_cluster("apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata: {name: rn}\nspec:\n  kubernetesVersion: v1.34.1\n  provider: ssh\n  nodes:\n    - {name: cp1, role: control-plane, address: 192.0.2.1}\n");
        let opts = RenewOptions {
            names: vec!["apiserver".into(), "ca".into()],
            ..RenewOptions::default()
        };
        let e = run(&c, &opts, Arc::new(crate::report::QuietReporter)).expect_err("refused");
        assert!(e.refused(), "{e}");
        assert!(
            e.to_string()
                .starts_with("`ca` is not a certificate kubeadm renews"),
            "{e}"
        );
    }
}
