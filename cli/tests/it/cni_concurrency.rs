//! 64 ADDs at once on one node, then 64 DELs at once: every pod gets its own address, all of them
//! answer, and afterwards no address, host end or route is left.

use crate::cni_support;

use clusterctl_testbed::netns::{Netns, Underlay};
use cni_support::*;
use std::collections::HashSet;
use std::sync::Arc;

#[test]
fn sixty_four_concurrent_adds_then_dels() {
    if !gate() {
        return;
    }
    const N: usize = 64;
    let ul = Underlay::new(30).unwrap();
    let node = Arc::new(ul.add_node(1500).unwrap());
    let data = tempfile::tempdir().unwrap();
    let plugin = Arc::new(Plugin::new());
    let pods: Vec<Arc<Netns>> = (0..N)
        .map(|_| Arc::new(Netns::new("pc").unwrap()))
        .collect();
    let conf = Arc::new(conf("1.0.0", "10.250.30.0/24", data.path()).to_string());

    let adds: Vec<_> = pods
        .iter()
        .enumerate()
        .map(|(i, pod)| {
            let (node, plugin, conf, pod) =
                (node.clone(), plugin.clone(), conf.clone(), pod.clone());
            std::thread::spawn(move || {
                result_ip(&plugin.add(&node.ns, &format!("cc{i}"), &pod, &conf))
            })
        })
        .collect();
    let ips: Vec<_> = adds
        .into_iter()
        .map(|h| h.join().expect("ADD thread"))
        .collect();
    let unique: HashSet<_> = ips.iter().collect();
    assert_eq!(unique.len(), N, "no address handed out twice: {ips:?}");
    assert_eq!(allocations(data.path(), "cctest").len(), N);
    assert_eq!(host_ends(&node.ns).len(), N);
    // Every pod is reachable from the first one.
    for ip in ips.iter().skip(1).step_by(7) {
        assert!(pods[0].ping(*ip, 2), "pod0 → {ip}");
    }

    let dels: Vec<_> = pods
        .iter()
        .enumerate()
        .map(|(i, pod)| {
            let (node, plugin, conf, pod) =
                (node.clone(), plugin.clone(), conf.clone(), pod.clone());
            std::thread::spawn(move || plugin.del(&node.ns, &format!("cc{i}"), Some(&pod), &conf))
        })
        .collect();
    for h in dels {
        h.join().expect("DEL thread");
    }
    assert!(
        allocations(data.path(), "cctest").is_empty(),
        "no leaked address"
    );
    assert!(host_ends(&node.ns).is_empty(), "no leaked host end");
    let routes = sh(&node.ns, "ip", &["route"]);
    assert!(!routes.contains("10.250.30."), "no leaked route: {routes}");
}
