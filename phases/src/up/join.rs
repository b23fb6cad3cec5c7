//! `join/control-plane` (one node at a time, so etcd grows one member at a time) and `join/worker` (in
//! parallel): `kubeadm join --config <file>`, unless an earlier join finished. The rendered
//! `JoinConfiguration` carries the node's labels and taints at registration
//! (`nodeRegistration.kubeletExtraArgs` `node-labels`, `nodeRegistration.taints`); the discovery token,
//! CA cert hash and certificate key are filled in here and the file is written 0600.
//!
//! Whether a join finished is judged by what kubeadm does last ([`STATE_SCRIPT`] on the node), not by
//! `/etc/kubernetes/kubelet.conf`: the kubelet writes that file as soon as kubeadm's `kubelet-start`
//! starts it ("will bootstrap in background"), before its TLS bootstrap. kubeadm ≥ 1.33 joins a control
//! plane in the order `control-plane-prepare` → `kubelet-start` → `etcd-join` (the member added as a
//! learner, its static pod written, then promoted) → `kubelet-wait-bootstrap` → `control-plane-join`
//! (`mark-control-plane`) → `wait-control-plane` (`ControlPlaneKubeletLocalMode`: the new kubelet
//! bootstraps against the new local API server, which answers only once its etcd member is promoted).
//!
//! - a worker has joined once `kubelet.conf` exists and the kubelet runs: the kubelet finishes its
//!   bootstrap on its own (it is started when it was left stopped — `kubelet-start` stops it before
//!   writing its configuration);
//! - a control plane has joined once, in addition, its Node carries the control-plane label (read
//!   through the first control plane), which kubeadm's `mark-control-plane` sets last. A control plane
//!   with `kubelet.conf` but without the label is finished with kubeadm's own idempotent phases, each
//!   `--config <file>`: from 1.35 `kubeadm join phase etcd-join` (skipped when the Node is registered:
//!   real kubeadm 1.34 fails on an already promoted member), `kubelet-wait-bootstrap`,
//!   `control-plane-join all`; in 1.33 and
//!   1.34 `etcd-join`, then `up` waits for the Node (no `kubelet-wait-bootstrap` phase yet), then
//!   `control-plane-join all`; up to 1.32 (the etcd member added in `control-plane-join`) the wait and
//!   `control-plane-join all`;
//! - what `kubeadm join` writes before `kubelet.conf` (the cluster CA, the bootstrap kubeconfig, the
//!   control-plane static pods, etcd's data) without `kubelet.conf` is a half-done join, which would fail
//!   again on its own leftovers (kubeadm's preflight refuses an existing `ca.crt`, manifests and a
//!   non-empty `/var/lib/etcd`): it is reset first (`kubeadm reset --config reset.yaml`, whose
//!   `force: true` skips the prompt; it also removes the node's etcd member when its etcd manifest
//!   was written), the kube-vip manifest is put
//!   back on a control plane, and the join runs again.

use super::{credentials, UpData, KUBECTL};
use crate::ctx::NodeCtx;
use crate::error::PhaseError;
use crate::kubeadm::patch_join;
use crate::up::placed;
use clusterctl_exec::shell::quote_word;
use clusterctl_exec::Cmd;
use std::time::Duration;

/// The label kubeadm's `mark-control-plane` puts on a control plane's Node.
pub(crate) const CONTROL_PLANE_LABEL: &str = "node-role.kubernetes.io/control-plane";

/// The kubeadm phases that finish a control-plane join whose kubelet was started, in kubeadm's
/// order (each run with `--config <join configuration>`); all of them are safe to run again. This is
/// the list of kubeadm ≥ 1.35, where `ControlPlaneKubeletLocalMode` is on: the etcd member joins in
/// `etcd-join` and the kubelet's bootstrap is waited for in `kubelet-wait-bootstrap`.
pub(crate) const FINISH_CONTROL_PLANE_PHASES: &[&str] = &[
    "etcd-join",
    "kubelet-wait-bootstrap",
    "control-plane-join all",
];

/// The same for kubeadm 1.33 and 1.34, where `ControlPlaneKubeletLocalMode` is beta and on: the
/// kubelet of a joining control plane talks to its own, new API server, which answers only once the
/// node's etcd member joined in `etcd-join`; there is no `kubelet-wait-bootstrap` phase yet (real
/// kubeadm 1.34 answers `kubeadm join phase kubelet-wait-bootstrap --config …` with "unknown flag:
/// --config", the phase name being taken for an argument of `phase`), so `up` waits for the Node
/// itself ([`wait_registered_script`]) before `control-plane-join all` marks it.
pub(crate) const FINISH_CONTROL_PLANE_PHASES_1_33: &[&str] =
    &["etcd-join", "control-plane-join all"];

/// The same for kubeadm ≤ 1.32 (the gate off): the kubelet talks to the control-plane endpoint and
/// `control-plane-join all` adds the etcd member (`etcd`; an existing member is kept) and marks the node.
pub(crate) const FINISH_CONTROL_PLANE_PHASES_1_32: &[&str] = &["control-plane-join all"];

/// The finishing phases of the kubeadm of Kubernetes `version`.
pub(crate) fn finish_control_plane_phases(version: &semver::Version) -> &'static [&'static str] {
    match version.minor {
        m if m <= 32 => FINISH_CONTROL_PLANE_PHASES_1_32,
        m if m <= 34 => FINISH_CONTROL_PLANE_PHASES_1_33,
        _ => FINISH_CONTROL_PLANE_PHASES,
    }
}

/// True (exit 0) when the kubelet's own credentials read its Node `name`.
fn registered_check(name: &str) -> String {
    format!(
        "kubectl --kubeconfig /etc/kubernetes/kubelet.conf --request-timeout=10s get node {} -o name >/dev/null 2>&1",
        quote_word(name)
    )
}

/// Waits (up to 240 s) until the kubelet has registered the Node `name`, asked with the kubelet's own
/// credentials (`kubelet.conf`; the node authorizer lets a kubelet read its Node); on timeout fails
/// with the kubelet's state and the end of its journal.
pub(crate) fn wait_registered_script(name: &str) -> String {
    let n = quote_word(name);
    format!(
        "i=0; until kubectl --kubeconfig /etc/kubernetes/kubelet.conf get node {n} -o name >/dev/null 2>&1; do \
         i=$((i+1)); if [ $i -ge 240 ]; then echo \"the kubelet did not register node {name} within 240 s (kubelet: $(systemctl is-active kubelet))\" >&2; \
         journalctl -u kubelet -n 15 --no-pager >&2 2>/dev/null; exit 1; fi; sleep 1; done"
    )
}

/// How far an earlier `kubeadm join` on this node got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JoinState {
    /// Nothing of a join.
    Fresh,
    /// Leftovers of a join stopped before its kubelet started (CA, bootstrap kubeconfig, static
    /// pods, etcd data; no `kubelet.conf`).
    Half,
    /// `kubelet.conf`: kubeadm started the kubelet (a control plane may still lack its etcd
    /// promotion, TLS bootstrap and `mark-control-plane`).
    Joined {
        /// The kubelet unit is active.
        kubelet_active: bool,
    },
}

/// The read-only query of how far a join got: `joined kubelet=<systemctl is-active>`, `half` or
/// `fresh`.
pub(crate) const STATE_SCRIPT: &str = "if [ -f /etc/kubernetes/kubelet.conf ]; then echo \"joined kubelet=$(systemctl is-active kubelet 2>/dev/null)\"; \
elif test -e /etc/kubernetes/pki/ca.crt -o -e /etc/kubernetes/bootstrap-kubelet.conf \
 -o -e /etc/kubernetes/manifests/kube-apiserver.yaml -o -e /etc/kubernetes/manifests/etcd.yaml \
 -o -d /var/lib/etcd/member; then echo half; else echo fresh; fi";

/// Parses [`STATE_SCRIPT`]'s output.
pub(crate) fn parse_state(out: &str) -> JoinState {
    let out = out.trim();
    if let Some(k) = out.strip_prefix("joined") {
        JoinState::Joined {
            kubelet_active: k.trim() == "kubelet=active",
        }
    } else if out == "half" {
        JoinState::Half
    } else {
        JoinState::Fresh
    }
}

/// True when the Node `name` (as `kubectl get node -o json` prints it) carries the control-plane label.
pub(crate) fn marked_control_plane(node_json: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(node_json)
        .ok()
        .and_then(|v| v["metadata"]["labels"].as_object().cloned())
        .is_some_and(|l| l.contains_key(CONTROL_PLANE_LABEL))
}

/// Whether the Node of `ctx`'s node carries the control-plane label, asked on the first control plane
/// (`None` offline; `false` when the Node is not found).
fn is_marked(ctx: &mut NodeCtx, data: &UpData) -> Result<Option<bool>, PhaseError> {
    let name = ctx.name().to_string();
    let phase = format!("{}/check", ctx.phase);
    super::on_first_cp(ctx, data, phase, |_, cp| {
        let out = cp.query(Cmd::new(format!(
            "{KUBECTL} get node {} -o json",
            quote_word(&name)
        )))?;
        Ok(out.map(|o| o.success() && marked_control_plane(&o.stdout_str())))
    })
}

/// Resets a half-done join and, on a control plane, puts the kube-vip manifest back.
fn reset_half_join(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    let why = "a kubeadm join stopped half-way here before (CA, bootstrap kubeconfig or static pods, no kubelet.conf): reset first";
    ctx.announce(why);
    super::init::reset_half(ctx, data)
}

/// The join phases.
pub(crate) fn run(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    let cp = ctx.node.is_control_plane();
    let state = ctx
        .read_labelled(
            STATE_SCRIPT,
            Some("how far an earlier kubeadm join got (kubelet.conf, CA, static pods, etcd data)"),
        )?
        .map(|o| parse_state(&o))
        .unwrap_or(JoinState::Fresh);
    let mut finish_control_plane = false;
    match state {
        JoinState::Joined { kubelet_active } => {
            if !kubelet_active {
                // kubeadm's kubelet-start stops the kubelet, writes its configuration, starts it again.
                ctx.run_script("systemctl start kubelet")?;
            }
            if !cp || is_marked(ctx, data)? != Some(false) {
                return Ok(());
            }
            let why = format!(
                "an earlier kubeadm join stopped after starting this control plane's kubelet, before it was marked (no control-plane label): finishing it with kubeadm's phases {}",
                finish_control_plane_phases(&data.spec.kubernetes_version).join(", ")
            );
            let why = why.as_str();
            ctx.announce(why);
            finish_control_plane = true;
        }
        JoinState::Half => reset_half_join(ctx, data)?,
        JoinState::Fresh => {}
    }
    let Some(cfg) = data
        .files_of(ctx.name(), placed::KUBEADM_JOIN)
        .into_iter()
        .next()
    else {
        return Err(ctx.local_error(format!(
            "no kubeadm join configuration was rendered for node {}",
            ctx.name()
        )));
    };
    let secrets = credentials::get(ctx, data, cp)?.unwrap_or_else(credentials::placeholders);
    let text = patch_join(
        &String::from_utf8_lossy(&cfg.content),
        &secrets,
        cp,
        &data.spec.endpoint,
    )
    .map_err(|e| ctx.local_error_from(&e))?;
    ctx.put_file(&cfg.path, 0o600, text.as_bytes())?;
    let scripts: Vec<String> = if finish_control_plane {
        let phases = finish_control_plane_phases(&data.spec.kubernetes_version);
        let mut s = Vec::new();
        for p in phases {
            if *p == "control-plane-join all" && !phases.contains(&"kubelet-wait-bootstrap") {
                // kubeadm ≤ 1.34 has no phase that waits for the kubelet's bootstrap, which the
                // stopped join may not have seen finish; `mark-control-plane` gives the Node one
                // minute.
                s.push(wait_registered_script(ctx.name()));
            }
            let run = format!("kubeadm join phase {p} --config {}", quote_word(&cfg.path));
            if *p == "etcd-join" {
                // Not idempotent in real kubeadm 1.34: run again on a member already promoted it
                // fails with "etcdserver: can only promote a learner member". A registered Node
                // means the node's own API server answered, so its etcd member is promoted.
                s.push(format!(
                    "if {}; then echo 'the Node is registered: its etcd member already joined'; else {run}; fi",
                    registered_check(ctx.name())
                ));
            } else {
                s.push(run);
            }
        }
        s
    } else {
        vec![format!("kubeadm join --config {}", quote_word(&cfg.path))]
    };
    for script in scripts {
        let mut cmd = Cmd::new(script);
        cmd.timeout = Some(Duration::from_secs(600));
        ctx.run(cmd)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn judges_a_join_by_what_kubeadm_does_last() {
        assert_eq!(
            parse_state("joined kubelet=active\n"),
            JoinState::Joined {
                kubelet_active: true
            }
        );
        assert_eq!(
            parse_state("joined kubelet=inactive"),
            JoinState::Joined {
                kubelet_active: false
            }
        );
        assert_eq!(parse_state("half"), JoinState::Half);
        assert_eq!(parse_state("fresh"), JoinState::Fresh);
        assert!(marked_control_plane(
            r#"{"metadata":{"name":"c2","labels":{"node-role.kubernetes.io/control-plane":""}}}"#
        ));
        assert!(!marked_control_plane(
            r#"{"metadata":{"name":"c2","labels":{"kubernetes.io/hostname":"c2"}}}"#
        ));
        assert!(!marked_control_plane("Error from server (NotFound)"));
    }

    fn v(text: &str) -> semver::Version {
        clusterctl_spec::versions::parse_version(text).expect("version")
    }

    #[test]
    fn finishing_phases_follow_the_kubeadm_version() {
        // Real kubeadm 1.34 has no kubelet-wait-bootstrap phase (its run failed with "unknown flag:
        // --config" on the real HA cluster), and without etcd-join the joining node's own API server
        // (which its kubelet talks to) never answered; 1.35 and 1.36 have both; 1.31 neither.
        assert_eq!(
            finish_control_plane_phases(&v("1.34.4")),
            &["etcd-join", "control-plane-join all"]
        );
        assert_eq!(
            finish_control_plane_phases(&v("v1.33.13")),
            FINISH_CONTROL_PLANE_PHASES_1_33
        );
        assert_eq!(
            finish_control_plane_phases(&v("v1.31.0")),
            &["control-plane-join all"]
        );
        assert_eq!(
            finish_control_plane_phases(&v("1.35.4")),
            &[
                "etcd-join",
                "kubelet-wait-bootstrap",
                "control-plane-join all"
            ]
        );
        assert_eq!(
            finish_control_plane_phases(&v("v1.36.3")),
            FINISH_CONTROL_PLANE_PHASES
        );
        assert!(wait_registered_script("c2").contains("get node c2 -o name"));
        assert!(registered_check("c2").contains("kubelet.conf"));
    }
}
