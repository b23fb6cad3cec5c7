//! `clusterctl status` against a real control plane (`clusterctl_testbed::envtest`: upstream etcd and
//! kube-apiserver on loopback) holding the Nodes, Pods and Events of the recorded fixtures
//! (`kubeapi/tests/fixtures`, seed `000_…`: a nodeSelector no node matches after a re-create, an image
//! that was never loaded, a crash loop, a node without a CNI), created through the API with their
//! statuses written through the `status` subresources, as the kubelet and the scheduler would. Checks
//! the layer named per stuck pod (which needs the server to answer each pod's field-selected events),
//! the NotReady reason, the declared label and taint a node lost, the `-o json` shape, and the kubeconfig context
//! picked by cluster name — there the other context points at the recording API server, which must
//! receive no request at all.

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

use clusterctl_testbed::apiserver::ApiServer;
use clusterctl_testbed::envtest::Envtest;
use serde_json::{json, Value};

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
    - {name: lab-worker2, role: worker, labels: {disktype: ssd}, taints: [{key: dedicated, value: db, effect: NoSchedule}]}
    - {name: lab-worker3, role: worker}
";

/// `object` without what the server assigns (uid, resourceVersion, creationTimestamp) and without
/// `status`; the status separately.
fn split(object: &Value) -> (Value, Value) {
    let mut o = object.clone();
    let status = o
        .as_object_mut()
        .and_then(|m| m.remove("status"))
        .unwrap_or(Value::Null);
    if let Some(m) = o["metadata"].as_object_mut() {
        for k in ["uid", "resourceVersion", "creationTimestamp"] {
            m.remove(k);
        }
    }
    (o, status)
}

/// Creates every fixture object, statuses included. Namespaces and the ServiceAccounts the pods name
/// are made first (a controller-manager would have made them).
fn load_fixtures(env: &Envtest) {
    for n in fixture("nodes.json")["items"].as_array().expect("nodes") {
        let (obj, status) = split(n);
        let name = obj["metadata"]["name"].as_str().expect("name");
        env.create("/api/v1/nodes", &obj).expect("node");
        env.merge_patch(
            &format!("/api/v1/nodes/{name}/status"),
            &json!({ "status": status }),
        )
        .expect("node status");
    }
    let pods = fixture("pods.json");
    for p in pods["items"].as_array().expect("pods") {
        let (obj, status) = split(p);
        let ns = obj["metadata"]["namespace"].as_str().expect("namespace");
        let name = obj["metadata"]["name"].as_str().expect("name");
        let _ = env.create(
            "/api/v1/namespaces",
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        );
        let sa = obj["spec"]["serviceAccountName"]
            .as_str()
            .unwrap_or("default");
        let _ = env.create(
            &format!("/api/v1/namespaces/{ns}/serviceaccounts"),
            &json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa}}),
        );
        env.create(&format!("/api/v1/namespaces/{ns}/pods"), &obj)
            .unwrap_or_else(|e| panic!("pod {ns}/{name}: {e}"));
        env.merge_patch(
            &format!("/api/v1/namespaces/{ns}/pods/{name}/status"),
            &json!({ "status": status }),
        )
        .unwrap_or_else(|e| panic!("status of pod {ns}/{name}: {e}"));
    }
    for file in ["events-cka-lab.json", "events-kube-system.json"] {
        for e in fixture(file)["items"].as_array().expect("events") {
            let (obj, _) = split(e);
            let ns = obj["metadata"]["namespace"].as_str().expect("namespace");
            env.create(&format!("/api/v1/namespaces/{ns}/events"), &obj)
                .unwrap_or_else(|err| panic!("event {obj}: {err}"));
        }
    }
}

/// What the builtin CNI agent of `lab-worker` records (its own `report::event`, so the real API server
/// must accept them): NetworkPolicy not enforced there, and the policy `cka-lab/odd` failing closed;
/// `lab-worker2` failed closed, then recovered (so it must not be shown).
fn load_agent_events(env: &Envtest) {
    use clusterctl_cni::agent::netpol::report::{event, Notice};
    use k8s_openapi::jiff::{Timestamp, ToSpan};
    let t0 = Timestamp::now();
    let notices = [
        (
            "lab-worker",
            Notice::NotEnforced("nft is not installed".into()),
        ),
        (
            "lab-worker",
            Notice::PolicyFailedClosed {
                namespace: "cka-lab".into(),
                name: "odd".into(),
                uid: None,
                why: "protocol \"ICMP\" is not TCP, UDP or SCTP".into(),
            },
        ),
        (
            "lab-worker2",
            Notice::NodeFailedClosed("nft refused".into()),
        ),
        ("lab-worker2", Notice::Enforced),
    ];
    for (i, (node, n)) in notices.iter().enumerate() {
        let at = t0.checked_add((i as i64).seconds()).expect("time");
        let e = serde_json::to_value(event(node, n, at)).expect("event json");
        let ns = e["metadata"]["namespace"]
            .as_str()
            .expect("namespace")
            .to_string();
        env.create(&format!("/api/v1/namespaces/{ns}/events"), &e)
            .unwrap_or_else(|err| panic!("agent event {e}: {err}"));
    }
}

/// The control plane with the fixtures, started once for this file's tests (they only read it).
fn lab() -> Option<&'static Envtest> {
    static LAB: OnceLock<Option<Envtest>> = OnceLock::new();
    LAB.get_or_init(|| {
        let env = Envtest::require_own()?;
        load_fixtures(&env);
        load_agent_events(&env);
        Some(env)
    })
    .as_ref()
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
    let Some(env) = lab() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("cluster.yaml"), CLUSTER).expect("file");
    let kc = dir.path().join("kubeconfig");
    std::fs::write(&kc, env.kubeconfig("lab")).expect("kubeconfig");
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
    assert_eq!(v["result"], "degraded", "stuck pods and a NotReady node");

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
    assert_eq!(sched["missingLabels"], json!(["disktype=ssd"]));
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
    // Seen only through its FailedCreatePodSandBox event in kube-system.
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
    assert_eq!(v["missingNodes"], json!(["lab-worker3"]));
    assert_eq!(
        v["labelDrift"],
        json!([{"node": "lab-worker2", "label": "disktype=ssd", "actual": "hdd"}])
    );
    // A declared taint the node does not carry is reported too (`up` puts it back).
    assert_eq!(
        v["taintDrift"],
        json!([{"node": "lab-worker2", "taint": "dedicated=db:NoSchedule"}])
    );
}

#[test]
fn text_output_and_context_named_after_the_cluster() {
    let Some(env) = lab() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("cluster.yaml"), CLUSTER).expect("file");
    // $KUBECONFIG holds another current context; `status` must pick the cluster's, `clusterctl-lab`.
    // The other one is the recording server: it must see no request.
    let other = ApiServer::start().expect("other server");
    let lab = env.kubeconfig("clusterctl-lab");
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
    let taints: String = out
        .lines()
        .skip_while(|l| !l.starts_with("taints declared in the file but missing on the node"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect();
    assert!(
        taints.contains("lab-worker2: dedicated=db:NoSchedule"),
        "{out}"
    );
    assert!(
        out.contains("container runtime network not ready: NetworkPluginNotReady"),
        "{out}"
    );
    // The builtin CNI agent's standing NetworkPolicy reports; lab-worker2's recovered one is not.
    let np: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("NetworkPolicy (the builtin CNI agent's Events):"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect();
    assert_eq!(np.len(), 2, "{out}");
    assert!(
        np[0].starts_with("  NetworkPolicy cka-lab/odd on lab-worker: NetworkPolicyFailedClosed: ")
            && np[0].contains("the pods it selects there are isolated and it allows nothing"),
        "{out}"
    );
    assert!(
        np[1].starts_with("  Node lab-worker on lab-worker: NetworkPolicyNotEnforced: NetworkPolicy is NOT enforced on node lab-worker: nft is not installed"),
        "{out}"
    );
}

/// The list items under `key:` in a kubeconfig written by `ApiServer::kubeconfig` or
/// `Envtest::kubeconfig`.
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
