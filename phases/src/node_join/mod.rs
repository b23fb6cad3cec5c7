//! `clusterctl node join`: the phases of `up` restricted to nodes that are in the cluster file but not
//! yet in the cluster. The engine runs over the first control plane (which already ran `init`; its
//! recorded phases are skipped and its checks find nothing to change) plus the joining nodes, with the
//! phases that only concern the existing cluster left out (`init`, `control-plane/kube-vip-admin`, the
//! manifest-applying `cni`, the day-2 `rollout/*` and `kubeconfig`). Control planes join one at a time, workers in parallel,
//! through the same join credentials as `up` (`up::credentials`: a fresh bootstrap token when the
//! 24-hour one expires within the hour, a fresh certificate key and `kubeadm init phase upload-certs
//! --upload-certs` when the 2-hour upload is older than 1 h 50 min).

mod run;

pub use run::{prepare, JoinError, JoinOptions, Joined, Prepared};

use crate::engine::{Phase, Targets};
use crate::up::{self, UpData, UpSpec};
use clusterctl_spec::model::CniPlugin;
use clusterctl_spec::ValidNode;

/// Phases of `up` that `node join` never runs (names or path prefixes, as `--skip-phases`): they only
/// concern the first control plane, the existing cluster's day-2 rollout, or this machine, and are
/// `up`'s to run.
pub const LEFT_OUT: &[&str] = &[
    "init",
    "control-plane/kube-vip-admin",
    "kubeconfig",
    "rollout",
];

fn left_out(name: &str) -> bool {
    LEFT_OUT
        .iter()
        .any(|p| name == *p || name.starts_with(&format!("{p}/")))
}

/// Why a `node join` request is refused (each names the nodes concerned).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JoinRefused {
    /// No node was named.
    #[error("name at least one node to join")]
    NoNode,
    /// Named nodes that the cluster file does not declare (names; the file's nodes).
    #[error("node(s) {0} not in the cluster file (it declares: {1}); add them to the file first")]
    NotInFile(String, String),
    /// Named nodes already registered in the cluster (names).
    #[error("node(s) {0} already in the cluster (registered Node objects); nothing to join")]
    AlreadyJoined(String),
    /// The first control plane was named: `up` made the cluster on it (its name).
    #[error(
        "node {0} is the first control plane, on which `up` made the cluster; nothing to join"
    )]
    FirstControlPlane(String),
}

/// The phases `node join` runs for `spec`, in `up`'s order: `up::phases` with those [`runs`] keeps.
pub fn phases(spec: &UpSpec) -> Vec<Phase<UpData>> {
    up::phases(spec)
        .into_iter()
        .filter(|p| runs(p.name, p.targets, &spec.cni))
        .collect()
}

/// Whether `node join` runs the phase `name` of `up` (which targets `targets`): not the [`LEFT_OUT`]
/// ones, and not `cni` when it only applies manifests on the first control plane (the builtin CNI's
/// phase installs the plugin on every node, so it stays).
pub fn runs(name: &str, targets: Targets, cni: &CniPlugin) -> bool {
    let manifests_only = name == "cni"
        && targets == Targets::FirstControlPlane
        && !matches!(cni, CniPlugin::Builtin | CniPlugin::None);
    !left_out(name) && !manifests_only
}

/// The nodes the engine runs over: the first control plane, then the `requested` nodes, in the file
/// order of `nodes` (the cluster file's, e.g. `UpSpec::nodes`). Errors: no node named, a name the file
/// does not declare, or a node already `registered` (the first control plane always counts as
/// registered).
pub fn engine_nodes(
    nodes: &[ValidNode],
    requested: &[String],
    registered: &[String],
) -> Result<Vec<ValidNode>, JoinRefused> {
    if requested.is_empty() {
        return Err(JoinRefused::NoNode);
    }
    let unknown: Vec<&str> = requested
        .iter()
        .filter(|r| !nodes.iter().any(|n| &n.name == *r))
        .map(String::as_str)
        .collect();
    if !unknown.is_empty() {
        let all: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
        return Err(JoinRefused::NotInFile(unknown.join(", "), all.join(", ")));
    }
    let first = nodes.iter().find(|n| n.is_control_plane());
    if let Some(f) = first.filter(|f| requested.contains(&f.name)) {
        return Err(JoinRefused::FirstControlPlane(f.name.clone()));
    }
    let joined: Vec<&str> = requested
        .iter()
        .filter(|r| registered.contains(r))
        .map(String::as_str)
        .collect();
    if !joined.is_empty() {
        return Err(JoinRefused::AlreadyJoined(joined.join(", ")));
    }
    Ok(nodes
        .iter()
        .filter(|n| first.is_some_and(|f| f.name == n.name) || requested.contains(&n.name))
        .cloned()
        .collect())
}

/// Why the cluster's registered Nodes could not be listed.
#[derive(Debug, thiserror::Error)]
pub enum ListError {
    /// No API client could be made from the first control plane's `admin.conf`.
    #[error(transparent)]
    Client(#[from] crate::error::PhaseError),
    /// The nodes are not queried (an offline run) or `admin.conf` does not exist yet.
    #[error("no API client: the first control plane has no admin.conf")]
    NoClient,
    /// Listing the Nodes failed.
    #[error(transparent)]
    Api(#[from] clusterctl_kubeapi::ApiError),
}

/// The names of the Nodes registered in the cluster now, read through `api` (the client the phases
/// then use, built from `admin.conf` read over `first_cp`, the first control plane `first`'s
/// transport, in `mode`, reporting to `reporter`). Errors: no client, or the list failed.
pub fn registered(
    api: &up::api::ApiAccess,
    first: ValidNode,
    first_cp: std::sync::Arc<dyn clusterctl_exec::Transport>,
    mode: crate::ctx::Mode,
    reporter: std::sync::Arc<dyn crate::report::Reporter>,
) -> Result<Vec<String>, ListError> {
    let secrets = crate::ctx::Secrets::default();
    let mut ctx = crate::ctx::NodeCtx::new(first, Some(first_cp), mode, reporter, secrets);
    let client = api.get(&mut ctx)?.ok_or(ListError::NoClient)?;
    Ok(client
        .nodes()?
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clusterctl_spec::model::Role;

    fn nodes() -> Vec<ValidNode> {
        vec![
            ValidNode::new("c1", Role::ControlPlane, "10.0.0.1".parse().ok()),
            ValidNode::new("w1", Role::Worker, "10.0.0.2".parse().ok()),
            ValidNode::new("c2", Role::ControlPlane, "10.0.0.3".parse().ok()),
            ValidNode::new("w2", Role::Worker, "10.0.0.4".parse().ok()),
        ]
    }

    #[test]
    fn leaves_out_what_only_the_existing_cluster_needs() {
        let cilium = CniPlugin::Cilium;
        for kept in [
            "facts",
            "preflight",
            "files",
            "runtime/containerd",
            "control-plane/kube-vip",
            "join/control-plane",
            "join/worker",
            "labels",
            "images",
            "wait-ready",
        ] {
            assert!(runs(kept, Targets::All, &cilium), "{kept}");
        }
        for gone in [
            "init",
            "control-plane/kube-vip-admin",
            "kubeconfig",
            "rollout/apiserver",
            "rollout/kubelet",
        ] {
            assert!(!runs(gone, Targets::All, &cilium), "{gone}");
        }
        assert!(!runs("cni", Targets::FirstControlPlane, &cilium));
        assert!(runs("cni", Targets::All, &CniPlugin::Builtin));
        assert!(
            !left_out("rollouts"),
            "a prefix matches whole path segments"
        );
    }

    #[test]
    fn engine_nodes_are_the_first_control_plane_and_the_new_ones_in_file_order() {
        let got = engine_nodes(
            &nodes(),
            &["w2".into(), "c2".into()],
            &["c1".into(), "w1".into()],
        )
        .expect("joinable");
        let names: Vec<&str> = got.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["c1", "c2", "w2"]);
    }

    #[test]
    fn refuses_unknown_registered_and_empty_requests() {
        let n = nodes();
        match engine_nodes(&n, &["w9".into()], &[]) {
            Err(JoinRefused::NotInFile(x, all)) => {
                assert_eq!(x, "w9");
                assert_eq!(all, "c1, w1, c2, w2");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            engine_nodes(&n, &["w1".into(), "w2".into()], &["c1".into(), "w1".into()]),
            Err(JoinRefused::AlreadyJoined("w1".into()))
        );
        assert_eq!(
            engine_nodes(&n, &["c1".into()], &[]),
            Err(JoinRefused::FirstControlPlane("c1".into()))
        );
        assert_eq!(engine_nodes(&n, &[], &[]), Err(JoinRefused::NoNode));
    }
}
