//! Shared set-up of the CLI whole-system tests (`cli/tests/it/`): running the `clusterctl` binary with a
//! private `HOME` and kubeconfig, writing SSH-provider cluster files for test nodes, and installing the
//! recording stand-ins of `tests/standins/` on node containers. The binary path comes from the calling
//! test (`env!("CARGO_BIN_EXE_clusterctl")`, only defined in the `clusterctl` package's tests).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

use crate::docker::{ClusterOptions, TestCluster, TestNode};

/// The recording kubeadm stand-in (argv log, configs copied, files kubeadm would write).
pub const KUBEADM_STANDIN: &str = include_str!("../standins/kubeadm-standin.sh");
/// The recording kubelet stand-in (`--version`; otherwise logs a start and sleeps).
pub const KUBELET_STANDIN: &str = include_str!("../standins/kubelet-standin.sh");
/// The recording kubectl stand-in (Nodes from `/var/lib/clusterctl-standin/nodes/`).
pub const KUBECTL_STANDIN: &str = include_str!("../standins/kubectl-standin.sh");
/// The systemd unit running the kubelet stand-in.
pub const KUBELET_UNIT: &str = "[Unit]\nDescription=kubelet STAND-IN (clusterctl tests)\n[Service]\nExecStart=/usr/bin/kubelet\nRestart=always\n[Install]\nWantedBy=multi-user.target\n";
/// Where the stand-ins append their calls (one line per call: `name argv…`).
pub const CALLS_LOG: &str = "/var/log/clusterctl-standin/calls.log";

/// What one `clusterctl` run returned.
#[derive(Debug, Clone)]
pub struct Run {
    /// Exit code (-1 when killed by a signal).
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Run {
    /// stdout followed by stderr (for assertions on the whole output and failure messages).
    pub fn all(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
}

/// The `clusterctl` binary run in a directory that is also its `HOME` (so the kubeconfig, the state
/// cache and `~/.ssh` are the test's own), with `KUBECONFIG=<dir>/kubeconfig`.
#[derive(Debug, Clone)]
pub struct Clusterctl {
    /// The binary (`env!("CARGO_BIN_EXE_clusterctl")`).
    pub bin: PathBuf,
    /// Working directory and `HOME`.
    pub dir: PathBuf,
}

impl Clusterctl {
    /// The binary `bin` run in `dir`.
    pub fn new(bin: impl Into<PathBuf>, dir: impl Into<PathBuf>) -> Self {
        Clusterctl {
            bin: bin.into(),
            dir: dir.into(),
        }
    }

    /// `<dir>/kubeconfig`, the `KUBECONFIG` of every run.
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }

    /// Runs `clusterctl ARGS` with `stdin` fed in. Errors: the binary could not be started.
    pub fn run_with_stdin(&self, args: &[&str], stdin: &str) -> Result<Run> {
        let mut child = Command::new(&self.bin)
            .args(args)
            .current_dir(&self.dir)
            .env("HOME", &self.dir)
            .env_remove("XDG_CACHE_HOME")
            .env("KUBECONFIG", self.kubeconfig())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {}", self.bin.display()))?;
        if let Some(mut i) = child.stdin.take() {
            let _ = i.write_all(stdin.as_bytes());
        }
        let out = child.wait_with_output().context("waiting for clusterctl")?;
        Ok(Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }

    /// Runs `clusterctl ARGS` with an empty stdin.
    pub fn run(&self, args: &[&str]) -> Result<Run> {
        self.run_with_stdin(args, "")
    }
}

/// One node of a test cluster file.
#[derive(Debug, Clone)]
pub struct FileNode {
    /// Node name.
    pub name: String,
    /// `control-plane` or `worker`.
    pub role: &'static str,
    /// IPv4 address.
    pub address: String,
    /// Labels as `(key, value)`.
    pub labels: Vec<(String, String)>,
    /// Taints as `(key, value, effect)`.
    pub taints: Vec<(String, String, String)>,
}

impl FileNode {
    /// A control plane named after the test node, at its address.
    pub fn control_plane(n: &TestNode) -> Self {
        Self::of(n, "control-plane")
    }

    /// A worker named after the test node, at its address.
    pub fn worker(n: &TestNode) -> Self {
        Self::of(n, "worker")
    }

    fn of(n: &TestNode, role: &'static str) -> Self {
        FileNode {
            name: n.name.clone(),
            role,
            address: n.address.clone(),
            labels: Vec::new(),
            taints: Vec::new(),
        }
    }

    /// With the label `key=value`.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.push((key.into(), value.into()));
        self
    }

    /// With the taint `key=value:effect`.
    pub fn taint(mut self, key: &str, value: &str, effect: &str) -> Self {
        self.taints.push((key.into(), value.into(), effect.into()));
        self
    }

    fn yaml(&self) -> String {
        let mut s = format!(
            "    - name: {}\n      role: {}\n      address: {}\n",
            self.name, self.role, self.address
        );
        if !self.labels.is_empty() {
            s.push_str("      labels:\n");
            for (k, v) in &self.labels {
                s.push_str(&format!("        {k}: \"{v}\"\n"));
            }
        }
        if !self.taints.is_empty() {
            s.push_str("      taints:\n");
            for (k, v, e) in &self.taints {
                s.push_str(&format!(
                    "        - {{key: {k}, value: \"{v}\", effect: {e}}}\n"
                ));
            }
        }
        s
    }
}

/// An SSH-provider cluster file (`clusterctl.io/v1alpha1` `Cluster`) for test nodes reached as `root`
/// with `key` and the strict host-key policy: Kubernetes v1.34.1, podSubnet 10.244.0.0/16,
/// serviceSubnet 10.96.0.0/16, the CNI `cni` (`builtin`, `none`, `cilium`, …), the control-plane
/// endpoint `endpoint` when given, `extra_spec` lines (indented two spaces) appended to `spec`, and
/// `packages: {source: preinstalled}` unless `extra_spec` says where packages come from (the test
/// nodes carry stand-ins or placed programs, not packages; the default, `upstream`, would install).
pub fn ssh_cluster_yaml(
    name: &str,
    key: &Path,
    cni: &str,
    endpoint: Option<&str>,
    extra_spec: &str,
    nodes: &[FileNode],
) -> String {
    let mut s = format!(
        "apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata: {{name: {name}}}\nspec:\n  kubernetesVersion: v1.34.1\n  provider: ssh\n  networking: {{podSubnet: 10.244.0.0/16, serviceSubnet: 10.96.0.0/16, cni: {{plugin: {cni}}}}}\n  ssh: {{user: root, keyFile: {}, port: 22, hostKeyPolicy: strict}}\n",
        key.display()
    );
    if let Some(e) = endpoint {
        s.push_str(&format!("  controlPlane: {{endpoint: \"{e}\"}}\n"));
    }
    s.push_str(extra_spec);
    if !extra_spec.contains("packages:") {
        s.push_str("  packages: {source: preinstalled}\n");
    }
    s.push_str("  nodes:\n");
    for n in nodes {
        s.push_str(&n.yaml());
    }
    s
}

/// Installs one stand-in script `body` at `target` (mode 0755) on `node`.
pub fn install_standin(node: &TestNode, body: &str, target: &str) -> Result<()> {
    let (st, _, err) = node.exec(
        &format!("mkdir -p \"$(dirname {target})\" && cat > {target} && chmod 755 {target}"),
        body.as_bytes(),
    )?;
    if st != 0 {
        bail!("installing {target} on {}: {}", node.name, err.trim());
    }
    Ok(())
}

/// Installs the kubeadm, kubelet and kubectl stand-ins as `/usr/bin/{kubeadm,kubelet,kubectl}` and
/// starts the kubelet stand-in's unit, as `up`'s whole-system tests need them.
pub fn install_standins(node: &TestNode) -> Result<()> {
    install_standin(node, KUBEADM_STANDIN, "/usr/bin/kubeadm")?;
    install_standin(node, KUBELET_STANDIN, "/usr/bin/kubelet")?;
    install_standin(node, KUBECTL_STANDIN, "/usr/bin/kubectl")?;
    let (st, _, err) = node.exec(
        "cat > /etc/systemd/system/kubelet.service && systemctl daemon-reload && systemctl enable --now kubelet",
        KUBELET_UNIT.as_bytes(),
    )?;
    if st != 0 {
        bail!("kubelet stand-in unit on {}: {}", node.name, err.trim());
    }
    Ok(())
}

/// The stand-in calls recorded on `node` so far, one per line (empty when none).
pub fn standin_calls(node: &TestNode) -> Result<Vec<String>> {
    Ok(node
        .sh(&format!("cat {CALLS_LOG} 2>/dev/null || true"))?
        .lines()
        .map(str::to_string)
        .collect())
}

/// The recording API server (`crate::apiserver`) as the stand-ins reach it: bound on the test
/// network's gateway, with `url`, `ca.crt` and `token` written under `<store>/api/` (the shared
/// `/var/lib/clusterctl-standin` of the nodes), so the kubeadm stand-in's `admin.conf` points at it and
/// `up`'s API steps (labels, wait-ready) talk to it through the real `kube` client.
pub struct StandinApi {
    /// The server (its recorded requests, routes).
    pub server: crate::apiserver::ApiServer,
}

impl StandinApi {
    /// Starts the server on `gateway` and writes its files under `store/api/`. Errors: the server could
    /// not start or the files could not be written.
    pub fn start(gateway: &str, store: &Path) -> Result<StandinApi> {
        let ip: std::net::IpAddr = gateway
            .parse()
            .with_context(|| format!("gateway address {gateway}"))?;
        let server = crate::apiserver::ApiServer::start_on(ip)?;
        let dir = store.join("api");
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("url"), server.url())?;
        std::fs::write(dir.join("ca.crt"), server.ca_pem())?;
        std::fs::write(dir.join("token"), crate::apiserver::TEST_TOKEN)?;
        Ok(StandinApi { server })
    }

    /// A core/v1 Node as the API server returns it: Ready `True`, kubelet v1.34.1, the hostname label.
    pub fn node_object(name: &str) -> serde_json::Value {
        serde_json::json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": "1",
                         "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}},
            "spec": {"podCIDR": "10.244.0.0/24"},
            "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                       "message": "kubelet is posting ready status"}],
                       "nodeInfo": {"kubeletVersion": "v1.34.1"}}})
    }

    /// Serves the Ready Nodes `names` at `/api/v1/nodes` and each at `/api/v1/nodes/<name>` (which a
    /// PATCH is answered with).
    pub fn serve_nodes(&self, names: &[&str]) {
        let items: Vec<serde_json::Value> = names.iter().map(|n| Self::node_object(n)).collect();
        for (n, item) in names.iter().zip(&items) {
            self.server
                .serve(&format!("/api/v1/nodes/{n}"), item.clone());
        }
        self.server.serve(
            "/api/v1/nodes",
            serde_json::json!({"apiVersion": "v1", "kind": "NodeList",
                               "metadata": {"resourceVersion": "1"}, "items": items}),
        );
    }

    /// Serves at `/api/v1/pods` the static pods kubeadm runs on each control plane of `control_planes`
    /// (`etcd-<node>`, `kube-apiserver-<node>`, `kube-controller-manager-<node>`,
    /// `kube-scheduler-<node>` in kube-system), Running and Ready: what `wait-ready` waits for with
    /// `cni: none`, where Nodes stay NotReady.
    pub fn serve_control_plane_pods(&self, control_planes: &[&str]) {
        self.server
            .serve("/api/v1/pods", control_plane_pods(control_planes));
    }

    /// The bodies of the PATCHes of Node `name` received so far, in order.
    pub fn node_patches(&self, name: &str) -> Vec<serde_json::Value> {
        let path = format!("/api/v1/nodes/{name}");
        self.server
            .recorded()
            .into_iter()
            .filter(|r| r.method == "PATCH" && r.path == path)
            .map(|r| r.json())
            .collect()
    }
}

/// A one-file image made in the local Docker engine with `docker import` (no registry needed), removed
/// (`docker rmi -f`) on drop.
#[derive(Debug)]
pub struct LocalImage {
    /// The image reference, e.g. `clusterctl-test/app:t1`.
    pub name: String,
}

impl LocalImage {
    /// Imports an image named `name` holding `/hello.txt`, built from a rootfs under `dir`. Errors:
    /// tar or docker failed.
    pub fn import(dir: &Path, name: &str) -> Result<LocalImage> {
        let stem = name.replace([':', '/'], "-");
        let root = dir.join(format!("rootfs-{stem}"));
        std::fs::create_dir_all(&root)?;
        std::fs::write(root.join("hello.txt"), format!("image {name}\n"))?;
        let tar = dir.join(format!("{stem}.tar"));
        let st = Command::new("tar")
            .arg("-C")
            .arg(&root)
            .arg("-cf")
            .arg(&tar)
            .arg(".")
            .status()
            .context("tar")?;
        if !st.success() {
            bail!("tar of {} failed", root.display());
        }
        crate::docker::docker(&["import", &tar.to_string_lossy(), name])?;
        Ok(LocalImage {
            name: name.to_string(),
        })
    }
}

impl Drop for LocalImage {
    fn drop(&mut self) {
        let _ = crate::docker::docker(&["rmi", "-f", &self.name]);
    }
}

/// Node containers whose `/var/lib/clusterctl-standin` is one host directory (`store`), shared by the
/// stand-ins of every node and readable by the test. Fields drop in order: the containers first, then
/// the directory.
pub struct StandinCluster {
    /// The node containers.
    pub cluster: TestCluster,
    /// The host directory mounted as `/var/lib/clusterctl-standin` on every node.
    pub store: tempfile::TempDir,
}

impl StandinCluster {
    /// Starts `nodes` node containers named after `prefix` (boot timeout 120 s) with the shared store.
    /// Errors: the directory or a container cannot be made, or a node does not boot.
    pub fn start(prefix: &str, nodes: usize) -> Result<StandinCluster> {
        Self::start_booting_within(prefix, nodes, std::time::Duration::from_secs(120))
    }

    /// [`StandinCluster::start`] with each node given `boot_timeout` to boot and answer (many nodes
    /// booting at once on a small machine need more than 120 s).
    pub fn start_booting_within(
        prefix: &str,
        nodes: usize,
        boot_timeout: std::time::Duration,
    ) -> Result<StandinCluster> {
        let store = tempfile::tempdir().context("stand-in store")?;
        let cluster = TestCluster::start_with(ClusterOptions {
            prefix: prefix.into(),
            nodes,
            extra_run_args: vec![
                "-v".into(),
                format!("{}:/var/lib/clusterctl-standin", store.path().display()),
            ],
            boot_timeout,
            ..Default::default()
        })?;
        Ok(StandinCluster { cluster, store })
    }
}

/// Builds `<dir>/<name>_<version>_all.deb` with `dpkg-deb` (root-owned files): a package `name` at
/// `version` holding `/usr/share/<name>/marker` ("from the bundle"), with `postinst` as its
/// maintainer script when given (run by `dpkg -i` on the node). Returns the file name. Errors:
/// writing the tree or `dpkg-deb` failed.
pub fn build_deb(dir: &Path, name: &str, version: &str, postinst: Option<&str>) -> Result<String> {
    let root = dir.join(format!("debroot-{name}"));
    std::fs::create_dir_all(root.join("DEBIAN"))?;
    std::fs::create_dir_all(root.join(format!("usr/share/{name}")))?;
    std::fs::write(
        root.join("DEBIAN/control"),
        format!("Package: {name}\nVersion: {version}\nArchitecture: all\nMaintainer: clusterctl tests <tests@example.com>\nDescription: air-gap test package\n"),
    )?;
    if let Some(script) = postinst {
        let p = root.join("DEBIAN/postinst");
        std::fs::write(&p, script)?;
        let mut perm = std::fs::metadata(&p)?.permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
        std::fs::set_permissions(&p, perm)?;
    }
    std::fs::write(
        root.join(format!("usr/share/{name}/marker")),
        "from the bundle\n",
    )?;
    let file = format!("{name}_{version}_all.deb");
    let out = Command::new("dpkg-deb")
        .args(["--root-owner-group", "--build"])
        .arg(&root)
        .arg(dir.join(&file))
        .output()
        .context("dpkg-deb")?;
    if !out.status.success() {
        bail!("dpkg-deb: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(file)
}

/// Serves every upstream reference of `sources` (`host/repository:tag`, as `clusterctl airgap images`
/// lists them) from `reg`: one single-layer amd64 image per reference, built from random bytes
/// (seeded by `seed` and the position), pushed under the reference's repository and tag. Returns the
/// upstream hosts, to map to `reg` with a registry override when bundling. Errors: a reference without
/// host or tag, or a failed push.
pub fn serve_upstream_images(
    reg: &crate::registry::Registry,
    sources: &[String],
    seed: u64,
) -> Result<std::collections::BTreeSet<String>> {
    let mut hosts = std::collections::BTreeSet::new();
    for (i, s) in sources.iter().enumerate() {
        let (host, rest) = s
            .split_once('/')
            .with_context(|| format!("{s}: no registry host"))?;
        let (repo, tag) = rest
            .rsplit_once(':')
            .with_context(|| format!("{s}: no tag"))?;
        let mut rng = crate::registry::Rng(seed + i as u64);
        let l = crate::registry::layer(&mut rng, "payload.bin", 2048)?;
        reg.push(repo, tag, &crate::registry::image(&[l], "amd64", repo))?;
        hosts.insert(host.to_string());
    }
    Ok(hosts)
}

/// A core/v1 PodList of the static control-plane pods of `control_planes`, Running and Ready (see
/// [`StandinApi::serve_control_plane_pods`]).
pub fn control_plane_pods(control_planes: &[&str]) -> serde_json::Value {
    let items: Vec<serde_json::Value> = control_planes
        .iter()
        .flat_map(|n| {
            [
                "etcd",
                "kube-apiserver",
                "kube-controller-manager",
                "kube-scheduler",
            ]
            .map(|c| {
                serde_json::json!({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": format!("{c}-{n}"), "namespace": "kube-system"},
                    "spec": {"nodeName": n, "containers": [{"name": c, "image": c}]},
                    "status": {"phase": "Running",
                               "conditions": [{"type": "Ready", "status": "True"}]}})
            })
        })
        .collect();
    serde_json::json!({"apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": "1"},
                       "items": items})
}
