//! The overlay across three "nodes" (namespaces on one underlay bridge): `clusterctl cni agent --once`
//! on each with a static peers file, pods added through the conflist the agent wrote, ping within a
//! node and across nodes through the VXLAN device, the device's settings, reconcile of a changed peer
//! set (stale entries removed, the rest kept), masquerade table, and clean-up.

use crate::cni_support;

use clusterctl_testbed::netns::{Netns, Node, Underlay};
use cni_support::*;
use serde_json::Value;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

struct Site {
    dir: tempfile::TempDir,
    rendered: RenderedCni,
}

impl Site {
    fn node_dir(&self, i: usize) -> PathBuf {
        self.dir.path().join(format!("node{i}"))
    }

    /// Writes node `i`'s rendered settings and conflist template, with every path redirected into
    /// its test directory and podSubnet 10.251.0.0/16; returns the settings file.
    fn install(&self, i: usize) -> PathBuf {
        let dir = self.node_dir(i);
        let mut cfg = self.rendered.agents[i].clone();
        cfg.pod_subnet = Some("10.251.0.0/16".parse().expect("CIDR"));
        cfg.conflist_template = dir.join("template.conflist").display().to_string();
        cfg.conflist_path = dir
            .join("net.d/10-clusterctl.conflist")
            .display()
            .to_string();
        cfg.pod_cidr_file = dir.join("podcidr").display().to_string();
        cfg.kubeconfig = None;
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            &cfg.conflist_template,
            with_data_dir(&self.rendered.template, &dir.join("data")),
        )
        .unwrap();
        let p = dir.join("agent.json");
        write_agent_config(&p, &cfg);
        p
    }
}

fn agent(node: &Node, config: &Path, peers: &Path) -> std::process::Output {
    let mut c = node.ns.command(env!("CARGO_BIN_EXE_clusterctl"));
    c.args(["cni", "agent", "--once", "--config"])
        .arg(config)
        .arg("--peers-file")
        .arg(peers);
    c.output().expect("run agent")
}

fn cleanup(node: &Node, config: &Path) -> std::process::Output {
    let mut c = node.ns.command(env!("CARGO_BIN_EXE_clusterctl"));
    c.args(["cni", "cleanup", "--config"]).arg(config);
    c.output().expect("run cleanup")
}

/// The plugin config a runtime derives from the conflist's first plugin.
fn plugin_conf(conflist: &Value) -> String {
    let mut c = conflist["plugins"][0].clone();
    c["cniVersion"] = conflist["cniVersion"].clone();
    c["name"] = conflist["name"].clone();
    c.to_string()
}

#[test]
fn three_nodes_ping_across_the_vxlan() {
    if !gate() {
        return;
    }
    let ul = Underlay::new(20).unwrap();
    let nodes: Vec<Node> = (0..3).map(|_| ul.add_node(1500).unwrap()).collect();
    let names: Vec<(String, Ipv4Addr)> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (format!("node{i}"), n.addr))
        .collect();
    let refs: Vec<(&str, Ipv4Addr)> = names.iter().map(|(n, a)| (n.as_str(), *a)).collect();
    let site = Site {
        dir: tempfile::tempdir().unwrap(),
        rendered: rendered_builtin(&refs),
    };
    let configs: Vec<PathBuf> = (0..nodes.len()).map(|i| site.install(i)).collect();
    let peers = site.dir.path().join("peers");
    let all: String = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| format!("node{i} {} 10.251.{}.0/24\n", n.addr, i + 1))
        .collect();
    std::fs::write(&peers, &all).unwrap();
    for (i, n) in nodes.iter().enumerate() {
        let o = agent(n, &configs[i], &peers);
        assert!(
            o.status.success(),
            "agent node{i}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }

    // The device on node0: VNI 1, port 8472, MTU 1450, VTEP /32 = podCIDR network, tx csum off.
    let n0 = &nodes[0];
    let d = sh(&n0.ns, "ip", &["-d", "link", "show", "cc-vxlan"]);
    assert!(d.contains("mtu 1450"), "{d}");
    assert!(d.contains("vxlan id 1 "), "{d}");
    assert!(d.contains("dstport 8472"), "{d}");
    assert!(d.contains(&format!("local {}", n0.addr)), "{d}");
    let o = n0.addr.octets();
    assert!(
        d.contains(&format!(
            "link/ether 0e:cc:{:02x}:{:02x}:{:02x}:{:02x}",
            o[0], o[1], o[2], o[3]
        )),
        "{d}"
    );
    assert!(sh(&n0.ns, "ip", &["-o", "-4", "addr", "show", "cc-vxlan"]).contains("10.251.1.0/32"));
    let k = sh(&n0.ns, "ethtool", &["-k", "cc-vxlan"]);
    assert!(k.contains("tx-checksumming: off"), "{k}");
    let routes = sh(&n0.ns, "ip", &["route", "show", "dev", "cc-vxlan"]);
    for (i, n) in nodes.iter().enumerate().skip(1) {
        let vtep = format!("10.251.{}.0", i + 1);
        assert!(
            routes.contains(&format!("10.251.{}.0/24 via {vtep} onlink", i + 1)),
            "{routes}"
        );
        let neigh = sh(&n0.ns, "ip", &["neigh", "show", "dev", "cc-vxlan"]);
        let m = n.addr.octets();
        let mac = format!("0e:cc:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3]);
        assert!(
            neigh.contains(&format!("{vtep} lladdr {mac} PERMANENT")),
            "{neigh}"
        );
        let fdb = sh(&n0.ns, "bridge", &["fdb", "show", "dev", "cc-vxlan"]);
        assert!(
            fdb.contains(&format!("{mac} dst {} self permanent", n.addr)),
            "{fdb}"
        );
    }
    assert!(
        !routes.contains("10.251.1.0/24"),
        "no route to our own podCIDR over the tunnel"
    );
    let nft = sh(&n0.ns, "nft", &["list", "table", "ip", "clusterctl-cni"]);
    assert!(
        nft.contains("ip saddr 10.251.0.0/16 ip daddr != 10.251.0.0/16 masquerade"),
        "{nft}"
    );

    // Conflist: our plugin then portmap, cniVersion 1.0.0, podCIDR; podCIDR file.
    let conflists: Vec<Value> = (0..3)
        .map(|i| {
            let t = std::fs::read_to_string(site.node_dir(i).join("net.d/10-clusterctl.conflist"))
                .unwrap();
            serde_json::from_str(&t).unwrap()
        })
        .collect();
    assert_eq!(conflists[1]["cniVersion"], "1.0.0");
    assert_eq!(conflists[1]["plugins"][0]["type"], "clusterctl-cni");
    assert_eq!(conflists[1]["plugins"][0]["podCIDR"], "10.251.2.0/24");
    assert_eq!(conflists[1]["plugins"][1]["type"], "portmap");
    assert_eq!(
        conflists[1]["plugins"][0]["mtu"], 1450,
        "the agent fills in the MTU it derived (underlay 1500 − 50)"
    );
    clusterctl_cni::plugin::config::parse(plugin_conf(&conflists[1]).as_bytes())
        .expect("the plugin parses the conflist the agent completed");
    assert_eq!(
        std::fs::read_to_string(site.node_dir(2).join("podcidr"))
            .unwrap()
            .trim(),
        "10.251.3.0/24"
    );

    // Pods: two on node0, one on node1, one on node2.
    let plugin = Plugin::new();
    let placement = [0usize, 0, 1, 2];
    let pods: Vec<Netns> = placement
        .iter()
        .map(|_| Netns::new("po").unwrap())
        .collect();
    let mut ips: Vec<Ipv4Addr> = Vec::new();
    for (k, (&ni, pod)) in placement.iter().zip(&pods).enumerate() {
        let r = plugin.add(
            &nodes[ni].ns,
            &format!("c{k}"),
            pod,
            &plugin_conf(&conflists[ni]),
        );
        let ip = result_ip(&r);
        assert_eq!(
            ip.octets()[2] as usize,
            ni + 1,
            "pod on node{ni} gets an address of its podCIDR"
        );
        assert!(
            sh(pod, "ip", &["link", "show", "eth0"]).contains("mtu 1450"),
            "pod MTU = overlay MTU"
        );
        ips.push(ip);
    }
    assert!(pods[0].ping(ips[1], 2), "same node");
    assert!(pods[0].ping(ips[2], 3), "node0 → node1 over VXLAN");
    assert!(pods[2].ping(ips[3], 3), "node1 → node2 over VXLAN");
    assert!(pods[3].ping(ips[1], 3), "node2 → node0 over VXLAN");
    assert!(
        pods[2].ping(Ipv4Addr::new(10, 251, 1, 0), 2),
        "a pod reaches a remote node's VTEP address"
    );

    // Peer set changes: node2 leaves. node0 drops exactly node2's entries and keeps node1's.
    let two: String = all.lines().take(2).map(|l| format!("{l}\n")).collect();
    std::fs::write(&peers, &two).unwrap();
    let o = agent(n0, &configs[0], &peers);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let log = String::from_utf8_lossy(&o.stderr);
    assert!(
        log.contains("added 0, removed 3"),
        "one route, one neighbour, one fdb entry removed: {log}"
    );
    let routes = sh(&n0.ns, "ip", &["route", "show", "dev", "cc-vxlan"]);
    assert!(
        !routes.contains("10.251.3.0/24") && routes.contains("10.251.2.0/24"),
        "{routes}"
    );
    assert!(!sh(&n0.ns, "bridge", &["fdb", "show", "dev", "cc-vxlan"])
        .contains(&nodes[2].addr.to_string()));
    assert!(pods[0].ping(ips[2], 2), "node0 → node1 still works");
    assert!(!pods[0].ping(ips[3], 1), "node2 is no longer routed");

    // A second pass with nothing changed changes nothing; a hand-made stale route is removed.
    n0.ns
        .ip(&[
            "route",
            "add",
            "10.251.99.0/24",
            "via",
            "10.251.99.0",
            "dev",
            "cc-vxlan",
            "onlink",
        ])
        .unwrap();
    let o = agent(n0, &configs[0], &peers);
    let log = String::from_utf8_lossy(&o.stderr);
    assert!(
        log.contains("device created: false, added 0, removed 1"),
        "{log}"
    );

    // Clean-up removes the device, the table and the files.
    for (i, n) in nodes.iter().enumerate() {
        let o = cleanup(n, &configs[i]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    assert!(!n0.ns.links().unwrap().contains(&"cc-vxlan".to_string()));
    assert!(
        n0.ns
            .exec("nft", &["list", "table", "ip", "clusterctl-cni"])
            .unwrap()
            .status
            .code()
            != Some(0)
    );
    assert!(!site
        .node_dir(0)
        .join("net.d/10-clusterctl.conflist")
        .exists());
}
