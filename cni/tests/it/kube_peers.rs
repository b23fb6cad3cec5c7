//! The Kubernetes peer source through the real `kube` client against the recording API server
//! (`clusterctl_testbed::apiserver`, HTTPS with its own CA), for what only the wire shows or only a
//! stand-in can do: the watch starts at the list's resourceVersion with the agent's timeout, and a
//! watch that fails (500) or expires (410) — which a real server cannot be made to do on demand —
//! backs off or lists again. Nodes becoming peers, a watch ended by a new Node, and the agent's RBAC
//! are tested against a real kube-apiserver with the agent's own token in
//! `tests/tests/it/agent_rbac.rs`.

use clusterctl_cni::agent::kube::KubeNodes;
use clusterctl_cni::agent::PeerSource;
use clusterctl_testbed::apiserver::ApiServer;
use serde_json::json;

fn node(name: &str, ip: Option<&str>, cidr: Option<&str>) -> serde_json::Value {
    let mut addresses = vec![json!({"type": "Hostname", "address": name})];
    if let Some(ip) = ip {
        addresses.insert(0, json!({"type": "InternalIP", "address": ip}));
    }
    let mut spec = json!({});
    if let Some(c) = cidr {
        spec = json!({"podCIDR": c, "podCIDRs": [c]});
    }
    json!({"apiVersion": "v1", "kind": "Node",
           "metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": "100"},
           "spec": spec, "status": {"addresses": addresses}})
}

fn source(api: &ApiServer, dir: &tempfile::TempDir) -> KubeNodes {
    let kc = dir.path().join("kubeconfig");
    std::fs::write(&kc, api.kubeconfig("cni-agent")).unwrap();
    KubeNodes::new(Some(kc)).expect("client")
}

fn node_list(rv: &str, items: Vec<serde_json::Value>) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {"resourceVersion": rv}, "items": items})
}

/// The watch requests recorded so far (GET of the node collection with `watch=true`).
fn watches(api: &ApiServer) -> Vec<String> {
    api.recorded()
        .into_iter()
        .filter(|r| {
            r.method == "GET" && r.path == "/api/v1/nodes" && r.query.contains("watch=true")
        })
        .map(|r| r.query)
        .collect()
}

#[test]
fn a_node_event_ends_the_wait_and_the_next_list_sees_the_change() {
    let api = ApiServer::start().expect("api stand-in");
    let a = node("cp-1", Some("192.168.10.11"), Some("10.244.0.0/24"));
    let b = node("worker-1", Some("192.168.10.21"), Some("10.244.1.0/24"));
    api.serve("/api/v1/nodes", node_list("4711", vec![a.clone()]));
    api.serve_watch(
        "/api/v1/nodes",
        vec![
            json!({"type": "BOOKMARK", "object": {"apiVersion": "v1", "kind": "Node",
                   "metadata": {"resourceVersion": "4712"}}}),
            json!({"type": "ADDED", "object": b.clone()}),
        ],
    );
    let dir = tempfile::tempdir().unwrap();
    let mut src = source(&api, &dir);
    assert_eq!(src.peers().expect("list").len(), 1);
    // The next list (after the event) holds both nodes.
    api.serve("/api/v1/nodes", node_list("4713", vec![a, b]));
    let t = std::time::Instant::now();
    src.wait(std::time::Duration::from_secs(120));
    assert!(
        t.elapsed() < std::time::Duration::from_secs(60),
        "an ADDED event ends the wait long before its 120 s timeout ({:?})",
        t.elapsed()
    );
    let w = watches(&api);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].contains("resourceVersion=4711") && w[0].contains("timeoutSeconds=120"),
        "the watch starts at the list's resourceVersion: {}",
        w[0]
    );
    let peers = src.peers().expect("list again");
    let names: Vec<&str> = peers.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["cp-1", "worker-1"]);
    // The second watch starts from the second list's resourceVersion.
    src.wait(std::time::Duration::from_secs(120));
    let w = watches(&api);
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(w[1].contains("resourceVersion=4713"), "{}", w[1]);
}

#[test]
fn a_failed_watch_backs_off_then_lists_again() {
    use clusterctl_cni::agent::kube::ERROR_BACKOFF;
    let api = ApiServer::start().expect("api stand-in");
    let a = node("cp-1", Some("192.168.10.11"), Some("10.244.0.0/24"));
    api.serve("/api/v1/nodes", node_list("10", vec![a]));
    let status = |code: u16, reason: &str| {
        json!({"type": "ERROR", "object": {"apiVersion": "v1", "kind": "Status", "metadata": {},
               "status": "Failure", "message": format!("{reason} for the test"), "reason": reason,
               "code": code}})
    };
    api.serve_watch("/api/v1/nodes", vec![status(500, "InternalError")]);
    let dir = tempfile::tempdir().unwrap();
    let mut src = source(&api, &dir);
    src.peers().expect("list");
    let t = std::time::Instant::now();
    src.wait(std::time::Duration::from_secs(120));
    let took = t.elapsed();
    assert!(
        took >= ERROR_BACKOFF && took < std::time::Duration::from_secs(60),
        "a failed watch waits the back-off, not the whole timeout: {took:?}"
    );
    // 410 Gone (resourceVersion too old): list again at once, no back-off needed.
    api.serve_watch("/api/v1/nodes", vec![status(410, "Expired")]);
    let t = std::time::Instant::now();
    src.wait(std::time::Duration::from_secs(120));
    assert!(t.elapsed() < std::time::Duration::from_secs(60));
    assert_eq!(src.peers().expect("list after 410").len(), 1);
    let lists = api
        .recorded()
        .iter()
        .filter(|r| r.method == "GET" && r.path == "/api/v1/nodes" && !r.query.contains("watch"))
        .count();
    assert_eq!(lists, 2, "one list before, one after the watches");
    assert_eq!(watches(&api).len(), 2);
}
