//! `clusterctl node remove` on the test bed: two systemd node containers over SSH with the recording
//! kubeadm stand-in, and a real control plane (`clusterctl_testbed::envtest`: upstream etcd and
//! kube-apiserver on loopback) holding the worker's Node and pods. One pod is covered by a
//! PodDisruptionBudget whose status (written as the disruption controller would) allows no disruption,
//! so the real eviction API refuses it with 429 until the test lets the budget allow one. Checks: the
//! Node is cordoned, the pods are evicted (the refused one retried until accepted and the refusal
//! explained; the DaemonSet pod and a pod on another node left alone), the Node is deleted — and
//! between the drain and the delete, `kubeadm reset -f --config` with the rendered ResetConfiguration
//! on the node. The first control plane and a node not in the file are refused with exit code 2
//! before anything runs; `--dry-run` prints the plan and changes neither the API nor the node. (The patch type of the cordon is checked on the wire in
//! kubeapi/tests/it/recorded_api.rs.)

use std::time::{Duration, Instant};

use clusterctl_testbed::cli::{
    install_standin, ssh_cluster_yaml, standin_calls, Clusterctl, FileNode, Run, KUBEADM_STANDIN,
};
use clusterctl_testbed::docker::{docker_available, TestCluster};
use clusterctl_testbed::envtest::Envtest;
use clusterctl_testbed::{is_root, require};
use serde_json::json;

/// A running, Ready pod `name` labelled `app=<app>`, owned by a controller of kind `owner`, bound to
/// `node` (no scheduler runs), its status written as the kubelet would. With a grace period of 0
/// the API server removes it at once when it is evicted (no kubelet has to confirm).
fn pod(env: &Envtest, ns: &str, name: &str, node: &str, app: &str, owner: &str) {
    env.create(
        &format!("/api/v1/namespaces/{ns}/pods"),
        &json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "labels": {"app": app},
                             "ownerReferences": [{"apiVersion": "apps/v1", "kind": owner,
                                                  "name": format!("{name}-owner"),
                                                  "uid": "00000000-0000-0000-0000-00000000000a",
                                                  "controller": true}]},
                "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0,
                         "containers": [{"name": "c", "image": "busybox:1.36"}]}}),
    )
    .expect("pod");
    env.merge_patch(
        &format!("/api/v1/namespaces/{ns}/pods/{name}/status"),
        &json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}),
    )
    .expect("pod status");
}

/// Writes the budget's status as the disruption controller would: `allowed` disruptions.
fn budget_status(env: &Envtest, ns: &str, name: &str, allowed: u32) {
    let path = format!("/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/{name}");
    let generation = env.get(&path).expect("budget")["metadata"]["generation"].clone();
    env.merge_patch(
        &format!("{path}/status"),
        &json!({"status": {"observedGeneration": generation, "disruptionsAllowed": allowed,
                           "currentHealthy": 1 + allowed, "desiredHealthy": 1, "expectedPods": 1 + allowed}}),
    )
    .expect("budget status");
}

fn exists(env: &Envtest, path: &str) -> bool {
    env.get(path).is_ok()
}

/// `clusterctl node remove -f cluster.yaml --known-hosts KH ARGS…`.
fn remove(cli: &Clusterctl, kh: &str, args: &[&str]) -> Run {
    let mut all = vec!["node", "remove", "-f", "cluster.yaml", "--known-hosts", kh];
    all.extend_from_slice(args);
    cli.run(&all).expect("node remove")
}

#[test]
fn node_remove_drains_resets_and_deletes_the_node() {
    if !require("root and a Docker engine", is_root() && docker_available()) {
        return;
    }
    // Its own control plane: it holds the test nodes' names as Nodes.
    let Some(api) = Envtest::require_own() else {
        return;
    };
    let tc = TestCluster::start("nr", 2).expect("test nodes");
    let (cp, w) = (&tc.nodes[0], &tc.nodes[1]);
    for n in [cp, w] {
        install_standin(n, KUBEADM_STANDIN, "/usr/bin/kubeadm").expect("stand-in");
    }
    let home = tempfile::tempdir().expect("home");
    let cli = Clusterctl::new(env!("CARGO_BIN_EXE_clusterctl"), home.path());
    let kh = cp.known_hosts.to_string_lossy().into_owned();
    let nodes = [FileNode::control_plane(cp), FileNode::worker(w)];
    std::fs::write(
        home.path().join("cluster.yaml"),
        ssh_cluster_yaml("rmlab", &tc.key.private, "none", None, "", &nodes),
    )
    .expect("file");

    // Refused before anything runs: the first control plane, a node not in the file.
    for (node, says) in [
        (cp.name.as_str(), "first control plane"),
        ("nope", "not in the cluster file"),
    ] {
        let r = remove(&cli, &kh, &[node]);
        assert_eq!(r.code, 2, "{}", r.all());
        assert!(r.stderr.contains(says), "{}", r.all());
    }
    assert!(standin_calls(w).expect("calls").is_empty());

    // The API: the worker's Node, its pods (one behind a budget), a DaemonSet pod, a pod elsewhere.
    let ns = api.create_namespace("app").expect("namespace");
    for n in [&cp.name, &w.name] {
        api.create_node(
            n,
            &Default::default(),
            json!({}),
            json!({"conditions": [{"type": "Ready", "status": "True"}]}),
        )
        .expect("node");
    }
    // kube-system's `default` ServiceAccount, which a controller-manager would have made.
    let _ = api.create(
        "/api/v1/namespaces/kube-system/serviceaccounts",
        &json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}),
    );
    pod(&api, &ns, "web-1", &w.name, "web", "ReplicaSet");
    pod(&api, &ns, "db-0", &w.name, "db", "StatefulSet");
    pod(
        &api,
        "kube-system",
        "agent-x",
        &w.name,
        "agent",
        "DaemonSet",
    );
    pod(&api, &ns, "web-2", &cp.name, "web", "ReplicaSet");
    api.create(
        &format!("/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets"),
        &json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "db"},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}}),
    )
    .expect("budget");
    budget_status(&api, &ns, "db", 0);
    std::fs::write(cli.kubeconfig(), api.kubeconfig("rmlab")).expect("kubeconfig");
    let pod_path = |ns: &str, name: &str| format!("/api/v1/namespaces/{ns}/pods/{name}");
    let node_path = format!("/api/v1/nodes/{}", w.name);

    // --dry-run: the plan, and nothing changed — neither the Node, its pods nor the node.
    let r = remove(&cli, &kh, &["--dry-run", &w.name]);
    let out = r.all();
    assert_eq!(r.code, 0, "{out}");
    for planned in [
        format!("drain node {}", w.name),
        "kubeadm reset -f --config /etc/kubernetes/kubeadm/reset.yaml".to_string(),
        format!("delete Node {}", w.name),
        "change(s) planned; nothing was changed (dry run).".to_string(),
    ] {
        assert!(out.contains(&planned), "{planned}:\n{out}");
    }
    let node = api.get(&node_path).expect("node");
    assert_ne!(node["spec"]["unschedulable"], true, "not cordoned");
    assert!(exists(&api, &pod_path(&ns, "web-1")) && exists(&api, &pod_path(&ns, "db-0")));
    assert!(standin_calls(w).expect("calls").is_empty(), "no reset");

    let runner = cli.clone();
    let kc = cli.kubeconfig().to_string_lossy().into_owned();
    let (kh2, wname) = (kh.clone(), w.name.clone());
    let handle = std::thread::spawn(move || {
        remove(
            &runner,
            &kh2,
            &[
                "--kubeconfig",
                &kc,
                "--retry-interval",
                "1",
                "--timeout",
                "90",
                &wname,
            ],
        )
    });
    // Once the drain has started (the Node cordoned, web-1 evicted), give it a few retries against
    // the budget, then let the budget allow one disruption.
    let start = Instant::now();
    let drain_started = || {
        api.get(&node_path)
            .map(|n| n["spec"]["unschedulable"] == true)
            .unwrap_or(false)
            && !exists(&api, &pod_path(&ns, "web-1"))
    };
    while !drain_started() {
        assert!(
            start.elapsed() < Duration::from_secs(90) && !handle.is_finished(),
            "the drain did not start"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        exists(&api, &pod_path(&ns, "db-0")),
        "the budget holds db-0 while it allows no disruption"
    );
    budget_status(&api, &ns, "db", 1);
    let r = handle.join().expect("thread");
    let out = r.all();
    assert_eq!(r.code, 0, "{out}");
    eprintln!("--- session output ---\n{out}");
    assert!(
        out.contains(&format!("{ns}/db-0"))
            && out.contains("PodDisruptionBudget")
            && out.contains("disruption budget"),
        "the refusal is explained:\n{out}"
    );

    // What the API server holds now: the evicted pods gone, the DaemonSet pod and the pod on the
    // control plane still there, the Node deleted.
    assert!(!exists(&api, &pod_path(&ns, "web-1")));
    assert!(!exists(&api, &pod_path(&ns, "db-0")));
    assert!(
        exists(&api, &pod_path("kube-system", "agent-x")),
        "DaemonSet pod kept"
    );
    assert!(
        exists(&api, &pod_path(&ns, "web-2")),
        "a pod on another node is not touched"
    );
    assert!(!exists(&api, &node_path), "the Node is deleted");
    assert!(exists(&api, &format!("/api/v1/nodes/{}", cp.name)));

    // The reset on the node, between the drain and the delete.
    let calls = standin_calls(w).expect("calls");
    assert_eq!(
        calls,
        ["kubeadm reset -f --config /etc/kubernetes/kubeadm/reset.yaml"]
    );
    let cfg = w
        .sh("cat /var/log/clusterctl-standin/1-kubeadm.yaml")
        .expect("reset config");
    assert!(
        cfg.contains("kind: ResetConfiguration") && cfg.contains("kubeadm.k8s.io/v1beta4"),
        "{cfg}"
    );
    let drained = out.find(&format!("{}: drained", w.name)).expect("drained");
    let reset = out
        .find(&format!("{}: kubeadm reset: done", w.name))
        .expect("reset");
    let deleted = out
        .find(&format!("{}: Node object deleted", w.name))
        .expect("deleted");
    assert!(drained < reset && reset < deleted, "{out}");
    assert!(
        standin_calls(cp).expect("calls").is_empty(),
        "nothing ran on the control plane"
    );
}
