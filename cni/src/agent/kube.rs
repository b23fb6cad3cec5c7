//! Peers from Kubernetes Node objects (not built yet: conversion only).

use super::peers::Peer;
use ipnet::Ipv4Net;
use std::net::Ipv4Addr;

/// Converts a Node object (API JSON) into a peer: `metadata.name`, the `InternalIP` from
/// `status.addresses`, `spec.podCIDR`. Returns `None` when any is missing or not IPv4.
pub fn node_to_peer(node: &serde_json::Value) -> Option<Peer> {
    let name = node.pointer("/metadata/name")?.as_str()?.to_string();
    let pod_cidr: Ipv4Net = node.pointer("/spec/podCIDR")?.as_str()?.parse().ok()?;
    let node_ip: Ipv4Addr = node
        .pointer("/status/addresses")?
        .as_array()?
        .iter()
        .filter(|a| a.get("type").and_then(|t| t.as_str()) == Some("InternalIP"))
        .find_map(|a| a.get("address")?.as_str()?.parse().ok())?;
    Some(Peer {
        name,
        node_ip,
        pod_cidr: pod_cidr.trunc(),
    })
}

/// Peers from the Kubernetes API (placeholder until the watch lands).
pub struct KubeNodes;

impl KubeNodes {
    /// Errors: always, for now.
    pub fn new(_kubeconfig: Option<std::path::PathBuf>) -> Result<Self, String> {
        Err("peers from Kubernetes are not built yet; use --peers-file".into())
    }
}

impl super::PeerSource for KubeNodes {
    fn peers(&mut self) -> Result<Vec<Peer>, String> {
        Err("not built".into())
    }
    fn wait(&mut self, _timeout: std::time::Duration) {}
}
