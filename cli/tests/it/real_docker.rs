//! The docker provider runs the same real cluster (root + Docker + the test bed's Kubernetes build):
//! `clusterctl up -f` a file with `provider: docker`, 3 control planes + 1 worker behind the lab's API
//! load balancer (`docker.loadBalancer`, checked by `real_docker_lb.rs`'s functions), on node containers made
//! by clusterctl itself from the test bed's node image with the upstream kubeadm, kubelet and kubectl
//! (`K8sNodeImage`), run unprivileged with the narrow settings (`runOptions`: `privileged: false`,
//! `SYS_ADMIN` + `NET_ADMIN`, tmpfs, a private cgroup namespace; `nodeEnvironment:
//! unprivileged-container`), the builtin CNI and containerd. The images reach the nodes through
//! `clusterctl airgap bundle` (from a loopback registry serving what `scripts/k8s/images.sh` built,
//! with `--source-registry-override`) and the file's `airgap.bundle`, which `up` imports into each
//! node's containerd — the workload image too, as an `images.preload`. Asserts both nodes Ready through
//! our CNI, CoreDNS running, pod-to-pod traffic across the nodes, a ClusterIP Service through
//! kube-proxy and its name through CoreDNS; `get nodes` shows each node container's address on the
//! cluster network, the kubeconfig `up` merged has cluster, user and current context
//! `clusterctl-<name>` (and `status -o json` through it says `result: ok`, as it does from a HOME
//! without that kubeconfig, through the node's admin.conf pointed at the port Docker publishes);
//! then the lab's additions (issue 27, docs/lab.md): local-path-provisioner is the default StorageClass
//! (a claim without a class Bound, written by one pod, read back by another), the local registry
//! (`registry.local`, the test bed's registry:2 equivalent, `clusterctl.test/registry:2`: an image
//! `docker push`ed to `localhost:<port>` runs as a pod under that name; the KEP-1755 ConfigMap), and
//! `export logs` (a crash-looping pod's log in the archive, no bootstrap token, certificate key or
//! encryption key — `apiServer.encryption` is on — in any file; with `w1` paused the rest is exported
//! and `w1` is said missing); a second `up` changes nothing; then the load balancer: it runs, the
//! kubeconfig and a joined control plane's admin.conf name it, `status` shows its backends, and the API
//! answers through it with `c1` stopped; then `destroy` removes the containers, the local registry, the
//! load balancer, the network and exactly those kubeconfig entries.

use std::process::Command;
use std::time::Instant;

use clusterctl_testbed::docker::{docker, network_gateway, TESTBED_LABEL};
use clusterctl_testbed::registry::Registry;

use crate::real_cluster::check_cluster_on;
use crate::real_docker_lb::{self, LB_IMAGE};
use crate::real_support::{self, lab, Kube, VERSION};

/// The docker provider's label naming the cluster (exec's `CLUSTER_LABEL`).
const CLUSTER_LABEL: &str = "io.clusterctl.cluster";
/// The label naming the cluster on its local registry container (exec's `REGISTRY_LABEL`).
const REGISTRY_LABEL: &str = "io.clusterctl.registry";
/// The label naming the cluster on its API load balancer container (exec's `LOAD_BALANCER_LABEL`).
pub(crate) const LOAD_BALANCER_LABEL: &str = "io.clusterctl.loadbalancer";

/// A docker-provider cluster: checks through `docker exec` into `<cluster>-<node>`; the containers
/// (nodes, local registry, API load balancer) and the network are removed on drop (also when `up` or an
/// assertion failed).
pub(crate) struct DockerCluster {
    pub(crate) name: String,
    pub(crate) nodes: Vec<String>,
}

impl DockerCluster {
    pub(crate) fn container(&self, node: &str) -> String {
        format!("{}-{node}", self.name)
    }

    fn exec(&self, node: &str, script: &str, stdin: &[u8]) -> (i32, String, String) {
        let mut child = Command::new("docker")
            .args(["exec", "-i", &self.container(node), "sh", "-c", script])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("docker exec");
        if let Some(mut i) = child.stdin.take() {
            let _ = std::io::Write::write_all(&mut i, stdin);
        }
        let out = child.wait_with_output().expect("docker exec");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).trim().to_string(),
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        )
    }
}

impl Kube for DockerCluster {
    fn kubectl(&self, args: &str) -> String {
        let (st, out, err) = self.exec(
            &self.nodes[0],
            &format!("kubectl --kubeconfig /etc/kubernetes/admin.conf {args}"),
            b"",
        );
        assert_eq!(st, 0, "kubectl {args}: {out}{err}");
        out
    }
    fn apply(&self, yaml: &str) {
        let (st, out, err) = self.exec(
            &self.nodes[0],
            "kubectl --kubeconfig /etc/kubernetes/admin.conf apply -f -",
            yaml.as_bytes(),
        );
        assert_eq!(st, 0, "kubectl apply: {out}{err}");
    }
    fn node_sh(&self, node: &str, script: &str) -> String {
        let (st, out, err) = self.exec(node, script, b"");
        assert_eq!(st, 0, "{node}: {script}: {out}{err}");
        out
    }
    fn node_names(&self) -> Vec<String> {
        self.nodes.clone()
    }
    fn workload_image(&self) -> String {
        "clusterctl.test/busybox:1".into()
    }
    fn vip(&self) -> Option<String> {
        None
    }
}

impl Drop for DockerCluster {
    fn drop(&mut self) {
        let filter = format!("label={CLUSTER_LABEL}={}", self.name);
        if let Ok(ids) = docker(&["ps", "-aq", "--filter", &filter]) {
            for id in ids.lines().filter(|l| !l.is_empty()) {
                let _ = docker(&["rm", "-f", "-v", id]);
            }
        }
        for label in [REGISTRY_LABEL, LOAD_BALANCER_LABEL] {
            let filter = format!("label={label}={}", self.name);
            if let Ok(ids) = docker(&["ps", "-aq", "--filter", &filter]) {
                for id in ids.lines().filter(|l| !l.is_empty()) {
                    let _ = docker(&["rm", "-f", "-v", id]);
                }
            }
        }
        let _ = docker(&["network", "rm", &format!("clusterctl-{}", self.name)]);
    }
}

/// The `kubelet:` and `docker:` sections (under `spec:`) of an unprivileged docker lab: the node
/// image, the run options this sandbox allows (no `--privileged`), and `resolv` mounted as the
/// kubelet's resolver file. Lines for the `docker:` section may follow directly (four spaces).
fn unprivileged_sections(node_image: &str, resolv: &std::path::Path) -> String {
    format!(
        "  kubelet:
    resolvConf: /etc/kubernetes/resolv.conf
    evictionHard: {{memory.available: 100Mi, nodefs.available: 1Gi, nodefs.inodesFree: 1%, imagefs.available: 1Gi}}
  docker:
    nodeImage: {node_image}
    runOptions:
      privileged: false
      capAdd: [SYS_ADMIN, NET_ADMIN, SYS_PTRACE]
      tmpfs: [\"/run:exec\", \"/run/lock\", \"/tmp:exec\", \"/var/lib/containerd:exec\"]
      cgroupns: private
      extraMounts:
        - {{hostPath: {resolv}, containerPath: /etc/kubernetes/resolv.conf, readOnly: true}}
",
        resolv = resolv.display()
    )
}

/// The provider's network `clusterctl-<name>`, made here first so that its gateway (the kubelet's
/// resolver on the nodes) is known before `up`, and `dir/resolv.conf` naming it; `up` takes a network
/// carrying the cluster's label as its own, and `destroy` removes it.
pub(crate) fn lab_network(name: &str, dir: &std::path::Path) -> (String, std::path::PathBuf) {
    let network = format!("clusterctl-{name}");
    let pid = std::process::id().to_string();
    docker(&[
        "network",
        "create",
        "--label",
        &format!("{CLUSTER_LABEL}={name}"),
        "--label",
        &format!("{TESTBED_LABEL}={pid}"),
        &network,
    ])
    .expect("network");
    let gateway = network_gateway(&network).expect("gateway");
    let resolv = dir.join("resolv.conf");
    std::fs::write(&resolv, format!("nameserver {gateway}\n")).expect("resolv.conf");
    (network, resolv)
}

/// `get nodes -o json`: each node's address is its container's on `network`; the kubeconfig `up`
/// merged names cluster, user and current context `clusterctl-<name>`; `status -o json` through it
/// reports `result: ok`.
fn check_get_and_kubeconfig(
    cc: &clusterctl_testbed::cli::Clusterctl,
    file: &str,
    cluster: &DockerCluster,
    network: &str,
) {
    let nodes = cc
        .run(&["get", "nodes", "-f", file, "-o", "json"])
        .expect("get nodes");
    assert_eq!(nodes.code, 0, "{}", nodes.all());
    let v: serde_json::Value = serde_json::from_str(&nodes.stdout).expect("json");
    for n in &cluster.nodes {
        let ip = docker(&[
            "inspect",
            "-f",
            &format!("{{{{(index .NetworkSettings.Networks \"{network}\").IPAddress}}}}"),
            &cluster.container(n),
        ])
        .expect("inspect");
        let row = v
            .as_array()
            .and_then(|a| a.iter().find(|r| r["name"] == n.as_str()))
            .unwrap_or_else(|| panic!("{n}: {v}"));
        assert_eq!(row["address"], ip.trim(), "{n}: {v}");
    }
    let entry = format!("clusterctl-{}", cluster.name);
    let kc: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(cc.kubeconfig()).expect("kubeconfig"))
            .expect("yaml");
    assert_eq!(
        kc["current-context"].as_str(),
        Some(entry.as_str()),
        "{kc:?}"
    );
    for list in ["clusters", "users", "contexts"] {
        assert_eq!(
            kc[list][0]["name"].as_str(),
            Some(entry.as_str()),
            "{list}: {kc:?}"
        );
    }
    // From the node's own admin.conf (which names the endpoint, unreachable from here), `get
    // kubeconfig` gives the server `up` wrote: the published port on 127.0.0.1, tls-server-name the
    // endpoint host.
    let admin = cluster.node_sh("c1", "cat /etc/kubernetes/admin.conf");
    let admin_file = cc.kubeconfig().with_file_name("node-admin.conf");
    std::fs::write(&admin_file, admin).expect("admin.conf");
    let got = cc
        .run(&[
            "get",
            "kubeconfig",
            "-f",
            file,
            "--kubeconfig",
            &admin_file.to_string_lossy(),
        ])
        .expect("get kubeconfig");
    assert_eq!(got.code, 0, "{}", got.all());
    let g: serde_yaml::Value = serde_yaml::from_str(&got.stdout).expect("yaml");
    assert_eq!(g["current-context"].as_str(), Some(entry.as_str()));
    for key in ["server", "tls-server-name"] {
        assert_eq!(
            g["clusters"][0]["cluster"][key], kc["clusters"][0]["cluster"][key],
            "{key}: {}",
            got.stdout
        );
    }
    let status = cc
        .run(&["status", "-f", file, "-o", "json"])
        .expect("status");
    assert_eq!(status.code, 0, "{}", status.all());
    let s: serde_json::Value = serde_json::from_str(&status.stdout).expect("json");
    assert_eq!(s["result"], "ok", "{s}");
    // Walkthrough finding: without the kubeconfig `up` merged (another user, another machine, a
    // deleted context) `status` read admin.conf from the first control plane and used its server,
    // the endpoint `c1`, which this machine does not resolve; it reaches the API through the port
    // Docker publishes on 127.0.0.1, as `up` and kind do.
    let home = tempfile::tempdir().expect("home");
    let fresh = clusterctl_testbed::cli::Clusterctl::new(cc.bin.clone(), home.path());
    assert!(!fresh.kubeconfig().exists());
    let status = fresh
        .run(&["status", "-f", file, "-o", "json"])
        .expect("status");
    assert_eq!(status.code, 0, "{}", status.all());
    let s: serde_json::Value = serde_json::from_str(&status.stdout).expect("json");
    assert_eq!(s["result"], "ok", "{s}");
    assert_eq!(
        s["nodes"].as_array().map(Vec::len),
        Some(cluster.nodes.len()),
        "{s}"
    );
}

#[test]
fn docker_provider_real_cluster() {
    let Some((image, store)) = real_support::available() else {
        return;
    };
    let t = Instant::now();
    let name = clusterctl_testbed::unique_name("rdk");
    let cluster = DockerCluster {
        name: name.clone(),
        nodes: vec!["c1".into(), "c2".into(), "c3".into(), "w1".into()],
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let (network, resolv) = lab_network(&name, dir.path());
    let source = Registry::serve_readonly(&store.storage).expect("source registry");
    real_support::image_in_docker(&store, LB_IMAGE);
    // The lab's local registry (issue 27): the test bed's registry:2 equivalent in this machine's
    // Docker, on a free port (5001 may be taken by a parallel run).
    real_support::image_in_docker(&store, "clusterctl.test/registry:2");
    real_support::busybox_in_docker(&store);
    let registry_port = lab::free_port();
    let file = dir.path().join("cluster.yaml");
    std::fs::write(
        &file,
        format!(
            "apiVersion: clusterctl.io/v1alpha1
kind: Cluster
metadata: {{name: {name}}}
spec:
  kubernetesVersion: {VERSION}
  provider: docker
  nodeEnvironment: unprivileged-container
  apiServer:
    encryption: {{}}
{}    loadBalancer: {{image: {LB_IMAGE}}}
  registry:
    local: {{port: {registry_port}, image: clusterctl.test/registry:2}}
  images:
    preload: [clusterctl.test/busybox:1]
  airgap:
    bundle: site.tar
  nodes:
    - {{name: c1, role: control-plane}}
    - {{name: c2, role: control-plane}}
    - {{name: c3, role: control-plane}}
    - {{name: w1, role: worker}}
",
            unprivileged_sections(&image.tag, &resolv)
        ),
    )
    .expect("cluster file");
    let cc = real_support::own_clusterctl(dir.path());
    let f = file.to_string_lossy().into_owned();
    real_support::airgap_bundle(
        &cc,
        &f,
        &source,
        &["registry.k8s.io", "clusterctl.test", "docker.io"],
    );
    eprintln!(
        "[real] docker: bundle written after {:.1}s",
        t.elapsed().as_secs_f64()
    );
    let up = cc.run(&["up", "-f", &f]).expect("up");
    assert_eq!(up.code, 0, "up:\n{}", up.all());
    eprintln!(
        "[real] docker: up converged after {:.1}s",
        t.elapsed().as_secs_f64()
    );
    // The nodes are clusterctl's own, unprivileged containers of the node image.
    for n in &cluster.nodes {
        let c = cluster.container(n);
        let priv_img = docker(&[
            "inspect",
            "--format",
            "{{.HostConfig.Privileged}} {{.Config.Image}} {{.HostConfig.CgroupnsMode}}",
            &c,
        ])
        .expect("inspect");
        assert_eq!(priv_img, format!("false {} private", image.tag), "{c}");
    }
    // The images came from the bundle: containerd pulled nothing.
    let imported = cluster.node_sh("w1", "ctr -n k8s.io images ls -q");
    assert!(
        imported.contains("clusterctl.test/busybox:1")
            && imported.contains(&format!("registry.k8s.io/kube-proxy:{VERSION}")),
        "{imported}"
    );
    check_cluster_on(&cluster, &["w1".to_string(), "c1".to_string()]);
    let lab_start = Instant::now();
    lab::check_storage(&cluster, &cluster.workload_image());
    lab::check_registry(&cluster, registry_port, "clusterctl.test/busybox:1");
    eprintln!(
        "[real] docker: storage and local registry checked in {:.1}s",
        lab_start.elapsed().as_secs_f64()
    );
    let logs_start = Instant::now();
    let w1 = cluster.container("w1");
    lab::check_export_logs(&cluster, &cc, &f, &cluster.workload_image(), &|stop| {
        docker(&[if stop { "pause" } else { "unpause" }, &w1]).expect("docker pause");
    });
    eprintln!(
        "[real] docker: export logs checked in {:.1}s",
        logs_start.elapsed().as_secs_f64()
    );
    check_get_and_kubeconfig(&cc, &f, &cluster, &network);
    let again = cc.run(&["up", "-f", &f]).expect("up");
    assert_eq!(again.code, 0, "{}", again.all());
    assert!(
        again.all().contains("is up to date; nothing changed"),
        "{}",
        again.all()
    );
    // The API load balancer (issue 27 item 4): it outlives the first control plane.
    real_docker_lb::check_load_balancer(&cc, &f, &cluster);
    real_docker_lb::outlives_the_first_control_plane(&cc, &cluster);
    let destroy = cc.run(&["destroy", "-f", &f, "--yes"]).expect("destroy");
    assert_eq!(destroy.code, 0, "destroy:\n{}", destroy.all());
    let left = docker(&[
        "ps",
        "-aq",
        "--filter",
        &format!("label={CLUSTER_LABEL}={name}"),
    ])
    .expect("ps");
    assert_eq!(left, "", "destroy left containers");
    let registry = docker(&[
        "ps",
        "-aq",
        "--filter",
        &format!("label={REGISTRY_LABEL}={name}"),
    ])
    .expect("ps");
    assert_eq!(registry, "", "destroy left the local registry");
    let lb = docker(&[
        "ps",
        "-aq",
        "--filter",
        &format!("label={LOAD_BALANCER_LABEL}={name}"),
    ])
    .expect("ps");
    assert_eq!(lb, "", "destroy left the load balancer");
    assert!(
        docker(&["network", "inspect", &network]).is_err(),
        "destroy left the network"
    );
    let kc: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(cc.kubeconfig()).expect("kubeconfig"))
            .expect("yaml");
    for list in ["clusters", "users", "contexts"] {
        assert_eq!(
            kc[list].as_sequence().map(Vec::len),
            Some(0),
            "{list}: {kc:?}"
        );
    }
    assert_eq!(kc["current-context"].as_str(), Some(""), "{kc:?}");
    eprintln!(
        "[real] docker provider test done in {:.1}s",
        t.elapsed().as_secs_f64()
    );
}
