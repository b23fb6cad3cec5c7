//! `destroy`'s kube-proxy step on real iptables (nftables backend) and nft in a network namespace:
//! the `KUBE-*` chains of kube-proxy and the kubelet and every jump to them go, another rule in the
//! same table stays, and a table left empty goes only when the record of tables before `up` does not
//! name it (`clusterctl_phases::destroy::scripts`). With flannel, the network step removes its
//! `flannel.1` and `cni0` devices and its `FLANNEL-*` chains, keeping other rules; with Calico and
//! Cilium their devices, per-pod veths, chains and ipsets (`destroy::cni_leftovers`), keeping other
//! devices, rules and sets of similar names; the builtin CNI agent's NetworkPolicy table
//! (`inet clusterctl-netpol`) goes, another inet table stays.

use clusterctl_phases::destroy::cni_leftovers::{CALICO, CILIUM, FLANNEL};
use clusterctl_phases::destroy::scripts::network_script;
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
    let script = network_script(None, &[&FLANNEL]);
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
    let builtin = network_script(None, &[]);
    assert_eq!(sh(&ns, &builtin).trim(), "nothing to remove");
    assert!(sh(&ns, "ip -o link show").contains("cni0"));
}

#[test]
fn calicos_and_ciliums_devices_chains_and_sets_go_other_ones_stay() {
    if !require(
        "root, ip netns, iptables (nf_tables) and ipset",
        is_root()
            && netns::available()
            && has("iptables-save", "iptables -V | grep -q nf_tables")
            && has("ipset", "true"),
    ) {
        return;
    }
    let ns = Netns::new("ccl").expect("netns");
    // Someone else's: a rule in each table, an LXC bridge, a veth and a set of similar names.
    sh(
        &ns,
        "set -e; iptables -w -t nat -A POSTROUTING -s 10.99.0.0/16 -j MASQUERADE; \
         iptables -w -t filter -A FORWARD -s 10.99.0.0/16 -j ACCEPT; \
         ip link add lxcbr0 type bridge; ip link add calico0 type bridge; \
         ip link add veth0abc type veth peer name veth0abd; ipset create calico-mine hash:ip",
    );
    // What calico-node (Felix, iptables dataplane, VXLAN) and cilium-agent (VXLAN tunnel) make:
    // their devices, a pod's host-side veth each, chains with jumps from the built-in chains, sets.
    sh(
        &ns,
        "set -e; \
         ip link add vxlan.calico type vxlan id 4096 dstport 4789 nolearning; \
         ip link add cali1a2b3c4d5e6 type veth peer name eth0c; \
         iptables -w -t filter -N cali-FORWARD; iptables -w -t filter -A FORWARD -m comment --comment 'cali:wUHhoiAYhphO9Mso' -j cali-FORWARD; \
         iptables -w -t filter -N cali-from-hep-forward; iptables -w -t filter -A cali-FORWARD -j cali-from-hep-forward; \
         iptables -w -t nat -N cali-POSTROUTING; iptables -w -t nat -A POSTROUTING -j cali-POSTROUTING; \
         iptables -w -t mangle -N cali-PREROUTING; iptables -w -t mangle -A PREROUTING -j cali-PREROUTING; \
         ipset create cali40all-ipam-pools hash:net; \
         ip link add cilium_host type veth peer name cilium_net; \
         ip link add cilium_vxlan type vxlan id 2 dstport 8472 nolearning; \
         ip link add lxc0123456789ab type veth peer name eth0l; \
         iptables -w -t filter -N CILIUM_FORWARD; iptables -w -t filter -A FORWARD -m comment --comment 'cilium-feeder: CILIUM_FORWARD' -j CILIUM_FORWARD; \
         iptables -w -t filter -A CILIUM_FORWARD -o cilium_host -j ACCEPT; \
         iptables -w -t nat -N CILIUM_POST_nat; iptables -w -t nat -A POSTROUTING -j CILIUM_POST_nat; \
         ipset create cilium_node_set_v4 hash:ip",
    );
    let script = network_script(None, &[&CALICO, &CILIUM]);
    let said = sh(&ns, &script);
    for part in [
        "link vxlan.calico deleted",
        "link cali1a2b3c4d5e6 deleted",
        "iptables filter: 2 cali-* chain(s) deleted",
        "iptables nat: 1 cali-* chain(s) deleted",
        "iptables mangle: 1 cali-* chain(s) deleted",
        "ipset cali40all-ipam-pools destroyed",
        "link cilium_host deleted",
        "link cilium_vxlan deleted",
        "link lxc0123456789ab deleted",
        "iptables filter: 1 CILIUM_* chain(s) deleted",
        "iptables nat: 1 CILIUM_* chain(s) deleted",
        "ipset cilium_node_set_v4 destroyed",
    ] {
        assert!(said.contains(part), "{part}: {said}");
    }
    let after = sh(&ns, "iptables-save; ip -o link show; ipset list -n");
    for gone in [
        "cali-",
        "CILIUM",
        "vxlan.calico",
        "cali1a2b",
        "cilium_",
        "lxc0123",
        "cali40",
    ] {
        assert!(!after.contains(gone), "{gone}: {after}");
    }
    for kept in [
        "-A POSTROUTING -s 10.99.0.0/16 -j MASQUERADE",
        "-A FORWARD -s 10.99.0.0/16 -j ACCEPT",
        "lxcbr0",
        "calico0",
        "veth0abc",
        "calico-mine",
    ] {
        assert!(after.contains(kept), "{kept}: {after}");
    }
    // Again: nothing left to remove.
    assert_eq!(sh(&ns, &script).trim(), "nothing to remove");
}

#[test]
fn the_cni_agents_netpol_table_goes_other_inet_tables_stay() {
    if !require(
        "root, ip netns and nft",
        is_root() && netns::available() && has("nft", "true"),
    ) {
        return;
    }
    let ns = Netns::new("cnp").expect("netns");
    // The agent's table as it programs it (its own script: a forward hook, sets) and someone
    // else's inet table.
    let rs = clusterctl_cni::agent::netpol::Ruleset {
        ingress_isolated: ["10.244.1.5".parse().expect("ip")].into(),
        ..Default::default()
    };
    let agent = clusterctl_cni::agent::netpol::nft::script(&rs);
    sh(
        &ns,
        &format!(
            "nft -f - <<'EOF'\n{agent}table inet mine {{\n  chain c {{\n    type filter hook forward priority filter; policy accept;\n  }}\n}}\nEOF"
        ),
    );
    assert!(sh(&ns, "nft list tables").contains("table inet clusterctl-netpol"));
    let script = network_script(None, &[]);
    let said = sh(&ns, &script);
    assert!(
        said.contains("nft table inet clusterctl-netpol deleted"),
        "{said}"
    );
    let tables = sh(&ns, "nft list tables");
    assert!(
        !tables.contains("clusterctl-netpol") && tables.contains("table inet mine"),
        "{tables}"
    );
    assert_eq!(sh(&ns, &script).trim(), "nothing to remove");
}
