//! One node's reset, shared by `destroy` and `node remove`. Every step is attempted, in this order, and
//! reported on its own line (a failed one does not stop the next):
//! 1. `kubeadm reset -f --config /etc/kubernetes/kubeadm/reset.yaml` (the rendered v1beta4
//!    ResetConfiguration, placed first), when kubeadm is installed;
//! 2. `units`: clusterctl's units (the CNI agent; the node environment of unprivileged-container
//!    nodes) stopped and disabled;
//! 3. `network`: the VXLAN device, the masquerade rule in either form, the devices, iptables chains
//!    and ipsets of flannel, Calico or Cilium ([`super::cni_leftovers`]: of the file's CNI, and of any
//!    of them the node still shows), and, on control planes, the kube-vip VIP wherever it is still
//!    assigned;
//! 4. `kube-proxy`: the `KUBE-*` iptables chains (and the jumps to them) and kube-proxy's nftables
//!    tables, which `kubeadm reset` leaves;
//! 5. `restore` (the undo record, `crate::undo`): runtime configuration files `up` replaced are copied
//!    back (and the runtime restarted), `/etc/fstab` and the swap devices `--fix` turned off restored;
//! 6. `files`: every file clusterctl rendered for the node (the runtime's own config only when recorded
//!    and not restored) or recorded as placed (the state record), the CNI config, plugin binary and
//!    IPAM state (with flannel, Calico or Cilium also their plugins and state), the configuration
//!    file of each CNI clusterctl installs (`up::preflight::cni_switch::CONFLISTS`: a cluster rebuilt
//!    with `up --recreate` after its file changed `cni.plugin` starts clean), the `--fix` module and
//!    sysctl files, removed; then the empty directories `up` made;
//! 7. `packages`, with `--purge` only: the packages machinery's removal (`crate::packages::script::purge`):
//!    with the record `up`'s `packages` phase wrote, the node's package state as it was before `up`
//!    (what it installed purged, holds it added released, its repository files, keyrings, CA and
//!    containerd archive removed); without one, the Kubernetes packages and the file's
//!    `airgap.packages` purged;
//! 8. `systemd`: `systemctl daemon-reload`.

use std::collections::BTreeSet;

use clusterctl_render::kubeadm::RESET_PATH;
use clusterctl_render::RenderedFile;
use clusterctl_spec::{ValidCluster, ValidNode};

use super::cni_leftovers::{self, CniLeftovers};
use super::scripts;
use crate::ctx::NodeCtx;
use crate::error::PhaseError;
use crate::steps::{printed, StepLine, Steps};

/// What a node's teardown needs besides its context and rendered files.
#[derive(Debug, Clone, Default)]
pub struct Teardown {
    /// The kube-vip VIP to take off the node's interfaces (control planes of a cluster with a VIP).
    pub vip: Option<String>,
    /// Packages to purge; empty: none (no `--purge`).
    pub purge: Vec<String>,
    /// The third-party CNIs whose devices, chains, ipsets and files go too: the file's (flannel,
    /// Calico, Cilium); [`reset_node`] adds any other the node still shows.
    pub cnis: Vec<&'static CniLeftovers>,
}

impl Teardown {
    /// The teardown of `node` of `cluster`; `purge`: with `--purge`.
    pub fn of(cluster: &ValidCluster, node: &ValidNode, purge: bool) -> Self {
        let mut packages: Vec<String> = Vec::new();
        if purge {
            packages.extend(scripts::K8S_PACKAGES.iter().map(|p| p.to_string()));
            if let Some(a) = &cluster.spec().airgap {
                for p in &a.packages {
                    if !packages.contains(&p.name) {
                        packages.push(p.name.clone());
                    }
                }
            }
        }
        Teardown {
            vip: node
                .is_control_plane()
                .then(|| cluster.vip().map(|v| v.to_string()))
                .flatten(),
            purge: packages,
            cnis: cni_leftovers::of(cluster.spec().networking.cni.plugin)
                .into_iter()
                .collect(),
        }
    }
}

/// Resets the node of `ctx` (steps in the module doc), each step's line added to `steps`. `cluster`:
/// the cluster's name (the state record is read only when it names it); `rendered`: the node's files.
pub fn reset_node(
    ctx: &mut NodeCtx,
    cluster: &str,
    rendered: &[RenderedFile],
    teardown: &Teardown,
    steps: &Steps,
) {
    let node = ctx.name().to_string();
    let line = |step: &str, r: Result<String, PhaseError>| steps.push(StepLine::of(&node, step, r));
    // A CNI's teardown also when the file names another CNI now but the node still runs it
    // (`up --recreate` of a cluster whose file switched its CNI).
    let mut teardown = teardown.clone();
    if ctx.can_query() {
        if let Ok(Some(out)) = ctx.read(&cni_leftovers::detect_script()) {
            for cni in cni_leftovers::detected(&out) {
                if !teardown.cnis.contains(&cni) {
                    teardown.cnis.push(cni);
                }
            }
        }
    }
    let teardown = &teardown;
    line("kubeadm reset", kubeadm_reset(ctx, rendered));
    line("units", run(ctx, &scripts::units_script()));
    line(
        "network",
        run(
            ctx,
            &scripts::network_script(teardown.vip.as_deref(), &teardown.cnis),
        ),
    );
    line("kube-proxy", run(ctx, &scripts::kube_proxy_script()));
    let restored = match restore(ctx) {
        Ok((done, restored)) => {
            line("restore", Ok(done));
            restored
        }
        Err(e) => {
            line("restore", Err(e));
            Vec::new()
        }
    };
    line("files", files(ctx, cluster, rendered, &restored, teardown));
    if !teardown.purge.is_empty() {
        line(
            "packages",
            run(ctx, &crate::packages::script::purge(&teardown.purge)),
        );
    }
    line("systemd", run(ctx, scripts::DAEMON_RELOAD));
}

/// Runs a step's script; what it printed (or that it is planned).
fn run(ctx: &mut NodeCtx, script: &str) -> Result<String, PhaseError> {
    Ok(printed(ctx.run_script(script)?))
}

fn kubeadm_reset(ctx: &mut NodeCtx, rendered: &[RenderedFile]) -> Result<String, PhaseError> {
    // Offline (dry run) the reset is planned as if kubeadm were installed.
    let installed = match ctx.read(scripts::HAS_KUBEADM) {
        Ok(Some(s)) => s == "yes",
        Ok(None) => true,
        Err(_) => false,
    };
    if !installed {
        return Ok("skipped (kubeadm not installed)".to_string());
    }
    if let Some(f) = rendered.iter().find(|f| f.path == RESET_PATH) {
        ctx.put_file(RESET_PATH, f.mode, &f.content)?;
    }
    Ok(match ctx.run_script(&scripts::kubeadm_reset())? {
        Some(_) => "done".to_string(),
        None => "planned (dry run)".to_string(),
    })
}

/// Restores what `up` replaced; returns what was done and the restored paths (never deleted after).
fn restore(ctx: &mut NodeCtx) -> Result<(String, Vec<String>), PhaseError> {
    let script = format!(
        "{}\n{}",
        crate::undo::RESTORE_SCRIPT,
        crate::undo::RESTORE_HOST_SCRIPT
    );
    let Some(out) = ctx.run_script(&script)? else {
        ctx.info("the container runtime is restarted when its configuration was restored");
        return Ok(("planned (dry run)".to_string(), Vec::new()));
    };
    let out = out.stdout_str();
    let restored = crate::undo::restored_paths(&out);
    let mut done: Vec<String> = out.lines().map(str::to_string).collect();
    let restart = scripts::restart_runtime_script(&restored);
    if !restart.is_empty() {
        done.push(printed(ctx.run_script(&restart)?));
    }
    let text = if done.is_empty() {
        "nothing recorded".to_string()
    } else {
        done.join("; ")
    };
    Ok((text, restored))
}

fn files(
    ctx: &mut NodeCtx,
    cluster: &str,
    rendered: &[RenderedFile],
    restored: &[String],
    teardown: &Teardown,
) -> Result<String, PhaseError> {
    let recorded: BTreeSet<String> = match ctx.read_file(crate::state::STATE_PATH) {
        Ok(Some(Some(bytes))) => crate::state::NodeState::parse(&bytes, cluster, ctx.name())
            .map(|s| s.files.keys().cloned().collect())
            .unwrap_or_default(),
        _ => BTreeSet::new(),
    };
    // The runtime's own config may have been there before clusterctl: removed only when recorded.
    let mut paths: BTreeSet<String> = rendered
        .iter()
        .filter(|f| !scripts::RUNTIME_CONFIG.contains(&f.purpose) || recorded.contains(&f.path))
        .map(|f| f.path.clone())
        .collect();
    paths.extend(recorded);
    paths.extend(scripts::INSTALLED_PATHS.iter().map(|s| s.to_string()));
    // The configuration of whichever CNI clusterctl installed (kubeadm reset leaves /etc/cni/net.d).
    paths.extend(scripts::cni_conflists());
    for cni in &teardown.cnis {
        paths.extend(cni.paths.iter().map(|s| s.to_string()));
    }
    let paths: Vec<String> = paths
        .into_iter()
        .filter(|p| p.starts_with('/') && p.len() > 1 && !p.contains("/../"))
        .filter(|p| !restored.contains(p))
        .collect();
    run(ctx, &scripts::files_script(&paths))
}
