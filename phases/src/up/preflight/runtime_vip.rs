//! Two checks of preflight that look past the node's own prerequisites (issue 15 items 6 and 7):
//!
//! * `cri-sockets` (a warning): another container runtime's CRI socket next to the file's runtime.
//!   kubeadm refuses to guess between two sockets — clusterctl always sets `criSocket`, and renders
//!   `/etc/crictl.yaml` so that `crictl` talks to the same runtime — but two runtimes on one host
//!   compete for images, cgroups and the pod network, which is worth knowing before `up` changes
//!   anything.
//! * `vip-interface` (an error): the interface kube-vip is told to put the VIP on (`vip_interface` in
//!   the node's rendered kube-vip manifest: the node's `vipInterface`, else `vip.interface`, else the
//!   interface holding the node's address) must exist on that control plane and be up; otherwise
//!   kube-vip crash-loops with "Link not found" once the control plane runs. The facts already list
//!   every interface with its state, so this asks the node nothing more.

use super::Finding;
use crate::up::facts::Link;
use clusterctl_spec::model::RuntimeKind;

/// Read-only probe: prints `cri_socket=<path>` for each CRI socket kubeadm knows that exists.
pub(super) const SOCKETS_SCRIPT: &str = "for s in /run/containerd/containerd.sock /var/run/containerd/containerd.sock /run/crio/crio.sock /var/run/crio/crio.sock /run/cri-dockerd.sock /var/run/cri-dockerd.sock; do [ -S \"$s\" ] && echo \"cri_socket=$s\"; done; true";

/// The CRI sockets kubeadm looks for (kubeadm `cmd/kubeadm/app/util/runtime`'s known endpoints), by
/// the runtime serving them; `/var/run` is `/run` on every supported host.
const KNOWN: &[(&str, &str)] = &[
    ("containerd", "/run/containerd/containerd.sock"),
    ("CRI-O", "/run/crio/crio.sock"),
    ("cri-dockerd (Docker Engine)", "/run/cri-dockerd.sock"),
];

/// The socket paths the probe printed, with `/var/run` written as `/run`, each once.
pub(super) fn sockets(out: &str) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for l in out.lines() {
        if let Some(p) = l.strip_prefix("cri_socket=") {
            let p = p.trim();
            let p = p.strip_prefix("/var").unwrap_or(p).to_string();
            if !v.contains(&p) {
                v.push(p);
            }
        }
    }
    v
}

/// A `cri-sockets` warning when a runtime other than `ours` has its CRI socket on the node.
pub(super) fn other_runtimes(ours: RuntimeKind, present: &[String]) -> Option<Finding> {
    let own = match ours {
        RuntimeKind::Containerd => "containerd",
        RuntimeKind::Crio => "CRI-O",
    };
    let own_socket = KNOWN
        .iter()
        .find(|(n, _)| *n == own)
        .map(|(_, s)| *s)
        .unwrap_or_default();
    let others: Vec<String> = KNOWN
        .iter()
        .filter(|(n, s)| *n != own && present.iter().any(|p| p == s))
        .map(|(n, s)| format!("{n} at {s}"))
        .collect();
    (!others.is_empty()).then(|| Finding {
        id: "cri-sockets".into(),
        message: format!(
            "another container runtime is installed: {} — the cluster uses {own} (kubeadm's criSocket and /etc/crictl.yaml name unix://{own_socket}); two runtimes on one node compete for images, cgroups and the pod network: stop and disable the other one unless it is meant to stay",
            others.join(", ")
        ),
        fix: None,
        warning: true,
    })
}

/// The `vip_interface` of a rendered kube-vip static pod manifest, when it names one.
pub(super) fn manifest_interface(manifest: &str) -> Option<String> {
    let pod: serde_yaml::Value = serde_yaml::from_str(manifest).ok()?;
    pod["spec"]["containers"]
        .as_sequence()?
        .iter()
        .filter_map(|c| c["env"].as_sequence())
        .flatten()
        .find(|e| e["name"].as_str() == Some("vip_interface"))
        .and_then(|e| e["value"].as_str().map(String::from))
}

/// A `vip-interface` error when `interface` is not among `links` or is not up. No finding when the
/// links are unknown (offline, or facts from an older run).
pub(super) fn vip_interface(vip: &str, interface: &str, links: &[Link]) -> Option<Finding> {
    if links.is_empty() {
        return None;
    }
    let listed = || {
        links
            .iter()
            .map(|l| format!("{} ({})", l.name, if l.is_up() { "up" } else { "down" }))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let problem = match links.iter().find(|l| l.name == interface) {
        None => format!("has no interface `{interface}`"),
        Some(l) if !l.is_up() => format!(
            "has interface `{interface}` but it is down (operstate {}, {})",
            if l.operstate.is_empty() {
                "unknown"
            } else {
                l.operstate.as_str()
            },
            if l.admin_up { "set up" } else { "not set up" }
        ),
        Some(_) => return None,
    };
    Some(Finding {
        id: "vip-interface".into(),
        message: format!(
            "this control plane {problem} for the VIP {vip}: kube-vip would crash-loop (\"Link not found\"); its interfaces: {}; set this node's `vipInterface` (or `controlPlane.vip.interface`) in the cluster file to the interface of its network",
            listed()
        ),
        fix: None,
        warning: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(name: &str, operstate: &str, admin_up: bool) -> Link {
        Link {
            name: name.into(),
            mtu: 1500,
            operstate: operstate.into(),
            admin_up,
        }
    }

    #[test]
    fn another_runtimes_socket_is_a_warning_naming_both() {
        let present = sockets(
            "cri_socket=/run/containerd/containerd.sock\ncri_socket=/var/run/crio/crio.sock\ncri_socket=/run/crio/crio.sock\nswap=0\n",
        );
        assert_eq!(
            present,
            ["/run/containerd/containerd.sock", "/run/crio/crio.sock"]
        );
        let f = other_runtimes(RuntimeKind::Containerd, &present).expect("warned");
        assert!(f.warning);
        assert_eq!(f.id, "cri-sockets");
        assert!(
            f.message.contains("CRI-O at /run/crio/crio.sock")
                && f.message.contains("unix:///run/containerd/containerd.sock"),
            "{}",
            f.message
        );
        let f = other_runtimes(RuntimeKind::Crio, &present).expect("warned");
        assert!(f
            .message
            .contains("containerd at /run/containerd/containerd.sock"));
        // Only the file's own runtime, or none at all: nothing to say.
        assert_eq!(
            other_runtimes(
                RuntimeKind::Crio,
                &sockets("cri_socket=/var/run/crio/crio.sock\n")
            ),
            None
        );
        assert_eq!(other_runtimes(RuntimeKind::Containerd, &[]), None);
    }

    #[test]
    fn the_vip_interface_must_exist_and_be_up() {
        let links = [
            link("lo", "unknown", true),
            link("eth0", "up", true),
            link("eth1", "down", true),
        ];
        assert_eq!(vip_interface("10.0.0.50", "eth0", &links), None);
        let f = vip_interface("10.0.0.50", "ens3", &links).expect("missing");
        assert!(!f.warning);
        assert_eq!(f.id, "vip-interface");
        assert!(
            f.message
                .contains("has no interface `ens3` for the VIP 10.0.0.50")
                && f.message.contains("lo (up), eth0 (up), eth1 (down)")
                && f.message.contains("vipInterface"),
            "{}",
            f.message
        );
        let f = vip_interface("10.0.0.50", "eth1", &links).expect("down");
        assert!(
            f.message
                .contains("`eth1` but it is down (operstate down, set up)"),
            "{}",
            f.message
        );
        // Facts without links (offline): nothing known, nothing said.
        assert_eq!(vip_interface("10.0.0.50", "ens3", &[]), None);
    }

    #[test]
    fn the_interface_is_read_from_the_rendered_manifest() {
        let m = "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: kube-vip\n    env:\n    - name: vip_arp\n      value: \"true\"\n    - name: vip_interface\n      value: ens4\n";
        assert_eq!(manifest_interface(m).as_deref(), Some("ens4"));
        assert_eq!(
            manifest_interface(
                "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: kube-vip\n"
            ),
            None
        );
    }
}
