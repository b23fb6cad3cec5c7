//! The keys of `spec.networking.cni.values` that clusterctl sets itself in a third-party CNI's
//! configuration (Calico's `Installation` spec, Cilium's Helm values, flannel's `net-conf.json`): the
//! one list validation refuses them from, with the reason (a value typed there would be overwritten
//! silently), and the few defaults clusterctl sets only when the user does not (those are honoured).
//! The renderer (`clusterctl_render::cni`) is what sets them; a render test asserts that every key it
//! sets is listed here, so that a key added there is refused or honoured here, never dropped.

use crate::model::CniPlugin;

/// A key of the CNI values that clusterctl sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnedKey {
    /// The key's path from the top of the values, dotted (`image.repository`); with `anywhere`, a
    /// single key name.
    pub path: &'static str,
    /// The key is refused at any depth (`ipam.operator.clusterPoolIPv4PodCIDRList`), not only at
    /// `path` from the top.
    pub anywhere: bool,
    /// Why it may not be set, and what to use instead.
    pub reason: &'static str,
}

const fn at(path: &'static str, reason: &'static str) -> OwnedKey {
    OwnedKey {
        path,
        anywhere: false,
        reason,
    }
}

const fn anywhere(path: &'static str, reason: &'static str) -> OwnedKey {
    OwnedKey {
        path,
        anywhere: true,
        reason,
    }
}

const POOL: &str = "the pool CIDR comes from podSubnet";
const MIRROR: &str =
    "clusterctl sets it to the registry mirror (spec.registry) so that the images it preloads and bundles are the ones pulled";
const CILIUM_IMAGE: &str =
    "clusterctl pins the image to networking.cni.version (from the registry mirror when there is one)";
const MTU: &str = "use networking.cni.mtu";

const CALICO: &[OwnedKey] = &[
    anywhere("ipPools", POOL),
    anywhere("cidr", POOL),
    anywhere("calicoNetwork", POOL),
    at("registry", MIRROR),
    at("imagePath", MIRROR),
];

const CILIUM: &[OwnedKey] = &[
    anywhere("ipv4NativeRoutingCIDR", "it is set to podSubnet"),
    anywhere("ipv6NativeRoutingCIDR", "it is set to podSubnet"),
    anywhere("clusterPoolIPv4PodCIDRList", "pod CIDRs come from podSubnet"),
    anywhere("k8sServiceHost", "it is set to the control-plane endpoint"),
    anywhere("k8sServicePort", "it is set to the control-plane endpoint"),
    anywhere(
        "kubeProxyReplacement",
        "use networking.cni.kubeProxyReplacement",
    ),
    at(
        "ipam.mode",
        "clusterctl sets `kubernetes`: pod CIDRs come from podSubnet through the controller manager",
    ),
    at("MTU", MTU),
    at("image.repository", CILIUM_IMAGE),
    at("image.tag", CILIUM_IMAGE),
    at("image.useDigest", CILIUM_IMAGE),
    at("operator.image.repository", CILIUM_IMAGE),
    at("operator.image.tag", CILIUM_IMAGE),
    at("operator.image.useDigest", CILIUM_IMAGE),
    at(
        "envoy.enabled",
        "clusterctl runs Envoy inside the agent (`false`): a separate Envoy DaemonSet needs an image clusterctl does not preload or bundle",
    ),
];

const FLANNEL: &[OwnedKey] = &[
    anywhere("Network", "it is set to podSubnet"),
    anywhere("network", "it is set to podSubnet"),
    at("IPv6Network", "it is set to podSubnet"),
    at("EnableIPv4", "it follows podSubnet's address family"),
    at("EnableIPv6", "it follows podSubnet's address family"),
    at("Backend.mtu", MTU),
];

/// The keys of `plugin`'s values that clusterctl sets and validation refuses (empty for the CNIs
/// without pass-through values).
pub fn owned_keys(plugin: CniPlugin) -> &'static [OwnedKey] {
    match plugin {
        CniPlugin::Calico => CALICO,
        CniPlugin::Cilium => CILIUM,
        CniPlugin::Flannel => FLANNEL,
        CniPlugin::Builtin | CniPlugin::Kindnet | CniPlugin::None => &[],
    }
}

/// The keys (dotted paths) clusterctl sets in `plugin`'s values only when the user's values do not:
/// a user's value is honoured (flannel's `Backend.Type`, `vxlan` by default).
pub fn defaulted_keys(plugin: CniPlugin) -> &'static [&'static str] {
    match plugin {
        CniPlugin::Flannel => &["Backend.Type"],
        _ => &[],
    }
}
