//! The `labels` phase's decisions (`clusterctl_phases::up::labels`) against what a real API server
//! stores (`clusterctl_testbed::envtest`): from a Node whose labels and taints drifted, the phase's
//! label merge patch and taint list, sent through `KubeClusterApi`, leave a Node on which the same
//! decisions find nothing left to do — also for a key-only taint, which the server stores without a
//! value, next to the `node.kubernetes.io/not-ready` taint the API server itself adds to a new Node —
//! and after a label and a taint are removed by hand.

use std::collections::BTreeMap;

use clusterctl_kubeapi::{ClusterApi, KubeClusterApi, Node, TaintSpec};
use clusterctl_phases::up::labels::{label_patch, node_taints, taint_spec, taint_update};
use clusterctl_spec::model::{Taint, TaintEffect};
use clusterctl_testbed::envtest::Envtest;
use clusterctl_testbed::unique_name;
use serde_json::json;

fn stored(api: &KubeClusterApi, name: &str) -> Node {
    api.nodes()
        .expect("nodes")
        .into_iter()
        .find(|n| n.metadata.name.as_deref() == Some(name))
        .expect("the node is listed")
}

/// One round of the phase: patch what differs; returns whether anything was sent.
fn converge(
    api: &KubeClusterApi,
    name: &str,
    want_labels: &BTreeMap<String, String>,
    want_taints: &[TaintSpec],
) -> bool {
    let node = stored(api, name);
    let labels = label_patch(Some(&node), want_labels);
    let taints = taint_update(&node_taints(Some(&node)), want_taints);
    if !labels.is_empty() {
        api.patch_node_labels(name, &labels).expect("label patch");
    }
    if let Some(all) = &taints {
        api.set_node_taints(name, all).expect("taint patch");
    }
    !labels.is_empty() || taints.is_some()
}

fn show(ts: &[TaintSpec]) -> Vec<String> {
    ts.iter()
        .map(|t| match &t.value {
            Some(v) => format!("{}={v}:{}", t.key, t.effect),
            None => format!("{}:{}", t.key, t.effect),
        })
        .collect()
}

#[test]
fn drifted_labels_and_taints_converge_and_stay_converged() {
    let Some(env) = Envtest::require_shared() else {
        return;
    };
    let name = unique_name("lbl");
    env.create_node(
        &name,
        &[("disktype", "hdd"), ("zone", "a"), ("extra", "kept")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        json!({"taints": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"},
                          {"key": "other", "effect": "NoExecute"},
                          {"key": "keyonly", "value": "", "effect": "NoSchedule"}]}),
        json!({}),
    )
    .expect("node");
    let dir = tempfile::tempdir().expect("tempdir");
    let kc = dir.path().join("admin.conf");
    std::fs::write(&kc, env.kubeconfig("admin")).expect("kubeconfig");
    let api = KubeClusterApi::from_kubeconfig(&kc, None).expect("client");

    let want_labels: BTreeMap<String, String> = [("disktype", "ssd"), ("zone", "a")]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let want_taints: Vec<TaintSpec> = [("dedicated", Some("db")), ("keyonly", None)]
        .into_iter()
        .map(|(key, value)| {
            taint_spec(&Taint {
                key: key.into(),
                value: value.map(Into::into),
                effect: TaintEffect::NoSchedule,
            })
        })
        .collect();
    assert!(converge(&api, &name, &want_labels, &want_taints), "drift");
    assert!(
        !converge(&api, &name, &want_labels, &want_taints),
        "a second round finds nothing to do"
    );
    let n = stored(&api, &name);
    let l = n.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        (
            l["disktype"].as_str(),
            l["zone"].as_str(),
            l["extra"].as_str()
        ),
        ("ssd", "a", "kept")
    );
    assert_eq!(
        show(&node_taints(Some(&n))),
        [
            "other:NoExecute",
            "node.kubernetes.io/not-ready:NoSchedule",
            "dedicated=db:NoSchedule",
            "keyonly:NoSchedule"
        ],
        "taints not in the file are left alone, also the not-ready taint the API server's \
         TaintNodesByCondition admission puts on every new Node"
    );

    // Removed by hand (as `kubectl label node X disktype-` and `kubectl taint node X dedicated-`).
    env.call(
        "PATCH",
        &format!("/api/v1/nodes/{name}"),
        Some("application/json-patch+json"),
        Some(
            &json!([{"op": "remove", "path": "/metadata/labels/disktype"},
                     {"op": "remove", "path": "/spec/taints/2"}]),
        ),
    )
    .expect("hand edit");
    assert!(
        converge(&api, &name, &want_labels, &want_taints),
        "restored"
    );
    assert!(!converge(&api, &name, &want_labels, &want_taints));
    let n = stored(&api, &name);
    assert_eq!(
        n.metadata.labels.clone().unwrap_or_default()["disktype"],
        "ssd"
    );
    assert_eq!(
        show(&node_taints(Some(&n))),
        [
            "other:NoExecute",
            "node.kubernetes.io/not-ready:NoSchedule",
            "dedicated=db:NoSchedule",
            "keyonly:NoSchedule"
        ]
    );
}
