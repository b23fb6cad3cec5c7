//! `clusterctl node remove` as phases run by the engine through `NodeCtx` (so `--dry-run` prints the
//! plan, contacts neither the nodes nor the API, and changes nothing). In order:
//! 1. `drain` (this machine, through the API: `clusterctl_kubeapi::drain`): cordon, policy/v1
//!    evictions of every pod but mirror and DaemonSet pods, an eviction refused with 429 by a
//!    PodDisruptionBudget retried every `retry_interval` until `timeout`, then wait until the evicted
//!    pods are gone. A drain that fails stops the run here, the node left cordoned
//!    ([`RunReport::stopped`] says why and what to do);
//! 2. `reset` (the node): on a control plane of a cluster with a VIP first the kube-vip handover
//!    (`kube_vip`: its static pod stopped, the leases taken over by another control plane while this
//!    one still serves, the VIP taken off); then the same reset as `destroy` (`crate::destroy::reset`);
//!    on a control plane `kubeadm reset` also removes the node's etcd member (its
//!    `remove-etcd-member` phase, before it wipes anything);
//! 3. `etcd` (the first control plane, when the node is a control plane): the member list read
//!    (`etcdctl member list` in its etcd static pod) and a member still listed under the node's name
//!    removed there;
//! 4. `node-object` (this machine): the Node object deleted (`DELETE /api/v1/nodes/NODE`) and the
//!    node's local state cache removed;
//! 5. `load-balancer` (this machine, a control plane of a docker cluster with the API load balancer):
//!    the load balancer's backends without the node, HAProxy reloaded.
//!
//! Steps 2–4 are best effort: each is reported and a failure does not stop the next. The first
//! control plane is refused (joins and credentials go through it). [`run`] is the entry point.

mod drain;
pub(crate) mod etcd;
mod kube_vip;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use clusterctl_kubeapi::ClusterApi;
use clusterctl_render::Rendered;
use clusterctl_spec::{ValidCluster, ValidNode};

use crate::ctx::NodeCtx;
use crate::destroy::{reset_node, Teardown};
use crate::engine::{Phase, Targets};
use crate::error::PhaseError;
use crate::reach::ReachError;
use crate::steps::{reason, RunReport, Sink, StepLine, StepOutcome, StepRun, Steps};

/// How `node remove` runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// The node to remove (a name from the cluster file).
    pub node: String,
    /// How long the drain may take (evictions blocked by a PodDisruptionBudget are retried until then).
    pub timeout: Duration,
    /// Between retries of a blocked eviction (and checks that evicted pods are gone); at least 1 s.
    pub retry_interval: Duration,
    /// The kubeconfig to use (default: the cluster's context in `$KUBECONFIG`/`~/.kube/config`, else
    /// admin.conf from the first control plane).
    pub kubeconfig: Option<PathBuf>,
    /// The known_hosts file for SSH nodes (default `~/.ssh/known_hosts`).
    pub known_hosts: Option<PathBuf>,
    /// Change nothing: contact neither the nodes nor the API, record every step in the plan.
    pub dry_run: bool,
}

/// Why `node remove` refused to start (nothing was contacted or changed).
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// The node is not in the cluster file.
    #[error("node {node} is not in the cluster file (it declares: {declared})")]
    NotInFile {
        /// The node named.
        node: String,
        /// The file's nodes, comma-separated.
        declared: String,
    },
    /// The node is the first control plane.
    #[error("{0} is the first control plane: joins and credentials go through it; put another control plane first in the file (and run `clusterctl up`) before removing it")]
    FirstControlPlane(String),
    /// The cluster's API could not be reached.
    #[error(transparent)]
    Api(#[from] ReachError),
}

/// What the phases of one run share.
pub struct Data<'a> {
    cluster: &'a ValidCluster,
    node: &'a ValidNode,
    opts: &'a Options,
    api: Option<&'a dyn ClusterApi>,
    rendered: Option<Rendered>,
    unreachable: BTreeMap<String, String>,
    steps: Steps<'a>,
    stopped: Mutex<Option<String>>,
}

impl Data<'_> {
    fn say(&self, outcome: StepOutcome) {
        self.steps.push(StepLine::new(&self.node.name, outcome));
    }
    fn step(&self, step: &str, r: Result<String, PhaseError>) {
        self.steps.push(StepLine::of(&self.node.name, step, r));
    }
}

/// The phases for removing `node` (see the module doc).
pub fn phases<'a>(node: &ValidNode) -> Vec<Phase<Data<'a>>> {
    let mut out = vec![Phase::serial_step("drain", Targets::Local, drain::run)];
    if node.is_control_plane() {
        out.push(Phase::serial_step(
            "reset",
            Targets::OtherControlPlanes,
            reset,
        ));
        out.push(Phase::serial_step(
            "etcd",
            Targets::FirstControlPlane,
            etcd::run,
        ));
    } else {
        out.push(Phase::serial_step("reset", Targets::Workers, reset));
    }
    out.push(Phase::serial_step(
        "node-object",
        Targets::Local,
        node_object,
    ));
    if node.is_control_plane() {
        out.push(Phase::serial_step(
            "load-balancer",
            Targets::Local,
            load_balancer,
        ));
    }
    out
}

/// `load-balancer`: the docker lab's API load balancer without the removed control plane (nothing
/// for a cluster without one).
fn load_balancer(ctx: &mut NodeCtx, data: &Data<'_>) -> Result<(), PhaseError> {
    if data.cluster.load_balancer().is_none() {
        return Ok(());
    }
    let name = data.node.name.as_str();
    let what = format!("remove {name} from the API load balancer's backends");
    let mut changed = None;
    let r = ctx.local_change(&what, || {
        crate::node_containers::configure_lb(data.cluster, name).map(|c| changed = c)
    });
    match (r, changed) {
        (Err(e), _) => data.step("load balancer", Err(e)),
        (Ok(()), Some(false)) => data.say(StepOutcome::Done(
            "the API load balancer already had no such backend".into(),
        )),
        (Ok(()), _) => data.say(StepOutcome::Done(
            "removed from the API load balancer's backends".into(),
        )),
    }
    Ok(())
}

/// `reset`: the node's reset, as `destroy` resets one.
fn reset(ctx: &mut NodeCtx, data: &Data<'_>) -> Result<(), PhaseError> {
    if ctx.unreachable() {
        let why = data
            .unreachable
            .get(ctx.name())
            .cloned()
            .unwrap_or_default();
        data.step(
            "reset",
            Err(ctx.local_error(format!("cannot reach: {why}"))),
        );
        return Ok(());
    }
    let files = data
        .rendered
        .as_ref()
        .and_then(|r| r.per_node.get(&data.node.name))
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let teardown = Teardown::of(data.cluster, data.node, false);
    if let Some(vip) = &teardown.vip {
        data.step("kube-vip", kube_vip::handover(ctx, vip));
    }
    reset_node(ctx, data.cluster.name(), files, &teardown, &data.steps);
    Ok(())
}

/// How many times `node-object` sends the DELETE when the API server could not be reached: when the
/// removed control plane held the VIP, the client's pooled connection (opened by the drain, to that
/// node behind the VIP) is reset by the control plane that holds the VIP now (seen on the real HA
/// cluster: `Connection reset by peer`); the next try opens a new connection.
const DELETE_TRIES: u32 = 5;

/// `call` until it succeeds, fails with an error `transient` does not accept, or was tried `tries`
/// times, `pause` between tries.
fn retried<T, E>(
    tries: u32,
    pause: Duration,
    transient: impl Fn(&E) -> bool,
    mut call: impl FnMut() -> Result<T, E>,
) -> Result<T, E> {
    let mut n = 1;
    loop {
        match call() {
            Err(e) if n < tries && transient(&e) => {
                n += 1;
                std::thread::sleep(pause);
            }
            r => return r,
        }
    }
}

/// `node-object`: the Node deleted through the API, the node's local state cache removed.
fn node_object(ctx: &mut NodeCtx, data: &Data<'_>) -> Result<(), PhaseError> {
    let name = data.node.name.as_str();
    let r = ctx.api_change(&format!("delete Node {name}"), || match data.api {
        Some(api) => retried(
            DELETE_TRIES,
            Duration::from_secs(1),
            |e| matches!(e, clusterctl_kubeapi::ApiError::Unreachable { .. }),
            || api.delete_node(name),
        )
        .map_err(|e| e.to_string()),
        None => Err("no API client".to_string()),
    });
    match r {
        Ok(()) => data.say(StepOutcome::Done("Node object deleted".into())),
        Err(e) => data.step("Node object", Err(e)),
    }
    if let Some(dir) = crate::local::cache_dir(data.cluster.name()) {
        let f = dir.join(format!("{name}.json"));
        if f.exists() {
            let what = format!("remove {}", f.display());
            if let Err(e) = ctx.local_change(&what, || std::fs::remove_file(&f)) {
                data.step("cache", Err(e));
            }
        }
    }
    Ok(())
}

/// Takes `opts.node` out of `cluster` (see the module doc); each step's line goes to `sink` as it
/// ends. Errors: the node is not in the file or is the first control plane, or (not in a dry run) the
/// API cannot be reached — all before anything is changed.
pub fn run(cluster: &ValidCluster, opts: &Options, sink: Sink<'_>) -> Result<RunReport, Refused> {
    let name = opts.node.as_str();
    let Some(node) = cluster.node(name) else {
        return Err(Refused::NotInFile {
            node: name.to_string(),
            declared: cluster
                .nodes()
                .iter()
                .map(|n| n.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        });
    };
    let first = cluster.first_control_plane();
    if first.name == name {
        return Err(Refused::FirstControlPlane(name.to_string()));
    }
    // Not a change: a dry run contacts no API (the drain and the Node's deletion are planned).
    let api = if opts.dry_run {
        None
    } else {
        Some(crate::access::api::cluster_api(
            cluster,
            opts.kubeconfig.as_deref(),
            opts.known_hosts.as_deref(),
        )?)
    };
    let mut on: Vec<&ValidNode> = vec![node];
    if node.is_control_plane() {
        on.push(first);
    }
    let (transports, unreachable) =
        crate::steps::reach_unless_dry_run(cluster, &on, opts.known_hosts.as_deref(), opts.dry_run);
    let nodes: Vec<ValidNode> = cluster
        .nodes()
        .iter()
        .filter(|n| n.name == first.name || n.name == name)
        .cloned()
        .collect();
    let data = Data {
        cluster,
        node,
        opts,
        api: api.as_ref().map(|a| a as &dyn ClusterApi),
        rendered: clusterctl_render::render(cluster, &clusterctl_render::Facts::assumed(cluster))
            .ok(),
        unreachable,
        steps: Steps::new(sink),
        stopped: Mutex::new(None),
    };
    let run = StepRun {
        cluster: cluster.name().to_string(),
        nodes,
        transports,
        dry_run: opts.dry_run,
        parallel: 1,
    };
    let (mut report, result) = run.run(&phases(node), &data);
    let stopped = data.stopped.lock().ok().and_then(|mut s| s.take());
    if let (Err(e), None) = (&result, &stopped) {
        for pe in &e.0 {
            data.steps
                .push(StepLine::new(pe.node(), StepOutcome::Failed(reason(pe))));
        }
    }
    report.lines = data.steps.lines();
    report.stopped = stopped;
    Ok(report)
}

#[cfg(test)]
mod retry_tests {
    use std::time::Duration;

    #[test]
    fn retries_only_transient_errors_and_at_most_the_given_times() {
        let transient = |e: &String| e.starts_with("reset");
        let mut calls = 0;
        let r: Result<(), String> = super::retried(5, Duration::ZERO, transient, || {
            calls += 1;
            if calls < 3 {
                Err("reset by peer".into())
            } else {
                Ok(())
            }
        });
        assert_eq!((r, calls), (Ok(()), 3));
        let mut calls = 0;
        let r: Result<(), String> = super::retried(5, Duration::ZERO, transient, || {
            calls += 1;
            Err("404 NotFound".into())
        });
        assert_eq!((r, calls), (Err("404 NotFound".into()), 1));
        let mut calls = 0;
        let r: Result<(), String> = super::retried(5, Duration::ZERO, transient, || {
            calls += 1;
            Err("reset again".into())
        });
        assert_eq!((r, calls), (Err("reset again".into()), 5));
    }
}
