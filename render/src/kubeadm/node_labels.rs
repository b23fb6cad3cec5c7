//! The kubelet's `--node-labels` flag (`nodeRegistration.kubeletExtraArgs` `node-labels`), so a node's
//! labels exist from the moment it registers and no pod lands before they are set. Only the labels a
//! kubelet may set on its own Node go through the flag: since Kubernetes 1.16 the kubelet refuses to
//! start when `--node-labels` holds a key in the `kubernetes.io` or `k8s.io` namespaces (the namespace
//! itself or any subdomain of it) that is not kubelet-settable, and the NodeRestriction admission plugin
//! refuses the same keys (kubernetes/kubernetes `cmd/kubelet/app/options/options.go` `isKubernetesLabel`,
//! `staging/src/k8s.io/kubelet/pkg/apis/well_known_labels.go` `KubeletLabels`/`KubeletLabelNamespaces`/
//! `IsKubeletLabel`). Other labels, e.g. `node-role.kubernetes.io/worker`, are left to the API patch of
//! the `up` labels step.

use std::collections::BTreeMap;

/// Keys a kubelet may set on its own Node (`well_known_labels.go` `kubeletLabels`).
pub(crate) const KUBELET_LABELS: [&str; 11] = [
    "kubernetes.io/hostname",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
];

/// Key namespaces (and their subdomains) a kubelet may set (`well_known_labels.go`
/// `kubeletLabelNamespaces`).
pub(crate) const KUBELET_LABEL_NAMESPACES: [&str; 2] =
    ["kubelet.kubernetes.io", "node.kubernetes.io"];

/// The namespace of a label key: the part before the first `/`, empty when there is none.
fn namespace(key: &str) -> &str {
    key.split_once('/').map(|(ns, _)| ns).unwrap_or("")
}

/// `ns` is `domain` or a subdomain of it.
fn in_domain(ns: &str, domain: &str) -> bool {
    ns == domain
        || ns
            .strip_suffix(domain)
            .is_some_and(|rest| rest.ends_with('.'))
}

/// True when `key` is in the `kubernetes.io` or `k8s.io` namespaces (`isKubernetesLabel`).
pub(crate) fn is_kubernetes_label(key: &str) -> bool {
    let ns = namespace(key);
    in_domain(ns, "kubernetes.io") || in_domain(ns, "k8s.io")
}

/// True when a kubelet may set `key` on its own Node (`IsKubeletLabel`).
pub(crate) fn is_kubelet_label(key: &str) -> bool {
    if KUBELET_LABELS.contains(&key) {
        return true;
    }
    let ns = namespace(key);
    KUBELET_LABEL_NAMESPACES
        .iter()
        .any(|allowed| in_domain(ns, allowed))
}

/// True when `key=value` may go through `--node-labels`: the kubelet accepts the key, and neither
/// part holds the flag's separators `,` or `=` (spec validation already forbids them; this keeps the
/// flag well-formed whatever it is given).
pub(crate) fn fits_flag(key: &str, value: &str) -> bool {
    let plain = |s: &str| !s.is_empty() && !s.contains([',', '=']);
    plain(key)
        && (value.is_empty() || plain(value))
        && (!is_kubernetes_label(key) || is_kubelet_label(key))
}

/// The `node-labels` value `k1=v1,k2=v2` (sorted by key, as the map is) of the labels that fit the
/// flag ([`fits_flag`]); `None` when none does.
pub(crate) fn node_labels_flag(labels: &BTreeMap<String, String>) -> Option<String> {
    let parts: Vec<String> = labels
        .iter()
        .filter(|(k, v)| fits_flag(k, v))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    (!parts.is_empty()).then(|| parts.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn kubelet_settable_keys() {
        for k in KUBELET_LABELS {
            assert!(is_kubelet_label(k), "{k}");
            assert!(fits_flag(k, "x"), "{k}");
        }
        for k in [
            "node.kubernetes.io/exclude-from-external-load-balancers",
            "kubelet.kubernetes.io/x",
            "a.node.kubernetes.io/x",
            "disktype",
            "example.com/gpu",
            "notkubernetes.io/x",
        ] {
            assert!(fits_flag(k, "v"), "{k}");
        }
    }

    #[test]
    fn restricted_keys_are_refused() {
        for k in [
            "node-role.kubernetes.io/worker",
            "node-role.kubernetes.io/control-plane",
            "kubernetes.io/role",
            "k8s.io/x",
            "example.k8s.io/x",
            "node-restriction.kubernetes.io/x",
            "xnode.kubernetes.io/x",
        ] {
            assert!(is_kubernetes_label(k), "{k}");
            assert!(!fits_flag(k, ""), "{k}");
        }
        assert!(!is_kubernetes_label("disktype"));
        assert!(!is_kubernetes_label("notkubernetes.io/x"));
    }

    #[test]
    fn separators_never_reach_the_flag() {
        assert!(!fits_flag("a", "b,c=d"));
        assert!(!fits_flag("a=b", "c"));
        assert!(!fits_flag("", "c"));
        assert!(fits_flag("a", ""));
    }

    #[test]
    fn flag_is_sorted_and_filtered() {
        let m = map(&[
            ("zone", "b"),
            ("node-role.kubernetes.io/worker", ""),
            ("disktype", "ssd"),
            ("topology.kubernetes.io/zone", "z1"),
            ("bad", "x,y"),
            ("empty", ""),
        ]);
        assert_eq!(
            node_labels_flag(&m).as_deref(),
            Some("disktype=ssd,empty=,topology.kubernetes.io/zone=z1,zone=b")
        );
        assert_eq!(
            node_labels_flag(&map(&[("node-role.kubernetes.io/x", "")])),
            None
        );
        assert_eq!(node_labels_flag(&BTreeMap::new()), None);
    }
}
