//! What only the wire shows, through the real `kube` client against the recording API test server
//! (`clusterctl_testbed::apiserver`, HTTPS on loopback with a CA made in the test): the patch type and
//! body of each Node patch and the field manager. A real API server stores the same result for a
//! JSON merge patch and a strategic merge patch of `spec.taints` (the list has no merge key, so both
//! replace it), so only the request says that taints and cordon go as `kubectl taint`/`kubectl cordon`
//! send them. Everything the server's answer decides — decoding, field selectors, merge semantics,
//! evictions and PodDisruptionBudgets, deletes, 404s, TLS — is tested against a real kube-apiserver in
//! `real_api.rs`.

use std::collections::BTreeMap;

use clusterctl_kubeapi::{ClusterApi, KubeClusterApi, TaintSpec};
use clusterctl_testbed::apiserver::ApiServer;
use serde_json::json;

#[test]
fn node_patches_carry_their_patch_type_body_and_field_manager() {
    let server = ApiServer::start().expect("test API server starts");
    server.serve(
        "/api/v1/nodes/lab-worker2",
        json!({"kind": "Node", "apiVersion": "v1", "metadata": {"name": "lab-worker2"}}),
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let kc = dir.path().join("config");
    std::fs::write(&kc, server.kubeconfig("lab")).expect("kubeconfig written");
    let api = KubeClusterApi::from_kubeconfig(&kc, Some("lab")).expect("client from kubeconfig");

    let labels = BTreeMap::from([
        ("disktype".to_string(), Some("ssd".to_string())),
        ("old".to_string(), None),
    ]);
    api.patch_node_labels("lab-worker2", &labels)
        .expect("label patch");
    let taints = vec![TaintSpec {
        key: "dedicated".into(),
        value: Some("db".into()),
        effect: "NoSchedule".into(),
    }];
    api.set_node_taints("lab-worker2", &taints).expect("taint");
    api.set_unschedulable("lab-worker2", true).expect("cordon");
    api.set_unschedulable("lab-worker2", false)
        .expect("uncordon");

    let patches: Vec<_> = server
        .recorded()
        .into_iter()
        .filter(|r| r.method == "PATCH")
        .collect();
    assert_eq!(patches.len(), 4);
    for p in &patches {
        assert_eq!(p.path, "/api/v1/nodes/lab-worker2");
        assert!(p.query.contains("fieldManager=clusterctl"), "{}", p.query);
    }
    assert_eq!(patches[0].content_type, "application/merge-patch+json");
    assert_eq!(
        patches[0].json(),
        json!({"metadata": {"labels": {"disktype": "ssd", "old": null}}})
    );
    for p in &patches[1..] {
        assert_eq!(p.content_type, "application/strategic-merge-patch+json");
    }
    assert_eq!(
        patches[1].json(),
        json!({"spec": {"taints": [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]}})
    );
    assert_eq!(patches[2].json(), json!({"spec": {"unschedulable": true}}));
    assert_eq!(patches[3].json(), json!({"spec": {"unschedulable": false}}));
}
