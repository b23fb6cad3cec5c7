//! A conflist chaining our plugin with the reference `portmap` and `bandwidth` plugins (Debian's
//! containernetworking-plugins in /usr/lib/cni), executed as libcni does: each plugin gets the
//! previous one's result as `prevResult`, DEL runs in reverse order. The reference plugins read our
//! result: portmap installs its DNAT for the pod address, bandwidth shapes our host end.

use crate::cni_support;

use clusterctl_testbed::netns::{Netns, Underlay};
use cni_support::*;
use serde_json::{json, Value};
use std::path::Path;

const PLUGINS: &str = "/usr/lib/cni";

fn net_conf(list: &Value, i: usize, prev: Option<&Value>, runtime: &Value) -> String {
    let mut c = list["plugins"][i].clone();
    c["cniVersion"] = list["cniVersion"].clone();
    c["name"] = list["name"].clone();
    if let Some(p) = prev {
        c["prevResult"] = p.clone();
    }
    // libcni passes the runtimeConfig keys the plugin declares in its capabilities.
    if let Some(caps) = c.get("capabilities").and_then(Value::as_object).cloned() {
        let mut rc = serde_json::Map::new();
        for (k, on) in caps {
            if on.as_bool() == Some(true) {
                if let Some(v) = runtime.get(&k) {
                    rc.insert(k, v.clone());
                }
            }
        }
        c["runtimeConfig"] = Value::Object(rc);
    }
    c.to_string()
}

#[test]
fn chained_with_reference_portmap_and_bandwidth() {
    if !gate() {
        return;
    }
    let have = Path::new(PLUGINS).join("portmap").exists()
        && Path::new(PLUGINS).join("bandwidth").exists();
    if !clusterctl_testbed::require(
        "reference CNI plugins in /usr/lib/cni (containernetworking-plugins)",
        have,
    ) {
        return;
    }
    let ul = Underlay::new(40).unwrap();
    let node = ul.add_node(1500).unwrap();
    let data = tempfile::tempdir().unwrap();
    let plugin = Plugin::new();
    let pod = Netns::new("pp").unwrap();
    let list = json!({
        "cniVersion": "1.0.0",
        "name": "cctest",
        "plugins": [
            {"type": "clusterctl-cni", "podCIDR": "10.250.40.0/24", "mtu": 1450, "dataDir": data.path().display().to_string()},
            {"type": "portmap", "capabilities": {"portMappings": true}, "snat": true},
            {"type": "bandwidth", "capabilities": {"bandwidth": true}}
        ]
    });
    let runtime = json!({
        "portMappings": [{"hostPort": 18080, "containerPort": 80, "protocol": "tcp"}],
        "bandwidth": {"ingressRate": 1000000, "ingressBurst": 100000, "egressRate": 1000000, "egressBurst": 100000}
    });
    let progs = [
        plugin.path.clone(),
        Path::new(PLUGINS).join("portmap"),
        Path::new(PLUGINS).join("bandwidth"),
    ];

    // ADD through the chain.
    let mut prev: Option<Value> = None;
    for (i, prog) in progs.iter().enumerate() {
        let c = plugin.run(
            prog,
            &node.ns,
            "ADD",
            "chain1",
            Some(&pod.path()),
            "eth0",
            &net_conf(&list, i, prev.as_ref(), &runtime),
        );
        assert!(c.ok, "ADD plugin {i}: {} {}", c.stdout, c.stderr);
        prev = Some(c.json());
    }
    let result = prev.clone().unwrap();
    let ip = result_ip(&result);
    let host = result["interfaces"][0]["name"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(result["cniVersion"], "1.0.0");

    // portmap read our prevResult: its DNAT names the pod address.
    let nat = sh(&node.ns, "iptables-save", &["-t", "nat"]);
    assert!(nat.contains(&format!("--to-destination {ip}:80")), "{nat}");
    assert!(nat.contains("--dport 18080"), "{nat}");
    // bandwidth read our prevResult: it shaped our host end (ingress) and made an ifb for egress.
    let qd = sh(&node.ns, "tc", &["qdisc", "show", "dev", &host]);
    assert!(qd.contains("tbf"), "{qd}");
    assert!(
        node.ns
            .links()
            .unwrap()
            .iter()
            .any(|l| l.starts_with("bwp")),
        "bandwidth's ifb device"
    );
    // The pod is reachable from the node through our plumbing under the chained plugins.
    let o = node
        .ns
        .exec(
            "ping",
            &["-c", "2", "-W", "1", "-i", "0.2", "-q", &ip.to_string()],
        )
        .unwrap();
    assert!(o.status.success(), "node → pod with the chain installed");

    // CHECK through the chain (our plugin checks against the final result).
    let c = plugin.run(
        &progs[0],
        &node.ns,
        "CHECK",
        "chain1",
        Some(&pod.path()),
        "eth0",
        &net_conf(&list, 0, Some(&result), &runtime),
    );
    assert!(c.ok, "CHECK: {} {}", c.stdout, c.stderr);

    // DEL in reverse order, each with prevResult.
    for (i, prog) in progs.iter().enumerate().rev() {
        let c = plugin.run(
            prog,
            &node.ns,
            "DEL",
            "chain1",
            Some(&pod.path()),
            "eth0",
            &net_conf(&list, i, Some(&result), &runtime),
        );
        assert!(c.ok, "DEL plugin {i}: {} {}", c.stdout, c.stderr);
    }
    let nat = sh(&node.ns, "iptables-save", &["-t", "nat"]);
    assert!(!nat.contains(&ip.to_string()), "{nat}");
    assert!(host_ends(&node.ns).is_empty());
    assert!(!node
        .ns
        .links()
        .unwrap()
        .iter()
        .any(|l| l.starts_with("bwp")));
    assert!(allocations(data.path(), "cctest").is_empty());
}
