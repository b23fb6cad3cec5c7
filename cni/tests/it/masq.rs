//! The masquerade rule in a fresh network namespace, through both backends: the iptables fallback
//! (own chain in `nat`, one tagged jump from `POSTROUTING`; re-applying keeps one of each; removal
//! leaves nothing) and nftables (own table, removed whole). The programs run inside the namespace:
//! a child process inherits the namespace of the thread that spawns it.

use crate::support::in_ns;
use clusterctl_cni::agent::masq::{self, Backend, CHAIN};
use clusterctl_testbed::netns::Netns;

fn out(ns: &Netns, prog: &str, args: &[&str]) -> (bool, String) {
    let o = ns.exec(prog, args).expect("exec");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

#[test]
fn iptables_fallback_and_nftables_each_removable_whole() {
    if !clusterctl_testbed::require(
        "root with network namespaces, iptables and nft (scripts/packages/cni.list)",
        clusterctl_testbed::netns::available(),
    ) {
        return;
    }
    let ns = Netns::new("mq").expect("netns");
    let cidr = "10.250.0.0/16".parse().unwrap();
    let (_, before) = out(&ns, "iptables", &["-t", "nat", "-S"]);

    for _ in 0..2 {
        in_ns(&ns, || masq::apply_with(Backend::Iptables, cidr)).expect("apply iptables");
    }
    let (_, nat) = out(&ns, "iptables", &["-t", "nat", "-S"]);
    let rule = format!("-A {CHAIN} -s 10.250.0.0/16 ! -d 10.250.0.0/16 -j MASQUERADE");
    assert_eq!(nat.matches(&rule).count(), 1, "{nat}");
    assert_eq!(
        nat.lines()
            .filter(|l| l.starts_with("-A POSTROUTING") && l.ends_with(&format!("-j {CHAIN}")))
            .count(),
        1,
        "one jump after two applies: {nat}"
    );
    // A changed podSubnet replaces the rule.
    in_ns(&ns, || {
        masq::apply_with(Backend::Iptables, "10.249.0.0/16".parse().unwrap())
    })
    .expect("re-apply");
    let (_, nat) = out(&ns, "iptables", &["-t", "nat", "-S", CHAIN]);
    assert!(
        !nat.contains("10.250.0.0/16") && nat.contains("10.249.0.0/16"),
        "{nat}"
    );
    let host = std::process::Command::new("iptables")
        .args(["-t", "nat", "-S"])
        .output()
        .expect("iptables on the host");
    assert!(
        !String::from_utf8_lossy(&host.stdout).contains("10.249.0.0/16"),
        "nothing reaches the host's namespace"
    );

    in_ns(&ns, masq::remove).expect("remove");
    let (_, after) = out(&ns, "iptables", &["-t", "nat", "-S"]);
    assert_eq!(after, before, "removal leaves the nat table as it was");
    in_ns(&ns, masq::remove).expect("removing again is fine");

    in_ns(&ns, || masq::apply_with(Backend::Nftables, cidr)).expect("apply nft");
    let (ok, t) = out(&ns, "nft", &["list", "table", "ip", masq::TABLE]);
    assert!(
        ok && t.contains("ip saddr 10.250.0.0/16 ip daddr != 10.250.0.0/16 masquerade"),
        "{t}"
    );
    in_ns(&ns, masq::remove).expect("remove nft");
    let (ok, _) = out(&ns, "nft", &["list", "table", "ip", masq::TABLE]);
    assert!(!ok, "the table is gone");
}
