//! IPAM across a node reboot and across pods that vanish without DEL (issue 15, item 1), on a node
//! namespace with real pod namespaces, the plugin driven as a runtime drives it.
//!
//! A reboot is simulated as it looks to the plugin: the pods' network namespaces are removed with
//! no DEL (their veth pairs go with them) and the boot ID changes — the test points the plugin's
//! `bootIDFile` at a file of its own (nodes leave the key unset: the kernel's
//! `/proc/sys/kernel/random/boot_id`).

use crate::support::*;
use clusterctl_cni::agent::leases::Dropped;
use clusterctl_testbed::netns::{Netns, Underlay};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::path::Path;

fn conf(cidr: &str, data: &Path, boot: &Path) -> String {
    json!({"cniVersion": "1.0.0", "name": "cctest", "type": "clusterctl-cni", "mtu": 1400,
           "podCIDR": cidr, "dataDir": data.display().to_string(),
           "bootIDFile": boot.display().to_string()})
    .to_string()
}

#[test]
fn after_a_reboot_the_leases_of_the_earlier_boot_are_free() {
    if !gate() {
        return;
    }
    let ul = Underlay::new(71).unwrap();
    let node = ul.add_node(1500).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let boot = dir.path().join("boot_id");
    std::fs::write(&boot, "11111111-aaaa-4aaa-8aaa-000000000001\n").unwrap();
    let data = dir.path().join("data");
    // A /28: 14 usable addresses (network = VTEP, broadcast excluded).
    let c = conf("10.249.71.0/28", &data, &boot);

    let before: Vec<Netns> = (0..12).map(|_| Netns::new("rb").unwrap()).collect();
    for (i, pod) in before.iter().enumerate() {
        let r = add(&node.ns, &format!("before{i}"), pod, &c);
        assert!(r.ok, "ADD before{i}: {} {}", r.stdout, r.stderr);
    }
    assert_eq!(host_ends(&node.ns).len(), 12);

    // The reboot: every pod namespace gone without DEL, a new boot ID.
    drop(before);
    std::fs::write(&boot, "22222222-bbbb-4bbb-8bbb-000000000002\n").unwrap();
    assert!(
        wait_host_ends(&node.ns, 0).is_empty(),
        "the veth pairs went with the namespaces"
    );

    let after: Vec<Netns> = (0..12).map(|_| Netns::new("ra").unwrap()).collect();
    let mut ips = HashSet::new();
    let mut failed = Vec::new();
    for (i, pod) in after.iter().enumerate() {
        let r = add(&node.ns, &format!("after{i}"), pod, &c);
        if r.ok {
            ips.insert(result_ip(&r.json()));
        } else {
            failed.push(format!("after{i}: {}", r.stdout));
        }
    }
    assert!(
        failed.is_empty(),
        "{} of 12 ADDs after the reboot failed: {failed:#?}",
        failed.len()
    );
    assert_eq!(ips.len(), 12, "distinct addresses");
    // The state holds exactly this boot's 12 leases, each with its boot ID and namespace.
    let s = state(&data, "cctest");
    let leases = s["allocations"].as_object().unwrap();
    assert_eq!(leases.len(), 12, "{s}");
    for l in leases.values() {
        assert_eq!(l["bootID"], "22222222-bbbb-4bbb-8bbb-000000000002", "{l}");
        assert!(
            l["netns"].as_str().unwrap().starts_with("/run/netns/ra"),
            "{l}"
        );
    }
    for (i, pod) in after.iter().enumerate() {
        del(&node.ns, &format!("after{i}"), Some(pod), &c);
    }
    assert!(state(&data, "cctest")["allocations"]
        .as_object()
        .unwrap()
        .is_empty());
}

/// The agent at start: leases whose pods vanished without DEL in this boot are freed, a store from
/// before boot IDs keeps the leases of pods that are still there (stamped with this boot) and frees
/// the others, and a lease of an earlier boot goes.
#[test]
fn the_agent_at_start_frees_leases_of_pods_that_are_gone() {
    if !gate() {
        return;
    }
    let ul = Underlay::new(72).unwrap();
    let node = ul.add_node(1500).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let boot_id = "33333333-cccc-4ccc-8ccc-000000000003";
    let boot = dir.path().join("boot_id");
    std::fs::write(&boot, boot_id).unwrap();
    let data = dir.path().join("data");
    let c = conf("10.249.72.0/28", &data, &boot);

    let mut pods: Vec<Option<Netns>> = (0..6).map(|_| Some(Netns::new("rg").unwrap())).collect();
    for (i, pod) in pods.iter().enumerate() {
        let r = add(&node.ns, &format!("p{i}"), pod.as_ref().unwrap(), &c);
        assert!(r.ok, "ADD p{i}: {} {}", r.stdout, r.stderr);
    }
    // An old store: p0..p2 recorded the way the plugin did before boot IDs (no bootID, no netns),
    // plus a lease of an earlier boot.
    let state_file = data.join("cctest/state.json");
    let mut s: Value =
        serde_json::from_str(&std::fs::read_to_string(&state_file).unwrap()).unwrap();
    let ip_of = |s: &Value, cid: &str| -> String {
        s["allocations"]
            .as_object()
            .unwrap()
            .iter()
            .find(|(_, l)| l["containerID"] == cid)
            .map(|(ip, _)| ip.clone())
            .unwrap_or_else(|| panic!("{cid} not in {s}"))
    };
    for cid in ["p0", "p1", "p2"] {
        let ip = ip_of(&s, cid);
        s["allocations"][&ip] = json!({"containerID": cid, "ifname": "eth0"});
    }
    s["allocations"]["10.249.72.14"] = json!({"containerID": "ghost", "ifname": "eth0",
        "netns": "/run/netns/long-gone", "bootID": "00000000-0000-4000-8000-000000000000"});
    std::fs::write(&state_file, s.to_string()).unwrap();

    // p1 (old format) and p4 (new format) vanish without DEL.
    pods[1] = None;
    pods[4] = None;
    assert_eq!(wait_host_ends(&node.ns, 4).len(), 4);

    let template = dir.path().join("10-clusterctl.conflist");
    std::fs::write(
        &template,
        json!({"cniVersion": "1.0.0", "name": "cctest", "plugins": [
            {"type": "clusterctl-cni", "podCIDR": "@@CLUSTERCTL_POD_CIDR@@",
             "dataDir": data.display().to_string(), "bootIDFile": boot.display().to_string()},
            {"type": "portmap", "capabilities": {"portMappings": true}}]})
        .to_string(),
    )
    .unwrap();
    let cfg: clusterctl_cni::agent::AgentConfig = serde_json::from_value(json!({
        "nodeName": "n1", "vni": 1, "vxlanPort": 8472,
        "conflistTemplate": template.display().to_string(),
        "conflistPath": dir.path().join("out.conflist").display().to_string()}))
    .unwrap();
    let outcome = in_ns(&node.ns, || clusterctl_cni::agent::reconcile_leases(&cfg))
        .expect("reconcile")
        .expect("a store exists");
    let mut dropped: Vec<(String, Dropped)> = outcome
        .dropped
        .iter()
        .map(|(_, l, why)| (l.container_id.clone(), *why))
        .collect();
    dropped.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        dropped,
        vec![
            ("ghost".to_string(), Dropped::EarlierBoot),
            ("p1".to_string(), Dropped::HostEndGone),
            ("p4".to_string(), Dropped::NetnsGone),
        ]
    );
    assert_eq!(outcome.kept, 4);
    assert_eq!(outcome.stamped, 2, "p0 and p2 now carry this boot");
    assert!(outcome.errors.is_empty(), "{:?}", outcome.errors);
    let s = state(&data, "cctest");
    for cid in ["p0", "p2", "p3", "p5"] {
        let l = &s["allocations"][ip_of(&s, cid)];
        assert_eq!(l["bootID"], boot_id, "{cid}: {l}");
    }
    // A second start changes nothing.
    let again = in_ns(&node.ns, || clusterctl_cni::agent::reconcile_leases(&cfg))
        .unwrap()
        .unwrap();
    assert!(again.dropped.is_empty() && again.stamped == 0 && again.kept == 4);

    // The /28 has 14 addresses, 4 held: 10 more pods fit.
    let more: Vec<Netns> = (0..10).map(|_| Netns::new("rm").unwrap()).collect();
    for (i, pod) in more.iter().enumerate() {
        let r = add(&node.ns, &format!("m{i}"), pod, &c);
        assert!(r.ok, "ADD m{i}: {} {}", r.stdout, r.stderr);
    }
    for (i, pod) in more.iter().enumerate() {
        del(&node.ns, &format!("m{i}"), Some(pod), &c);
    }
    for (i, pod) in pods.iter().enumerate() {
        del(&node.ns, &format!("p{i}"), pod.as_ref(), &c);
    }
    assert!(host_ends(&node.ns).is_empty());
}
