//! `clusterctl status`'s report: nodes (role, version, Ready, the reason when not Ready), the nodes of
//! the file that are not registered, labels and taints the file declares that a node has lost (e.g.
//! after a re-create), and stuck pods with the layer they are stuck at
//! (`clusterctl_kubeapi::diagnose`), and where the builtin CNI agent reports NetworkPolicy not
//! enforced or enforced fail-closed (its Events, [`policy_enforcement`]). For pods that cannot pull their image, the node runtimes are
//! asked which nodes hold it ([`crate::image_load::LIST_IMAGES`]) over the transports of
//! [`crate::reach`], since a Node's status lists at most 50 images. Read-only: nothing is changed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Mutex;

use clusterctl_exec::Cmd;
use clusterctl_kubeapi::{diagnose, ApiError, ClusterApi, Diagnosis, Event, Node};
use clusterctl_spec::image::same_image;
use clusterctl_spec::ValidCluster;

use crate::image_load::LIST_IMAGES;
use crate::reach::{self, ReachError};

/// Why the report could not be made.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    /// The cluster's API could not be reached (no kubeconfig context, first control plane not
    /// reachable, no usable client).
    #[error(transparent)]
    Reach(#[from] ReachError),
    /// The API could not list nodes or pods.
    #[error(transparent)]
    Api(#[from] ApiError),
}

/// How the cluster is: the `result` of `status -o json|yaml`.
#[derive(serde::Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Health {
    /// Every node is Ready, no pod is stuck, every node of the file is registered and carries its
    /// declared labels and taints.
    Ok,
    /// Something of the above is not so.
    Degraded,
}

/// A label the cluster file declares on a node that the Node object does not carry (with that value).
#[derive(Debug, Clone, serde::Serialize)]
pub struct LabelDrift {
    /// Node name.
    pub node: String,
    /// `key=value` as declared.
    pub label: String,
    /// The value the node has instead, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actual: Option<String>,
}

/// A taint the cluster file declares on a node that the Node object does not carry (same key, value
/// and effect).
#[derive(Debug, Clone, serde::Serialize)]
pub struct TaintDrift {
    /// Node name.
    pub node: String,
    /// `key[=value]:Effect` as declared.
    pub taint: String,
}

/// The whole report (`status -o json` prints it).
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusReport {
    /// Cluster name.
    pub cluster: String,
    /// `ok` or `degraded` (see [`Health`]).
    pub result: Health,
    /// Nodes and stuck pods.
    #[serde(flatten)]
    pub diagnosis: Diagnosis,
    /// Nodes in the file that are not registered in the cluster.
    pub missing_nodes: Vec<String>,
    /// Declared labels the nodes do not carry (`clusterctl up` restores them).
    pub label_drift: Vec<LabelDrift>,
    /// Declared taints the nodes do not carry (`clusterctl up` restores them).
    pub taint_drift: Vec<TaintDrift>,
    /// Where the builtin CNI agent reports NetworkPolicy not enforced or enforced fail-closed.
    pub network_policy: Vec<PolicyEnforcement>,
    /// The docker lab's API load balancer, when the cluster has one (not running: `degraded`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load_balancer: Option<LoadBalancerStatus>,
}

/// The docker lab's API load balancer as the engine shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadBalancerStatus {
    /// Its container, `<cluster>-external-load-balancer` (the endpoint's host).
    pub container: String,
    /// `running`, `exited`…, or `missing` (no such container), or `unknown: <engine error>`.
    pub state: String,
    /// `127.0.0.1:<port>`, the kubeconfig's server, when published.
    pub address: Option<String>,
    /// The control planes behind it (the file's).
    pub backends: Vec<String>,
}

/// The load balancer's status for `cluster`; `None` when it has none.
fn load_balancer_status(cluster: &ValidCluster) -> Option<LoadBalancerStatus> {
    let lb = cluster.load_balancer()?;
    let found = reach::docker_provider(cluster)
        .map_err(|e| e.to_string())
        .and_then(|p| p.load_balancer().map_err(|e| e.to_string()));
    let (state, address) = match found {
        Ok(Some(f)) => (f.state, f.host_port.map(|p| format!("127.0.0.1:{p}"))),
        Ok(None) => ("missing".into(), None),
        Err(e) => (format!("unknown: {e}"), None),
    };
    Some(LoadBalancerStatus {
        container: lb.container,
        state,
        address,
        backends: cluster.control_planes().map(|n| n.name.clone()).collect(),
    })
}

/// A standing report of the builtin CNI agent about NetworkPolicy (issue 28): the newest of its
/// Events about one object from one node, when that is a Warning.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PolicyEnforcement {
    /// The node whose agent reported it.
    pub node: String,
    /// `Node <name>` or `NetworkPolicy <namespace>/<name>`.
    pub object: String,
    /// `NetworkPolicyNotEnforced` or `NetworkPolicyFailedClosed`.
    pub reason: String,
    /// The agent's message.
    pub message: String,
}

/// `status`'s entry point (with the docker lab's load balancer as the engine shows it): the cluster's API client ([`crate::access::api::cluster_api`]: `kubeconfig`, else the
/// cluster's context in `$KUBECONFIG`/`~/.kube/config`, else `admin.conf` of the first control plane,
/// its host key checked against `known_hosts`), then [`report`]. Errors: the API could not be reached
/// or read.
pub fn run(
    cluster: &ValidCluster,
    kubeconfig: Option<&Path>,
    known_hosts: Option<&Path>,
) -> Result<StatusReport, StatusError> {
    let api = crate::access::api::cluster_api(cluster, kubeconfig, known_hosts)?;
    let mut r = report(cluster, &api, known_hosts)?;
    r.load_balancer = load_balancer_status(cluster);
    if r.load_balancer
        .as_ref()
        .is_some_and(|l| l.state != "running")
    {
        r.result = Health::Degraded;
    }
    Ok(r)
}

/// Builds the report from `api`: nodes, stuck pods (asking the node runtimes for images, reached with
/// `known_hosts`), missing nodes, label and taint drift. Errors: the API could not list nodes or pods.
pub fn report(
    cluster: &ValidCluster,
    api: &dyn ClusterApi,
    known_hosts: Option<&Path>,
) -> Result<StatusReport, StatusError> {
    let nodes = api.nodes()?;
    let pods = api.pods()?;
    let lister = ImageLister::new(cluster, known_hosts);
    let diagnosis = diagnose(
        &nodes,
        &pods,
        &mut |p| {
            api.events_for(
                p.metadata.namespace.as_deref().unwrap_or(""),
                "Pod",
                p.metadata.name.as_deref().unwrap_or(""),
            )
            .unwrap_or_default()
        },
        &mut |img| lister.nodes_with(img),
    );
    let registered: BTreeSet<String> = nodes
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    let missing_nodes = cluster
        .nodes()
        .iter()
        .filter(|n| !registered.contains(&n.name))
        .map(|n| n.name.clone())
        .collect();
    let mut r = StatusReport {
        cluster: cluster.name().to_string(),
        result: Health::Ok,
        diagnosis,
        missing_nodes,
        label_drift: label_drift(cluster, &nodes),
        taint_drift: taint_drift(cluster, &nodes),
        network_policy: policy_enforcement(&agent_events(api)),
        load_balancer: None,
    };
    let healthy = r.diagnosis.nodes.iter().all(|n| n.ready)
        && r.diagnosis.stuck.is_empty()
        && r.missing_nodes.is_empty()
        && r.label_drift.is_empty()
        && r.taint_drift.is_empty()
        && r.network_policy.is_empty();
    if !healthy {
        r.result = Health::Degraded;
    }
    Ok(r)
}

/// The builtin CNI agent's NetworkPolicy Events (render's `cni::netpol` reasons); none when they
/// cannot be listed (a cluster without the builtin CNI has none either).
fn agent_events(api: &dyn ClusterApi) -> Vec<Event> {
    use clusterctl_render::cni::netpol::{ENFORCED, FAILED_CLOSED, NOT_ENFORCED};
    [NOT_ENFORCED, FAILED_CLOSED, ENFORCED]
        .iter()
        .flat_map(|r| api.events_with_reason(r).unwrap_or_default())
        .collect()
}

/// The standing reports among the agent's `events`: per reporting node and object, the newest
/// Event of component `clusterctl-cni-agent`, kept when it is a Warning (an `NetworkPolicyEnforced`
/// after a failure clears it).
pub fn policy_enforcement(events: &[Event]) -> Vec<PolicyEnforcement> {
    use clusterctl_render::cni::netpol::COMPONENT;
    let mut newest: BTreeMap<(String, String), (i64, &Event)> = BTreeMap::new();
    for e in events {
        let component = e
            .reporting_component
            .as_deref()
            .or(e.source.as_ref().and_then(|s| s.component.as_deref()));
        if component != Some(COMPONENT) {
            continue;
        }
        let node = e
            .reporting_instance
            .clone()
            .or(e.source.as_ref().and_then(|s| s.host.clone()))
            .unwrap_or_default();
        let o = &e.involved_object;
        let name = match (o.kind.as_deref(), o.namespace.as_deref()) {
            (Some("NetworkPolicy"), Some(ns)) => format!(
                "NetworkPolicy {ns}/{}",
                o.name.as_deref().unwrap_or_default()
            ),
            (kind, _) => format!(
                "{} {}",
                kind.unwrap_or_default(),
                o.name.as_deref().unwrap_or_default()
            ),
        };
        let at = micros(e);
        let slot = newest.entry((node, name)).or_insert((at, e));
        if at >= slot.0 {
            *slot = (at, e);
        }
    }
    newest
        .into_iter()
        .filter(|(_, (_, e))| e.type_.as_deref() == Some("Warning"))
        .map(|((node, object), (_, e))| PolicyEnforcement {
            node,
            object,
            reason: e.reason.clone().unwrap_or_default(),
            message: e.message.clone().unwrap_or_default(),
        })
        .collect()
}

/// When `e` happened, in microseconds (`eventTime`, else `lastTimestamp`, else `firstTimestamp`).
fn micros(e: &Event) -> i64 {
    e.event_time
        .as_ref()
        .map(|t| t.0.as_microsecond())
        .or_else(|| e.last_timestamp.as_ref().map(|t| t.0.as_microsecond()))
        .or_else(|| e.first_timestamp.as_ref().map(|t| t.0.as_microsecond()))
        .unwrap_or(0)
}

/// The Node object named like `name` among `nodes`.
fn registered<'a>(nodes: &'a [Node], name: &str) -> Option<&'a Node> {
    nodes
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some(name))
}

fn label_drift(cluster: &ValidCluster, nodes: &[Node]) -> Vec<LabelDrift> {
    let mut out = Vec::new();
    for vn in cluster.nodes() {
        let Some(n) = registered(nodes, &vn.name) else {
            continue;
        };
        let have = n.metadata.labels.clone().unwrap_or_default();
        for (k, v) in &vn.labels {
            if have.get(k) != Some(v) {
                out.push(LabelDrift {
                    node: vn.name.clone(),
                    label: format!("{k}={v}"),
                    actual: have.get(k).cloned(),
                });
            }
        }
    }
    out
}

fn taint_drift(cluster: &ValidCluster, nodes: &[Node]) -> Vec<TaintDrift> {
    let mut out = Vec::new();
    for vn in cluster.nodes() {
        let Some(n) = registered(nodes, &vn.name) else {
            continue;
        };
        let have = n
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        for t in &vn.taints {
            let value = t.value.clone().filter(|v| !v.is_empty());
            let effect = format!("{:?}", t.effect);
            let carried = have.iter().any(|h| {
                h.key == t.key
                    && h.value.clone().filter(|v| !v.is_empty()) == value
                    && h.effect == effect
            });
            if !carried {
                let shown = match &value {
                    Some(v) => format!("{}={v}:{effect}", t.key),
                    None => format!("{}:{effect}", t.key),
                };
                out.push(TaintDrift {
                    node: vn.name.clone(),
                    taint: shown,
                });
            }
        }
    }
    out
}

/// Node name → the image references its runtime holds.
type ImagesByNode = BTreeMap<String, Vec<String>>;

/// Asks every node's runtime for its images once (lazily, on the first image asked about).
struct ImageLister<'a> {
    cluster: &'a ValidCluster,
    known_hosts: Option<&'a Path>,
    listed: Mutex<Option<Option<ImagesByNode>>>,
}

impl<'a> ImageLister<'a> {
    fn new(cluster: &'a ValidCluster, known_hosts: Option<&'a Path>) -> Self {
        ImageLister {
            cluster,
            known_hosts,
            listed: Mutex::new(None),
        }
    }

    /// The nodes whose runtime holds `image`; `None` when no node runtime could be asked.
    fn nodes_with(&self, image: &str) -> Option<Vec<String>> {
        let Ok(mut guard) = self.listed.lock() else {
            return None;
        };
        if guard.is_none() {
            *guard = Some(self.list_all());
        }
        let lists = guard.as_ref().and_then(|l| l.as_ref())?;
        Some(
            lists
                .iter()
                .filter(|(_, imgs)| imgs.iter().any(|i| same_image(image, i)))
                .map(|(n, _)| n.clone())
                .collect(),
        )
    }

    /// Every reachable node's image list; `None` when no node answered.
    fn list_all(&self) -> Option<ImagesByNode> {
        let all: Vec<_> = self.cluster.nodes().iter().collect();
        let reached = reach::reach(self.cluster, &all, self.known_hosts);
        let lists = reach::on_each(&reached.transports, |_, t| {
            t.run(&Cmd::new(LIST_IMAGES).sudo())
                .ok()
                .filter(|o| o.success())
                .map(|o| {
                    o.stdout_str()
                        .lines()
                        .map(str::to_string)
                        .collect::<Vec<_>>()
                })
        });
        let ok: ImagesByNode = lists
            .into_iter()
            .filter_map(|(n, l)| l.map(|l| (n, l)))
            .collect();
        (!ok.is_empty()).then_some(ok)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(node: &str, kind: &str, ns: &str, name: &str, reason: &str, ty: &str, at: &str) -> Event {
        serde_json::from_value(json!({
            "metadata": {"name": format!("{name}.x"), "namespace": ns},
            "involvedObject": {"kind": kind, "name": name, "namespace": ns},
            "reason": reason, "type": ty, "message": format!("{reason} {name}"),
            "eventTime": at, "reportingComponent": "clusterctl-cni-agent", "reportingInstance": node
        }))
        .expect("event")
    }

    #[test]
    fn the_newest_agent_event_per_node_and_object_stands_when_it_is_a_warning() {
        let t = |s: u32| format!("2026-12-07T05:00:{s:02}.000001Z");
        let mut other = ev(
            "n9",
            "Node",
            "default",
            "n9",
            "NetworkPolicyNotEnforced",
            "Warning",
            &t(1),
        );
        other.reporting_component = Some("someone-else".into());
        let events = vec![
            ev(
                "n1",
                "Node",
                "default",
                "n1",
                "NetworkPolicyNotEnforced",
                "Warning",
                &t(1),
            ),
            // n2 recovered: the Normal one is newer.
            ev(
                "n2",
                "Node",
                "default",
                "n2",
                "NetworkPolicyEnforced",
                "Normal",
                &t(3),
            ),
            ev(
                "n2",
                "Node",
                "default",
                "n2",
                "NetworkPolicyFailedClosed",
                "Warning",
                &t(2),
            ),
            // A policy failing closed on two nodes, recovered on one.
            ev(
                "n1",
                "NetworkPolicy",
                "a",
                "bad",
                "NetworkPolicyFailedClosed",
                "Warning",
                &t(1),
            ),
            ev(
                "n2",
                "NetworkPolicy",
                "a",
                "bad",
                "NetworkPolicyFailedClosed",
                "Warning",
                &t(1),
            ),
            ev(
                "n2",
                "NetworkPolicy",
                "a",
                "bad",
                "NetworkPolicyEnforced",
                "Normal",
                &t(4),
            ),
            other,
        ];
        let got: Vec<(String, String, String)> = policy_enforcement(&events)
            .into_iter()
            .map(|p| (p.node, p.object, p.reason))
            .collect();
        let want = [
            ("n1", "NetworkPolicy a/bad", "NetworkPolicyFailedClosed"),
            ("n1", "Node n1", "NetworkPolicyNotEnforced"),
        ]
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()));
        assert_eq!(got, want);
    }
}
