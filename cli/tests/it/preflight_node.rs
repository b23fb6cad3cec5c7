//! Preflight on a real node container reached over SSH (issue 15 items 6 and 7):
//!
//! * a control plane whose `controlPlane.vip.interface` does not exist on it: `up` stops in preflight
//!   with the `vip-interface` error naming the node, the missing interface and the interfaces it has;
//!   the node's own `vipInterface` (the file may give it per node) makes the check pass;
//! * containerd's and CRI-O's CRI sockets both present (a listening Unix socket made at CRI-O's path):
//!   the `cri-sockets` warning names CRI-O and the file's runtime, and the `files` phase writes
//!   `/etc/crictl.yaml` for containerd, the file's runtime;
//! * the builtin CNI's conflist on the node and `cni.plugin: flannel` in the file (issue 13): `up` stops
//!   in preflight with `cni-switch` naming the file and `up --recreate`; the builtin file passes.

use clusterctl_testbed::cli::{install_standins, ssh_cluster_yaml, Clusterctl, FileNode, Run};
use clusterctl_testbed::docker::{docker_available, TestCluster, TestNode};
use clusterctl_testbed::{is_root, require};

fn exec(n: &TestNode, script: &str) -> String {
    let (st, out, err) = n.exec(script, b"").expect("exec");
    assert_eq!(st, 0, "{script} on {}: {err}", n.name);
    out
}

/// `clusterctl up -f cluster.yaml --known-hosts KH --only PHASES --ignore-preflight` the two checks a
/// node container cannot pass (its environment, its resolv.conf).
fn up_only(cli: &Clusterctl, kh: &str, phases: &str) -> Run {
    cli.run(&[
        "up",
        "-f",
        "cluster.yaml",
        "--known-hosts",
        kh,
        "--only",
        phases,
        "--ignore-preflight",
        "node-environment,resolv-conf",
    ])
    .expect("up")
}

/// A listening Unix socket at CRI-O's path (the file stays a socket after the listener is gone), and
/// containerd's own socket (the node image runs containerd).
const TWO_RUNTIMES: &str = "set -e; mkdir -p /run/crio; \
    perl -MIO::Socket::UNIX -e 'IO::Socket::UNIX->new(Local => \"/run/crio/crio.sock\", Listen => 1) or die \"$!\"'; \
    systemctl start containerd; for i in $(seq 1 50); do [ -S /run/containerd/containerd.sock ] && break; sleep 0.2; done; \
    [ -S /run/crio/crio.sock ] && [ -S /run/containerd/containerd.sock ]";

#[test]
fn preflight_names_the_node_without_its_vip_interface_and_warns_of_a_second_runtime() {
    if !require(
        "docker and root for node containers",
        docker_available() && is_root(),
    ) {
        return;
    }
    let tc = TestCluster::start("pfvip", 1).expect("node container");
    let n = &tc.nodes[0];
    install_standins(n).expect("stand-ins");
    exec(n, TWO_RUNTIMES);
    let vip = format!(
        "{}.251",
        tc.gateway
            .rsplit_once('.')
            .map(|(a, _)| a)
            .unwrap_or("172.30.0")
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let mut node = FileNode::control_plane(n);
    node.address.push_str("/16");
    let extra = format!("  controlPlane:\n    vip: {{address: {vip}, interface: ens9}}\n");
    let file = ssh_cluster_yaml("pfvip", &n.key_file, "builtin", None, &extra, &[node]);
    std::fs::write(dir.path().join("cluster.yaml"), &file).expect("cluster file");
    let cli = Clusterctl::new(env!("CARGO_BIN_EXE_clusterctl"), dir.path());
    let kh = n.known_hosts.to_string_lossy().into_owned();
    let r = up_only(&cli, &kh, "preflight");
    let out = r.all();
    assert_ne!(r.code, 0, "preflight must stop up:\n{out}");
    for want in [
        n.name.as_str(),
        "vip-interface",
        "has no interface `ens9`",
        "eth0 (up)",
        "lo (up)",
        "cri-sockets",
        "CRI-O at /run/crio/crio.sock",
        "unix:///run/containerd/containerd.sock",
    ] {
        assert!(out.contains(want), "{want:?} missing in:\n{out}");
    }
    assert_eq!(
        exec(n, "[ -e /etc/crictl.yaml ] && echo present || echo absent").trim(),
        "absent",
        "preflight changed the node"
    );

    // The node's own vipInterface: preflight passes (the warning stays), files writes crictl.yaml.
    std::fs::write(
        dir.path().join("cluster.yaml"),
        file.replace(
            "      role: control-plane\n",
            "      role: control-plane\n      vipInterface: eth0\n",
        ),
    )
    .expect("cluster file");
    let r = up_only(&cli, &kh, "preflight,files");
    let out = r.all();
    assert_eq!(r.code, 0, "{out}");
    assert!(!out.contains("has no interface"), "{out}");
    assert!(out.contains("CRI-O at /run/crio/crio.sock"), "{out}");
    let crictl = exec(n, "cat /etc/crictl.yaml");
    assert!(
        crictl.contains("runtime-endpoint: unix:///run/containerd/containerd.sock")
            && crictl.contains("image-endpoint: unix:///run/containerd/containerd.sock")
            && !crictl.contains("crio"),
        "{crictl}"
    );

    // The node carries the builtin CNI's conflist (as a builtin cluster's nodes do) and the file now
    // says flannel: preflight refuses the switch, naming the file and `up --recreate`; with the
    // builtin CNI again it passes.
    exec(
        n,
        "mkdir -p /etc/cni/net.d && echo '{\"cniVersion\":\"1.1.0\",\"name\":\"clusterctl\",\"plugins\":[]}' > /etc/cni/net.d/10-clusterctl.conflist",
    );
    let fixed = file.replace(
        "      role: control-plane\n",
        "      role: control-plane\n      vipInterface: eth0\n",
    );
    std::fs::write(
        dir.path().join("cluster.yaml"),
        fixed.replace("cni: {plugin: builtin}", "cni: {plugin: flannel}"),
    )
    .expect("cluster file");
    let r = up_only(&cli, &kh, "preflight");
    let out = r.all();
    assert_ne!(r.code, 0, "a CNI switch must stop up:\n{out}");
    // Compared without whitespace: the report may wrap long lines.
    let flat = |s: &str| -> String {
        s.chars()
            .filter(|c| !c.is_whitespace() && !matches!(c, '│' | '×' | '╰' | '─' | '├'))
            .collect()
    };
    for want in [
        "cni-switch",
        "/etc/cni/net.d/10-clusterctl.conflist is the configuration of the builtin CNI",
        "the file says cni.plugin: flannel",
        "clusterctl up --recreate",
    ] {
        assert!(
            flat(&out).contains(&flat(want)),
            "{want:?} missing in:\n{out}"
        );
    }
    std::fs::write(dir.path().join("cluster.yaml"), &fixed).expect("cluster file");
    let r = up_only(&cli, &kh, "preflight");
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(!r.all().contains("cni-switch"), "{}", r.all());
}
