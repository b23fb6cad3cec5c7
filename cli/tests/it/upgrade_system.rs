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

use std::path::{Path, PathBuf};

use clusterctl_airgap::bundle::BundleSummary;
use clusterctl_airgap::plan::{list_images, node_images, select};
use clusterctl_airgap::registry::{ClientOptions, RegistryClient};
use clusterctl_airgap::run::{bundle_cluster, BundleOptions};
use clusterctl_testbed::cli::{build_deb, serve_upstream_images};
use clusterctl_testbed::registry;
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

/// `crictl` stand-in: `ps` without `--name` names the etcd container; `ps --name REGEX` names one
/// running container per static pod (etcd plus each `/etc/kubernetes/manifests/*.yaml`) whose name
/// matches REGEX, as real crictl does (the etcd backup and the post-upgrade settle wait read it);
/// `exec … snapshot save PATH` writes PATH.
const CRICTL_STANDIN: &str = r#"#!/bin/sh
# STAND-IN for crictl (clusterctl upgrade test). Records argv. Not a container runtime.
echo "crictl $*" >> /var/log/clusterctl-standin/calls.log
case "${1:-}" in
  ps) name=; prev=
      for a in "$@"; do [ "$prev" = --name ] && name=$a; prev=$a; done
      if [ -z "$name" ]; then echo 3f2a9c7d1e5b; exit 0; fi
      { echo etcd; ls /etc/kubernetes/manifests 2>/dev/null | sed -n 's/\.yaml$//p'; } | sort -u |
      while read -r pod; do
        echo "$pod" | grep -Eq "$name" || continue
        if [ "$pod" = etcd ]; then echo 3f2a9c7d1e5b; else echo "$pod" | md5sum | cut -c1-12; fi
      done ;;
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
    upgrade_with(cc, file, known_hosts, to, &[])
}

/// [`upgrade`] with `extra` arguments (e.g. `--dry-run`).
fn upgrade_with(cc: &Clusterctl, file: &Path, known_hosts: &Path, to: &str, extra: &[&str]) -> Run {
    let (file, known_hosts) = (
        file.display().to_string(),
        known_hosts.display().to_string(),
    );
    let mut args = vec![
        "upgrade",
        "-f",
        &file,
        "--to",
        to,
        "--known-hosts",
        &known_hosts,
        "--ready-timeout",
        "30",
        "--drain-timeout",
        "30",
    ];
    args.extend_from_slice(extra);
    let r = cc.run(&args).expect("run clusterctl upgrade");
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
            calls.iter().all(|l| l.starts_with("kubelet start")
                    || l.starts_with("kubeadm version")
                    // The packages probe (read-only): `apt-mark showhold`.
                    || l == "apt-mark showhold"),
            "{}: {calls:?}",
            n.name
        );
    }
    assert!(cordon_log(&api).is_empty());

    // 1b. The dry run plans every node's steps in upgrade order and changes nothing.
    write_file("1.35.0");
    let r = upgrade_with(&cc, &file, &known_hosts, "1.35.0", &["--dry-run"]);
    assert_eq!(r.code, 0, "{}", r.all());
    let plan = &r.stdout;
    let section = |n: &TestNode| -> &str {
        let start = plan
            .find(&format!("\nnode {} (", n.name))
            .unwrap_or_else(|| panic!("no plan for {}:\n{plan}", n.name));
        let rest = &plan[start + 1..];
        &rest[..rest.find("\n\n").unwrap_or(rest.len())]
    };
    let order: Vec<usize> = cluster
        .nodes
        .iter()
        .map(|n| plan.find(&format!("\nnode {} (", n.name)).expect("section"))
        .collect();
    assert!(
        order[0] < order[1] && order[1] < order[2],
        "upgrade order:\n{plan}"
    );
    let first = section(c1);
    for step in [
        "upgrade/kubeadm",
        "upgrade/etcd-snapshot",
        "drain node",
        "kubeadm upgrade apply --config /etc/kubernetes/kubeadm/upgrade.yaml --yes",
        "upgrade/kubelet",
        "uncordon node",
    ] {
        assert!(
            first.contains(step),
            "{step} not planned on {}:\n{first}",
            c1.name
        );
    }
    let second = section(c2);
    assert!(
        second.contains("kubeadm upgrade node --config") && !second.contains("upgrade apply"),
        "{second}"
    );
    assert!(
        plan.contains("change(s) planned; nothing was changed (dry run)."),
        "{plan}"
    );
    // The same plan as one document (`-o json`).
    let r = upgrade_with(
        &cc,
        &file,
        &known_hosts,
        "1.35.0",
        &["--dry-run", "-o", "json"],
    );
    assert_eq!(r.code, 0, "{}", r.all());
    let v = crate::cli_conventions::plan_document("json", &r.stdout, "upg");
    let apply = "kubeadm upgrade apply --config /etc/kubernetes/kubeadm/upgrade.yaml --yes";
    assert!(
        crate::cli_conventions::has_step(&v, &c1.name, "run", apply),
        "{v}"
    );
    assert!(
        crate::cli_conventions::has_step(&v, &c2.name, "run", "kubeadm upgrade node --config"),
        "{v}"
    );
    for n in &cluster.nodes {
        let calls = standin_calls(n).expect("calls");
        assert!(
            calls.iter().all(|l| l.starts_with("kubelet start")
                    || l.starts_with("kubeadm version")
                    // The packages probe (read-only): `apt-mark showhold`.
                    || l == "apt-mark showhold"),
            "dry run changed {}: {calls:?}",
            n.name
        );
        assert_eq!(
            sh(
                n,
                "test -e /var/lib/clusterctl/upgrade && echo yes || echo no"
            ),
            "no",
            "dry run wrote on {}",
            n.name
        );
    }
    assert!(cordon_log(&api).is_empty());

    // 2. 1.34.1 → 1.35.0 with `kubeadm upgrade node` failing on the second node.
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

/// `kubelet` package postinst: reports the installed kubelet version where the API thread reads it.
const KUBELET_POSTINST: &str =
    "#!/bin/sh\necho v1.35.0 > /var/lib/clusterctl-standin/kubelet-version-$(hostname)\n";

/// Recording `ctr` wrapper: logs its argv with the stand-ins' calls, then runs the real `ctr`.
const CTR_RECORDER: &str = r#"#!/bin/sh
# Records argv with the stand-ins' calls (clusterctl upgrade test), then runs the real ctr.
mkdir -p /var/log/clusterctl-standin
echo "ctr $*" >> /var/log/clusterctl-standin/calls.log
exec /usr/bin/ctr "$@"
"#;

/// `airgap.extraVersions` line carrying the upgrade target.
const WITH_V135: &str = "    extraVersions: [v1.35.0]\n";

/// name → manifest digest from `ctr -n k8s.io images ls` on `node`.
fn images_in(node: &TestNode) -> std::collections::BTreeMap<String, String> {
    node.ctr_images().unwrap_or_else(|e| panic!("{e}"))
}

/// An air-gapped upgrade test bed: a control plane and a worker as `up` of v1.34.1 leaves them
/// (containerd running, kubeadm's files, the recorded API's admin.conf, no route out), the
/// kubeadm/kubelet/kubectl 1.35.0 packages as `.deb`s, and the images of v1.34.1 and v1.35.0 built
/// here and served by a loopback source registry. Fields drop in order: containers first.
struct AirgapBed {
    sc: StandinCluster,
    fake: FakeCluster,
    source: clusterctl_testbed::registry::Registry,
    hosts: std::collections::BTreeSet<String>,
    debs: Vec<String>,
    home: tempfile::TempDir,
}

impl AirgapBed {
    fn start(prefix: &str) -> AirgapBed {
        let source = clusterctl_testbed::registry::Registry::start().expect("registry");
        let sc = StandinCluster::start(prefix, 2).expect("node containers");
        let (c1, w1) = (&sc.cluster.nodes[0], &sc.cluster.nodes[1]);
        let fake = fake_cluster(
            sc.store.path(),
            &[(c1.name.clone(), true), (w1.name.clone(), false)],
        );
        for n in &sc.cluster.nodes {
            install_standins(n).expect("stand-ins");
            install_standin(n, CRICTL_STANDIN, "/usr/local/bin/crictl").expect("crictl");
            install_standin(n, CTR_RECORDER, "/usr/local/bin/ctr").expect("ctr");
            sh(
                n,
                "systemctl start containerd && mkdir -p /etc/kubernetes/manifests /etc/kubernetes/pki/etcd /etc/clusterctl-standin && echo kubelet > /etc/kubernetes/kubelet.conf",
            );
            sh(n, "ip route del default 2>/dev/null || true");
            assert_eq!(sh(n, "ip -4 route show default"), "", "{}", n.name);
        }
        let (st, _, err) = c1
            .exec(
                "cat > /etc/kubernetes/admin.conf && chmod 600 /etc/kubernetes/admin.conf",
                fake.api.kubeconfig("kubernetes").as_bytes(),
            )
            .expect("exec");
        assert_eq!(st, 0, "{err}");
        sh(c1, "printf 'apiVersion: v1\\nkind: Pod\\nspec:\\n  containers:\\n  - name: kube-apiserver\\n    image: registry.k8s.io/kube-apiserver:v1.34.1\\n' > /etc/kubernetes/manifests/kube-apiserver.yaml");
        let home = tempfile::tempdir().expect("home");
        // Carried under names that are not the upstream `<name>_<version>-*.deb`: the entries tagged
        // `kubernetesVersion: v1.35.0` are placed under those names on the node by the upgrade.
        let debs = [
            ("kubeadm", None),
            ("kubelet", Some(KUBELET_POSTINST)),
            ("kubectl", None),
        ]
        .into_iter()
        .map(|(name, postinst)| {
            let built = build_deb(home.path(), name, "1.35.0-1.1", postinst).expect("deb");
            let renamed = format!("{name}-target.deb");
            std::fs::rename(home.path().join(&built), home.path().join(&renamed)).expect("rename");
            renamed
        })
        .collect();
        let mut bed = AirgapBed {
            sc,
            fake,
            source,
            hosts: Default::default(),
            debs,
            home,
        };
        let file = bed.write_file("1.34.1", "site.tar", WITH_V135, "");
        let sources: Vec<String> = list_images(&valid(&file))
            .into_iter()
            .map(|i| i.source)
            .collect();
        bed.hosts = serve_upstream_images(&bed.source, &sources, 5000).expect("images served");
        bed
    }

    fn nodes(&self) -> &[TestNode] {
        &self.sc.cluster.nodes
    }

    /// Writes `cluster.yaml` at `version` naming `bundle`, with `extra` lines in `airgap` and
    /// `registry` lines in `spec`; returns its path.
    fn write_file(&self, version: &str, bundle: &str, extra: &str, registry: &str) -> PathBuf {
        self.write_file_with(
            version,
            bundle,
            extra,
            registry,
            &["kubeadm", "kubelet", "kubectl"],
        )
    }

    /// [`AirgapBed::write_file`] carrying only the 1.35.0 packages named in `packages`, each tagged
    /// `kubernetesVersion: v1.35.0` when the file knows that version (its own or an extraVersions
    /// entry), else untagged.
    fn write_file_with(
        &self,
        version: &str,
        bundle: &str,
        extra: &str,
        registry: &str,
        packages: &[&str],
    ) -> PathBuf {
        let arch = clusterctl_airgap::node::oci_arch(std::env::consts::ARCH);
        let mut spec = format!("{registry}  airgap:\n    bundle: {bundle}\n{extra}    packages:\n");
        let tag = if version == "1.35.0" || extra.contains("v1.35.0") {
            ", kubernetesVersion: v1.35.0"
        } else {
            ""
        };
        for (name, deb) in ["kubeadm", "kubelet", "kubectl"].iter().zip(&self.debs) {
            if packages.contains(name) {
                spec.push_str(&format!(
                    "      - {{name: {name}, osFamily: debian, arch: {arch}{tag}, path: {deb}}}\n"
                ));
            }
        }
        let (c1, w1) = (&self.nodes()[0], &self.nodes()[1]);
        let text = ssh_cluster_yaml(
            "agupg",
            &self.sc.cluster.key.private,
            "none",
            Some(&format!("{}:6443", c1.address)),
            &spec,
            &[FileNode::control_plane(c1), FileNode::worker(w1)],
        )
        .replace(
            "kubernetesVersion: v1.34.1",
            &format!("kubernetesVersion: v{version}"),
        );
        let file = self.home.path().join("cluster.yaml");
        std::fs::write(&file, text).expect("write cluster file");
        file
    }

    /// Writes bundle `name` from the source registry with a v1.34.1 file (`extra`, `registry` as in
    /// [`AirgapBed::write_file`]).
    fn bundle(&self, name: &str, extra: &str, registry: &str) -> BundleSummary {
        self.bundle_with(name, extra, registry, &["kubeadm", "kubelet", "kubectl"])
    }

    /// [`AirgapBed::bundle`] carrying only the packages named in `packages`.
    fn bundle_with(
        &self,
        name: &str,
        extra: &str,
        registry: &str,
        packages: &[&str],
    ) -> BundleSummary {
        let file = self.write_file_with("1.34.1", name, extra, registry, packages);
        let mut opts = BundleOptions {
            out: self.home.path().join(name),
            base_dir: self.home.path().to_path_buf(),
            ..Default::default()
        };
        opts.pull.registry_overrides = self
            .hosts
            .iter()
            .map(|h| (h.clone(), self.source.addr().to_string()))
            .collect();
        bundle_cluster(&valid(&file), &opts).expect("bundle").0
    }

    fn upgrade(&self, file: &Path) -> Run {
        let cc = Clusterctl::new(env!("CARGO_BIN_EXE_clusterctl"), self.home.path());
        upgrade(&cc, file, &self.nodes()[0].known_hosts, "1.35.0")
    }

    /// The bundle's (mirror reference → digest) of what a control plane / a worker needs at the
    /// version of `file`.
    fn role_images(
        file: &Path,
        summary: &BundleSummary,
        control_plane: bool,
    ) -> std::collections::BTreeMap<String, String> {
        let s: Vec<String> = node_images(&valid(file), control_plane)
            .into_iter()
            .map(|i| i.source)
            .collect();
        select(&summary.manifest, &s)
            .expect("carried")
            .into_iter()
            .map(|i| (i.mirror, i.digest.to_string()))
            .collect()
    }

    /// Every node's recorded calls.
    fn calls(&self) -> Vec<Vec<String>> {
        self.nodes()
            .iter()
            .map(|n| standin_calls(n).expect("calls"))
            .collect()
    }
}

fn valid(file: &Path) -> clusterctl_spec::ValidCluster {
    let loaded = clusterctl_spec::load(file).expect("load");
    clusterctl_spec::validate(&loaded)
        .map_err(|d| d.to_string())
        .expect("valid")
        .cluster
}

/// Air-gapped upgrade 1.34.1 → 1.35.0 from a bundle, no mirror, on a control plane and a worker without
/// a route out: a bundle lacking v1.35.0's images is refused (exit 1, naming the version and
/// `airgap.extraVersions`) before any node is touched, and so is one lacking a kubeadm package for
/// v1.35.0 (naming `kubernetesVersion: v1.35.0`); the packages tagged `kubernetesVersion: v1.35.0`
/// are none of the v1.34.1 files' (what `up` places); with the images (bundle made with
/// `extraVersions: [v1.35.0]`) each node's containerd gets exactly v1.35.0's images its role needs —
/// the worker no kube-apiserver/etcd — before its kubeadm upgrade step (order of the recorded calls),
/// and the kubeadm/kubelet/kubectl packages come from the bundle; a second run changes nothing.
#[test]
fn airgap_upgrade_loads_each_nodes_images_from_the_bundle_before_its_kubeadm_step() {
    if !require("root", is_root())
        || !require("docker", docker_available())
        || !require("docker-registry", registry::available())
    {
        return;
    }
    let bed = AirgapBed::start("agupgrade");
    let (c1, w1) = (&bed.nodes()[0], &bed.nodes()[1]);
    bed.bundle("site-old.tar", "", "");
    let no_kubeadm = ["kubelet", "kubectl"];
    bed.bundle_with("site-nokubeadm.tar", WITH_V135, "", &no_kubeadm);
    let summary = bed.bundle("site.tar", WITH_V135, "");
    // The packages carry their version: the v1.34.1 cluster's files (what `up`'s airgap/packages
    // places, `files_at_version`) hold none of them; v1.35.0's hold all three, under their upstream
    // names as the upgrade uploads them.
    let tags: Vec<Option<&str>> = summary
        .manifest
        .packages
        .iter()
        .map(|p| p.kubernetes_version.as_deref())
        .collect();
    assert_eq!(
        tags,
        [Some("v1.35.0"); 3],
        "{:?}",
        summary.manifest.packages
    );
    let vb = clusterctl_airgap::bundle::verify_bundle(&bed.home.path().join("site.tar"))
        .expect("verify");
    let arch = clusterctl_airgap::node::oci_arch(std::env::consts::ARCH);
    let up_places =
        clusterctl_airgap::node::versions::files_at_version(&vb, "debian", &arch, "/r", "v1.34.1");
    assert!(up_places.iter().all(|f| f.binary), "{up_places:?}");
    let upgrade_places: std::collections::BTreeSet<String> =
        clusterctl_airgap::node::versions::files_for_version(&vb, "debian", &arch, "/r", "v1.35.0")
            .into_iter()
            .filter(|f| !f.binary)
            .map(|f| f.remote)
            .collect();
    assert_eq!(
        upgrade_places,
        ["kubeadm", "kubectl", "kubelet"]
            .map(|n| format!("/r/packages/{n}_1.35.0-{n}-target.deb"))
            .into_iter()
            .collect()
    );
    let untouched = || {
        for n in bed.nodes() {
            let calls = standin_calls(n).expect("calls");
            assert!(
                calls.iter().all(|l| l.starts_with("kubelet start")
                    || l.starts_with("kubeadm version")
                    // The packages probe (read-only): `apt-mark showhold`.
                    || l == "apt-mark showhold"),
                "{}: {calls:?}",
                n.name
            );
            assert_eq!(
                sh(n, "test -e /var/lib/clusterctl && echo yes || echo no"),
                "no",
                "{} touched",
                n.name
            );
            assert!(images_in(n).is_empty(), "{}", n.name);
        }
        assert!(cordon_log(&bed.fake.api).is_empty());
    };

    // 1. The old bundle lacks v1.35.0: refused before any node is touched.
    let file = bed.write_file("1.35.0", "site-old.tar", "", "");
    let r = bed.upgrade(&file);
    assert_eq!(r.code, 1, "{}", r.all());
    assert!(
        r.all().contains("does not carry the images of v1.35.0")
            && r.all().contains("registry.k8s.io/kube-apiserver:v1.35.0")
            && r.all().contains("airgap.extraVersions")
            && r.all().contains("clusterctl airgap bundle"),
        "{}",
        r.all()
    );
    untouched();

    // 1b. A bundle with v1.35.0's images and packages, but no kubeadm package for it: refused
    // before any node is touched, naming the version and the entry to add.
    let file = bed.write_file_with("1.35.0", "site-nokubeadm.tar", WITH_V135, "", &no_kubeadm);
    let r = bed.upgrade(&file);
    assert_eq!(r.code, 1, "{}", r.all());
    assert!(
        r.all().contains("no kubeadm package for v1.35.0")
            && r.all().contains("kubernetesVersion: v1.35.0")
            && r.all().contains("clusterctl airgap bundle"),
        "{}",
        r.all()
    );
    untouched();

    // 2. The bundle with v1.35.0.
    let file = bed.write_file("1.35.0", "site.tar", WITH_V135, "");
    let want_cp = AirgapBed::role_images(&file, &summary, true);
    let want_worker = AirgapBed::role_images(&file, &summary, false);
    assert!(want_cp
        .keys()
        .any(|k| k.ends_with("/kube-apiserver:v1.35.0")));
    assert!(want_worker
        .keys()
        .any(|k| k.ends_with("/kube-proxy:v1.35.0")));
    assert!(!want_worker
        .keys()
        .any(|k| k.contains("/kube-apiserver:") || k.contains("/etcd:")));
    let r = bed.upgrade(&file);
    let out = r.all();
    assert_eq!(r.code, 0, "{out}");
    assert!(out.contains("upgraded to v1.35.0"), "{out}");
    for (n, want, kubeadm_step) in [
        (c1, &want_cp, "kubeadm upgrade apply"),
        (w1, &want_worker, "kubeadm upgrade node"),
    ] {
        let have = images_in(n);
        for (name, digest) in want.iter() {
            assert_eq!(have.get(name), Some(digest), "{}: {name}: {have:?}", n.name);
        }
        // Only what the role needs at v1.35.0: nothing of v1.34.1, no control-plane image on the worker.
        for name in summary.manifest.images.iter().map(|i| &i.mirror) {
            assert_eq!(
                have.contains_key(name),
                want.contains_key(name),
                "{}: {name}",
                n.name
            );
        }
        let calls = standin_calls(n).expect("calls");
        let import = calls
            .iter()
            .position(|l| l.starts_with("ctr -n k8s.io images import"))
            .unwrap_or_else(|| panic!("{}: no import in {calls:?}", n.name));
        let step = calls
            .iter()
            .position(|l| l.starts_with(kubeadm_step))
            .unwrap_or_else(|| panic!("{}: no `{kubeadm_step}` in {calls:?}", n.name));
        assert!(import < step, "{}: images after kubeadm: {calls:?}", n.name);
        assert_eq!(count(&calls, "ctr -n k8s.io images import"), 1, "{calls:?}");
        assert_eq!(
            sh(
                n,
                "dpkg-query -W -f='${Package} ${Version}\\n' kubeadm kubelet kubectl | sort"
            ),
            "kubeadm 1.35.0-1.1\nkubectl 1.35.0-1.1\nkubelet 1.35.0-1.1"
        );
        assert!(
            line_of(&out, &[&format!("[{}] upgrade/images: load ", n.name)])
                < line_of(&out, &[&format!("[{}] upgrade/drain:", c1.name)]),
            "{out}"
        );
    }

    // 3. Again: nothing changes, nothing is loaded.
    let before = bed.calls();
    let r = bed.upgrade(&file);
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(
        r.all().contains("already at v1.35.0; nothing changed"),
        "{}",
        r.all()
    );
    assert_eq!(before, bed.calls());
}

/// Air-gapped upgrade 1.34.1 → 1.35.0 with a registry mirror (a second loopback registry): the bundle
/// is pushed to the mirror once, on this machine, before anything happens on a node; every v1.35.0
/// reference the nodes pull is then served by the mirror with the bundle's digest; no image is loaded
/// into a node's runtime; a second run pushes nothing and changes nothing.
#[test]
fn airgap_upgrade_with_a_mirror_pushes_the_bundle_before_the_first_node() {
    if !require("root", is_root())
        || !require("docker", docker_available())
        || !require("docker-registry", registry::available())
    {
        return;
    }
    let bed = AirgapBed::start("agupmirror");
    let mirror = clusterctl_testbed::registry::Registry::start().expect("mirror");
    let reg_line = format!("  registry: {{mirror: \"{}/site\"}}\n", mirror.addr());
    let summary = bed.bundle("site.tar", WITH_V135, &reg_line);
    let file = bed.write_file("1.35.0", "site.tar", WITH_V135, &reg_line);
    let want = AirgapBed::role_images(&file, &summary, true);
    assert!(
        want.keys()
            .any(|k| k.starts_with(mirror.addr()) && k.ends_with("/kube-apiserver:v1.35.0")),
        "{want:?}"
    );

    let r = bed.upgrade(&file);
    let out = r.all();
    assert_eq!(r.code, 0, "{out}");
    let pushed = line_of(&out, &["[local] upgrade/mirror: pushed "]);
    for n in bed.nodes() {
        assert!(
            pushed < line_of(&out, &[&format!("[{}] upgrade/kubeadm:", n.name)]),
            "{out}"
        );
        assert!(images_in(n).is_empty(), "{}: loaded into the node", n.name);
    }
    assert!(!out.contains("upgrade/images"), "{out}");
    let client = RegistryClient::new(ClientOptions::default()).expect("client");
    for (name, digest) in &want {
        let r = clusterctl_airgap::ImageRef::parse(name).expect("ref");
        let got = client
            .head_manifest(&r.registry, &r.repository, r.tag.as_deref().expect("tag"))
            .expect("head");
        assert_eq!(
            got.map(|d| d.to_string()).as_deref(),
            Some(digest.as_str()),
            "{name}"
        );
    }

    // Again: nothing pushed, nothing changed.
    let writes = mirror.count_requests("PUT", "/") + mirror.count_requests("POST", "/");
    let before = bed.calls();
    let r = bed.upgrade(&file);
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(
        r.all().contains("already at v1.35.0; nothing changed") && !r.all().contains("pushed "),
        "{}",
        r.all()
    );
    assert_eq!(
        mirror.count_requests("PUT", "/") + mirror.count_requests("POST", "/"),
        writes
    );
    assert_eq!(before, bed.calls());
}
