//! `upgrade`'s one entry point, [`run`]: the checks before any node changes (the file's version, the
//! air-gap bundle, reaching every node, the running versions), then [`super::prepare_phases`] over
//! every node and [`super::node_phases`] one node at a time in upgrade order ([`ordered`]), returning
//! what ran or was planned ([`Report`]).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clusterctl_exec::Transport;
use clusterctl_render::Purpose;
use clusterctl_spec::ValidCluster;
use semver::Version;

use super::api::{api_for, ApiSteps};
use super::error::UpgradeError;
use super::source::ClusterSource;
use super::{bundle, checks, BundlePackages, UpgradeData, UpgradeSpec};
use crate::ctx::{Mode, PlanEntry, Secrets};
use crate::engine::{Engine, Options as EngineOptions};
use crate::error::RunError;
use crate::reach;
use crate::report::Reporter;
use clusterctl_spec::ValidNode;

/// What `upgrade` is asked to do.
#[derive(Debug, Clone)]
pub struct Options {
    /// The target version (`--to`, exact `MAJOR.MINOR.PATCH`).
    pub to: Version,
    /// How the cluster was named (hints, and where `airgap.bundle` is relative to).
    pub named: ClusterSource,
    /// The kubeconfig to reach the API with; `None`: `admin.conf` of the first control plane.
    pub kubeconfig: Option<PathBuf>,
    /// The known_hosts file for SSH nodes (`None`: `~/.ssh/known_hosts`).
    pub known_hosts: Option<PathBuf>,
    /// How long a node's pods may take to be evicted.
    pub drain_timeout: Duration,
    /// How long a node may take to be Ready with the new kubelet.
    pub ready_timeout: Duration,
    /// Report every check and the output of every command.
    pub verbose: bool,
    /// Change nothing: nodes and API are read only, every change is planned.
    pub dry_run: bool,
}

/// What the upgrade did, or planned (dry run).
#[derive(Debug)]
pub struct Report {
    /// The nodes in upgrade order (first control plane, other control planes, workers).
    pub order: Vec<ValidNode>,
    /// Every check, command, file write and API change, in the order they ran or were planned.
    pub plan: Vec<PlanEntry>,
    /// Changes made (or planned).
    pub changes: usize,
    /// Why the upgrade stopped, when a phase failed.
    pub stopped: Option<Stopped>,
}

/// A failed phase that stopped the upgrade.
#[derive(Debug)]
pub struct Stopped {
    /// The phase errors.
    pub error: RunError,
    /// The node being upgraded (left cordoned); `None`: it stopped before the first node's turn.
    pub node: Option<String>,
    /// What to do: the node left cordoned and the command that resumes, in words.
    pub hint: String,
}

/// Upgrades `cluster` to `opts.to` (see the module documentation of [`super`]): checks, then the
/// phases, reporting each through `reporter` (with two notes first: the order, and each kubeadm
/// preflight check the file ignores). Errors ([`UpgradeError`]): a refused version (exit 2) or a
/// failure before any phase ran; a failed phase is [`Report::stopped`].
pub fn run(
    cluster: &ValidCluster,
    opts: &Options,
    reporter: Arc<dyn Reporter>,
) -> Result<Report, UpgradeError> {
    let to = &opts.to;
    checks::file_version(cluster, to, &opts.named)?;
    // The air-gap bundle, checked before any node is reached.
    let airgap =
        bundle::airgap_bundle(cluster, opts.named.file(), to).map_err(UpgradeError::Bundle)?;
    let nodes: Vec<ValidNode> = cluster.nodes().to_vec();
    let all: Vec<_> = cluster.nodes().iter().collect();
    let reached = reach::reach(cluster, &all, opts.known_hosts.as_deref());
    if !reached.errors.is_empty() {
        return Err(UpgradeError::Unreachable(reached.errors));
    }
    let transports = reached.transports;
    let first = cluster.first_control_plane().name.clone();
    let first_t = transports
        .get(&first)
        .cloned()
        .ok_or_else(|| UpgradeError::NoConnection(first.clone()))?;
    // The running versions: the control plane's, then every registered node's kubelet.
    checks::control_plane(&first, first_t.as_ref(), to, &opts.named)?;
    let api = Arc::new(
        api_for(cluster, opts.kubeconfig.as_deref(), first_t.as_ref())
            .map_err(UpgradeError::Api)?,
    );
    checks::nodes(api.as_ref(), &nodes, to)?;
    let (bundle, images) = match airgap {
        Some((packages, images)) => (
            Some(Arc::new(packages) as Arc<dyn BundlePackages>),
            Some(images),
        ),
        None => (None, None),
    };
    let data = UpgradeData {
        spec: UpgradeSpec {
            cluster: cluster.name().to_string(),
            to: to.clone(),
            nodes: nodes.clone(),
            upgrade_config: rendered_upgrade_config(cluster)?,
            packages: crate::up::from_file::package_settings(cluster),
            ignore_preflight_errors: cluster.spec().kubeadm.ignored_checks(),
        },
        api: Arc::new(ApiSteps {
            api,
            drain_timeout: opts.drain_timeout,
            ready_timeout: opts.ready_timeout,
        }),
        bundle,
        images,
    };
    let order = ordered(&nodes, &first);
    notes(cluster, to, &first, &order, reporter.as_ref());
    Ok(phases(cluster, opts, &data, order, &transports, reporter))
}

/// The notes before the phases: what runs in which order, and each ignored kubeadm preflight check.
fn notes(cluster: &ValidCluster, to: &Version, first: &str, order: &[ValidNode], r: &dyn Reporter) {
    r.note(&format!(
        "upgrade: cluster `{}` to v{to}: kubeadm on every node, etcd snapshot on {first}, then one node at a time: {}",
        cluster.name(),
        order
            .iter()
            .map(|n| n.name.as_str())
            .collect::<Vec<_>>()
            .join(" → ")
    ));
    for i in &cluster.spec().kubeadm.ignore_preflight_errors {
        r.note(&format!(
            "upgrade: kubeadm's preflight check {} is ignored (spec.kubeadm.ignorePreflightErrors): {}",
            i.check, i.reason
        ));
    }
}

/// Runs the prepare phases over every node, then each node's phases in `order`, one node at a time;
/// stops at the first failure.
fn phases(
    cluster: &ValidCluster,
    opts: &Options,
    data: &UpgradeData,
    order: Vec<ValidNode>,
    transports: &BTreeMap<String, Arc<dyn Transport>>,
    reporter: Arc<dyn Reporter>,
) -> Report {
    let engine_opts = engine_options(cluster, opts);
    let secrets = Secrets::default();
    let engine = |nodes: Vec<ValidNode>, transports: BTreeMap<String, Arc<dyn Transport>>| {
        Engine::new(
            nodes,
            transports,
            engine_opts.clone(),
            reporter.clone(),
            secrets.clone(),
        )
    };
    let mut report = Report {
        order: Vec::new(),
        plan: Vec::new(),
        changes: 0,
        stopped: None,
    };
    let first = order.first().map(|n| n.name.clone()).unwrap_or_default();
    let prepare = super::prepare_phases(data.images.as_ref());
    let (s, r) = engine(data.spec.nodes.clone(), transports.clone()).run(&prepare, data);
    report.plan.extend(s.plan.iter().cloned());
    report.changes += s.total_changes();
    let mut result = r.map_err(|e| (e, None));
    for node in &order {
        if result.is_err() {
            break;
        }
        let one: BTreeMap<_, _> = transports
            .get(&node.name)
            .map(|t| (node.name.clone(), t.clone()))
            .into_iter()
            .collect();
        let (s, r) =
            engine(vec![node.clone()], one).run(&super::node_phases(node.name == first), data);
        report.changes += s.total_changes();
        report.plan.extend(s.plan.iter().cloned());
        result = r.map_err(|e| (e, Some(node.name.clone())));
    }
    if let Err((error, node)) = result {
        let hint = resume_hint(&opts.named, &opts.to, node.as_deref());
        report.stopped = Some(Stopped { error, node, hint });
    }
    report.order = order;
    report
}

/// The engine's options: every phase, 16 nodes at a time, the local state cache; a dry run probes.
fn engine_options(cluster: &ValidCluster, opts: &Options) -> EngineOptions {
    EngineOptions {
        cluster: cluster.name().to_string(),
        mode: Mode {
            verbose: opts.verbose,
            dry_run: opts.dry_run,
            // The nodes are reached anyway (version checks): show what is already done.
            probe: opts.dry_run,
            ..Mode::default()
        },
        parallel: 16,
        skip: vec![],
        only: vec![],
        cache: crate::local::cache_dir(cluster.name()).map(crate::state::LocalCache::new),
    }
}

/// What to do after a failure: the node left cordoned and the command to resume.
fn resume_hint(named: &ClusterSource, to: &Version, node: Option<&str>) -> String {
    let cordoned = node
        .map(|n| {
            format!(
                "Node {n} is left cordoned (drained) so that nothing is scheduled on a half-upgraded node. "
            )
        })
        .unwrap_or_default();
    format!(
        "{cordoned}Fix the cause and run `clusterctl upgrade {} --to {to}` again: it resumes at the \
         step that failed (finished steps are recorded on each node and skipped).",
        named.flag()
    )
}

/// The nodes in upgrade order: the first control plane, the other control planes, the workers.
pub(crate) fn ordered(nodes: &[ValidNode], first: &str) -> Vec<ValidNode> {
    let mut v: Vec<ValidNode> = nodes.iter().filter(|n| n.name == first).cloned().collect();
    v.extend(
        nodes
            .iter()
            .filter(|n| n.is_control_plane() && n.name != first)
            .cloned(),
    );
    v.extend(nodes.iter().filter(|n| !n.is_control_plane()).cloned());
    v
}

/// The rendered UpgradeConfiguration (any node's copy: it is the same for all), `None` when the
/// kubeadm API version has none (v1beta3). Errors: rendering failed.
fn rendered_upgrade_config(cluster: &ValidCluster) -> Result<Option<Vec<u8>>, UpgradeError> {
    let rendered = clusterctl_render::render(cluster, &clusterctl_render::Facts::assumed(cluster))
        .map_err(UpgradeError::Render)?;
    Ok(rendered
        .per_node
        .values()
        .flatten()
        .find(|f| f.purpose == Purpose::KubeadmUpgrade)
        .map(|f| f.content.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clusterctl_spec::model::Role;

    #[test]
    fn nodes_go_first_control_plane_then_control_planes_then_workers() {
        let nodes = [
            ValidNode::new("w1", Role::Worker, None),
            ValidNode::new("cp2", Role::ControlPlane, None),
            ValidNode::new("cp1", Role::ControlPlane, None),
            ValidNode::new("w2", Role::Worker, None),
        ];
        let names: Vec<String> = ordered(&nodes, "cp1").into_iter().map(|n| n.name).collect();
        assert_eq!(names, ["cp1", "cp2", "w1", "w2"]);
    }

    #[test]
    fn the_resume_hint_names_the_cordoned_node_and_the_command() {
        let to = Version::new(1, 35, 0);
        let file = ClusterSource::File("c/cluster.yaml".into());
        assert_eq!(
            resume_hint(&file, &to, Some("w1")),
            "Node w1 is left cordoned (drained) so that nothing is scheduled on a half-upgraded \
             node. Fix the cause and run `clusterctl upgrade -f c/cluster.yaml --to 1.35.0` again: \
             it resumes at the step that failed (finished steps are recorded on each node and \
             skipped)."
        );
        let profile = ClusterSource::Profile("lab".into());
        assert!(resume_hint(&profile, &to, None)
            .starts_with("Fix the cause and run `clusterctl upgrade --profile lab --to 1.35.0`"));
    }
}
