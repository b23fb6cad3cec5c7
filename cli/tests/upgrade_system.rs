//! Whole-system test of `clusterctl upgrade` on the test bed: two control planes and a worker as
//! systemd node containers over real SSH, with the recording stand-ins of `tests/standins/` (kubeadm,
//! kubelet, kubectl) and, from this file, recording `apt-get`/`apt-mark`/`crictl` stand-ins; the
//! Kubernetes API is the recording HTTPS API server (`clusterctl_testbed::apiserver`), which the first
//! control plane's admin.conf points at. A thread plays the cluster's part: an evicted pod disappears,
//! and an uncordoned node reports the kubelet version of the last kubelet package installed on it.
//! The nodes hold what `kubeadm init/join` of v1.34.1 leaves (admin.conf, kubelet.conf, the
//! kube-apiserver static pod with its image tag); no Kubernetes runs here.
//!
//! Checks: `--to` unequal to the file, a skipped minor and a downgrade are refused (exit 2) before any
//! change; 1.34.1 → 1.35.0 runs kubeadm on every node, the etcd snapshot on the first control plane
//! before any node is drained, then one node at a time (cordon → kubeadm → kubelet → uncordon → Ready);
//! a failure injected in `kubeadm upgrade node` on the second node stops there with that node cordoned
//! and a resume hint, nothing done on the worker; the re-run resumes (no step repeated on the first
//! control plane, no second drain of the second node) and finishes; a third run changes nothing.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clusterctl_testbed::apiserver::{ApiServer, Recorded};
use clusterctl_testbed::cli::StandinCluster;
use clusterctl_testbed::cli::{
    install_standin, install_standins, ssh_cluster_yaml, standin_calls, Clusterctl, FileNode, Run,
};
use clusterctl_testbed::docker::{docker_available, TestNode};
use clusterctl_testbed::{is_root, require};
use serde_json::{json, Value};

/// `apt-get`/`apt-mark` stand-in: records its argv; `install kubelet='1.35.0-*' …` records the
/// installed kubelet version where the test's API thread reads it.
const APT_STANDIN: &str = r#"#!/bin/sh
# STAND-IN for apt-get / apt-mark (clusterctl upgrade test). Records argv. Not a package manager.
mkdir -p /var/log/clusterctl-standin
echo "$(basename "$0") $*" >> /var/log/clusterctl-standin/calls.log
for a in "$@"; do
  case "$a" in kubelet=*) v=${a#kubelet=}; v=${v%%-*}; echo "v$v" > /var/lib/clusterctl-standin/kubelet-version-$(hostname) ;; esac
done
exit 0
"#;

/// `crictl` stand-in: `ps` names an etcd container, `exec … snapshot save PATH` writes PATH.
const CRICTL_STANDIN: &str = r#"#!/bin/sh
# STAND-IN for crictl (clusterctl upgrade test). Records argv. Not a container runtime.
echo "crictl $*" >> /var/log/clusterctl-standin/calls.log
case "${1:-}" in
  ps) echo 3f2a9c7d1e5b ;;
  exec) for last; do :; done; mkdir -p "$(dirname "$last")"; echo "etcd snapshot (stand-in)" > "$last" ;;
esac
"#;

fn sh(node: &TestNode, script: &str) -> String {
    node.sh(script).unwrap_or_else(|e| panic!("{e}"))
}

fn node_json(name: &str, cp: bool, version: &str) -> Value {
    let mut labels = json!({"kubernetes.io/hostname": name});
    if cp {
        labels["node-role.kubernetes.io/control-plane"] = json!("");
    }
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {},
        "status": {"conditions": [{"type": "Ready", "status": "True"}],
            "nodeInfo": {"kubeletVersion": version, "architecture": "amd64", "bootID": "",
                "containerRuntimeVersion": "containerd://2.1.4", "kernelVersion": "", "kubeProxyVersion": "",
                "machineID": "", "operatingSystem": "linux", "osImage": "", "systemUUID": ""}}})
}

fn pod_json(name: &str, node: &str, meta: Value) -> Value {
    let mut m = json!({"name": name, "namespace": "default", "uid": format!("uid-{name}")});
    if let (Some(m), Some(extra)) = (m.as_object_mut(), meta.as_object()) {
        for (k, v) in extra {
            m.insert(k.clone(), v.clone());
        }
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": m,
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "nginx:1.27"}]},
        "status": {"phase": "Running"}})
}

/// The recorded API: Nodes, a ReplicaSet pod and a DaemonSet pod on the worker, a mirror pod on the
/// first control plane; a thread removes an evicted pod and, on uncordon, reports the node's kubelet
/// version as the one its package stand-in installed.
struct FakeCluster {
    api: Arc<ApiServer>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for FakeCluster {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve_nodes(api: &ApiServer, nodes: &[(String, bool, String)]) {
    let items: Vec<Value> = nodes
        .iter()
        .map(|(n, cp, v)| node_json(n, *cp, v))
        .collect();
    for (n, cp, v) in nodes {
        api.serve(&format!("/api/v1/nodes/{n}"), node_json(n, *cp, v));
    }
    api.serve(
        "/api/v1/nodes",
        json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": items}),
    );
}

fn serve_pods(api: &ApiServer, pods: &[Value]) {
    api.serve(
        "/api/v1/pods",
        json!({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": pods}),
    );
}

fn fake_cluster(store: &Path, nodes: &[(String, bool)]) -> FakeCluster {
    let api = Arc::new(ApiServer::start().expect("api server"));
    let mut state: Vec<(String, bool, String)> = nodes
        .iter()
        .map(|(n, cp)| (n.clone(), *cp, "v1.34.1".to_string()))
        .collect();
    serve_nodes(&api, &state);
    let worker = nodes.iter().find(|(_, cp)| !cp).map(|(n, _)| n.clone());
    let first = nodes[0].0.clone();
    let worker = worker.unwrap_or_default();
    let mut pods = vec![
        pod_json(
            "web-7d9f8c-x2k4p",
            &worker,
            json!({"ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f8c", "uid": "rs"}]}),
        ),
        pod_json(
            "agent-q8m2z",
            &worker,
            json!({"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "ds"}]}),
        ),
        pod_json(
            &format!("kube-apiserver-{first}"),
            &first,
            json!({"annotations": {"kubernetes.io/config.mirror": "x"}}),
        ),
    ];
    serve_pods(&api, &pods);
    api.respond(
        "POST",
        "/api/v1/namespaces/default/pods/web-7d9f8c-x2k4p/eviction",
        201,
        json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web-7d9f8c-x2k4p", "namespace": "default"}}),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let (a, s) = (api.clone(), stop.clone());
    let store = store.to_path_buf();
    let thread = std::thread::spawn(move || {
        let mut seen = 0;
        while !s.load(Ordering::Relaxed) {
            let rec = a.recorded();
            for r in rec.iter().skip(seen) {
                if r.method == "POST" && r.path.ends_with("/eviction") {
                    pods.retain(|p| {
                        !r.path
                            .contains(p["metadata"]["name"].as_str().unwrap_or("?"))
                    });
                    serve_pods(&a, &pods);
                }
                if let Some(n) = uncordoned(r) {
                    let v = std::fs::read_to_string(store.join(format!("kubelet-version-{n}")))
                        .unwrap_or_default();
                    if let Some(e) = state.iter_mut().find(|(m, _, _)| *m == n) {
                        if !v.trim().is_empty() {
                            e.2 = v.trim().to_string();
                        }
                    }
                    serve_nodes(&a, &state);
                }
            }
            seen = rec.len();
            std::thread::sleep(Duration::from_millis(30));
        }
    });
    FakeCluster {
        api,
        stop,
        thread: Some(thread),
    }
}

/// The node a PATCH uncordons (`spec.unschedulable: false`), if this request is one.
fn uncordoned(r: &Recorded) -> Option<String> {
    (r.method == "PATCH" && r.json()["spec"]["unschedulable"] == json!(false))
        .then(|| r.path.trim_start_matches("/api/v1/nodes/").to_string())
}

/// `cordon NODE` / `uncordon NODE` for every cordon PATCH, in arrival order.
fn cordon_log(api: &ApiServer) -> Vec<String> {
    api.recorded()
        .iter()
        .filter(|r| r.method == "PATCH" && r.path.starts_with("/api/v1/nodes/"))
        .filter_map(|r| {
            let node = r.path.trim_start_matches("/api/v1/nodes/");
            match r.json()["spec"]["unschedulable"].as_bool() {
                Some(true) => Some(format!("cordon {node}")),
                Some(false) => Some(format!("uncordon {node}")),
                None => None,
            }
        })
        .collect()
}

fn count(calls: &[String], prefix: &str) -> usize {
    calls.iter().filter(|l| l.starts_with(prefix)).count()
}

fn line_of(out: &str, needles: &[&str]) -> usize {
    out.lines()
        .position(|l| needles.iter().all(|n| l.contains(n)))
        .unwrap_or_else(|| panic!("no line with {needles:?} in:\n{out}"))
}

fn upgrade(cc: &Clusterctl, file: &Path, known_hosts: &Path, to: &str) -> Run {
    let r = cc
        .run(&[
            "upgrade",
            "-f",
            &file.display().to_string(),
            "--to",
            to,
            "--known-hosts",
            &known_hosts.display().to_string(),
            "--ready-timeout",
            "30",
            "--drain-timeout",
            "30",
        ])
        .expect("run clusterctl upgrade");
    // Shown with --nocapture (docs/upgrade.md's example session is taken from it).
    eprintln!(
        "$ clusterctl upgrade -f cluster.yaml --to {to}\n{}(exit {})",
        r.all(),
        r.code
    );
    r
}

#[test]
fn upgrade_one_minor_one_node_at_a_time_and_resume_after_a_failure() {
    if !require("root", is_root()) || !require("docker", docker_available()) {
        return;
    }
    let sc = StandinCluster::start("upgrade", 3).expect("node containers");
    let (store, cluster) = (&sc.store, &sc.cluster);
    let (c1, c2, w1) = (&cluster.nodes[0], &cluster.nodes[1], &cluster.nodes[2]);
    let fake = fake_cluster(
        store.path(),
        &[
            (c1.name.clone(), true),
            (c2.name.clone(), true),
            (w1.name.clone(), false),
        ],
    );
    let api = fake.api.clone();
    for n in &cluster.nodes {
        install_standins(n).expect("stand-ins");
        install_standin(n, APT_STANDIN, "/usr/local/sbin/apt-get").expect("apt-get");
        install_standin(n, APT_STANDIN, "/usr/local/sbin/apt-mark").expect("apt-mark");
        install_standin(n, CRICTL_STANDIN, "/usr/local/bin/crictl").expect("crictl");
        // What `kubeadm init`/`join` of v1.34.1 leave on each node.
        sh(
            n,
            "mkdir -p /etc/kubernetes/manifests /etc/kubernetes/pki/etcd /etc/clusterctl-standin && echo kubelet > /etc/kubernetes/kubelet.conf",
        );
    }
    for cp in [c1, c2] {
        let (st, _, err) = cp
            .exec(
                "cat > /etc/kubernetes/admin.conf && chmod 600 /etc/kubernetes/admin.conf",
                api.kubeconfig("kubernetes").as_bytes(),
            )
            .expect("exec");
        assert_eq!(st, 0, "{err}");
        sh(cp, "printf 'apiVersion: v1\\nkind: Pod\\nspec:\\n  containers:\\n  - name: kube-apiserver\\n    image: registry.k8s.io/kube-apiserver:v1.34.1\\n' > /etc/kubernetes/manifests/kube-apiserver.yaml");
    }

    let home = tempfile::tempdir().expect("home");
    let cc = Clusterctl::new(env!("CARGO_BIN_EXE_clusterctl"), home.path());
    let file = home.path().join("cluster.yaml");
    let write_file = |version: &str| {
        let text = ssh_cluster_yaml(
            "upg",
            &cluster.key.private,
            "none",
            Some(&format!("{}:6443", c1.address)),
            "",
            &[
                FileNode::control_plane(c1),
                FileNode::control_plane(c2),
                FileNode::worker(w1),
            ],
        )
        .replace(
            "kubernetesVersion: v1.34.1",
            &format!("kubernetesVersion: v{version}"),
        );
        std::fs::write(&file, text).expect("write cluster file");
    };
    let known_hosts = c1.known_hosts.clone();

    // 1. Refused before anything changes: --to unequal to the file, a skipped minor, a downgrade.
    write_file("1.35.0");
    let r = upgrade(&cc, &file, &known_hosts, "1.35.1");
    assert_eq!(r.code, 2, "{}", r.all());
    assert!(
        r.all().contains("set spec.kubernetesVersion to 1.35.1"),
        "{}",
        r.all()
    );
    write_file("1.36.0");
    let r = upgrade(&cc, &file, &known_hosts, "1.36.0");
    assert_eq!(r.code, 2, "{}", r.all());
    assert!(
        r.all()
            .contains("the control plane runs v1.34.1: v1.36.0 skips a minor"),
        "{}",
        r.all()
    );
    write_file("1.33.5");
    let r = upgrade(&cc, &file, &known_hosts, "1.33.5");
    assert_eq!(r.code, 2, "{}", r.all());
    assert!(
        r.all().contains("going down is not supported"),
        "{}",
        r.all()
    );
    for n in &cluster.nodes {
        let calls = standin_calls(n).expect("calls");
        assert!(
            calls
                .iter()
                .all(|l| l.starts_with("kubelet start") || l.starts_with("kubeadm version")),
            "{}: {calls:?}",
            n.name
        );
    }
    assert!(cordon_log(&api).is_empty());

    // 2. 1.34.1 → 1.35.0 with `kubeadm upgrade node` failing on the second node.
    write_file("1.35.0");
    sh(
        c2,
        "touch /etc/clusterctl-standin/fail-kubeadm-upgrade-node",
    );
    let r = upgrade(&cc, &file, &known_hosts, "1.35.0");
    let out1 = r.all();
    assert_eq!(r.code, 1, "{out1}");
    assert!(
        out1.contains(&format!("Node {} is left cordoned", c2.name))
            && out1.contains("run `clusterctl upgrade -f")
            && out1.contains("injected failure"),
        "{out1}"
    );
    assert_eq!(
        cordon_log(&api),
        vec![
            format!("cordon {}", c1.name),
            format!("uncordon {}", c1.name),
            format!("cordon {}", c2.name),
        ]
    );
    let cp1 = standin_calls(c1).expect("calls");
    assert_eq!(
        count(
            &cp1,
            "kubeadm upgrade plan --config /etc/kubernetes/kubeadm/upgrade.yaml"
        ),
        1,
        "{cp1:?}"
    );
    assert_eq!(
        count(
            &cp1,
            "kubeadm upgrade apply --config /etc/kubernetes/kubeadm/upgrade.yaml --yes"
        ),
        1,
        "{cp1:?}"
    );
    assert_eq!(
        count(&cp1, "crictl exec 3f2a9c7d1e5b etcdctl"),
        1,
        "{cp1:?}"
    );
    assert!(
        cp1.iter()
            .any(|l| l.contains("snapshot save /var/lib/etcd/clusterctl-snapshot.db")),
        "{cp1:?}"
    );
    assert_eq!(
        sh(
            c1,
            "stat -c %a /var/lib/clusterctl/etcd-snapshots/pre-upgrade-v1.35.0.db"
        ),
        "600"
    );
    // On the first control plane: kubeadm package, snapshot, plan, apply, kubelet packages, kubelet restart.
    let pos = |calls: &[String], p: &str| {
        calls
            .iter()
            .position(|l| l.starts_with(p))
            .unwrap_or_else(|| panic!("no `{p}` in {calls:?}"))
    };
    let order = [
        "apt-get install -y -q --allow-change-held-packages kubeadm=1.35.0-*",
        "crictl exec",
        "kubeadm upgrade plan",
        "kubeadm upgrade apply",
        "apt-get install -y -q --allow-change-held-packages kubelet=1.35.0-* kubectl=1.35.0-*",
    ];
    let at: Vec<usize> = order.iter().map(|p| pos(&cp1, p)).collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{cp1:?}");
    assert!(
        cp1.iter()
            .skip(at[4])
            .any(|l| l.starts_with("kubelet start")),
        "kubelet restarted after its package: {cp1:?}"
    );
    assert!(sh(c1, "cat /etc/kubernetes/manifests/kube-apiserver.yaml")
        .contains("kube-apiserver:v1.35.0"));
    let cp2 = standin_calls(c2).expect("calls");
    assert_eq!(
        count(
            &cp2,
            "kubeadm upgrade node --config /etc/kubernetes/kubeadm/upgrade.yaml"
        ),
        1,
        "{cp2:?}"
    );
    assert_eq!(
        count(
            &cp2,
            "apt-get install -y -q --allow-change-held-packages kubelet"
        ),
        0,
        "{cp2:?}"
    );
    let wk = standin_calls(w1).expect("calls");
    assert_eq!(
        count(
            &wk,
            "apt-get install -y -q --allow-change-held-packages kubeadm=1.35.0-*"
        ),
        1,
        "kubeadm first on every node: {wk:?}"
    );
    assert_eq!(count(&wk, "kubeadm upgrade"), 0, "{wk:?}");
    // Output: kubeadm on every node before the snapshot, the snapshot before the first drain.
    let snap = line_of(
        &out1,
        &[&format!("[{}] upgrade/etcd-snapshot: run:", c1.name)],
    );
    for n in &cluster.nodes {
        assert!(
            line_of(&out1, &[&format!("[{}] upgrade/kubeadm: done", n.name)]) < snap,
            "{out1}"
        );
    }
    assert!(
        snap < line_of(
            &out1,
            &[&format!("[{}] upgrade/drain: API: drain", c1.name)]
        ),
        "{out1}"
    );

    // 3. The cause removed, the same command resumes on the second node and finishes.
    sh(c2, "rm /etc/clusterctl-standin/fail-kubeadm-upgrade-node");
    let r = upgrade(&cc, &file, &known_hosts, "1.35.0");
    let out2 = r.all();
    assert_eq!(r.code, 0, "{out2}");
    assert!(out2.contains("upgraded to v1.35.0"), "{out2}");
    assert_eq!(
        cordon_log(&api),
        vec![
            format!("cordon {}", c1.name),
            format!("uncordon {}", c1.name),
            format!("cordon {}", c2.name),
            format!("uncordon {}", c2.name),
            format!("cordon {}", w1.name),
            format!("uncordon {}", w1.name),
        ]
    );
    let evictions: Vec<String> = api
        .recorded()
        .iter()
        .filter(|r| r.method == "POST")
        .map(|r| r.path.clone())
        .collect();
    assert_eq!(
        evictions,
        vec!["/api/v1/namespaces/default/pods/web-7d9f8c-x2k4p/eviction".to_string()],
        "only the ReplicaSet pod is evicted"
    );
    let cp1_again = standin_calls(c1).expect("calls");
    assert_eq!(
        cp1_again, cp1,
        "nothing repeated on the first control plane"
    );
    let cp2 = standin_calls(c2).expect("calls");
    assert_eq!(count(&cp2, "kubeadm upgrade node --config"), 2, "{cp2:?}");
    assert_eq!(
        count(
            &cp2,
            "apt-get install -y -q --allow-change-held-packages kubelet"
        ),
        1,
        "{cp2:?}"
    );
    let wk = standin_calls(w1).expect("calls");
    assert_eq!(count(&wk, "kubeadm upgrade node --config"), 1, "{wk:?}");
    assert_eq!(
        count(
            &wk,
            "apt-get install -y -q --allow-change-held-packages kubeadm"
        ),
        1,
        "{wk:?}"
    );
    // One node at a time: each node's steps end before the next node's start.
    let done = |n: &TestNode| line_of(&out2, &[&format!("[{}] upgrade/uncordon: done", n.name)]);
    let started = |n: &TestNode, p: &str| line_of(&out2, &[&format!("[{}] {p}", n.name)]);
    assert!(
        done(c2) < started(w1, "upgrade/drain: API: drain"),
        "{out2}"
    );
    assert!(
        started(c2, "upgrade/node: run: kubeadm upgrade node") < done(c2),
        "{out2}"
    );
    assert!(
        line_of(
            &out2,
            &[&format!("node {} Ready with kubelet v1.35.0", w1.name)]
        ) > done(c2),
        "{out2}"
    );

    // 4. Once more: already done, nothing runs.
    let before: Vec<Vec<String>> = cluster
        .nodes
        .iter()
        .map(|n| standin_calls(n).expect("calls"))
        .collect();
    let patches = cordon_log(&api).len();
    let r = upgrade(&cc, &file, &known_hosts, "1.35.0");
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(
        r.all().contains("already at v1.35.0; nothing changed"),
        "{}",
        r.all()
    );
    let after: Vec<Vec<String>> = cluster
        .nodes
        .iter()
        .map(|n| standin_calls(n).expect("calls"))
        .collect();
    assert_eq!(before, after);
    assert_eq!(cordon_log(&api).len(), patches);
}
