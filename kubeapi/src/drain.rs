//! Draining a Node through the API, as `kubectl drain` does: cordon (`spec.unschedulable: true`), evict
//! every pod bound to the node (policy/v1 Eviction, retried while a PodDisruptionBudget refuses with
//! 429) except mirror pods (annotation `kubernetes.io/config.mirror`: the kubelet owns them) and pods of
//! a DaemonSet (its controller would recreate them there), then wait until the evicted pods are gone.
//! Also waiting for a Node to be Ready. Time is given as a deadline; polling is every `poll`.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;

use crate::api::{ApiError, ClusterApi, EvictOutcome};

/// The annotation the kubelet puts on the API copy of a static pod.
pub const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// How a drain went.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DrainReport {
    /// `namespace/name` of the pods evicted.
    pub evicted: Vec<String>,
    /// `namespace/name` of the pods left in place (mirror and DaemonSet pods).
    pub kept: Vec<String>,
}

/// Why a drain or a wait did not finish.
#[derive(Debug, thiserror::Error)]
pub enum DrainError {
    /// An API call failed.
    #[error(transparent)]
    Api(#[from] ApiError),
    /// The deadline passed (what was still pending, in words).
    #[error("timed out after {secs} s: {what}")]
    Timeout {
        /// Seconds waited.
        secs: u64,
        /// What was still pending.
        what: String,
    },
}

fn key(p: &Pod) -> String {
    format!(
        "{}/{}",
        p.metadata.namespace.as_deref().unwrap_or("default"),
        p.metadata.name.as_deref().unwrap_or_default()
    )
}

fn on_node(p: &Pod, node: &str) -> bool {
    p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node)
}

/// True for pods a drain leaves in place: mirror pods and pods owned by a DaemonSet.
pub(crate) fn kept_by_drain(p: &Pod) -> bool {
    let mirror = p
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(MIRROR_ANNOTATION));
    let daemonset = p
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "DaemonSet");
    mirror || daemonset
}

fn finished(p: &Pod) -> bool {
    matches!(
        p.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded") | Some("Failed")
    )
}

/// The instant `timeout` from now; a timeout too large for the clock (a flag of `u64::MAX` seconds)
/// is taken as ten years, which no drain or wait outlives.
fn deadline_after(timeout: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(timeout)
        .unwrap_or_else(|| now + Duration::from_secs(10 * 365 * 24 * 3600))
}

/// Drains `node`: cordons it, evicts its pods (not mirror or DaemonSet pods, nor finished ones), retrying
/// blocked evictions every `poll`, and waits until the evicted pods (by uid) are gone from the node.
/// Errors: an API failure, or `timeout` passed with pods still blocked or still present (named).
pub fn drain(
    api: &dyn ClusterApi,
    node: &str,
    timeout: Duration,
    poll: Duration,
) -> Result<DrainReport, DrainError> {
    let deadline = deadline_after(timeout);
    api.set_unschedulable(node, true)?;
    let mut report = DrainReport::default();
    let pods: Vec<Pod> = api
        .pods_on_node(node)?
        .into_iter()
        .filter(|p| on_node(p, node) && !finished(p))
        .collect();
    let mut pending: Vec<&Pod> = Vec::new();
    for p in &pods {
        if kept_by_drain(p) {
            report.kept.push(key(p));
        } else {
            pending.push(p);
        }
    }
    let mut waiting_uids = Vec::new();
    while !pending.is_empty() {
        let mut blocked = Vec::new();
        for p in pending {
            let ns = p.metadata.namespace.as_deref().unwrap_or("default");
            let name = p.metadata.name.as_deref().unwrap_or_default();
            match api.evict(ns, name)? {
                EvictOutcome::Evicted => {
                    report.evicted.push(key(p));
                    waiting_uids.push((key(p), p.metadata.uid.clone()));
                }
                EvictOutcome::Blocked(msg) => blocked.push((p, msg)),
            }
        }
        if blocked.is_empty() {
            break;
        }
        if Instant::now() >= deadline {
            let what = blocked
                .iter()
                .map(|(p, m)| format!("eviction of {} blocked: {m}", key(p)))
                .collect::<Vec<_>>()
                .join("; ");
            return Err(DrainError::Timeout {
                secs: timeout.as_secs(),
                what,
            });
        }
        std::thread::sleep(poll);
        pending = blocked.into_iter().map(|(p, _)| p).collect();
    }
    loop {
        let now: Vec<Pod> = api.pods_on_node(node)?;
        let left: Vec<String> = waiting_uids
            .iter()
            .filter(|(k, uid)| {
                now.iter()
                    .any(|p| &key(p) == k && &p.metadata.uid == uid && on_node(p, node))
            })
            .map(|(k, _)| k.clone())
            .collect();
        if left.is_empty() {
            return Ok(report);
        }
        if Instant::now() >= deadline {
            return Err(DrainError::Timeout {
                secs: timeout.as_secs(),
                what: format!("evicted pods still on {node}: {}", left.join(", ")),
            });
        }
        std::thread::sleep(poll);
    }
}

/// Waits until the Node `node` reports the Ready condition `True` (and, when `version` is given, a
/// `status.nodeInfo.kubeletVersion` equal to it, e.g. `v1.35.0`). Errors: an API failure, or `timeout`
/// passed (naming the last state seen).
pub fn wait_ready(
    api: &dyn ClusterApi,
    node: &str,
    version: Option<&str>,
    timeout: Duration,
    poll: Duration,
) -> Result<(), DrainError> {
    let deadline = deadline_after(timeout);
    loop {
        let nodes = api.nodes()?;
        let last = match nodes
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some(node))
        {
            None => format!("node {node} is not registered"),
            Some(n) => {
                let s = crate::node::node_status(n);
                let version_ok = version.is_none_or(|v| s.version == v);
                if s.ready && version_ok {
                    return Ok(());
                }
                if !s.ready {
                    format!("node {node} is not Ready: {}", s.reason.unwrap_or_default())
                } else {
                    format!(
                        "node {node} runs kubelet {} (waiting for {})",
                        s.version,
                        version.unwrap_or_default()
                    )
                }
            }
        };
        if Instant::now() >= deadline {
            return Err(DrainError::Timeout {
                secs: timeout.as_secs(),
                what: last,
            });
        }
        std::thread::sleep(poll);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::TaintSpec;
    use k8s_openapi::api::core::v1::{Event, Node};
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    #[test]
    fn a_timeout_too_large_for_the_clock_is_capped_not_a_panic() {
        let d = deadline_after(Duration::from_secs(9_300_000_000_000_000_000));
        assert!(d > Instant::now() + Duration::from_secs(365 * 24 * 3600));
        let short = deadline_after(Duration::from_secs(5));
        assert!(short <= Instant::now() + Duration::from_secs(5));
    }

    /// Pods in memory; an eviction removes the pod unless its name is in `blocked_once` (then 429 once).
    struct Fake {
        pods: Mutex<Vec<Pod>>,
        blocked_once: Mutex<Vec<String>>,
        calls: Mutex<Vec<String>>,
    }

    impl ClusterApi for Fake {
        fn nodes(&self) -> Result<Vec<Node>, ApiError> {
            Ok(vec![serde_json::from_value(serde_json::json!({
                "metadata": {"name": "w1"},
                "status": {"conditions": [{"type": "Ready", "status": "True"}],
                           "nodeInfo": {"kubeletVersion": "v1.35.0", "architecture": "amd64",
                             "bootID": "", "containerRuntimeVersion": "", "kernelVersion": "",
                             "kubeProxyVersion": "", "machineID": "", "operatingSystem": "linux",
                             "osImage": "", "systemUUID": ""}}
            }))
            .expect("node")])
        }
        fn pods(&self) -> Result<Vec<Pod>, ApiError> {
            Ok(self.pods.lock().expect("lock").clone())
        }
        fn events_for(&self, _: &str, _: &str, _: &str) -> Result<Vec<Event>, ApiError> {
            Ok(vec![])
        }
        fn patch_node_labels(
            &self,
            _: &str,
            _: &BTreeMap<String, Option<String>>,
        ) -> Result<(), ApiError> {
            Ok(())
        }
        fn set_node_taints(&self, _: &str, _: &[TaintSpec]) -> Result<(), ApiError> {
            Ok(())
        }
        fn set_unschedulable(&self, node: &str, u: bool) -> Result<(), ApiError> {
            self.calls
                .lock()
                .expect("lock")
                .push(format!("unschedulable {node} {u}"));
            Ok(())
        }
        fn evict(&self, ns: &str, pod: &str) -> Result<EvictOutcome, ApiError> {
            self.calls
                .lock()
                .expect("lock")
                .push(format!("evict {ns}/{pod}"));
            let mut b = self.blocked_once.lock().expect("lock");
            if let Some(i) = b.iter().position(|x| x == pod) {
                b.remove(i);
                return Ok(EvictOutcome::Blocked("PDB".into()));
            }
            self.pods
                .lock()
                .expect("lock")
                .retain(|p| p.metadata.name.as_deref() != Some(pod));
            Ok(EvictOutcome::Evicted)
        }
        fn delete_node(&self, _: &str) -> Result<(), ApiError> {
            Ok(())
        }
    }

    fn pod(name: &str, node: &str, extra: serde_json::Value) -> Pod {
        let mut v = serde_json::json!({
            "metadata": {"name": name, "namespace": "app", "uid": format!("uid-{name}")},
            "spec": {"nodeName": node, "containers": []},
            "status": {"phase": "Running"}
        });
        if let (Some(m), Some(e)) = (v["metadata"].as_object_mut(), extra.as_object()) {
            for (k, x) in e {
                m.insert(k.clone(), x.clone());
            }
        }
        serde_json::from_value(v).expect("pod")
    }

    #[test]
    fn drain_evicts_workloads_keeps_mirror_and_daemonset_pods_and_retries_blocked() {
        let fake = Fake {
            pods: Mutex::new(vec![
                pod("web", "w1", serde_json::json!({})),
                pod("db", "w1", serde_json::json!({})),
                pod("other-node", "w2", serde_json::json!({})),
                pod(
                    "etcd-w1",
                    "w1",
                    serde_json::json!({"annotations": {MIRROR_ANNOTATION: "x"}}),
                ),
                pod(
                    "agent",
                    "w1",
                    serde_json::json!({"ownerReferences": [{"apiVersion": "apps/v1",
                        "kind": "DaemonSet", "name": "agent", "uid": "d"}]}),
                ),
            ]),
            blocked_once: Mutex::new(vec!["db".into()]),
            calls: Mutex::new(vec![]),
        };
        let r = drain(
            &fake,
            "w1",
            Duration::from_secs(5),
            Duration::from_millis(1),
        )
        .expect("drained");
        assert_eq!(r.evicted, vec!["app/web", "app/db"]);
        assert_eq!(r.kept, vec!["app/etcd-w1", "app/agent"]);
        let calls = fake.calls.lock().expect("lock").clone();
        assert_eq!(
            calls,
            vec![
                "unschedulable w1 true",
                "evict app/web",
                "evict app/db",
                "evict app/db"
            ]
        );
        let left: Vec<String> = fake.pods().expect("pods").iter().map(key).collect();
        assert_eq!(left, vec!["app/other-node", "app/etcd-w1", "app/agent"]);
    }

    #[test]
    fn blocked_until_the_deadline_is_a_timeout_naming_the_pod() {
        let fake = Fake {
            pods: Mutex::new(vec![pod("db", "w1", serde_json::json!({}))]),
            blocked_once: Mutex::new(vec!["db".into(); 1000]),
            calls: Mutex::new(vec![]),
        };
        let e = drain(
            &fake,
            "w1",
            Duration::from_millis(20),
            Duration::from_millis(5),
        )
        .expect_err("blocked");
        assert!(e.to_string().contains("app/db blocked: PDB"), "{e}");
    }

    #[test]
    fn wait_ready_checks_condition_and_version() {
        let fake = Fake {
            pods: Mutex::new(vec![]),
            blocked_once: Mutex::new(vec![]),
            calls: Mutex::new(vec![]),
        };
        let quick = Duration::from_millis(1);
        wait_ready(&fake, "w1", Some("v1.35.0"), quick, quick).expect("ready");
        let e = wait_ready(&fake, "w1", Some("v1.36.0"), quick, quick).expect_err("old");
        assert!(e.to_string().contains("runs kubelet v1.35.0"), "{e}");
        let e = wait_ready(&fake, "nope", None, quick, quick).expect_err("missing");
        assert!(e.to_string().contains("not registered"), "{e}");
    }
}
