//! The shell scripts of a node's reset (`destroy`, `node remove`): each does its part only where the
//! node still has it and prints what it removed, so that a second run finds nothing and says so.

use clusterctl_render::kubeadm::RESET_PATH;
use clusterctl_render::Purpose;

use super::cni_leftovers::{network_fragment, CniLeftovers};
use clusterctl_exec::shell::quote_word;

/// Packages `--purge` removes (when installed), besides the cluster file's `airgap.packages`.
pub const K8S_PACKAGES: &[&str] = &[
    "kubeadm",
    "kubelet",
    "kubectl",
    "cri-tools",
    "kubernetes-cni",
];

/// VXLAN devices the builtin CNI creates (the agent's default name, and the documented `clusterctl.<VNI>`).
pub const VXLAN_DEVICES: &[&str] = &["cc-vxlan", "clusterctl.1"];

/// Paths clusterctl installs on every node besides the rendered files.
pub const INSTALLED_PATHS: &[&str] = &[
    "/etc/cni/net.d/10-clusterctl.conflist",
    "/opt/cni/bin/clusterctl-cni",
    "/usr/local/bin/clusterctl",
    "/etc/clusterctl",
    "/var/lib/clusterctl",
    "/var/lib/cni/clusterctl",
    "/run/clusterctl-cni",
    "/etc/kubernetes/kubeadm",
    "/etc/modules-load.d/clusterctl.conf",
    "/etc/sysctl.d/99-clusterctl.conf",
];

/// The configuration file of every CNI clusterctl installs
/// (`crate::up::preflight::cni_switch::CONFLISTS`), as paths.
pub fn cni_conflists() -> Vec<String> {
    use crate::up::preflight::cni_switch::{CONFLISTS, NET_D};
    CONFLISTS
        .iter()
        .map(|(_, name)| format!("{NET_D}/{name}"))
        .collect()
}

/// Rendered files removed only when the state record says clusterctl placed them (a runtime config may
/// have existed before).
pub const RUNTIME_CONFIG: &[Purpose] = &[
    Purpose::ContainerdConfig,
    Purpose::CrioConfig,
    Purpose::RegistriesConf,
];

/// Prints `yes` when the node has kubeadm.
pub const HAS_KUBEADM: &str = "command -v kubeadm >/dev/null 2>&1 && echo yes || echo no";

/// `kubeadm reset -f --config` with the rendered ResetConfiguration when it is on the node (a kubeadm
/// that refuses to mix `--force` with `--config` is answered `y` on its prompt instead), else
/// `kubeadm reset -f`.
pub fn kubeadm_reset() -> String {
    format!(
        "if [ -f {RESET_PATH} ]; then \
         out=$(kubeadm reset -f --config {RESET_PATH} 2>&1) || case \"$out\" in \
           *'can not mix'*) printf 'y\\n' | kubeadm reset --config {RESET_PATH} >/dev/null ;; \
           *) printf '%s\\n' \"$out\" >&2; exit 1 ;; esac; \
         else kubeadm reset -f >/dev/null; fi"
    )
}

/// `systemctl daemon-reload`, when the node has systemd.
pub const DAEMON_RELOAD: &str = "if command -v systemctl >/dev/null 2>&1; then systemctl daemon-reload && echo reloaded; else echo 'no systemd'; fi";

/// The units `up` installs and enables on a node, by name: the CNI agent (`up::cni::AGENT_UNIT`)
/// and the node environment of unprivileged-container nodes (the file name of render's
/// `NODE_ENV_UNIT`).
fn units() -> [&'static str; 2] {
    let node_env = clusterctl_render::host::NODE_ENV_UNIT;
    [
        crate::up::cni::AGENT_UNIT,
        node_env.rsplit('/').next().unwrap_or(node_env),
    ]
}

/// Stops and disables each of [`units`] the node has (before their files go, so no `*.wants/` link is
/// left dangling), printing which (`no unit` when none).
pub fn units_script() -> String {
    let mut script = String::from("out=''; if command -v systemctl >/dev/null 2>&1; then ");
    for u in units() {
        script.push_str(&format!(
            "if systemctl cat {u} >/dev/null 2>&1; then systemctl disable --now {u} >/dev/null 2>&1 || true; out=\"$out {u} disabled;\"; fi; "
        ));
    }
    script.push_str("fi; echo \"${out:-no unit}\"");
    script
}

/// The VXLAN devices, the masquerade rule in both forms, the NetworkPolicy table, the leftovers of each of `cnis` (their
/// devices, chains and ipsets: [`super::cni_leftovers::network_fragment`]) and, with `vip`, the kube-vip
/// address, removed; prints what it removed (`nothing to remove` when nothing).
pub fn network_script(vip: Option<&str>, cnis: &[&CniLeftovers]) -> String {
    let mut net = String::from("out=''; ");
    for d in VXLAN_DEVICES {
        net.push_str(&format!(
            "if ip link show dev {d} >/dev/null 2>&1; then ip link del dev {d} && out=\"$out link {d} deleted;\"; fi; "
        ));
    }
    net.push_str(&masquerade_script());
    net.push_str(&netpol_script());
    if let Some(vip) = vip {
        net.push_str(&vip_script(vip));
    }
    for cni in cnis {
        net.push_str(&network_fragment(cni));
    }
    net.push_str("echo \"${out:-nothing to remove}\"");
    net
}

/// The shell fragment removing the builtin CNI agent's masquerade rule in both forms (render's
/// `cni::masq` names), appending what it removed to `$out`.
pub fn masquerade_script() -> String {
    use clusterctl_render::cni::masq::{CHAIN, COMMENT, TABLE};
    format!(
        "if command -v nft >/dev/null 2>&1 && nft list table ip {TABLE} >/dev/null 2>&1; then \
         nft delete table ip {TABLE} && out=\"$out nft table {TABLE} deleted;\"; fi; \
         if command -v iptables >/dev/null 2>&1; then \
         while iptables -w -t nat -D POSTROUTING -m comment --comment {COMMENT} -j {CHAIN} 2>/dev/null; do \
         out=\"$out iptables jump to {CHAIN} deleted;\"; done; \
         if iptables -w -t nat -F {CHAIN} 2>/dev/null; then iptables -w -t nat -X {CHAIN} && \
         out=\"$out iptables chain {CHAIN} deleted;\"; fi; fi; "
    )
}

/// The shell fragment deleting the builtin CNI agent's NetworkPolicy table (render's `cni::netpol`
/// names; the agent itself never deletes it, so that enforcement survives its restarts), appending
/// what it removed to `$out`.
pub fn netpol_script() -> String {
    use clusterctl_render::cni::netpol::{FAMILY, TABLE};
    format!(
        "if command -v nft >/dev/null 2>&1 && nft list table {FAMILY} {TABLE} >/dev/null 2>&1; then \
         nft delete table {FAMILY} {TABLE} && out=\"$out nft table {FAMILY} {TABLE} deleted;\"; fi; "
    )
}

/// The shell fragment taking the address `vip` off every interface that still holds it (kube-vip
/// assigns it as `<vip>/32` in ARP mode), appending what it removed to `$out`.
pub fn vip_script(vip: &str) -> String {
    let v = quote_word(vip);
    format!(
        "for a in $(ip -o addr show | awk -v v={v} '{{split($4, x, \"/\"); if (x[1] == v) print $2 \"|\" $4}}'); do \
         ip addr del \"${{a#*|}}\" dev \"${{a%%|*}}\" && out=\"$out address ${{a#*|}} removed from ${{a%%|*}};\"; done; "
    )
}

/// Removes kube-proxy's and the kubelet's `KUBE-*` iptables chains (what `kubeadm reset` advises but
/// leaves to the user), without touching any other rule: for `iptables` and `ip6tables`, each table
/// the node has that holds a `KUBE-*` chain or a jump to one is saved, those lines dropped and the
/// rest restored (as `kube-proxy --cleanup` does); kube-proxy's nftables tables (`ip`/`ip6
/// kube-proxy`) are deleted. Then, on nftables-backed iptables, a table left empty (built-in chains
/// accepting, no rule) that the record of tables before `up` (`crate::undo::TABLES_RECORD`) does not
/// name is deleted. Prints what it removed (`nothing to remove` when nothing). Tables the node does
/// not have are never read (reading one could load it).
pub fn kube_proxy_script() -> String {
    kube_proxy_script_with(crate::undo::TABLES_RECORD)
}

/// [`kube_proxy_script`] reading the record of tables before `up` from `tables_record`.
pub fn kube_proxy_script_with(tables_record: &str) -> String {
    let rec = quote_word(tables_record);
    format!(
        r#"out=''
for v in iptables ip6tables; do
  command -v $v-save >/dev/null 2>&1 && command -v $v-restore >/dev/null 2>&1 || continue
  for t in $($v-save 2>/dev/null | sed -n 's/^\*//p'); do
    cur=$($v-save -t "$t" 2>/dev/null) || continue
    n=$(printf '%s\n' "$cur" | grep -c '^:KUBE-')
    j=$(printf '%s\n' "$cur" | grep -c -e ' -[jg] KUBE-')
    [ "$n" -gt 0 ] || [ "$j" -gt 0 ] || continue
    printf '%s\n' "$cur" | grep -v -e '^:KUBE-' -e '^-A KUBE-' -e ' -[jg] KUBE-' | $v-restore || exit 1
    out="$out $v $t: $n KUBE-* chain(s) deleted;"
  done
  fam=ip; [ $v = ip6tables ] && fam=ip6
  if [ -f {rec} ] && command -v nft >/dev/null 2>&1 && $v -V 2>/dev/null | grep -q nf_tables; then
    for t in $($v-save 2>/dev/null | sed -n 's/^\*//p'); do
      grep -qxF "$v $t" {rec} && continue
      rest=$($v-save -t "$t" 2>/dev/null | grep -v -e '^#' -e '^\*' -e '^COMMIT' | grep -v -E '^:[A-Z]+ ACCEPT')
      [ -z "$rest" ] || continue
      nft delete table $fam "$t" && out="$out $v table $t (empty, made after up) deleted;"
    done
  fi
done
if command -v nft >/dev/null 2>&1; then
  for f in ip ip6; do
    if nft list table $f kube-proxy >/dev/null 2>&1; then nft delete table $f kube-proxy && out="$out nft table $f kube-proxy deleted;"; fi
  done
fi
echo "${{out:-nothing to remove}}""#
    )
}

/// Restarts the container runtime whose configuration was among `restored`, when it is running.
pub fn restart_runtime_script(restored: &[String]) -> String {
    let unit = if restored.iter().any(|p| p.starts_with("/etc/containerd/")) {
        "containerd"
    } else if restored
        .iter()
        .any(|p| p.starts_with("/etc/crio/") || p.starts_with("/etc/containers/"))
    {
        "crio"
    } else {
        return String::new();
    };
    format!(
        "if systemctl is-active --quiet {unit}; then systemctl restart {unit} && echo '{unit} restarted'; else echo '{unit} not running'; fi"
    )
}

/// Removes `paths` (files or whole directories) that exist, then the empty directories `up` made
/// (`crate::undo`: those under its roots that the record made before `up` does not name); prints
/// `N path(s) removed` and what it did with the directories.
pub fn files_script(paths: &[String]) -> String {
    let mut script = crate::undo::keep_dirs_prelude();
    script.push_str("n=0; ");
    for p in paths {
        let q = quote_word(p);
        script.push_str(&format!(
            "if [ -e {q} ] || [ -L {q} ]; then rm -rf -- {q} && n=$((n+1)); fi; "
        ));
    }
    script.push_str("msg=\"$n path(s) removed\"\n");
    script.push_str(&crate::undo::remove_new_dirs_script());
    script.push_str("echo \"$msg\"");
    script
}
