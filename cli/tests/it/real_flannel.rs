//! flannel for real (issue 13) and a cluster's lifecycle on it (issue 29 merged the two tests that each
//! built a cluster for this): `clusterctl up -f` a file with `cni.plugin: flannel`, 1 control plane +
//! 2 workers, on the real-cluster harness (`real_support`: unprivileged systemd node containers over
//! SSH, the upstream kubeadm, kubelet and kubectl v1.34.4, every image from the file's
//! `registry.mirror`). The upstream `kube-flannel.yml` of the pinned release (read by the test bed from
//! flannel's Go module; its sha256 is the pinned one) comes from a site mirror on loopback named in
//! `cni.sources`; its DaemonSet runs the images `scripts/k8s/images.sh` built: flanneld v0.28.4 built from
//! its Go module at `/opt/bin/flanneld`, and the flannel CNI plugin at `/flannel` (built from
//! containernetworking/plugins v0.9.1's `plugins/meta/flannel`, which flannel's cni-plugin was split
//! from — the module proxy does not serve flannel-io/cni-plugin), which delegates to the nodes' `bridge`
//! and `host-local` and chains `portmap`.
//!
//! Asserts: the first `up` (the control plane and the first worker, which has a label, a taint and
//! `images.preload`; the second worker not yet in the file) converges; the manifest was fetched from
//! the mirror; the DaemonSet's images are the registry mirror's; one flannel pod Ready per node; the
//! ConfigMap's `net-conf.json` is the rendered one (podSubnet, VXLAN); on each node flannel's lease
//! (`/run/flannel/subnet.env`) lies in the Node's podCIDR, `flannel.1` is a VXLAN device (VNI 1, port
//! 8472), flanneld's masquerade chain is in the node's nat table (its `--ip-masq` through the image's
//! iptables) and the builtin CNI is absent; then the shared cluster checks with flannel's conflist and
//! device (nodes Ready, CoreDNS, a web pod on each node, pod-to-pod across nodes routed through
//! `flannel.1` — HTTP and ping —, a ClusterIP Service through kube-proxy, the Service name through
//! CoreDNS); packets sent from one node's pod to the other node's pod are counted out of the first
//! node's `flannel.1` and into the second's; `status` finds both nodes Ready and no stuck pod; a second
//! `up` changes nothing. Then (`lifecycle`) `node join` of the second worker, added to the file:
//! flannel's pod Ready on it, the shared checks over flannel from its pod, the preloaded image there;
//! `node remove` of it: drained, the Node deleted, the node reset with none of flannel's leftovers.
//! Then the file switches to the builtin CNI (issue 13): `up` is refused by preflight's `cni-switch`,
//! naming flannel's conflist and `up --recreate`, and changes no node; `up --recreate` destroys the
//! cluster — leaving none of flannel's devices, chains or files on the nodes although the file no
//! longer says flannel — and builds it again with the builtin CNI as the only conflist, the same nodes,
//! the worker's label and taint and the preloaded image (removed by hand before) back. Last, `destroy`
//! leaves every node as it was before the first `up`. The checks of flannel at work ([`check_flannel`])
//! and the site mirror ([`flannel_site`]) are shared with `airgap_flannel`.

mod lifecycle;

use std::time::{Duration, Instant};

use clusterctl_testbed::aptrepo::FileServer;
use clusterctl_testbed::k8sbin::K8sBins;

use crate::real_cluster::{check_cluster_over, pods_ready, Overlay};
use crate::real_support::{self, wait_for, FileOptions, Kube, RealCluster, NOT_IN_FILE};
use lifecycle::NodeListings;

/// flannel's CNI configuration (written by its `install-cni` init container) and VXLAN device.
const FLANNEL: Overlay = Overlay {
    conflist: "10-flannel.conflist",
    device: "flannel.1",
};

/// The packet counter `stat` (`tx_packets`, `rx_packets`) of `flannel.1` on `node`.
fn counter(c: &dyn Kube, node: &str, stat: &str) -> u64 {
    let v = c.node_sh(
        node,
        &format!("cat /sys/class/net/flannel.1/statistics/{stat}"),
    );
    v.trim()
        .parse()
        .unwrap_or_else(|e| panic!("{node} {stat}: {v:?}: {e}"))
}

/// The pinned `kube-flannel.yml` on a site mirror on loopback, as a disconnected site serves it, and
/// the cluster file's `networking` lines naming it in `cni.sources` (podSubnet 10.244.0.0/16).
pub(crate) struct FlannelSite {
    /// The server of the site mirror.
    pub(crate) server: FileServer,
    /// The `networking:` lines for `FileOptions::extra_spec`.
    pub(crate) spec: String,
    _dir: tempfile::TempDir,
}

/// Serves the test bed's `kube-flannel.yml` (its sha256 is the pinned one) on loopback.
pub(crate) fn flannel_site(bins: &K8sBins) -> FlannelSite {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::copy(
        bins.path("flannel-manifest"),
        dir.path().join("kube-flannel.yml"),
    )
    .expect("kube-flannel.yml");
    let server = FileServer::start("127.0.0.1", dir.path()).expect("file server");
    let spec = format!(
        "  networking:\n    podSubnet: 10.244.0.0/16\n    cni:\n      plugin: flannel\n      sources: [{{name: kube-flannel.yml, url: \"{}/kube-flannel.yml\"}}]\n",
        server.url()
    );
    FlannelSite {
        server,
        spec,
        _dir: dir,
    }
}

/// flannel at work on a converged cluster whose flannel images are `<images>/flannel-io/…`: the
/// DaemonSet runs those images with one Ready pod per node, the ConfigMap holds the rendered
/// `net-conf.json`, each node's lease lies in its podCIDR with `flannel.1` a VXLAN device and flanneld's
/// masquerade chain in place and no builtin CNI; then the shared cluster checks over flannel and 5
/// pings counted out of the worker's `flannel.1` and into the control plane's (the file's first
/// node is the control plane, the second the worker).
pub(crate) fn check_flannel(c: &dyn Kube, images: &str) {
    let dsi = c.kubectl(
        "-n kube-flannel get ds kube-flannel-ds -o jsonpath='{.spec.template.spec.initContainers[*].image} {.spec.template.spec.containers[*].image}'",
    );
    assert_eq!(
        dsi,
        format!("{images}/flannel-io/flannel-cni-plugin:v1.9.1-flannel1 {images}/flannel-io/flannel:v0.28.4 {images}/flannel-io/flannel:v0.28.4"),
    );
    wait_for("flannel pods Ready", Duration::from_secs(120), || {
        pods_ready(c, "kube-flannel", "app=flannel", 2)
    });
    // The ConfigMap holds the rendered net-conf.json.
    let net_conf = c.kubectl(
        "-n kube-flannel get configmap kube-flannel-cfg -o jsonpath='{.data.net-conf\\.json}'",
    );
    let v: serde_json::Value = serde_json::from_str(&net_conf).expect("net-conf.json is JSON");
    assert_eq!(v["Network"], "10.244.0.0/16", "{net_conf}");
    assert_eq!(v["Backend"]["Type"], "vxlan", "{net_conf}");

    // flannel's lease on each node is the Node's podCIDR; flannel.1 is its VXLAN device; the builtin
    // CNI is not there.
    let names = c.node_names();
    for n in &names {
        let cidr = c.kubectl(&format!("get node {n} -o jsonpath='{{.spec.podCIDR}}'"));
        let prefix = cidr.rsplit_once(".0/").map(|(p, _)| p).unwrap_or(&cidr);
        let subnet_env = c.node_sh(n, "cat /run/flannel/subnet.env");
        assert!(
            subnet_env.contains("FLANNEL_NETWORK=10.244.0.0/16")
                && subnet_env.contains(&format!("FLANNEL_SUBNET={prefix}.1/24")),
            "{n} (podCIDR {cidr}): {subnet_env}"
        );
        let link = c.node_sh(n, "ip -d link show flannel.1");
        assert!(
            link.contains("vxlan id 1 ") && link.contains("dstport 8472"),
            "{n}: {link}"
        );
        // --ip-masq: flanneld ran the image's iptables (nf_tables, the node's backend) for its rules.
        let nat = c.node_sh(n, "iptables-save -t nat");
        assert!(
            nat.contains(
                "-A POSTROUTING -m comment --comment \"flanneld masq\" -j FLANNEL-POSTRTG"
            ),
            "{n}: {nat}"
        );
        let builtin = c.node_sh(
            n,
            "ip link show cc-vxlan >/dev/null 2>&1 && echo present || echo absent; ls /opt/cni/bin/clusterctl-cni 2>/dev/null || true",
        );
        assert_eq!(builtin, "absent", "{n}: no builtin CNI");
    }

    // Nodes Ready, CoreDNS, a web pod on each node, pod-to-pod across nodes through flannel.1, the
    // ClusterIP and the Service name.
    let (cp, worker) = (names[0].clone(), names[1].clone());
    check_cluster_over(c, &[worker.clone(), cp.clone()], &FLANNEL);

    // Counted through the VXLAN devices: 5 pings from the worker's pod to the control plane's pod
    // leave the worker's flannel.1 and arrive on the control plane's.
    let ip1 = c.kubectl("get pod web-1 -o jsonpath='{.status.podIP}'");
    let (tx0, rx0) = (
        counter(c, &worker, "tx_packets"),
        counter(c, &cp, "rx_packets"),
    );
    let ping = c.kubectl(&format!("exec web-0 -- ping -c 5 -W 2 {ip1}"));
    assert!(ping.contains("5 packets received"), "{ping}");
    let (tx1, rx1) = (
        counter(c, &worker, "tx_packets"),
        counter(c, &cp, "rx_packets"),
    );
    assert!(
        tx1 >= tx0 + 5 && rx1 >= rx0 + 5,
        "flannel.1 counters: {worker} tx {tx0} -> {tx1}, {cp} rx {rx0} -> {rx1}"
    );
}

/// What flannel leaves on a node that must be gone after `destroy`: devices, `FLANNEL-*` chains, its
/// conflist, plugin, lease and IPAM state (empty when none is left).
pub(crate) const FLANNEL_LEFT: &str =
    "ip -o link show | grep -E 'flannel|cni0'; iptables-save | grep FLANNEL; \
     ls -d /etc/cni/net.d/10-flannel.conflist /opt/cni/bin/flannel /run/flannel \
     /var/lib/cni/flannel /var/lib/cni/networks/cbr0 2>/dev/null; true";

/// The cluster file's node line of `name` at `address` with no more fields.
fn node_line(name: &str, address: &str) -> String {
    format!("    - {{name: {name}, role: worker, address: {address}}}")
}

/// Writes the cluster file for the first `up` — the first worker with a label and a taint, the second
/// worker left out — and returns the whole file (with the second worker).
fn first_file(c: &RealCluster) -> (String, String) {
    let (w1, w2) = (c.workers()[0].clone(), c.workers()[1].clone());
    let full = std::fs::read_to_string(&c.file).expect("file");
    let full = full.replace(
        &node_line(&w1.name, &w1.address),
        &format!(
            "    - {{name: {}, role: worker, address: {}, labels: {{disktype: ssd}}, taints: [{{key: dedicated, value: db, effect: NoSchedule}}]}}",
            w1.name, w1.address
        ),
    );
    let w2_line = format!("{}\n", node_line(&w2.name, &w2.address));
    assert!(full.contains(&w2_line), "{full}");
    let without_w2 = full.replace(&w2_line, "");
    std::fs::write(&c.file, &without_w2).expect("file");
    (full, without_w2)
}

/// The first `up` with flannel from the site mirror, flannel at work, `status` healthy, a second `up`
/// unchanged.
fn flannel_up(c: &RealCluster, site: &FlannelSite) {
    let t = Instant::now();
    let up = c.up(&[]);
    assert!(up.all().contains("converged"), "{}", up.all());
    eprintln!(
        "[real] flannel up converged after {:.1}s",
        t.elapsed().as_secs_f64()
    );
    assert!(
        site.server
            .requests()
            .iter()
            .any(|p| p == "/kube-flannel.yml"),
        "kube-flannel.yml fetched from cni.sources: {:?}",
        site.server.requests()
    );
    // The DaemonSet runs the mirror's images.
    check_flannel(c, c.registry.addr());

    // `status` finds the cluster healthy: both nodes Ready, no stuck pod (flannel's included).
    let f = c.file.to_string_lossy().into_owned();
    let status = c.clusterctl(&["status", "-f", &f]);
    let s = status.all();
    assert!(
        status.code == 0
            && s.contains("; 2 of 2 registered node(s) Ready")
            && s.contains("no stuck pods"),
        "status:\n{s}"
    );

    // A second `up` changes nothing.
    let again = c.up(&[]);
    assert!(
        again.all().contains("is up to date; nothing changed"),
        "{}",
        again.all()
    );
}

/// flannel's cluster from its first `up` to `destroy` (the module's doc says what each step asserts).
#[test]
fn flannel_cluster_join_remove_switch_recreate_destroy_for_real() {
    let Some(env) = real_support::available() else {
        return;
    };
    let Some(bins) =
        clusterctl_testbed::k8sbin::require_programs(real_support::VERSION, &["flannel-manifest"])
    else {
        return;
    };
    let t = Instant::now();
    real_support::busybox_in_docker(&env.1);
    let site = flannel_site(&bins);
    let mut c = real_support::start(
        "rfl",
        1,
        2,
        FileOptions {
            extra_spec: format!(
                "{}  images:\n    preload: [\"clusterctl.test/busybox:1\"]\n",
                site.spec
            ),
            ..Default::default()
        },
        &env,
    );
    let cp = c.first().clone();
    let (w1, w2) = (c.workers()[0].clone(), c.workers()[1].clone());
    let before = NodeListings::take(&c);
    let (full, without_w2) = first_file(&c);
    c.set_role(&w2.name, NOT_IN_FILE);
    flannel_up(&c, &site);
    let lap = |what: &str| eprintln!("[real] {what} after {:.1}s", t.elapsed().as_secs_f64());
    lap("flannel up, checks, status and second up");

    std::fs::write(&c.file, &full).expect("file");
    c.set_role(&w2.name, "worker");
    lifecycle::join_worker(&c, &w2, &cp);
    lifecycle::remove_worker(&c, &w2);
    std::fs::write(&c.file, &without_w2).expect("file");
    c.set_role(&w2.name, NOT_IN_FILE);
    lap("node join and node remove on flannel");

    lifecycle::switch_refused(&c);
    lifecycle::recreate_builtin(&c, &cp, &w1, &w2);
    lap("switch refused, recreate with the builtin CNI");

    before.destroy_leaves_nodes_as_before(&c);
    lap("flannel lifecycle test done");
}
