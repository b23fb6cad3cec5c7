//! `clusterctl destroy` as phases run by the engine through `NodeCtx`, so that `--dry-run` prints the
//! plan and changes nothing, and every text shown is redacted as for `up`. Best effort: a step that
//! fails is reported (`NODE: STEP: FAILED: why`) and the others still run, on every node.
//!
//! Docker provider (`docker`, on this machine): the cluster's labelled node containers (with their
//! anonymous volumes) and its network removed. SSH provider: `reset/workers`, then
//! `reset/control-planes` (those other than the first), then `reset/first-control-plane`, one node at a
//! time, each node reset as [`reset`] describes. Then, on this machine, `kubeconfig`: the context named
//! after the cluster (with its cluster and user) removed from the kubeconfig, and `cache`: the local
//! state cache removed — both kept, and said so, when a node's reset (or the docker removal) failed,
//! since the cluster may still run and they are what reach it. [`run`] is the entry point; the command asks for confirmation and prints
//! [`Destroyed`].

pub mod cni_leftovers;
mod local;
pub(crate) mod reset;
pub mod scripts;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use clusterctl_render::Rendered;
use clusterctl_spec::model::Provider;
use clusterctl_spec::{ValidCluster, ValidNode};

use crate::ctx::NodeCtx;
use crate::engine::{Phase, Targets};
use crate::error::PhaseError;
use crate::steps::{reason, RunReport, Sink, StepLine, StepOutcome, StepRun, Steps};

pub use reset::{reset_node, Teardown};

/// How `destroy` runs.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The kubeconfig to remove the cluster's context from (default: `$KUBECONFIG` or `~/.kube/config`).
    pub kubeconfig: Option<PathBuf>,
    /// The known_hosts file for SSH nodes (default `~/.ssh/known_hosts`).
    pub known_hosts: Option<PathBuf>,
    /// Also purge the Kubernetes packages from every node (SSH provider).
    pub purge: bool,
    /// Change nothing: contact no node and record every step in the plan.
    pub dry_run: bool,
}

/// What a `destroy` run did (or, in a dry run, would do).
#[derive(Debug, Default)]
pub struct Destroyed {
    /// The steps, the plan and the changes (every node of the file).
    pub report: RunReport,
    /// Whether anything of the cluster was found and removed (an SSH node reset always is).
    pub found: bool,
}

/// What the phases of one run share.
pub struct Data<'a> {
    cluster: &'a ValidCluster,
    opts: &'a Options,
    rendered: Option<Rendered>,
    /// Node → why it could not be reached.
    unreachable: BTreeMap<String, String>,
    steps: Steps<'a>,
    found: AtomicBool,
}

/// The order nodes are torn down in: workers, then control planes other than the first, then the first.
pub fn teardown_order(cluster: &ValidCluster) -> Vec<&ValidNode> {
    let first = cluster.first_control_plane().name.clone();
    let mut out: Vec<&ValidNode> = cluster.workers().collect();
    out.extend(cluster.control_planes().filter(|n| n.name != first));
    out.extend(cluster.control_planes().filter(|n| n.name == first));
    out
}

/// The phases of `destroy` for `provider`, in order (see the module doc).
pub fn phases<'a>(provider: Provider) -> Vec<Phase<Data<'a>>> {
    let mut out = match provider {
        Provider::Docker => vec![Phase::serial_step("docker", Targets::Local, local::docker)],
        Provider::Ssh => vec![
            Phase::serial_step("reset/workers", Targets::Workers, reset),
            Phase::serial_step("reset/control-planes", Targets::OtherControlPlanes, reset),
            Phase::serial_step(
                "reset/first-control-plane",
                Targets::FirstControlPlane,
                reset,
            ),
        ],
    };
    out.push(Phase::serial_step(
        "kubeconfig",
        Targets::Local,
        local::kubeconfig,
    ));
    out.push(Phase::serial_step("cache", Targets::Local, local::cache));
    out
}

/// The `reset/*` phases: one node's reset, or its line saying why it could not be reached.
fn reset(ctx: &mut NodeCtx, data: &Data<'_>) -> Result<(), PhaseError> {
    if ctx.unreachable() {
        let why = data
            .unreachable
            .get(ctx.name())
            .cloned()
            .unwrap_or_default();
        data.steps.push(StepLine::new(
            ctx.name(),
            StepOutcome::Failed(format!("cannot reach: {why}")),
        ));
        return Ok(());
    }
    let Some(node) = data.cluster.node(ctx.name()) else {
        return Ok(());
    };
    let files = data
        .rendered
        .as_ref()
        .and_then(|r| r.per_node.get(&node.name))
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let teardown = Teardown::of(data.cluster, node, data.opts.purge);
    reset_node(ctx, data.cluster.name(), files, &teardown, &data.steps);
    Ok(())
}

/// Destroys `cluster` (see the module doc); each step's line goes to `sink` as it ends. Never stops at
/// a failed step: the report counts them.
pub fn run(cluster: &ValidCluster, opts: &Options, sink: Sink<'_>) -> Destroyed {
    let nodes: Vec<ValidNode> = cluster.nodes().to_vec();
    // Only SSH nodes are reached: the docker provider's steps run on this machine.
    let (transports, unreachable) = crate::steps::reach_unless_dry_run(
        cluster,
        &teardown_order(cluster),
        opts.known_hosts.as_deref(),
        opts.dry_run || cluster.provider() != Provider::Ssh,
    );
    let data = Data {
        cluster,
        opts,
        rendered: clusterctl_render::render(cluster, &clusterctl_render::Facts::assumed(cluster))
            .ok(),
        unreachable,
        steps: Steps::new(sink),
        found: AtomicBool::new(cluster.provider() == Provider::Ssh),
    };
    let run = StepRun {
        cluster: cluster.name().to_string(),
        nodes,
        transports,
        dry_run: opts.dry_run,
        parallel: 1,
    };
    let (mut report, result) = run.run(&phases(cluster.provider()), &data);
    if let Err(e) = result {
        for pe in e.0 {
            data.steps
                .push(StepLine::new(pe.node(), StepOutcome::Failed(reason(&pe))));
        }
    }
    report.lines = data.steps.lines();
    Destroyed {
        report,
        found: data.found.load(Ordering::SeqCst),
    }
}
