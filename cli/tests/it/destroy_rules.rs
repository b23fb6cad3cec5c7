//! `destroy`'s kube-proxy step on real iptables (nftables backend) and nft in a network namespace:
//! the `KUBE-*` chains of kube-proxy and the kubelet and every jump to them go, another rule in the
//! same table stays, and a table left empty goes only when the record of tables before `up` does not
//! name it (`clusterctl_phases::destroy::scripts`). With flannel, the network step removes its
//! `flannel.1` and `cni0` devices and its `FLANNEL-*` chains, keeping other rules.

use clusterctl_testbed::netns::{self, Netns};
use clusterctl_testbed::{is_root, require};

fn has(prog: &str, probe: &str) -> bool {
    std::process::Command::new("sh")
        .args(["-c", &format!("command -v {prog} >/dev/null && {probe}")])
        .status()
        .is_ok_and(|s| s.success())
}

fn sh(ns: &Netns, script: &str) -> String {
    let out = ns.exec("sh", &["-c", script]).expect("sh");
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn kube_chains_go_other_rules_stay_and_only_tables_made_after_up_are_deleted() {
    if !require(
        "root, ip netns, iptables (nf_tables) and nft",
        is_root()
            && netns::available()
            && has("iptables-save", "iptables -V | grep -q nf_tables")
            && has("nft", "true"),
    ) {
        return;
    }
    let ns = Netns::new("kpx").expect("netns");
    let dir = tempfile::tempdir().expect("tempdir");
    let record = dir.path().join("iptables-tables");
    // Before `up`: the nat table with a rule of someone else's; recorded as `up` records it.
    sh(
        &ns,
        "iptables -w -t nat -A POSTROUTING -s 10.99.0.0/16 -j MASQUERADE",
    );
    std::fs::write(&record, "iptables nat\n").expect("record");
    // What the kubelet and kube-proxy add: chains and jumps in nat, and new filter and mangle tables.
    sh(
        &ns,
        "set -e; iptables -w -t nat -N KUBE-SERVICES; \
         iptables -w -t nat -A KUBE-SERVICES -d 10.96.0.1/32 -p tcp --dport 443 -j RETURN; \
         iptables -w -t nat -A PREROUTING -m comment --comment 'kubernetes service portals' -j KUBE-SERVICES; \
         iptables -w -t nat -N KUBE-MARK-MASQ; \
         iptables -w -t filter -N KUBE-FIREWALL; iptables -w -t filter -A INPUT -j KUBE-FIREWALL; \
         iptables -w -t mangle -N KUBE-IPTABLES-HINT",
    );
    let script =
        clusterctl_phases::destroy::scripts::kube_proxy_script_with(&record.to_string_lossy());
    let said = sh(&ns, &script);
    for part in [
        "iptables nat: 2 KUBE-* chain(s) deleted",
        "iptables filter: 1 KUBE-* chain(s) deleted",
        "iptables table filter (empty, made after up) deleted",
        "iptables table mangle (empty, made after up) deleted",
    ] {
        assert!(said.contains(part), "{part}: {said}");
    }
    let after = sh(&ns, "iptables-save");
    assert!(!after.contains("KUBE-"), "{after}");
    assert!(
        after.contains("-A POSTROUTING -s 10.99.0.0/16 -j MASQUERADE"),
        "{after}"
    );
    assert!(
        after.contains("*nat") && !after.contains("*filter") && !after.contains("*mangle"),
        "{after}"
    );
    // Again: nothing left to remove.
    assert_eq!(sh(&ns, &script).trim(), "nothing to remove");
}

#[test]
fn flannels_devices_and_chains_go_with_its_cluster_other_rules_stay() {
    if !require(
        "root, ip netns and iptables (nf_tables)",
        is_root() && netns::available() && has("iptables-save", "iptables -V | grep -q nf_tables"),
    ) {
        return;
    }
    let ns = Netns::new("fld").expect("netns");
    // Someone else's rules in both tables, kept.
    sh(
        &ns,
        "set -e; iptables -w -t nat -A POSTROUTING -s 10.99.0.0/16 -j MASQUERADE; \
         iptables -w -t filter -A FORWARD -s 10.99.0.0/16 -j ACCEPT",
    );
    // What flanneld v0.28 (--ip-masq) and its CNI plugin make on a node: the rules of
    // pkg/trafficmngr/iptables (MasqRules, ForwardRules), flannel.1 (VXLAN, VNI 1) and cni0.
    sh(
        &ns,
        "set -e; \
         ip link add flannel.1 type vxlan id 1 dstport 8472 nolearning; \
         ip link add cni0 type bridge; \
         iptables -w -t nat -N FLANNEL-POSTRTG; \
         iptables -w -t nat -A POSTROUTING -m comment --comment 'flanneld masq' -j FLANNEL-POSTRTG; \
         iptables -w -t nat -A FLANNEL-POSTRTG -s 10.244.0.0/24 -d 10.244.0.0/16 -m comment --comment 'flanneld masq' -j RETURN; \
         iptables -w -t nat -A FLANNEL-POSTRTG -s 10.244.0.0/16 ! -d 224.0.0.0/4 -m comment --comment 'flanneld masq' -j MASQUERADE --random-fully; \
         iptables -w -t filter -N FLANNEL-FWD; \
         iptables -w -t filter -A FORWARD -m comment --comment 'flanneld forward' -j FLANNEL-FWD; \
         iptables -w -t filter -A FLANNEL-FWD -s 10.244.0.0/16 -m comment --comment 'flanneld forward' -j ACCEPT",
    );
    let script = clusterctl_phases::destroy::scripts::network_script(None, true);
    let said = sh(&ns, &script);
    for part in [
        "link flannel.1 deleted",
        "link cni0 deleted",
        "iptables nat: 1 FLANNEL-* chain(s) deleted",
        "iptables filter: 1 FLANNEL-* chain(s) deleted",
    ] {
        assert!(said.contains(part), "{part}: {said}");
    }
    let after = sh(&ns, "iptables-save; ip -o link show");
    assert!(
        !after.contains("FLANNEL") && !after.contains("flannel.1") && !after.contains("cni0"),
        "{after}"
    );
    assert!(
        after.contains("-A POSTROUTING -s 10.99.0.0/16 -j MASQUERADE")
            && after.contains("-A FORWARD -s 10.99.0.0/16 -j ACCEPT"),
        "{after}"
    );
    // Again: nothing left to remove; without flannel its devices are not touched.
    assert_eq!(sh(&ns, &script).trim(), "nothing to remove");
    sh(&ns, "ip link add cni0 type bridge");
    let builtin = clusterctl_phases::destroy::scripts::network_script(None, false);
    assert_eq!(sh(&ns, &builtin).trim(), "nothing to remove");
    assert!(sh(&ns, "ip -o link show").contains("cni0"));
}
