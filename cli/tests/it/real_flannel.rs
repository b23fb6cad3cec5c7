//! flannel for real (issue 13): `clusterctl up -f` a file with `cni.plugin: flannel`, 1 control plane +
//! 1 worker, on the real-cluster harness (`real_support`: unprivileged systemd node containers over
//! SSH, the upstream kubeadm, kubelet and kubectl v1.34.4, every image from the file's
//! `registry.mirror`). The upstream `kube-flannel.yml` of the pinned release (read by the test bed from
//! flannel's Go module; its sha256 is the pinned one) comes from a site mirror on loopback named in
//! `cni.sources`; its DaemonSet runs the images `scripts/k8s/images.sh` built: flanneld v0.28.4 built from
//! its Go module at `/opt/bin/flanneld`, and the flannel CNI plugin at `/flannel` (built from
//! containernetworking/plugins v0.9.1's `plugins/meta/flannel`, which flannel's cni-plugin was split
//! from — the module proxy does not serve flannel-io/cni-plugin), which delegates to the nodes' `bridge`
//! and `host-local` and chains `portmap`.
//!
//! Asserts: `up` converges; the manifest was fetched from the mirror; the DaemonSet's images are the
//! registry mirror's; one flannel pod Ready per node; the ConfigMap's `net-conf.json` is the rendered one
//! (podSubnet, VXLAN); on each node flannel's lease (`/run/flannel/subnet.env`) lies in the Node's
//! podCIDR, `flannel.1` is a VXLAN device (VNI 1, port 8472), flanneld's masquerade chain is in the
//! node's nat table (its `--ip-masq` through the image's iptables) and the builtin CNI is absent;
//! then the shared cluster checks with flannel's conflist and device (nodes Ready, CoreDNS, a web pod on
//! each node, pod-to-pod across nodes routed through `flannel.1` — HTTP and ping —, a ClusterIP Service
//! through kube-proxy, the Service name through CoreDNS); packets sent from one node's pod to the other
//! node's pod are counted out of the first node's `flannel.1` and into the second's; `status` finds
//! both nodes Ready and no stuck pod; a second `up` changes nothing. Then the file switches to the
//! builtin CNI (issue 13): `up` is refused by preflight's `cni-switch`, naming flannel's conflist and
//! `up --recreate`, and changes no node; `up --recreate` destroys the cluster — leaving none of
//! flannel's devices, chains or files on the nodes although the file no longer says flannel — and
//! builds it again with the builtin CNI as the only conflist. The checks of flannel at work
//! ([`check_flannel`]) and the site mirror ([`flannel_site`]) are shared with `airgap_flannel`.

use std::time::{Duration, Instant};

use clusterctl_testbed::aptrepo::FileServer;
use clusterctl_testbed::k8sbin::K8sBins;

use crate::real_cluster::{all_ready, check_cluster_over, pods_ready, Overlay};
use crate::real_support::{self, wait_for, FileOptions, Kube};

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

#[test]
fn flannel_carries_pod_traffic_across_nodes_for_real() {
    let Some(env) = real_support::available() else {
        return;
    };
    let Some(bins) =
        clusterctl_testbed::k8sbin::require_programs(real_support::VERSION, &["flannel-manifest"])
    else {
        return;
    };
    let t = Instant::now();
    let site = flannel_site(&bins);
    let c = real_support::start(
        "rfl",
        1,
        1,
        FileOptions {
            extra_spec: site.spec.clone(),
            ..Default::default()
        },
        &env,
    );
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
    check_flannel(&c, c.registry.addr());

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
    let names = c.node_names();

    // The file switched to the builtin CNI: `up` refuses in preflight, before changing any node,
    // naming flannel's conflist and `up --recreate`; nothing of the builtin CNI is placed.
    let flannel_file = std::fs::read_to_string(&c.file).expect("cluster file");
    let builtin_file: String = flannel_file
        .lines()
        .filter(|l| !l.starts_with("      sources:"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(
        &c.file,
        builtin_file.replace("      plugin: flannel\n", "      plugin: builtin\n"),
    )
    .expect("cluster file");
    let switch = c.clusterctl(&["up", "-f", &f]);
    let out = switch.all();
    assert_ne!(
        switch.code, 0,
        "a CNI switch in place must be refused:\n{out}"
    );
    let flat: String = out
        .chars()
        .filter(|c| !c.is_whitespace() && !matches!(c, '│' | '×' | '╰' | '─' | '├'))
        .collect();
    assert!(
        flat.contains("cni-switch")
            && flat.contains("/etc/cni/net.d/10-flannel.conflist")
            && flat.contains("clusterctlup--recreate"),
        "{out}"
    );
    for n in &names {
        assert_eq!(
            c.node_sh(
                n,
                "ls /etc/cni/net.d; systemctl is-enabled clusterctl-cni-agent 2>/dev/null || true"
            ),
            "10-flannel.conflist",
            "{n}: the refused up changed nothing"
        );
    }

    // destroy takes flannel's devices, chains and files off every node — here as `up --recreate`'s
    // first step, with the file already naming the builtin CNI (the node still has flannel's
    // conflist); the cluster comes back with the builtin CNI only.
    let recreate = c.clusterctl(&["up", "-f", &f, "--recreate"]);
    assert_eq!(recreate.code, 0, "up --recreate:\n{}", recreate.all());
    wait_for("every node Ready", Duration::from_secs(180), || {
        all_ready(&c)
    });
    for n in &names {
        let left = c.node_sh(n, FLANNEL_LEFT);
        assert!(
            left.is_empty(),
            "{n}: flannel left after --recreate:\n{left}"
        );
        assert_eq!(
            c.node_sh(n, "ls /etc/cni/net.d"),
            "10-clusterctl.conflist",
            "{n}"
        );
    }
    let d = c.clusterctl(&["destroy", "-f", &f, "--yes"]);
    assert_eq!(d.code, 0, "destroy:\n{}", d.all());
    eprintln!(
        "[real] flannel test done in {:.1}s",
        t.elapsed().as_secs_f64()
    );
}
