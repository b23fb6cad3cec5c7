//! Shared set-up of the real-cluster tests (`real_*`): node containers made from the test bed's
//! [`K8sNodeImage`] (the upstream kubeadm, kubelet, kubectl and crictl of [`VERSION`], built from their Go
//! modules), the version's images served read-only by a registry on the test network's gateway (the
//! cluster file's `registry.mirror`, with the test's CA), the kubelet's resolver file, and a cluster file
//! with `nodeEnvironment: unprivileged-container`. Checks run the real `kubectl` on the first control
//! plane through `docker exec` (independent of the code under test).
#![allow(dead_code)]

pub(crate) mod conformance;
pub(crate) mod encryption;
pub(crate) mod lab;
pub(crate) mod vip;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clusterctl_testbed::cli::{Clusterctl, Run};
use clusterctl_testbed::docker::{docker_available, ClusterOptions, TestCluster, TestNode};
use clusterctl_testbed::k8snode::{prepare_resolver, ImageStore, K8sNodeImage, RESOLV_CONF};
use clusterctl_testbed::registry::Registry;

/// The Kubernetes version the real-cluster tests run.
pub(crate) const VERSION: &str = "v1.34.4";
/// The kube-vip image built by `scripts/k8s/images.sh` (the file's default, v1.0.1, is not built).
pub(crate) const KUBE_VIP_IMAGE: &str = "ghcr.io/kube-vip/kube-vip:v1.0.0";
/// The workload image of `scripts/k8s/images.sh` (Debian's busybox-static), as pushed to the registry.
pub(crate) const BUSYBOX: &str = "busybox:1";

/// Everything a real-cluster test needs; dropped in field order (nodes, then the registry, then files).
pub(crate) struct RealCluster {
    /// The node containers.
    pub(crate) nodes: TestCluster,
    /// The registry serving the images on the test network's gateway.
    pub(crate) registry: Registry,
    /// The clusterctl binary in its own `HOME`.
    pub(crate) cc: Clusterctl,
    /// The cluster file.
    pub(crate) file: PathBuf,
    /// The cluster's name (unique per run).
    pub(crate) name: String,
    /// The VIP, when the cluster has one.
    pub(crate) vip: Option<String>,
    /// `vip.loadBalancerPool.range`, when the file has one ([`FileOptions::lb_pool`]).
    pub(crate) lb_range: Option<String>,
    /// `(name, role)` of each node container, in order ([`NOT_IN_FILE`] for one the file does not list).
    pub(crate) roles: Vec<(String, &'static str)>,
    _dir: tempfile::TempDir,
}

/// The real node image and the image store its clusters pull from ([`available`], [`start`]).
pub(crate) type RealEnv = (K8sNodeImage, ImageStore);

/// When the test bed can run real clusters: root, Docker, the registry and skopeo, and the upstream
/// programs and images (built when missing: minutes cold). `None` after a `SKIP:` line outside CI
/// (a failure in CI).
pub(crate) fn available() -> Option<RealEnv> {
    if !clusterctl_testbed::require(
        "root, Docker, docker-registry and skopeo (real clusters)",
        clusterctl_testbed::is_root()
            && docker_available()
            && clusterctl_testbed::registry::available()
            && std::path::Path::new("/usr/bin/skopeo").exists(),
    ) {
        return None;
    }
    let image = match K8sNodeImage::ensure(VERSION) {
        Ok(i) => i,
        Err(e) => {
            clusterctl_testbed::require(&format!("the real node image: {e:#}"), false);
            return None;
        }
    };
    let store = match ImageStore::ensure(VERSION) {
        Ok(s) => s,
        Err(e) => {
            clusterctl_testbed::require(&format!("the {VERSION} images: {e:#}"), false);
            return None;
        }
    };
    Some((image, store))
}

/// Puts the workload image (`clusterctl.test/busybox:1`, from the OCI layout `scripts/k8s/images.sh`
/// wrote) into the local Docker engine, where `images.preload` takes images from (`docker save`, as
/// `kind load docker-image`). The same name and content on every run, so it is left there.
pub(crate) fn busybox_in_docker(store: &ImageStore) {
    image_in_docker(store, "clusterctl.test/busybox:1");
}

/// Puts the image `reference` of `scripts/k8s/images.sh` (its OCI layout) into the local Docker engine
/// under that name (skopeo). The same name and content on every run, so it is left there.
pub(crate) fn image_in_docker(store: &ImageStore, reference: &str) {
    let list = clusterctl_testbed::k8snode::cache_root()
        .join("images")
        .join(&store.version)
        .join("images.txt");
    let text = std::fs::read_to_string(&list).expect("images.txt");
    let layout = text
        .lines()
        .find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some(reference)).then(|| w.next().map(str::to_string))?
        })
        .unwrap_or_else(|| panic!("no {reference} in {}", list.display()));
    let out = std::process::Command::new("skopeo")
        .args([
            "copy",
            "--quiet",
            &format!("oci:{layout}"),
            &format!("docker-daemon:{reference}"),
        ])
        .output()
        .expect("skopeo");
    assert!(
        out.status.success(),
        "skopeo copy of {reference} into Docker: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The role in [`RealCluster::roles`] of a node container the cluster file does not list (now): a
/// spare to join later, or a node removed. Not among [`Kube::node_names`], the workers or the control
/// planes.
pub(crate) const NOT_IN_FILE: &str = "not in the file";

/// What a test cluster file holds besides its nodes.
#[derive(Debug, Clone, Default)]
pub(crate) struct FileOptions {
    /// Put a kube-vip VIP (ARP, eth0) in front of the control planes.
    pub(crate) vip: bool,
    /// Extra lines under `spec:` (indented two spaces).
    pub(crate) extra_spec: String,
    /// With `vip`: LoadBalancer Services from kube-vip (`loadBalancerServices: true`) with a pool
    /// ([`vip::pool_range`]) and `vip.subnet` the test network's, so the pool is checked against it.
    pub(crate) lb_pool: bool,
}

/// Starts `control_planes` + `workers` node containers, serves the images on their network's gateway
/// and writes the cluster file. Panics on failure (tests only).
pub(crate) fn start(
    prefix: &str,
    control_planes: usize,
    workers: usize,
    opts: FileOptions,
    (image, store): &RealEnv,
) -> RealCluster {
    let t = Instant::now();
    let nodes = TestCluster::start_with(ClusterOptions {
        prefix: prefix.into(),
        nodes: control_planes + workers,
        image: Some(image.tag.clone()),
        boot_timeout: Duration::from_secs(180),
        extra_run_args: Vec::new(),
    })
    .expect("node containers");
    let (registry, ca) = store
        .serve(&nodes.gateway)
        .expect("registry on the gateway");
    prepare_resolver(&nodes.nodes, &nodes.gateway).expect("resolver files");
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("mirror-ca.crt"), &ca.ca_pem).expect("ca");
    let name = nodes.network.clone();
    let roles: Vec<(String, &'static str)> = nodes
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let role = if i < control_planes {
                "control-plane"
            } else {
                "worker"
            };
            (n.name.clone(), role)
        })
        .collect();
    let vip = opts.vip.then(|| free_address(&nodes.nodes[0].address));
    let lb = (opts.vip && opts.lb_pool).then(|| vip::pool(&nodes));
    let file = dir.path().join("cluster.yaml");
    std::fs::write(
        &file,
        cluster_yaml(
            &name,
            &nodes,
            &roles,
            vip.as_deref(),
            registry.addr(),
            &opts.extra_spec,
        )
        .replace(
            &format!("image: \"{KUBE_VIP_IMAGE}\"}}"),
            &format!(
                "image: \"{KUBE_VIP_IMAGE}\"{}}}",
                lb.as_ref().map(|l| l.vip_fields.as_str()).unwrap_or("")
            ),
        ),
    )
    .expect("cluster file");
    eprintln!(
        "[real] {} nodes and the registry {} ready in {:.1}s",
        roles.len(),
        registry.addr(),
        t.elapsed().as_secs_f64()
    );
    let cc = own_clusterctl(dir.path());
    RealCluster {
        nodes,
        registry,
        cc,
        file,
        name,
        vip,
        lb_range: lb.map(|l| l.range),
        roles,
        _dir: dir,
    }
}

/// The clusterctl binary copied into `dir`, run from there in `dir` as `HOME`: `up` installs the
/// binary it runs as on the nodes (the CNI agent), so a copy keeps a rebuild of the shared target
/// directory during a long test from showing up as a change on the next `up`.
pub(crate) fn own_clusterctl(dir: &std::path::Path) -> Clusterctl {
    let bin = dir.join("clusterctl");
    std::fs::copy(env!("CARGO_BIN_EXE_clusterctl"), &bin).expect("copying the clusterctl binary");
    Clusterctl::new(bin, dir)
}

/// An address of the node's /16../24 network that Docker does not hand out early: `.250` of its /24.
fn free_address(node: &str) -> String {
    let mut o: Vec<&str> = node.split('.').collect();
    o[3] = "250";
    o.join(".")
}

/// The cluster file: the version, `nodeEnvironment: unprivileged-container`, the registry as the
/// mirror (with its CA), the kubelet's resolver file, SSH as root with the test key (strict host keys),
/// `packages.source: preinstalled` (the node image carries the programs, placed by the test bed),
/// the builtin CNI and containerd (defaults), the VIP when given, then the nodes. The kubelet's hard
/// eviction thresholds are absolute and small: every node container sees the shared host's disk, which
/// a build machine keeps over 90 % full (the kubelet's default `nodefs.available<10%` evicts every pod
/// there with "The node was low on resource: ephemeral-storage").
pub(crate) fn cluster_yaml(
    name: &str,
    nodes: &TestCluster,
    roles: &[(String, &'static str)],
    vip: Option<&str>,
    mirror: &str,
    extra_spec: &str,
) -> String {
    let mut s = format!(
        "apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata: {{name: {name}}}\nspec:\n  kubernetesVersion: {VERSION}\n  provider: ssh\n  nodeEnvironment: unprivileged-container\n  registry: {{mirror: \"{mirror}\", caFile: mirror-ca.crt}}\n  kubelet: {{resolvConf: {RESOLV_CONF}, evictionHard: {{memory.available: 100Mi, nodefs.available: 1Gi, nodefs.inodesFree: 1%, imagefs.available: 1Gi}}}}\n  ssh: {{user: root, keyFile: {}, port: 22, hostKeyPolicy: strict}}\n  packages: {{source: preinstalled}}\n",
        nodes.key.private.display()
    );
    if let Some(v) = vip {
        s.push_str(&format!(
            "  controlPlane:\n    vip: {{address: {v}, interface: eth0, image: \"{KUBE_VIP_IMAGE}\"}}\n"
        ));
    }
    s.push_str(extra_spec);
    s.push_str("  nodes:\n");
    for ((name, role), n) in roles.iter().zip(&nodes.nodes) {
        s.push_str(&format!(
            "    - {{name: {name}, role: {role}, address: {}}}\n",
            n.address
        ));
    }
    s
}

impl RealCluster {
    /// The node container named `name`.
    pub(crate) fn node(&self, name: &str) -> &TestNode {
        self.nodes
            .nodes
            .iter()
            .find(|n| n.name == name)
            .unwrap_or_else(|| panic!("no node {name}"))
    }

    /// The first control plane's container.
    pub(crate) fn first(&self) -> &TestNode {
        &self.nodes.nodes[0]
    }

    /// Sets the role of the node container `name` in [`RealCluster::roles`] (e.g. [`NOT_IN_FILE`] when
    /// its line leaves the file, its role again when the line comes back). Panics on an unknown name.
    pub(crate) fn set_role(&mut self, name: &str, role: &'static str) {
        let r = self
            .roles
            .iter_mut()
            .find(|(n, _)| n == name)
            .expect("a node");
        r.1 = role;
    }

    /// The workers' containers.
    pub(crate) fn workers(&self) -> Vec<&TestNode> {
        self.roles
            .iter()
            .zip(&self.nodes.nodes)
            .filter(|((_, r), _)| *r == "worker")
            .map(|(_, n)| n)
            .collect()
    }

    /// The control planes' containers.
    pub(crate) fn control_planes(&self) -> Vec<&TestNode> {
        self.roles
            .iter()
            .zip(&self.nodes.nodes)
            .filter(|((_, r), _)| *r == "control-plane")
            .map(|(_, n)| n)
            .collect()
    }

    /// `clusterctl ARGS` with `--known-hosts` appended where the command takes it (`up`, `status`,
    /// `destroy`, `node …`, `upgrade`). Prints how long it took.
    pub(crate) fn clusterctl(&self, args: &[&str]) -> Run {
        let kh = self.nodes.dir().join("known_hosts");
        let mut all: Vec<&str> = args.to_vec();
        let kh = kh.to_string_lossy().into_owned();
        all.extend(["--known-hosts", kh.as_str()]);
        let t = Instant::now();
        let r = self.cc.run(&all).expect("clusterctl runs");
        eprintln!(
            "[real] clusterctl {} -> {} in {:.1}s",
            args.join(" "),
            r.code,
            t.elapsed().as_secs_f64()
        );
        r
    }

    /// `clusterctl up -f FILE` (plus `extra`), asserting success.
    pub(crate) fn up(&self, extra: &[&str]) -> Run {
        let f = self.file.to_string_lossy().into_owned();
        let mut args = vec!["up", "-f", f.as_str()];
        args.extend(extra);
        let r = self.clusterctl(&args);
        assert_eq!(r.code, 0, "up failed:\n{}", r.all());
        r
    }

    /// Rewrites the cluster file for an air-gapped site: no registry mirror (the images come from the
    /// bundle into each node's runtime), `airgap.bundle: site.tar` (beside the file) and `extra`
    /// (lines under `spec:`, indented two spaces). Returns the bundle's path.
    pub(crate) fn air_gapped_file(&self, extra: &str) -> PathBuf {
        let text = std::fs::read_to_string(&self.file).expect("cluster file");
        let text: String = text
            .lines()
            .filter(|l| !l.starts_with("  registry:"))
            .map(|l| format!("{l}\n"))
            .collect();
        let text = text.replace(
            "  nodes:\n",
            &format!("{extra}  airgap:\n    bundle: site.tar\n  nodes:\n"),
        );
        std::fs::write(&self.file, &text).expect("cluster file");
        self.file.parent().expect("dir").join("site.tar")
    }

    /// The real `kubectl` on the first control plane with its admin kubeconfig.
    pub(crate) fn kubectl(&self, args: &str) -> String {
        self.kubectl_on(self.first(), args)
    }

    /// The real `kubectl` on `node` with `/etc/kubernetes/admin.conf`.
    pub(crate) fn kubectl_on(&self, node: &TestNode, args: &str) -> String {
        node.sh(&format!(
            "kubectl --kubeconfig /etc/kubernetes/admin.conf {args}"
        ))
        .unwrap_or_else(|e| panic!("kubectl {args}: {e:#}"))
    }

    /// `kubectl apply -f -` of `yaml` on the first control plane.
    pub(crate) fn apply(&self, yaml: &str) {
        let (st, out, err) = self
            .first()
            .exec(
                "kubectl --kubeconfig /etc/kubernetes/admin.conf apply -f -",
                yaml.as_bytes(),
            )
            .expect("kubectl apply");
        assert_eq!(st, 0, "kubectl apply: {out}{err}");
    }

    /// The mirror reference of the workload image.
    pub(crate) fn busybox(&self) -> String {
        format!("{}/{BUSYBOX}", self.registry.addr())
    }

    /// etcd's members as the first control plane's etcd reports them (names).
    pub(crate) fn etcd_members(&self) -> Vec<String> {
        let cp = &self.roles[0].0;
        let out = self.kubectl(&format!(
            "-n kube-system exec etcd-{cp} -- etcdctl --endpoints https://127.0.0.1:2379 \
             --cacert /etc/kubernetes/pki/etcd/ca.crt --cert /etc/kubernetes/pki/etcd/server.crt \
             --key /etc/kubernetes/pki/etcd/server.key member list -w simple"
        ));
        let mut names: Vec<String> = out
            .lines()
            .filter_map(|l| l.split(", ").nth(2).map(str::to_string))
            .collect();
        names.sort();
        names
    }
}

/// What the cluster checks need of a real cluster, whatever made its nodes: the real `kubectl` on the
/// first control plane, a shell on each node by its Kubernetes name, the workload image's reference.
pub(crate) trait Kube {
    /// The real `kubectl` with the first control plane's admin kubeconfig; panics on failure.
    fn kubectl(&self, args: &str) -> String;
    /// `kubectl apply -f -` of `yaml`; panics on failure.
    fn apply(&self, yaml: &str);
    /// Runs `script` on the node named `node` (its Kubernetes name); panics on failure.
    fn node_sh(&self, node: &str, script: &str) -> String;
    /// The Kubernetes names of every node of the cluster file.
    fn node_names(&self) -> Vec<String>;
    /// The reference pods use for the workload image.
    fn workload_image(&self) -> String;
    /// The VIP, when the cluster has one.
    fn vip(&self) -> Option<String>;
}

impl Kube for RealCluster {
    fn kubectl(&self, args: &str) -> String {
        RealCluster::kubectl(self, args)
    }
    fn apply(&self, yaml: &str) {
        RealCluster::apply(self, yaml)
    }
    fn node_sh(&self, node: &str, script: &str) -> String {
        self.node(node)
            .sh(script)
            .unwrap_or_else(|e| panic!("{node}: {script}: {e:#}"))
    }
    fn node_names(&self) -> Vec<String> {
        self.roles
            .iter()
            .filter(|(_, r)| *r != NOT_IN_FILE)
            .map(|(n, _)| n.clone())
            .collect()
    }
    fn workload_image(&self) -> String {
        self.busybox()
    }
    fn vip(&self) -> Option<String> {
        self.vip.clone()
    }
}

/// `clusterctl airgap bundle -f FILE --no-self` with every registry host of `hosts` served by `source`
/// (`--source-registry-override HOST=<source>` each), asserting success.
pub(crate) fn airgap_bundle(cc: &Clusterctl, file: &str, source: &Registry, hosts: &[&str]) {
    let overrides: Vec<String> = hosts
        .iter()
        .flat_map(|h| {
            [
                "--source-registry-override".to_string(),
                format!("{h}={}", source.addr()),
            ]
        })
        .collect();
    let mut args = vec!["airgap", "bundle", "-f", file, "--no-self"];
    args.extend(overrides.iter().map(String::as_str));
    let bundle = cc.run(&args).expect("airgap bundle");
    assert_eq!(bundle.code, 0, "airgap bundle:\n{}", bundle.all());
}

/// Polls `check` every second until it returns `Ok`, or panics with its last error after `timeout`.
pub(crate) fn wait_for<T>(
    what: &str,
    timeout: Duration,
    mut check: impl FnMut() -> Result<T, String>,
) -> T {
    let t = Instant::now();
    let mut last = String::new();
    while t.elapsed() < timeout {
        match check() {
            Ok(v) => {
                eprintln!("[real] {what}: after {:.1}s", t.elapsed().as_secs_f64());
                return v;
            }
            Err(e) => last = e,
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    panic!("{what}: not within {timeout:?}: {last}");
}
