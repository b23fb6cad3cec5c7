//! The Kubernetes peer source through the real `kube` client against the loopback API stand-in
//! (`clusterctl_testbed::apiserver`, HTTPS with its own CA): a NodeList in the API's JSON shape
//! becomes peers; nodes without a podCIDR or InternalIP are left out; the request is a plain list.

use clusterctl_cni::agent::kube::KubeNodes;
use clusterctl_cni::agent::PeerSource;
use clusterctl_testbed::apiserver::ApiServer;
use serde_json::json;
use std::net::Ipv4Addr;

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

#[test]
fn nodes_from_the_api_become_peers() {
    let api = ApiServer::start().expect("api stand-in");
    api.serve(
        "/api/v1/nodes",
        json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {"resourceVersion": "4711"},
               "items": [node("cp-1", Some("192.168.10.11"), Some("10.244.0.0/24")),
                         node("worker-1", Some("192.168.10.21"), Some("10.244.1.0/24")),
                         node("worker-2", Some("192.168.10.22"), None),
                         node("worker-3", None, Some("10.244.3.0/24"))]}),
    );
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kubeconfig");
    std::fs::write(&kc, api.kubeconfig("cni-agent")).unwrap();
    let mut src = KubeNodes::new(Some(kc)).expect("client");
    let peers = src.peers().expect("list nodes");
    let names: Vec<&str> = peers.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["cp-1", "worker-1"]);
    assert_eq!(peers[1].node_ip, Ipv4Addr::new(192, 168, 10, 21));
    assert_eq!(peers[1].pod_cidr.to_string(), "10.244.1.0/24");
    let reqs = api.recorded();
    assert!(
        reqs.iter()
            .any(|r| r.method == "GET" && r.path == "/api/v1/nodes"),
        "{reqs:?}"
    );
}
