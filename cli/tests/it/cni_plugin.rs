//! The CNI plugin on one "node" (a network namespace on an underlay), invoked as a runtime does:
//! ADD/DEL/CHECK with 0.4.0, 1.0.0 and 1.1.0 configs, pod-to-pod ping, DEL leaving nothing, the
//! spec's error objects, VERSION, STATUS and GC.

use crate::cni_support;

use clusterctl_testbed::netns::{Netns, Underlay};
use cni_support::*;
use serde_json::json;

#[test]
fn add_check_del_on_one_node() {
    if !gate() {
        return;
    }
    let ul = Underlay::new(10).unwrap();
    let node = ul.add_node(1500).unwrap();
    let data = tempfile::tempdir().unwrap();
    let plugin = Plugin::new();
    let (p1, p2) = (Netns::new("pa").unwrap(), Netns::new("pb").unwrap());

    let c10 = conf("1.0.0", "10.250.1.0/24", data.path()).to_string();
    let c04 = conf("0.4.0", "10.250.1.0/24", data.path()).to_string();
    let r1 = plugin.add(&node.ns, "pod1", &p1, &c10);
    let r2 = plugin.add(&node.ns, "pod2", &p2, &c04);
    assert_eq!(r1["cniVersion"], "1.0.0");
    assert_eq!(r2["cniVersion"], "0.4.0");
    assert_eq!(
        r2["ips"][0]["version"], "4",
        "0.4.0 results carry the IP version"
    );
    assert!(r1["ips"][0].get("version").is_none());
    let (ip1, ip2) = (result_ip(&r1), result_ip(&r2));
    assert_ne!(ip1, ip2);
    for ip in [ip1, ip2] {
        assert_eq!(&ip.octets()[..3], &[10, 250, 1]);
        assert!(
            ip.octets()[3] != 0 && ip.octets()[3] != 255,
            "network/VTEP and broadcast are skipped: {ip}"
        );
    }
    assert_eq!(
        r1["interfaces"][1]["sandbox"],
        p1.path().display().to_string()
    );

    // Pod side: /32, routes via 169.254.1.1, MTU.
    let addr = sh(&p1, "ip", &["-o", "-4", "addr", "show", "dev", "eth0"]);
    assert!(addr.contains(&format!("{ip1}/32")), "{addr}");
    let routes = sh(&p1, "ip", &["route"]);
    assert!(
        routes.contains("default via 169.254.1.1 dev eth0"),
        "{routes}"
    );
    assert!(
        routes.contains("169.254.1.1 dev eth0 scope link"),
        "{routes}"
    );
    assert!(sh(&p1, "ip", &["link", "show", "eth0"]).contains("mtu 1400"));
    // Host side: the host end, proxy_arp, the /32 route, forwarding.
    let host = r1["interfaces"][0]["name"].as_str().unwrap().to_string();
    assert_eq!(
        sh(
            &node.ns,
            "cat",
            &[&format!("/proc/sys/net/ipv4/conf/{host}/proxy_arp")]
        )
        .trim(),
        "1"
    );
    assert_eq!(
        sh(&node.ns, "cat", &["/proc/sys/net/ipv4/ip_forward"]).trim(),
        "1"
    );
    let hroutes = sh(&node.ns, "ip", &["route"]);
    assert!(
        hroutes.contains(&format!("{ip1} dev {host} scope link")),
        "{hroutes}"
    );

    // Traffic on the node.
    assert!(p1.ping(ip2, 2), "pod1 → pod2");
    assert!(p2.ping(ip1, 2), "pod2 → pod1");

    // CHECK (1.1.0, prevResult = the ADD result), then break things one by one.
    let check_conf = |prev: &serde_json::Value| {
        let mut c = conf("1.1.0", "10.250.1.0/24", data.path());
        c["prevResult"] = prev.clone();
        c.to_string()
    };
    let ok = plugin.call(
        &node.ns,
        "CHECK",
        "pod1",
        Some(&p1.path()),
        "eth0",
        &check_conf(&r1),
    );
    assert!(ok.ok, "CHECK: {} {}", ok.stdout, ok.stderr);
    let no_prev = plugin.call(
        &node.ns,
        "CHECK",
        "pod1",
        Some(&p1.path()),
        "eth0",
        &conf("1.1.0", "10.250.1.0/24", data.path()).to_string(),
    );
    assert_eq!(no_prev.code(), 7);
    p1.ip(&["route", "del", "default"]).unwrap();
    assert_eq!(
        plugin
            .call(
                &node.ns,
                "CHECK",
                "pod1",
                Some(&p1.path()),
                "eth0",
                &check_conf(&r1)
            )
            .code(),
        112
    );
    p1.ip(&["addr", "del", &format!("{ip1}/32"), "dev", "eth0"])
        .unwrap();
    assert_eq!(
        plugin
            .call(
                &node.ns,
                "CHECK",
                "pod1",
                Some(&p1.path()),
                "eth0",
                &check_conf(&r1)
            )
            .code(),
        111
    );
    node.ns.ip(&["link", "set", &host, "down"]).unwrap();
    assert_eq!(
        plugin
            .call(
                &node.ns,
                "CHECK",
                "pod1",
                Some(&p1.path()),
                "eth0",
                &check_conf(&r1)
            )
            .code(),
        113
    );

    // A second ADD of the same (containerID, ifname) replaces the broken attachment, same address.
    let r1b = plugin.add(&node.ns, "pod1", &p1, &c10);
    assert_eq!(result_ip(&r1b), ip1);
    assert!(p2.ping(ip1, 2), "pod2 → pod1 after re-ADD");
    // Another container may not take an interface name that exists in the netns.
    let dup = plugin.call(&node.ns, "ADD", "other", Some(&p1.path()), "eth0", &c10);
    assert!(!dup.ok);
    assert_eq!(
        allocations(data.path(), "cctest").len(),
        2,
        "a failed ADD keeps no address"
    );

    // DEL leaves nothing: no host end, no route, no allocation; repeated DEL and DEL without netns succeed.
    plugin.del(&node.ns, "pod1", Some(&p1), &c10);
    plugin.del(&node.ns, "pod1", Some(&p1), &c10);
    assert!(!node.ns.links().unwrap().contains(&host));
    assert!(!sh(&p1, "ip", &["link"]).contains("eth0"));
    assert!(!sh(&node.ns, "ip", &["route"]).contains(&ip1.to_string()));
    let host2 = r2["interfaces"][0]["name"].as_str().unwrap().to_string();
    drop(p2);
    plugin.del(&node.ns, "pod2", None, &c04);
    assert!(host_ends(&node.ns).is_empty(), "{:?}", host_ends(&node.ns));
    assert!(!node.ns.links().unwrap().contains(&host2));
    assert!(allocations(data.path(), "cctest").is_empty());
    let routes = sh(&node.ns, "ip", &["route"]);
    assert!(!routes.contains("10.250.1."), "{routes}");
}

#[test]
fn errors_version_status_gc() {
    if !gate() {
        return;
    }
    let ul = Underlay::new(11).unwrap();
    let node = ul.add_node(1500).unwrap();
    let data = tempfile::tempdir().unwrap();
    let plugin = Plugin::new();
    let pod = Netns::new("pe").unwrap();
    let c11 = conf("1.1.0", "10.250.2.0/30", data.path()).to_string();

    // Errors: JSON on stdout, non-zero exit, the spec's codes.
    let e = plugin.call(&node.ns, "BOGUS", "x", None, "eth0", &c11);
    assert_eq!(e.code(), 4);
    assert_eq!(e.json()["cniVersion"], "1.1.0");
    let e = plugin.call(&node.ns, "ADD", "x", None, "eth0", &c11);
    assert_eq!(e.code(), 4);
    assert!(e.json()["msg"].as_str().unwrap().contains("CNI_NETNS"));
    assert_eq!(
        plugin
            .call(&node.ns, "ADD", "x", Some(&pod.path()), "eth0", "{not json")
            .code(),
        6
    );
    let bad_version =
        json!({"cniVersion": "7.0.0", "name": "n", "type": "clusterctl-cni"}).to_string();
    assert_eq!(
        plugin
            .call(
                &node.ns,
                "ADD",
                "x",
                Some(&pod.path()),
                "eth0",
                &bad_version
            )
            .code(),
        1
    );
    let bad_cidr =
        json!({"cniVersion": "1.0.0", "name": "n", "type": "clusterctl-cni", "podCIDR": "nope"})
            .to_string();
    let e = plugin.call(&node.ns, "ADD", "x", Some(&pod.path()), "eth0", &bad_cidr);
    assert_eq!(e.code(), 7);
    assert_eq!(
        e.json()["cniVersion"],
        "1.0.0",
        "errors carry the config's version"
    );

    // VERSION.
    let v = plugin.call(
        &node.ns,
        "VERSION",
        "",
        None,
        "",
        r#"{"cniVersion":"1.1.0"}"#,
    );
    assert!(v.ok);
    let sv: Vec<String> = serde_json::from_value(v.json()["supportedVersions"].clone()).unwrap();
    for want in ["0.4.0", "1.0.0", "1.1.0"] {
        assert!(sv.contains(&want.to_string()), "{sv:?}");
    }
    assert_eq!(v.json()["cniVersion"], "1.1.0");

    // STATUS: ready; not for pre-1.1.0 configs; 50 without a podCIDR; 50 when exhausted.
    let s = plugin.call(&node.ns, "STATUS", "", None, "", &c11);
    assert!(
        s.ok && s.stdout.trim().is_empty(),
        "{} {}",
        s.stdout,
        s.stderr
    );
    assert_eq!(
        plugin
            .call(
                &node.ns,
                "STATUS",
                "",
                None,
                "",
                &conf("1.0.0", "10.250.2.0/30", data.path()).to_string()
            )
            .code(),
        1
    );
    let no_cidr = json!({"cniVersion": "1.1.0", "name": "cctest", "type": "clusterctl-cni",
        "podCIDRFile": data.path().join("missing").display().to_string(), "dataDir": data.path().display().to_string()}).to_string();
    assert_eq!(
        plugin
            .call(&node.ns, "STATUS", "", None, "", &no_cidr)
            .code(),
        50
    );
    assert_eq!(
        plugin
            .call(&node.ns, "ADD", "x", Some(&pod.path()), "eth0", &no_cidr)
            .code(),
        11
    );
    let pods: Vec<Netns> = (0..2).map(|_| Netns::new("pg").unwrap()).collect();
    for (i, p) in pods.iter().enumerate() {
        plugin.add(&node.ns, &format!("gc{i}"), p, &c11);
    }
    assert_eq!(
        plugin.call(&node.ns, "STATUS", "", None, "", &c11).code(),
        50,
        "a /30 holds two pods"
    );
    let exhausted = plugin.call(&node.ns, "ADD", "gc9", Some(&pod.path()), "eth0", &c11);
    assert_eq!(exhausted.code(), 11);
    assert!(exhausted.json()["details"]
        .as_str()
        .unwrap()
        .contains("no free address"));

    // GC keeps the listed attachment, frees the other and removes its host end.
    let mut gc = conf("1.1.0", "10.250.2.0/30", data.path());
    gc["cni.dev/valid-attachments"] = json!([{"containerID": "gc1", "ifname": "eth0"}]);
    let g = plugin.call(&node.ns, "GC", "", None, "", &gc.to_string());
    assert!(g.ok, "GC: {} {}", g.stdout, g.stderr);
    assert_eq!(allocations(data.path(), "cctest").len(), 1);
    assert_eq!(host_ends(&node.ns).len(), 1, "{:?}", host_ends(&node.ns));
    let s = plugin.call(&node.ns, "STATUS", "", None, "", &c11);
    assert!(s.ok, "one address free again after GC");
    plugin.del(&node.ns, "gc1", Some(&pods[1]), &c11);
    assert!(host_ends(&node.ns).is_empty());
    assert!(allocations(data.path(), "cctest").is_empty());
}
