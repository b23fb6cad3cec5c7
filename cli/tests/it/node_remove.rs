//! `clusterctl node remove` on the test bed: two systemd node containers over SSH with the recording
//! kubeadm stand-in, and the recording Kubernetes API server (HTTPS on loopback) serving the worker's
//! pods. One pod's eviction is refused with 429 (a PodDisruptionBudget) until the test lets it through.
//! Checks, in the order the API server received them: the cordon (strategic merge patch of
//! `spec.unschedulable: true`), the pod list, the evictions (policy/v1 Eviction; the refused one
//! retried until accepted; the DaemonSet pod never evicted), then `DELETE` of the Node — and between the
//! drain and the delete, `kubeadm reset -f --config` with the rendered ResetConfiguration on the node.
//! The first control plane and a node not in the file are refused with exit code 2 before anything runs.

use std::time::{Duration, Instant};

use clusterctl_testbed::apiserver::{ApiServer, Recorded};
use clusterctl_testbed::cli::{
    install_standin, ssh_cluster_yaml, standin_calls, Clusterctl, FileNode, KUBEADM_STANDIN,
};
use clusterctl_testbed::docker::{docker_available, TestCluster};
use clusterctl_testbed::{is_root, require};
use serde_json::{json, Value};

fn pod(ns: &str, name: &str, node: &str, owner: &str) -> Value {
    json!({
        "metadata": {"name": name, "namespace": ns, "uid": format!("uid-{name}"),
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": owner, "name": format!("{name}-owner"),
                                          "uid": format!("owner-{name}"), "controller": true}]},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox:1.36"}]},
        "status": {"phase": "Running"}
    })
}

fn pod_list(items: Vec<Value>) -> Value {
    json!({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items})
}

fn eviction_path(ns: &str, name: &str) -> String {
    format!("/api/v1/namespaces/{ns}/pods/{name}/eviction")
}

fn is_eviction_of(r: &Recorded, ns: &str, name: &str) -> bool {
    r.method == "POST" && r.path == eviction_path(ns, name)
}

#[test]
fn node_remove_drains_resets_and_deletes_the_node() {
    if !require("root and a Docker engine", is_root() && docker_available()) {
        return;
    }
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
    let r = cli
        .run(&[
            "node",
            "remove",
            "-f",
            "cluster.yaml",
            "--known-hosts",
            &kh,
            &cp.name,
        ])
        .expect("remove");
    assert_eq!(r.code, 2, "{}", r.all());
    assert!(r.stderr.contains("first control plane"), "{}", r.all());
    let r = cli
        .run(&[
            "node",
            "remove",
            "-f",
            "cluster.yaml",
            "--known-hosts",
            &kh,
            "nope",
        ])
        .expect("remove");
    assert_eq!(r.code, 2, "{}", r.all());
    assert!(r.stderr.contains("not in the cluster file"), "{}", r.all());
    assert!(standin_calls(w).expect("calls").is_empty());

    // The API: the worker's Node, its pods (one behind a budget), a DaemonSet pod, a pod elsewhere.
    let api = ApiServer::start().expect("api server");
    let node_path = format!("/api/v1/nodes/{}", w.name);
    api.serve(
        &node_path,
        json!({"kind": "Node", "apiVersion": "v1", "metadata": {"name": w.name}, "spec": {}}),
    );
    api.serve(
        "/api/v1/pods",
        pod_list(vec![
            pod("app", "web-1", &w.name, "ReplicaSet"),
            pod("app", "db-0", &w.name, "StatefulSet"),
            pod("kube-system", "agent-x", &w.name, "DaemonSet"),
            pod("app", "web-2", &cp.name, "ReplicaSet"),
        ]),
    );
    api.respond(
        "POST",
        &eviction_path("app", "web-1"),
        201,
        json!({"kind": "Eviction"}),
    );
    api.respond(
        "POST",
        &eviction_path("app", "db-0"),
        429,
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "TooManyRequests", "code": 429,
               "message": "Cannot evict pod as it would violate the pod's disruption budget."}),
    );
    std::fs::write(cli.kubeconfig(), api.kubeconfig("rmlab")).expect("kubeconfig");

    let runner = cli.clone();
    let kc = cli.kubeconfig().to_string_lossy().into_owned();
    let (kh2, wname) = (kh.clone(), w.name.clone());
    let handle = std::thread::spawn(move || {
        runner.run(&[
            "node",
            "remove",
            "-f",
            "cluster.yaml",
            "--known-hosts",
            &kh2,
            "--kubeconfig",
            &kc,
            "--retry-interval",
            "1",
            "--timeout",
            "90",
            &wname,
        ])
    });
    // Once the budget has refused an eviction, let it through and let the evicted pods go.
    let start = Instant::now();
    while !api
        .recorded()
        .iter()
        .any(|r| is_eviction_of(r, "app", "db-0"))
    {
        assert!(
            start.elapsed() < Duration::from_secs(90),
            "no eviction of db-0: {:?}",
            api.recorded()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    api.respond(
        "POST",
        &eviction_path("app", "db-0"),
        201,
        json!({"kind": "Eviction"}),
    );
    api.serve(
        "/api/v1/pods",
        pod_list(vec![
            pod("kube-system", "agent-x", &w.name, "DaemonSet"),
            pod("app", "web-2", &cp.name, "ReplicaSet"),
        ]),
    );
    let r = handle.join().expect("thread").expect("remove");
    let out = r.all();
    assert_eq!(r.code, 0, "{out}");
    eprintln!("--- session output ---\n{out}");
    assert!(
        out.contains("app/db-0")
            && out.contains("PodDisruptionBudget")
            && out.contains("disruption budget"),
        "the refusal is explained:\n{out}"
    );

    // The requests in order: cordon, list, evictions (db-0 refused at least once, then accepted), delete.
    let rec: Vec<Recorded> = api
        .recorded()
        .into_iter()
        .filter(|r| r.method != "GET" || r.path == "/api/v1/pods")
        .collect();
    let desc: Vec<String> = rec
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert_eq!(rec[0].method, "PATCH", "{desc:?}");
    assert_eq!(rec[0].path, node_path, "{desc:?}");
    assert_eq!(
        rec[0].content_type,
        "application/strategic-merge-patch+json"
    );
    assert_eq!(rec[0].json(), json!({"spec": {"unschedulable": true}}));
    assert_eq!(desc[1], "GET /api/v1/pods", "{desc:?}");
    let db: Vec<usize> = (0..rec.len())
        .filter(|i| is_eviction_of(&rec[*i], "app", "db-0"))
        .collect();
    assert!(db.len() >= 2, "refused then retried: {desc:?}");
    let web: Vec<usize> = (0..rec.len())
        .filter(|i| is_eviction_of(&rec[*i], "app", "web-1"))
        .collect();
    assert_eq!(web.len(), 1, "{desc:?}");
    assert!(web[0] > 1 && db[0] > 1, "{desc:?}");
    assert!(
        !desc
            .iter()
            .any(|d| d.contains("agent-x") || d.contains("web-2")),
        "{desc:?}"
    );
    let body = rec[db[0]].json();
    assert_eq!(body["kind"], "Eviction");
    assert_eq!(body["apiVersion"], "policy/v1");
    let last = rec.last().expect("requests");
    assert_eq!(
        (last.method.as_str(), last.path.as_str()),
        ("DELETE", node_path.as_str()),
        "{desc:?}"
    );
    assert_eq!(
        desc.iter().filter(|d| d.starts_with("DELETE")).count(),
        1,
        "{desc:?}"
    );

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
