//! Values both kubeadm APIs share: controller-manager flags, taints, the node's kubelet flags (`node-ip`,
//! `node-labels`), and the kubeadm default timeouts written out explicitly.

use crate::ctx::Ctx;
use clusterctl_spec::model::Taint as SpecTaint;
use clusterctl_spec::ValidNode;
use serde::Serialize;
use std::collections::BTreeMap;

/// core/v1 Taint as kubeadm's `nodeRegistration.taints` carries it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Taint {
    /// Key.
    pub key: String,
    /// Value, omitted when empty.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// `NoSchedule` | `PreferNoSchedule` | `NoExecute`.
    pub effect: &'static str,
}

/// The node's taints: the file's when it gives `taints` (`taints: []`: none at all, which kubeadm
/// registers as no taint); none at all for a control plane of a cluster without workers, as kind
/// does, so that CoreDNS and the user's pods can be scheduled somewhere; otherwise `None` (kubeadm's
/// default: the `node-role.kubernetes.io/control-plane:NoSchedule` taint on control planes).
pub(crate) fn taints(cx: &Ctx, node: &ValidNode) -> Option<Vec<Taint>> {
    if node.taints_set || !node.taints.is_empty() {
        return Some(node.taints.iter().map(taint).collect());
    }
    (node.is_control_plane() && cx.c.workers().next().is_none()).then(Vec::new)
}

fn taint(t: &SpecTaint) -> Taint {
    Taint {
        key: t.key.clone(),
        value: t.value.clone().filter(|v| !v.is_empty()),
        effect: t.effect.as_str(),
    }
}

/// controller-manager flags: pod CIDR allocation from podSubnet at the node mask size.
pub(crate) fn controller_manager_args(cx: &Ctx) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    m.insert("allocate-node-cidrs".to_string(), "true".to_string());
    m.insert("cluster-cidr".to_string(), cx.c.pod_subnet().to_string());
    let flag = match cx.c.pod_subnet() {
        ipnet::IpNet::V4(_) => "node-cidr-mask-size-ipv4",
        ipnet::IpNet::V6(_) => "node-cidr-mask-size-ipv6",
    };
    m.insert(flag.to_string(), cx.c.node_cidr_mask_size().to_string());
    m
}

/// kubelet flags of one node (flag name without `--` → value), one entry per flag: `node-ip` when the
/// node has an address, `node-labels` (`k1=v1,k2=v2`, sorted by key) with the labels the kubelet may set
/// itself ([`super::node_labels`]) when there are any.
pub(crate) fn kubelet_args(node: &ValidNode) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    if let Some(a) = node.address {
        m.insert("node-ip".to_string(), a.to_string());
    }
    if let Some(l) = super::node_labels::node_labels_flag(&node.labels) {
        m.insert("node-labels".to_string(), l);
    }
    m
}

/// The advertise address of a control plane, when known.
pub(crate) fn advertise_address(node: &ValidNode) -> Option<String> {
    node.address.map(|a| a.to_string())
}

/// The apiserver's bind port: the endpoint's port (6443 unless the file says otherwise).
pub(crate) fn bind_port(cx: &Ctx) -> i32 {
    i32::from(cx.c.endpoint().port)
}

/// kubeadm's default control-plane wait (v1beta3 `timeoutForControlPlane`, v1beta4
/// `controlPlaneComponentHealthCheck`).
pub(crate) const CONTROL_PLANE_TIMEOUT: &str = "4m0s";
/// kubeadm's default discovery timeout.
pub(crate) const DISCOVERY_TIMEOUT: &str = "5m0s";

/// kubeadm v1beta4's `Timeouts`: `spec.kubeadm.timeouts` where the file sets one, else kubeadm's
/// default (cmd/kubeadm/app/constants/constants.go), in the file's field order.
pub(crate) fn timeouts(cx: &Ctx) -> Vec<(&'static str, String)> {
    let defaults = [
        CONTROL_PLANE_TIMEOUT,
        "4m0s",
        "1m0s",
        "2m0s",
        "5m0s",
        DISCOVERY_TIMEOUT,
        "5m0s",
    ];
    cx.c.spec()
        .kubeadm
        .timeouts
        .fields()
        .iter()
        .zip(defaults)
        .map(|((name, v), d)| {
            (
                *name,
                v.as_ref().map_or_else(|| d.to_string(), Clone::clone),
            )
        })
        .collect()
}

/// The timeout of `field` (a `spec.kubeadm.timeouts` name) as [`timeouts`] gives it.
pub(crate) fn timeout(cx: &Ctx, field: &str) -> String {
    timeouts(cx)
        .into_iter()
        .find(|(n, _)| *n == field)
        .map(|(_, v)| v)
        .unwrap_or_default()
}
