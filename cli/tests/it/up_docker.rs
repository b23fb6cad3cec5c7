//! Whole-system test of `clusterctl up` with the docker provider on the real Docker engine: a 1
//! control-plane + 1 worker file whose nodes run the locally built test-bed node image unprivileged
//! (`privileged: false`, an explicit capability list, tmpfs, bind mounts, a private cgroup namespace —
//! `spec.docker.runOptions`), with the recording kubeadm/kubelet/kubectl stand-ins bind-mounted in
//! (no Kubernetes can run here) and the builtin CNI. The kubeadm stand-in makes port 6443 of the
//! control plane forward to a recording HTTPS API server (`tests/src/apiserver.rs`), so clusterctl's
//! kube client goes the real way: 127.0.0.1:<published port> → the node's 6443 → the API server,
//! the certificate checked against the endpoint host (`tls-server-name`).
//!
//! Checks: containers and network created with the cluster label, the API server port published on
//! 127.0.0.1, the run options applied; every phase ran on its node (init on the control plane, join on
//! the worker); the builtin CNI installed for real (the binary uploaded once per node as
//! `/usr/local/bin/clusterctl`, the embedded plugin written to `/opt/cni/bin/clusterctl-cni`, agent.json, conflist template
//! and unit placed, unit enabled); the label PATCH arrived through the published port; the kubeconfig
//! names 127.0.0.1 and the endpoint; the builtin CNI agent's kubeconfig (a TokenRequest per node,
//! 0600, endpoint, admin.conf's CA, the token — printed nowhere, stored in no state); a second `up`
//! with the state removed re-uploads nothing and requests no token; `destroy` removes containers and
//! network.

use std::path::Path;
use std::process::{Command, Stdio};

use clusterctl_testbed::apiserver::{ApiServer, Recorded, TEST_TOKEN};
use clusterctl_testbed::docker::{docker, docker_available, network_gateway, NodeImage};
use clusterctl_testbed::{is_root, require, unique_name};
use serde_json::{json, Value};

const STANDINS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/standins");
const CLUSTER_LABEL: &str = "io.clusterctl.cluster";
const TOKEN_PATH: &str = "/api/v1/namespaces/kube-system/serviceaccounts/clusterctl-cni/token";

/// Removes the cluster's containers and network (found by label), also when the test fails.
struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let filter = format!("label={CLUSTER_LABEL}={}", self.0);
        if let Ok(ids) = docker(&["ps", "-aq", "--filter", &filter]) {
            for id in ids.lines() {
                let _ = docker(&["rm", "-f", "-v", id]);
            }
        }
        if let Ok(nets) = docker(&["network", "ls", "-q", "--filter", &filter]) {
            for id in nets.lines() {
                let _ = docker(&["network", "rm", id]);
            }
        }
    }
}

fn node_object(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node",
           "metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": "1",
                        "labels": {"kubernetes.io/hostname": name}},
           "spec": {"podCIDR": "10.244.0.0/24"},
           "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}})
}

fn cluster_file(dir: &Path, name: &str, image: &str, store: &Path) -> std::path::PathBuf {
    cluster_file_with(dir, name, image, store, "builtin", true)
}

/// The cluster file with `cni` and, when `worker`, the worker `w1` beside the control plane `c1`.
fn cluster_file_with(
    dir: &Path,
    name: &str,
    image: &str,
    store: &Path,
    cni: &str,
    worker: bool,
) -> std::path::PathBuf {
    let standin = |f: &str| Path::new(STANDINS).join(f).display().to_string();
    // A node image carries the kubelet's unit, as kind's does: `up` starts a kubelet that a join left
    // stopped (kubeadm's kubelet-start stops it before writing its configuration).
    let unit = dir.join("kubelet.service");
    std::fs::write(&unit, clusterctl_testbed::cli::KUBELET_UNIT).expect("kubelet unit");
    let text = format!(
        r#"apiVersion: clusterctl.io/v1alpha1
kind: Cluster
metadata:
  name: {name}
spec:
  kubernetesVersion: v1.34.1
  provider: docker
  networking:
    podSubnet: 10.244.0.0/16
    serviceSubnet: 10.96.0.0/16
    cni:
      plugin: {cni}
  runtime:
    kind: containerd
    cgroupDriver: systemd
  # The recording API server takes no server-side apply: no local-path-provisioner (real_docker.rs
  # installs it on a real API).
  storage:
    defaultClass: none
  kubelet:
    failCgroupV1: false
  docker:
    nodeImage: {image}
    runOptions:
      privileged: false
      capAdd: [SYS_ADMIN, NET_ADMIN]
      tmpfs: ["/run:exec", "/run/lock", "/tmp:exec", "/var/lib/containerd:exec"]
      cgroupns: private
      extraMounts:
        - {{hostPath: {kubeadm}, containerPath: /usr/bin/kubeadm, readOnly: true}}
        - {{hostPath: {kubelet}, containerPath: /usr/bin/kubelet, readOnly: true}}
        - {{hostPath: {kubectl}, containerPath: /usr/bin/kubectl, readOnly: true}}
        - {{hostPath: {store}, containerPath: /var/lib/clusterctl-standin}}
        - {{hostPath: {unit}, containerPath: /etc/systemd/system/kubelet.service, readOnly: true}}
  nodes:
    - name: c1
      role: control-plane
      labels: {{tier: front}}
{worker}"#,
        kubeadm = standin("kubeadm-standin.sh"),
        kubelet = standin("kubelet-standin.sh"),
        kubectl = standin("kubectl-standin.sh"),
        store = store.display(),
        unit = unit.display(),
        worker = if worker {
            "    - name: w1\n      role: worker\n"
        } else {
            ""
        },
    );
    let path = dir.join("cluster.yaml");
    std::fs::write(&path, text).expect("cluster file");
    path
}

fn clusterctl(home: &Path, args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_clusterctl"))
        .args(args)
        .env("HOME", home)
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .output()
        .expect("run clusterctl");
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
}

fn up(home: &Path, file: &Path) -> (i32, String) {
    let kubeconfig = home.join("kubeconfig");
    clusterctl(
        home,
        &[
            "up",
            "-f",
            &file.display().to_string(),
            "--kubeconfig",
            &kubeconfig.display().to_string(),
            "--ready-timeout",
            "30",
            // The stand-ins' nodes are unprivileged containers with Docker's loopback resolver: what only
            // a real kubelet needs (`nodeEnvironment`, `kubelet.resolvConf`) is tested in real_cluster.rs.
            "--ignore-preflight",
            "node-environment,resolv-conf",
        ],
    )
}

fn in_node(container: &str, script: &str) -> String {
    docker(&["exec", container, "sh", "-c", script]).unwrap_or_else(|e| panic!("{e:#}"))
}

/// The value of the first `key: value` line of a YAML text (quotes removed).
fn yaml_field(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let v = l
            .trim_start()
            .trim_start_matches("- ")
            .strip_prefix(key)?
            .strip_prefix(':')?;
        Some(v.trim().trim_matches(|c| c == '"' || c == '\'').to_string())
    })
}

fn count(out: &str, needle: &str) -> usize {
    out.lines().filter(|l| l.contains(needle)).count()
}

#[test]
fn up_creates_docker_nodes_runs_every_phase_and_destroy_removes_them() {
    if !require("root", is_root()) || !require("docker", docker_available()) {
        return;
    }
    let image = NodeImage::ensure().expect("node image");
    let name = unique_name("ud");
    let _cleanup = Cleanup(name.clone());
    let home = tempfile::tempdir().expect("home");
    let store = tempfile::tempdir().expect("store");

    // The recording API server on the default bridge's gateway (this machine, reachable from every
    // docker network); its certificate also names the endpoint host `<cluster>-c1`.
    let gateway = network_gateway("bridge").expect("bridge gateway");
    let endpoint_host = format!("{name}-c1");
    let api = ApiServer::start_named(gateway.into(), &[&endpoint_host]).expect("api server");
    let items: Vec<Value> = ["c1", "w1"].iter().map(|n| node_object(n)).collect();
    for (n, item) in ["c1", "w1"].iter().zip(&items) {
        api.serve(&format!("/api/v1/nodes/{n}"), item.clone());
    }
    api.serve(
        "/api/v1/nodes",
        json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {"resourceVersion": "1"}, "items": items}),
    );
    // The TokenRequest of the builtin CNI agent's ServiceAccount (a value unique to this run).
    let agent_token = unique_name("agent-token");
    api.respond(
        "POST",
        TOKEN_PATH,
        201,
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
               "metadata": {"name": "clusterctl-cni", "namespace": "kube-system"},
               "spec": {"audiences": ["https://kubernetes.default.svc"], "expirationSeconds": 31536000},
               "status": {"token": agent_token, "expirationTimestamp": "2027-11-30T00:00:00Z"}}),
    );
    let api_dir = store.path().join("api");
    std::fs::create_dir_all(&api_dir).expect("api dir");
    std::fs::write(api_dir.join("proxy"), api.addr().to_string()).expect("proxy");
    std::fs::write(api_dir.join("ca.crt"), api.ca_pem()).expect("ca");
    std::fs::write(api_dir.join("token"), TEST_TOKEN).expect("token");

    let file = cluster_file(home.path(), &name, &image.tag, store.path());
    let (code, out) = up(home.path(), &file);
    assert_eq!(code, 0, "{out}");

    // Containers with the cluster label, on the cluster's network, run as the file says.
    let filter = format!("label={CLUSTER_LABEL}={name}");
    let mut containers: Vec<String> =
        docker(&["ps", "--filter", &filter, "--format", "{{.Names}}"])
            .expect("ps")
            .lines()
            .map(str::to_string)
            .collect();
    containers.sort();
    let (c1, w1) = (format!("{name}-c1"), format!("{name}-w1"));
    assert_eq!(containers, vec![c1.clone(), w1.clone()]);
    let network = format!("clusterctl-{name}");
    assert_eq!(
        docker(&[
            "network",
            "inspect",
            &network,
            "--format",
            &format!("{{{{index .Labels \"{CLUSTER_LABEL}\"}}}}")
        ])
        .expect("network"),
        name
    );
    for c in [&c1, &w1] {
        let host = docker(&[
            "inspect",
            c,
            "--format",
            "{{.Config.Image}} {{.HostConfig.Privileged}} {{.HostConfig.CgroupnsMode}} {{json .HostConfig.CapAdd}} {{index .Config.Labels \"io.clusterctl.node\"}}",
        ])
        .expect("inspect");
        let node = c.rsplit('-').next().unwrap_or_default();
        assert_eq!(
            host,
            format!(
                "{} false private [\"SYS_ADMIN\",\"NET_ADMIN\"] {node}",
                image.tag
            ),
            "{c}"
        );
        assert!(
            docker(&[
                "inspect",
                c,
                "--format",
                "{{json .NetworkSettings.Networks}}"
            ])
            .expect("inspect")
            .contains(&format!("\"{network}\"")),
            "{c} on {network}"
        );
    }
    let published = docker(&["port", &c1, "6443/tcp"]).expect("port");
    let port = published
        .lines()
        .find_map(|l| l.strip_prefix("127.0.0.1:"))
        .unwrap_or_else(|| panic!("6443 not published on 127.0.0.1: {published}"))
        .to_string();
    assert_eq!(docker(&["port", &w1]).unwrap_or_default(), "");

    // Every phase ran on its node.
    for (node, phase) in [
        ("c1", "init: run: kubeadm init"),
        ("w1", "join/worker: run: kubeadm join"),
        ("c1", "cni: write /usr/local/bin/clusterctl"),
        ("w1", "cni: write /usr/local/bin/clusterctl"),
        ("c1", "runtime/containerd: "),
        ("w1", "runtime/containerd: "),
    ] {
        assert!(
            out.contains(&format!("[{node}] {phase}")),
            "[{node}] {phase}:\n{out}"
        );
    }
    for p in [
        "facts",
        "preflight",
        "files",
        "runtime/containerd",
        "cni",
        "wait-ready",
    ] {
        for node in ["c1", "w1"] {
            if p == "wait-ready" && node == "w1" {
                continue;
            }
            assert!(
                out.contains(&format!("[{node}] {p}: done")),
                "[{node}] {p}: done:\n{out}"
            );
        }
    }
    let calls = |c: &str| in_node(c, "cat /var/log/clusterctl-standin/calls.log");
    assert_eq!(count(&calls(&c1), "kubeadm init --config"), 1);
    assert_eq!(count(&calls(&w1), "kubeadm join --config"), 1);

    // The builtin CNI, installed for real: the binary uploaded once per node, the plugin the dedicated
    // binary embedded in clusterctl (clusterctl_cni_embed::PLUGIN).
    let local_sha = {
        let o = Command::new("sha256sum")
            .arg(env!("CARGO_BIN_EXE_clusterctl"))
            .output()
            .expect("sha256sum");
        String::from_utf8_lossy(&o.stdout)
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(local_sha.len(), 64);
    for (c, node) in [(&c1, "c1"), (&w1, "w1")] {
        let shas = in_node(
            c,
            "sha256sum /usr/local/bin/clusterctl /opt/cni/bin/clusterctl-cni | cut -d' ' -f1; stat -c %a /usr/local/bin/clusterctl /opt/cni/bin/clusterctl-cni",
        );
        assert_eq!(
            shas,
            format!("{local_sha}\n{}\n755\n755", clusterctl_cni_embed::sha256()),
            "{node}: the binary uploaded, the embedded plugin written"
        );
        assert_eq!(
            count(
                &out,
                &format!("[{node}] cni: write /usr/local/bin/clusterctl")
            ),
            1,
            "{node}: one upload"
        );
        let agent: Value = serde_json::from_str(&in_node(c, "cat /etc/clusterctl/cni/agent.json"))
            .expect("agent.json");
        assert_eq!(agent["nodeName"], node);
        assert_eq!(agent["podSubnet"], "10.244.0.0/16");
        assert!(
            in_node(c, "cat /etc/clusterctl/cni/10-clusterctl.conflist").contains("clusterctl-cni")
        );
        assert!(in_node(c, "cat /etc/systemd/system/clusterctl-cni-agent.service").contains(
            "ExecStart=/usr/local/bin/clusterctl cni agent --config /etc/clusterctl/cni/agent.json"
        ));
        assert_eq!(
            in_node(c, "systemctl is-enabled clusterctl-cni-agent"),
            "enabled"
        );
    }

    // The kube client reached the API server through the published port and the node's 6443.
    let rec = api.recorded();
    let patches: Vec<&Recorded> = rec.iter().filter(|r| r.method == "PATCH").collect();
    assert_eq!(patches.len(), 1, "{rec:#?}");
    assert_eq!(patches[0].path, "/api/v1/nodes/c1");
    assert_eq!(patches[0].content_type, "application/merge-patch+json");
    assert_eq!(
        patches[0].json(),
        json!({"metadata": {"labels": {"tier": "front"}}})
    );
    assert!(rec
        .iter()
        .any(|r| r.method == "GET" && r.path == "/api/v1/nodes"));
    let kc = std::fs::read_to_string(home.path().join("kubeconfig")).expect("kubeconfig");
    assert!(
        kc.contains(&format!("server: https://127.0.0.1:{port}"))
            && kc.contains(&format!("tls-server-name: {endpoint_host}")),
        "{kc}"
    );

    // The agent's kubeconfig on every node: 0600 root, the endpoint, admin.conf's CA, the token from
    // one TokenRequest per node; the token in no output and no state record.
    let token_posts: Vec<&Recorded> = rec
        .iter()
        .filter(|r| r.method == "POST" && r.path == TOKEN_PATH)
        .collect();
    assert_eq!(token_posts.len(), 2, "{rec:#?}");
    for p in &token_posts {
        assert_eq!(p.json()["kind"], "TokenRequest");
        assert_eq!(p.json()["spec"]["expirationSeconds"], 31536000);
    }
    let admin = in_node(&c1, "cat /etc/kubernetes/admin.conf");
    let admin_ca = yaml_field(&admin, "certificate-authority-data").expect("admin.conf CA");
    let admin_server = yaml_field(&admin, "server").expect("admin.conf server");
    assert!(
        admin_server.starts_with(&format!("https://{endpoint_host}:")),
        "{admin_server}"
    );
    for c in [&c1, &w1] {
        assert_eq!(
            in_node(c, "stat -c '%a %U' /etc/clusterctl/cni/agent.kubeconfig"),
            "600 root",
            "{c}"
        );
        let agent_kc = in_node(c, "cat /etc/clusterctl/cni/agent.kubeconfig");
        assert_eq!(
            yaml_field(&agent_kc, "server"),
            Some(admin_server.clone()),
            "{c}"
        );
        assert_eq!(
            yaml_field(&agent_kc, "certificate-authority-data"),
            Some(admin_ca.clone()),
            "{c}"
        );
        assert_eq!(
            yaml_field(&agent_kc, "token"),
            Some(agent_token.clone()),
            "{c}"
        );
        assert_eq!(
            in_node(
                c,
                &format!("grep -rlF '{agent_token}' /var/lib/clusterctl || true")
            ),
            "",
            "{c}: the token is in a state record"
        );
    }
    assert!(!out.contains(&agent_token), "the token was printed:\n{out}");
    let local_hits = Command::new("grep")
        .args(["-rlF", &agent_token])
        .arg(home.path())
        .output()
        .expect("grep");
    assert_eq!(
        String::from_utf8_lossy(&local_hits.stdout),
        "",
        "the token is stored on this machine"
    );

    // Without any state record, a second `up` finds the binary in place and uploads nothing.
    for c in [&c1, &w1] {
        in_node(c, "rm -f /var/lib/clusterctl/state.json");
    }
    let _ = std::fs::remove_dir_all(home.path().join(".cache/clusterctl"));
    let (code, again) = up(home.path(), &file);
    assert_eq!(code, 0, "{again}");
    assert!(!again.contains(": write "), "second run wrote:\n{again}");
    assert!(!again.contains("kubeadm init --config"), "{again}");
    assert!(
        !again.contains(&agent_token),
        "the token was printed:\n{again}"
    );
    assert_eq!(
        api.recorded()
            .iter()
            .filter(|r| r.method == "POST" && r.path == TOKEN_PATH)
            .count(),
        2,
        "the second run kept the agents' tokens"
    );

    // A token a day from expiry (a JWT whose `exp` says so) is renewed by the next `up`, on that
    // node only; the new token is written and printed nowhere.
    in_node(
        &c1,
        &format!(
            "p=$(printf '{{\"exp\":%d}}' $(( $(date +%s) + 86400 )) | base64 -w0 | tr '+/' '-_' | tr -d '='); \
             sed -i \"s/{agent_token}/eyJhbGciOiJub25lIn0.$p.c2ln/\" /etc/clusterctl/cni/agent.kubeconfig"
        ),
    );
    assert!(!in_node(&c1, "cat /etc/clusterctl/cni/agent.kubeconfig").contains(&agent_token));
    let (code, renewed) = up(home.path(), &file);
    assert_eq!(code, 0, "{renewed}");
    let asked = |n: &str| {
        renewed.contains(&format!(
            "[{n}] cni/agent-credentials: api: create token for serviceaccount"
        ))
    };
    assert!(asked("c1") && !asked("w1"), "{renewed}");
    assert!(
        !renewed.contains(&agent_token),
        "the token was printed:\n{renewed}"
    );
    assert_eq!(
        api.recorded()
            .iter()
            .filter(|r| r.method == "POST" && r.path == TOKEN_PATH)
            .count(),
        3,
        "one TokenRequest for the node whose token was about to expire"
    );
    assert_eq!(
        yaml_field(
            &in_node(&c1, "cat /etc/clusterctl/cni/agent.kubeconfig"),
            "token"
        ),
        Some(agent_token.clone())
    );

    // destroy removes containers and network.
    let (code, gone) = clusterctl(
        home.path(),
        &[
            "destroy",
            "-f",
            &file.display().to_string(),
            "--yes",
            "--kubeconfig",
            &home.path().join("kubeconfig").display().to_string(),
        ],
    );
    assert_eq!(code, 0, "{gone}");
    assert_eq!(docker(&["ps", "-aq", "--filter", &filter]).expect("ps"), "");
    assert_eq!(
        docker(&["network", "ls", "-q", "--filter", &filter]).expect("networks"),
        ""
    );
}

/// `cni: none`: `up` installs no CNI, does not wait for Ready nodes (the Node stays NotReady, as
/// without a CNI it does), says that the nodes stay NotReady until a CNI is installed, waits for the
/// control-plane static pods instead (served Running and Ready by the recording API server), and
/// exits 0.
#[test]
fn up_with_cni_none_waits_only_for_the_control_plane_and_exits_0() {
    if !require("root", is_root()) || !require("docker", docker_available()) {
        return;
    }
    let image = NodeImage::ensure().expect("node image");
    let name = unique_name("un");
    let _cleanup = Cleanup(name.clone());
    let home = tempfile::tempdir().expect("home");
    let store = tempfile::tempdir().expect("store");
    let gateway = network_gateway("bridge").expect("bridge gateway");
    let endpoint_host = format!("{name}-c1");
    let api = ApiServer::start_named(gateway.into(), &[&endpoint_host]).expect("api server");
    let mut node = node_object("c1");
    node["status"]["conditions"] = json!([{"type": "Ready", "status": "False",
        "reason": "KubeletNotReady",
        "message": "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"}]);
    api.serve("/api/v1/nodes/c1", node.clone());
    api.serve(
        "/api/v1/nodes",
        json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {"resourceVersion": "1"}, "items": [node]}),
    );
    let pods: Vec<Value> = [
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
    ]
    .iter()
    .map(|c| {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": format!("{c}-c1"), "namespace": "kube-system"},
               "spec": {"nodeName": "c1", "containers": [{"name": c, "image": format!("registry.k8s.io/{c}:v1.34.1")}]},
               "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
    })
    .collect();
    api.serve(
        "/api/v1/pods",
        json!({"apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": "1"}, "items": pods}),
    );
    let api_dir = store.path().join("api");
    std::fs::create_dir_all(&api_dir).expect("api dir");
    std::fs::write(api_dir.join("proxy"), api.addr().to_string()).expect("proxy");
    std::fs::write(api_dir.join("ca.crt"), api.ca_pem()).expect("ca");
    std::fs::write(api_dir.join("token"), TEST_TOKEN).expect("token");

    let file = cluster_file_with(home.path(), &name, &image.tag, store.path(), "none", false);
    let (code, out) = up(home.path(), &file);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("nodes stay NotReady until a CNI is installed"),
        "{out}"
    );
    assert!(out.contains("[c1] wait-ready: done"), "{out}");
    let c1 = format!("{name}-c1");
    assert_eq!(
        in_node(
            &c1,
            "test -e /opt/cni/bin/clusterctl-cni && echo yes || echo no"
        ),
        "no",
        "no CNI installed"
    );
    let rec = api.recorded();
    assert!(
        rec.iter()
            .any(|r| r.method == "GET" && r.path == "/api/v1/pods"),
        "wait-ready listed the pods: {rec:#?}"
    );
    assert!(
        !rec.iter().any(|r| r.path == TOKEN_PATH),
        "no CNI agent token requested"
    );
}
