//! `destroy`'s kube-proxy step on real iptables (nftables backend) and nft in a network namespace:
//! the `KUBE-*` chains of kube-proxy and the kubelet and every jump to them go, another rule in the
//! same table stays, and a table left empty goes only when the record of tables before `up` does not
//! name it (`clusterctl_phases::destroy::scripts`).

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
