//! `cni`: the builtin dataplane — the clusterctl binary uploaded once per node as
//! `/usr/local/bin/clusterctl` (what the agent unit runs: `clusterctl cni agent --config
//! /etc/clusterctl/cni/agent.json`) and the dedicated plugin embedded in clusterctl
//! (`clusterctl_cni_embed::PLUGIN`) written to `/opt/cni/bin/clusterctl-cni` — each skipped when
//! the node's copy has the same sha256 —, the rendered `agent.json`, conflist template and unit
//! placed, and the agent unit `clusterctl-cni-agent.service` enabled and (re)started when something
//! it reads changed — on every node (the RBAC manifest, applied on the first control plane, is not
//! read by the agent). A node of another architecture than this binary's gets the agent built for it
//! from the bundle instead (`airgap bundle --agent ARCH=PATH`, placed by `airgap/packages`), as both
//! the binary and the plugin. Third-party CNIs are installed by `up::cni_install`; [`run_manifests`]
//! (`kubectl apply` of rendered manifests on the first control plane) is left for a CNI without
//! such an install.

use super::{UpData, KUBECTL};
use crate::ctx::NodeCtx;
use crate::error::PhaseError;
use crate::up::placed;
use clusterctl_exec::shell::quote_word;
use clusterctl_spec::ValidNode;

/// Where the builtin plugin binary is installed (CNI `binDir`).
pub(crate) const PLUGIN_PATH: &str = "/opt/cni/bin/clusterctl-cni";
/// Where the clusterctl binary is installed on nodes (the agent unit's `ExecStart`).
pub(crate) const BINARY_PATH: &str = "/usr/local/bin/clusterctl";
/// The agent's systemd unit name.
pub(crate) const AGENT_UNIT: &str = "clusterctl-cni-agent.service";
/// The unit used when the renderer provides none: the installed binary run as
/// `clusterctl cni agent --config /etc/clusterctl/cni/agent.json`.
pub(crate) const DEFAULT_UNIT: &str = "[Unit]\nDescription=clusterctl CNI overlay agent\nAfter=network-online.target\nWants=network-online.target\n\n[Service]\nExecStart=/usr/local/bin/clusterctl cni agent --config /etc/clusterctl/cni/agent.json\nRestart=always\nRestartSec=5\n\n[Install]\nWantedBy=multi-user.target\n";

/// Digest material of the `cni` phase, the one for every CNI choice: the node's CNI files (path,
/// mode, sha256), then for a third-party CNI installed from upstream files what it installs
/// ([`super::cni_install::inputs`]), else the clusterctl binary's size and modification time.
pub(crate) fn inputs(data: &UpData, node: &ValidNode) -> String {
    let mut s = super::files_inputs(data, node, &[placed::CNI]);
    if let Some(ci) = &data.spec.cni_install {
        s.push_str(&super::cni_install::inputs(ci));
    } else if let Some(b) = &data.spec.binary {
        if let Ok(m) = std::fs::metadata(b) {
            let t = m
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| d.as_secs())
                .unwrap_or(0);
            s.push_str(&format!("binary {} {t}\n", m.len()));
        }
    }
    s
}

/// The builtin CNI phase (every node).
pub(crate) fn run_builtin(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    let Some(bin) = &data.spec.binary else {
        return Err(ctx.local_error(
            "the path of the clusterctl binary to install as the CNI plugin is unknown",
        ));
    };
    let mut changed = match bundled_agent(data, ctx.name()) {
        Some(agent) => install_bundled_agent(ctx, &agent)?,
        None => {
            // The dedicated plugin carried inside clusterctl (`clusterctl-cni-embed`), not a copy of
            // the multi-call binary: it starts faster on every CNI call.
            ctx.put_local_file(bin, BINARY_PATH, 0o755)?
                | ctx.put_file(
                    PLUGIN_PATH,
                    clusterctl_cni_embed::MODE,
                    clusterctl_cni_embed::PLUGIN,
                )?
        }
    };
    let files = data.files_of(ctx.name(), placed::CNI);
    let unit_path = format!("/etc/systemd/system/{AGENT_UNIT}");
    let has_unit = files.iter().any(|f| f.path == unit_path);
    let mut unit_changed = false;
    for f in &files {
        let c = ctx.put_file(&f.path, f.mode, &f.content)?;
        // A cluster manifest (applied below) is nothing the running agent reads: placing it on a
        // control plane that has just become the first does not restart the agent.
        changed |= c && !is_cluster_manifest(&f.path);
        unit_changed |= c && f.path == unit_path;
    }
    if !has_unit {
        let c = ctx.put_file(&unit_path, 0o644, DEFAULT_UNIT.as_bytes())?;
        changed |= c;
        unit_changed |= c;
    }
    if unit_changed {
        ctx.run_script("systemctl daemon-reload")?;
    }
    for f in files.iter().filter(|f| is_cluster_manifest(&f.path)) {
        // Cluster manifests of the builtin CNI (the agent's ServiceAccount and RBAC), on the first
        // control plane only.
        ctx.run_script(&format!("{KUBECTL} apply -f {}", quote_word(&f.path)))?;
    }
    if changed {
        ctx.run_script(&format!(
            "systemctl enable {AGENT_UNIT} && systemctl restart {AGENT_UNIT}"
        ))?;
    } else if ctx.test(&format!("systemctl is-active --quiet {AGENT_UNIT}"))? != Some(true) {
        ctx.run_script(&format!("systemctl enable --now {AGENT_UNIT}"))?;
    }
    Ok(())
}

/// Whether the builtin CNI's file at `path` is a cluster manifest (the agent's ServiceAccount and RBAC,
/// `.yaml`, applied with kubectl on the first control plane) rather than something the agent reads.
fn is_cluster_manifest(path: &str) -> bool {
    path.ends_with(".yaml")
}

/// For a node whose architecture (facts) differs from this binary's: where `airgap/packages` put the
/// bundle's agent built for it (`airgap bundle --agent`), when the bundle carries one. Preflight's
/// `arch` check refused the node otherwise.
fn bundled_agent(data: &UpData, node: &str) -> Option<String> {
    let uname = data.facts_of(node).arch;
    let arch = clusterctl_airgap::node::oci_arch(&uname);
    if uname.trim().is_empty() || arch == super::preflight::arch::local_arch() {
        return None;
    }
    super::airgap::agent_on_node(data, &arch)
}

/// Installs the bundle's agent `agent` (already on the node) as the clusterctl binary and as the CNI
/// plugin (the multi-call binary answers as `clusterctl-cni` by its name), unless both already are
/// it. Returns whether it changed anything.
fn install_bundled_agent(ctx: &mut NodeCtx, agent: &str) -> Result<bool, PhaseError> {
    let a = quote_word(agent);
    let same = format!("cmp -s {a} {BINARY_PATH} && cmp -s {a} {PLUGIN_PATH}");
    if ctx.test(&same)? == Some(true) {
        return Ok(false);
    }
    ctx.run_script(&format!(
        "install -m 0755 {a} {BINARY_PATH} && install -D -m 0755 {a} {PLUGIN_PATH}"
    ))?;
    Ok(true)
}

/// The manifest CNI phase (first control plane): places the manifests and applies them (server-side
/// idempotent; the phase runs only when not recorded done with the same manifests).
pub(crate) fn run_manifests(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    let files = data.files_of(ctx.name(), placed::CNI);
    super::files::place(ctx, &files)?;
    for f in files.iter().filter(|f| {
        f.path.ends_with(".yaml") || f.path.ends_with(".yml") || f.path.ends_with(".json")
    }) {
        ctx.run_script(&format!("{KUBECTL} apply -f {}", quote_word(&f.path)))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_rbac_manifests_are_cluster_manifests() {
        assert!(is_cluster_manifest("/etc/clusterctl/cni/rbac.yaml"));
        for agent_reads in [
            "/etc/clusterctl/cni/agent.json",
            "/etc/systemd/system/clusterctl-cni-agent.service",
            "/etc/cni/net.d/10-clusterctl.conflist",
        ] {
            assert!(!is_cluster_manifest(agent_reads), "{agent_reads}");
        }
    }
}
