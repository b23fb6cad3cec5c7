//! What the policy loop tells the cluster, as core/v1 Events from component [`COMPONENT`] (the agent's
//! ClusterRole may `create` events, nothing else on them):
//!
//! * [`NOT_ENFORCED`] (Warning) on this node's Node, namespace `default` (where the kubelet puts Node
//!   events): `nft` is not installed, or it refused even the fail-closed table — NetworkPolicy is not
//!   enforced on this node at all;
//! * [`FAILED_CLOSED`] (Warning) on the Node: `nft` refused the compiled rules, so the node enforces the
//!   fail-closed table (every pod a policy selects isolated, nothing allowed); and on a NetworkPolicy
//!   (its namespace) the compiler could not program: its pods are isolated and it allows nothing;
//! * [`ENFORCED`] (Normal) on the Node, once the rules are applied again after one of the two, and on
//!   a NetworkPolicy that no longer fails closed.
//!
//! `clusterctl status` reads the newest of these per object: a Warning is shown until an [`ENFORCED`]
//! follows it. Every notice is also logged. See docs/cni.md, "Fail closed".

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};

pub use clusterctl_render::cni::netpol::{COMPONENT, ENFORCED, FAILED_CLOSED, NOT_ENFORCED};

/// One thing to report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// NetworkPolicy is not enforced on the node, and why.
    NotEnforced(String),
    /// The node enforces the fail-closed table, and why.
    NodeFailedClosed(String),
    /// The node's rules are applied as compiled again.
    Enforced,
    /// A policy that failed closed is programmed as written again.
    PolicyEnforced {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Its uid, when known.
        uid: Option<String>,
    },
    /// A policy fails closed.
    PolicyFailedClosed {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Its uid, when known.
        uid: Option<String>,
        /// Why it could not be programmed.
        why: String,
    },
}

impl Notice {
    /// The log line of the notice on node `node`.
    pub fn line(&self, node: &str) -> String {
        let e = event(node, self, now());
        format!(
            "{} {} {}: {}",
            e.type_.unwrap_or_default(),
            e.reason.unwrap_or_default(),
            e.involved_object.name.unwrap_or_default(),
            e.message.unwrap_or_default()
        )
    }
}

fn now() -> Timestamp {
    Timestamp::now()
}

/// The Event reporting `n` of node `node` at `now`: its object, reason, type and message.
pub fn event(node: &str, n: &Notice, now: Timestamp) -> Event {
    let node_ref = || ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: Some(node.into()),
        ..Default::default()
    };
    let (object, ns, reason, type_, message) = match n {
        Notice::NotEnforced(why) => (
            node_ref(),
            "default".to_string(),
            NOT_ENFORCED,
            "Warning",
            format!("NetworkPolicy is NOT enforced on node {node}: {why}"),
        ),
        Notice::NodeFailedClosed(why) => (
            node_ref(),
            "default".to_string(),
            FAILED_CLOSED,
            "Warning",
            format!(
                "node {node} enforces NetworkPolicy fail-closed: {why}; every pod a policy selects \
                 here is isolated and allowed nothing"
            ),
        ),
        Notice::Enforced => (
            node_ref(),
            "default".to_string(),
            ENFORCED,
            "Normal",
            format!("NetworkPolicy is enforced on node {node} as written again"),
        ),
        Notice::PolicyEnforced {
            namespace,
            name,
            uid,
        } => (
            policy_ref(namespace, name, uid),
            namespace.clone(),
            ENFORCED,
            "Normal",
            format!("programmed on node {node} as written again"),
        ),
        Notice::PolicyFailedClosed {
            namespace,
            name,
            uid,
            why,
        } => (
            policy_ref(namespace, name, uid),
            namespace.clone(),
            FAILED_CLOSED,
            "Warning",
            format!(
                "cannot be programmed on node {node}: {why}; the pods it selects there are \
                 isolated and it allows nothing"
            ),
        ),
    };
    let base = object.name.clone().unwrap_or_default();
    Event {
        metadata: ObjectMeta {
            generate_name: Some(format!("{base}.")),
            namespace: Some(ns),
            ..Default::default()
        },
        involved_object: object,
        reason: Some(reason.into()),
        message: Some(message),
        type_: Some(type_.into()),
        count: Some(1),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        event_time: Some(MicroTime(now)),
        action: Some("Enforce".into()),
        reporting_component: Some(COMPONENT.into()),
        reporting_instance: Some(node.into()),
        source: Some(EventSource {
            component: Some(COMPONENT.into()),
            host: Some(node.into()),
        }),
        ..Default::default()
    }
}

fn policy_ref(namespace: &str, name: &str, uid: &Option<String>) -> ObjectReference {
    ObjectReference {
        api_version: Some("networking.k8s.io/v1".into()),
        kind: Some("NetworkPolicy".into()),
        name: Some(name.into()),
        namespace: Some(namespace.into()),
        uid: uid.clone(),
        ..Default::default()
    }
}

/// Logs each of `notices` and creates its Event; a failed create is logged (the log line stands).
pub async fn post(client: &kube::Client, node: &str, notices: &[Notice]) {
    for n in notices {
        eprintln!("clusterctl cni agent: {}", n.line(node));
        let e = event(node, n, now());
        let ns = e.metadata.namespace.clone().unwrap_or_default();
        let api: Api<Event> = Api::namespaced(client.clone(), &ns);
        if let Err(err) = api.create(&PostParams::default(), &e).await {
            eprintln!("clusterctl cni agent: network policy: event not recorded: {err}");
        }
    }
}
