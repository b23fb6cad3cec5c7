//! `cni-switch` (an error, issue 13): the node carries the CNI configuration of another of the CNIs
//! clusterctl installs than the file's `cni.plugin` — a cluster made with `builtin` whose file now says
//! `flannel`, or the reverse. `up` does not switch the CNI of an existing cluster in place: every
//! running pod keeps the old plugin's network, the container runtime keeps picking the first
//! configuration of `/etc/cni/net.d` in name order (`05-cilium` before `10-calico` before
//! `10-clusterctl` before `10-flannel` before `10-kindnet`), and the old plugin's agent would go on
//! rewriting its file. As with kind, k0s ("the network provider cannot be changed after the cluster is
//! created") and kubeadm (a CNI is installed once; `kubeadm reset` leaves `/etc/cni/net.d` to the
//! user), the way is a new cluster: `clusterctl up --recreate`, whose `destroy` removes every
//! configuration listed here ([`CONFLISTS`]) and the old CNI's agent, devices and files.

use super::Finding;

/// The configuration file each CNI clusterctl installs writes into `/etc/cni/net.d`, by
/// `cni.plugin`: the builtin agent's, and the names the pinned upstream manifests and charts use
/// (flannel's `install-cni` init container, Calico's `install-cni`, Cilium's `cni.confFileName`
/// default, kind's kindnetd).
pub(crate) const CONFLISTS: &[(&str, &str)] = &[
    ("builtin", "10-clusterctl.conflist"),
    ("flannel", "10-flannel.conflist"),
    ("calico", "10-calico.conflist"),
    ("cilium", "05-cilium.conflist"),
    ("kindnet", "10-kindnet.conflist"),
];

/// Where the container runtime reads CNI configurations from.
pub(crate) const NET_D: &str = "/etc/cni/net.d";

/// Read-only probe: prints `cni_conf=<names>` — the files of [`NET_D`].
pub(super) const CONF_SCRIPT: &str =
    "echo \"cni_conf=$(ls /etc/cni/net.d 2>/dev/null | tr '\\n' ' ')\"";

/// The file names the probe printed.
pub(super) fn confs(out: &str) -> Vec<String> {
    out.lines()
        .filter_map(|l| l.strip_prefix("cni_conf="))
        .flat_map(|v| v.split_whitespace().map(str::to_string))
        .collect()
}

/// One `cni-switch` error per configuration in `present` that belongs to another CNI than `chosen`
/// (the file's `cni.plugin`: `builtin`, `flannel`, `calico`, `cilium`, `kindnet` or `none`).
pub(super) fn other_cni(chosen: &str, present: &[String]) -> Vec<Finding> {
    CONFLISTS
        .iter()
        .filter(|(plugin, name)| *plugin != chosen && present.iter().any(|p| p == name))
        .map(|(plugin, name)| Finding {
            id: "cni-switch".into(),
            message: format!(
                "{NET_D}/{name} is the configuration of the {plugin} CNI (cni.plugin: {plugin}) and the file says cni.plugin: {chosen}: `up` does not change the CNI of an existing cluster in place (running pods keep the old network, the runtime keeps reading the first configuration in name order, the old agent keeps its files); rebuild the cluster with `clusterctl up --recreate` (destroys it first, removing the old CNI's configuration, agent and devices from every node; workloads are lost), or set cni.plugin back to {plugin}"
            ),
            fix: None,
            warning: false,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(chosen: &str, present: &[&str]) -> Vec<String> {
        let present: Vec<String> = present.iter().map(|s| s.to_string()).collect();
        other_cni(chosen, &present)
            .into_iter()
            .map(|f| f.message.split(' ').next().unwrap_or_default().to_string())
            .collect()
    }

    #[test]
    fn another_cnis_configuration_is_refused_pointing_at_recreate() {
        // builtin → flannel: the builtin agent's conflist is left; flannel → builtin the reverse.
        assert_eq!(
            ids("flannel", &["10-clusterctl.conflist"]),
            ["/etc/cni/net.d/10-clusterctl.conflist"]
        );
        assert_eq!(
            ids("builtin", &["10-flannel.conflist"]),
            ["/etc/cni/net.d/10-flannel.conflist"]
        );
        let f = other_cni("flannel", &["10-clusterctl.conflist".to_string()]);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].id, "cni-switch");
        assert!(!f[0].warning && f[0].fix.is_none());
        assert!(
            f[0].message.contains("the builtin CNI")
                && f[0].message.contains("cni.plugin: flannel")
                && f[0].message.contains("clusterctl up --recreate")
                && f[0].message.contains("set cni.plugin back to builtin"),
            "{}",
            f[0].message
        );
        // none after builtin, and every other pair.
        assert_eq!(ids("none", &["10-clusterctl.conflist"]).len(), 1);
        assert_eq!(
            ids("calico", &["05-cilium.conflist", "10-kindnet.conflist"]).len(),
            2
        );
    }

    #[test]
    fn the_files_own_cni_and_unknown_files_pass() {
        for (plugin, name) in CONFLISTS {
            assert!(ids(plugin, &[name]).is_empty(), "{plugin}");
        }
        assert!(ids("builtin", &["99-loopback.conf", "87-podman.conflist"]).is_empty());
        assert!(ids("none", &[]).is_empty());
        assert_eq!(
            confs("swap=0\ncni_conf=10-flannel.conflist 99-x.conf \n"),
            ["10-flannel.conflist", "99-x.conf"]
        );
        assert!(confs("cni_conf=\n").is_empty());
    }
}
