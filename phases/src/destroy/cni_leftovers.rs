//! What the agents of the third-party CNIs clusterctl installs (flannel, Calico, Cilium) leave on a
//! node after `kubeadm reset`, which removes none of it: their devices (fixed names and per-pod
//! veths), their iptables chains with every jump to them, their ipsets and their files. `destroy`'s
//! `network` step removes the devices, chains and sets ([`network_fragment`]) and its `files` step the
//! paths ([`CniLeftovers::paths`]) of every CNI in [`LEFTOVERS`] the cluster file names or the node
//! still shows ([`CniLeftovers::detect`]), so a cluster rebuilt with another CNI (`up --recreate`)
//! starts clean. The names are those of the pinned releases (flannel v0.28, Calico v3.32 through the
//! tigera operator, Cilium 1.20): their manifests' host paths, their agents' device and chain names.
//!
//! Not removed: Calico's `tunl0` (the kernel's IPIP fallback device, which exists while the `ipip`
//! module is loaded and cannot be deleted), BPF programs and maps Cilium pinned outside
//! `/sys/fs/bpf/cilium` (`/sys/fs/bpf/tc/globals` is shared with other tc programs), and nftables
//! tables of Calico's nftables dataplane (not the operator's default).

use clusterctl_spec::model::CniPlugin;

/// One third-party CNI's node leftovers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CniLeftovers {
    /// The `cni.plugin` that installs it.
    pub plugin: CniPlugin,
    /// Devices by exact name, deleted when present.
    pub devices: &'static [&'static str],
    /// An extended regular expression (grep -E, anchored) matching the per-pod host-side veths the
    /// CNI names, deleted when present; `None`: the runtime's names (`veth…`), left to it.
    pub pod_devices: Option<&'static str>,
    /// iptables chain name prefixes: every chain of these names, in every table `iptables-save` and
    /// `ip6tables-save` list, and every rule jumping to one, removed.
    pub chain_prefixes: &'static [&'static str],
    /// ipset name prefixes: every set of these names destroyed (after the chains that match them).
    pub ipset_prefixes: &'static [&'static str],
    /// Files and directories removed by the `files` step (its conflist is in
    /// `crate::up::preflight::cni_switch::CONFLISTS` already).
    pub paths: &'static [&'static str],
    /// A read-only shell test that succeeds when the node still shows this CNI (its conflist, its state
    /// directory or its main device), so its leftovers go even when the file names another CNI now.
    pub detect: &'static str,
}

/// flannel: flanneld's VXLAN device (VNI 1) and the bridge its CNI plugin delegates to (`bridge`'s
/// default name), `FLANNEL-POSTRTG` (nat, `--ip-masq`) and `FLANNEL-FWD` (filter); the conflist and
/// plugin its `install-cni` and `install-cni-plugin` init containers copy, flanneld's lease directory
/// (`subnet.env`), its CNI plugin's `dataDir` and `host-local`'s state for its network `cbr0`.
pub const FLANNEL: CniLeftovers = CniLeftovers {
    plugin: CniPlugin::Flannel,
    devices: &["flannel.1", "cni0"],
    pod_devices: None,
    chain_prefixes: &["FLANNEL-"],
    ipset_prefixes: &[],
    paths: &[
        "/etc/cni/net.d/10-flannel.conflist",
        "/opt/cni/bin/flannel",
        "/run/flannel",
        "/var/lib/cni/flannel",
        "/var/lib/cni/networks/cbr0",
    ],
    detect: "[ -e /etc/cni/net.d/10-flannel.conflist ] || [ -d /run/flannel ]",
};

/// Calico (calico-node): its VXLAN devices (IPv4, IPv6) and WireGuard devices, the per-pod veths
/// `cali` + 11 hex digits, the `cali-*` chains of Felix's iptables dataplane (filter, nat, mangle,
/// raw), Felix's ipsets (`cali40…`, `cali60…`); the kubeconfig and the `calico`/`calico-ipam`
/// plugins its `install-cni` init container writes, and calico-node's host paths (`/var/lib/calico`,
/// `/var/run/calico`, `/var/log/calico`, `/var/run/nodeagent`).
pub const CALICO: CniLeftovers = CniLeftovers {
    plugin: CniPlugin::Calico,
    devices: &["vxlan.calico", "vxlan-v6.calico", "wireguard.cali", "wg-v6.cali"],
    pod_devices: Some("cali[0-9a-f]{11}"),
    chain_prefixes: &["cali-"],
    ipset_prefixes: &["cali40", "cali60"],
    paths: &[
        "/etc/cni/net.d/calico-kubeconfig",
        "/opt/cni/bin/calico",
        "/opt/cni/bin/calico-ipam",
        "/var/lib/calico",
        "/run/calico",
        "/var/log/calico",
        "/run/nodeagent",
        "/var/lib/cni/networks/k8s-pod-network",
    ],
    detect: "[ -e /etc/cni/net.d/10-calico.conflist ] || [ -d /var/lib/calico ] || ip link show dev vxlan.calico >/dev/null 2>&1",
};

/// Cilium (cilium-agent): `cilium_host`/`cilium_net`, its tunnel devices (VXLAN, Geneve), WireGuard
/// device and health endpoint, the per-pod veths `lxc` + hex digits, the `CILIUM_*` chains (and
/// `OLD_CILIUM_*` of an interrupted agent restart), its node ipsets; its conflist's plugin
/// `cilium-cni`, the agent's state directory (`/var/run/cilium`) and its BPF filesystem directory.
pub const CILIUM: CniLeftovers = CniLeftovers {
    plugin: CniPlugin::Cilium,
    devices: &[
        "cilium_host",
        "cilium_net",
        "cilium_vxlan",
        "cilium_geneve",
        "cilium_wg0",
        "lxc_health",
    ],
    pod_devices: Some("lxc[0-9a-f]{8,13}"),
    chain_prefixes: &["CILIUM_", "OLD_CILIUM_"],
    ipset_prefixes: &["cilium_node_set_"],
    paths: &["/opt/cni/bin/cilium-cni", "/run/cilium", "/sys/fs/bpf/cilium"],
    detect: "[ -e /etc/cni/net.d/05-cilium.conflist ] || [ -d /run/cilium ] || ip link show dev cilium_host >/dev/null 2>&1",
};

/// Every third-party CNI whose leftovers `destroy` removes.
pub const LEFTOVERS: &[CniLeftovers] = &[FLANNEL, CALICO, CILIUM];

/// The leftovers of `plugin`; `None` for the builtin CNI (its own steps), kindnet (kind's node
/// containers go whole) and `none`.
pub fn of(plugin: CniPlugin) -> Option<&'static CniLeftovers> {
    LEFTOVERS.iter().find(|l| l.plugin == plugin)
}

/// A read-only script printing, one per line, the index in [`LEFTOVERS`] of each CNI the node still
/// shows ([`CniLeftovers::detect`]): one query for all of them.
pub fn detect_script() -> String {
    let mut s = String::new();
    for (i, cni) in LEFTOVERS.iter().enumerate() {
        s.push_str(&format!("if {}; then echo {i}; fi; ", cni.detect));
    }
    s.push_str("true");
    s
}

/// The CNIs of [`LEFTOVERS`] named by the output of [`detect_script`].
pub fn detected(out: &str) -> Vec<&'static CniLeftovers> {
    out.lines()
        .filter_map(|l| l.trim().parse::<usize>().ok())
        .filter_map(|i| LEFTOVERS.get(i))
        .collect()
}

/// The shell fragment removing `cni`'s devices, chains (with the jumps to them) and ipsets, appending
/// what it removed to `$out` (e.g. ` link cilium_host deleted; iptables nat: 3 CILIUM_* chain(s)
/// deleted;`). Each table holding such a chain is saved, its lines dropped and the rest restored
/// (as the `kube-proxy` step does for `KUBE-*`); only tables `*-save` lists are read (reading another
/// could create it).
pub fn network_fragment(cni: &CniLeftovers) -> String {
    let mut s = String::new();
    for d in cni.devices {
        s.push_str(&format!(
            "if ip link show dev {d} >/dev/null 2>&1; then ip link del dev {d} && out=\"$out link {d} deleted;\"; fi; "
        ));
    }
    if let Some(re) = cni.pod_devices {
        s.push_str(&format!(
            "for d in $(ip -o link show 2>/dev/null | awk -F': ' '{{print $2}}' | cut -d@ -f1 | grep -E '^{re}$'); do \
             ip link del dev \"$d\" && out=\"$out link $d deleted;\"; done; "
        ));
    }
    for p in cni.chain_prefixes {
        s.push_str(&chains_fragment(p));
    }
    for p in cni.ipset_prefixes {
        s.push_str(&format!(
            "if command -v ipset >/dev/null 2>&1; then for set in $(ipset list -n 2>/dev/null | grep '^{p}'); do \
             ipset destroy \"$set\" && out=\"$out ipset $set destroyed;\"; done; fi; "
        ));
    }
    s
}

/// Removes the iptables/ip6tables chains named `prefix…` and every rule jumping to one.
fn chains_fragment(prefix: &str) -> String {
    format!(
        "for v in iptables ip6tables; do command -v $v-save >/dev/null 2>&1 || continue; \
         for t in $($v-save 2>/dev/null | sed -n 's/^\\*//p'); do \
         cur=$($v-save -t \"$t\" 2>/dev/null); \
         n=$(printf '%s\\n' \"$cur\" | grep -c '^:{prefix}'); [ \"$n\" -gt 0 ] || continue; \
         printf '%s\\n' \"$cur\" | grep -v -e '^:{prefix}' -e '^-A {prefix}' -e ' -[jg] {prefix}' | $v-restore || exit 1; \
         out=\"$out $v $t: $n {prefix}* chain(s) deleted;\"; done; done; "
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_third_party_cni_with_an_agent_has_leftovers_and_the_others_none() {
        for p in [CniPlugin::Flannel, CniPlugin::Calico, CniPlugin::Cilium] {
            let l = of(p).expect("leftovers");
            assert!(!l.devices.is_empty() && !l.chain_prefixes.is_empty() && !l.paths.is_empty());
            assert!(l.paths.iter().all(|p| p.starts_with('/') && p.len() > 5));
        }
        for p in [CniPlugin::Builtin, CniPlugin::Kindnet, CniPlugin::None] {
            assert!(of(p).is_none());
        }
    }

    #[test]
    fn one_detect_script_names_every_cni_the_node_shows() {
        let script = detect_script();
        for cni in LEFTOVERS {
            assert!(script.contains(cni.detect), "{script}");
        }
        assert_eq!(detected("0\n2\n"), [&FLANNEL, &CILIUM]);
        assert!(detected("").is_empty() && detected("9\nx\n").is_empty());
    }

    #[test]
    fn the_fragment_names_each_device_chain_and_set() {
        let s = network_fragment(&CILIUM);
        for part in [
            "ip link del dev cilium_host",
            "grep -E '^lxc[0-9a-f]{8,13}$'",
            "grep -c '^:CILIUM_'",
            "grep -c '^:OLD_CILIUM_'",
            "grep '^cilium_node_set_'",
        ] {
            assert!(s.contains(part), "{part}: {s}");
        }
        assert!(!network_fragment(&FLANNEL).contains("ipset"));
    }
}
