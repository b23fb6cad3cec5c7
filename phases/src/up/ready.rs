//! `wait-ready`: polls the Nodes through the Kubernetes API from this machine (`GET /api/v1/nodes`
//! every 2 s, read-only) until every node of the file reports the `Ready` condition `True`, or
//! `--ready-timeout` passes; then names each node not Ready with the reason kubelet gives (e.g.
//! `container runtime network not ready: NetworkPluginNotReady`). With Calico, the tigera-operator's
//! TigeraStatus objects must be Available too, and those still progressing are named. With `cni: none`
//! nodes stay NotReady until a CNI is installed, so only the control-plane components (their static
//! pods Running and Ready) are waited for, and `up` says so.

use super::UpData;
use crate::ctx::NodeCtx;
use crate::error::PhaseError;
use clusterctl_kubeapi::{node_status, Node};
use std::time::{Duration, Instant};

/// How often the Nodes are listed.
pub(crate) const POLL: Duration = Duration::from_secs(2);

/// The nodes of `want` not Ready in `nodes`, each as `name (reason)`.
pub(crate) fn not_ready(nodes: &[Node], want: &[&str]) -> Vec<String> {
    want.iter()
        .filter_map(|w| {
            match nodes
                .iter()
                .find(|n| n.metadata.name.as_deref() == Some(*w))
            {
                None => Some(format!("{w} (not registered)")),
                Some(n) => {
                    let s = node_status(n);
                    (!s.ready).then(|| format!("{w} ({})", s.reason.unwrap_or_default()))
                }
            }
        })
        .collect()
}

/// The `wait-ready` phase; a dry run lists the Nodes once and notes which are not Ready yet. Errors: [`PhaseError::Check`] naming the nodes not Ready at the timeout
/// (or the last API error when the API server never answered).
pub(crate) fn run(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    let timeout = data.spec.ready_timeout;
    let no_cni = data.spec.cni == clusterctl_spec::model::CniPlugin::None;
    let calico = data
        .spec
        .cni_install
        .as_ref()
        .is_some_and(|c| c.input.plugin == "calico");
    let Some(api) = data.api.get(ctx)? else {
        ctx.info(&format!(
            "{} (Kubernetes API from this machine, timeout {}s)",
            waited_for(no_cni, calico),
            timeout.as_secs()
        ));
        return Ok(());
    };
    let want: Vec<&str> = data.spec.nodes.iter().map(|n| n.name.as_str()).collect();
    if no_cni {
        let note = "cni: none — the nodes stay NotReady until a CNI is installed (kubectl apply your CNI's manifests); waiting only for the control-plane components";
        ctx.info(note);
        data.reporter.note(&format!("wait-ready: {note}"));
    }
    let cps: Vec<&str> = data
        .spec
        .nodes
        .iter()
        .filter(|n| n.is_control_plane())
        .map(|n| n.name.as_str())
        .collect();
    let start = Instant::now();
    loop {
        let mut problems = if no_cni {
            ctx.api_query("list pods (GET /api/v1/pods)");
            match api.pods() {
                Ok(pods) => super::cni_install::control_plane_not_ready(&pods, &cps),
                Err(e) => vec![format!("the API server did not answer: {e}")],
            }
        } else {
            ctx.api_query("list nodes (GET /api/v1/nodes)");
            match api.nodes() {
                Ok(nodes) => not_ready(&nodes, &want),
                Err(e) => vec![format!("the API server did not answer: {e}")],
            }
        };
        if calico {
            ctx.api_query("list tigerastatuses (operator.tigera.io/v1)");
            match api.list_objects("operator.tigera.io/v1", "TigeraStatus") {
                Ok(s) => problems.extend(super::cni_install::calico_not_available(&s)),
                Err(e) => problems.push(format!("TigeraStatus: {e}")),
            }
        }
        if problems.is_empty() {
            return Ok(());
        }
        if ctx.mode.dry_run {
            // A dry run lists once and plans the wait: the nodes still to join cannot be Ready yet.
            ctx.info(&format!(
                "{} (timeout {}s); not yet: {}",
                waited_for(no_cni, calico),
                timeout.as_secs(),
                problems.join(", ")
            ));
            return Ok(());
        }
        if start.elapsed() >= timeout {
            return Err(ctx.check_error(vec![format!(
                "not Ready after {}s: {}",
                timeout.as_secs(),
                problems.join(", ")
            )]));
        }
        std::thread::sleep(POLL.min(timeout));
    }
}

/// What the phase waits for, as a dry run's plan says it: every node Ready, or with `cni: none`
/// only the control-plane components (their static pods Running and Ready: the nodes stay NotReady
/// without a CNI); with Calico also its TigeraStatus objects Available.
fn waited_for(no_cni: bool, calico: bool) -> String {
    let what = if no_cni {
        "wait until the control-plane components are Running and Ready (cni: none: the nodes stay NotReady until a CNI is installed)"
    } else {
        "wait until every node is Ready"
    };
    if calico {
        format!("{what} and Calico's TigeraStatus objects Available")
    } else {
        what.to_string()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_the_nodes_not_ready_with_their_reason() {
        let nodes: Vec<clusterctl_kubeapi::Node> = serde_json::from_str(
            r#"[{"metadata":{"name":"c1"},"status":{"conditions":[{"type":"Ready","status":"True"}]}},
                {"metadata":{"name":"w1"},"status":{"conditions":[{"type":"Ready","status":"False","reason":"KubeletNotReady","message":"container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"}]}}]"#,
        )
        .expect("nodes");
        let out = super::not_ready(&nodes, &["c1", "w1", "w2"]);
        assert_eq!(out.len(), 2, "{out:?}");
        assert!(
            out[0].starts_with("w1 (container runtime network not ready: NetworkPluginNotReady")
        );
        assert_eq!(out[1], "w2 (not registered)");
    }
}
