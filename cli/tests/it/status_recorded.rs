//! `clusterctl status` against the recording Kubernetes API test server (HTTPS on loopback, CA made in
//! the test) through the real `kube` client: recorded Nodes, Pods and Events in the API's JSON shapes
//! (seed `000_…`: a nodeSelector no node matches after a re-create, an image that was never loaded, a
//! crash loop, a node without a CNI). Checks the layer named per stuck pod, the NotReady reason, the
//! declared label a node lost, the `-o json` shape, and the kubeconfig context picked by cluster name.

use std::path::Path;
use std::process::Command;

use clusterctl_testbed::apiserver::ApiServer;
use serde_json::Value;

fn fixture(name: &str) -> Value {
    let path = format!(
        "{}/../kubeapi/tests/fixtures/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_default()).unwrap_or(Value::Null)
}

/// The cluster file: Docker-provider nodes that have no containers (the runtimes cannot be asked), `lab-worker2`
/// declared with `disktype: ssd` (the recorded node has `hdd`), `lab-worker3` not registered.
const CLUSTER: &str = "apiVersion: clusterctl.io/v1alpha1
kind: Cluster
metadata: {name: lab}
spec:
  kubernetesVersion: v1.34.1
  provider: docker
  networking: {podSubnet: 192.168.0.0/16, serviceSubnet: 10.96.0.0/16}
  nodes:
    - {name: lab-control-plane, role: control-plane}
    - {name: lab-worker, role: worker}
    - {name: lab-worker2, role: worker, labels: {disktype: ssd}}
    - {name: lab-worker3, role: worker}
";

fn server() -> ApiServer {
    let s = ApiServer::start().expect("test API server");
    s.serve("/api/v1/nodes", fixture("nodes.json"));
    s.serve("/api/v1/pods", fixture("pods.json"));
    s.serve(
        "/api/v1/namespaces/cka-lab/events",
        fixture("events-cka-lab.json"),
    );
    s.serve(
        "/api/v1/namespaces/kube-system/events",
        fixture("events-kube-system.json"),
    );
    s
}

fn clusterctl(dir: &Path, args: &[&str], envs: &[(&str, &Path)]) -> (i32, String, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_clusterctl"));
    c.args(args)
        .current_dir(dir)
        .env("HOME", dir)
        .env_remove("KUBECONFIG");
    for (k, v) in envs {
        c.env(k, v);
    }
    let out = c.output().expect("run clusterctl");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn json_names_the_stuck_layer_of_each_pod() {
    let s = server();
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("cluster.yaml"), CLUSTER).expect("file");
    let kc = dir.path().join("kubeconfig");
    std::fs::write(&kc, s.kubeconfig("lab")).expect("kubeconfig");
    let kcs = kc.to_string_lossy().into_owned();
    let (code, out, err) = clusterctl(
        dir.path(),
        &[
            "status",
            "-f",
            "cluster.yaml",
            "-o",
            "json",
            "--kubeconfig",
            &kcs,
        ],
        &[],
    );
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    let v: Value = serde_json::from_str(&out).expect("status -o json prints JSON");
    assert_eq!(v["cluster"], "lab");

    // Nodes: role, version, Ready, the reason when not Ready.
    let nodes = v["nodes"].as_array().expect("nodes");
    assert_eq!(nodes.len(), 3);
    let w = nodes
        .iter()
        .find(|n| n["name"] == "lab-worker")
        .expect("lab-worker");
    assert_eq!(w["ready"], false);
    assert_eq!(w["role"], "worker");
    assert_eq!(w["version"], "v1.34.1");
    assert!(
        w["reason"]
            .as_str()
            .unwrap_or("")
            .starts_with("container runtime network not ready: NetworkPluginNotReady"),
        "{w}"
    );
    let cp = nodes
        .iter()
        .find(|n| n["name"] == "lab-control-plane")
        .expect("cp");
    assert_eq!(
        (cp["ready"].as_bool(), cp["role"].as_str()),
        (Some(true), Some("control-plane"))
    );
    assert!(cp.get("reason").is_none());

    // Stuck pods, by layer.
    let stuck = v["stuck"].as_array().expect("stuck");
    let by_name = |n: &str| {
        stuck
            .iter()
            .find(|p| p["name"] == n)
            .cloned()
            .unwrap_or(Value::Null)
    };
    let sched = by_name("api-7d9f8c-x2k4p");
    assert_eq!(sched["layer"], "scheduling");
    assert_eq!(sched["reason"], "Unschedulable");
    assert_eq!(sched["missingLabels"], serde_json::json!(["disktype=ssd"]));
    assert!(sched["message"]
        .as_str()
        .unwrap_or("")
        .contains("didn't match Pod's node affinity/selector"));
    let pull = by_name("api-5c6b7d-q8m2z");
    assert_eq!(pull["layer"], "image");
    assert_eq!(pull["image"], "cka-api:v3");
    assert_eq!(pull["node"], "lab-worker2");
    assert!(
        pull.get("nodesWithImage").is_none(),
        "runtimes unreachable: unknown, not empty: {pull}"
    );
    let crash = by_name("redis-6f7b9d-7hxlw");
    assert_eq!(crash["layer"], "application");
    assert_eq!(crash["lastTermination"]["exitCode"], 1);
    assert_eq!(crash["lastTermination"]["reason"], "Error");
    assert_eq!(crash["restarts"], 6);
    let sandbox = by_name("coredns-66bc5c-9xv2d");
    assert_eq!(sandbox["layer"], "network");
    assert!(
        by_name("postgres-0").is_null(),
        "a running pod is not stuck"
    );
    for p in stuck {
        assert!(
            !p["next"].as_array().map(Vec::is_empty).unwrap_or(true),
            "next steps for {p}"
        );
    }

    // The file against the cluster.
    assert_eq!(v["missingNodes"], serde_json::json!(["lab-worker3"]));
    assert_eq!(
        v["labelDrift"],
        serde_json::json!([{"node": "lab-worker2", "label": "disktype=ssd", "actual": "hdd"}])
    );

    // Events were asked per stuck pod with a field selector, through the real client.
    let rec = s.recorded();
    assert!(rec
        .iter()
        .any(|r| r.path == "/api/v1/namespaces/cka-lab/events"
            && r.query.contains("involvedObject.name%3Dapi-5c6b7d-q8m2z")));
    assert!(
        !rec.iter().any(|r| r.query.contains("postgres-0")),
        "no events asked for healthy pods"
    );
}

#[test]
fn text_output_and_context_named_after_the_cluster() {
    let s = server();
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("cluster.yaml"), CLUSTER).expect("file");
    // $KUBECONFIG holds another current context; `status` must pick the one named `lab`.
    let other = ApiServer::start().expect("other server");
    let lab = s.kubeconfig("lab");
    let combined = other
        .kubeconfig("other")
        .replace("current-context: other\n", "")
        .replace(
            "clusters:\n",
            &format!("clusters:\n{}", section(&lab, "clusters:")),
        )
        .replace("users:\n", &format!("users:\n{}", section(&lab, "users:")))
        .replace(
            "contexts:\n",
            &format!("contexts:\n{}", section(&lab, "contexts:")),
        )
        + "current-context: other\n";
    let kc = dir.path().join("config");
    std::fs::write(&kc, combined).expect("kubeconfig");
    let (code, out, err) = clusterctl(
        dir.path(),
        &["status", "-f", "cluster.yaml"],
        &[("KUBECONFIG", &kc)],
    );
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        other.recorded().is_empty(),
        "the other cluster was not asked"
    );
    assert!(!s.recorded().is_empty());
    assert!(
        out.contains("cka-lab/api-7d9f8c-x2k4p  stuck at scheduling: Unschedulable"),
        "{out}"
    );
    assert!(out.contains("no node has: disktype=ssd"), "{out}");
    assert!(
        out.contains("stuck at image: ImagePullBackOff (on lab-worker2)"),
        "{out}"
    );
    assert!(
        out.contains("stuck at application: CrashLoopBackOff"),
        "{out}"
    );
    assert!(
        out.contains("last termination: Error (exit code 1), 6 restart(s)"),
        "{out}"
    );
    assert!(out.contains("lab-worker2: disktype=ssd (has hdd)"), "{out}");
    assert!(
        out.contains("container runtime network not ready: NetworkPluginNotReady"),
        "{out}"
    );
}

/// The list items under `key:` in a kubeconfig written by `ApiServer::kubeconfig`.
fn section(text: &str, key: &str) -> String {
    text.lines()
        .skip_while(|l| *l != key)
        .skip(1)
        .take_while(|l| l.starts_with('-') || l.starts_with(' '))
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn an_unreachable_api_fails_with_exit_1() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("cluster.yaml"), CLUSTER).expect("file");
    let s = ApiServer::start().expect("server");
    let kc = dir.path().join("kubeconfig");
    std::fs::write(&kc, s.kubeconfig("lab")).expect("kubeconfig");
    drop(s);
    let kcs = kc.to_string_lossy().into_owned();
    let (code, out, err) = clusterctl(dir.path(), &["status", "--kubeconfig", &kcs], &[]);
    assert_eq!(code, 1, "stdout:\n{out}\nstderr:\n{err}");
    assert!(err.contains("list nodes"), "{err}");
}
