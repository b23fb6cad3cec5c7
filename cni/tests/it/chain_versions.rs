//! Our plugin followed by the reference `portmap` (containernetworking/plugins v1.10.0, built from
//! its Go module by `scripts/k8s/build.sh` into the test-bed cache) for every CNI version the plugin
//! accepts (issue 15, item 3), executed as libcni executes a conflist: ADD in order, each plugin
//! getting the previous one's result as `prevResult`; CHECK (0.4.0 and later) and DEL (in reverse)
//! with the list's final result as `prevResult`; for 1.1.0 also STATUS and GC.

use crate::support::*;
use clusterctl_testbed::netns::{Netns, Underlay};
use serde_json::{json, Value};
use std::path::Path;

const VERSIONS: &[&str] = &["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"];
/// Keys of `interfaces[]` that CNI 1.1.0 added.
const INTERFACE_KEYS_1_1: &[&str] = &["mtu", "socketPath", "pciID"];

/// The network configuration libcni hands plugin `i` of `list`: the entry plus the list's
/// `cniVersion` and `name`, `prevResult`, and the runtime's values of the entry's capabilities.
fn net_conf(list: &Value, i: usize, prev: Option<&Value>, runtime: &Value) -> String {
    let mut c = list["plugins"][i].clone();
    c["cniVersion"] = list["cniVersion"].clone();
    c["name"] = list["name"].clone();
    if let Some(p) = prev {
        c["prevResult"] = p.clone();
    }
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

/// The NAT rules of the node, through whichever backend portmap chose (iptables or nftables).
fn nat_rules(node: &Netns) -> String {
    let mut all = String::new();
    for (prog, args) in [
        ("iptables-save", &["-t", "nat"][..]),
        ("nft", &["list", "ruleset"][..]),
    ] {
        if let Ok(o) = node.exec(prog, args) {
            all.push_str(&String::from_utf8_lossy(&o.stdout));
        }
    }
    all
}

#[test]
fn chained_with_portmap_v1_10_for_every_version() {
    if !gate() {
        return;
    }
    let Some(refdir) = reference_plugins() else {
        return;
    };
    let ul = Underlay::new(73).unwrap();
    let node = ul.add_node(1500).unwrap();
    let data = tempfile::tempdir().unwrap();
    let ours = plugin_path();
    let portmap = refdir.join("portmap");
    let progs = [ours.clone(), portmap.clone()];
    let cni_path = Path::new(&refdir);

    for (n, v) in VERSIONS.iter().enumerate() {
        let pod = Netns::new("cv").unwrap();
        let cid = format!("chain{n}");
        let host_port = 18100 + n as u16;
        let list = json!({
            "cniVersion": v,
            "name": "ccchain",
            "plugins": [
                {"type": "clusterctl-cni", "podCIDR": "10.249.73.0/24", "mtu": 1400,
                 "dataDir": data.path().display().to_string()},
                {"type": "portmap", "capabilities": {"portMappings": true}, "snat": true}
            ]
        });
        let runtime = json!({"portMappings": [{"hostPort": host_port, "containerPort": 80, "protocol": "tcp"}]});
        let call = |prog: &Path, cmd: &str, i: usize, prev: Option<&Value>| {
            run(
                prog,
                &node.ns,
                cmd,
                &cid,
                Some(&pod.path()),
                "eth0",
                &net_conf(&list, i, prev, &runtime),
                cni_path,
            )
        };

        // ADD through the chain.
        let mut prev: Option<Value> = None;
        let mut outputs = Vec::new();
        for (i, prog) in progs.iter().enumerate() {
            let c = call(prog, "ADD", i, prev.as_ref());
            assert!(c.ok, "{v}: ADD plugin {i}: {} {}", c.stdout, c.stderr);
            outputs.push(c.json());
            prev = outputs.last().cloned();
        }
        let result = prev.clone().unwrap();
        let mine = &outputs[0];
        assert_eq!(mine["cniVersion"], *v, "{v}: {mine}");
        assert_eq!(result["cniVersion"], *v, "{v}: {result}");
        for i in mine["interfaces"].as_array().unwrap() {
            for k in INTERFACE_KEYS_1_1 {
                if *v == "1.1.0" {
                    continue;
                }
                assert!(i.get(*k).is_none(), "{v}: interfaces[].{k} in {mine}");
            }
        }
        if *v == "1.1.0" {
            assert_eq!(mine["interfaces"][0]["mtu"], 1400, "{mine}");
        }
        let legacy = v.starts_with("0.");
        for r in [mine, &result] {
            assert_eq!(
                r["ips"][0].get("version").is_some(),
                legacy,
                "{v}: ips[].version exactly before 1.0.0: {r}"
            );
        }
        // portmap read our result: its DNAT sends the host port to the pod address.
        let ip = result_ip(&result);
        let nat = nat_rules(&node.ns);
        assert!(
            nat.contains(&ip.to_string()) && nat.contains(&host_port.to_string()),
            "{v}: no DNAT {host_port} → {ip}:80 in\n{nat}"
        );

        // CHECK with the final result, every plugin; 0.3.x defines no CHECK.
        for (i, prog) in progs.iter().enumerate() {
            let c = call(prog, "CHECK", i, Some(&result));
            if legacy && *v != "0.4.0" {
                assert_eq!(c.code(), 1, "{v}: CHECK plugin {i} refused: {}", c.stdout);
            } else {
                assert!(c.ok, "{v}: CHECK plugin {i}: {} {}", c.stdout, c.stderr);
            }
        }
        // 1.1.0: STATUS and GC through the list (the attachment stays valid, nothing is freed).
        if *v == "1.1.0" {
            for (i, prog) in progs.iter().enumerate() {
                let c = run(
                    prog,
                    &node.ns,
                    "STATUS",
                    "",
                    None,
                    "",
                    &net_conf(&list, i, None, &runtime),
                    cni_path,
                );
                assert!(c.ok, "STATUS plugin {i}: {} {}", c.stdout, c.stderr);
                let mut gc: Value =
                    serde_json::from_str(&net_conf(&list, i, None, &runtime)).unwrap();
                gc["cni.dev/valid-attachments"] = json!([{"containerID": cid, "ifname": "eth0"}]);
                let c = run(
                    prog,
                    &node.ns,
                    "GC",
                    "",
                    None,
                    "",
                    &gc.to_string(),
                    cni_path,
                );
                assert!(c.ok, "GC plugin {i}: {} {}", c.stdout, c.stderr);
            }
            let c = call(&ours, "CHECK", 0, Some(&result));
            assert!(c.ok, "still intact after GC: {}", c.stdout);
        }

        // DEL in reverse with the final result.
        for (i, prog) in progs.iter().enumerate().rev() {
            let c = call(prog, "DEL", i, Some(&result));
            assert!(c.ok, "{v}: DEL plugin {i}: {} {}", c.stdout, c.stderr);
        }
        let nat = nat_rules(&node.ns);
        assert!(
            !nat.contains(&format!("{ip}:80")) && !nat.contains(&format!("dport {host_port}")),
            "{v}: DNAT left\n{nat}"
        );
        assert!(host_ends(&node.ns).is_empty(), "{v}");
        let s = state(data.path(), "ccchain");
        assert!(
            s["allocations"].as_object().is_none_or(|m| m.is_empty()),
            "{v}: {s}"
        );
    }
}
