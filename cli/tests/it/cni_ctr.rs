//! A real runtime invokes the plugin: containerd's `ctr run --cni` inside two systemd node containers
//! (`clusterctl_testbed::docker`, the locally built node image; no image is pulled). Each node gets
//! the built binary as `/usr/local/bin/clusterctl` and `/opt/cni/bin/clusterctl-cni`, Debian's
//! `portmap` beside it, and the builtin CNI's rendered files (agent settings, conflist template,
//! systemd unit) with a static peers file; systemd runs the agent from the rendered unit. A container
//! per node is started by `ctr run --cni` on a busybox rootfs (Debian's `busybox-static`): each gets
//! an address from its node's podCIDR, and they ping each other across the VXLAN. A short-lived third
//! container shows containerd's DEL releasing the address and removing the host end. The masquerade
//! rule is in the agent's nftables table (the node image has `nft`; the iptables fallback is
//! `cni/tests/it/masq.rs`'s).

use crate::cni_support;

use clusterctl_testbed::docker::{docker, docker_available, TestCluster, TestNode};
use cni_support::rendered_builtin;
use std::net::Ipv4Addr;
use std::path::Path;
use std::time::{Duration, Instant};

const BUSYBOX: &str = "/bin/busybox";

fn sh(n: &TestNode, script: &str) -> String {
    n.sh(script).unwrap_or_else(|e| panic!("{}: {e:#}", n.name))
}

fn put(n: &TestNode, path: &str, text: &str) {
    let dir = Path::new(path)
        .parent()
        .map(|d| d.display().to_string())
        .unwrap_or_else(|| "/".into());
    let (st, _, err) = n
        .exec(
            &format!("mkdir -p '{dir}' && cat > '{path}'"),
            text.as_bytes(),
        )
        .expect("docker exec");
    assert_eq!(st, 0, "writing {path} on {}: {err}", n.name);
}

/// Polls `script` on `n` until it exits 0, at most `secs` seconds; returns its last output.
fn wait_for(n: &TestNode, script: &str, secs: u64) -> Result<String, String> {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        match n.exec(script, b"") {
            Ok((0, out, _)) => return Ok(out),
            Ok((_, out, err)) if Instant::now() >= end => return Err(format!("{out}{err}")),
            Err(e) if Instant::now() >= end => return Err(format!("{e:#}")),
            _ => std::thread::sleep(Duration::from_millis(300)),
        }
    }
}

/// The pod's eth0 address, read inside the container through `ctr task exec`.
fn pod_ip(n: &TestNode, id: &str) -> Ipv4Addr {
    let out = sh(
        n,
        &format!("ctr task exec --exec-id ip-{id} {id} {BUSYBOX} ip -4 -o addr show eth0"),
    );
    let inet = out
        .split_whitespace()
        .skip_while(|w| *w != "inet")
        .nth(1)
        .unwrap_or_else(|| panic!("no inet address in {out:?}"));
    inet.split('/')
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("bad address {inet}"))
}

fn host_ends(n: &TestNode) -> usize {
    sh(n, "ip -o link show")
        .lines()
        .filter(|l| {
            l.split(": ")
                .nth(1)
                .and_then(|s| s.split('@').next())
                .is_some_and(|name| name.starts_with("cc") && name.len() == 15)
        })
        .count()
}

#[test]
fn ctr_run_cni_across_two_node_containers() {
    if !clusterctl_testbed::require(
        "root and a Docker engine (scripts/services/docker.sh)",
        clusterctl_testbed::is_root() && docker_available(),
    ) || !clusterctl_testbed::require(
        "busybox-static (/bin/busybox, scripts/packages/cni.list)",
        Path::new(BUSYBOX).is_file(),
    ) {
        return;
    }
    let cluster = TestCluster::start("cnic", 2).expect("node containers");
    let nodes = &cluster.nodes;
    let names: Vec<(&str, Ipv4Addr)> = nodes
        .iter()
        .map(|n| {
            let a: Ipv4Addr = n.address.parse().expect("node address");
            (n.name.as_str(), a)
        })
        .collect();
    let rendered = rendered_builtin(&names);
    let cidrs = ["10.244.1.0/24", "10.244.2.0/24"];
    let peers: String = names
        .iter()
        .zip(cidrs)
        .map(|((n, a), c)| format!("{n} {a} {c}\n"))
        .collect();
    let bin = env!("CARGO_BIN_EXE_clusterctl");

    for (i, n) in nodes.iter().enumerate() {
        // Not under a tmpfs: `docker cp` into one does not land (TESTBED.md).
        docker(&["cp", bin, &format!("{}:/usr/local/bin/clusterctl", n.name)]).expect("cp binary");
        // Docker mounts /proc/sys read-only in unprivileged containers; on a bare node (and in a
        // privileged kind node) it is writable, and the plugin sets proxy_arp, proxy_delay and
        // ip_forward there.
        sh(
            n,
            "mount -o remount,rw /proc/sys && mkdir -p /root/rootfs/bin /opt/cni/bin",
        );
        docker(&[
            "cp",
            BUSYBOX,
            &format!("{}:/root/rootfs/bin/busybox", n.name),
        ])
        .expect("cp busybox");
        sh(
            n,
            "install -m 0755 /usr/local/bin/clusterctl /opt/cni/bin/clusterctl-cni && \
             install -m 0755 /usr/lib/cni/portmap /opt/cni/bin/portmap",
        );
        let mut cfg = rendered.agents[i].clone();
        cfg.peers_file = Some("/etc/clusterctl/cni/peers".into());
        put(n, "/etc/clusterctl/cni/peers", &peers);
        put(
            n,
            clusterctl_render::cni::builtin::AGENT_CONFIG_PATH,
            &serde_json::to_string_pretty(&cfg).expect("json"),
        );
        put(n, &cfg.conflist_template, &rendered.template);
        put(
            n,
            clusterctl_render::cni::builtin::UNIT_PATH,
            &rendered.unit,
        );
        sh(
            n,
            "systemctl daemon-reload && systemctl enable --now clusterctl-cni-agent.service",
        );
    }
    for n in nodes {
        if let Err(e) = wait_for(n, "test -s /etc/cni/net.d/10-clusterctl.conflist", 60) {
            let j = n
                .sh("journalctl -u clusterctl-cni-agent --no-pager | tail -n 30")
                .unwrap_or_default();
            panic!(
                "{}: the agent wrote no conflist ({e}); journal:\n{j}",
                n.name
            );
        }
        // The node image has nft (package nftables): the masquerade rule is in the agent's table.
        let nat = sh(n, "nft list table ip clusterctl-cni");
        assert!(
            nat.contains("ip saddr 10.244.0.0/16 ip daddr != 10.244.0.0/16 masquerade"),
            "{}: masquerade in the nftables table: {nat}",
            n.name
        );
        wait_for(n, "ctr version", 60).expect("containerd answers");
    }

    // One long-running container per node, networked by containerd through our plugin.
    let mut ips = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        let id = format!("pod{i}");
        sh(
            n,
            &format!("ctr run -d --cni --rootfs /root/rootfs {id} {BUSYBOX} sleep 600"),
        );
        let ip = pod_ip(n, &id);
        let net: clusterctl_cni::Ipv4Net = cidrs[i].parse().expect("cidr");
        assert!(
            net.contains(&ip) && ip != net.network() && ip != net.broadcast(),
            "{id} on {} got {ip}, not a pod address of {net}",
            n.name
        );
        let state = sh(n, "cat /var/lib/cni/clusterctl/clusterctl/state.json");
        assert!(
            state.contains(&ip.to_string()) && state.contains(&format!("default-{id}")),
            "IPAM records {ip} for default-{id}: {state}"
        );
        ips.push(ip);
    }
    for (i, n) in nodes.iter().enumerate() {
        let other = ips[1 - i];
        let out = n.exec(
            &format!("ctr task exec --exec-id ping-{i} pod{i} {BUSYBOX} ping -c 3 -W 2 {other}"),
            b"",
        );
        let (st, o, e) = out.expect("docker exec");
        assert_eq!(
            st, 0,
            "pod{i} on {} reaches {other} on the other node across the VXLAN: {o}{e}",
            n.name
        );
    }

    // A short-lived container: containerd runs ADD, the command, then DEL.
    let n1 = &nodes[1];
    let before = host_ends(n1);
    let (st, o, e) = n1
        .exec(
            &format!(
                "ctr run --rm --cni --rootfs /root/rootfs once1 {BUSYBOX} ping -c 2 -W 2 {}",
                ips[0]
            ),
            b"",
        )
        .expect("docker exec");
    assert_eq!(st, 0, "a second container on node 1 reaches pod0: {o}{e}");
    assert_eq!(host_ends(n1), before, "DEL removed the host end");
    let state = sh(n1, "cat /var/lib/cni/clusterctl/clusterctl/state.json");
    assert!(
        !state.contains("default-once1") && state.contains("default-pod1"),
        "DEL released only once1's address: {state}"
    );
}
