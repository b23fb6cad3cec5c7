//! Built-in profiles: complete cluster files from `profiles/*.yaml`, embedded in the binary together with
//! the small (fake) PEM files they reference, so `clusterctl up --dry-run` and `validate --profile` work
//! on any machine.

use crate::diag::{Diagnostic, Diagnostics, Source};
use crate::load::{Loaded, Referenced};
use std::sync::Arc;

/// The default profile, used by `clusterctl up --dry-run` with no file.
pub const DEFAULT_PROFILE: &str = "lab";

/// (name, description, text) of every profile, default first.
const PROFILES: &[(&str, &str, &str)] = &[
    (
        "lab",
        "kind-style lab: docker provider, builtin CNI, 1 control plane + 2 workers",
        include_str!("../../profiles/lab.yaml"),
    ),
    (
        "kind-calico",
        "seed 000: kind lab with Calico, podSubnet 192.168.0.0/16, a disktype=ssd worker, a preloaded image",
        include_str!("../../profiles/kind-calico.yaml"),
    ),
    (
        "kubeadm-cilium",
        "seed 004 1-239: kubeadm on 3 ssh hosts, Cilium replacing kube-proxy",
        include_str!("../../profiles/kubeadm-cilium.yaml"),
    ),
    (
        "ha-airgap",
        "seed 004 4099-6850: 3+3 nodes, kube-vip VIP (ARP), CRI-O, Harbor mirror with CA, air-gap bundle",
        include_str!("../../profiles/ha-airgap.yaml"),
    ),
    (
        "ha-containerd",
        "ha-airgap with containerd instead of CRI-O (the profile the phase tests run)",
        include_str!("../../profiles/ha-containerd.yaml"),
    ),
    (
        "oidc-audit",
        "seed 004 6851-8053, 8489-8523: Keycloak OIDC for the apiserver, audit policy and log",
        include_str!("../../profiles/oidc-audit.yaml"),
    ),
    (
        "builtin",
        "clusterctl's builtin CNI (veth + VXLAN) on 3 ssh hosts, per-node SSH overrides",
        include_str!("../../profiles/builtin.yaml"),
    ),
];

/// Files the profiles reference, by the path written in them (fake CAs, an audit policy).
const FILES: &[(&str, &str)] = &[
    (
        "harbor-ca.crt",
        include_str!("../../profiles/harbor-ca.crt"),
    ),
    (
        "keycloak-ca.crt",
        include_str!("../../profiles/keycloak-ca.crt"),
    ),
    (
        "audit-policy.yaml",
        include_str!("../../profiles/audit-policy.yaml"),
    ),
];

/// (name, description) of every built-in profile, default first.
pub fn profiles() -> &'static [(&'static str, &'static str)] {
    const LIST: &[(&str, &str)] = &[
        (PROFILES[0].0, PROFILES[0].1),
        (PROFILES[1].0, PROFILES[1].1),
        (PROFILES[2].0, PROFILES[2].1),
        (PROFILES[3].0, PROFILES[3].1),
        (PROFILES[4].0, PROFILES[4].1),
        (PROFILES[5].0, PROFILES[5].1),
        (PROFILES[6].0, PROFILES[6].1),
    ];
    LIST
}

/// The text of a file shipped with the profiles (e.g. `harbor-ca.crt`), by the name the profiles use.
pub fn profile_file(name: &str) -> Option<&'static str> {
    FILES.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// The cluster file of profile `name`, with its referenced files, as if loaded from `profiles/<name>.yaml`.
/// Errors: unknown name (one diagnostic listing the known names).
pub fn from_profile(name: &str) -> Result<Loaded, Diagnostics> {
    let Some((n, _, text)) = PROFILES.iter().find(|(n, _, _)| *n == name) else {
        let names: Vec<&str> = PROFILES.iter().map(|(n, _, _)| *n).collect();
        let src = Arc::new(Source {
            name: format!("profile {name}"),
            text: Arc::new(String::new()),
        });
        return Err(Diagnostics::single(
            src,
            Diagnostic::error(
                "spec::unknown-profile",
                format!("no profile named {name:?}"),
            )
            .help(format!("use one of: {}", names.join(", "))),
        ));
    };
    // Named as the user named it: the embedded file is no path of theirs (`clusterctl profile print`
    // writes it out).
    let mut loaded = Loaded::from_text(format!("profile {n}"), *text);
    loaded.resolve_references(|p| match FILES.iter().find(|(f, _)| *f == p) {
        Some((_, t)) => Referenced::Text((*t).to_string()),
        None => Referenced::Unreadable("not embedded with the profiles".to_string()),
    });
    Ok(loaded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_matches_embedded() {
        let listed: Vec<&str> = profiles().iter().map(|(n, _)| *n).collect();
        let embedded: Vec<&str> = PROFILES.iter().map(|(n, _, _)| *n).collect();
        assert_eq!(listed, embedded);
        assert_eq!(listed.first().copied(), Some(DEFAULT_PROFILE));
        assert!(from_profile("nope").is_err());
    }
}
