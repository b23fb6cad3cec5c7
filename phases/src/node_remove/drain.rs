//! `node remove`'s `drain` phase: the drain through the API, every cordon, refused eviction and
//! evicted pod reported as it happens.

use std::collections::BTreeMap;

use clusterctl_kubeapi::{ApiError, ClusterApi, Event, EvictOutcome, Node, Pod, TaintSpec};

use super::Data;
use crate::ctx::{Change, NodeCtx, PlanKind};
use crate::error::PhaseError;
use crate::steps::{StepLine, StepOutcome};

/// Drains the node (cordon, evictions, wait until the evicted pods are gone). Errors: the drain
/// failed (the node stays cordoned; [`crate::steps::RunReport::stopped`] says what to do).
pub(super) fn run(ctx: &mut NodeCtx, data: &Data<'_>) -> Result<(), PhaseError> {
    let name = data.node.name.as_str();
    let interval = data
        .opts
        .retry_interval
        .max(std::time::Duration::from_secs(1));
    data.say(StepOutcome::Done(format!(
        "draining (cordon, then evictions; timeout {}s)",
        data.opts.timeout.as_secs()
    )));
    let drain = Change::new(PlanKind::Api, format!("drain node {name}")).explained(format!(
        "drain: cordon, evict every pod but mirror and DaemonSet pods (an eviction a PodDisruptionBudget refuses retried every {}s), wait until they are gone (timeout {}s)",
        interval.as_secs(),
        data.opts.timeout.as_secs()
    ));
    let mut report = None;
    let r = ctx.api_change_as(drain, || {
        let Some(api) = data.api else {
            return Err("no API client".to_string());
        };
        let reporting = Reporting {
            api,
            data,
            interval: interval.as_secs(),
        };
        clusterctl_kubeapi::drain::drain(&reporting, name, data.opts.timeout, interval)
            .map(|r| report = Some(r))
            .map_err(|e| e.to_string())
    });
    if let Err(e) = r {
        data.steps.push(StepLine::of(name, "drain", Err(e.clone())));
        if let Ok(mut s) = data.stopped.lock() {
            *s = Some(format!(
                "{name} stays cordoned and in the cluster. A PodDisruptionBudget refusing an eviction \
                 (HTTP 429) means the workload has no replica to spare: scale it up or wait, then run \
                 `clusterctl node remove` again (or `kubectl uncordon {name}` to keep the node)."
            ));
        }
        return Err(e);
    }
    if let Some(r) = report {
        for p in &r.evicted {
            data.say(StepOutcome::Done(format!("evicted {p}")));
        }
        if !r.kept.is_empty() {
            data.say(StepOutcome::Done(format!(
                "left in place (mirror or DaemonSet pods): {}",
                r.kept.join(", ")
            )));
        }
        data.say(StepOutcome::Done("drained".into()));
    }
    Ok(())
}

/// The cluster API with the cordon and every refused eviction reported as it happens (the drain
/// retries it).
struct Reporting<'a> {
    api: &'a dyn ClusterApi,
    data: &'a Data<'a>,
    interval: u64,
}

impl ClusterApi for Reporting<'_> {
    fn nodes(&self) -> Result<Vec<Node>, ApiError> {
        self.api.nodes()
    }
    fn pods(&self) -> Result<Vec<Pod>, ApiError> {
        self.api.pods()
    }
    fn pods_on_node(&self, node: &str) -> Result<Vec<Pod>, ApiError> {
        self.api.pods_on_node(node)
    }
    fn events_for(&self, namespace: &str, kind: &str, name: &str) -> Result<Vec<Event>, ApiError> {
        self.api.events_for(namespace, kind, name)
    }
    fn patch_node_labels(
        &self,
        node: &str,
        labels: &BTreeMap<String, Option<String>>,
    ) -> Result<(), ApiError> {
        self.api.patch_node_labels(node, labels)
    }
    fn set_node_taints(&self, node: &str, taints: &[TaintSpec]) -> Result<(), ApiError> {
        self.api.set_node_taints(node, taints)
    }
    fn set_unschedulable(&self, node: &str, unschedulable: bool) -> Result<(), ApiError> {
        let r = self.api.set_unschedulable(node, unschedulable);
        if r.is_ok() && unschedulable {
            self.data.say(StepOutcome::Done("cordoned".into()));
        }
        r
    }
    fn evict(&self, namespace: &str, pod: &str) -> Result<EvictOutcome, ApiError> {
        let r = self.api.evict(namespace, pod);
        if let Ok(EvictOutcome::Blocked(msg)) = &r {
            self.data.say(StepOutcome::Done(format!(
                "eviction of {namespace}/{pod} refused (HTTP 429: a PodDisruptionBudget allows no \
                 disruption now): {msg}; retrying every {}s",
                self.interval
            )));
        }
        r
    }
    fn delete_node(&self, node: &str) -> Result<(), ApiError> {
        self.api.delete_node(node)
    }
}
